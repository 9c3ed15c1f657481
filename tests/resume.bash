# Crash and resume, shared by resume.bats (seeds 1-6) and resume-more.bats
# (seeds 7-12): a 150-document batch (half submissions) is killed with
# SIGKILL at a seeded moment in one stage, then re-run to completion.
# Whatever the stage and the moment: every id ends exactly once across
# results.ndjson and dead.ndjson, and no submission is committed twice.
# The seeds are in two files so that bats runs the two halves at once:
# in one, they ran 110 s one after another, the longest file of the suite.
# shellcheck shell=bash

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	export RFPIPE_TIME_SCALE=0.1
}

# manifest: 150 documents on the mock, half of them submissions, the last
# five of each kind slow.  (300 took each test 6 to 12 s, in both passes.)
manifest() {
	{
		for i in $(seq 1 75); do
			s=
			[ "$i" -le 70 ] || s=slow/
			printf '{"id":"get-%d","url":"%s/fetch/%sdoc-%d","endpoint":"fetch"}\n' "$i" "$MOCK_URL" "$s" "$i"
			printf '{"id":"sub-%d","url":"%s/submit/%sapp-%d","method":"POST","body":{"n":%d},"endpoint":"submit","cycle":"2026"}\n' "$i" "$MOCK_URL" "$s" "$i" "$i"
		done
	} >"$BATS_TEST_TMPDIR/m"
}

# crash_and_resume SEED STAGE [CONFIG]
crash_and_resume() {
	local seed=$1 stage=$2 conf=${3:-$FIX/pipeline/crash-rfpipe.yaml} want pid first
	# A seeded moment: once the portal has had requests for 5-60 % of the
	# documents, it holds the rest while the stage is killed.
	want=$(awk -v s="$seed" 'BEGIN { srand(s); printf "%d", 150 * (0.05 + rand() * 0.55) }')
	mock_start "$FIX/pipeline/crash.yaml" --hold-at "$want"
	manifest
	pipeline.sh -q -j 16 --seed "$seed" --config "$conf" --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" &
	pid=$!
	kill_stage_at "$pid" "$stage"
	first=0
	wait "$pid" || first=$?
	[ "$first" -eq 1 ]
	[ "$(cat "$RUN/results.ndjson" "$RUN/dead.ndjson" | wc -l)" -lt 150 ]
	# The re-run finishes the batch.
	run pipeline.sh -q -j 16 --seed "$seed" --config "$conf" --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# shellcheck disable=SC2154 # bats' run sets status
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]
	# Every id exactly once across both files.
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/ids")" -eq 150 ]
	# No key committed twice.
	[ "$(jq -s '[.[] | select(.committed == true) | .key] | group_by(.) | map(length) | max // 0' "$MOCK_LOG")" -le 1 ]
	# Every dead letter says why.
	jq -s -e 'all(.dead_reason != null)' "$RUN/dead.ndjson"
}
