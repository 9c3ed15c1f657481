#!/bin/sh
# rfpipe: run a batch through rfp-fetch | rfp-classify | rfp-backoff | rfp-sink,
# with retries fed back to rfp-fetch through a FIFO in the run directory;
# rfp-parse after rfp-fetch when the configuration names a parser.
# With --queue, the records come from a queue in PostgreSQL that several
# hosts share (rfp-queue pull) and each result is filed there as well.
#
# Exit status: 0 every document succeeded; 3 finished with dead letters;
# 4 the deadline cut some documents; 5 ids were left to another pipeline
# still running on the run directory; 2 usage or configuration error;
# 1 internal failure (a stage failed or the counts did not reconcile);
# 129, 130, 143 stopped by SIGHUP, SIGINT or SIGTERM (the rest pending).
set -u

prog=rfpipe
# make fills in the version (bin/rfpipe, the copy installed); this copy, run
# from the source tree, reads it from debian/changelog when asked.
version=@VERSION@
usage="usage: rfpipe [-hqv] [-j N] [--budget N|Nx] [--check] [--config FILE]
              [--deadline WHEN] [--max-attempts N] [--progress MODE]
              [--retry-dead] [--run-dir DIR] [--seed N] [--state URL]
              [--version] MANIFEST
       rfpipe --queue URL [--batch N] [--lease S] [option ...] [MANIFEST]
       rfpipe report [option ...] RUN_DIR
"

die() {
	code=$1
	shift
	printf '%s: %s\n' "$prog" "$*" >&2
	exit "$code"
}

bad_usage() {
	printf '%s: %s\n' "$prog" "$*" >&2
	printf '%s' "$usage" >&2
	exit 2
}

