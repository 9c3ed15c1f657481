#!/usr/bin/env bats
# End to end: pipeline.sh against the mock portal, asserting on the run
# directory and on the mock's own request log, never on timing.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	MOUNTED=
}

# A tmpfs a test mounted (as root) is unmounted, whatever became of it.
teardown() {
	[ -z "$MOUNTED" ] || umount "$MOUNTED" 2>/dev/null || umount -l "$MOUNTED"
	mock_stop
}

dead_count() {
	if [ -n "${2:-}" ]; then
		jq -s --arg r "$2" '[.[] | select(.dead_reason == $r)] | length' "$1/dead.ndjson"
	else
		jq -s length "$1/dead.ndjson"
	fi
}

@test "pipeline: 300 documents all answered 200 end in results, none dead, exit 0" {
	mock_start "$FIX/mock/ok.yaml"
	{ manifest /nih 100 nih; manifest /grants 100 grants; manifest /nsf 100 nsf; } >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" --seed 1 "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 300 ]
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 0 ]
	jq -e '.admitted == 300 and .run.succeeded == 300 and .run.dead == 0 and .reconciled == true' "$RUN/summary.json"
	[ "$(jq -r .id "$RUN/results.ndjson" | sort -u | wc -l)" -eq 300 ]
}

@test "pipeline: 5 malformed lines among 300 are dead bad_input with their line numbers, the 300 succeed" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 300 nih >"$BATS_TEST_TMPDIR/good"
	awk 'NR==10{print "{not json"} NR==50{print "[1,2]"} NR==100{print "{\"id\":\"x1\"}"}
	     NR==200{print "{\"id\":\"../../etc\",\"url\":\"http://127.0.0.1/\"}"}
	     NR==250{print "{\"id\":\"f1\",\"url\":\"file:///etc/passwd\"}"} {print}' \
	    "$BATS_TEST_TMPDIR/good" >"$BATS_TEST_TMPDIR/m"
	run -3 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 300 ]
	[ "$(dead_count "$RUN" bad_input)" -eq 5 ]
	[ "$(jq -c .line "$RUN/dead.ndjson" | sort -n | tr '\n' ' ')" = "10 51 102 203 254 " ]
	[[ $stderr == *'rfp-fetch: line 102: missing field "url"'* ]]
	[[ $stderr == *'rfp-fetch: line 254: field "url": unsupported scheme "file"'* ]]
	[ ! -e "$RUN/../etc" ]
	jq -e '.reconciled == true and .run.dead_by_reason.bad_input == 5' "$RUN/summary.json"
}

@test "pipeline: a document failing 503 twice then 200 succeeds after exactly 3 requests" {
	mock_start "$FIX/pipeline/statuses.yaml"
	manifest /twice503 1 flaky >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" --seed 1 "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for /twice503/doc-1)" -eq 3 ]
	jq -s -e 'map(select(.id == "flaky-1"))[0] | .attempt == 3 and .fate == "done"' "$RUN/results.ndjson"
}

@test "pipeline: a poison document is dead exhausted after exactly max_attempts requests, the rest complete" {
	mock_start "$FIX/pipeline/statuses.yaml"
	{ manifest /poison 1 poison; manifest /ok 20 ok; } >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" --seed 1 --max-attempts 4 "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for /poison/doc-1)" -eq 4 ]
	[ "$(dead_count "$RUN" exhausted)" -eq 1 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 20 ]
}

@test "pipeline: 400 401 403 404 422 and 418 are dead permanent after exactly one request" {
	mock_start "$FIX/pipeline/statuses.yaml"
	for s in 400 401 403 404 422 418; do manifest "/s$s" 1 "p$s"; done >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" --seed 1 "$BATS_TEST_TMPDIR/m"
	for s in 400 401 403 404 422 418; do
		[ "$(requests_for "/s$s/doc-1")" -eq 1 ]
	done
	[ "$(dead_count "$RUN" permanent)" -eq 6 ]
	jq -s -e 'map(select(.id == "p418-1"))[0].reason == "unknown_http_418"' "$RUN/dead.ndjson"
}

@test "pipeline: Retry-After 2 and its HTTP-date form are obeyed as a floor" {
	mock_start "$FIX/pipeline/statuses.yaml"
	{ manifest /ra2 5 ra; manifest /radate 5 rd; } >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" --seed 1 "$BATS_TEST_TMPDIR/m"
	# Per path: the retry arrived no earlier than 2 s (scaled) after the answer.
	# The date form has one-second resolution, so allow it that much less.
	jq -s -e --argjson s "$RFPIPE_TIME_SCALE" '
	    [group_by(.path)[] | select(length == 2) | sort_by(.t) |
	     {gap: (.[1].t - .[0].t_answer), date: (.[0].path | startswith("/radate"))}] |
	    length == 10 and all(.gap >= (if .date then 1 else 2 end) * $s)' "$MOCK_LOG"
}

@test "pipeline: ten poison documents with a budget of 3 see exactly 13 requests, all dead budget_spent" {
	mock_start "$FIX/pipeline/statuses.yaml"
	manifest /poison 10 poison >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" --seed 1 --budget 3 "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 13 ]
	[ "$(dead_count "$RUN" budget_spent)" -eq 10 ]
	jq -e '.budget.left == 0 and .budget.total == 3' "$RUN/summary.json"
}

@test "pipeline: two pipelines on one run directory spend one budget" {
	mock_start "$FIX/pipeline/statuses.yaml"
	manifest /poison 10 a >"$BATS_TEST_TMPDIR/m1"
	manifest /poison 10 b | sed 's/doc-/other-/' >"$BATS_TEST_TMPDIR/m2"
	pipeline.sh -q --run-dir "$RUN" --budget 6 "$BATS_TEST_TMPDIR/m1" &
	p1=$!
	pipeline.sh -q --run-dir "$RUN" --budget 6 "$BATS_TEST_TMPDIR/m2" || :
	wait "$p1" || :
	# 20 first attempts and at most 6 retries between them.
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 26 ]
	[ "$(jq -s length "$RUN/dead.ndjson")" -eq 20 ]
}

@test "pipeline: 300 documents released at once against a 20/s limiter all succeed within the budget" {
	# 20/s scaled by 0.5 is 40/s: sends 25 ms apart, well above the jitter
	# of a loaded machine running the sanitizer build beside other suites
	# (a strict limiter refuses an early arrival, and at 10 ms apart that
	# happened at random).
	export RFPIPE_TIME_SCALE=0.5
	mock_start "$FIX/pipeline/limited.yaml"
	manifest /portal 300 portal >"$BATS_TEST_TMPDIR/m"
	# Under a loaded sanitizer run the odd document met the limiter five
	# times; ten attempts keep the test about the pace, not about luck.
	run pipeline.sh -q -j 32 --run-dir "$RUN" --seed 1 --max-attempts 10 "$BATS_TEST_TMPDIR/m"
	jq -c '{id, dead_reason, attempt}' "$RUN/dead.ndjson"
	[ "$status" -eq 0 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 300 ]
	jq -e '.budget.left >= 0 and .run.succeeded == 300' "$RUN/summary.json"
}

