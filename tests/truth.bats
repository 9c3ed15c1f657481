#!/usr/bin/env bats
# The run directory is the unit of truth: after any sequence of runs,
# resumes and --retry-dead, each manifest line stands in exactly one of
# results.ndjson and dead.ndjson (each id once, but for a duplicate id's
# own letter), and the exit status speaks for the whole directory (#19).

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	# Three 503s, then 200: two attempts a night are not enough.
	printf 'routes:\n  - {match: "/ok/*", endpoint: p}\n  - {match: "/late/*", endpoint: p, script: [503, 503, 200]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /ok 6 p; manifest /late 4 p | sed 's/"id":"p-/"id":"late-/'; } >"$BATS_TEST_TMPDIR/m"
	printf 'max_attempts: 2\nbudget: 100\n' >"$BATS_TEST_TMPDIR/c.yaml"
}

@test "truth: --retry-dead that saves the dead leaves them in results.ndjson alone, and the run exits 0" {
	run -3 pipeline.sh -q --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 4 ]
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" --retry-dead "$BATS_TEST_TMPDIR/m"
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	[ ! -s "$RUN/dead.ndjson" ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 10 ]
	jq -e '.totals.dead == 0 and .totals.succeeded == 10' "$RUN/summary.json"
	# The README's triage now shows nothing dead.
	[ -z "$(jq -r .dead_reason "$RUN/dead.ndjson")" ]
}

@test "truth: a resume of a directory with dead letters admits nothing and still exits 3" {
	run -3 pipeline.sh -q --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	run -3 --separate-stderr pipeline.sh --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *"run directory totals: 6 in results.ndjson, 4 in dead.ndjson"* ]]
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
}

@test "truth: a duplicate id in a manifest: its first line done in results, the duplicate line one letter in dead.ndjson" {
	{ cat "$BATS_TEST_TMPDIR/m"; manifest /ok 1 p; } >"$BATS_TEST_TMPDIR/m2"
	run pipeline.sh -q --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m2"
	# Every manifest line in one place: p-1 twice, once in each file.
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m2"
	jq -se 'map(select(.id == "p-1")) | length == 1 and .[0].fate == "done"' "$RUN/results.ndjson"
	jq -se 'map(select(.id == "p-1")) | length == 1 and .[0].dead_reason == "bad_input" and .[0].line == 11 and (.[0].line_key | type) == "string"' "$RUN/dead.ndjson"
	jq -e '.admitted == 11 and .run.dead == .totals.dead and .reconciled' "$RUN/summary.json"
}

@test "truth: two sinks on one run directory: the rewrite waits for the last, and no letter is lost" {
	run -3 pipeline.sh -q --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	# A sink that is still filing holds the directory: the other's end
	# leaves dead.ndjson as it is, superseded letters and all.
	exec 8<>"$RUN/state/sink.lock"
	flock -s 8
	jq -c 'select(.id == "late-1") | del(.fate, .dead_reason, .dead_detail) + {fate: "done", status: 200}' "$RUN/dead.ndjson" |
	    rfp-sink --run-dir "$RUN" -q
	[ "$(jq -s 'map(select(.id == "late-1")) | length' "$RUN/dead.ndjson")" -eq 1 ]
	exec 8<&-
	: | rfp-sink --run-dir "$RUN" -q
	[ "$(jq -s 'map(select(.id == "late-1")) | length' "$RUN/dead.ndjson")" -eq 0 ]
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 3 ]
}

@test "truth: two overlapping runs of one manifest on one run directory fetch each id once and file it once" {
	mock_stop
	export RFPIPE_TIME_SCALE=0.1
	printf 'routes:\n  - {match: "/slow/*", endpoint: s, delay_ms: 2000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	# Every request after the fourth held until the second run has met
	# the first's: waited for by a count of answers, the second started
	# as the first ended (the sanitizers, a loaded machine) and met none.
	mock_start "$BATS_TEST_TMPDIR/s.yaml" --hold-at 4
	manifest /slow 30 s >"$BATS_TEST_TMPDIR/m"
	timeout 120 "$ROOT/pipeline.sh" -q -j 4 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" 2>"$BATS_TEST_TMPDIR/e1" &
	p=$!
	# The second cron job starts while the first is on the wire.
	mock_held 1 30
	timeout 120 "$ROOT/pipeline.sh" -q -j 4 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" \
	    >"$BATS_TEST_TMPDIR/e2" 2>&1 &
	q=$!
	poll 30 matches "$BATS_TEST_TMPDIR/e2" 'is being processed by another pipeline on this run directory' ||
	    fail "the second run met none of the first's ids: $(head -n 3 "$BATS_TEST_TMPDIR/e2")"
	mock_release
	wait "$q" || :
	wait "$p"
	[ "$(jq -s '[.[] | select(.kind == "request")] | group_by(.path) | map(length) | max' "$MOCK_LOG")" -eq 1 ]
	[ "$(jq -s 'map(.id) | unique | length' "$RUN/results.ndjson")" -eq 30 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 30 ]
	[ ! -s "$RUN/dead.ndjson" ]
}