# Installed, or as the build's bin/rfpipe, the stages beside the script
# are its own and come first: /usr/bin/rfpipe runs /usr/bin/rfp-*, whatever
# PATH a cron job gives it.  pipeline.sh in a source tree takes the stages
# in PATH, else the tree's bin/.
# Through a symlink (/usr/local/bin/rfpipe -> /opt/rfp/bin/rfpipe) too.
self=$(readlink -f -- "$0" 2>/dev/null || printf '%s\n' "$0")
case $self in
*/*) here=${self%/*} ;;
*) here=. ;;
esac
here=$(CDPATH='' cd -- "${here:-/}" && pwd)
if [ -x "$here/rfp-fetch" ]; then
	PATH="$here:$PATH"
	export PATH
elif ! command -v rfp-fetch >/dev/null 2>&1 && [ -x "$here/bin/rfp-fetch" ]; then
	PATH="$here/bin:$PATH"
	export PATH
fi

# rfpipe report: rfp-report(1), which reads a run directory and writes
# nothing there.  (A manifest named "report" is ./report.)
if [ "${1:-}" = report ]; then
	shift
	command -v rfp-report >/dev/null 2>&1 ||
	    die 1 "rfp-report not found in PATH"
	exec rfp-report "$@"
fi

# ARG, quoted for a shell when it needs to be.  A control character but
# the newline (an ESC in a file name) is put as '"$(printf '\033')"', not
# as itself: printed, it would drive the terminal, and this reads back
# the same in any POSIX shell (dash has no $'...').  So is a C1 control
# in UTF-8 (U+009B, CSI, is \302\233), which a terminal takes as ESC [.
# Byte by byte, whatever the locale (a subshell, for LC_ALL): bash in a
# UTF-8 locale would take the two bytes of U+009B for one character, and
# printf '%o' "'c" give its code point, 233, one byte where there were two.
quote() (
	LC_ALL=C
	export LC_ALL
	case $1 in
	''|*[!A-Za-z0-9_./:=@%+,-]*) ;;
	*)	printf '%s' "$1"; exit 0 ;;
	esac
	q_in=$(printf '%sx' "$1" | sed "s/'/'\\\\''/g")
	q_in=${q_in%x}
	q_out=
	q_c2=$(printf '\302')
	q_c1=$(printf '\200\201\202\203\204\205\206\207\210\211\212\213\214\215\216\217\220\221\222\223\224\225\226\227\230\231\232\233\234\235\236\237')
	case $q_in in
	*[[:cntrl:]]*|*"$q_c2"[$q_c1]*)
		while [ -n "$q_in" ]; do
			q_rest=${q_in#?}
			q_c=${q_in%"$q_rest"}
			q_in=$q_rest
			case $q_c:$q_in in
			"$q_c2":[$q_c1]*)
				q_rest=${q_in#?}
				q_out=$q_out\'\"\$\(printf\ \'\\302\\$(printf '%03o' "'${q_in%"$q_rest"}")\'\)\"\'
				q_in=$q_rest ;;
			"$nl":*|[![:cntrl:]]:*) q_out=$q_out$q_c ;;
			*) q_out=$q_out\'\"\$\(printf\ \'\\$(printf '%03o' "'$q_c")\'\)\"\' ;;
			esac
		done ;;
	*)	q_out=$q_in ;;
	esac
	printf "'%s'" "$q_out"
)
nl='
'
# q_word ARG: ARG as quote gives it, in q; a word with nothing to quote
# is itself, with no subshell (one a word was a tenth of the time a small
# run took to start).  The characters are spelled out: a range is the
# locale's, and [A-Z] may hold more than 26 letters.
q_safe=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-
q_word() {
	case $1 in
	''|*[!$q_safe]*) q=$(quote "$1") ;;
	*) q=$1 ;;
	esac
}
# A shell without job control starts "&" jobs with SIGINT ignored, and a
# signal ignored on entry cannot be trapped: start again with SIGINT and
# SIGTERM at their defaults, so that either, sent to this PID, stops the
# run as Ctrl-C at a terminal does.  (Linux: SigIgn, bits 2 and 15.)
# SIGHUP ignored on entry is left so: nohup(1) asked for a run that a
# hang-up does not stop, and the stages inherit it.
if [ -z "${RFPIPE_SIGNALS_RESET:-}" ] && [ -r /proc/$$/status ]; then
	ign=
	while read -r k v; do
		[ "$k" = SigIgn: ] && ign=$v && break
	done </proc/$$/status
	if [ -n "$ign" ] && [ $((0x$ign & 0x4002)) -ne 0 ] &&
	    env --default-signal=INT true 2>/dev/null; then
		RFPIPE_SIGNALS_RESET=1 exec env --default-signal=INT,TERM \
		    /bin/sh "$0" "$@"
	fi
fi

# dl_word PREFIX: a deadline's value is next in the command line.  A later
# one replaces it, as in the parser: the earlier, now moot, is left out
# with its option, so that the line holds one deadline ("drop --deadline"
# drops it).
dl_word() {
	if [ -n "$cmd_dl" ]; then
		[ "$cmd_dl" = : ] && cmdline=${cmdline% --deadline}
		cmdline="$cmdline$cmd_rest"
		cmd_rest=
	fi
	cmd_dl=:$1 cmd_dl_val=$a
}
# The command line as typed: what an interrupted run says to resume with.
# Its deadline as typed would be read again at the resume: +2h two hours
# from then, 06:00 tomorrow's once it is past.  The value of the last
# --deadline is put in as the time it resolved to (at, below), so that the
# resume ends when the run would have.  cmdline is the line up to that
# value, cmd_dl the value's option prefix (":" then "" or "--deadline="),
# cmd_rest the words after it.  The options end where the parser's do: at
# "--" or the first other word.
at=
cmd_cfg_dl=
q_word "$0"
cmdline=$q
cmd_dl=
cmd_rest=
cmd_want=
cmd_opts=1
cmd_secret=
for a in "$@"; do
	# A database URL's password is not printed: the resume line says the
	# URL as the stages do (rfp-queue redact), and says so.  A URL that
	# cannot be read so is refused below; until then it is not shown.
	case $cmd_want:$a in
	--queue:*|--state:*|:--queue=*|:--state=*)
		r=${a#--queue=}
		r=${r#--state=}
		r=$(rfp-queue --state="$r" redact 2>/dev/null) || r='***'
		r=${a%"${a#--queue=}"}${a%"${a#--state=}"}$r
		[ "$r" = "$a" ] || cmd_secret=1
		a=$r ;;
	esac
	q_word "$a"
	w=$q
	if [ -n "$cmd_opts" ] && [ -z "$cmd_want" ]; then
		case $a in
		--deadline=*) w=; dl_word --deadline= ;;
		--deadline|-j|--jobs|--batch|--budget|--config|--lease|\
		--max-attempts|--progress|--queue|--run-dir|--seed|--state)
			cmd_want=$a ;;
		--) cmd_opts= ;;
		-*) ;;
		*) cmd_opts= ;;
		esac
	elif [ -n "$cmd_want" ]; then
		case $cmd_want in
		--deadline) w=; dl_word '' ;;
		esac
		cmd_want=
	fi
	[ -z "$w" ] && continue
	if [ -n "$cmd_dl" ]; then
		cmd_rest="$cmd_rest $w"
	else
		cmdline="$cmdline $w"
	fi
done

print_version() {
	case $version in
	@*) version=$(head -n 1 "$here/debian/changelog" 2>/dev/null |
	    tr -d '()' | cut -d ' ' -f 2) ;;
	esac
	printf '%s %s\n' "$prog" "${version:-unknown}"
}

jobs=
jobs_name=
check=
batch=
budget=
config=
deadline=
max_attempts=
lease=
progress=auto
queue=
quiet=
retry_dead=
run_dir=rfpipe-run
seed=
state=
verbose=

# An empty value is refused as a missing one: --config "$CONF" with CONF
# unset in a cron line ran every portal with no limits at all.
need_arg() {
	[ "$2" -ge 2 ] || bad_usage "option $1: needs a value"
	[ -n "$3" ] || bad_usage "option $1: needs a value, not an empty one"
}
nonempty() {
	[ -n "${1#*=}" ] || bad_usage "option ${1%%=*}: needs a value, not an empty one"
}

while [ $# -gt 0 ]; do
	case $1 in
	-h|--help) printf '%s' "$usage"; exit 0 ;;
	--version) print_version; exit 0 ;;
	-q|--quiet) quiet=-q ;;
	-v|--verbose) verbose=-v ;;
	-j|--jobs) need_arg "$1" $# "${2-}"; jobs_name=$1; jobs=$2; shift ;;
	-j*) jobs_name=-j; jobs=${1#-j} ;;
	--jobs=*) nonempty "$1"; jobs_name=--jobs; jobs=${1#*=} ;;
	--batch) need_arg "$1" $# "${2-}"; batch=$2; shift ;;
	--batch=*) nonempty "$1"; batch=${1#*=} ;;
	--budget) need_arg "$1" $# "${2-}"; budget=$2; shift ;;
	--budget=*) nonempty "$1"; budget=${1#*=} ;;
	--check) check=1 ;;
	--config) need_arg "$1" $# "${2-}"; config=$2; shift ;;
	--config=*) nonempty "$1"; config=${1#*=} ;;
	--deadline) need_arg "$1" $# "${2-}"; deadline=$2; shift ;;
	--deadline=*) nonempty "$1"; deadline=${1#*=} ;;
	--lease) need_arg "$1" $# "${2-}"; lease=$2; shift ;;
	--lease=*) nonempty "$1"; lease=${1#*=} ;;
	--max-attempts) need_arg "$1" $# "${2-}"; max_attempts=$2; shift ;;
	--max-attempts=*) nonempty "$1"; max_attempts=${1#*=} ;;
	--progress) need_arg "$1" $# "${2-}"; progress=$2; shift ;;
	--progress=*) nonempty "$1"; progress=${1#*=} ;;
	--queue) need_arg "$1" $# "${2-}"; queue=$2; shift ;;
	--queue=*) nonempty "$1"; queue=${1#*=} ;;
	--retry-dead) retry_dead=--retry-dead ;;
	--run-dir) need_arg "$1" $# "${2-}"; run_dir=$2; shift ;;
	--run-dir=*) nonempty "$1"; run_dir=${1#*=} ;;
	--seed) need_arg "$1" $# "${2-}"; seed=$2; shift ;;
	--seed=*) nonempty "$1"; seed=${1#*=} ;;
	--state) need_arg "$1" $# "${2-}"; state=$2; shift ;;
	--state=*) nonempty "$1"; state=${1#*=} ;;
	--) shift; break ;;
	# Its name: a value given with = may be a password.
	-*) bad_usage "unknown option \"${1%%=*}\"" ;;
	*) break ;;
	esac
	shift
done
# Empty, "$run_dir/state" is /state: an unset variable in a cron line made
# state/, docs/ and logs/ at the root.
[ -n "$run_dir" ] || bad_usage "option --run-dir: needs a value, not an empty one"
if [ -n "$queue" ]; then
	[ $# -le 1 ] || bad_usage "expected at most one MANIFEST"
	# The queue's database holds the shared state too.
	state=${state:-$queue}
else
	[ $# -eq 1 ] || bad_usage "expected one MANIFEST"
	[ -z "$batch" ] || bad_usage "option --batch: needs --queue"
	[ -z "$lease" ] || bad_usage "option --lease: needs --queue"
fi
# rfpipe "$MANIFEST" with MANIFEST unset made the run directory, then
# failed in three stages at once.
[ $# -eq 0 ] || [ -n "$1" ] || bad_usage "MANIFEST: an empty name, not a file"
manifest=${1:-}
if [ -n "$manifest" ] && { [ ! -r "$manifest" ] || [ -d "$manifest" ]; }; then
	die 2 "open $manifest: not a readable file"
fi
# /dev/stdin (or /dev/fd/N) on a file names the file itself: the stages
# run in the background, where standard input is /dev/null.
case $manifest in
/dev/*|/proc/*)
	[ -f "$manifest" ] && real=$(readlink -f -- "$manifest") &&
	    [ -f "$real" ] && manifest=$real ;;
esac
# It is read twice, counted before the run and then run: a pipe (/dev/stdin,
# <(...)) would be empty the second time and the run would admit nothing,
# and a named pipe whose writer is gone would block the run's open for good.
# test -f opens nothing, so a named pipe cannot hang it.
if [ -n "$manifest" ] && [ ! -f "$manifest" ]; then
	die 2 "$manifest: MANIFEST must be a regular file (a pipe is read once: save it to a file first)"
fi
case $progress in
auto|plain|none) ;;
*) bad_usage "option --progress: expected auto, plain or none" ;;
esac
# Named as typed: -j is not rfp-fetch's --jobs.
case $jobs_name:$jobs in
:) ;;
*:|*:*[!0-9]*|*:0*|*:?????*)
	bad_usage "option $jobs_name: expected an integer from 1 to 4096, got \"$jobs\"" ;;
*)	[ "$jobs" -le 4096 ] ||
	bad_usage "option $jobs_name: expected an integer from 1 to 4096, got \"$jobs\"" ;;
esac
[ -n "$check" ] && [ -z "$manifest" ] && bad_usage "option --check: needs a MANIFEST"
# As the stages check them, but before the run directory is made.
case $queue in
''|postgresql://*|postgres://*) ;;
*) bad_usage "option --queue: expected a postgresql:// URL" ;;
esac
case $state in
''|postgresql://*|postgres://*) ;;
*) bad_usage "option --state: expected a postgresql:// URL" ;;
esac
# -q asks for silence: no summary table and no progress line.
[ -n "$quiet" ] && progress=none

for s in rfp-fetch rfp-classify rfp-backoff rfp-sink ${queue:+rfp-queue}; do
	command -v "$s" >/dev/null 2>&1 ||
		die 1 "$s not found in PATH (run make, or make install)"
done

# Options shared by the stages, as arrays of words (set -- is the only array).
seed_opt=${seed:+--seed=$seed}
jobs_opt=${jobs:+--jobs=$jobs}
ma_opt=${max_attempts:+--max-attempts=$max_attempts}
budget_opt=${budget:+--budget=$budget}
# A budget given to a re-run of dead letters replaces what is left of the
# run directory's (spent by the night that dead-lettered them).
renew_opt=
[ -n "$retry_dead" ] && [ -n "$budget" ] && renew_opt=--renew-budget
batch_opt=${batch:+--batch=$batch}
lease_opt=${lease:+--lease=$lease}

# Catch a bad config, budget, seed or attempt count before anything starts.
# shellcheck disable=SC2086
rfp-backoff ${config:+"--config=$config"} $seed_opt $ma_opt $budget_opt </dev/null >/dev/null ||
	exit 2
# A database URL the stages would refuse (one libpq would misread), with
# the stages' own words, before anything is made: --help comes after it.
# The URL's fault is said under the option typed.
# shellcheck disable=SC2086
if [ -n "$queue" ]; then
	rfp-queue $batch_opt $lease_opt --help >/dev/null || exit 2
	err=$(rfp-queue --state="$queue" --help 2>&1 >/dev/null) ||
		die 2 "option --queue: ${err#*option --state: }"
fi
if [ -n "$state" ] && [ "$state" != "$queue" ]; then
	err=$(rfp-backoff --state="$state" --help 2>&1 >/dev/null) ||
		die 2 "option --state: ${err#*option --state: }"
fi
# A parse stage only when the configuration names a parser (rfp-parse
# also stops the run here, with 2, when one is not found).
parse=
if [ -n "$config" ]; then
	command -v rfp-parse >/dev/null 2>&1 ||
		die 1 "rfp-parse not found in PATH (run make, or make install)"
	parse=$(rfp-parse --config="$config" --list) || exit 2
fi
dl_opt=
if [ -n "$deadline" ]; then
	at=$(rfp-backoff --resolve-deadline "$deadline" 2>/dev/null) ||
		die 2 "option --deadline: cannot read \"$deadline\" as a time"
	# A time already past would cut every document: a mistake.  (A
	# relative one, "+0s", is not: it is meant.)  One in seconds is what
	# a resume line says: the night it resumes is over.
	secs=${at#@}
	case $deadline in
	+*) ;;
	@*) [ "${secs%.*}" -ge "$(date +%s)" ] ||
		die 2 "option --deadline: \"$deadline\" ($(date -d "@${secs%.*}" '+%F %T' 2>/dev/null)) is in the past: the run this resumes ran out of time; drop --deadline to finish it, or give a later one" ;;
	*) [ "${secs%.*}" -ge "$(date +%s)" ] ||
		die 2 "option --deadline: \"$deadline\" is in the past" ;;
	esac
	dl_opt=--deadline=$at
fi

# A signal before the stages start (the count below reads the whole
# manifest: seconds for a large one): said, not a silent exit.
# shellcheck disable=SC2317  # called by the traps below
early_stop() {
	printf '%s: interrupted by SIG%s before the run started: nothing was sent\n' \
	    "$prog" "$1" >&2
	exit "$2"
}
trap 'early_stop INT 130' INT
trap 'early_stop TERM 143' TERM
trap 'early_stop HUP 129' HUP

# The manifest and the config together: every line, every endpoint the
# config names, the deadline.  --check prints it; a run stops on a config
# none of whose endpoints any record has, or a deadline past, and warns of
# an endpoint tonight's records do not reach (a site's config names every
# portal).  Bad lines are the run's to file.  The same reading counts the
# manifest's records as rfp-fetch admits them (its "manifest: N lines"),
# bad ones included: the count the budget and the progress line are given
# before the run, and that rfp-fetch's --report gives rfp-sink after it.
# The config's deadline, with no --deadline, is resolved once too, from
# what rfp-fetch --check printed: each stage reading "+2h" for itself
# would end at its own time, and a resume two hours later.  It goes to the
# stages, and to the resume line, as the time it resolved to.
cfg_deadline() {
	if [ -z "$deadline" ] && [ -n "$cfg_dl" ]; then
		at=$(rfp-backoff --resolve-deadline "$cfg_dl" 2>/dev/null) ||
			die 1 "rfp-fetch --check: cannot read deadline \"$cfg_dl\""
		dl_opt=--deadline=$at
		cmd_cfg_dl=$at
	fi
}

# checked_lines: read what rfp-fetch --check printed ($checked): admitted
# from "manifest: N lines, ...", filed_before from "filed: N of ...",
# cfg_dl from "deadline: ...".  One sed for the three (a sed each was a
# fork apiece, 10 ms of a run's start); the shell's read alone over all
# of it, a byte a call, took 15 s where a manifest's every line was bad.
checked_lines() {
	while IFS= read -r line; do
		case $line in
		'admitted '*) admitted=${line#admitted } ;;
		'filed '*) filed_before=${line#filed } ;;
		'deadline '*) cfg_dl=${line#deadline } ;;
		esac
	done <<EOF
$(printf '%s\n' "$checked" | sed -n \
    -e 's/^manifest: \([0-9]*\) lines, .*/admitted \1/p' \
    -e 's/^filed: \([0-9]*\) of .*/filed \1/p' -e 's/^deadline: /deadline /p')