@test "pipeline: the in-flight ceiling of an endpoint holds, with one pipeline and with two" {
	# /slow holds each answer 300 ms, 30 at this scale.
	export RFPIPE_TIME_SCALE=0.1
	mock_start "$FIX/pipeline/statuses.yaml"
	manifest /slow 12 s1 >"$BATS_TEST_TMPDIR/m1"
	manifest /slow 12 s2 | sed 's/doc-/x-/' >"$BATS_TEST_TMPDIR/m2"
	sed -i 's/"endpoint":"s[12]"/"endpoint":"slow"/' "$BATS_TEST_TMPDIR/m1" "$BATS_TEST_TMPDIR/m2"
	pipeline.sh -q --run-dir "$RUN" --config "$FIX/pipeline/ceiling.yaml" "$BATS_TEST_TMPDIR/m1" &
	p1=$!
	run -0 pipeline.sh -q --run-dir "$RUN" --config "$FIX/pipeline/ceiling.yaml" "$BATS_TEST_TMPDIR/m2"
	wait "$p1"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 24 ]
	[ "$(mock_overlap slow 0.03)" -le 3 ]
	[ "$(mock_overlap slow 0.03)" -ge 2 ]
}

@test "pipeline: an outage opens the breaker; the server sees at most F + probes, and held work completes" {
	mock_start "$FIX/pipeline/outage.yaml"
	{ manifest /down 30 down; manifest /up 30 up; } >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" --seed 1 --config "$FIX/pipeline/breaker.yaml" --max-attempts 10 "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 60 ]
	probes=$(jq '[.transitions[] | select(.to == "half_open")] | length' "$RUN/state/breaker/down.json")
	during=$(jq -s '[.[] | select(.endpoint == "down" and .status == 503)] | length' "$MOCK_LOG")
	echo "503s $during, probes $probes; the down requests: $(jq -sc '[.[] | select(.endpoint == "down") | [.status, .inflight, .headers["X-Rfp-Attempt"]]]' "$MOCK_LOG")"
	[ "$during" -le $((5 + probes + 8)) ]
	[ "$(jq -s '[.[] | select(.endpoint == "up")] | length' "$MOCK_LOG")" -eq 30 ]
	jq -e '.openings >= 1 and .state == "closed"' "$RUN/state/breaker/down.json"
}

@test "pipeline: a run of 404s does not open the breaker" {
	mock_start "$FIX/pipeline/statuses.yaml"
	manifest /notfound 20 nf >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" --config "$FIX/pipeline/breaker.yaml" "$BATS_TEST_TMPDIR/m"
	jq -e '.openings == 0 and .state == "closed"' "$RUN/state/breaker/nf.json"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 20 ]
}

@test "pipeline: --on-open dead dead-letters held work circuit_open at once" {
	# An outage that outlasts a slow start on a loaded machine: the
	# breaker opens after 3 failures, and nothing waits for it to end.
	cat >"$BATS_TEST_TMPDIR/outage.yaml" <<-'Y'
	routes:
	  - {match: "/down/*", endpoint: down, outage: {start_s: 0, end_s: 3600, status: 503}}
	Y
	mock_start "$BATS_TEST_TMPDIR/outage.yaml"
	manifest /down 20 down >"$BATS_TEST_TMPDIR/m"
	cat >"$BATS_TEST_TMPDIR/c.yaml" <<-'Y'
	concurrency: 1
	on_open: dead
	breaker: {failures: 3, cooldown: 10m}
	Y
	run -3 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(dead_count "$RUN" circuit_open)" -ge 10 ]
	[ "$(jq -s length "$RUN/dead.ndjson")" -eq 20 ]
}

@test "pipeline: a re-run on the same run directory sends nothing for documents already filed" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 20 nih >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 20 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 20 ]
	jq -e '.fetch.skipped == 20 and .admitted == 0 and .totals.succeeded == 20' "$RUN/summary.json"
}

@test "pipeline: a deadline already past cuts every document deadline_cut and exits 4" {
	mock_start "$FIX/pipeline/statuses.yaml"
	manifest /poison 5 poison >"$BATS_TEST_TMPDIR/m"
	run -4 pipeline.sh -q --run-dir "$RUN" --deadline +0s "$BATS_TEST_TMPDIR/m"
	[ "$(dead_count "$RUN" deadline_cut)" -eq 5 ]
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 0 ]
}

@test "pipeline: usage and configuration errors exit 2 before anything starts" {
	run -2 pipeline.sh
	[[ $output == *usage:* ]]
	run -2 pipeline.sh --bogus m
	echo 'max_atempts: 3' >"$BATS_TEST_TMPDIR/bad.yaml"
	echo '{}' >"$BATS_TEST_TMPDIR/m"
	run -2 --separate-stderr pipeline.sh --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/bad.yaml" "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *'bad.yaml:1: unknown key "max_atempts"'* ]]
	[ ! -e "$RUN" ]
	run -2 pipeline.sh --deadline tomorrowish "$BATS_TEST_TMPDIR/m"
}

@test "pipeline: an installed rfpipe runs the stages beside it under cron's PATH" {
	local bin prefix=$BATS_TEST_TMPDIR/prefix/bin s
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 20 nih >"$BATS_TEST_TMPDIR/m"
	# make install's layout: bin/rfpipe (made by make) beside the stages,
	# and a PATH that holds none of them.
	bin=$(dirname "$(command -v rfp-fetch)")
	mkdir -p "$prefix"
	for s in rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink rfp-queue rfpipe; do
		cp "$bin/$s" "$prefix/"
	done
	run -0 env -i PATH=/usr/bin:/bin RFPIPE_TIME_SCALE="$RFPIPE_TIME_SCALE" \
	    "$prefix/rfpipe" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 20 ]
	jq -e '.admitted == 20 and .reconciled == true' "$RUN/summary.json"
}

@test "pipeline: an installed rfpipe reached through a symlink, with CDPATH set and a config path with a space" {
	local bin prefix=$BATS_TEST_TMPDIR/prefix/bin s
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 5 nih >"$BATS_TEST_TMPDIR/m"
	bin=$(dirname "$(command -v rfp-fetch)")
	mkdir -p "$prefix" "$BATS_TEST_TMPDIR/link"
	for s in rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink rfp-queue rfpipe; do
		cp "$bin/$s" "$prefix/"
	done
	ln -s "$prefix/rfpipe" "$BATS_TEST_TMPDIR/link/rfpipe"
	echo 'max_attempts: 2' >"$BATS_TEST_TMPDIR/my cfg.yaml"
	cd "$BATS_TEST_TMPDIR"
	run -0 env -i PATH=/usr/bin:/bin CDPATH=. RFPIPE_TIME_SCALE="$RFPIPE_TIME_SCALE" \
	    link/rfpipe -q --config "my cfg.yaml" --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 5 ]
}

@test "pipeline: without --budget the config's budget holds, and --budget wins over it" {
	mock_start "$FIX/pipeline/statuses.yaml"
	# Each needs two retries: six in all.
	manifest /twice503 3 flaky >"$BATS_TEST_TMPDIR/m"
	printf 'budget: 2\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -3 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	jq -e '.total == 2 and .left == 0' "$RUN/state/budget.json"
	[ "$(dead_count "$RUN" budget_spent)" -ge 1 ]
	# Paths of their own, whose scripts start afresh.
	sed 's|/doc-|/again-|' "$BATS_TEST_TMPDIR/m" >"$BATS_TEST_TMPDIR/m2"
	run -0 pipeline.sh -q --run-dir "$RUN.2" --config "$BATS_TEST_TMPDIR/c.yaml" --budget 10 "$BATS_TEST_TMPDIR/m2"
	jq -e '.total == 10 and .left == 4' "$RUN.2/state/budget.json"
}