@test "truth: the claims of a pipeline that died are nobody's: a re-run takes them" {
	mock_stop
	export RFPIPE_TIME_SCALE=0.1
	printf 'routes:\n  - {match: "/slow/*", endpoint: s, delay_ms: 20000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /slow 6 s >"$BATS_TEST_TMPDIR/m"
	setsid "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" 2>/dev/null &
	p=$!
	poll 10 lines_at_least 2 "$MOCK_LOG" || :
	kill -KILL -- "-$p"
	wait "$p" || :
	[ -s "$RUN/state/claims.ndjson" ]
	mock_stop
	printf 'routes:\n  - {match: "/slow/*", endpoint: s}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	sed -i "s|127.0.0.1:[0-9]*|127.0.0.1:$MOCK_PORT|" "$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 6 ]
}

@test "truth: an id another pipeline filed a moment ago is not fetched again, however soon after the files were read" {
	mkdir -p "$RUN/state"
	: >"$RUN/results.ndjson"
	# A pipeline still alive (its owner file locked) holds an id, so the
	# claims are kept; p-1 is held by one that has ended.
	mkdir -p "$RUN/state/owners"
	: >"$RUN/state/owners/3.3"
	flock "$RUN/state/owners/3.3" sleep 60 &
	holder=$!
	printf '{"id":"elsewhere","owner":"3.3"}\n{"id":"p-1","owner":"1.1"}\n' >"$RUN/state/claims.ndjson"
	manifest /ok 2 p >"$BATS_TEST_TMPDIR/m"
	{
		sed -n 1p "$BATS_TEST_TMPDIR/m"
		# p-1 met, the files were read; now another pipeline files p-2
		# and ends, and p-2 comes here at once.
		POLL_STEP=0.01 poll 5 requests_at_least 1 /ok/doc-1 || :
		sed -n 2p "$BATS_TEST_TMPDIR/m" | jq -c '. + {fate: "done", status: 200}' >>"$RUN/results.ndjson"
		printf '{"id":"p-2","owner":"2.2"}\n' >>"$RUN/state/claims.ndjson"
		sed -n 2p "$BATS_TEST_TMPDIR/m"
	} | timeout 60 rfp-fetch --resume --run-dir "$RUN" >"$BATS_TEST_TMPDIR/out" 2>/dev/null
	kill "$holder"
	[ "$(requests_for /ok/doc-2)" -eq 0 ]
	jq -s -e 'map(.id) == ["p-1"]' "$BATS_TEST_TMPDIR/out"
}

# hold_owner NAME: a pipeline alive on RUN (its owner file locked), for
# as long as the test runs; its pid in HOLDER.
hold_owner() {
	mkdir -p "$RUN/state/owners"
	(
		exec 9>>"$RUN/state/owners/$1"
		flock 9
		exec sleep 60
	) &
	HOLDER=$!
	POLL_STEP=0.01 poll 2 not flock -n "$RUN/state/owners/$1" true
}

