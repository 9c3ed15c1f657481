# bench/lib/common.sh: what every part of bench/run.sh uses: messages,
# arithmetic on decimals, timing a command, the TSVs, the table of tools
# and the templates.  Sourced by bench/run.sh; defines functions only.
# Its globals are set by bench/run.sh (checked whole with it).
# shellcheck shell=bash disable=SC2034,SC2154

say() { printf '[%s] %s\n' "$prog" "$*" >&2; }
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }

now() { date +%s.%N; }
# a - b, with 3 decimals
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
# true when a <= b (le), a < b (lt)
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
fmt() { awk -v a="$1" -v f="$2" 'BEGIN { printf f, a }'; }
pf() { if "$@"; then echo PASS; else echo FAIL; fi; }

# count_lines FILE: its lines, 0 when there is no such file.
count_lines() {
	if [ -f "$1" ]; then
		grep -c '' "$1" || true
	else
		echo 0
	fi
}
# nlines: the lines on stdin.
nlines() { awk 'END { print NR }'; }
# count_matches STRING FILE: the lines of FILE holding STRING; nothing
# when there is no such file.
count_matches() { grep -c -F -e "$1" "$2" 2>/dev/null || true; }

# 1000000 as 1M, 10000 as 10k.
human() {
	awk -v n="$1" 'BEGIN {
		if (n % 1000000 == 0) printf "%dM", n / 1000000
		else if (n % 1000 == 0) printf "%dk", n / 1000
		else printf "%d", n }'
}

# selected NAME: true when --only names it (a shell pattern), or when there
# is no --only and NAME is a default scenario (all but the limiter matrix).
selected() {
	local pat IFS=,
	if [ -z "$only" ]; then
		[ "$1" != limiters ]
		return
	fi
	for pat in $only; do
		# shellcheck disable=SC2254  # the pattern is meant to glob
		case $1 in $pat) return 0 ;; esac
	done
	return 1
}

# From a /usr/bin/time -v file: user+sys seconds, and max RSS in KiB.
time_cpu() {
	awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 }
	    END { printf "%.2f", u + s }' "$1" 2>/dev/null || echo 0
}
time_rss() {
	awk -F': ' '/Maximum resident set size/ { print $2 + 0 }' "$1" \
	    2>/dev/null || echo 0
}

# run_timed DIR TIMEOUT STDIN CMD...: run CMD in DIR under /usr/bin/time
# and timeout; sets elapsed and rc.  Output: DIR/stdout, DIR/stderr.
# Every tool run is started in the background and waited for: the wait
# builtin returns on a Ctrl-C (its trap exits, and stop_runs ends the
# run), where a foreground one was waited out first.
run_timed() {
	local d=$1 tmo=$2 in=$3 t0
	shift 3
	t0=$(now)
	rc=0
	(cd "$d" && /usr/bin/time -v -o "$d/time.txt" \
	    timeout -k 5 "$tmo" "$@" <"$in" >"$d/stdout" 2>"$d/stderr") &
	wait "$!" || rc=$?
	elapsed=$(sub "$(now)" "$t0")
}

# traps: what a Ctrl-C or a TERM does, in the bench and in each function
# that waits for a run inside $(...): stop the runs it started, and exit.
# A subshell starts with the signals' defaults, and bash waiting on a
# child that did not die of the SIGINT (a run under timeout, in a group of
# its own, never gets it) waits on, and the bench's own trap with it.
traps() {
	trap 'stop_runs; exit 130' INT
	trap 'stop_runs; exit 143' TERM
}

