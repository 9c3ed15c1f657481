#!/usr/bin/env bats
# The operator's night (issue #25): signals, cron and install, checks
# before the run, classification by the standards and by the portal, and
# the four stages composed by hand.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	M=$BATS_TEST_TMPDIR/m
}

# start_slow N: N documents on a route that holds each answer 20 s.
start_slow() {
	cat >"$BATS_TEST_TMPDIR/slow.yaml" <<-'EOF'
	routes:
	  - {match: "/slow/*", endpoint: slow, delay_ms: 6000000}
	EOF
	mock_start "$BATS_TEST_TMPDIR/slow.yaml"
	manifest /slow "$1" slow >"$M"
}

# in_flight, fetch_started: whether requests are in flight; whether
# rfp-fetch has been started (its pid file is there).
in_flight() {
	[ "$(requests_for /slow/doc-1)" -ge 1 ] 2>/dev/null
}
fetch_started() {
	[ -s "$(echo "$RUN"/state/fetch.*.pid)" ]
}

# interrupt SIG WHO [OPTION...]: run rfpipe (OPTIONs before the manifest)
# in its own process group, send SIG to its PID, to its group or to its
# rfp-fetch (WHO pid, group, fetch) once requests are in flight (or once
# $started says so), running $before_signal and $after_signal if set, and
# wait (bounded).  Its standard error goes to $err_to if set (the test
# reads it), else to $BATS_TEST_TMPDIR/err.  SIGINT is not ignored in it,
# as it would be in a background job here.
interrupt() {
	local sig=$1 who=$2 pid
	shift 2
	setsid env --default-signal=INT,TERM "$ROOT/pipeline.sh" -j 2 \
	    --run-dir "$RUN" --seed 1 "$@" "$M" >"$BATS_TEST_TMPDIR/out" \
	    2>"${err_to:-$BATS_TEST_TMPDIR/err}" &
	pid=$!
	# Shown if the test fails: a signal sent before the run got there.
	POLL_STEP=0.01 poll 30 "${started:-in_flight}" ||
	    echo "interrupt: ${started:-in_flight} not true after 30 s; signalled anyway"
	[ -z "${before_signal:-}" ] || $before_signal
	case $who in
	group) kill -"$sig" -- -"$pid" ;;
	fetch) kill -"$sig" "$(cat "$RUN"/state/fetch.*.pid)" ;;
	*) kill -"$sig" "$pid" ;;
	esac
	[ -z "${after_signal:-}" ] || $after_signal
	# The route holds each answer 60 s: only a stop ends this in time
	# (30 s, for a sanitizer build on a loaded machine); else the group
	# is killed, and the test fails.
	if timeout 30 tail --pid="$pid" -f /dev/null; then
		status=0
		wait "$pid" || status=$?
	else
		kill -KILL -- -"$pid"
		wait "$pid" || :
		status=124
	fi
	stderr=$(cat "$BATS_TEST_TMPDIR/err" 2>/dev/null || :)
}

# held STAGE [REAL]: a STAGE first in $BATS_TEST_TMPDIR/shim that, slow
# to start, waits (ignoring INT and TERM, as the stages are started) until
# release, then becomes the real one (REAL, or the build's).  --check and
# --list run at once.  $BATS_TEST_TMPDIR/held.STAGE is there once it waits.
held() {
	mkdir -p "$BATS_TEST_TMPDIR/shim"
	cat >"$BATS_TEST_TMPDIR/shim/$1" <<-EOF
	#!/bin/bash
	case " \$* " in *" --check "*|*" --list "*) ;; *)
		touch "$BATS_TEST_TMPDIR/held.$1"
		until [ -e "$BATS_TEST_TMPDIR/go" ]; do sleep 0.02; done ;;
	esac
	exec "${2:-$ROOT/bin/$1}" "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/shim/$1"
}
release() {
	touch "$BATS_TEST_TMPDIR/go"
}

check_interrupted() {
	local code=$1 sig=$2
	# Shown when a check fails.
	printf 'status %s; stderr:\n%s\n' "$status" "$stderr"
	[ "$status" -eq "$code" ]
	[[ $stderr == *"rfpipe: interrupted by SIG$sig; resume with: $ROOT/pipeline.sh -j 2 --run-dir $RUN --seed 1 $M"* ]]
	[[ $stderr == *"rfpipe: summary of $RUN"* ]]
	[[ $stderr != *RECONCILIATION* ]]
	[[ $stderr != *MISMATCH* ]]
	# rfp-fetch may take the stop before it has read all 30 lines, or
	# any (a loaded machine): whatever it admitted is pending.
	[[ $stderr =~ "check: interrupted: admitted "([0-9]+)" = succeeded 0 + dead 0 + pending "([0-9]+)": ok" ]]
	[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
	jq -e '.interrupted == true and .reconciled == true and .pending == .admitted' "$RUN/summary.json"
}

@test "operator: SIGTERM to rfpipe's PID stops the run, files the summary, says how to resume, exits 143" {
	start_slow 30
	interrupt TERM pid
	check_interrupted 143 TERM
}

@test "operator: SIGINT to rfpipe's PID stops the run and exits 130" {
	start_slow 30
	interrupt INT pid
	check_interrupted 130 INT
}

@test "operator: SIGINT to rfpipe's process group stops the run and exits 130, no reconciliation failure" {
	start_slow 30
	interrupt INT group
	check_interrupted 130 INT
}

@test "operator: SIGTERM to rfpipe's process group stops the run and exits 143" {
	start_slow 30
	interrupt TERM group
	check_interrupted 143 TERM
}

@test "operator: SIGTERM to the group while the manifest is counted says so, exits 143, sends nothing" {
	# A million lines: rfp-fetch --check counts them for seconds.
	awk 'BEGIN { for (i = 1; i <= 1000000; i++) printf "{\"id\":\"d%d\",\"url\":\"http://127.0.0.1:9/d%d\"}\n", i, i }' >"$M"
	setsid env --default-signal=INT,TERM "$ROOT/pipeline.sh" -q \
	    --run-dir "$RUN" "$M" 2>"$BATS_TEST_TMPDIR/err" &
	local pid=$!
	POLL_STEP=0.02 poll 6 running -f -g "$pid" -- "rfp-fetch --check" || :
	kill -TERM -- -"$pid"
	status=0
	timeout 30 tail --pid="$pid" -f /dev/null || kill -KILL -- -"$pid"
	wait "$pid" || status=$?
	cat "$BATS_TEST_TMPDIR/err"
	[ "$status" -eq 143 ]
	# (bash says "Terminated" of the count it waited on, before.)
	[ "$(tail -n 1 "$BATS_TEST_TMPDIR/err")" = "rfpipe: interrupted by SIGTERM before the run started: nothing was sent" ]
	[ ! -e "$RUN/results.ndjson" ]
}

@test "operator: SIGHUP to rfpipe's process group (a session hung up) stops the run as SIGTERM does and exits 129" {
	start_slow 30
	interrupt HUP group
	check_interrupted 129 HUP
}

@test "operator: SIGHUP with standard error gone (the terminal closed): the records are filed, the driver ends as it should, 129" {
	start_slow 30
	# Standard error a pipe whose reader is gone when the hang-up comes:
	# the summary's table and the resume line meet EPIPE.
	mkfifo "$BATS_TEST_TMPDIR/errpipe"
	cat "$BATS_TEST_TMPDIR/errpipe" >"$BATS_TEST_TMPDIR/err" &
	reader=$!
	hang_up() { kill "$reader"; wait "$reader" || :; }
	err_to=$BATS_TEST_TMPDIR/errpipe before_signal=hang_up interrupt HUP group
	[ "$status" -eq 129 ]
	jq -e '.interrupted == true and .reconciled == true and .pending == 30' "$RUN/summary.json"
	# The driver lived to its EXIT trap: its own files are gone.
	[ -z "$(find "$RUN/state" -name 'retry.*.fifo' -o -name 'status.*' -o -name 'fetch.*.pid')" ]
}

@test "operator: -v with standard error a pipe whose reader is gone (| head): every stage goes on, every document filed" {
	cat >"$BATS_TEST_TMPDIR/p.yaml" <<-'EOF'
	routes:
	  - {match: "/p/*", endpoint: p, script: [503, 200]}
	EOF
	mock_start "$BATS_TEST_TMPDIR/p.yaml"
	manifest /p 20 p >"$M"
	# The reader takes one byte and goes: every stage's next -v line
	# meets EPIPE (rfp-backoff's first is at the first retry).
	run -0 timeout 60 bash -c '"$3" -v --seed 1 --run-dir "$1" "$2" 2>&1 >/dev/null | head -c 1 >/dev/null; exit "${PIPESTATUS[0]}"' _ "$RUN" "$M" "$ROOT/pipeline.sh"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 20 ]
	jq -e '.reconciled == true' "$RUN/summary.json"
}

