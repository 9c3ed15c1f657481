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