EOF
}

admitted=
filed_before=
# A run directory that has filed some of the manifest's lines: --check
# says how many, and the progress line counts what is left (--total), not
# the whole manifest.
filed_from=
[ -n "$manifest" ] && [ -z "$queue" ] && [ -d "$run_dir/state" ] &&
	filed_from=$run_dir
# shellcheck disable=SC2086
if [ -n "$manifest" ] && [ -n "$check" ]; then
	rfp-fetch --check ${config:+"--config=$config"} $jobs_opt \
	    ${deadline:+"--deadline=$deadline"} \
	    ${filed_from:+"--run-dir=$filed_from" --resume $retry_dead} <"$manifest"
	case $? in
	0) exit 0 ;;
	*) exit 2 ;;
	esac
fi
# With --queue and no manifest, the config is checked all the same, and its
# deadline resolved, from a check of no lines: that none reaches one of its
# endpoints is then no news (no record is read yet), a deadline past is.
unmatched="matches no record; the records' endpoints are"
if [ -n "$manifest" ] || [ -n "$config" ]; then
	# shellcheck disable=SC2086
	checked=$(rfp-fetch --check ${config:+"--config=$config"} $jobs_opt \
	    ${deadline:+"--deadline=$deadline"} \
	    ${filed_from:+"--run-dir=$filed_from" --resume $retry_dead} \
	    <"${manifest:-/dev/null}" 2>&1)
	if [ $? -eq 2 ] && [ -n "$config" ]; then
		problems=$(printf '%s\n' "$checked" | grep '^rfp-fetch: ' |
		    grep -v '^rfp-fetch: line [0-9]*: ')
		[ -n "$manifest" ] ||
			problems=$(printf '%s\n' "$problems" | grep -v "$unmatched")
		if [ -n "$problems" ]; then
			printf '%s\n' "$problems" >&2
			printf '%s\n' "$problems" | grep -qv "$unmatched" && exit 2
		fi
	fi
	cfg_dl=
	checked_lines
	if [ -n "$manifest" ] && [ -z "$admitted" ]; then
		die 1 "rfp-fetch --check: no count of $manifest"
	fi
	cfg_deadline