@test "operator: SIGTERM to the group before rfp-sink has set its handler still files the summary" {
	held rfp-sink
	start_slow 30
	# Nothing is sent before rfp-sink is up: the signal comes once it is
	# held, not once a request is in flight (which would never come).
	# (rfp-fetch, slow to set its handler, may send a few once rfp-sink is
	# let go, before the stop passed on reaches it: they are pending.)
	sink_held() { [ -e "$BATS_TEST_TMPDIR/held.rfp-sink" ]; }
	PATH=$BATS_TEST_TMPDIR/shim:$PATH started=sink_held after_signal=release \
	    interrupt TERM group
	check_interrupted 143 TERM
}

@test "operator: SIGTERM before rfp-fetch has set its handler is passed on until it takes it" {
	# An rfp-fetch slow to start (a slow disk), let go half a second
	# after the signal: the first one passed on meets it still ignoring.
	held rfp-fetch
	late_release() { sleep 0.5; release; }
	start_slow 30
	PATH=$BATS_TEST_TMPDIR/shim:$PATH started=fetch_started \
	    after_signal=late_release interrupt TERM pid
	check_interrupted 143 TERM
}

@test "operator: SIGTERM before rfp-parse has set its handler is passed on until it takes it" {
	# rfp-parse, started ignoring SIGTERM, sets its handler after its
	# configuration and run directory; held back (a slow disk) until half
	# a second after the signal, it gets three bodies to parse with a
	# parser that never ends: only a stop taken ends the run in time.
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF'
	routes:
	  - {match: "/ok/*", endpoint: ok}
	EOF
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /ok 3 ok >"$M"
	export PARSE_PIDS=$BATS_TEST_TMPDIR/pids
	printf 'parse: {command: [%s], timeout: 86400s}\n' \
	    "$FIX/parse/parsers/slow" >"$BATS_TEST_TMPDIR/c.yaml"
	held rfp-parse
	late_release() { sleep 0.5; release; }
	# The three answered: their records are rfp-fetch's to write out,
	# and written when it stops.
	answered() {
		[ "$(jq -s '[.[] | select(.t == "req" and .status == 200)] | length' \
		    "$RUN/logs/attempts.ndjson" 2>/dev/null)" = 3 ]
	}
	PATH=$BATS_TEST_TMPDIR/shim:$PATH started=answered \
	    after_signal=late_release interrupt TERM pid --config "$BATS_TEST_TMPDIR/c.yaml"
	[ "$status" -eq 143 ]
	[[ $stderr == *"rfpipe: interrupted by SIGTERM; resume with: "* ]]
	[[ $stderr == *"rfp-parse: stopped by signal 15 with "* ]]
	[[ $stderr == *"check: interrupted: admitted 3 = succeeded 0 + dead 0 + pending 3: ok"* ]]
	jq -e '.interrupted == true and .reconciled == true and .pending == 3' "$RUN/summary.json"
	# Any parser it started (the stop may come before the first) was
	# ended with it: gone, or a zombie no one has reaped yet.
	[ ! -e "$PARSE_PIDS" ] || while read -r i; do
		st=$(ps -o stat= -p "$i") || continue
		[[ $st == Z* ]] || fail "parser $i still runs"
	done <"$PARSE_PIDS"
}

@test "operator: SIGTERM while rfpipe is starting its stages is passed on once they are there" {
	# The window is the driver's own: between setting its stop trap and
	# its wait loop it only forks the stages, in the background, so a
	# held stage cannot keep it there.  The driver is held instead: at
	# mkfifo, the last command it waits for before the stages, strace
	# attaches to delay the return of its next fork (the first stage's)
	# by 3 s; the signal comes then, and its trap runs once all are forked.
	command -v strace >/dev/null || skip "strace is not installed"
	held mkfifo "$(command -v mkfifo)"
	start_slow 30
	local tracer i
	attach() {
		POLL_STEP=0.01 poll 5 test -e "$BATS_TEST_TMPDIR/held.mkfifo" || :
		strace -p "$pid" -o /dev/null -e trace=clone \
		    -e inject=clone:delay_exit=3000000:when=1 \
		    2>"$BATS_TEST_TMPDIR/strace" &
		tracer=$!
		attached() {
			matches "$BATS_TEST_TMPDIR/strace" attached || gone "$tracer"
		}
		POLL_STEP=0.01 poll 5 attached || :
		release
	}
	started_traced() {
		[ -n "${tracer:-}" ] || attach
		fetch_started
	}
	PATH=$BATS_TEST_TMPDIR/shim:$PATH started=started_traced interrupt TERM pid
	kill "$tracer" 2>/dev/null || :
	grep -q attached "$BATS_TEST_TMPDIR/strace" ||
	    skip "strace cannot trace here: $(cat "$BATS_TEST_TMPDIR/strace")"
	# Shown if it fails: when the tracer came, and what it saw.
	echo "strace: $(cat "$BATS_TEST_TMPDIR/strace")"
	check_interrupted 143 TERM
}

@test "operator: rfp-fetch killed while it waits for a late rfp-sink: nothing was sent, and the sink still prints the summary" {
	# rfp-sink slow to start, and rfp-fetch killed with SIGKILL before
	# the sink opens the FIFO: no reader comes, and no report.  rfpipe,
	# which reaped rfp-fetch, tells it.  rfp-fetch sends nothing before
	# the sink is up: a record would have had no stage to file it.
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF'
	routes:
	  - {match: "/busy/*", endpoint: busy, script: [503]}
	  - {match: "/slow/*", endpoint: slow, delay_ms: 6000000}
	EOF
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /busy 3 busy; manifest /slow 2 slow; } >"$M"
	echo "timeout: 100m" >"$BATS_TEST_TMPDIR/c.yaml"
	held rfp-sink
	waiting() {
		fetch_started && [ -e "$BATS_TEST_TMPDIR/held.rfp-sink" ]
	}
	PATH=$BATS_TEST_TMPDIR/shim:$PATH started=waiting \
	    before_signal="sleep 0.5" after_signal=release \
	    interrupt KILL fetch -j 4 --config "$BATS_TEST_TMPDIR/c.yaml"
	[ "$status" -eq 1 ]
	[[ $stderr == *"rfpipe: rfp-fetch failed with status 137"* ]]
	[[ $stderr != *"No such device or address"* ]]
	[[ $stderr == *"rfpipe: summary of $RUN"* ]]
	[ "$(requests_for)" -eq 0 ]
	jq -e '.run.attempts == 0 and .run.succeeded == 0 and .run.dead == 0' "$RUN/summary.json"
	[ ! -s "$BATS_TEST_TMPDIR/out" ]
	[ ! -s "$RUN/results.ndjson" ] && [ ! -s "$RUN/dead.ndjson" ]
}