@test "truth: a claim appended after a torn claims line stands on a line of its own, and another pipeline leaves its id alone" {
	hold_owner 3.3
	# A claim torn by a kill: no newline.
	printf '{"id":"elsewhere","owner":"3.3"}\n{"id":"torn-1","ow' >"$RUN/state/claims.ndjson"
	manifest /ok 1 p >"$BATS_TEST_TMPDIR/m"
	# Pipeline A claims p-1, fetches it and stays alive.
	{
		cat "$BATS_TEST_TMPDIR/m"
		poll 30 test -e "$BATS_TEST_TMPDIR/go" || :
	} | timeout 60 rfp-fetch --run-dir "$RUN" >/dev/null 2>&1 &
	a=$!
	POLL_STEP=0.01 poll 5 requests_at_least 1 /ok/doc-1 || :
	[ "$(requests_for /ok/doc-1)" -eq 1 ]
	# B, on the same manifest, leaves it to A.
	run --separate-stderr timeout 60 rfp-fetch --resume --run-dir "$RUN" <"$BATS_TEST_TMPDIR/m"
	touch "$BATS_TEST_TMPDIR/go"
	wait "$a"
	kill "$HOLDER"
	[[ $stderr == *'"p-1" is being processed by another pipeline'* ]]
	[ "$(requests_for /ok/doc-1)" -eq 1 ]
	# Every claim whole, on its own line.
	[ "$(grep -c '^{"id":"p-1","owner":"[^"]*"}$' "$RUN/state/claims.ndjson")" -ge 1 ]
}

@test "truth: an id a pipeline that has ended filed after this run read the files is counted as filed, not as held" {
	manifest /ok 2 p >"$BATS_TEST_TMPDIR/m"
	mkdir -p "$RUN/state" "$RUN/docs" "$RUN/logs"
	# p-1 claimed by a pipeline running when this one starts.
	hold_owner 9.9
	printf '{"id":"p-1","owner":"9.9"}\n' >"$RUN/state/claims.ndjson"
	{
		sed -n 2p "$BATS_TEST_TMPDIR/m"
		poll 30 test -e "$BATS_TEST_TMPDIR/go" || :
		sed -n 1p "$BATS_TEST_TMPDIR/m"
	} | timeout 60 rfp-fetch --resume --run-dir "$RUN" \
	    --report "$BATS_TEST_TMPDIR/report.json" >/dev/null 2>"$BATS_TEST_TMPDIR/err" &
	a=$!
	POLL_STEP=0.01 poll 5 requests_at_least 1 /ok/doc-2 || :
	# It files p-1 and ends meanwhile; then the line reaches this run.
	printf '{"id":"p-1","status":200,"fate":"done"}\n' >>"$RUN/results.ndjson"
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || :
	touch "$BATS_TEST_TMPDIR/go"
	wait "$a"
	[ "$(requests_for /ok/doc-1)" -eq 0 ]
	jq -e '.skipped == 1 and .held == 0 and .admitted == 1' "$BATS_TEST_TMPDIR/report.json"
	! grep -q 'being processed by another pipeline' "$BATS_TEST_TMPDIR/err"
}

# left_then_filed [LINE...]: rfp-fetch --resume, results.ndjson holding a
# corrupt line, meets p-1 while pipeline 9.9 (alive) holds it, and leaves
# it to 9.9; which files it, still running, before this run ends, the
# file replaced as a compaction does (read again whole), LINE... written
# before p-1's record; then p-2 comes.  The report in report.json,
# stderr in err.
left_then_filed() {
	manifest /ok 2 p >"$BATS_TEST_TMPDIR/m"
	mkdir -p "$RUN/state" "$RUN/docs" "$RUN/logs"
	echo 'not a record' >"$RUN/results.ndjson"
	hold_owner 9.9
	printf '{"id":"p-1","owner":"9.9"}\n' >"$RUN/state/claims.ndjson"
	{
		sed -n 1p "$BATS_TEST_TMPDIR/m"
		POLL_STEP=0.01 poll 5 matches "$BATS_TEST_TMPDIR/err" 'being processed by another pipeline' || :
		{
			cat "$RUN/results.ndjson"
			[ "$#" -eq 0 ] || printf '%s\n' "$@"
			printf '{"id":"p-1","status":200,"fate":"done"}\n'
		} >"$RUN/results.new"
		mv "$RUN/results.new" "$RUN/results.ndjson"
		sed -n 2p "$BATS_TEST_TMPDIR/m"
	} | timeout 60 rfp-fetch --resume --run-dir "$RUN" \
	    --report "$BATS_TEST_TMPDIR/report.json" >/dev/null 2>"$BATS_TEST_TMPDIR/err"
	kill "$HOLDER"
}

@test "truth: an id left to a live pipeline that files it before this run ends is counted as filed, not as held" {
	# A corrupt line: said once, however often the files are read.
	left_then_filed
	grep -q '"p-1" is being processed by another pipeline' "$BATS_TEST_TMPDIR/err"
	[ "$(requests_for /ok/doc-1)" -eq 0 ]
	[ "$(requests_for /ok/doc-2)" -eq 1 ]
	jq -e '.skipped == 1 and .held == 0 and .admitted == 1 and .held_by == {}' "$BATS_TEST_TMPDIR/report.json"
	[ "$(grep -c 'unreadable record' "$BATS_TEST_TMPDIR/err")" -eq 1 ]
	! grep -q 'left to' "$BATS_TEST_TMPDIR/err"
}

@test "truth: a corrupt line that comes after the first read of the files is said too, once, and one said before is not said again" {
	# Another corrupt line, and p-1 filed, the file replaced: read again
	# whole, its line 1 is not said again, its line 2 is.
	left_then_filed 'not a record either'
	jq -e '.skipped == 1 and .held == 0 and .admitted == 1' "$BATS_TEST_TMPDIR/report.json"
	[ "$(grep -c 'results.ndjson:1: unreadable record' "$BATS_TEST_TMPDIR/err")" -eq 1 ]
	[ "$(grep -c 'results.ndjson:2: unreadable record' "$BATS_TEST_TMPDIR/err")" -eq 1 ]
	[ "$(grep -c 'unreadable record' "$BATS_TEST_TMPDIR/err")" -eq 2 ]
}

@test "truth: an id left to a pipeline that ends without filing it is orphaned, not held: exit 5, said, and a re-run files it" {
	mock_stop
	# q-1 keeps the run going while the holder is killed: 0.2 s real
	# (the portal's clock is the suite's, 100 times faster; under its
	# 30 s timeout).  At 15 ms, the run ended first at times (2 in 8),
	# the holder still running.
	printf 'routes:\n  - {match: "/ok/*", endpoint: ok}\n  - {match: "/slow/*", endpoint: slow, delay_ms: 20000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{
		manifest /ok 1 p
		manifest /slow 1 q
	} >"$BATS_TEST_TMPDIR/m"
	hold_owner 3.3
	printf '{"id":"p-1","owner":"3.3"}\n' >"$RUN/state/claims.ndjson"
	timeout 60 "$ROOT/pipeline.sh" --progress none --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	POLL_STEP=0.01 poll 5 matches "$BATS_TEST_TMPDIR/err" 'being processed by another pipeline' || :
	# The holder ends (its deadline, a kill) without filing p-1.
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || :
	code=0
	wait "$pid" || code=$?
	[ "$code" -eq 5 ]
	grep -q 'rfp-fetch: 1 ids left to other pipelines were not finished by them before they ended: a re-run takes them up' "$BATS_TEST_TMPDIR/err"
	grep -q '  orphaned              1  left to a pipeline that ended without finishing them: a re-run takes them up' "$BATS_TEST_TMPDIR/err"
	[ "$(grep -c 'held elsewhere' "$BATS_TEST_TMPDIR/err")" -eq 0 ]
	jq -e '.run.held == 0 and .run.orphaned == 1 and .held_by == {}' "$RUN/summary.json"
	[ "$(requests_for /ok/doc-1)" -eq 0 ]
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 2 ]
}

