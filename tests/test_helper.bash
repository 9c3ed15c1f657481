# Shared by every suite: bin/ first in PATH, bats-support/-assert, the
# mock portal started on a free loopback port and stopped after each test.
# shellcheck shell=bash

bats_require_minimum_version 1.5.0
# lib_load NAME: bats-support or bats-assert, their files sourced here.
# Their load.bash finds each file with "$(dirname ...)": fifteen processes
# for every test, 7 ms each here, a tenth of the suite's processes.
lib_load() {
	local d f
	local -a path
	IFS=: read -ra path <<<"${BATS_LIB_PATH:-/usr/lib/bats}"
	for d in "${path[@]}"; do
		[ -f "$d/$1/load.bash" ] || continue
		if [ -f "$d/$1/src/error.bash" ] || [ -f "$d/$1/src/assert.bash" ]; then
			for f in "$d/$1"/src/*.bash; do
				# shellcheck disable=SC1090
				source "$f"
			done
			return 0
		fi
		break
	done
	bats_load_library "$1"
}
lib_load bats-support
lib_load bats-assert

ROOT=${RFPIPE_ROOT:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
FIX=$ROOT/tests/fixtures
export FIX
# "make check" puts its build's bin/ first; run by hand, use the tree's.
if ! command -v rfp-fetch >/dev/null 2>&1; then
	PATH=$ROOT/bin:$PATH
fi
export PATH
# What this test starts carries its name, for strays to find.
export RFP_TEST_TAG=${BATS_TEST_TMPDIR:-}
# Collapse every protocol delay: 1 s of backoff or Retry-After is 10 ms.
export RFPIPE_TIME_SCALE=${RFPIPE_TIME_SCALE:-0.01}

# ready_start NAME CMD...: start CMD in the background with its fd 4 on a
# pipe and its stderr in NAME.err, and wait (10 s at most) for the line it
# writes on fd 4 once it serves; sets READY_PID and READY_LINE.  Fails,
# saying why and CMD's stderr, when CMD closes fd 4 (or exits) with no line.
# (A process substitution: a FIFO would take three processes more.)
ready_start() {
	local name=$1 rc=0 why fd
	shift
	exec {fd}< <(exec "$@" 4>&1 </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/$name.err" 3>&-)
	READY_PID=$!
	READY_LINE=
	read -r -t 10 -u "$fd" READY_LINE || rc=$?
	exec {fd}<&-
	if [ "$rc" -ne 0 ] || [ -z "$READY_LINE" ]; then
		why="fd 4 closed with no line"
		[ "$rc" -gt 128 ] && why="no line on fd 4 in 10 s"
		echo "$name: $why: $(cat "$BATS_TEST_TMPDIR/$name.err")" >&2
		kill "$READY_PID" 2>/dev/null
		wait "$READY_PID" 2>/dev/null
		READY_PID=
		return 1
	fi
}

# mock_start SCENARIO [OPTION...]: start the mock portal with OPTIONs, once
# it said it listens; sets MOCK_PORT, MOCK_URL, MOCK_LOG, MOCK_PID.  It is
# stopped by mock_stop (the teardown below calls it).  The mock is
# $RFP_MOCKPORTAL when set (make check's sanitizer pass: the plain build's).
mock_start() {
	local scen=$1
	shift
	MOCK_LOG=$BATS_TEST_TMPDIR/mock.log
	ready_start mock "${RFP_MOCKPORTAL:-rfp-mockportal}" --scenario "$scen" --port 0 \
	    --ready-fd 4 --log "$MOCK_LOG" "$@" || return 1
	MOCK_PID=$READY_PID
	MOCK_PORT=$READY_LINE
	MOCK_URL=http://127.0.0.1:$MOCK_PORT
	export MOCK_PORT MOCK_URL MOCK_LOG MOCK_PID
}

# mock2_start SCENARIO: a second portal, another origin (its own port);
# sets MOCK2_URL, MOCK2_LOG, MOCK2_PID.  mock_stop stops it too.
mock2_start() {
	MOCK2_LOG=$BATS_TEST_TMPDIR/mock2.log
	ready_start mock2 "${RFP_MOCKPORTAL:-rfp-mockportal}" --scenario "$1" --port 0 \
	    --ready-fd 4 --log "$MOCK2_LOG" || return 1
	MOCK2_PID=$READY_PID
	MOCK2_URL=http://127.0.0.1:$READY_LINE
	export MOCK2_URL MOCK2_LOG MOCK2_PID
}

# mock_stop: stop the portals mock_start and mock2_start started, and
# what a test that did not complete left running (strays).
mock_stop() {
	local p
	for p in "${MOCK_PID:-}" "${MOCK2_PID:-}"; do
		[ -n "$p" ] || continue
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	MOCK_PID=
	MOCK2_PID=
	strays
}

# teardown: mock_stop after every test; a suite with more to undo defines
# its own, and calls mock_stop from it.
teardown() {
	mock_stop
}

# kill_tagged: kill every process that carries this test's RFP_TEST_TAG in
# its environment (whatever started it, the test or a subshell of it),
# but for the caller and the test itself.  Builtins only: a hung test's
# guard calls it every second.
kill_tagged() {
	local f p v
	local -a env
	[ -n "$RFP_TEST_TAG" ] || return 0
	for f in /proc/[0-9]*/environ; do
		p=${f#/proc/}
		p=${p%/environ}
		if [ "$p" = "$$" ] || [ "$p" = "$BASHPID" ]; then
			continue
		fi
		{ mapfile -d '' -t env <"$f"; } 2>/dev/null || continue
		for v in "${env[@]}"; do
			if [ "$v" = "RFP_TEST_TAG=$RFP_TEST_TAG" ]; then
				kill -KILL "$p" 2>/dev/null &&
				    RFP_KILLED=$((${RFP_KILLED:-0} + 1))
				break
			fi
		done
	done
	return 0
}

# strays: in the teardown of a test that did not complete (failed, or cut
# short by the hang guard below), kill what it left running: a hung pipeline
# would hold bats' output open and the suite would wait for it.  What it
# started, its children and the orphans that are no one's children any
# more, is found by the RFP_TEST_TAG it inherited.
strays() {
	[ -n "${BATS_TEARDOWN_STARTED:-}" ] && [ -z "${BATS_TEST_COMPLETED:-}" ] ||
	    return 0
	kill_tagged
	dead_notes
}

# dead_notes: for a test that did not complete, what its run directory
# ($RUN) dead-lettered, a line a document (the first ten), to the test's
# output: a pipeline run with -q under "run" says nothing of why it exited
# 3, and a failure on a CI machine is all there is to read.
dead_notes() {
	[ -n "${RUN:-}" ] && [ -s "$RUN/dead.ndjson" ] || return 0
	echo "$RUN/dead.ndjson ($(wc -l <"$RUN/dead.ndjson") lines), first ten:"
	head -n 10 "$RUN/dead.ndjson" | jq -r '"  \(.id // "?") \(.dead_reason // "?"): \(.dead_detail // "")"' 2>/dev/null ||
	    head -n 10 "$RUN/dead.ndjson" | cut -c1-300
	return 0
}

# A test that hangs fails in RFP_TEST_TIMEOUT seconds (BATS_TEST_TIMEOUT's,
# or 240, unless set), and what it started is killed.  bats' own watchdog
# is not started (BATS_TEST_TIMEOUT is unset in the test): it kills only the
# test's children, and costs a process and a sleep a test.  (setup_file
# and teardown_file are not a test's, and have no guard.)
#
# hang_guard PID SECONDS: its stdin is the read end of a pipe whose write
# end the test PID holds, and everything it starts inherits: EOF comes
# once they have all ended, with no process polling.  Without EOF in
# SECONDS, fail the test (SIGABRT: on_hang, once the command it waits
# for has ended) and kill what it started, so that a command hung inside
# "run" ends and the test gets to its trap; what it starts since is
# killed every second, a test that still runs 10 s on is killed outright,
# and what it left is killed once it is gone.
hang_guard() {
	local pid=$1 rc=0 i f
	# None of bats' descriptors kept open here: it reads its output to
	# EOF, and would wait for the guard.
	for f in /proc/"$BASHPID"/fd/*; do
		f=${f##*/}
		[ "$f" -gt 2 ] && eval "exec $f>&-"
	done 2>/dev/null
	read -r -t "$2" _ || rc=$?
	[ "$rc" -gt 128 ] || return 0
	if holds "$pid"; then
		kill -ABRT "$pid"
		kill_tagged
		# The test waits for these: its hung subshells ("run" of a
		# function looping in builtins).  Only now, not while its EXIT
		# trap runs.
		kill_held "$pid"
		for i in 1 2 3 4 5 6 7 8 9 10; do
			holds "$pid" || break
			sleep 1
			kill_tagged
		done
		holds "$pid" && kill -KILL "$pid"
	fi
	# The test gone: what it left.  One that was starting while /proc was
	# read is not in that look (a sleep of the harness's own test of this
	# guard outlived it once, under load): look again until a look kills
	# nothing.
	for i in 1 2 3 4 5 6 7 8 9 10; do
		RFP_KILLED=0
		kill_tagged
		kill_held
		[ "$RFP_KILLED" -eq 0 ] && break
		sleep 0.1
	done
}
# kill_held [PPID]: in the guard, kill what holds the test's pipe (but the
# guard), or only those of its holders whose parent is PPID: the test's
# own subshells, which carry no tag.
kill_held() {
	local d p pp
	for d in /proc/[0-9]*/fd; do
		p=${d#/proc/}
		p=${p%/fd}
		[ "$p" = "$BASHPID" ] && continue
		if [ -n "${1:-}" ]; then
			read -r _ _ _ pp _ <"/proc/$p/stat" || continue
			[ "$pp" = "$1" ] || continue
		fi
		holds "$p" && kill -KILL "$p" &&
		    RFP_KILLED=$((${RFP_KILLED:-0} + 1))
	done 2>/dev/null
}
# holds PID: PID holds the guard's pipe (its stdin's other end): the test,
# or what it started, and not some later process given its number.
holds() {
	local f
	for f in "/proc/$1/fd/"*; do
		[ "$f" -ef /dev/stdin ] && return 0
	done
	return 1
}
on_hang() {
	echo "# hang guard: the test still ran after $RFP_TEST_TIMEOUT s: what it started was killed" >&2
	exit 1
}
if [ -n "${BATS_TEST_NAME:-}" ] && [ -n "$RFP_TEST_TAG" ]; then
	RFP_TEST_TIMEOUT=${RFP_TEST_TIMEOUT:-${BATS_TEST_TIMEOUT:-240}}
	unset BATS_TEST_TIMEOUT
	trap on_hang ABRT
	# The guard is not the test's child: a bare "wait" in a test would
	# wait for it.  The descriptor is held open, never used.
	# shellcheck disable=SC2034
	exec {RFP_GUARD_FD}> >(hang_guard "$$" "$RFP_TEST_TIMEOUT" \
	    <&0 >/dev/null 2>&1 &)
fi

# manifest PREFIX N [ENDPOINT] [EXTRA-JSON]: N GET records for PREFIX/doc-i.
manifest() {
	local prefix=$1 n=$2 ep=${3:-} extra=${4:-} i
	for i in $(seq 1 "$n"); do
		printf '{"id":"%s-%d","url":"%s%s/doc-%d"%s%s}\n' \
		    "${ep:-doc}" "$i" "$MOCK_URL" "$prefix" "$i" \
		    "${ep:+,\"endpoint\":\"$ep\"}" "${extra:+,$extra}"
	done
}

# help_opts COMMAND...: the options COMMAND --help shows, one a line and
# sorted: its short letters as -x, and its --long-options.
help_opts() {
	local help
	help=$("$@" --help) || return 1
	{
		grep -oE -- '(^|[^-[:alnum:]])-[a-zA-Z]+' <<<"$help" |
		    sed 's/.*-//' | fold -w1 | sed 's/^/-/'
		grep -oE -- '--[a-z][a-z0-9-]*' <<<"$help"
	} | sort -u
}

# mock_overlap ENDPOINT DELAY [FILTER]: the most requests to ENDPOINT (and
# passing the jq FILTER, if given) the mock was serving at once, each
# counted from its arrival (t) to its answer (t_answer) plus DELAY, the
# seconds its route's delay_ms holds it (as scaled).  Not the log's own
# inflight: the mock counts a request until its completion callback, which
# under load runs after the client has had the answer and sent its next
# request, so inflight can pass a ceiling the client kept.
mock_overlap() {
	jq -s --arg ep "$1" --argjson d "$2" '
	    [.[] | select(.kind == "request" and .endpoint == $ep and
	        ('"${3:-true}"')) | {t, end: (.t_answer + $d)}] as $r |
	    [$r[] | .t as $t | [$r[] | select(.t <= $t and $t < .end)] |
	        length] | max // 0' "$MOCK_LOG"
}

# logged FILTER: how many lines of the mock's log pass the jq FILTER.
logged() {
	jq -s "[.[] | select($1)] | length" "$MOCK_LOG"
}

# requests_for [PATH]: how many requests the mock saw (for PATH).
requests_for() {
	jq -s --arg p "${1:-}" '[.[] | select(.kind == "request" and
	    ($p == "" or .path == $p))] | length' "$MOCK_LOG"
}