@test "operator: what was done before SIGTERM is filed, and the resume line finishes the rest" {
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF'
	routes:
	  - {match: "/fast/*", endpoint: fast}
	  - {match: "/slow/*", endpoint: slow, slow_ms: 6000000, script: [slow, 200]}
	EOF
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /fast 5 fast; manifest /slow 10 slow; } >"$M"
	setsid env --default-signal=INT,TERM "$ROOT/pipeline.sh" -q \
	    --run-dir "$RUN" --seed 1 "$M" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	fast_filed() {
		lines_at_least 5 "$RUN/results.ndjson" &&
		    requests_at_least 1 /slow/doc-1 2>/dev/null
	}
	POLL_STEP=0.01 poll 30 fast_filed || :
	kill -TERM "$pid"
	timeout 30 tail --pid="$pid" -f /dev/null || kill -KILL -- -"$pid"
	run -143 wait "$pid"
	[ "$(jq -r .id "$RUN/results.ndjson" | sort | tr '\n' ' ')" = "fast-1 fast-2 fast-3 fast-4 fast-5 " ]
	jq -e '.interrupted and .reconciled and .run.succeeded == 5 and .pending == 10' "$RUN/summary.json"
	# The line as printed, run again: the slow route answers at once now.
	line=$(grep -o 'resume with: .*' "$BATS_TEST_TMPDIR/err")
	eval "set -- ${line#resume with: }"
	run -0 timeout 60 "$@"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 15 ]
	[ "$(jq -r .id "$RUN/results.ndjson" | sort -u | wc -l)" -eq 15 ]
	[ "$(requests_for /fast/doc-1)" -eq 1 ]
}

@test "operator: SIGINT stops an rfpipe that a script started in the background, where SIGINT is ignored, exit 130" {
	start_slow 30
	local d=$BATS_TEST_TMPDIR pid i
	# A shell without job control starts "&" jobs with SIGINT ignored.
	setsid sh -c '"$1" -j 2 --run-dir "$2" --seed 1 "$3" 2>"$4/err" &
	    echo "$!" >"$4/pid"; wait "$!"; echo "$?" >"$4/status"' sh \
	    "$ROOT/pipeline.sh" "$RUN" "$M" "$d" &
	sh_pid=$!
	# Under load (the sanitizer pass) the first request can take seconds;
	# a stop before the run directory exists leaves no summary to check.
	slow_started() {
		[ -s "$d/pid" ] && requests_at_least 1 /slow/doc-1 2>/dev/null
	}
	POLL_STEP=0.01 poll 30 slow_started || :
	requests_at_least 1 /slow/doc-1
	pid=$(cat "$d/pid")
	kill -INT "$pid"
	if ! timeout 30 tail --pid="$pid" -f /dev/null; then
		kill -KILL -- -"$sh_pid"
		fail "SIGINT did not stop rfpipe"
	fi
	wait "$sh_pid"
	[ "$(cat "$d/status")" -eq 130 ]
	grep -Fqx "rfpipe: interrupted by SIGINT; resume with: $ROOT/pipeline.sh -j 2 --run-dir $RUN --seed 1 $M" "$d/err" ||
	    { cat "$d/err"; false; }
	jq -e '.interrupted == true and .reconciled == true' "$RUN/summary.json" ||
	    { cat "$d/err"; ls -la "$RUN"; false; }
}

