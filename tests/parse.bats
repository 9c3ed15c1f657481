#!/usr/bin/env bats
# rfp-parse: real parsers (pdftotext, jq -e) on documents the mock serves,
# small scripts for every way a parser can end, what passes untouched,
# re-runs, bad input, and the stage inside rfpipe (#23).

load test_helper

P=$FIX/parse

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	mkdir -p "$RUN/docs"
	export PARSE_PIDS=$BATS_TEST_TMPDIR/pids
	export PARSE_ARGV=$BATS_TEST_TMPDIR/argv
	export PARSE_COUNT=$BATS_TEST_TMPDIR/count
	export PARSE_STATE=$BATS_TEST_TMPDIR/state
}

teardown() {
	local p
	mock_stop
	# Nothing a parser started may be left; should a test fail, end it.
	if [ -s "$PARSE_PIDS" ]; then
		while read -r p; do kill "$p" 2>/dev/null || :; done <"$PARSE_PIDS"
	fi
}

# conf YAML: write the configuration $BATS_TEST_TMPDIR/c.yaml.
conf() {
	printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/c.yaml"
}

# fetched ID BODY-FILE [EXTRA-JSON]: file BODY-FILE as RUN/docs/ID and
# print the record rfp-fetch makes of a 200 that filed it (endpoint doc
# and its own url, unless EXTRA-JSON has them).
fetched() {
	local extra=${3:-}
	[[ $extra == *'"endpoint":'* ]] || extra='"endpoint":"doc"'${extra:+,$extra}
	[[ $extra == *'"url":'* ]] || extra="\"url\":\"http://127.0.0.1:9/$1\",$extra"
	cp "$2" "$RUN/docs/$1"
	printf '{"id":"%s","attempt":1,"status":200,"error":null,"bytes":%d,"check":null,"body_path":"docs/%s",%s}\n' \
	    "$1" "$(wc -c <"$2")" "$1" "$extra"
}

# parse_run [OPTION...]: rfp-parse over $BATS_TEST_TMPDIR/in, bounded.
parse_run() {
	run --separate-stderr timeout 30 rfp-parse --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" "$@" <"$BATS_TEST_TMPDIR/in"
}

# through: the records of $output on through rfp-classify and rfp-backoff.
through() {
	printf '%s\n' "$output" | rfp-classify | rfp-backoff --seed 1 --budget 10
}

@test "parse: pdftotext reads a real PDF the mock serves into docs/ID.parsed, its size and digest in the record" {
	command -v pdftotext >/dev/null || skip "pdftotext (poppler-utils) is not installed"
	mock_start "$P/portal.yaml"
	printf '{"id":"award-1","url":"%s/pdf/award-1.pdf","endpoint":"nsf"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	conf 'parse: {command: [pdftotext, -layout, "-", "-"], timeout: 1000s}'
	timeout 30 rfp-fetch --run-dir "$RUN" <"$BATS_TEST_TMPDIR/m" >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	[ -z "$stderr" ]
	check award-1 '.parsed == "docs/award-1.parsed" and .status == 200 and (has("parse_error") | not)'
	grep -q 'NSF Award 2026-0042' "$RUN/docs/award-1.parsed"
	grep -q 'Proposal due: 2027-01-15' "$RUN/docs/award-1.parsed"
	check award-1 ".parsed_bytes == $(wc -c <"$RUN/docs/award-1.parsed")"
	check award-1 ".parsed_sha256 == \"$(sha256sum "$RUN/docs/award-1.parsed" | cut -d ' ' -f 1)\""
	[ -z "$(ls -A "$RUN/docs/.parse")" ]
}

@test "parse: a PDF pdftotext cannot read is parse_error failed with its last stderr line, dead parse_failed" {
	command -v pdftotext >/dev/null || skip "pdftotext (poppler-utils) is not installed"
	mock_start "$P/portal.yaml"
	printf '{"id":"bad-1","url":"%s/nsf/bad-1.pdf","endpoint":"nsf"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	conf 'parse: {command: [pdftotext, "-", "-"], timeout: 1000s}'
	timeout 30 rfp-fetch --run-dir "$RUN" <"$BATS_TEST_TMPDIR/m" >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check bad-1 '.parse_error == "failed" and (.parse_detail | startswith("Syntax Error")) and (has("parsed") | not)'
	[ ! -e "$RUN/docs/bad-1.parsed" ]
	run -0 through
	check bad-1 '.class == "permanent" and .reason == "parse_failed" and .fate == "dead" and .dead_reason == "parse_failed" and (.dead_detail | startswith("Syntax Error"))'
}

@test "parse: jq -e passes whole NIH records and refuses one without its field and an HTML page" {
	mock_start "$P/portal.yaml"
	for d in proj-1 short-1 html-1; do
		printf '{"id":"%s","url":"%s/nih/%s","endpoint":"nih"}\n' "$d" "$MOCK_URL" "$d"
	done >"$BATS_TEST_TMPDIR/m"
	conf 'endpoints:
  nih:
    parse:
      command: [jq, -e, "{appl_id, project_title, end: .project_end_date[0:10]} | select(.end != null)"]
      timeout: 1000s'
	timeout 30 rfp-fetch --run-dir "$RUN" <"$BATS_TEST_TMPDIR/m" >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check proj-1 '.parsed == "docs/proj-1.parsed"'
	jq -e '.end == "2027-06-30" and .appl_id == 10000001' "$RUN/docs/proj-1.parsed"
	check short-1 '.parse_error == "failed" and .parse_detail == "exit 4"'
	check html-1 '.parse_error == "failed" and (.parse_detail | test("parse error"))'
}