@test "pipeline: --batch and --lease need --queue and are checked before anything starts" {
	echo '{}' >"$BATS_TEST_TMPDIR/m"
	run -2 --separate-stderr pipeline.sh --run-dir "$RUN" --batch 4 "$BATS_TEST_TMPDIR/m"
	[ "${stderr_lines[0]}" = 'rfpipe: option --batch: needs --queue' ]
	run -2 --separate-stderr pipeline.sh --run-dir "$RUN" --lease=30 "$BATS_TEST_TMPDIR/m"
	[ "${stderr_lines[0]}" = 'rfpipe: option --lease: needs --queue' ]
	run -2 --separate-stderr pipeline.sh --run-dir "$RUN" --queue postgresql:///nowhere --batch 0
	[[ "${stderr_lines[0]}" == 'rfp-queue: option --batch: '* ]]
	run -2 --separate-stderr pipeline.sh --run-dir "$RUN" --queue postgresql:///nowhere --lease soon
	[[ "${stderr_lines[0]}" == 'rfp-queue: option --lease: '* ]]
	[ ! -e "$RUN" ]
}

@test "pipeline --queue: --batch, --lease, the run directory and --retry-dead reach rfp-queue pull" {
	# A stand-in rfp-queue that logs its arguments and holds an empty queue.
	mkdir "$BATS_TEST_TMPDIR/stub"
	cat >"$BATS_TEST_TMPDIR/stub/rfp-queue" <<-EOF
	#!/bin/sh
	echo "\$*" >>"$BATS_TEST_TMPDIR/queue.args"
	case "\$*" in
	*--help*) exit 0 ;;
	*count) echo 0 ;;
	*file) cat >/dev/null ;;
	esac
	EOF
	chmod +x "$BATS_TEST_TMPDIR/stub/rfp-queue"
	PATH="$BATS_TEST_TMPDIR/stub:$PATH" run pipeline.sh -q --run-dir "$RUN" \
	    --queue postgresql:///stub --batch 3 --lease 2m
	line=$(grep -- ' pull$' "$BATS_TEST_TMPDIR/queue.args")
	[[ $line == "--state=postgresql:///stub --owner="*" --batch=3 --lease=2m --run-dir=$RUN pull" ]] ||
	    fail "pull's arguments: $line"
	grep -qx -- '--batch=3 --lease=2m --help' "$BATS_TEST_TMPDIR/queue.args"
	rm "$BATS_TEST_TMPDIR/queue.args"
	PATH="$BATS_TEST_TMPDIR/stub:$PATH" run pipeline.sh -q --run-dir "$RUN" \
	    --queue postgresql:///stub --retry-dead
	line=$(grep -- ' pull$' "$BATS_TEST_TMPDIR/queue.args")
	[[ $line == "--state=postgresql:///stub --owner="*" --run-dir=$RUN --retry-dead pull" ]] ||
	    fail "pull's arguments: $line"
}

@test "pipeline: transfers in flight at the deadline are cut and every unfinished document is deadline_cut" {
	mock_start "$FIX/pipeline/statuses.yaml"
	{ manifest /ok 4 ok; manifest /glacial 6 glacial; } >"$BATS_TEST_TMPDIR/m"
	# Transfers would time out after 10 scaled minutes: only the deadline cuts them.
	printf 'timeout: 10m\nconcurrency: 8\nendpoints:\n  glacial: {concurrency: 3}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -4 --separate-stderr pipeline.sh --progress none --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" --deadline +3s "$BATS_TEST_TMPDIR/m"
	jq -c '{id, dead_reason, dead_detail}' "$RUN/dead.ndjson"
	[ "$(dead_count "$RUN" deadline_cut)" -eq 6 ]
	# The table counts each document once: a cut is not dead-lettered too.
	grep -Fx '  dead-lettered         0' <<<"$stderr"
	grep -Fx '  cut (deadline)        6' <<<"$stderr"
	! grep -F '    deadline_cut' <<<"$stderr"
	grep -Fx '  check: admitted 10 = succeeded 4 + dead 0 + cut 6: ok' <<<"$stderr"
	grep -Eq '^  glacial +0 +0 +6  ' <<<"$stderr"
	# rfp-report counts them alike, in its text and its page.
	run -0 --separate-stderr rfp-report --html "$BATS_TEST_TMPDIR/r.html" "$RUN"
	grep -Fx '  dead-lettered         0' <<<"$output"
	grep -Fx '  cut (deadline)        6' <<<"$output"
	grep -Fx '  last run: admitted 10 = succeeded 4 + dead 0 + cut 6: ok' <<<"$output"
	grep -Eq '^  glacial +0 +0 +6 +[0-9]+ ' <<<"$output"
	grep -qF 'id="n-dead" data-n="0"' "$BATS_TEST_TMPDIR/r.html"
	grep -qF 'id="n-cut" data-n="6"' "$BATS_TEST_TMPDIR/r.html"
	grep -qF 'admitted 10 = succeeded 4 + dead 0 + cut 6' "$BATS_TEST_TMPDIR/r.html"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 4 ]
	jq -e '.reconciled == true and .run.dead_by_reason.deadline_cut == 6' "$RUN/summary.json"
	# Three were on the wire and were cut; three never started.  What the
	# portal saw of them is printed, for a failure to show.
	jq -c 'select(.endpoint == "glacial") | {path, t, t_answer, status, action, inflight}' "$MOCK_LOG"
	[ "$(jq -s '[.[] | select(.endpoint == "glacial")] | length' "$MOCK_LOG")" -eq 3 ]
}

@test "pipeline: a retry due but not started by the deadline says so, apart from a document never tried" {
	# -j 1: the 503'd document's retry is due while the slow one holds the
	# only place, and a third waits untried behind it.
	printf 'routes:\n  - {match: "/a/*", endpoint: a, script: [503, 200]}\n  - {match: "/b/*", endpoint: b, delay_ms: 600000}\n  - {match: "/c/*", endpoint: c}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /a 1 a; manifest /b 1 b; manifest /c 1 c; } >"$BATS_TEST_TMPDIR/m"
	# The slow one is cut by the deadline only, not by a timeout.
	printf 'timeout: 10m\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -4 pipeline.sh -q -j 1 --seed 1 --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$RUN" --deadline +3s "$BATS_TEST_TMPDIR/m"
	jq -c '{id, attempt, dead_detail}' "$RUN/dead.ndjson"
	jq -s -e '(map({(.id): .dead_detail}) | add) as $d | $d["a-1"] == "its retry not started by the deadline" and $d["c-1"] == "not started by the deadline"' "$RUN/dead.ndjson"
	jq -s -e 'all(.dead_reason == "deadline_cut") and length == 3' "$RUN/dead.ndjson"
}