# resume_line ARG...: rfpipe ARG... --run-dir RUN M on the slow portal,
# stopped by SIGTERM at its first request (the first since the call); the resume line it printed, as
# words, in the positional parameters of the caller's eval of $line.  Run
# by the shell $via when set (bash: /bin/sh is bash on some systems).
resume_line() {
	local n0
	n0=$(requests_for /slow/doc-1 2>/dev/null || echo 0)
	# shellcheck disable=SC2086
	setsid env --default-signal=INT,TERM ${via:-} "$ROOT/pipeline.sh" "$@" \
	    --run-dir "$RUN" "$M" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	POLL_STEP=0.01 poll 30 requests_at_least $((n0 + 1)) /slow/doc-1 2>/dev/null || :
	kill -TERM "$pid"
	timeout 10 tail --pid="$pid" -f /dev/null || kill -KILL -- -"$pid"
	run -143 wait "$pid"
	line=$(grep -o 'resume with: .*' "$BATS_TEST_TMPDIR/err")
	line=${line#resume with: }
}

@test "operator: the deadline is resumed as the time it resolved to, not read again at the resume" {
	start_slow 3
	local t0 at
	t0=$(date +%s)
	# --deadline VALUE: the value replaced; an earlier one, moot, left out.
	resume_line --deadline=+1h -j 2 --deadline +2h
	eval "set -- $line"
	[ "$#" -eq 8 ]
	[ "$2" = "-j" ]
	[ "$3" = 2 ]
	[ "$4" = "--deadline" ]
	at=${5#@}; at=${at%.*}
	[ "$at" -ge $((t0 + 7200)) ]
	[ "$at" -le $((t0 + 7260)) ]
	[ "$6" = "--run-dir" ]
	[ "$8" = "$M" ]
	# The same, each form the other way round.
	rm -rf "$RUN"
	resume_line --deadline +1h --deadline=+2h
	eval "set -- $line"
	[ "$#" -eq 5 ]
	case $2 in --deadline=@*) ;; *) false ;; esac
	[ "$3" = "--run-dir" ]
	# --deadline=VALUE, with a later option after it.
	rm -rf "$RUN"
	resume_line --deadline=+30m -j 2
	eval "set -- $line"
	[ "$#" -eq 7 ]
	case $2 in --deadline=@*) ;; *) false ;; esac
	at=${2#--deadline=@}; at=${at%.*}
	[ "$at" -ge $((t0 + 1800)) ]
	[ "$at" -le $((t0 + 1860)) ]
	[ "$3" = "-j" ]
	[ "$4" = 2 ]
	# A deadline given as a time of day is put in as its time too: after
	# it, the same words would mean tomorrow's.  A manifest named like a
	# relative deadline stays as typed.
	rm -rf "$RUN"
	cp "$M" "$BATS_TEST_TMPDIR/+1h"
	M=$BATS_TEST_TMPDIR/+1h
	at=$(date -d '+2 hours' +%H:%M)
	resume_line --deadline "$at"
	eval "set -- $line"
	[ "$#" -eq 6 ]
	at=${3#@}; at=${at%.*}
	[ "$at" -gt "$t0" ]
	[ "$at" -le $((t0 + 7260)) ]
	[ "$6" = "$M" ]
	# An empty last deadline is refused, as the stages refuse it, before
	# anything starts (it once ended the driver with "at: parameter not
	# set" and a resume line that could not be run).
	rm -rf "$RUN"
	run -2 --separate-stderr "$ROOT/pipeline.sh" --deadline +1h --deadline '' --run-dir "$RUN" "$M"
	[ "${stderr_lines[0]}" = "rfpipe: option --deadline: needs a value, not an empty one" ]
	[[ $stderr != *"parameter not set"* ]]
	[ ! -e "$RUN" ]
}

@test "operator: a relative deadline in the config is resumed as the time it resolved to, and every stage has that time" {
	start_slow 3
	local t0 at
	t0=$(date +%s)
	printf 'deadline: "+2h"\n' >"$BATS_TEST_TMPDIR/c.yaml"
	resume_line --config "$BATS_TEST_TMPDIR/c.yaml"
	eval "set -- $line"
	[ "$#" -eq 8 ]
	[ "$2" = "--deadline" ]
	at=${3#@}; at=${at%.*}
	[ "$at" -ge $((t0 + 7199)) ]
	[ "$at" -le $((t0 + 7260)) ]
	[ "$4" = "--config" ]
	[ "$8" = "$M" ]
	# rfp-fetch and rfp-backoff are given that time, not "+2h" to read.
	rm -rf "$RUN"
	local n0 pid dls
	n0=$(requests_for /slow/doc-1)
	setsid "$ROOT/pipeline.sh" --config "$BATS_TEST_TMPDIR/c.yaml" --run-dir "$RUN" "$M" 2>/dev/null &
	pid=$!
	POLL_STEP=0.01 poll 30 requests_at_least $((n0 + 1)) /slow/doc-1 || :
	dls=$(for p in $(pgrep -s "$pid"); do
		tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -- '^--deadline=' || :
	done)
	kill -TERM "$pid"
	timeout 10 tail --pid="$pid" -f /dev/null || kill -KILL -- -"$pid"
	[ "$(wc -l <<<"$dls")" -eq 2 ]
	[ "$(sort -u <<<"$dls" | wc -l)" -eq 1 ]
	[[ $dls == --deadline=@* ]]
	# A given --deadline wins over the config's, and is the one put in.
	rm -rf "$RUN"
	resume_line --config "$BATS_TEST_TMPDIR/c.yaml" --deadline +30m
	eval "set -- $line"
	[ "$#" -eq 8 ]
	[ "$4" = "--deadline" ]
	at=${5#@}; at=${at%.*}
	[ "$at" -ge $((t0 + 1799)) ]
	[ "$at" -le $((t0 + 1860)) ]
}

@test "operator: a resume line's deadline already past is refused with what to do, exit 2, nothing sent" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	run -2 --separate-stderr "$ROOT/pipeline.sh" --deadline @1700000000 --run-dir "$RUN" "$M"
	[[ $stderr == *'option --deadline: "@1700000000" ('*') is in the past: the run this resumes ran out of time; drop --deadline to finish it, or give a later one' ]]
	[ "$(requests_for)" -eq 0 ]
}

@test "operator: the command line to resume with is quoted for a shell" {
	start_slow 3
	cp "$M" "$BATS_TEST_TMPDIR/it's a manifest"
	M="$BATS_TEST_TMPDIR/it's a manifest"
	resume_line
	eval "set -- $line"
	[ "$#" -eq 4 ]
	[ "$3" = "$RUN" ]
	[ "$4" = "$M" ]
}

@test "operator: --queue with no manifest: a config whose deadline is past is refused, exit 2, one line, before anything" {
	# The check of a manifest refused it; with none, every stage read it
	# and dead-lettered each record pulled as deadline_cut.
	printf 'deadline: "2020-01-01T00:00"\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -2 --separate-stderr "$ROOT/pipeline.sh" --queue "postgresql:///none?host=$BATS_TEST_TMPDIR/nosock" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" --run-dir "$RUN"
	echo "$stderr"
	[ "$(wc -l <<<"$stderr")" -eq 1 ]
	[[ $stderr == *'key "deadline": "2020-01-01T00:00" is in the past'* ]]
	[ ! -e "$RUN" ]
}

@test "operator: a SIGTERM that comes as the run finishes, nothing left to stop, ends it as it would have, with no resume line" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	# rfp-sink has filed all and written the summary; then the signal.
	mkdir -p "$BATS_TEST_TMPDIR/shim"
	cat >"$BATS_TEST_TMPDIR/shim/rfp-sink" <<-EOF
	#!/bin/bash
	"$ROOT/bin/rfp-sink" "\$@"
	rc=\$?
	case " \$* " in *" --admitted-from="*) sleep 2 ;; esac
	exit \$rc
	EOF
	chmod +x "$BATS_TEST_TMPDIR/shim/rfp-sink"
	PATH=$BATS_TEST_TMPDIR/shim:$PATH setsid "$ROOT/pipeline.sh" --progress none --run-dir "$RUN" "$M" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	POLL_STEP=0.02 poll 10 test -s "$RUN/summary.json" || :
	kill -TERM "$pid"
	timeout 20 tail --pid="$pid" -f /dev/null || kill -KILL -- -"$pid"
	run -0 wait "$pid"
	grep -q 'rfpipe: SIGTERM came as the run finished: nothing was left to stop' "$BATS_TEST_TMPDIR/err"
	[ "$(grep -c 'resume with' "$BATS_TEST_TMPDIR/err")" -eq 0 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
}

@test "operator: a control character in the command line is not printed raw in the resume line, and reads back in bash and dash" {
	start_slow 3
	local name
	name=$(printf "m'\033[31m\tred\001")
	cp "$M" "$BATS_TEST_TMPDIR/$name"
	M="$BATS_TEST_TMPDIR/$name"
	resume_line
	# One line, no control character in it.
	[ "$(grep -c 'resume with: ' "$BATS_TEST_TMPDIR/err")" -eq 1 ]
	[ "$(LC_ALL=C grep -c '[[:cntrl:]]' <<<"$line")" -eq 0 ]
	eval "set -- $line"
	[ "$#" -eq 4 ]
	[ "$4" = "$M" ]
	[ "$(dash -c 'eval "set -- $1"; printf "%s" "$4"' _ "$line")" = "$M" ]
}

@test "operator: a C1 control in UTF-8 in the command line is not printed raw either, and reads back whichever shell runs rfpipe" {
	start_slow 3
	local name sh c1
	# U+009B (CSI, taken as ESC [), U+0085, and U+00A2 (a character).
	name=$(printf 'm\302\233[31m\302\205x\302\242')
	cp "$M" "$BATS_TEST_TMPDIR/$name"
	M="$BATS_TEST_TMPDIR/$name"
	c1="$(printf '\302')[$(printf '\200-\237')]"
	for sh in sh bash; do
		rm -rf "$RUN"
		LC_ALL=C.UTF-8 via=$sh resume_line
		[ "$(grep -c 'resume with: ' "$BATS_TEST_TMPDIR/err")" -eq 1 ]
		[ "$(LC_ALL=C grep -c "$c1" <<<"$line")" -eq 0 ]
		[ "$(LC_ALL=C grep -c '[[:cntrl:]]' <<<"$line")" -eq 0 ]
		eval "set -- $line"
		[ "$#" -eq 4 ]
		[ "$4" = "$M" ]
		[ "$(dash -c 'eval "set -- $1"; printf "%s" "$4"' _ "$line")" = "$M" ]
	done
}

@test "operator: rfp-sink told by rfp-fetch's report that the run was stopped counts the rest as pending" {
	mkdir -p "$RUN"
	echo '{"admitted":5,"skipped":0,"pid":1,"stopped":15}' >"$BATS_TEST_TMPDIR/rep"
	run -0 --separate-stderr rfp-sink --run-dir "$RUN" \
	    --admitted-from "$BATS_TEST_TMPDIR/rep" <"$FIX/sink/done.ndjson"
	[[ $stderr != *RECONCILIATION* ]]
	jq -e '.interrupted == true and .reconciled == true' "$RUN/summary.json"
}

@test "operator: installed, rfpipe runs under cron's PATH with env -i, and bash completion is installed" {
	command -v make >/dev/null || skip "make is not installed"
	P=$BATS_TEST_TMPDIR/p
	make -C "$ROOT" -s install PREFIX="$P" >/dev/null
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 5 nih >"$M"
	run -0 env -i PATH=/usr/bin:/bin HOME="$BATS_TEST_TMPDIR" \
	    RFPIPE_TIME_SCALE=0.01 "$P/bin/rfpipe" -q --run-dir "$RUN" "$M"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 5 ]
	[ -f "$P/share/bash-completion/completions/rfpipe" ]
	# The completion offers rfpipe's own options.
	run -0 bash -c ". '$P/share/bash-completion/completions/rfpipe'
	    COMP_WORDS=(rfpipe --dead); COMP_CWORD=1; _rfpipe
	    printf '%s\n' \"\${COMPREPLY[@]}\""
	[ "$output" = "--deadline" ]
}