@test "parse: exit 0, 1 and 75 are parsed, failed and tempfail; classified ok, permanent and transient" {
	conf "endpoints:
  a: {parse: {command: [$P/parsers/ok]}}
  b: {parse: {command: [$P/parsers/fail]}}
  c: {parse: {command: [$P/parsers/later]}}"
	echo 'notice text' >"$BATS_TEST_TMPDIR/body"
	{
		fetched a1 "$BATS_TEST_TMPDIR/body" '"endpoint":"a"'
		fetched b1 "$BATS_TEST_TMPDIR/body" '"endpoint":"b"'
		fetched c1 "$BATS_TEST_TMPDIR/body" '"endpoint":"c"'
	} >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check a1 '.parsed == "docs/a1.parsed" and .parsed_bytes == 12'
	cmp "$RUN/docs/a1.parsed" "$BATS_TEST_TMPDIR/body"
	check b1 '.parse_error == "failed" and .parse_detail == "no due date in this notice"'
	check c1 '.parse_error == "tempfail" and .parse_detail == "licence server busy, try later"'
	run -0 through
	check a1 '.class == "ok" and .fate == "done"'
	check b1 '.class == "permanent" and .fate == "dead" and .dead_reason == "parse_failed" and .dead_detail == "no due date in this notice"'
	check c1 '.class == "transient" and .reason == "parse_tempfail" and .fate == "retry"'
}

@test "parse: a parser past its timeout is killed with all it started, and is transient parse_timeout" {
	# 5 s at a tenth: the parser has half a second to start its child
	# (at the suite's hundredth, a loaded machine had not, once).
	export RFPIPE_TIME_SCALE=0.1
	conf "parse: {command: [$P/parsers/slow], timeout: 5s}"
	fetched s1 "$P/nih-good.json" >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check s1 '.parse_error == "timeout" and .parse_detail == "no result after 5 s"'
	[ -s "$PARSE_PIDS" ]
	gone "$(cat "$PARSE_PIDS")"
	run -0 through
	check s1 '.class == "transient" and .reason == "parse_timeout" and .fate == "retry"'
}

@test "parse: a parser whose output passes output_max is killed, too_large, dead parse_failed" {
	conf "parse: {command: [$P/parsers/flood], output_max: 100000}"
	fetched f1 "$P/nih-good.json" >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check f1 '.parse_error == "too_large" and .parse_detail == "output over 100000 bytes"'
	[ ! -e "$RUN/docs/f1.parsed" ]
	[ -z "$(ls -A "$RUN/docs/.parse")" ]
	run -0 through
	check f1 '.reason == "parse_too_large" and .dead_reason == "parse_failed"'
}

@test "parse: output of exactly output_max bytes is kept, one byte more is too_large" {
	conf "parse: {command: [$P/parsers/ok], output_max: 100}"
	head -c 100 /dev/zero | tr '\0' a >"$BATS_TEST_TMPDIR/b100"
	head -c 101 /dev/zero | tr '\0' a >"$BATS_TEST_TMPDIR/b101"
	{
		fetched e100 "$BATS_TEST_TMPDIR/b100"
		fetched e101 "$BATS_TEST_TMPDIR/b101"
	} >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check e100 '.parsed_bytes == 100'
	check e101 '.parse_error == "too_large" and .parse_detail == "output over 100 bytes"'
}

@test "parse: what a parser leaves running when it exits is ended, and its parse kept" {
	conf "parse: {command: [$P/parsers/leave], timeout: 1000s}"
	fetched l1 "$P/nih-good.json" >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check l1 '.parsed == "docs/l1.parsed"'
	cmp "$RUN/docs/l1.parsed" "$P/nih-good.json"
	gone "$(cat "$PARSE_PIDS")"
}

@test "parse: a child that left the parser's group and holds its output is not waited for past the timeout" {
	command -v setsid >/dev/null || skip "setsid is not installed"
	# 2 s real (time runs a hundred times faster here): the parser must
	# have exited by then, or it is a timeout.  At 0.1 s, a machine busy
	# with six suites at once had not run sh, setsid and cat through.
	conf "parse: {command: [$P/parsers/escape], timeout: 200s}"
	fetched x1 "$P/nih-good.json" >"$BATS_TEST_TMPDIR/in"
	# Waited for, the child's 300 s are cut at 10 (rfp-parse stops).
	run --separate-stderr timeout 10 rfp-parse --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" <"$BATS_TEST_TMPDIR/in"
	assert_success
	check x1 '.parsed == "docs/x1.parsed"'
	cmp "$RUN/docs/x1.parsed" "$P/nih-good.json"
	# The child was out of the group: the run's end left it running (the
	# teardown ends it).
	run ! gone "$(cat "$PARSE_PIDS")"
}

