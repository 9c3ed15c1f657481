# shellcheck shell=bash
# bash completion for rfpipe(1); installed as
# share/bash-completion/completions/rfpipe by make install and the .deb.
_rfpipe()
{
	local cur prev opts
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	opts="-h -j -q -v --batch --budget --check --config --deadline --help
	    --jobs --lease --max-attempts --progress --queue --quiet
	    --retry-dead --run-dir --seed --state --verbose --version"
	COMPREPLY=()
	# rfpipe report RUN_DIR [--html FILE] [--metrics FILE]
	if [ "${COMP_WORDS[1]:-}" = report ] && [ "$COMP_CWORD" -gt 1 ]; then
		case $prev in
		--html|--metrics)
			mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
		*)
			if [[ $cur == -* ]]; then
				mapfile -t COMPREPLY < <(compgen -W \
				    "--html --metrics --help" -- "$cur")
			else
				mapfile -t COMPREPLY < <(compgen -d -- "$cur")
			fi ;;
		esac
		return
	fi
	case $prev in
	--config)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return ;;
	--run-dir)
		mapfile -t COMPREPLY < <(compgen -d -- "$cur")
		return ;;
	--progress)
		mapfile -t COMPREPLY < <(compgen -W "auto plain none" -- "$cur")
		return ;;
	--deadline)
		mapfile -t COMPREPLY < <(compgen -W "06:00 07:00 08:00" -- "$cur")
		return ;;
	-j|--jobs|--batch|--budget|--lease|--max-attempts|--queue|--seed|--state)
		return ;;
	esac
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
	else
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		# A manifest named report is ./report: offer the word once.
		[ "$COMP_CWORD" -ne 1 ] || [[ report != "$cur"* ]] ||
		    [ -e report ] || COMPREPLY+=(report)
	fi
}
complete -F _rfpipe rfpipe
