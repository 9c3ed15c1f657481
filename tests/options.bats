#!/usr/bin/env bats
# The command line every stage shares, tested on each: --help, a bad
# option, a bad value, an operand, a bad --config, RFPIPE_TIME_SCALE, empty
# input and a failed write to stdout, all worded the project's way with its
# own name.

load test_helper

STAGES=(rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink rfp-queue)

setup() {
	RD=$BATS_TEST_TMPDIR/run
}

# needs STAGE: the options STAGE cannot read a record without.
needs() {
	case $1 in
	rfp-parse) echo --run-dir "$RD" ;;
	rfp-sink) echo -q --run-dir "$RD" ;;
	esac
}

@test "options: an unknown option is named, with the usage, exit 2, on every stage" {
	local s
	for s in "${STAGES[@]}"; do
		run -2 --separate-stderr "$s" --bogus --run-dir "$RD" </dev/null
		[ "${stderr_lines[0]}" = "$s: unknown option \"--bogus\"" ]
		[[ ${stderr_lines[1]} == "usage: $s "* ]]
		[ -z "$output" ]
		# Nothing is made before the options are read.
		[ ! -e "$RD" ]
		# Named, not its value: a mistyped --state=URL holds a password.
		run -2 --separate-stderr "$s" --sate=postgresql://u:S3cret@h/db </dev/null
		[ "${stderr_lines[0]}" = "$s: unknown option \"--sate\"" ] || fail "$stderr"
	done
}

@test "options: --help and -h print the whole usage on stdout and exit 0, on every stage" {
	local s h word
	for s in "${STAGES[@]}"; do
		for h in --help -h; do
			run -0 --separate-stderr "$s" "$h"
			[[ $output == "usage: $s "* ]] || fail "$s $h: $output"
			[ -z "$stderr" ]
		done
	done
	# Past its first line: an option from the last lines of the usage.
	while IFS='|' read -r s word; do
		run -0 "$s" --help
		[[ $output == *"$word"* ]] || fail "$s --help has no $word"
	done <<'EOF'
rfp-fetch|[--resume]
rfp-backoff|--max-attempts N
rfp-sink|--run-dir DIR
EOF
}

@test "options: an operand is named, with the usage, exit 2, on every stage that reads stdin" {
	local s op
	while IFS='|' read -r s op; do
		# shellcheck disable=SC2046  # needs: words on purpose
		run -2 --separate-stderr "$s" $(needs "$s") "$op" </dev/null
		[ "${stderr_lines[0]}" = "$s: unexpected argument \"$op\"" ] ||
		    fail "$s $op: ${stderr_lines[0]}"
		[[ $stderr == *"usage: $s "* ]]
		[ -z "$output" ]
	done <<'EOF'
rfp-fetch|manifest.ndjson
rfp-parse|extra
rfp-classify|input.ndjson
rfp-backoff|extra
rfp-sink|extra
EOF
}

@test "options: bad option values exit 2 naming the option, nothing on stdout" {
	local s opt val msg
	while IFS='|' read -r s opt val msg; do
		run --separate-stderr -2 "$s" "$opt" "$val" </dev/null
		[ "$output" = "" ] || fail "$s $opt $val wrote stdout"
		[[ "${stderr_lines[0]}" == "$s: option $msg"* ]] ||
		    fail "$s $opt $val: ${stderr_lines[0]}"
	done <<'EOF'
rfp-fetch|-j|0|--jobs: expected an integer from 1 to 4096, got "0"
rfp-fetch|--jobs|x|--jobs: expected an integer from 1 to 4096, got "x"
rfp-fetch|--max-body|0|--max-body: expected an integer from 1 to
rfp-fetch|--max-body|1k|--max-body: expected an integer from 1 to
rfp-fetch|--max-redirects|-1|--max-redirects: expected an integer from 0 to 50
rfp-fetch|--timeout|soon|--timeout: expected a duration such as "30s" or "1h30m", got "soon"
rfp-fetch|--connect-timeout|-5|--connect-timeout: expected a duration
rfp-fetch|--deadline|never|--deadline: cannot read "never" as a time
rfp-fetch|--owner|../x|--owner: expected at most 40 letters, digits, '.', '_' and '-', got "../x"
rfp-sink|--owner|a/b|--owner: expected at most 40 letters
rfp-parse|-j|0|--jobs: expected an integer from 1 to 4096, got "0"
rfp-backoff|--max-attempts|0|--max-attempts: expected an integer from 1 to 1000, got "0"
rfp-backoff|--max-attempts|5x|--max-attempts: expected an integer from 1 to 1000, got "5x"
rfp-backoff|--admitted|-1|--admitted: expected an integer from 0 to
rfp-backoff|--seed|-3|--seed: expected an integer from 0 to
rfp-backoff|--seed| 7|--seed: expected an integer from 0 to
rfp-backoff|--budget|3y|--budget: expected a count or a multiple such as "3x", got "3y"
rfp-backoff|--budget|-2|--budget: expected a count or a multiple
rfp-backoff|--base|soon|--base: expected a duration such as "30s" or "1h30m", got "soon"
rfp-backoff|--cap|-1s|--cap: expected a duration
rfp-backoff|--max-retry-after|1 h|--max-retry-after: expected a duration
rfp-backoff|--deadline|tomorrow|--deadline: cannot read "tomorrow" as a time
rfp-backoff|--deadline|25:00|--deadline: cannot read "25:00" as a time
EOF
}