@test "parse: a parser killed by a signal is permanent, the signal named" {
	conf "parse: {command: [$P/parsers/segv]}"
	fetched k1 "$P/nih-good.json" >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check k1 '.parse_error == "signal" and .parse_detail == "killed by SIGSEGV"'
	run -0 through
	check k1 '.class == "permanent" and .reason == "parse_signal" and .dead_reason == "parse_failed" and .dead_detail == "killed by SIGSEGV"'
}

@test "parse: the command gets its configured words only, and the body on stdin, whatever the record holds" {
	conf "parse: {command: [$P/parsers/argv, --strict, '\$(touch pwned)']}"
	printf '%s\n' '$(touch pwned); rm -rf "$HOME" `touch pwned2`' >"$BATS_TEST_TMPDIR/body"
	fetched inj-1 "$BATS_TEST_TMPDIR/body" '"url":"http://127.0.0.1:9/$(touch pwned);rm -rf x","note":"`touch pwned3`; $(touch pwned4)","endpoint":"$(touch pwned5)"' >"$BATS_TEST_TMPDIR/in"
	cd "$BATS_TEST_TMPDIR"
	parse_run
	assert_success
	check inj-1 '.parsed == "docs/inj-1.parsed"'
	[ "$(cat "$PARSE_ARGV")" = "$(printf '2\n--strict\n$(touch pwned)')" ]
	cmp "$RUN/docs/inj-1.parsed" "$BATS_TEST_TMPDIR/body"
	run ! ls "$BATS_TEST_TMPDIR"/pwned* "$RUN"/pwned* "$RUN"/docs/pwned*
}

@test "parse: an id that is no safe file name, or a body_path not docs/ID, is dead bad_input naming line and field" {
	conf "parse: {command: [$P/parsers/ok]}"
	echo body >"$BATS_TEST_TMPDIR/body"
	{
		fetched good "$BATS_TEST_TMPDIR/body"
		printf '%s\n' '{"id":"a;$(touch x)","status":200,"error":null,"body_path":"docs/a;$(touch x)","endpoint":"doc"}'
		printf '%s\n' '{"id":"b","status":200,"error":null,"body_path":"../../etc/passwd","endpoint":"doc"}'
		printf '%s\n' '{not json'
		fetched good2 "$BATS_TEST_TMPDIR/body"
	} >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	[ "${#lines[@]}" -eq 5 ]
	check good '.parsed == "docs/good.parsed"'
	check good2 '.parsed == "docs/good2.parsed"'
	check_line 2 '.fate == "dead" and .dead_reason == "bad_input" and .stage == "rfp-parse" and .dead_detail == "field \"id\": not a safe file name"'
	check_line 3 '.fate == "dead" and .dead_reason == "bad_input" and .dead_detail == "field \"body_path\": expected \"docs/ID\""'
	check_line 4 '.fate == "dead" and .dead_reason == "bad_input" and .raw == "{not json"'
	[ "${stderr_lines[0]}" = 'rfp-parse: line 2: field "id": not a safe file name' ]
	[ "${stderr_lines[1]}" = 'rfp-parse: line 3: field "body_path": expected "docs/ID"' ]
	[[ ${stderr_lines[2]} == 'rfp-parse: line 4: malformed JSON'* ]]
	[ "${#stderr_lines[@]}" -eq 3 ]
	[ ! -e x ] && [ ! -e "$RUN/x" ]
}

@test "parse: a field it reads of the wrong type is dead bad_input naming line and field; a dead record passes as it came" {
	conf "parse: {command: [$P/parsers/ok]}"
	echo body >"$BATS_TEST_TMPDIR/body"
	{
		printf '%s\n' '{"id":"s","status":"200","error":null,"body_path":"docs/s","endpoint":"doc"}'
		printf '%s\n' '{"id":"e","status":200,"error":7,"body_path":"docs/e","endpoint":"doc"}'
		printf '%s\n' '{"id":"d","status":"200","fate":"dead","dead_reason":"permanent","endpoint":"doc"}'
		fetched good "$BATS_TEST_TMPDIR/body"
	} >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	[ "${#lines[@]}" -eq 4 ]
	check_line 1 '.fate == "dead" and .dead_reason == "bad_input" and .stage == "rfp-parse" and (.dead_detail | startswith("field \"status\": "))'
	check_line 2 '.dead_reason == "bad_input" and (.dead_detail | startswith("field \"error\": "))'
	check d '.dead_reason == "permanent" and .status == "200"'
	check good '.parsed == "docs/good.parsed"'
	[[ ${stderr_lines[0]} == 'rfp-parse: line 1: field "status": '* ]]
	[[ ${stderr_lines[1]} == 'rfp-parse: line 2: field "error": '* ]]
	[ "${#stderr_lines[@]}" -eq 2 ]
}