@test "operator: the bash completion knows every option of rfpipe --help" {
	local comp=$ROOT/completion/rfpipe.bash o
	[ -f "$comp" ]
	for o in $(help_opts pipeline.sh | grep -- '^--'); do
		grep -q -- "$o" "$comp" || { echo "missing $o"; return 1; }
	done
	# rfpipe report: the word, then rfp-report's own options.
	cd "$BATS_TEST_TMPDIR"
	run -0 bash -c ". '$comp'; COMP_WORDS=(rfpipe rep); COMP_CWORD=1
	    _rfpipe; printf '%s\n' \"\${COMPREPLY[@]}\""
	[ "$output" = report ]
	run -0 bash -c ". '$comp'; COMP_WORDS=(rfpipe report run --me)
	    COMP_CWORD=3; _rfpipe; printf '%s\n' \"\${COMPREPLY[@]}\""
	[ "$output" = --metrics ]
	for o in $(help_opts "$ROOT/bin/rfp-report" | grep -- '^--' | grep -v -- --version); do
		grep -q -- "$o" "$comp" || { echo "report: missing $o"; return 1; }
	done
}

@test "operator: examples hold a crontab line and a systemd service and timer with the deadline" {
	grep -E '^[0-9*]+ [0-9*]+ .*rfpipe .*--deadline' "$ROOT/examples/cron/crontab"
	grep -q -- '--deadline' "$ROOT/examples/systemd/rfpipe.service"
	grep -q '^OnCalendar=' "$ROOT/examples/systemd/rfpipe.timer"
	grep -q '^SuccessExitStatus=3 4 5$' "$ROOT/examples/systemd/rfpipe.service"
	# The report is wired in: after the run, whatever its exit status.
	grep -E '^[0-9*]+ [0-9*]+ .*rfpipe .*--deadline[^&]*; rfpipe report .*--html' "$ROOT/examples/cron/crontab"
	grep -q '^ExecStopPost=/usr/bin/rfpipe report .*--html' "$ROOT/examples/systemd/rfpipe.service"
	# The timer's calendar reads (verify would want /usr/bin/rfpipe).
	if command -v systemd-analyze >/dev/null; then
		run -0 systemd-analyze calendar "$(sed -n 's/^OnCalendar=//p' "$ROOT/examples/systemd/rfpipe.timer")"
	fi
}

# Mistakes: each found before the run directory is made, named as typed.
mistake() {
	run -2 --separate-stderr pipeline.sh --run-dir "$RUN" "$@"
	[ ! -e "$RUN" ]
}

@test "operator: --deadline tomorrow is named as --deadline, exit 2, nothing made" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	mistake --deadline tomorrow "$M"
	[ "$stderr" = 'rfpipe: option --deadline: cannot read "tomorrow" as a time' ]
}

@test "operator: a deadline in the past is an error, exit 2" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	mistake --deadline 2020-01-01T00:00 "$M"
	[ "$stderr" = 'rfpipe: option --deadline: "2020-01-01T00:00" is in the past' ]
}

@test "operator: a config deadline in the past is an error, exit 2" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	echo 'deadline: "2020-01-01T00:00"' >"$BATS_TEST_TMPDIR/c.yaml"
	mistake --config "$BATS_TEST_TMPDIR/c.yaml" "$M"
	[ "$stderr" = "rfp-fetch: $BATS_TEST_TMPDIR/c.yaml: key \"deadline\": \"2020-01-01T00:00\" is in the past (2020-01-01T00:00:00Z)" ]
}

@test "operator: a config deadline that cannot be read is named as the config's key, not as an option, nothing made" {
	manifest /nih 3 nih >"$M"
	c=$BATS_TEST_TMPDIR/c.yaml
	printf 'max_attempts: 3\ndeadline: tomorrow\n' >"$c"
	want="rfp-backoff: $c:2: key \"deadline\": expected a time such as \"06:00\", \"2026-12-01T06:00Z\" or \"+8h\", got \"tomorrow\""
	mistake --config "$c" "$M"
	[ "$stderr" = "$want" ]
	run -2 --separate-stderr pipeline.sh --check --config "$c" "$M"
	[ "$stderr" = "$want" ]
	run -2 --separate-stderr rfp-fetch --config "$c" </dev/null
	[ "$stderr" = "${want/rfp-backoff/rfp-fetch}" ]
}

@test "operator: a configured rate under one a day is refused naming the key, exit 2, nothing made (1e-300 ran until killed)" {
	printf '{"id":"a","url":"http://127.0.0.1:1/a","endpoint":"nih"}\n' >"$M"
	c=$BATS_TEST_TMPDIR/c.yaml
	local r
	for r in 1e-300 0.00001; do
		printf 'endpoints:\n  nih: {rate: %s}\n' "$r" >"$c"
		mistake --config "$c" "$M"
		[ "$stderr" = "rfp-backoff: $c:2: key \"rate\": out of range: 0 (none), or from one a day (1/86400, 0.0000115741) to 1e6" ]
		printf 'rate: %s\n' "$r" >"$c"
		run -2 --separate-stderr rfp-fetch --config "$c" </dev/null
		[ "$stderr" = "rfp-fetch: $c:1: key \"rate\": out of range: 0 (none), or from one a day (1/86400, 0.0000115741) to 1e6" ]
	done
	# One a day, and none, are rates.
	for r in 0 0.0000115741 0.0000116; do
		printf 'endpoints:\n  nih: {rate: %s}\n' "$r" >"$c"
		run -0 --separate-stderr pipeline.sh --check --config "$c" "$M"
	done
}

@test "operator: -j abc is reported as -j before the run directory is made" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	mistake -j abc "$M"
	[[ $stderr == 'rfpipe: option -j: expected an integer from 1 to 4096, got "abc"'* ]]
	[[ $stderr != *fifo* ]]
	mistake --jobs=0 "$M"
	[[ $stderr == 'rfpipe: option --jobs: expected an integer from 1 to 4096, got "0"'* ]]
}

@test "operator: every usage mistake exits 2 before the run directory is made, naming the option as typed" {
	printf '{"id":"a","url":"http://127.0.0.1:9/a"}\n' >"$M"
	local args want
	while IFS='|' read -r args want; do
		# shellcheck disable=SC2086  # args are words
		run -2 --separate-stderr timeout 30 "$ROOT/pipeline.sh" --run-dir "$RUN" $args "$M"
		[ ! -e "$RUN" ] || fail "$args: the run directory was made"
		[[ ${stderr_lines[0]} == *": $want"* ]] ||
		    fail "$args: \"${stderr_lines[0]}\" does not say \"$want\""
	done <<-'EOF'
	--budget x|option --budget: expected a count or a multiple
	--max-attempts 0|option --max-attempts: expected an integer
	--progress bogus|option --progress: expected auto, plain or none
	--seed abc|option --seed: expected an integer
	--bogus|unknown option "--bogus"
	--sate=postgresql://u:S3cret@h/db|unknown option "--sate"
	--batch 5|option --batch: needs --queue
	--jobs 99999|option --jobs: expected an integer from 1 to 4096
	--deadline 25:00|option --deadline: cannot read "25:00" as a time
	--deadline=+abc|option --deadline: cannot read "+abc" as a time
	EOF
}

@test "operator: rfpipe --check prints the deadline that will apply" {
	printf '{"id":"a","url":"http://127.0.0.1:9/a"}\n' >"$M"
	run -0 --separate-stderr pipeline.sh --check --deadline 2099-01-01T06:00Z "$M"
	[[ $output == *"deadline: 2099-01-01T06:00:00Z"* ]]
	[[ $output == *"endpoint 127.0.0.1:9: 1 document; "* ]]
}

