#!/usr/bin/env bats
# The test harness itself: a test that can wait is bounded.

load test_helper

@test "harness: a command hung inside run fails its test in seconds, not when it ends" {
	SECONDS=0
	run -1 timeout 60 env BATS_TEST_TIMEOUT=2 bats "$FIX/harness/hang.bats"
	[[ $output == *"not ok 1"*"timeout after 2s"* ]]
	[ "$SECONDS" -lt 30 ]
	# Nothing of it is left running.
	! pgrep -f "sleep 600" >/dev/null
}