@test "parse: a body or a parse that is a FIFO or a directory is no hang: bad_input, or parsed again" {
	conf "parse: {command: [$P/parsers/ok]}"
	echo body >"$BATS_TEST_TMPDIR/body"
	{
		fetched good "$BATS_TEST_TMPDIR/body"
		fetched fifo "$BATS_TEST_TMPDIR/body"
		fetched dir "$BATS_TEST_TMPDIR/body"
		fetched again "$BATS_TEST_TMPDIR/body" \
		    '"parsed":"docs/again.parsed","parsed_sha256":"'"$(sha256sum <"$BATS_TEST_TMPDIR/body" | cut -c1-64)"'"'
	} >"$BATS_TEST_TMPDIR/in"
	rm "$RUN/docs/fifo" "$RUN/docs/dir"
	mkfifo "$RUN/docs/fifo" "$RUN/docs/again.parsed"
	mkdir "$RUN/docs/dir"
	parse_run
	assert_success
	[ "${#lines[@]}" -eq 4 ]
	check good '.parsed == "docs/good.parsed"'
	check fifo '.fate == "dead" and .dead_reason == "bad_input" and (.dead_detail | endswith("docs/fifo: not a regular file"))'
	check dir '.fate == "dead" and .dead_reason == "bad_input" and (.dead_detail | endswith("docs/dir: not a regular file"))'
	check again '.parsed == "docs/again.parsed" and .parsed_bytes == 5'
	[ -f "$RUN/docs/again.parsed" ]
	[ "${#stderr_lines[@]}" -eq 2 ]
}

@test "parse: a run directory not ours alone, or a docs/.parse that is a symbolic link, is refused before a parser runs" {
	conf "parse: {command: [$P/parsers/ok]}"
	echo body >"$BATS_TEST_TMPDIR/body"
	fetched a "$BATS_TEST_TMPDIR/body" >"$BATS_TEST_TMPDIR/in"
	mkdir "$BATS_TEST_TMPDIR/elsewhere"
	ln -s "$BATS_TEST_TMPDIR/elsewhere" "$RUN/docs/.parse"
	parse_run
	[ "$status" -eq 1 ]
	[[ ${stderr_lines[0]} == "rfp-parse: "*"$RUN/docs/.parse"* ]]
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/elsewhere")" ]
	[ ! -e "$RUN/docs/a.parsed" ]
	rm "$RUN/docs/.parse"
	chmod 0777 "$RUN/docs"
	parse_run
	[ "$status" -eq 1 ]
	[ "$stderr" = "rfp-parse: run directory $RUN/docs: writable by others (mode 0777); chmod go-w it" ]
	[ ! -e "$RUN/docs/a.parsed" ]
}

@test "parse: a record rfp-fetch made longer than a manifest line passes as it came, and is parsed" {
	conf "parse: {command: [$P/parsers/ok]}"
	echo body >"$BATS_TEST_TMPDIR/body"
	local pad
	# A manifest line at its cap, and what rfp-fetch adds to it.
	pad=$(head -c 1048500 /dev/zero | tr '\0' x)
	{
		fetched big "$BATS_TEST_TMPDIR/body" "\"pad\":\"$pad\""
		fetched other "$BATS_TEST_TMPDIR/body" "\"fate\":\"dead\",\"pad\":\"$pad\""
	} >"$BATS_TEST_TMPDIR/in"
	[ "$(head -n 1 "$BATS_TEST_TMPDIR/in" | wc -c)" -gt 1048577 ]
	parse_run
	assert_success
	[ -z "$stderr" ]
	check big '.parsed == "docs/big.parsed" and (.pad | length) == 1048500'
	[ "$(sed -n 2p <<<"$output")" = "$(sed -n 2p "$BATS_TEST_TMPDIR/in")" ] ||
	    [ "$(sed -n 1p <<<"$output")" = "$(sed -n 2p "$BATS_TEST_TMPDIR/in")" ]
}

@test "parse: failures, bodiless records, other endpoints and fated records pass through byte for byte" {
	conf "endpoints:
  doc: {parse: {command: [$P/parsers/count]}}"
	echo body >"$RUN/docs/x"
	cat >"$BATS_TEST_TMPDIR/in" <<-'EOF'
	{"id":"s503","status":503,"error":null,"body_path":"docs/x","endpoint":"doc","z":[1, 2]}
	{"id":"err","status":null,"error":"timeout","endpoint":"doc"}
	{"id":"chk","status":200,"error":null,"check":"magic","body_path":"docs/x","endpoint":"doc"}
	{"id":"nobody","status":204,"error":null,"endpoint":"doc"}
	{"id":"other","status":200,"error":null,"body_path":"docs/x","endpoint":"elsewhere"}
	{"id":"dead","status":200,"error":null,"body_path":"docs/x","endpoint":"doc","fate":"dead","dead_reason":"x"}
	{"id":"retry","status":200,"error":null,"body_path":"docs/x","endpoint":"doc","fate":"retry"}
	EOF
	parse_run
	assert_success
	[ "$(sort <<<"$output")" = "$(sort "$BATS_TEST_TMPDIR/in")" ]
	[ ! -e "$PARSE_COUNT" ]
}