fi

umask 077
# A directory named by a slip (--run-dir ~, --run-dir . in a project) is
# not filled with a run's files: one with no state/, which this script
# makes in every run directory (below), and holding anything but a run's
# own names (lib/state/rundir.c; docs/ alone may be a volume mounted for
# the bodies; state/ a run starting beside, made since it was looked for)
# and lost+found (a file system mounted for the runs).
foreign() {
	for f in "$1"/* "$1"/.*; do
		case ${f##*/} in
		.|..|state|docs|logs|results.ndjson|dead.ndjson|summary.json|lost+found)
			continue ;;
		esac
		# A pattern that matched nothing is itself, and not there.
		{ [ -e "$f" ] || [ -L "$f" ]; } && return 0
	done
	return 1
}
if [ -d "$run_dir" ] && ! [ -d "$run_dir/state" ] && foreign "$run_dir"; then
	die 2 "run directory $run_dir: holds other files and no state/: name a new or empty directory, or mkdir -- \"$run_dir/state\" if it is one"
fi
# An existing run directory is accepted only when ours and writable by no
# one else (rfpipe(7)): the stages' own rule, before anything is made in it.
if [ -e "$run_dir" ] || [ -L "$run_dir" ]; then
	rfp-backoff --run-dir="$run_dir" </dev/null >/dev/null || exit 2