@test "pipeline: summary.json's counts by reason match the files, for a batch with several dead reasons" {
	mock_start "$FIX/pipeline/statuses.yaml"
	{ manifest /ok 5 ok; manifest /s404 2 perm; manifest /poison 2 poison; echo '{bad'; } >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" --max-attempts 2 "$BATS_TEST_TMPDIR/m"
	for r in permanent exhausted bad_input; do
		[ "$(jq --arg r $r '.run.dead_by_reason[$r]' "$RUN/summary.json")" -eq "$(dead_count "$RUN" $r)" ]
		[ "$(jq --arg r $r '.totals.dead_by_reason[$r]' "$RUN/summary.json")" -eq "$(dead_count "$RUN" $r)" ]
	done
	[ "$(dead_count "$RUN" permanent)" -eq 2 ]
	[ "$(dead_count "$RUN" exhausted)" -eq 2 ]
	[ "$(dead_count "$RUN" bad_input)" -eq 1 ]
	jq -e '.run.succeeded == 5 and .totals.succeeded == 5 and .admitted == 10 and .reconciled' "$RUN/summary.json"
}

@test "pipeline: a 429 to one record slows the others of its endpoint; another endpoint keeps its pace" {
	export RFPIPE_TIME_SCALE=0.1
	printf 'routes:\n  - {match: "/portal/*", endpoint: portal, rate: {per_s: 20, burst: 0}}\n  - {match: "/free/*", endpoint: free}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /portal 40 portal; manifest /free 40 free; } >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 16 --run-dir "$RUN" --seed 1 --max-attempts 10 "$BATS_TEST_TMPDIR/m"
	# The shared pace of "portal" started at its 429s, and the other's
	# never did: it is not paced at all.
	jq -e '.paced == 1 and .rate > 0' "$RUN/state/rate/portal.json"
	jq -e '.paced == 0 and .cuts == 0' "$RUN/state/rate/free.json"
	[ "$(jq -s '[.[] | select(.endpoint == "free" and .status != 200)] | length' "$MOCK_LOG")" -eq 0 ]
}

@test "pipeline: a Retry-After beyond max_retry_after is a quota: dead at once, the endpoint's others unsent" {
	printf 'routes:\n  - {match: "/quota/*", endpoint: sam, script: [429], retry_after: 43200}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /quota 6 sam >"$BATS_TEST_TMPDIR/m"
	printf 'max_retry_after: 1h\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -3 pipeline.sh -q -j 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	# The first answer, and at most one sent while it was being filed.
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -le 2 ]
	jq -s -e 'length == 6 and all(.dead_reason == "quota" and (.dead_detail | test("come back")))' "$RUN/dead.ndjson"
	jq -s -e '[.[] | select(.status == null)] | length >= 4' "$RUN/dead.ndjson"
}

@test "pipeline: the budget and the summary count the same admitted records, blank and white lines as rfp-fetch counts them" {
	# An empty line is no record; a line of spaces is a bad one.
	{ printf '{"id":"a","url":"http://127.0.0.1:1/a"}\n\n   \n'
	  printf '{"id":"b","url":"http://127.0.0.1:1/b"}\n'; } >"$BATS_TEST_TMPDIR/m"
	run -3 --separate-stderr pipeline.sh -q --run-dir "$RUN" \
	    --seed 1 --max-attempts 2 "$BATS_TEST_TMPDIR/m"
	jq -e '.admitted == 3 and .run.dead == 3 and .reconciled == true' "$RUN/summary.json"
	[ "$(dead_count "$RUN" bad_input)" -eq 1 ]
	# 3x of what was admitted, as the summary reconciles it.
	jq -e '.total == 9' "$RUN/state/budget.json"
}

@test "pipeline: a state file corrupted mid-run stops rfp-fetch naming it; the rest is pending, and a re-run files it" {
	printf 'routes:\n  - {match: "/f/*", endpoint: f, delay_ms: 100}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	# Answers 0.1 s apart in real time, one at a time: the file is
	# changed while most documents are still to go.
	RFPIPE_TIME_SCALE=1 mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /f 20 f >"$BATS_TEST_TMPDIR/m"
	timeout 60 "$ROOT/pipeline.sh" -q -j 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" \
	    2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	requests_reach 3 10 || :
	# Under the file's lock, as the stages write it: written without, an
	# update that had read the file before can write over it (in place),
	# and the run does not stop (its exit was not 1 once, under load).
	flock "$RUN/state/rate/f.json" sh -c 'echo '"'"'{"iv_s":[1,2]}'"'"' >"$1"' sh "$RUN/state/rate/f.json"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 1 ]
	grep -qF "rfp-fetch: $RUN/state/rate/f.json: corrupt state file (field \"iv_s\"); move it aside to start afresh" "$BATS_TEST_TMPDIR/err" ||
	    fail "$(cat "$BATS_TEST_TMPDIR/err")"
	[ "$(cat "$RUN/state/rate/f.json")" = '{"iv_s":[1,2]}' ]
	jq -e '.interrupted == true and .admitted == 20 and .reconciled == true and .pending > 0 and .pending + .run.succeeded + .run.dead == 20' "$RUN/summary.json"
	rm "$RUN/state/rate/f.json"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 20 ]
	[ "$(jq -r .id "$RUN/results.ndjson" | sort -u | wc -l)" -eq 20 ]
}

@test "pipeline: a corrupt or empty state file (budget, breaker, rate) stops the run before a request, exit 2, one line naming it; never reset" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 -p "$RUN/state/breaker" "$RUN/state/rate"
	chmod 700 "$RUN/state"
	for f in budget.json breaker/nih.json rate/nih.json; do
		for content in '{garbage' '' '[1]'; do
			printf '%s' "$content" >"$RUN/state/$f"
			run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
			[ "${#stderr_lines[@]}" -eq 1 ]
			[[ $stderr == "rfp-backoff: $RUN/state/$f: corrupt state file ("*"); move it aside to start afresh" ]]
			[ "$(cat "$RUN/state/$f")" = "$content" ]
			[ "$(requests_for)" -eq 0 ]
			[ ! -e "$RUN/summary.json" ]
		done
		rm "$RUN/state/$f"
	done
	echo '{"total":3,"left":9}' >"$RUN/state/budget.json"
	run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$stderr" = "rfp-backoff: $RUN/state/budget.json: corrupt state file (needs integers 0 <= left <= total <= 2^53); move it aside to start afresh" ]
	[ "$(requests_for)" -eq 0 ]
	rm "$RUN/state/budget.json"
	# JSON objects, but none a run writes: the file and the field named.
	for f in 'rate/nih.json {"paced":1,"rate":-5} rate' \
	    'rate/nih.json {"iv_s":[1,2]} iv_s' \
	    'breaker/nih.json {"state":"closed","fails":"x"} fails'; do
		read -r file content field <<<"$f"
		set -- "$file" "$content" "$field"
		printf '%s' "$2" >"$RUN/state/$1"
		run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
		[ "$stderr" = "rfp-backoff: $RUN/state/$1: corrupt state file (field \"$3\"); move it aside to start afresh" ] || fail "$f: $stderr"
		[ "$(cat "$RUN/state/$1")" = "$2" ]
		[ "$(requests_for)" -eq 0 ]
		# rfp-fetch, run alone, checks the same before a request.
		run -1 --separate-stderr rfp-fetch --run-dir "$RUN" <"$BATS_TEST_TMPDIR/m"
		[ "$stderr" = "rfp-fetch: $RUN/state/$1: corrupt state file (field \"$3\"); move it aside to start afresh" ] || fail "$f: $stderr"
		[ "$(requests_for)" -eq 0 ]
		rm "$RUN/state/$1"
	done
	# Longer than any state a run writes, or a link: said as such.
	{ head -c 1100000 /dev/zero | tr '\0' ' '; echo '{}'; } >"$RUN/state/rate/nih.json"
	run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$stderr" = "rfp-backoff: $RUN/state/rate/nih.json: corrupt state file (over 1 MiB); move it aside to start afresh" ] || fail "$stderr"
	rm "$RUN/state/rate/nih.json"
	ln -s /etc/passwd "$RUN/state/rate/nih.json"
	run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$stderr" = "rfp-backoff: $RUN/state/rate/nih.json: a symbolic link (state files are never followed); move it aside to start afresh" ] || fail "$stderr"
	rm "$RUN/state/rate/nih.json"
	[ "$(requests_for)" -eq 0 ]
	echo '{"total":3,"left":9}' >"$RUN/state/budget.json"
	# Moved aside, the run goes ahead.
	rm "$RUN/state/budget.json"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for)" -eq 3 ]
}