@test "parse: a re-run over its own output parses only what was not parsed; --reparse parses all again" {
	conf "endpoints:
  doc: {parse: {command: [$P/parsers/count]}}
  busy: {parse: {command: [$P/parsers/later]}}"
	echo body >"$BATS_TEST_TMPDIR/body"
	{
		fetched r1 "$BATS_TEST_TMPDIR/body"
		fetched r2 "$BATS_TEST_TMPDIR/body"
		fetched r3 "$BATS_TEST_TMPDIR/body" '"endpoint":"busy"'
	} >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	[ "$(wc -l <"$PARSE_COUNT")" -eq 2 ]
	check r3 '.parse_error == "tempfail"'
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/in"
	# r3's parser works now; r2's parsed file was changed since.
	conf "parse: {command: [$P/parsers/count]}"
	echo changed >>"$RUN/docs/r2.parsed"
	: >"$PARSE_COUNT"
	parse_run
	assert_success
	[ "$(wc -l <"$PARSE_COUNT")" -eq 2 ]
	check r1 '.parsed == "docs/r1.parsed"'
	check r2 '.parsed == "docs/r2.parsed"'
	check r3 '.parsed == "docs/r3.parsed" and (has("parse_error") | not) and (has("parse_detail") | not)'
	cmp "$RUN/docs/r2.parsed" "$BATS_TEST_TMPDIR/body"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/in"
	: >"$PARSE_COUNT"
	parse_run
	assert_success
	[ ! -s "$PARSE_COUNT" ]
	parse_run --reparse
	assert_success
	[ "$(wc -l <"$PARSE_COUNT")" -eq 3 ]
}

@test "parse: done records (results.ndjson) are parsed by a new parser, and keep their fate" {
	conf "parse: {command: [$P/parsers/fail]}"
	echo body >"$BATS_TEST_TMPDIR/body"
	fetched d1 "$BATS_TEST_TMPDIR/body" '"class":"ok","reason":"http_200","fate":"done"' >"$BATS_TEST_TMPDIR/in"
	parse_run
	assert_success
	check d1 '.fate == "done" and .parse_error == "failed"'
}

@test "parse: parsers run at most the endpoint's concurrency at once" {
	conf "parse: {command: [$P/parsers/slow], timeout: 100s, concurrency: 2}"
	for i in 1 2 3 4 5; do fetched "c$i" "$P/nih-good.json"; done >"$BATS_TEST_TMPDIR/in"
	timeout 30 rfp-parse --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" \
	    <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" &
	local pid=$!
	POLL_STEP=0.01 poll 5 lines_at_least 2 "$PARSE_PIDS" || :
	sleep 0.05
	# Two are running now, and two only, until their time is up.
	[ "$(wc -l <"$PARSE_PIDS")" -eq 2 ]
	wait "$pid"
	[ "$(wc -l <"$PARSE_PIDS")" -eq 5 ]
	[ "$(jq -s '[.[] | select(.parse_error == "timeout")] | length' "$BATS_TEST_TMPDIR/out")" -eq 5 ]
}

@test "parse: two rfp-parse over one run directory and one record both parse it whole" {
	local slow=$BATS_TEST_TMPDIR/slow p1 i
	printf '%s\n' '#!/bin/sh' ': >>"$0.started"' \
	    'for i in 1 2 3 4 5 6 7 8 9 10; do echo "line $i"; sleep 0.05; done' >"$slow"
	chmod +x "$slow"
	conf "parse: {command: [$slow], timeout: 1000s}"
	fetched a "$P/nih-good.json" >"$BATS_TEST_TMPDIR/in"
	timeout 30 rfp-parse --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" \
	    <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out1" &
	p1=$!
	POLL_STEP=0.01 poll 5 test -e "$slow.started" || :
	sleep 0.1
	parse_run
	assert_success
	wait "$p1"
	check a '.parsed == "docs/a.parsed" and .parsed_bytes == 71'
	output=$(cat "$BATS_TEST_TMPDIR/out1")
	check a '.parsed == "docs/a.parsed" and .parsed_bytes == 71'
	[ "$(jq -r .parsed_sha256 <<<"$output")" = "$(sha256sum <"$RUN/docs/a.parsed" | cut -c1-64)" ]
	[ -z "$(ls -A "$RUN/docs/.parse")" ]
}

@test "parse: SIGTERM stops rfp-parse's parsers, drops their records as rfp-fetch its in flight, and reads to EOF; SIGHUP ends it" {
	conf "parse: {command: [$P/parsers/slow], timeout: 10000s}"
	fetched t1 "$P/nih-good.json" >"$BATS_TEST_TMPDIR/in"
	fetched t2 "$P/nih-good.json" >>"$BATS_TEST_TMPDIR/in"
	printf '{"id":"t3","status":404,"error":null}\n' >>"$BATS_TEST_TMPDIR/in"
	local pid i sig rc
	for sig in TERM HUP; do
		rm -f "$PARSE_PIDS"
		rfp-parse -j 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" \
		    <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" \
		    2>"$BATS_TEST_TMPDIR/err" &
		pid=$!
		POLL_STEP=0.01 poll 5 test -s "$PARSE_PIDS"
		kill -"$sig" "$pid"
		if [ "$sig" = TERM ]; then
			timeout 10 tail --pid="$pid" -f /dev/null
			rc=0
			wait "$pid" || rc=$?
			[ "$rc" -eq 0 ]
			# The record not to be parsed passes; the two are left.
			[ "$(jq -r .id "$BATS_TEST_TMPDIR/out")" = t3 ]
			[ "$(cat "$BATS_TEST_TMPDIR/err")" = "rfp-parse: stopped by signal 15 with 2 records unparsed" ]
			[ -z "$(ls -A "$RUN/docs/.parse")" ]
		else
			# Not "run wait": under load, bats' run reported 255 once
			# for a process that the shell had seen end by SIGHUP.
			timeout 10 tail --pid="$pid" -f /dev/null
			rc=0
			wait "$pid" || rc=$?
			[ "$rc" -eq 129 ]
		fi
		gone "$(cat "$PARSE_PIDS")"
	done
}