@test "options: a bad --config exits 2 naming file:line, nothing on stdout, on every stage that reads one" {
	local s yaml msg
	cd "$BATS_TEST_TMPDIR"
	for s in rfp-fetch rfp-parse rfp-classify rfp-backoff; do
		while IFS='|' read -r yaml msg; do
			printf '%b' "$yaml" >rfpipe.yaml
			run --separate-stderr -2 "$s" --config rfpipe.yaml </dev/null
			[ -z "$output" ] || fail "$s, $yaml: wrote $output"
			# shellcheck disable=SC2053  # MSG: a pattern
			[[ ${stderr_lines[0]} == "$s: "$msg ]] ||
			    fail "$s, $yaml: ${stderr_lines[0]}"
		done <<'EOF'
concurrency: 2\ntimeout: 30s\nmax_bodyy: 100\n|rfpipe.yaml:3: unknown key "max_bodyy"
endpoints:\n  nih:\n    rate: 2\n    concurency: 4\n|rfpipe.yaml:4: unknown key "concurency"
base: 1s\nmax_attempts: many\n|rfpipe.yaml:2: key "max_attempts": expected an integer*
cap: 1s\nbase: 1s\ncap: 2s\n|rfpipe.yaml:3: duplicate key "cap"
base: 1s\n---\nmax_atempts: 3\n|rfpipe.yaml:*
EOF
		run --separate-stderr -2 "$s" --config "$BATS_TEST_TMPDIR/nope.yaml" </dev/null
		[ "${stderr_lines[0]}" = "$s: open $BATS_TEST_TMPDIR/nope.yaml: No such file or directory" ]
	done
}

@test "options: RFPIPE_TIME_SCALE outside (0, 1] exits 2 naming it, on every stage that keeps time" {
	local s v
	for s in rfp-fetch rfp-parse rfp-backoff rfp-sink rfp-queue; do
		for v in 5 abc 0; do
			# shellcheck disable=SC2046  # needs: words on purpose
			RFPIPE_TIME_SCALE=$v run --separate-stderr -2 "$s" $(needs "$s") </dev/null
			[ "${stderr_lines[0]}" = "$s: environment RFPIPE_TIME_SCALE: expected a number in (0, 1], got \"$v\"" ] ||
			    fail "$s, $v: ${stderr_lines[0]}"
		done
	done
}

@test "options: empty input gives empty output, nothing on stderr and exit 0, on every stage that reads stdin" {
	local s
	for s in rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink; do
		# shellcheck disable=SC2046  # needs: words on purpose
		run -0 --separate-stderr "$s" $(needs "$s") </dev/null
		[ "$output" = "" ] || fail "$s wrote $output"
		[ "$stderr" = "" ] || fail "$s said $stderr"
	done
}