@test "operator: a config endpoint that matches no record is named with the records' endpoints: an error to --check, a warning to a run" {
	mock_start "$FIX/mock/ok.yaml"
	{ manifest /nih 2 nih; manifest /nsf 1; } >"$M"
	printf 'endpoints:\n  nih: {rate: 1}\n  reporter: {rate: 1}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	want="rfp-fetch: $BATS_TEST_TMPDIR/c.yaml: endpoint \"reporter\" matches no record; the records' endpoints are \"nih\", \"127.0.0.1:$MOCK_PORT\""
	run -2 --separate-stderr pipeline.sh --check --config "$BATS_TEST_TMPDIR/c.yaml" "$M"
	[ "$stderr" = "$want" ]
	# Tonight's manifest need not reach every portal the site's config names.
	run -0 --separate-stderr pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$M"
	[ "$stderr" = "$want" ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
}

@test "operator: a config none of whose endpoints any record has stops the run, nothing made" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 >"$M"
	printf 'endpoints:\n  nih: {rate: 1}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	mistake --config "$BATS_TEST_TMPDIR/c.yaml" "$M"
	[[ $stderr == *"endpoint \"nih\" matches no record; the records' endpoints are \"127.0.0.1:$MOCK_PORT\""* ]]
	[[ $stderr == *"none of its endpoints matches a record"* ]]
}

@test "operator: a run directory that cannot be made is one line and exit 2" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	: >"$BATS_TEST_TMPDIR/file"
	run -2 --separate-stderr pipeline.sh --run-dir "$BATS_TEST_TMPDIR/file/run" "$M"
	[ "$stderr" = "rfpipe: mkdir $BATS_TEST_TMPDIR/file/run: Not a directory" ]
}

@test "operator: a run directory, or its state/, that cannot be written is one line naming it and exit 2" {
	local d
	# Under /tmp, where nobody may reach it: modes mean nothing to root.
	d=$(mktemp -d /tmp/rfp-operator.XXXXXX)
	chmod 755 "$d"
	mkdir -p "$d/run/state" "$d/run/docs" "$d/run/logs"
	printf '{"id":"a","url":"http://127.0.0.1:9/a"}\n' >"$d/m"
	[ "$(id -u)" -ne 0 ] || chown -R nobody "$d"
	as_other() {
		if [ "$(id -u)" -eq 0 ]; then
			runuser -u nobody -- env PATH="$PATH" "$@"
		else
			"$@"
		fi
	}
	chmod 555 "$d/run"
	run --separate-stderr as_other timeout 20 "$ROOT/pipeline.sh" -q --run-dir "$d/run" "$d/m"
	chmod 755 "$d/run"
	r1=$status e1=$stderr
	chmod 555 "$d/run/state"
	run --separate-stderr as_other timeout 20 "$ROOT/pipeline.sh" -q --run-dir "$d/run" "$d/m"
	chmod 755 "$d/run/state"
	rm -rf "$d"
	[ "$r1" -eq 2 ]
	[ "$e1" = "rfp-backoff: run directory $d/run: Permission denied" ]
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfp-backoff: run directory $d/run: $d/run/state: Permission denied" ]
}

@test "operator: rfpipe --check prints per endpoint the documents and limits, exit 0, nothing made" {
	mock_start "$FIX/mock/ok.yaml"
	{ manifest /nih 2 nih; manifest /nsf 3 nsf; } >"$M"
	printf 'endpoints:\n  nih: {rate: 1, concurrency: 2, transient: [400]}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 --separate-stderr pipeline.sh --check --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" "$M"
	[ ! -e "$RUN" ]
	[[ $output == *"manifest: 5 lines, 5 documents, 0 bad"* ]]
	[[ $output == *"endpoint nih: 2 documents; concurrency 2, rate 1/s burst 0;"*"transient 400"* ]]
	[[ $output == *"endpoint nsf: 3 documents; concurrency 8, rate adaptive;"*"(defaults)"* ]]
	[[ $output == *"retries: max_attempts 5, budget 3x = 15"* ]]
}

@test "operator: rfpipe --check names each bad line and exits 2" {
	mock_start "$FIX/mock/ok.yaml"
	{ manifest /nih 2 nih; echo '{bad'; echo '{"id":"x"}'; } >"$M"
	run -2 --separate-stderr pipeline.sh --check --run-dir "$RUN" "$M"
	[ ! -e "$RUN" ]
	[[ $stderr == *"rfp-fetch: line 3: malformed JSON"* ]]
	[[ $stderr == *'rfp-fetch: line 4: missing field "url"'* ]]
	[[ $output == *"manifest: 4 lines, 2 documents, 2 bad"* ]]
}

@test "operator: rfpipe --check shows a manifest's endpoint without its control bytes, as the run's table does" {
	printf '%s\n' '{"id":"d","url":"http://127.0.0.1:1/a","endpoint":"e\u001b]0;pwned\u0007\u001b[8mhidden\nendpoint fake: 9 documents"}' >"$M"
	run -0 --separate-stderr pipeline.sh --check "$M"
	[[ $output == *"manifest: 1 lines, 1 documents, 0 bad"* ]]
	[[ $output == *'endpoint e?]0;pwned??[8mhidden?endpoint fake: 9 documents: 1 document;'* ]]
	[ "$(grep -c '^endpoint ' <<<"$output")" -eq 1 ]
	[ "$(LC_ALL=C grep -c '[[:cntrl:]]' <<<"$output")" -eq 0 ]
}

# Classification: one test per code.
cls() {
	run -0 rfp-classify "${@:2}" <<<"$1"
}

@test "operator: classify: 408 Request Timeout is transient http_408" {
	cls '{"id":"a","status":408}'
	check a '.class == "transient" and .reason == "http_408"'
}

@test "operator: classify: 425 Too Early is transient http_425" {
	cls '{"id":"a","status":425}'
	check a '.class == "transient" and .reason == "http_425"'
}

@test "operator: classify: 409 to a submission (sent with Idempotency-Key) is transient" {
	cls '{"id":"a","method":"POST","status":409}'
	check a '.class == "transient" and .reason == "http_409"'
	cls '{"id":"b","status":409}'
	check b '.class == "permanent" and .reason == "unknown_http_409"'
	# A POST marked idempotent is no submission and carries no key.
	cls '{"id":"c","method":"POST","idempotent":true,"status":409}'
	check c '.class == "permanent" and .reason == "unknown_http_409"'
}

@test "operator: classify: dns and tls_handshake errors are transient, a bad certificate is not" {
	cls '{"id":"a","status":null,"error":"dns"}'
	check a '.class == "transient" and .reason == "dns"'
	cls '{"id":"b","status":null,"error":"tls_handshake"}'
	check b '.class == "transient"'
	cls '{"id":"c","status":null,"error":"tls"}'
	check c '.class == "permanent"'
}

@test "operator: classify: a config's transient and permanent lists apply per endpoint" {
	cat >"$BATS_TEST_TMPDIR/c.yaml" <<-'EOF'
	transient: ["520-524"]
	endpoints:
	  slow: {transient: [400], permanent: [503, 521]}
	EOF
	c=--config=$BATS_TEST_TMPDIR/c.yaml
	# Without them, unknown is permanent.
	cls '{"id":"z","endpoint":"other","status":522}'
	check z '.class == "permanent" and .reason == "unknown_http_522"'
	cls '{"id":"a","endpoint":"slow","status":400}' "$c"
	check a '.class == "transient" and .reason == "http_400"'
	cls '{"id":"b","endpoint":"other","status":400}' "$c"
	check b '.class == "permanent"'
	cls '{"id":"c","endpoint":"other","status":522}' "$c"
	check c '.class == "transient" and .reason == "http_522"'
	cls '{"id":"d","endpoint":"slow","status":521}' "$c"
	check d '.class == "permanent" and .reason == "http_521"'
	cls '{"id":"e","endpoint":"slow","status":503}' "$c"
	check e '.class == "permanent" and .reason == "http_503"'
}