@test "parse: --list prints each configured parser; a parser not found is a configuration error, exit 2" {
	conf 'parse: {command: [jq, -e, .]}
endpoints:
  nsf: {parse: {command: [pdftotext, "-", "-"], concurrency: 3}}
  grants: {parse: null}'
	run -0 --separate-stderr rfp-parse --config "$BATS_TEST_TMPDIR/c.yaml" --list
	[ "${#lines[@]}" -eq 2 ]
	jq -se '.[0] == {"endpoint":"nsf","command":["pdftotext","-","-"],"timeout":30.0,"concurrency":3,"output_max":16777216}' <<<"$output"
	jq -se '.[1].endpoint == null and .[1].command == ["jq","-e","."]' <<<"$output"
	conf 'endpoints: {nsf: {parse: {command: [no-such-parser-here]}}}'
	run -2 --separate-stderr rfp-parse --config "$BATS_TEST_TMPDIR/c.yaml" --list
	[ "$stderr" = "rfp-parse: $BATS_TEST_TMPDIR/c.yaml: parse command \"no-such-parser-here\" for nsf: not found" ]
	run -0 --separate-stderr rfp-parse --list
	[ -z "$output" ]
}

@test "parse: usage: no --run-dir; a failed write to stdout of a parsed record" {
	# --help, a bad option and -j 0: options.bats, as for every stage.
	run -2 --separate-stderr rfp-parse </dev/null
	[ "${stderr_lines[0]}" = 'rfp-parse: option --run-dir: needed to find the bodies' ]
	conf "parse: {command: [$P/parsers/ok]}"
	echo body >"$BATS_TEST_TMPDIR/body"
	fetched w1 "$BATS_TEST_TMPDIR/body" >"$BATS_TEST_TMPDIR/in"
	run -1 sh -c 'rfp-parse --run-dir "$1" --config "$2" <"$3" >/dev/full' sh \
	    "$RUN" "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/in"
}

@test "rfpipe: parses NSF PDFs and NIH JSON; a refused body is dead parse_failed, counted in the summary" {
	command -v pdftotext >/dev/null || skip "pdftotext (poppler-utils) is not installed"
	mock_start "$P/portal.yaml"
	{
		for i in 1 2 3 4 5 6 7 8; do
			printf '{"id":"nsf-%d","url":"%s/nsf/award-%d.pdf","endpoint":"nsf"}\n' "$i" "$MOCK_URL" "$i"
		done
		printf '{"id":"nsf-bad","url":"%s/nsf/bad.pdf","endpoint":"nsf"}\n' "$MOCK_URL"
		printf '{"id":"nih-1","url":"%s/nih/proj-1","endpoint":"nih"}\n' "$MOCK_URL"
		printf '{"id":"nih-short","url":"%s/nih/short-1","endpoint":"nih"}\n' "$MOCK_URL"
	} >"$BATS_TEST_TMPDIR/m"
	conf 'endpoints:
  nsf:
    parse: {command: [pdftotext, -layout, "-", "-"], timeout: 1000s}
  nih:
    parse: {command: [jq, -e, .project_end_date], timeout: 1000s}'
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" --progress none \
	    --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" --seed 1 "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *$'\n    parse_failed        2\n'* ]]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 9 ]
	jq -se 'all(.[]; .parsed == "docs/\(.id).parsed" and .fate == "done")' "$RUN/results.ndjson"
	jq -se 'any(.[]; .attempt == 2)' "$RUN/results.ndjson"
	grep -q 'NSF Award 2026-0042' "$RUN/docs/nsf-8.parsed"
	jq -se 'map({(.id): .dead_reason}) | add == {"nsf-bad":"parse_failed","nih-short":"parse_failed"}' "$RUN/dead.ndjson"
	jq -se 'map(select(.id == "nih-short"))[0].dead_detail == "exit 1"' "$RUN/dead.ndjson"
	jq -e '.run.dead_by_reason.parse_failed == 2 and .totals.dead_by_reason.parse_failed == 2 and .reconciled == true' "$RUN/summary.json"
}

@test "rfpipe: a parser's exit 75 is retried through the loop, fetched and parsed again" {
	mock_start "$P/portal.yaml"
	printf '{"id":"t1","url":"%s/doc/t1","endpoint":"doc"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	conf "parse: {command: [$P/parsers/once-later]}"
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" --seed 1 "$BATS_TEST_TMPDIR/m"
	jq -se 'length == 1 and .[0].attempt == 2 and .[0].parsed == "docs/t1.parsed" and (.[0] | has("parse_error") | not)' "$RUN/results.ndjson"
	[ "$(requests_for /doc/t1)" -eq 2 ]
	[ ! -s "$RUN/dead.ndjson" ]
}