# poll SECONDS CMD...: run CMD until it succeeds, every POLL_STEP seconds
# (0.05); false when SECONDS (a decimal) of wall time pass first.  A
# deadline, not a count of tries: on a loaded machine each try can take
# longer than the step, and a count would stretch the wait with it.
poll() {
	local s=$1 i f=000000 end
	shift
	# Said, not swallowed by a caller's || : (a wait of 1,5 s would be
	# read as arithmetic; bash before 5 has no EPOCHREALTIME).
	if [[ ! $s =~ ^[0-9]*(\.[0-9]+)?$ || -z $s ]]; then
		echo "poll: \"$s\" is not a number of seconds" >&2
		return 2
	fi
	if [ -z "${EPOCHREALTIME:-}" ]; then
		echo "poll: no EPOCHREALTIME (bash 5 is needed)" >&2
		return 2
	fi
	i=${s%%.*}
	[[ $s != *.* ]] || f=${s#*.}000000
	# EPOCHREALTIME in microseconds, whatever the locale's decimal point.
	end=$((${EPOCHREALTIME//[!0-9]/} + 10#${i:-0} * 1000000 + 10#${f:0:6}))
	until "$@"; do
		((${EPOCHREALTIME//[!0-9]/} < end)) || return 1
		sleep "${POLL_STEP:-0.05}"
	done
}

# What poll waits for.
# gone PID: PID runs no more (gone, or a zombie no one has reaped yet).
gone() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
	[[ $st == Z* ]]
}
# matches FILE PATTERN: a line of FILE (there or not yet) matches PATTERN.
matches() {
	grep -q -- "$2" "$1" 2>/dev/null
}
# lines_at_least N FILE: FILE (there or not yet) has N lines or more.
lines_at_least() {
	local n
	n=$({ wc -l <"$2"; } 2>/dev/null) || n=0
	[ "$n" -ge "$1" ]
}
# requests_at_least N [PATH]: the mock has seen N requests or more (for
# PATH).
requests_at_least() {
	[ "$(requests_for "${2:-}")" -ge "$1" ]
}
# holds_reach K: the mock has begun its Kth hold.
holds_reach() {
	[ "$(grep -c '"kind":"hold"' "$MOCK_LOG" 2>/dev/null)" -ge "$1" ]
}
# running PGREP-ARGS...: pgrep finds a process.
running() {
	pgrep "$@" >/dev/null
}
# nonempty_dir DIR: DIR holds a file.
nonempty_dir() {
	[ -n "$(ls -A "$1" 2>/dev/null)" ]
}
# not CMD...: CMD fails.
not() {
	! "$@"
}

# requests_reach N [SECONDS [STEP]]: wait until the mock has seen N
# requests, looking every STEP seconds (0.05) for SECONDS at the most
# (5); fails when it has not.
requests_reach() {
	POLL_STEP=${3:-0.05} poll "${2:-5}" requests_at_least "$1"
}

# The driver, as installed it would be "rfpipe".
pipeline.sh() {
	"$ROOT/pipeline.sh" "$@"
}

# check ID EXPR: the record of $output with .id == ID satisfies jq EXPR.
# shellcheck disable=SC2154  # $output is set by bats' run
check() {
	local rec
	# One jq where it holds (a jq starts in 25 ms); the record when not.
	# (jq 1.6 gives last(empty) as null: a missing record is false here.)
	jq -n -e --arg id "$1" "[inputs | select(.id == \$id)] |
	    if length == 0 then false else .[-1] | $2 end" \
	    <<<"$output" >/dev/null 2>&1 && return 0
	rec=$(jq -c --arg id "$1" 'select(.id == $id)' <<<"$output")
	if [ -z "$rec" ] || ! jq -e "$2" <<<"$rec" >/dev/null; then
		printf 'record %s: %s\ndoes not satisfy: %s\n' "$1" "${rec:-(none)}" "$2" >&2
		return 1
	fi
}

# check_line N EXPR: the one record of $output with .line == N satisfies EXPR.
# shellcheck disable=SC2154  # $output is set by bats' run
check_line() {
	local rec
	jq -n -e --argjson n "$1" "[inputs | select(.line == \$n)] |
	    if length == 1 then .[0] | $2 else false end" <<<"$output" \
	    >/dev/null 2>&1 && return 0
	rec=$(jq -c --argjson n "$1" 'select(.line == $n)' <<<"$output")
	if [ -z "$rec" ] || [ "$(wc -l <<<"$rec")" -ne 1 ] ||
	    ! jq -e "$2" <<<"$rec" >/dev/null; then
		printf 'record of line %s: %s\ndoes not satisfy: %s\n' "$1" "${rec:-(none)}" "$2" >&2
		return 1
	fi
}

# padded_record FIELDS LEN: one line {FIELDS"pad":"aaa..."} of LEN bytes
# before its newline (FIELDS in ASCII).
padded_record() {
	local head
	head=$(printf '{%s"pad":"' "$1")
	printf '%s' "$head"
	head -c $(($2 - ${#head} - 2)) /dev/zero | tr '\0' a
	printf '"}\n'
}

# huge_record FIELDS: one line over every cap (1 MiB and 64 KiB), {FIELDS"pad":"aaa...}.
huge_record() {
	padded_record "$1" $((${#1} + 1200010))
}

# descendants PID: every process below PID.
descendants() {
	local p
	for p in $(ps -o pid= --ppid "$1"); do
		echo "$p"
		descendants "$p"
	done
}

# mock_held [K] [SECONDS]: wait (SECONDS at most, default 20) until the
# mock, started with --hold-at, has begun its Kth hold (default 1): from
# then until mock_release, no request to a route is answered, so a run
# with one in flight cannot end.
mock_held() {
	POLL_STEP=0.005 poll "${2:-20}" holds_reach "${1:-1}" && return 0
	echo "mock_held: no hold ${1:-1} in $MOCK_LOG after ${2:-20} s" >&2
	return 1
}

# mock_release: end the mock's hold; the held requests are answered.
mock_release() {
	kill -USR1 "$MOCK_PID"
}

# kill_stage_at PID STAGE [SECONDS]: once the mock (started with --hold-at)
# holds its requests (waiting SECONDS at most, default 20), SIGKILL the
# rfp-STAGE below PID, then release the mock.  Fails when there is none:
# the kill must land mid-run, or the test proves nothing.  While the mock
# holds a request rfp-fetch waits for it, and every stage lives on.
kill_stage_at() {
	local pid=$1 stage=$2 p victim='' parent
	mock_held 1 "${3:-20}" || return 1
	# The stage itself, not a child it forked that has not yet exec'd
	# (rfp-parse's parsers are rfp-parse until they are cat): the one
	# whose parent, still there, is not the stage.
	for p in $(descendants "$pid"); do
		[ "$(ps -o comm= -p "$p" 2>/dev/null)" = "rfp-$stage" ] || continue
		parent=$(ps -o ppid= -p "$p" 2>/dev/null) || continue
		parent=$(ps -o comm= -p "${parent//[[:space:]]/}" 2>/dev/null) ||
		    continue
		[ -n "$parent" ] && [ "$parent" != "rfp-$stage" ] && victim=$p
	done
	if [ -z "$victim" ]; then
		echo "kill_stage_at: no rfp-$stage below $pid" >&2
		# The whole tree, for the failure's output, kernel threads out.
		# shellcheck disable=SC2009
		ps -o pid,ppid,stat,etimes,args -e --forest | grep -v ' \[' >&2
		mock_release
		return 1
	fi
	kill -KILL "$victim"
	mock_release
}

# filed_once DIR MANIFEST: every id of MANIFEST stands exactly once across
# DIR's results.ndjson and dead.ndjson, and no other id does (diff says
# what is missing, doubled or foreign).
filed_once() {
	jq -r .id "$2" | sort >"$BATS_TEST_TMPDIR/want"
	cat "$1/results.ndjson" "$1/dead.ndjson" 2>/dev/null | jq -r .id |
	    sort >"$BATS_TEST_TMPDIR/ids"
	diff "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/ids"
}

# need_strace: skip the test where strace is not installed, or cannot
# trace here (a container without ptrace).
need_strace() {
	command -v strace >/dev/null || skip "strace is not installed"
	strace -f -o /dev/null true 2>/dev/null || skip "strace cannot trace here"
}

# gone_within PID SECONDS: 0 once PID has ended, looked at every 0.05 s;
# 1 if it still runs SECONDS from now.
gone_within() {
	poll "$2" gone "$1"
}
