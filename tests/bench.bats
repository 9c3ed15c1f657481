#!/usr/bin/env bats
# The bench's scripts are not run by the tests (they take minutes and
# measure time), so a fault in one would wait for the next bench to show:
# each must parse, and bench/run.sh, with every part it sources, must pass
# shellcheck.

load test_helper

@test "bench: run.sh and every part of it parse" {
	local f
	for f in "$ROOT"/bench/run.sh "$ROOT"/bench/lib/*.sh "$ROOT"/bench/*.sh; do
		bash -n "$f" || fail "$f does not parse"
	done
}

@test "bench: run.sh and the parts it sources pass shellcheck" {
	command -v shellcheck >/dev/null 2>&1 || skip "shellcheck is not installed"
	cd "$ROOT/bench"
	run shellcheck -x run.sh
	echo "$output"
	[ "$status" -eq 0 ]
}