@test "pipeline: --budget on a --retry-dead re-run replaces what is left of the run directory's budget; on a plain resume it is not applied, and said" {
	printf 'routes:\n  - {match: "/f/*", endpoint: f, script: [503, 503, 200], retry_after: 0}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /f 4 >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --budget 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(dead_count "$RUN" budget_spent)" -eq 4 ]
	jq -e '.total == 1 and .left == 0' "$RUN/state/budget.json"
	run -3 --separate-stderr pipeline.sh -q --budget 50 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$stderr" = "rfp-backoff: option --budget 50: the run directory's budget is kept (0 left of 1); rfpipe --retry-dead --budget renews it" ]
	jq -e '.total == 1 and .left == 0' "$RUN/state/budget.json"
	run -0 --separate-stderr pipeline.sh -q --budget 100 --retry-dead --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# Renewed, not kept: nothing said of the budget (a loaded machine
	# may have a stage say something else).
	echo "$stderr"
	[[ $stderr != *budget* ]]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 4 ]
	jq -e '.fetch.retried_dead == 4 and .fetch.resumed_cut == 0' "$RUN/summary.json"
	# The one retry spent the night stays counted; 100 were left to spend.
	jq -e '.total == 101 and .left < 100 and .left >= 92' "$RUN/state/budget.json"
}

@test "pipeline: a full disk under docs/ stops the run naming the file and the error; no dead letter, and a re-run once there is room fetches the rest" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to mount a small tmpfs"
	printf 'routes:\n  - {match: "/p/*", endpoint: p, body: pdf, body_bytes: 8192}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /p 30 p >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 -p "$RUN/docs"
	mount -t tmpfs -o size=64k,mode=700 tmpfs "$RUN/docs" 2>/dev/null ||
	    skip "cannot mount a tmpfs here"
	MOUNTED=$RUN/docs
	run -1 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[[ ${stderr_lines[0]} == "rfp-fetch: write $RUN/docs/.part/p-"*": No space left on device; stopping: a re-run on this run directory fetches what was not filed" ]]
	echo "$stderr"
	[[ $stderr == *$'\n'"rfpipe: rfp-fetch failed with status 1"* ]]
	# Every line a stage's or rfpipe's (never the shell's), none a failed
	# reconciliation.
	[ -z "$(grep -v '^rfp[-a-z]*: ' <<<"$stderr")" ]
	[[ $stderr != *RECONCILIATION* ]]
	[ ! -s "$RUN/dead.ndjson" ]
	n=$(wc -l <"$RUN/results.ndjson")
	[ "$n" -lt 30 ]
	jq -e --argjson n "$n" '.interrupted == true and .admitted == 30 and .pending == 30 - $n' "$RUN/summary.json"
	# No partial body is left to hold the space.
	[ -z "$(ls -A "$RUN/docs/.part")" ]
	mount -o remount,size=10m "$RUN/docs"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 30 ]
	[ ! -s "$RUN/dead.ndjson" ]
}

@test "pipeline: a run directory that fills up: every line names its file, none is the shell's own complaint" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to mount a small tmpfs"
	printf 'routes:\n  - {match: "/p/*", endpoint: p, body: pdf, body_bytes: 8192}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /p 30 p >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 "$RUN"
	mount -t tmpfs -o size=100k,mode=700 tmpfs "$RUN" 2>/dev/null ||
	    skip "cannot mount a tmpfs here"
	MOUNTED=$RUN
	run -1 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	printf 'stderr:\n%s\n' "$stderr"	# shown when a check fails
	# rfp-sink may find the disk full first, and say so first.
	[[ $stderr == *"rfp-fetch: write $RUN/docs/.part/p-"*": No space left on device; stopping: "* ]]
	[[ $stderr == *"rfpipe: rfp-fetch failed with status 1"* ||
	    $stderr == *"rfpipe: rfp-sink failed with status 1 (then "*"rfp-fetch 1"* ]]
	# Each line is a stage's or rfpipe's, never sh's ("424: echo: I/O error").
	[ -z "$(grep -v '^rfp[-a-z]*: ' <<<"$stderr")" ]
	[[ $stderr != *"echo: "* && $stderr != *"printf: "* ]]
}

@test "pipeline: a state file the disk filled up under is never left torn: once there is room, a plain re-run runs" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to mount a small tmpfs"
	mock_start "$FIX/mock/ok.yaml"
	printf '{"id":"z1","url":"%s/nih/z1"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 "$BATS_TEST_TMPDIR/t"
	mount -t tmpfs -o size=300k,mode=700 tmpfs "$BATS_TEST_TMPDIR/t" 2>/dev/null ||
	    skip "cannot mount a tmpfs here"
	MOUNTED=$BATS_TEST_TMPDIR/t
	# Left with this much room, a state file was made and could not be
	# written: empty, the run after refused it as corrupt.
	local keep avail d
	for keep in 8 12 16 20 24; do
		d=$MOUNTED/r$keep
		mkdir -m 700 "$d"
		avail=$(df -k --output=avail "$MOUNTED" | tail -1)
		dd if=/dev/zero of="$MOUNTED/filler" bs=1k count=$((avail - keep)) 2>/dev/null || true
		run timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$d" "$BATS_TEST_TMPDIR/m"
		rm -f "$MOUNTED/filler"
		run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$d" "$BATS_TEST_TMPDIR/m"
		printf 'keep %s KiB: %s\n' "$keep" "$stderr"	# shown when a check fails
		[ "$(jq -r .id "$d/results.ndjson")" = z1 ]
		rm -rf "$d"
	done
}