fi
# The run directory's names, the only ones this script spells: the stages
# make and open the rest through lib/state/rundir.c, which lays it out (see
# doc/design.md, "The run directory").  These files are the driver's own.
state_dir=$run_dir/state
fifo=$state_dir/retry.$$.fifo
report=$state_dir/fetch.$$.json
status=$state_dir/status.$$
fetch_pid=$state_dir/fetch.$$.pid
fetch_ended=$state_dir/fetch.$$.ended
parse_pid=$state_dir/parse.$$.pid
if ! err=$(mkdir -p -- "$state_dir" "$run_dir/docs" "$run_dir/logs" 2>&1); then
	# mkdir says it once per directory: the first is the cause.
	err=$(printf '%s\n' "$err" | head -n 1)
	die 2 "mkdir $run_dir: ${err##*: }"
fi
# A parser's room in it, found wrong now rather than once documents are
# on their way (rfp-parse checks it as it would at its start).
if [ -n "$parse" ]; then
	rfp-parse --config="$config" --run-dir="$run_dir" --list >/dev/null ||
		exit 2
fi
# The pipeline's name in state/claims.ndjson: rfp-fetch and rfp-sink both
# hold it, so the ids it claimed stay its while any of them still runs.
claims_owner=$$.$(date +%s)
# Left by an earlier run under this process id, if any (an rm for each
# run would be a fork for nothing).
for f in "$fifo" "$report" "$fetch_pid" "$fetch_ended" "$fetch_ended.w" \
    "$parse_pid"; do
	if [ -e "$f" ] || [ -L "$f" ]; then
		rm -f "$f"
	fi