# stop_runs: end every tool run this shell (the bench, or a subshell of
# it) started that is still going when it stops (a Ctrl-C, a failure).  Each runs under timeout, which puts it in a process
# group of its own that the terminal's signal does not reach; a TERM to
# timeout ends its group, and its -k 5 a group that lingers.  Waits for
# them, at most 8 s.
stop_runs() {
	local p all='' kids=$BASHPID tmos='' i
	while [ -n "$kids" ]; do
		all="$all $kids"
		kids=$(for p in $kids; do pgrep -P "$p"; done | tr '\n' ' ')
		kids=${kids%% }
	done
	for p in $all; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" != timeout ] ||
			tmos="$tmos $p"
	done
	[ -n "$tmos" ] || return 0
	say "stopping the tool runs still going"
	# shellcheck disable=SC2086  # a list of pids
	kill -TERM $tmos 2>/dev/null || return 0
	for i in $(seq 40); do
		# shellcheck disable=SC2086
		kill -0 $tmos 2>/dev/null || return 0
		sleep 0.2
	done
}

# exit_word STATUS [TIMEFILE]: the exit of a run_timed command: its status,
# "timeout" when the bench's timeout stopped it, "killed" when something
# outside killed /usr/bin/time (TIMEFILE has no exit status).
exit_word() {
	if [ -n "${2:-}" ] && ! grep -q 'Exit status' "$2" 2>/dev/null; then
		echo killed
		return
	fi
	case $1 in
	124|137) echo timeout ;;
	*) echo "$1" ;;
	esac
}

# tsv_row FILE FIELD...: one row of a TSV.
tsv_row() {
	local f=$1 IFS=$'\t'
	shift
	printf '%s\n' "$*" >>"$f"
}

# get SCEN TOOL FIELD: a field of the main TSV; has SCEN TOOL: it has a row.
get() {
	awk -F'\t' -v s="$1" -v t="$2" -v f="$3" '
	    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
	    $1 == s && $2 == t { print $c[f]; exit }' "$tsv"
}
has() { [ -n "$(get "$1" "$2" tool)" ]; }

# tools_with TAG...: the ids of bench/tools.tsv tagged with any TAG, in its
# order; those tagged full only in a full run.
tools_with() {
	awk -F'\t' -v tags="$*" -v quick="$quick" '
	    BEGIN { n = split(tags, w, " "); for (i = 1; i <= n; i++) want[w[i]] = 1 }
	    /^#/ { next }
	    {
		k = split($2, t, ","); hit = 0; full = 0
		for (i = 1; i <= k; i++) {
			if (t[i] in want) hit = 1
			if (t[i] == "full") full = 1
		}
		if (hit && !(full && quick != "")) {
			printf "%s%s", sep, $1
			sep = " "
		}
	    }
	    END { print "" }' "$here/tools.tsv"
}

# tool_names [lim]: "ID<TAB>NAME" for each tool of bench/tools.tsv, NAME
# its name in the main table (lim: in the limiter table).
tool_names() {
	awk -F'\t' -v OFS='\t' -v lim="${1:-}" '
	    !/^#/ { print $1, (lim != "" && $4 != "-") ? $4 : $3 }' \
	    "$here/tools.tsv"
}

# tool_name ID [lim]: the name of one tool, or ID when the table has none.
tool_name() {
	tool_names "${2:-}" | awk -F'\t' -v id="$1" '
	    $1 == id { print $2; found = 1; exit }
	    END { if (!found) print id }'
}

# render FILE KEY=VALUE...: FILE with each @KEY@ replaced by VALUE; a
# @KEY@ left over is an error.
render() {
	local f=$1 kv v out args=()
	shift
	for kv in "$@"; do
		v=${kv#*=}
		v=${v//\\/\\\\}
		v=${v//&/\\&}
		v=${v//|/\\|}
		args+=(-e "s|@${kv%%=*}@|$v|g")
	done
	out=$(sed "${args[@]}" "$f") || die "cannot read $f"
	if printf '%s\n' "$out" | grep -q '@[A-Z_][A-Z_]*@'; then
		die "$f: $(printf '%s\n' "$out" | grep -o '@[A-Z_][A-Z_]*@' |
		    head -n 1) not filled in"
	fi
	printf '%s\n' "$out"
}
