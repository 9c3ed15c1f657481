#!/usr/bin/env bats
# The wire: what rfp-fetch puts on it, and what it never does behind the
# record's back (issue #24).  Each table is one rule of rfpipe(7) SECURITY.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
}

teardown() {
	mock_stop
	if [ -n "${MOCK2_PID:-}" ]; then
		kill "$MOCK2_PID" 2>/dev/null
		wait "$MOCK2_PID" 2>/dev/null
	fi
}

# --- A submission is never handed to a connection libcurl may replay -----

@test "wire: a submission dropped after commit on a reused connection is sent once, never replayed by libcurl (#24)" {
	mock_start "$FIX/wire/replay.yaml"
	{
		printf '{"id":"warm-%d","url":"%s/warm","endpoint":"s"}\n' 1 "$MOCK_URL" 2 "$MOCK_URL"
		for i in 1 2 3; do
			printf '{"id":"s-%d","url":"%s/s/%d","method":"POST","body":{"i":%d},"endpoint":"s"}\n' \
			    "$i" "$MOCK_URL" "$i" "$i"
		done
	} >"$BATS_TEST_TMPDIR/m"
	run -3 timeout 60 "$ROOT/pipeline.sh" -q -j 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# One request per submission, each on a connection of its own.
	[ "$(requests_for /s/1)" -eq 1 ]
	[ "$(requests_for /s/2)" -eq 1 ]
	[ "$(requests_for /s/3)" -eq 1 ]
	jq -s -e '[.[] | select(.method == "POST")] | length == 3 and all(.conn_seq == 1)' "$MOCK_LOG"
	jq -s -e '[.[] | select(.committed and .duplicate)] | length == 0' "$MOCK_LOG"
	# The client cannot know: each is ambiguous, not done.
	jq -s -e 'length == 3 and all(.dead_reason == "ambiguous_submit")' "$RUN/dead.ndjson"
	jq -s -e 'length == 2 and all(.id | startswith("warm"))' "$RUN/results.ndjson"
	# Only submissions are kept off reused connections: GETs share one.
	jq -s -e '[.[] | select(.method == "GET")] | length == 2 and (map(.conn_seq) | max) == 2' "$MOCK_LOG"
}