@test "options: a failed write to stdout exits 1 and says so, on every stage that reads stdin" {
	# MSG: a pattern of what it says (merged with what stderr gets).
	local s args in msg
	echo 'not json' >"$BATS_TEST_TMPDIR/bad"
	echo '{"id":"a","status":200}' >"$BATS_TEST_TMPDIR/status"
	while IFS='|' read -r s args in msg; do
		# shellcheck disable=SC2086  # ARGS: words on purpose
		run -1 sh -c '"$@" <"$0" >/dev/full' "$in" "$s" $args
		# shellcheck disable=SC2053  # MSG: a pattern
		[[ $output == $msg ]] || fail "$s: $output"
	done <<EOF
rfp-fetch||$BATS_TEST_TMPDIR/bad|*rfp-fetch: write stdout: No space left on device*
rfp-parse|--run-dir $RD|$BATS_TEST_TMPDIR/bad|*rfp-parse: write stdout: No space left on device*
rfp-classify||$BATS_TEST_TMPDIR/status|rfp-classify: *No space left on device*
rfp-backoff|--seed 1|$FIX/backoff/mixed.ndjson|*rfp-backoff: *
rfp-sink|-q --run-dir $RD|$FIX/sink/fates.ndjson|*rfp-sink: *
EOF
}

@test "options: a missing value is named, exit 2" {
	run -2 --separate-stderr rfp-fetch --run-dir
	[ "${stderr_lines[0]}" = 'rfp-fetch: option --run-dir: needs a value' ]
	run -2 --separate-stderr rfp-fetch -j
	[ "${stderr_lines[0]}" = 'rfp-fetch: option -j: needs a value' ]
	run -2 --separate-stderr rfp-backoff --budget
	[ "${stderr_lines[0]}" = 'rfp-backoff: option --budget: needs a value' ]
}

@test "options: an empty --run-dir is refused, and nothing is made at the root (\"\$RD/state\" was /state)" {
	local had=0
	[ ! -e /state ] || had=1
	mkdir "$BATS_TEST_TMPDIR/w" && cd "$BATS_TEST_TMPDIR/w"
	printf '{"id":"a","url":"http://127.0.0.1:1/a"}\n' >m
	for o in "--run-dir=" "--run-dir ''"; do
		eval "run -2 --separate-stderr pipeline.sh $o m"
		[ "${stderr_lines[0]}" = 'rfpipe: option --run-dir: needs a value, not an empty one' ]
	done
	[ "$(ls -A)" = m ]
	[ "$had" -eq 1 ] || [ ! -e /state ]
}

@test "options: an empty value of any rfpipe option is refused naming it, exit 2, nothing run (--config \"\$CONF\" with CONF unset ran with no limits)" {
	mkdir "$BATS_TEST_TMPDIR/w" && cd "$BATS_TEST_TMPDIR/w"
	printf '{"id":"a","url":"http://127.0.0.1:1/a"}\n' >m
	local o
	for o in batch budget config deadline lease max-attempts queue seed state; do
		run -2 --separate-stderr pipeline.sh "--$o" '' m
		[ "${stderr_lines[0]}" = "rfpipe: option --$o: needs a value, not an empty one" ] || fail "--$o '': $stderr"
		run -2 --separate-stderr pipeline.sh "--$o=" m
		[ "${stderr_lines[0]}" = "rfpipe: option --$o: needs a value, not an empty one" ] || fail "--$o=: $stderr"
	done
	run -2 --separate-stderr pipeline.sh -j '' m
	[ "${stderr_lines[0]}" = "rfpipe: option -j: needs a value, not an empty one" ]
	for o in --jobs= --progress=; do
		run -2 --separate-stderr pipeline.sh "$o" m
		[ "${stderr_lines[0]}" = "rfpipe: option ${o%=}: needs a value, not an empty one" ] || fail "$o: $stderr"
	done
	# A lease of 0 runs out as it is granted.
	run -2 --separate-stderr rfp-queue --lease 0 count
	[ "${stderr_lines[0]}" = 'rfp-queue: option --lease: at least 1 s, not "0"' ]
	run -2 --separate-stderr pipeline.sh --queue postgresql://127.0.0.1:1/x --lease 0.5
	[ "${stderr_lines[0]}" = 'rfp-queue: option --lease: at least 1 s, not "0.5"' ]
	# Nor an empty MANIFEST ("$MANIFEST" unset), with or without --queue.
	run -2 --separate-stderr pipeline.sh ''
	[ "${stderr_lines[0]}" = "rfpipe: MANIFEST: an empty name, not a file" ]
	run -2 --separate-stderr pipeline.sh --queue postgresql://127.0.0.1:1/x ''
	[ "${stderr_lines[0]}" = "rfpipe: MANIFEST: an empty name, not a file" ]
	# Nothing started: no run directory.
	[ "$(ls -A)" = m ]
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
	    rfp-queue rfp-report rfp-mockportal; do
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