@test "rfpipe: a retry's next attempt carries nothing of the last one's parse" {
	mock_start "$P/portal.yaml"
	printf '{"id":"g1","url":"%s/gone/g1","endpoint":"doc"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	conf "parse: {command: [$P/parsers/later]}"
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" --seed 1 "$BATS_TEST_TMPDIR/m"
	jq -se 'length == 1 and .[0].attempt == 2 and .[0].status == 404 and .[0].dead_reason == "permanent" and
	    ([.[0] | has("parse_error", "parse_detail", "parsed")] | any | not)' "$RUN/dead.ndjson"
}

@test "rfpipe: a parser exiting 75 every time is dead exhausted after max_attempts" {
	mock_start "$P/portal.yaml"
	printf '{"id":"t2","url":"%s/doc/t2","endpoint":"doc"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	conf "max_attempts: 3
parse: {command: [$P/parsers/later]}"
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" --seed 1 "$BATS_TEST_TMPDIR/m"
	jq -se '.[0].dead_reason == "exhausted" and .[0].reason == "parse_tempfail" and .[0].attempt == 3' "$RUN/dead.ndjson"
	[ "$(requests_for /doc/t2)" -eq 3 ]
}

@test "rfpipe: without a parse: in the configuration, rfp-parse is not in the pipeline" {
	mock_start "$P/portal.yaml"
	printf '{"id":"n1","url":"%s/doc/n1","endpoint":"doc"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	# An rfp-parse that is asked what the configuration holds, and fails
	# when it is run as a stage: it must not be.
	mkdir "$BATS_TEST_TMPDIR/bin"
	printf '#!/bin/sh\ncase "$*" in *--list*) exec %s "$@" ;; esac\nexit 1\n' \
	    "$(command -v rfp-parse)" >"$BATS_TEST_TMPDIR/bin/rfp-parse"
	chmod 755 "$BATS_TEST_TMPDIR/bin/rfp-parse"
	conf 'max_attempts: 3'
	PATH=$BATS_TEST_TMPDIR/bin:$PATH run -0 timeout 60 "$ROOT/pipeline.sh" -q \
	    --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	jq -se 'length == 1 and (.[0] | has("parsed") | not)' "$RUN/results.ndjson"
}

@test "rfpipe: a parse command that is not found stops the run with 2 before anything is sent" {
	mock_start "$P/portal.yaml"
	printf '{"id":"n1","url":"%s/doc/n1","endpoint":"doc"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	conf 'parse: {command: [no-such-parser-here]}'
	run -2 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *'parse command "no-such-parser-here" for every endpoint: not found'* ]]
	[ "$(requests_for /doc/n1)" -eq 0 ]
}

@test "demo: its portal and configuration read the NSF award PDFs, and the one that is none is dead parse_failed" {
	command -v pdftotext >/dev/null || skip "pdftotext (poppler-utils) is not installed"
	mock_start "$ROOT/examples/demo/portal.yaml"
	local i
	for i in 40 41 42 43 44; do
		printf '{"id":"NSF-%03d","url":"%s/nsf/award/%d.pdf","endpoint":"nsf","expect":{"magic":"%%PDF-","min_bytes":1000}}\n' "$i" "$MOCK_URL" "$i"
	done >"$BATS_TEST_TMPDIR/m"
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" \
	    --config "$ROOT/examples/demo/rfpipe.yaml" --seed 1 "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s 'map(select(.parsed)) | length' "$RUN/results.ndjson")" -eq 4 ]
	grep -q 'Award Number: 2026-0042' "$RUN/docs/NSF-040.parsed"
	jq -se 'length == 1 and .[0].id == "NSF-042" and .[0].dead_reason == "parse_failed" and (.[0].dead_detail | startswith("Syntax Error"))' "$RUN/dead.ndjson"
}

@test "parse: a parser inherits no descriptor but its standard three" {
	printf '#!/bin/sh\nls /proc/self/fd\n' >"$BATS_TEST_TMPDIR/fds"
	chmod +x "$BATS_TEST_TMPDIR/fds"
	conf "parse: {command: [$BATS_TEST_TMPDIR/fds]}"
	printf 'x\n' >"$BATS_TEST_TMPDIR/body"
	fetched fd-1 "$BATS_TEST_TMPDIR/body" >"$BATS_TEST_TMPDIR/in"
	# Left open, without close-on-exec, by whoever started rfp-parse.
	exec 7<"$BATS_TEST_TMPDIR/body"
	parse_run
	exec 7<&-
	assert_success
	# ls itself opens one to read the directory: 3.
	[ "$(sort -n "$RUN/docs/fd-1.parsed" | tr '\n' ' ')" = "0 1 2 3 " ]
}