@test "pipeline: a duplicate id stays dead bad_input in dead.ndjson; run and totals agree, resumed or retried" {
	mock_start "$FIX/mock/ok.yaml"
	local m=$BATS_TEST_TMPDIR/m
	printf '{"id":"a","url":"%s/nih/%d"}\n' "$MOCK_URL" 1 "$MOCK_URL" 2 >"$m"
	printf '{"id":"b","url":"%s/nih/%d"}\n' "$MOCK_URL" 3 "$MOCK_URL" 4 >>"$m"
	run -3 pipeline.sh -q --run-dir "$RUN" "$m"
	[ "$(jq -r .id "$RUN/results.ndjson" | sort | tr '\n' ' ')" = "a b " ]
	[ "$(jq -c '[.id, .line, .dead_reason]' "$RUN/dead.ndjson" | sort | tr '\n' ' ')" = '["a",2,"bad_input"] ["b",4,"bad_input"] ' ]
	jq -e '.admitted == 4 and .run.dead == 2 and .totals.dead == 2 and .totals.succeeded == 2 and .reconciled' "$RUN/summary.json"
	# A resume files nothing again; --retry-dead files the duplicates
	# again, and dead.ndjson keeps one letter of each line.
	run -3 pipeline.sh -q --run-dir "$RUN" "$m"
	jq -e '.admitted == 0 and .fetch.skipped == 4 and .totals.dead == 2 and .totals.succeeded == 2' "$RUN/summary.json"
	run -3 pipeline.sh -q --run-dir "$RUN" --retry-dead "$m"
	jq -e '.admitted == 2 and .run.dead == 2 and .totals.dead == 2 and .totals.succeeded == 2 and .reconciled' "$RUN/summary.json"
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 2 ]
	[ "$(requests_for)" -eq 2 ]
}

@test "pipeline: a bad manifest line is dead-lettered once, however many resumes, and after lines added above it" {
	printf 'routes:\n  - {match: "/nih/*", endpoint: nih}\n  - {match: "/slow/*", endpoint: nih, delay_ms: 20000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	local m=$BATS_TEST_TMPDIR/m
	{
		manifest /nih 2 nih
		echo 'not json'
		echo 'not json'
		echo "{\"url\":\"$MOCK_URL/nih/no-id\"}"
	} >"$m"
	run -3 pipeline.sh -q --run-dir "$RUN" "$m"
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 3 ]
	for i in 1 2; do
		run -3 pipeline.sh -q --run-dir "$RUN" "$m"
		jq -e '.admitted == 0 and .fetch.skipped == 5 and .totals.dead == 3 and .totals.succeeded == 2' "$RUN/summary.json"
	done
	# A line added above: the bad lines are the same lines still.
	{ echo "{\"id\":\"new\",\"url\":\"$MOCK_URL/nih/new\"}"; cat "$m"; } >"$m.2"
	run -3 pipeline.sh -q --run-dir "$RUN" "$m.2"
	jq -e '.admitted == 1 and .run.succeeded == 1 and .totals.dead == 3 and .totals.succeeded == 3 and .reconciled' "$RUN/summary.json"
	# --retry-dead files them again, and dead.ndjson keeps one of each.
	run -3 pipeline.sh -q --run-dir "$RUN" --retry-dead "$m.2"
	jq -e '.admitted == 3 and .run.dead == 3 and .totals.dead == 3' "$RUN/summary.json"
	[ "$(jq -r .dead_reason "$RUN/dead.ndjson" | sort | uniq -c | tr -s ' ')" = ' 3 bad_input' ]
	[ "$(jq -r .line "$RUN/dead.ndjson" | sort -n | tr '\n' ' ')" = "4 5 6 " ]
}

@test "pipeline: a line_key a manifest line brings, on a retry too, is dropped: a result is filed once however many resumes, and no forged key hides a bad line's letter" {
	mock_start "$FIX/mock/ok.yaml"
	local m=$BATS_TEST_TMPDIR/m k i
	# The key rfp-fetch gives the bad line below, learnt on another directory.
	echo 'not json' >"$m.probe"
	run -3 pipeline.sh -q --run-dir "$RUN.probe" "$m.probe"
	k=$(jq -r .line_key "$RUN.probe/dead.ndjson")
	[[ $k == *.1 ]]
	{
		echo 'not json'
		printf '{"id":"a","url":"%s/nih/doc-1","fate":"retry","attempt":1,"line_key":"%s"}\n' "$MOCK_URL" "$k"
		# Refused at admission (a body with GET): a letter with the key.
		printf '{"id":"x","url":"%s/nih/x","fate":"retry","attempt":1,"line_key":"%s","line":1,"stage":"rfp-fetch","body":"b"}\n' "$MOCK_URL" "$k"
	} >"$m"
	for i in 1 2 3; do
		run -3 pipeline.sh -q --run-dir "$RUN" "$m"
		jq -se 'length == 1 and .[0].id == "a" and (.[0] | has("line_key") | not)' "$RUN/results.ndjson"
		jq -se 'length == 2 and (map(select(.line_key == $k)) | length == 1 and .[0].raw == "not json") and
		    (map(select(.id == "x")) | length == 1 and .[0].line == 3 and (.[0] | has("line_key") | not))' --arg k "$k" "$RUN/dead.ndjson"
		jq -e '.totals.succeeded == 1 and .totals.dead == 2 and .reconciled' "$RUN/summary.json"
	done
	jq -e '.admitted == 0 and .fetch.skipped == 3' "$RUN/summary.json"
	[ "$(requests_for /nih/doc-1)" -eq 1 ]
	[ "$(requests_for /nih/x)" -eq 0 ]
}

@test "pipeline: a manifest on a pipe or a named pipe is refused, exit 2, one line, before anything starts" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$BATS_TEST_TMPDIR/m"
	# Read by the count first, the run would have admitted nothing.
	run -2 --separate-stderr bash -c 'cat "$1" | timeout 10 "$2" -q --run-dir "$3" /dev/stdin' _ \
	    "$BATS_TEST_TMPDIR/m" "$ROOT/pipeline.sh" "$RUN"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = 'rfpipe: /dev/stdin: MANIFEST must be a regular file (a pipe is read once: save it to a file first)' ]
	[ ! -e "$RUN" ]
	# A named pipe with no writer: nothing opens it, so nothing hangs.
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	run -2 --separate-stderr timeout 10 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/fifo"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ ${stderr_lines[0]} == *'/fifo: MANIFEST must be a regular file'* ]]
	[ ! -e "$RUN" ]
	[ "$(requests_for)" -eq 0 ]
	# A regular file behind /dev/stdin is a file.
	run -0 bash -c 'timeout 20 "$1" -q --run-dir "$2" /dev/stdin <"$3"' _ \
	    "$ROOT/pipeline.sh" "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
}