@test "truth: a run that left ids to a live pipeline exits 5, and its summary says how many and whose" {
	hold_owner 3.3
	manifest /ok 3 p >"$BATS_TEST_TMPDIR/m"
	printf '{"id":"p-1","owner":"3.3"}\n{"id":"p-3","owner":"3.3"}\n' >"$RUN/state/claims.ndjson"
	run -5 --separate-stderr timeout 60 "$ROOT/pipeline.sh" --progress none --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	kill "$HOLDER"
	[[ $stderr == *"held elsewhere        2  left to 3.3 (2), still running"* ]]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 1 ]
	jq -e '.run.held == 2 and .held_by == {"3.3": 2} and .reconciled == true' "$RUN/summary.json"
	# Once the holder has ended, a re-run files them and says all done.
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
	jq -e '.run.held == 0' "$RUN/summary.json"
}

@test "truth: a pipeline whose rfp-fetch died while its rfp-sink still holds records keeps its ids; no id is filed twice" {
	mock_stop
	printf 'routes:\n  - {match: "/n/*", endpoint: n, submit: true, delay_ms: 400}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	RFPIPE_TIME_SCALE=1 mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /n 30 n '"method":"POST","body":{"n":1}' >"$BATS_TEST_TMPDIR/m"
	printf 'endpoints:\n  n:\n    concurrency: 2\n' >"$BATS_TEST_TMPDIR/c.yaml"
	timeout 120 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m" 2>/dev/null &
	a=$!
	# Requests in flight, and both stages there (on a loaded machine
	# rfp-sink may exec after rfp-fetch has sent).
	sink= fetch=
	for _ in $(seq 1 500); do
		for p in $(descendants "$a"); do
			case $(ps -o comm= -p "$p" 2>/dev/null) in
			rfp-sink) sink=$p ;;
			rfp-fetch) fetch=$p ;;
			esac
		done
		[ "$(requests_for)" -ge 2 ] && [ -n "$sink" ] && [ -n "$fetch" ] &&
		    break
		sleep 0.01
	done
	[ -n "$sink" ]
	[ -n "$fetch" ]
	# A's sink stalls; A's fetch finishes more, then dies.
	kill -STOP "$sink"
	n=$(requests_for)
	requests_reach $((n + 4)) 5 0.01 || :
	kill -KILL "$fetch"
	# B: A lives on in its sink, so what A claimed is A's.
	run --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	kill -CONT "$sink"
	wait "$a" || :
	echo "$stderr"
	[ "$status" -eq 5 ]
	[[ $stderr == *"is being processed by another pipeline"* ]]
	[ -z "$(jq -r .id "$RUN/results.ndjson" | sort | uniq -d)" ]
	# A has ended: a third run files the rest (what A's kill cut in
	# flight as ambiguous_submit), each id in one file, once.
	run timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	jq -e '.totals.succeeded + .totals.dead == 30 and .run.held == 0' "$RUN/summary.json"
}