done
true >"$status" || die 1 "write $status: failed"
mkfifo -m 600 "$fifo" || die 1 "mkfifo $fifo: failed"
# rfp-fetch holds the FIFO's read end and rfp-sink its write end, and no one
# else: when rfp-sink ends, however it ends, rfp-fetch sees EOF and stops.
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	rm -f "$fifo" "$status" "$fetch_pid" "$fetch_ended" \
	    "$fetch_ended.w" "$parse_pid"
}
trap cleanup EXIT

if [ -n "$queue" ]; then
	# Load once (loading it again adds nothing); count what all hosts share.
	if [ -n "$manifest" ]; then
		rfp-queue --state="$queue" $verbose load <"$manifest" >/dev/null ||
			die 1 "rfp-queue load failed"
	fi
	admitted=$(rfp-queue --state="$queue" count) ||
		die 1 "rfp-queue count failed"
	# The start time too: a host restarted (a container) runs again with
	# the PID it had, and a pull under a dead one's name counted its
	# claims as held and never took them back.
	owner=$(uname -n).$$.$(date +%s)
fi

# note STAGE CODE: a stage's exit status, for the driver to read once the
# stages are done.  On a full disk the shell's own complaint would name
# neither the stage nor the file: a failure is said here instead (a 0 not
# written reads as one).
note() {
	printf '%s %s\n' "$1" "$2" 2>/dev/null >>"$status" ||
	    [ "$2" -eq 0 ] ||
	    printf '%s: %s failed with status %s (not recorded: %s cannot be written)\n' \
	    "$prog" "$1" "$2" "$status" >&2
}

# The manifest, from the file or claimed from the shared queue; rfp-fetch's
# process id is kept for a signal to be passed on to it.  Once it has
# ended, however (killed with SIGKILL too), its status is written to
# $fetch_ended: an rfp-sink still waiting for it to open the FIFO then
# knows it never will, and files on without it.
# shellcheck disable=SC2086
fetch() {
	if [ -n "$queue" ]; then
		{
			rfp-queue --state="$queue" --owner="$owner" $batch_opt \
			    $lease_opt --run-dir="$run_dir" $retry_dead \
			    $dl_opt $verbose pull
			note rfp-queue $?
		} | rfp-fetch --from-queue "$@" &
	else
		rfp-fetch "$@" <"$manifest" &
	fi
	echo "$!" 2>/dev/null >"$fetch_pid"
	wait "$!"
	set -- "$?"
	# Whole or not at all: rfp-sink reads it the moment it is there (a
	# full disk leaves it empty: ended, its status unknown).
	echo "$1" 2>/dev/null >"$fetch_ended.w"
	mv -f "$fetch_ended.w" "$fetch_ended" 2>/dev/null
	return "$1"
}

