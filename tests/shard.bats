#!/usr/bin/env bats
# One manifest split across several pipelines on one run directory, the
# README's way: split -n l/4, then xargs -P 4 rfpipe.  The slot files and
# the flock'd state are shared, each pipeline has its own retry FIFO.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
}

@test "shard: four pipelines on one run directory file each document once, never fetch one twice, and keep the ceiling" {
	local n=120 gone=8 flaky=4 i
	# Every answer takes 20 ms, so the pipelines' requests overlap at the
	# portal.
	export RFPIPE_TIME_SCALE=1
	printf 'routes:\n  - {match: "/nih/*", endpoint: nih, delay_ms: 20}\n  - {match: "/gone/*", endpoint: nih, script: [404], delay_ms: 20}\n  - {match: "/flaky/*", endpoint: nih, script: [503, 200], delay_ms: 20}\n' \
	    >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{
		manifest /nih $((n - gone - flaky)) nih
		for i in $(seq 1 $gone); do
			printf '{"id":"gone-%d","url":"%s/gone/%d","endpoint":"nih"}\n' "$i" "$MOCK_URL" "$i"
		done
		for i in $(seq 1 $flaky); do
			printf '{"id":"flaky-%d","url":"%s/flaky/%d","endpoint":"nih"}\n' "$i" "$MOCK_URL" "$i"
		done
	} | shuf --random-source=<(yes) >"$BATS_TEST_TMPDIR/manifest.ndjson"
	printf 'endpoints:\n  nih: {concurrency: 3, rate: 400}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	cd "$BATS_TEST_TMPDIR"
	split -n l/4 manifest.ndjson part.
	[ "$(ls part.* | wc -l)" -eq 4 ]
	# As the README has it, with each pipeline's exit status printed.
	run -0 sh -c 'ls part.* | xargs -P 4 -I{} sh -c '\''rfpipe -q -j 4 --config c.yaml --budget 100 --run-dir run "$1"; echo "$1 $?"'\'' sh {}'
	echo "$output"
	[ "${#lines[@]}" -eq 4 ]
	# 0 for a part with no 404, 3 for one with dead letters; never 1 or 2.
	for i in "${lines[@]}"; do
		[[ $i == part.a[a-d]' '[03] ]] || fail "a pipeline ended: $i"
	done
	# Every document filed exactly once, across results and dead letters.
	filed_once run manifest.ndjson
	[ "$(wc -l <run/results.ndjson)" -eq $((n - gone)) ]
	[ "$(jq -s '[.[] | select(.dead_reason == "permanent")] | length' run/dead.ndjson)" -eq $gone ]
	# Nothing fetched twice: one request per document, and two for each
	# answered 503 first.
	mock_stop
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq $((n + flaky)) ]
	[ "$(jq -r 'select(.kind == "request" and (.path | startswith("/flaky/") | not)) | .path' "$MOCK_LOG" | sort | uniq -d)" = "" ]
	[ "$(jq -r 'select(.kind == "request" and (.path | startswith("/flaky/"))) | .path' "$MOCK_LOG" | sort | uniq -c | awk '$1 != 2')" = "" ]
	# The ceiling of 3 held across the four, and was reached: requests the
	# portal was serving at once, from the log's times (see mock_overlap).
	[ "$(mock_overlap nih 0.02)" -le 3 ]
	[ "$(mock_overlap nih 0.02)" -eq 3 ]
	# One budget for the whole run, the count given (not 3x one part), and
	# every pipeline's retries spent from it.
	jq -e --argjson f $flaky '.total == 100 and .left == 100 - $f' run/state/budget.json
	# Each pipeline reconciled its own part.
	[ "$(jq -s 'map(.admitted) | add' run/state/fetch.*.json)" -eq $n ]
}