@test "operator: classify: --transient and --permanent win over the config" {
	printf 'endpoints:\n  slow: {permanent: [503]}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	cls '{"id":"a","endpoint":"slow","status":503}' --config "$BATS_TEST_TMPDIR/c.yaml" --transient 503
	check a '.class == "transient"'
	cls '{"id":"b","endpoint":"x","status":404}' --permanent 500 --transient 404
	check b '.class == "transient"'
}

@test "operator: classify: bad status lists are configuration errors, exit 2" {
	run -2 --separate-stderr rfp-classify --transient 200 </dev/null
	[[ $stderr == 'rfp-classify: option --transient: expected statuses such as "400,520-524" (100 to 599, not 2xx), got "200"'* ]]
	run -2 --separate-stderr rfp-classify --transient 400 --permanent 400 </dev/null
	[[ $stderr == *'a status also in --permanent'* ]]
	printf 'endpoints:\n  a:\n    transient: [400]\n    permanent: [400]\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -2 --separate-stderr rfp-classify --config "$BATS_TEST_TMPDIR/c.yaml" </dev/null
	[ "$stderr" = "rfp-classify: $BATS_TEST_TMPDIR/c.yaml:4: key \"permanent\": a status is in both transient and permanent" ]
}

@test "operator: rfpipe passes the config's status lists to rfp-classify: a 400 declared transient is retried" {
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF'
	routes:
	  - {match: "/slowdown/*", endpoint: sd, script: [400, 200]}
	EOF
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /slowdown 2 sd >"$M"
	printf 'endpoints:\n  sd: {transient: [400]}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q --run-dir "$RUN" --seed 1 --config "$BATS_TEST_TMPDIR/c.yaml" "$M"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 2 ]
}

# The four stages by hand, the retry loop through a FIFO as rfpipe does.
@test "operator: the four stages composed by hand, no --budget, get rfpipe's results on the same manifest" {
	mock_start "$FIX/pipeline/statuses.yaml"
	{ manifest /twice503 3 flaky; manifest /ok 5 ok; manifest /s404 1 nf; } >"$M"
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	R1=$BATS_TEST_TMPDIR/byhand
	run -0 timeout 30 sh -c '
	    rfp-fetch --run-dir "$1" --retry-fifo "$2" <"$3" |
	    rfp-classify |
	    rfp-backoff --run-dir "$1" --seed 1 |
	    rfp-sink --run-dir "$1" --retry-fifo "$2"' sh "$R1" \
	    "$BATS_TEST_TMPDIR/fifo" "$M"
	run -3 timeout 30 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --seed 1 "$M"
	for d in "$R1" "$RUN"; do
		jq -r '.id' "$d/results.ndjson" | sort >"$d.ok"
		jq -r '[.id, .dead_reason] | @tsv' "$d/dead.ndjson" | sort >"$d.dead"
	done
	[ "$(wc -l <"$R1.ok")" -eq 8 ]
	cmp "$R1.ok" "$RUN.ok"
	cmp "$R1.dead" "$RUN.dead"
	[ "$(cat "$R1.dead")" = "$(printf 'nf-1\tpermanent')" ]
}

@test "operator: by hand, an rfp-sink that never starts does not leave rfp-fetch waiting for ever" {
	printf '{"id":"a","url":"http://127.0.0.1:9/a"}\n' >"$M"
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	# A mistyped option: rfp-sink exits before it opens the FIFO.  The
	# wait is 15 logical seconds, never under 2 real ones: 20 s here.
	export RFPIPE_TIME_SCALE=0.1
	run --separate-stderr timeout 60 sh -c '
	    rfp-fetch --run-dir "$1" --retry-fifo "$2" <"$3" |
	    rfp-classify |
	    rfp-backoff --run-dir "$1" --seed 1 |
	    rfp-sink --run-dir "$1" --retry-fifo "$2" --bogus' sh "$RUN" \
	    "$BATS_TEST_TMPDIR/fifo" "$M"
	[ "$status" -eq 2 ]
	[[ $stderr == *'rfp-sink: unknown option "--bogus"'* ]]
	[[ $stderr == *"rfp-fetch: rfp-sink has not opened $BATS_TEST_TMPDIR/fifo in 20 s; stopping: a re-run on this run directory fetches what was not filed"* ]]
}

@test "operator: rfp-backoff without --admitted grows a multiple budget with the documents it sees" {
	mkdir -p "$RUN"
	run -0 rfp-backoff --run-dir "$RUN" --seed 1 <<-'EOF'
	{"id":"a","attempt":1,"class":"transient","reason":"http_503"}
	{"id":"b","attempt":1,"class":"ok","reason":"http_200"}
	EOF
	check a '.fate == "retry"'
	jq -e '.total == 3 and .left == 2' "$RUN/state/budget.json"
	run -0 rfp-backoff --run-dir "$RUN" --seed 1 <<-'EOF'
	{"id":"c","attempt":1,"class":"ok","reason":"http_200"}
	{"id":"d","attempt":1,"class":"ok","reason":"http_200"}
	{"id":"a","attempt":2,"class":"transient","reason":"http_503"}
	EOF
	check a '.fate == "retry"'
	jq -e '.total == 6 and .left == 4' "$RUN/state/budget.json"
}

# A portal that is down is not silent.
@test "operator: a down endpoint is warned of at once, and its dead letters say unreachable" {
	for i in 1 2 3; do
		printf '{"id":"d%d","url":"http://127.0.0.1:9/x%d"}\n' "$i" "$i"
	done >"$M"
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --seed 1 "$M"
	[ "$(grep -c 'is not answering' <<<"$stderr")" -eq 1 ]
	[[ $stderr == *'rfp-fetch: endpoint "127.0.0.1:9" is not answering: connect (Couldn'"'"'t connect to server)'* ]]
	[ "$(jq -s 'map(select(.dead_detail | endswith("unreachable (connect)"))) | length' "$RUN/dead.ndjson")" -eq 3 ]
	jq -e '.run.endpoints["127.0.0.1:9"].last_error == "unreachable"' "$RUN/summary.json"
	# And the table says so.
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" --progress none --run-dir "$RUN.2" --seed 1 "$M"
	grep -Eq '^  127\.0\.0\.1:9 +0 +3 +0  unreachable$' <<<"$stderr"
}

@test "operator: a host that does not resolve is warned of once, as dns, and its dead letters say unreachable (dns)" {
	# .invalid never resolves (RFC 6761): skip where the resolver cannot
	# say so at once.
	run timeout 5 getent hosts rfpipe-test.invalid
	[ "$status" -eq 2 ] || skip "the resolver does not say at once that .invalid does not resolve"
	for i in 1 2 3; do
		printf '{"id":"n%d","url":"http://rfpipe-test.invalid/x%d"}\n' "$i" "$i"
	done >"$M"
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --seed 1 "$M"
	[ "$(grep -c 'is not answering' <<<"$stderr")" -eq 1 ]
	[[ $stderr == *'rfp-fetch: endpoint "rfpipe-test.invalid" is not answering: dns ('* ]]
	[ "$(jq -s 'map(select(.dead_detail | endswith("unreachable (dns)"))) | length' "$RUN/dead.ndjson")" -eq 3 ]
	jq -e '.run.endpoints["rfpipe-test.invalid"].last_error == "unreachable"' "$RUN/summary.json"
}