# Decide fates; with a queue, file each finished record there as well.
# shellcheck disable=SC2086
backoff() {
	if [ -n "$queue" ]; then
		{
			rfp-backoff "$@"
			note rfp-backoff $?
		} | rfp-queue --state="$queue" --owner="$owner" $verbose file
		note rfp-queue $?
	else
		rfp-backoff "$@"
		note rfp-backoff $?
	fi
}

# Run each fetched body through its parser first, when one is configured;
# its process id is kept for a signal to stop its parsers (a background
# job's standard input would be /dev/null: the pipe is passed as fd 3).
# shellcheck disable=SC2086
classify() {
	if [ -n "$parse" ]; then
		{
			exec 3<&0
			rfp-parse --run-dir="$run_dir" --config="$config" "$@" \
			    <&3 3<&- &
			echo "$!" 2>/dev/null >"$parse_pid"
			exec 3<&-
			wait "$!"
			note rfp-parse $?
		} | rfp-classify ${config:+"--config=$config"} "$@"
	else
		rfp-classify ${config:+"--config=$config"} "$@"
	fi
}

# pid_of FILE: set pid to the process id a stage's wrapper wrote in FILE,
# once it is there (2 s at most); false when it is not.
# shellcheck disable=SC2317  # called by forward
pid_of() {
	i=0
	while [ ! -s "$1" ] && [ "$i" -lt 40 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	[ -s "$1" ] && read -r pid <"$1"
}

# catches_term PID: whether process PID has a handler for SIGTERM
# (Linux: SigCgt, bit 15; where /proc says nothing, no).
# shellcheck disable=SC2317
catches_term() {
	cgt=$(sed -n 's/^SigCgt:[[:space:]]*\([0-9a-f]*\)$/\1/p' \
	    "/proc/$1/status" 2>/dev/null)
	cgt=${cgt#"${cgt%????????}"}	# the low 32 bits are enough
	[ -n "$cgt" ] && [ $((0x$cgt & 0x4000)) -ne 0 ]
}

# Pass a stop on to rfp-fetch and rfp-parse, once each has started.  Both
# are started ignoring SIGTERM and set their handler only after their
# options, configuration and run directory: a signal sent before then is
# lost.  So it is sent again every 50 ms (10 s at most): to rfp-fetch
# until its report says it has stopped, to rfp-parse until it was sent
# while rfp-parse caught it, or until either has gone.
# shellcheck disable=SC2317  # called by the wait loop
forward() {
	if pid_of "$fetch_pid"; then
		i=0
		while [ ! -e "$report" ] && [ "$i" -lt 200 ] &&
		    kill -TERM "$pid" 2>/dev/null; do
			sleep 0.05
			i=$((i + 1))
		done
	fi
	# rfp-parse stops its parsers, their documents left to the resume.
	[ -n "$parse" ] || return 0
	pid_of "$parse_pid" || return 0
	i=0
	while [ "$i" -lt 200 ]; do
		took=
		catches_term "$pid" && took=1
		kill -TERM "$pid" 2>/dev/null || return 0
		[ -z "$took" ] || return 0
		sleep 0.05
		i=$((i + 1))
	done
}
# shellcheck disable=SC2317
stop() {
	caught=$1
	signals=$((signals + 1))
}
caught=
signals=0
trap 'stop INT' INT
trap 'stop TERM' TERM
trap 'stop HUP' HUP

# The stages run in the background, and the driver waits for them: a
# signal is then taken at once, not when the batch is over.  The stages
# ignore SIGINT, SIGTERM and SIGHUP from the start; the driver passes a
# stop on to rfp-fetch (it stops and writes its report) and rfp-parse, and
# the stages after them file what is on its way and reach EOF, so a signal
# to the process group (Ctrl-C, a hang-up) ends the run as one to rfpipe
# does.
# Each stage's exit status is appended to $status; the sink's is waited for.
# shellcheck disable=SC2086
{
	trap '' INT TERM HUP
	fetch --run-dir="$run_dir" --retry-fifo="$fifo" --report="$report" \
	    --owner="$claims_owner" \
	    --resume $retry_dead ${config:+"--config=$config"} ${state:+"--state=$state"} $jobs_opt $dl_opt $verbose
	note rfp-fetch $?
} | {
	trap '' INT TERM HUP
	classify $verbose
	note rfp-classify $?
} | {
	trap '' INT TERM HUP
	backoff --run-dir="$run_dir" --admitted="$admitted" \
	    $budget_opt $renew_opt \
	    ${config:+"--config=$config"} ${state:+"--state=$state"} $seed_opt $ma_opt $dl_opt $verbose
} | {
	# Ignored from the start: a signal that comes before rfp-sink has
	# set its handler must not kill it (and the summary with it).
	trap '' INT TERM HUP
	rfp-sink --run-dir="$run_dir" --retry-fifo="$fifo" \
	    --fetch-ended="$fetch_ended" --owner="$claims_owner" \
	    --admitted-from="$report" --fate-status --progress="$progress" \
	    --total="$((admitted - ${filed_before:-0}))" $quiet $verbose
	code=$?
	# Its status is the pipeline's.  A failure is noted as well, in its
	# turn: rfp-sink failing at start-up, rfp-fetch stopped after it, and
	# the line below named rfp-fetch alone.
	case $code in
	0|3|4|5) ;;
	*)	note rfp-sink "$code"
		# rfp-fetch sends nothing before rfp-sink is up, and waits
		# 15 s for it: stopped now, as at a signal, it stops at once.
		i=0
		while [ ! -s "$fetch_pid" ] && [ "$i" -lt 20 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		forward ;;
	esac
	exit "$code"
} &
pipe=$!

# A signal taken while the stages were being started (the trap runs once
# they all are), or while forward ran, is passed on before the next wait;
# one that comes during a wait ends it, and is passed on after.
sink=
passed=0
while :; do
	if [ "$passed" -ne "$signals" ]; then
		passed=$signals
		forward
		continue
	fi
	wait "$pipe"
	code=$?
	# wait gives 127 when a signal came just after the pipeline ended.
	[ "$code" -eq 127 ] && [ -n "$sink" ] || sink=$code
	[ "$passed" -eq "$signals" ] && break
done

# The stages are done and their records filed (summary.json before the
# table).  After a hang-up the terminal may be gone, or standard error a
# pipe no one reads: what is left to say must not end the driver before
# its EXIT trap and its status.
trap '' PIPE
# A signal that came once rfp-fetch had ended, all read and sent, and
# left nothing pending: the run was finishing, not stopped.  It ends as
# it would have, with no line to resume with.
if [ -n "$caught" ] && [ -s "$report" ] && [ -s "$run_dir/summary.json" ] &&
    ! grep -q '"stopped"' "$report" 2>/dev/null &&
    ! grep -q '"pending"' "$run_dir/summary.json" 2>/dev/null; then
	printf '%s: SIG%s came as the run finished: nothing was left to stop\n' \
	    "$prog" "$caught" >&2
	caught=
fi
if [ -n "$caught" ]; then
	# The stages' statuses say "stopped"; what matters is how to go on.
	# The deadline as the time it resolved to (above); none (an empty
	# one), as typed.
	if [ -n "$cmd_dl" ] && [ -n "$at" ]; then
		cmdline="$cmdline $(quote "${cmd_dl#:}$at")$cmd_rest"
	elif [ -n "$cmd_dl" ]; then
		cmdline="$cmdline $(quote "$cmd_dl_val")$cmd_rest"
	elif [ -n "$cmd_cfg_dl" ]; then
		# The config's, first among the options.
		cmdline="$(quote "$0") --deadline $(quote "$cmd_cfg_dl")${cmdline#"$(quote "$0")"}"
	fi
	printf '%s: interrupted by SIG%s; resume with: %s\n' "$prog" \
	    "$caught" "$cmdline" >&2
	[ -z "$cmd_secret" ] || printf '%s: the password in the database URL is shown as ***: put it back, or keep it in ~/.pgpass\n' \
	    "$prog" >&2
	case $caught in
	HUP) exit 129 ;;
	INT) exit 130 ;;
	esac
	exit 143
