#!/usr/bin/env bats
# The test harness itself: a test that can wait is bounded.

load test_helper

@test "harness: a test that hangs fails in seconds, not when it ends, and leaves nothing running" {
	SECONDS=0
	run -1 timeout 60 env RFP_TEST_TIMEOUT=2 bats "$FIX/harness/hang.bats"
	echo "$output"
	[ "$SECONDS" -lt 30 ]
	[[ ${lines[1]} == "not ok 1 a command that never ends, inside run" ]]
	[[ $output == *"not ok 2 a loop that never ends, in the test itself"* ]]
	[[ $output == *"ok 3 a test that ends in time"* ]]
	[ "$(grep -c "hang guard: the test still ran after 2 s" <<<"$output")" -eq 2 ]
	# Nothing of them is left running.
	! pgrep -f "sleep 600" >/dev/null
}

@test "harness: the guard of a test that ended goes with it" {
	SECONDS=0
	# Each test's guard would fail it 30 s on: its own end ends it.
	run -0 timeout 60 env RFP_TEST_TIMEOUT=30 bats -f "ends in time" "$FIX/harness/hang.bats"
	[ "$SECONDS" -lt 10 ]
	! pgrep -f "bats-exec-test.*hang.bats test_a_test_that_ends_in_time" >/dev/null
}

@test "harness: check and check_line fail on a record that is not there, whatever the filter says of null" {
	local f
	for f in '.x == null' '.x != "dead"' 'has("x") | not' 'length == 0'; do
		for output in '{"id":"other","x":3,"line":9}' ''; do
			if check a "$f" 2>/dev/null || check_line 1 "$f" 2>/dev/null; then
				echo "passed: $f on \"$output\"" >&2
				return 1
			fi
		done
	done
	output=$'{"id":"a","x":1,"line":1}\n{"id":"a","x":2,"line":2}'
	check a '.x == 2'
	if check a '.x == 1' 2>/dev/null; then return 1; fi
	check_line 1 '.x == 1'
}