@test "operator: off a terminal, progress prints a plain line every 30 logical seconds" {
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF2'
	routes:
	  - {match: "/slow/*", endpoint: slow, delay_ms: 100000}
	EOF2
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /slow 2 slow >"$M"
	# 200 logical seconds of answers: a few lines, not one per record.
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -j 1 --run-dir "$RUN" "$M" 2>/dev/null
	n=$(grep -c '^rfp-sink: progress: ' <<<"$stderr")
	[ "$n" -ge 2 ]
	[ "$n" -le 20 ]
	# Plain: one line each, nothing a terminal would draw with.
	[[ $stderr != *$'\r'* && $stderr != *$'\e'* ]]
}

@test "operator: the breaker opening is warned of once, the moment it opens" {
	mock_start "$FIX/pipeline/outage.yaml"
	manifest /down 30 down >"$M"
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" \
	    --seed 1 --config "$FIX/pipeline/breaker.yaml" --max-attempts 10 "$M"
	openings=$(jq .openings "$RUN/state/breaker/down.json")
	n=$(grep -c '^rfp-fetch: endpoint "down": the breaker is open; its documents wait [0-9]* s for a probe$' <<<"$stderr")
	[ "$n" -ge 1 ] && [ "$n" -le "$openings" ]
}

@test "operator: a bad --state or --queue is named before the run directory is made" {
	manifest /nih 1 nih >"$M"
	mistake --state foo "$M"
	[ "${stderr_lines[0]}" = 'rfpipe: option --state: expected a postgresql:// URL' ]
	mistake --queue foo "$M"
	[ "${stderr_lines[0]}" = 'rfpipe: option --queue: expected a postgresql:// URL' ]
	# One libpq would misread and quote back, password and all.
	mistake --state 'postgresql://u:Pa@S3cret@h/db' "$M"
	[ "$stderr" = 'rfpipe: option --state: an @ after the user name and password: write an @ in a password or database name as %40' ]
	mistake --queue 'postgresql://u:S3/cret@h/db' "$M"
	[ "$stderr" = 'rfpipe: option --queue: an @ after a /, where libpq reads no user name: write a / in a password as %2F, an @ in a database name as %40' ]
}

@test "operator: a --retry-fifo that is a regular file is refused by rfp-fetch and rfp-sink, nothing sent" {
	start_slow 2
	touch "$BATS_TEST_TMPDIR/retry.fifo"
	run --separate-stderr timeout 10 rfp-fetch --run-dir "$RUN" \
	    --retry-fifo "$BATS_TEST_TMPDIR/retry.fifo" <"$M"
	[ "$status" -eq 1 ]
	[ "$stderr" = "rfp-fetch: $BATS_TEST_TMPDIR/retry.fifo: not a FIFO (make it with mkfifo)" ]
	[ -z "$output" ]
	[ "$(requests_for /slow/doc-1)" -eq 0 ]
	run --separate-stderr timeout 10 rfp-sink --run-dir "$RUN" \
	    --retry-fifo "$BATS_TEST_TMPDIR/retry.fifo" </dev/null
	[ "$status" -eq 1 ]
	[ "$stderr" = "rfp-sink: $BATS_TEST_TMPDIR/retry.fifo: not a FIFO (make it with mkfifo)" ]
	[ ! -s "$BATS_TEST_TMPDIR/retry.fifo" ]
}

# failing STAGE N [STATUS]: a STAGE first in $BATS_TEST_TMPDIR/shim that, in
# a run (not a check), passes N records through the real stage, says why it
# fails and exits STATUS (1): an early failure.  N 0: it fails at once.
failing() {
	mkdir -p "$BATS_TEST_TMPDIR/shim"
	cat >"$BATS_TEST_TMPDIR/shim/$1" <<-EOF
	#!/bin/bash
	case " \$* " in *" --check "*|*" --list "*) exec "$ROOT/bin/$1" "\$@" ;; esac
	case " \$* " in *" --run-dir="*" --admitted="*|*" --run-dir="*" --retry-fifo="*) ;;
	*) exec "$ROOT/bin/$1" "\$@" ;; esac
	[ "$2" -gt 0 ] && head -n "$2" | "$ROOT/bin/$1" "\$@"
	echo "$1: it broke" >&2
	exit ${3:-1}
	EOF
	chmod +x "$BATS_TEST_TMPDIR/shim/$1"
}

@test "operator: rfp-fetch failing at start-up is said once: no line from rfp-sink about the retry pipe or the missing report" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	failing rfp-fetch 0
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -1 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[ "$stderr" = "rfp-fetch: it broke
rfpipe: rfp-fetch failed with status 1" ]
	jq -e '.interrupted == true and .admitted == null' "$RUN/summary.json"
}

@test "operator: rfp-sink failing at start-up is named first, the stages it stopped after it" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	failing rfp-sink 0
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -1 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[[ $stderr == "rfp-sink: it broke"* ]]
	[ "$(grep -c '^rfpipe: ' <<<"$stderr")" -eq 1 ]
	[[ $stderr == *"rfpipe: rfp-sink failed with status 1"* ]]
}

@test "operator: rfp-sink refusing its arguments (status 2) is named first, not the rfp-fetch it stopped, and the run exits 2" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	failing rfp-sink 0 2
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -2 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[[ $stderr == "rfp-sink: it broke"* ]]
	[ "$(grep -c '^rfpipe: ' <<<"$stderr")" -eq 1 ]
	[[ $stderr == *"rfpipe: rfp-sink failed with status 2 (then "* ]]
	# Nothing was sent: no stage was there to file it.
	[ "$(requests_for)" -eq 0 ]
}

@test "operator: two stages refusing their arguments (status 2) are both named, and the run exits 2" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	failing rfp-sink 0 2
	failing rfp-fetch 0 2
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -2 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[ "$(grep -c '^rfpipe: ' <<<"$stderr")" -eq 1 ]
	grep -Eq '^rfpipe: rfp-(sink|fetch) failed with status 2 \(then rfp-(fetch|sink) 2\)$' <<<"$stderr"
	[ "$(requests_for)" -eq 0 ]
}

@test "operator: rfp-sink refusing its environment at its start: no submission sent, rfp-fetch stopped at once, rfp-sink named first" {
	mock_start "$FIX/mock/ok.yaml"
	local i
	for i in 1 2 3; do
		printf '{"id":"s-%d","url":"%s/nih/s%d","endpoint":"nih","method":"POST","body":{}}\n' "$i" "$MOCK_URL" "$i"
	done >"$M"
	RFPIPE_PROGRESS_INTERVAL=30s run -2 --separate-stderr timeout 60 "$ROOT/pipeline.sh" --progress plain --run-dir "$RUN" "$M"
	[[ $stderr == *'RFPIPE_PROGRESS_INTERVAL: expected a number of seconds'* ]]
	[[ $stderr == *"rfpipe: rfp-sink failed with status 2 (then "* ]]
	[ "$(requests_for)" -eq 0 ]
	# Stopped by the driver, not left to its 15 s wait for rfp-sink.
	[[ $stderr != *"rfp-sink has not opened"* ]]
}

@test "operator: a stage failing mid-run is said once, the others after it in one line; the rest is pending, not a failed reconciliation, and a re-run files it" {
	printf 'routes:\n  - {match: "/f/*", endpoint: f, delay_ms: 100}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /f 6 f >"$M"
	failing rfp-backoff 1
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -1 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[[ $stderr == *"rfp-backoff: it broke"* ]]
	[ "$(grep -c '^rfpipe: ' <<<"$stderr")" -eq 1 ]
	[[ $stderr == *"rfpipe: rfp-backoff failed with status 1 (then "* ]]
	[[ $stderr != *"rfp-sink: "* ]]
	jq -e '.interrupted == true and .admitted == 6 and .reconciled == true and .pending + .run.succeeded + .run.dead == 6' "$RUN/summary.json"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 6 ]
}
