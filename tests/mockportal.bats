#!/usr/bin/env bats
# rfp-mockportal itself: scenario errors name file, line and key; redirects.

load test_helper

teardown() {
	mock_stop
}

# scenario TEXT: write a scenario file and try to start the portal on it.
scenario() {
	printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/s.yaml"
	run --separate-stderr timeout 10 rfp-mockportal \
	    --scenario "$BATS_TEST_TMPDIR/s.yaml" --port 0
}

@test "mockportal: an empty, multi-line or misspelt location is refused with file, line and key" {
	scenario $'routes:\n  - match: /a\n    location: ""'
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfp-mockportal: $BATS_TEST_TMPDIR/s.yaml:3: key \"routes.0.location\": expected a non-empty one-line string" ]
	scenario $'routes:\n  - match: /a\n    script: [302]\n    location: "/b\\r\\nX-Injected: 1"'
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'s.yaml:4: key "routes.0.location": expected a non-empty one-line string' ]]
	scenario $'routes:\n  - match: /a\n    locaton: /b'
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'s.yaml:3: unknown key "routes.0.locaton"' ]]
}

@test "mockportal: a route's 3xx answers carry its location; its other answers do not" {
	printf '%s\n' 'routes:' '  - match: /a' '    script: [302, 200]' \
	    '    location: /b' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	run curl -sS -o /dev/null -D - "$MOCK_URL/a"
	[[ "$output" == "HTTP/1.1 302"* ]]
	[[ "$output" == *$'\nLocation: /b\r'* ]]
	run curl -sS -o /dev/null -D - "$MOCK_URL/a"
	[[ "$output" == "HTTP/1.1 200"* ]]
	[[ "$output" != *Location* ]]
}