@test "pipeline: documents the deadline cut are taken up by the next plain run; other dead letters stay dead" {
	mock_start "$FIX/pipeline/statuses.yaml"
	local m=$BATS_TEST_TMPDIR/m
	manifest /poison 1 poison >"$m"
	run -3 pipeline.sh -q --run-dir "$RUN" --max-attempts 2 "$m"
	[ "$(dead_count "$RUN" exhausted)" -eq 1 ]
	manifest /ok 4 ok >>"$m"
	run -4 pipeline.sh -q --run-dir "$RUN" --deadline +0s "$m"
	[ "$(dead_count "$RUN" deadline_cut)" -eq 4 ]
	# The next start, as the systemd example's: no --retry-dead.
	run -3 --separate-stderr pipeline.sh --progress none --run-dir "$RUN" "$m"
	[[ $stderr == *'rfp-fetch: 4 documents the deadline cut in an earlier run were taken up again'* ]]
	[[ $stderr == *'  taken up              4  cut by an earlier deadline, admitted again'* ]]
	[[ $stderr == *'  cut (deadline)        0'* ]]
	[[ $stderr == *'  already filed         1  by an earlier run or another pipeline: not admitted, not sent'* ]]
	jq -e '.admitted == 4 and .fetch.resumed_cut == 4 and .fetch.skipped == 1 and .run.succeeded == 4 and .run.dead == 0 and .reconciled' "$RUN/summary.json"
	jq -e '.totals.succeeded == 4 and .totals.dead == 1 and .totals.dead_by_reason.deadline_cut == 0 and .totals.dead_by_reason.exhausted == 1' "$RUN/summary.json"
	[ "$(jq -r .id "$RUN/results.ndjson" | sort | tr '\n' ' ')" = "ok-1 ok-2 ok-3 ok-4 " ]
	[ "$(jq -r '[.id, .dead_reason] | join(" ")' "$RUN/dead.ndjson")" = "poison-1 exhausted" ]
	[ "$(requests_for /poison/doc-1)" -eq 2 ]
	# Nothing is cut now: the run after takes up nothing.
	run -3 --separate-stderr pipeline.sh --progress none --run-dir "$RUN" "$m"
	[[ $stderr != *'taken up'* ]]
	[[ $stderr == *'  already filed         5  by an earlier run or another pipeline: not admitted, not sent'* ]]
	jq -e '.admitted == 0 and .fetch.resumed_cut == 0' "$RUN/summary.json"
	# --retry-dead takes up the letter that stayed, and says so.
	run -3 --separate-stderr pipeline.sh --progress none --run-dir "$RUN" --retry-dead --max-attempts 2 "$m"
	[[ $stderr == *'  retried dead          1  dead in an earlier run, admitted again (--retry-dead)'* ]]
	[[ $stderr != *'  taken up '* ]]
	jq -e '.admitted == 1 and .fetch.retried_dead == 1 and .fetch.skipped == 4' "$RUN/summary.json"
}

@test "pipeline: a torn last line of results.ndjson and dead.ndjson is cut by the next run; jq reads both, every id once" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$BATS_TEST_TMPDIR/m"
	head -n 1 "$BATS_TEST_TMPDIR/m" >"$BATS_TEST_TMPDIR/m1"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m1"
	printf '{"id":"nih-2","url":"htt' >>"$RUN/results.ndjson"
	printf '{"id":"nih-3","dead_rea' >>"$RUN/dead.ndjson"
	run -0 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(grep -c 'rfp-sink: .*: cut a torn last line' <<<"$stderr")" -eq 2 ]
	# The README's morning triage works on both files.
	jq -r .id "$RUN/results.ndjson" >/dev/null
	jq -r .dead_reason "$RUN/dead.ndjson" >/dev/null
	[ "$(wc -c <"$RUN/dead.ndjson")" -eq 0 ]
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	jq -e '.admitted == 2 and .run.succeeded == 2 and .totals.succeeded == 3 and .totals.dead == 0 and .reconciled' "$RUN/summary.json"
}

# mangle STAGE SED: a STAGE first in $BATS_TEST_TMPDIR/shim whose input, in
# a run (not a check), goes through sed -u SED first: a line between the
# stages mangled on its way.
mangle() {
	mkdir -p "$BATS_TEST_TMPDIR/shim"
	cat >"$BATS_TEST_TMPDIR/shim/$1" <<-EOF
	#!/bin/bash
	case " \$* " in *" --check "*|*" --resolve-deadline"*) exec "$ROOT/bin/$1" "\$@" ;; esac
	sed -u '$2' | "$ROOT/bin/$1" "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/shim/$1"
}

@test "pipeline: a document's record mangled mid-run into a stray line is pending, not dead: exit 5, a resume files it once and exits 0, the totals are the admitted, the stray kept as evidence" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 5 nih >"$BATS_TEST_TMPDIR/m"
	mangle rfp-classify 's/^{"id":"nih-3".*/garbage/'
	# Not 3: no document is dead; one is pending, to be run again.
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -5 --separate-stderr timeout 60 "$ROOT/pipeline.sh" --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# Which line it is depends on the order the transfers ended in.
	[[ $stderr =~ "rfp-classify: line "[1-5]": malformed JSON at column 7: '[' or '{' expected" ]]
	# The line's text is not quoted back: it may be a header's secret.
	[[ $stderr != *"near 'garbage'"* ]]
	[[ $stderr == *"rfp-sink: 1 stray line between the stages (no id; kept in dead.ndjson): 1 document admitted and not filed, pending: run again to take it up"* ]]
	[[ $stderr == *"stray lines           1  lines between the stages with no id: no document's fate, kept in dead.ndjson"* ]]
	[[ $stderr == *"check: admitted 5 = succeeded 4 + dead 0 + pending 1 (its record a stray line): ok"* ]]
	jq -e '.admitted == 5 and .run.succeeded == 4 and .run.dead == 0 and .run.stray_lines == 1
	    and .pending == 1 and .reconciled == true and .totals.dead == 0' "$RUN/summary.json"
	# The resume takes nih-3 up: it was never filed; every document is
	# done, and the stray's letter is no dead document.
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	jq -e '.admitted == 1 and .run.succeeded == 1 and .reconciled == true
	    and .totals.succeeded + .totals.dead == 5 and .totals.stray_lines == 1' "$RUN/summary.json"
	jq -r .id "$BATS_TEST_TMPDIR/m" | sort >"$BATS_TEST_TMPDIR/want"
	jq -r 'select(.id != null) | .id' "$RUN/results.ndjson" "$RUN/dead.ndjson" | sort >"$BATS_TEST_TMPDIR/got"
	diff "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
	[ "$(requests_for /nih/doc-3)" -eq 2 ]
	# The evidence stays, for the morning, however many runs, and the
	# status is the documents': 0, with --retry-dead too, which leaves
	# the stray's letter alone.
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	jq -e '.admitted == 0 and .totals.succeeded == 5 and .totals.dead == 0 and .totals.stray_lines == 1' "$RUN/summary.json"
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --retry-dead --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	jq -e '.admitted == 0 and .totals.succeeded == 5 and .totals.dead == 0 and .totals.stray_lines == 1' "$RUN/summary.json"
	[ "$(jq -c '[.id, .stage, .raw, .dead_reason]' "$RUN/dead.ndjson")" = '[null,"rfp-classify","garbage","bad_input"]' ]
	# README's triage counts the documents' letters (none), and lists the
	# strays apart.
	[ -z "$(jq -r 'select([.id, .line_key] | any(type == "string")) | .dead_reason' "$RUN/dead.ndjson")" ]
	[ "$(jq -c 'select([.id, .line_key] | all(type != "string")) | [.stage, .raw]' "$RUN/dead.ndjson")" = '["rfp-classify","garbage"]' ]
	run -0 rfp-report "$RUN"
	[[ $output == *"succeeded             5"* && $output == *"dead-lettered         0"* && $output == *"pending               0"* ]]
	[[ $output == *"stray lines           1"* ]]
	[[ $output != *"(none)"* ]]
}

