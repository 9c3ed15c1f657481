#!/usr/bin/env bats
# The test harness itself: a test that can wait is bounded.

load test_helper

@test "harness: a test that hangs fails in seconds, not when it ends, and leaves nothing running" {
	local n
	SECONDS=0
	run -1 timeout 120 env RFP_TEST_TIMEOUT=1 bats "$FIX/harness/hang.bats"
	echo "$output"
	[ "$SECONDS" -lt 90 ]
	# Each test named; every one that hangs failed by the guard, the
	# two that end passed (what one left running killed by its guard).
	n=$(grep -c '^@test' "$FIX/harness/hang.bats")
	[ "$(grep -c '^ok\|^not ok' <<<"$output")" -eq "$n" ]
	[ "$(grep -c '^not ok' <<<"$output")" -eq $((n - 2)) ]
	[[ $output == *"ok $((n - 1)) a test that ends in time, leaving a program running"* ]]
	[[ $output == *"ok $n a test that ends in time"* ]]
	[ "$(grep -c "hang guard: the test still ran after 1 s" <<<"$output")" -eq $((n - 2)) ]
	# Nothing of them is left running (a guard looks every second).
	gone_all "sleep 600|bats-exec-test.*hang.bats"
}

# gone_all PATTERN: no process matches PATTERN (pgrep -f) within 5 s.
gone_all() {
	POLL_STEP=0.1 poll 5 not running -f "$1" && return 0
	pgrep -fa "$1" >&2
	return 1
}

@test "harness: BATS_TEST_TIMEOUT is the guard's, not bats' own watchdog's" {
	run -1 timeout 60 env BATS_TEST_TIMEOUT=1 bats -f "run directly" "$FIX/harness/hang.bats"
	[[ $output == *"hang guard: the test still ran after 1 s"* ]]
	gone_all "sleep 600"
}

@test "harness: the guard of a test that ended goes with it" {
	SECONDS=0
	# Each test's guard would fail it 30 s on: its own end ends it.
	run -0 timeout 60 env RFP_TEST_TIMEOUT=30 bats -f "ends in time$" "$FIX/harness/hang.bats"
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

@test "harness: every shell file of the project passes shellcheck, and every page mandoc's lint (make lint)" {
	command -v shellcheck >/dev/null 2>&1 || skip "shellcheck is not installed"
	# Under make check, MAKEFLAGS says -w: the directory, printed.
	run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory \
	    -C "$ROOT" lint
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}