@test "parse: records that come after a stop are dropped or passed as well, and rfp-parse ends at EOF" {
	conf "parse: {command: [$P/parsers/slow], timeout: 10000s}"
	local pid rc=0
	mkfifo "$BATS_TEST_TMPDIR/feed"
	rfp-parse -j 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" \
	    <"$BATS_TEST_TMPDIR/feed" >"$BATS_TEST_TMPDIR/out" \
	    2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	exec 4>"$BATS_TEST_TMPDIR/feed"
	{ fetched t1 "$P/nih-good.json"; fetched t2 "$P/nih-good.json"; } >&4
	POLL_STEP=0.01 poll 5 test -s "$PARSE_PIDS" || :
	kill -TERM "$pid"
	sleep 0.2
	{
		fetched t3 "$P/nih-good.json"
		printf '{"id":"t4","status":404,"error":null}\n'
		fetched t5 "$P/nih-good.json"
	} >&4
	exec 4>&-
	timeout 10 tail --pid="$pid" -f /dev/null
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
	[ "$(jq -r .id "$BATS_TEST_TMPDIR/out")" = t4 ]
	[ "$(cat "$BATS_TEST_TMPDIR/err")" = "rfp-parse: stopped by signal 15 with 4 records unparsed" ]
	gone "$(cat "$PARSE_PIDS")"
}

# stop_parsing SIG WHO: rfpipe on a parser that never ends, in its own
# process group, given SIG (to its PID or its group) once a parser runs.
stop_parsing() {
	local sig=$1 who=$2 pid i
	mock_start "$P/portal.yaml"
	for i in 1 2 3 4; do
		printf '{"id":"s%d","url":"%s/pdf/s%d","endpoint":"nsf"}\n' "$i" "$MOCK_URL" "$i"
	done >"$BATS_TEST_TMPDIR/m"
	conf "parse: {command: [$P/parsers/slow], timeout: 86400s}"
	setsid env --default-signal=INT,TERM "$ROOT/pipeline.sh" --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" --seed 1 "$BATS_TEST_TMPDIR/m" \
	    >/dev/null 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	POLL_STEP=0.01 poll 10 test -s "$PARSE_PIDS" || :
	sleep 0.2
	if [ "$who" = group ]; then kill -"$sig" -- -"$pid"; else kill -"$sig" "$pid"; fi
	# A parser runs for 864 s: only a stop ends this in time.
	if timeout 10 tail --pid="$pid" -f /dev/null; then
		status=0
		wait "$pid" || status=$?
	else
		kill -KILL -- -"$pid"
		wait "$pid"
		status=124
	fi
	stderr=$(cat "$BATS_TEST_TMPDIR/err")
	while read -r i; do gone "$i"; done <"$PARSE_PIDS"
	[[ $stderr == *"rfpipe: interrupted by SIG$sig; resume with: "* ]]
	[[ $stderr != *RECONCILIATION* ]]
	[[ $stderr != *MISMATCH* ]]
	jq -e '.interrupted == true and .reconciled == true' "$RUN/summary.json"
	# Nothing unparsed is filed as done; the rest waits for the resume.
	[ ! -e "$RUN/results.ndjson" ] || [ "$(jq -s '[.[] | select(has("parsed") | not)] | length' "$RUN/results.ndjson")" -eq 0 ]
	[ ! -s "$RUN/dead.ndjson" ]
}

@test "rfpipe: SIGTERM to its PID while a parser runs stops the run at once, the parser ended, exit 143" {
	stop_parsing TERM pid
	[ "$status" -eq 143 ]
}

@test "rfpipe: SIGINT to its process group while a parser runs stops the run at once, exit 130" {
	stop_parsing INT group
	[ "$status" -eq 130 ]
}

@test "parse: a part file left by a parse killed mid-way is swept by the next run" {
	conf "parse: {command: [cat]}"
	printf 'x\n' >"$BATS_TEST_TMPDIR/body"
	fetched sw-1 "$BATS_TEST_TMPDIR/body" >"$BATS_TEST_TMPDIR/in"
	mkdir -p "$RUN/docs/.parse"
	# A pid that is gone, and one that is alive (this shell's).
	: >"$RUN/docs/.parse/old.parsed.999999999"
	: >"$RUN/docs/.parse/live.parsed.$$"
	parse_run
	assert_success
	[ ! -e "$RUN/docs/.parse/old.parsed.999999999" ]
	[ -e "$RUN/docs/.parse/live.parsed.$$" ]
	check sw-1 '.parsed == "docs/sw-1.parsed"'
	[ -z "$(ls -A "$RUN/docs/.parse" | grep -v "^live.parsed.$$\$")" ]
}

@test "parse: its start-up sweep leaves docs/.part, rfp-fetch's bodies in flight, alone whatever their names" {
	conf "parse: {command: [cat]}"
	: >"$BATS_TEST_TMPDIR/in"
	mkdir -p "$RUN/docs/.part"
	# Names a parse of a gone pid would have had: a body in flight of an
	# id from before ids were kept from them, or anything else there.
	echo "in flight" >"$RUN/docs/.part/s.parsed.999999999"
	echo "in flight" >"$RUN/docs/.part/doc-1"
	parse_run
	assert_success
	[ "$(cat "$RUN/docs/.part/s.parsed.999999999")" = "in flight" ]
	[ "$(cat "$RUN/docs/.part/doc-1")" = "in flight" ]
}
