#!/usr/bin/env bats
# Every executable words a bad option the project's way, with its own name.

load test_helper

@test "options: an unknown option is named, with the usage, exit 2, on every stage" {
	for s in rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink rfp-queue; do
		run -2 --separate-stderr "$s" --bogus
		[ "${stderr_lines[0]}" = "$s: unknown option \"--bogus\"" ]
		[[ ${stderr_lines[1]} == "usage: $s "* ]]
		[ -z "$output" ]
	done
}

@test "options: a missing value is named, exit 2" {
	run -2 --separate-stderr rfp-fetch --run-dir
	[ "${stderr_lines[0]}" = 'rfp-fetch: option --run-dir: needs a value' ]
	run -2 --separate-stderr rfp-fetch -j
	[ "${stderr_lines[0]}" = 'rfp-fetch: option -j: needs a value' ]
	run -2 --separate-stderr rfp-backoff --budget
	[ "${stderr_lines[0]}" = 'rfp-backoff: option --budget: needs a value' ]
}

@test "options: the unknown letter of a cluster is the one named" {
	run -2 --separate-stderr rfp-sink -qz
	[ "${stderr_lines[0]}" = 'rfp-sink: unknown option "-z"' ]
}

@test "options: the message uses the program's name, not how it was called" {
	ln -s "$(command -v rfp-classify)" "$BATS_TEST_TMPDIR/other-name"
	run -2 --separate-stderr "$BATS_TEST_TMPDIR/other-name" --bogus
	[ "${stderr_lines[0]}" = 'rfp-classify: unknown option "--bogus"' ]
}

@test "options: -v makes rfp-backoff say each retry it schedules, and silence is the default" {
	run -0 --separate-stderr sh -c 'echo "{\"id\":\"a\",\"class\":\"transient\",\"attempt\":1}" | rfp-backoff -v --seed 1 --budget 5'
	[[ ${stderr_lines[0]} == 'rfp-backoff: line 1: a: retry in '*' s (attempt 1, 4 retries left)' ]]
	run -0 --separate-stderr sh -c 'echo "{\"id\":\"a\",\"class\":\"transient\",\"attempt\":1}" | rfp-backoff --seed 1 --budget 5'
	[ -z "$stderr" ]
}

# readme_opts PROGRAM: the options the README's table lists for PROGRAM.
readme_opts() {
	sed -n '/^## Options/,/^## /p' "$ROOT/README.md" |
	    grep -F "| \`$1\` |" | grep -oE -- '`-[-a-zA-Z0-9]+`' | tr -d '`' |
	    sort -u
}

@test "options: the README's table lists each program's --help options, no more" {
	local p got want
	for p in rfpipe rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink \
	    rfp-queue rfp-mockportal; do
		if [ "$p" = rfpipe ]; then
			want=$(help_opts "$ROOT/pipeline.sh")
		else
			want=$(help_opts "$p")
		fi
		got=$(readme_opts "$p")
		[ -n "$got" ] || fail "README.md: no row for $p under ## Options"
		[ "$got" = "$want" ] ||
		    fail "README.md lists for $p: $(echo $got); --help shows: $(echo $want)"
	done
}