fi

# One line for the stages that failed: the first to fail said why, and the
# others followed it (a stage whose reader ended dies of SIGPIPE, 141;
# rfp-fetch stops when rfp-sink closes the retry pipe early): they are
# named after it, not each on a line of its own.
worst=0
first=
then=
usage=
usage_too=
while read -r stage code; do
	case $code in
	0) ;;
	2) if [ -z "$usage" ]; then
		usage=$stage
	   else
		usage_too="${usage_too:+$usage_too, }$stage 2"
	   fi ;;
	*) worst=1
	   if [ -z "$first" ]; then
		first="$stage failed with status $code"
	   elif [ "${first##* }" = 141 ] && [ "$code" != 141 ]; then
		then="${then:+$then, }${first% failed with status *} 141"
		first="$stage failed with status $code"
	   else
		then="${then:+$then, }$stage $code"
	   fi ;;
	esac
done <"$status"
# A stage that refused its arguments or its configuration (status 2,
# having said why) did so at its start, and the run exits 2: what failed
# besides it followed (rfp-fetch stops when rfp-sink is gone).  Alone, its
# own message is all there is to say.
if [ -n "$usage" ]; then
	worst=2
	[ -z "$first" ] ||
		then="${first% failed with status *} ${first##* }${then:+, $then}"
	then="$usage_too${usage_too:+${then:+, }}$then"
	first=
	[ -z "$then" ] || first="$usage failed with status 2"
fi
[ -n "$first" ] && printf '%s: %s%s\n' "$prog" "$first" \
    "${then:+ (then $then)}" >&2
[ "$worst" -ne 0 ] && exit "$worst"
case $sink in
0|3|4|5) exit "$sink" ;;
*) exit 1 ;;
esac