@test "pipeline: a stray line's letter is no document to run again: the README's filter leaves it out, fed back it is a manifest line with no id, --retry-dead leaves it and says so" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$BATS_TEST_TMPDIR/m"
	mangle rfp-classify 's/^{"id":"nih-2".*/garbage/'
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -5 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# The filter the README gives for feeding dead.ndjson back.
	local filter
	filter=$(grep -o 'select(\[\.id, \.line_key\] | any(type == "string"))' "$ROOT/README.md" | head -n 1)
	[ -n "$filter" ]
	[ -z "$(jq -c "$filter" "$RUN/dead.ndjson")" ]
	[ "$(jq -s length "$RUN/dead.ndjson")" -eq 1 ]
	# Fed back as it is, the letter is what it says: a manifest line with
	# no id, refused at admission like any, dead bad_input.
	cp "$RUN/dead.ndjson" "$BATS_TEST_TMPDIR/again.ndjson"
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN.2" "$BATS_TEST_TMPDIR/again.ndjson"
	[ "$stderr" = 'rfp-fetch: line 1: field "id": not a string' ]
	jq -e '.admitted == 1 and .run.dead == 1 and .run.stray_lines == 0' "$RUN.2/summary.json"
	# --retry-dead runs the manifest's documents again (nih-2, pending),
	# and leaves the stray's letter where it is, counted apart.
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" --retry-dead --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *"run directory totals: 3 in results.ndjson, 0 in dead.ndjson and 1 stray line beside them"* ]]
	jq -e '.admitted == 1 and .totals.succeeded == 3 and .totals.dead == 0 and .totals.stray_lines == 1' "$RUN/summary.json"
	[ "$(jq -c '[.id, .stage, .raw]' "$RUN/dead.ndjson")" = '[null,"rfp-classify","garbage"]' ]
}

@test "pipeline: a record mangled mid-run that keeps its id (a field of the wrong type) is dead bad_input under it; --retry-dead files it and its letter goes" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 5 nih >"$BATS_TEST_TMPDIR/m"
	mangle rfp-backoff '/^{"id":"nih-3"/s/"attempt":\([0-9]*\)/"attempt":"\1"/'
	PATH=$BATS_TEST_TMPDIR/shim:$PATH run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[[ $stderr =~ 'rfp-backoff: line '[1-5]': field "attempt": expected an integer' ]]
	jq -e '.admitted == 5 and .run.succeeded == 4 and .run.dead_by_reason.bad_input == 1 and .run.stray_lines == 0 and .reconciled == true' "$RUN/summary.json"
	[ "$(jq -c '[.id, .stage, .dead_reason]' "$RUN/dead.ndjson")" = '["nih-3","rfp-backoff","bad_input"]' ]
	# A resume leaves it dead; --retry-dead files it, and the letter goes.
	run -3 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	jq -e '.admitted == 0 and .totals.succeeded == 4 and .totals.dead == 1' "$RUN/summary.json"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --retry-dead "$BATS_TEST_TMPDIR/m"
	jq -e '.admitted == 1 and .totals.succeeded == 5 and .totals.dead == 0 and .totals.stray_lines == 0' "$RUN/summary.json"
	[ ! -s "$RUN/dead.ndjson" ]
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
}

@test "pipeline: a resume's progress counts the lines left, and --check --run-dir --resume says how many are filed already" {
	printf 'routes:\n  - {match: "/nih/*", endpoint: nih}\n  - {match: "/slow/*", endpoint: nih, delay_ms: 20000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	local m=$BATS_TEST_TMPDIR/m
	{
		manifest /nih 8 nih
		manifest /gone 2 gone
		printf '{bad\n'
		printf '{"id":"nih-1","url":"%s/nih/again"}\n' "$MOCK_URL"
	} >"$m"
	run -3 --separate-stderr pipeline.sh --progress none --run-dir "$RUN" "$m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 8 ]
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 4 ]
	run -3 --separate-stderr rfp-fetch --check --run-dir "$RUN" --resume <"$m"
	[[ $output == *$'\nfiled: 12 of the 12 lines already, in '"$RUN"$'; a resume admits the other 0\n'* ]] || fail "$output"
	# --retry-dead takes up the dead: a line's letter and the 404s.
	run -3 --separate-stderr rfp-fetch --check --run-dir "$RUN" --retry-dead <"$m"
	[[ $output == *$'\nfiled: 8 of the 12 lines already, in '"$RUN"$'; a resume admits the other 4\n'* ]] || fail "$output"
	# rfpipe --check says it of a run directory that has a state/.
	run -2 --separate-stderr "$ROOT/pipeline.sh" --check --run-dir "$RUN" "$m"
	[[ $output == *$'\nfiled: 12 of the 12 lines already, in '"$RUN"$'; a resume admits the other 0\n'* ]] || fail "$output"
	run -2 --separate-stderr "$ROOT/pipeline.sh" --check --run-dir "$RUN.none" "$m"
	[[ $output != *'filed: '* ]]
	# Without --run-dir, or --resume, nothing is said of it.
	run -3 --separate-stderr rfp-fetch --check --run-dir "$RUN" <"$m"
	[[ $output != *'filed: '* ]]
	# Files the run would stop at are a problem, not "0 filed".
	cp -r "$RUN" "$RUN.f"
	rm "$RUN.f/dead.ndjson"
	mkfifo "$RUN.f/dead.ndjson"
	run -2 --separate-stderr timeout 20 rfp-fetch --check --run-dir "$RUN.f" --resume <"$m"
	[[ $output != *'filed: '* ]]
	[ "${stderr_lines[0]}" = "rfp-fetch: $RUN.f/dead.ndjson: not a regular file" ] || fail "$stderr"
	run -2 --separate-stderr timeout 20 "$ROOT/pipeline.sh" --check --run-dir "$RUN.f" "$m"
	[ "${stderr_lines[0]}" = "rfp-fetch: $RUN.f/dead.ndjson: not a regular file" ] || fail "$stderr"
	# So is a state file the run would find corrupt.
	rm -rf "$RUN.f"
	cp -r "$RUN" "$RUN.f"
	echo garbage >"$RUN.f/state/rate/nih.json"
	run -2 --separate-stderr timeout 20 "$ROOT/pipeline.sh" --check --run-dir "$RUN.f" "$m"
	[[ ${stderr_lines[0]} == "rfp-fetch: $RUN.f/state/rate/nih.json: corrupt state file ("* ]] || fail "$stderr"
	# Three more: the resume's progress is of three, not fifteen.
	for i in 9 10 11; do
		printf '{"id":"nih-%d","url":"%s/slow/doc-%d","endpoint":"nih"}\n' "$i" "$MOCK_URL" "$i"
	done >>"$m"
	RFPIPE_PROGRESS_INTERVAL=0.05 run -3 --separate-stderr pipeline.sh -j 1 --progress plain --run-dir "$RUN" "$m"
	# Answers of 0.2 s real, one at a time, a line every 0.5 ms.
	grep -q '^rfp-sink: progress: ' <<<"$stderr" || fail "$stderr"
	[ -z "$(grep '^rfp-sink: progress: ' <<<"$stderr" | grep -v '^rfp-sink: progress: [0-3]/3 done, ok [0-3], dead 0, pending [0-3], ')" ] || fail "$stderr"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 11 ]
}
