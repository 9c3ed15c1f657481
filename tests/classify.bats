#!/usr/bin/env bats
# rfp-classify: the classification table, Retry-After, pass-through, bad lines.

load test_helper

F=$FIX/classify

# classify_json JSON...: run rfp-classify on the given lines.
classify_json() {
	printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/in.ndjson"
	run --separate-stderr rfp-classify <"$BATS_TEST_TMPDIR/in.ndjson"
}

@test "classify: 429 500 502 503 504 are transient with reason http_N" {
	local s
	for s in 429 500 502 503 504; do
		classify_json "{\"id\":\"d$s\",\"status\":$s,\"error\":null}"
		assert_success
		check "d$s" ".class == \"transient\" and .reason == \"http_$s\""
	done
}

@test "classify: 503 is transient with reason http_503" {
	classify_json '{"id":"a","status":503}'
	assert_success
	check a '.class == "transient" and .reason == "http_503"'
	[ "$stderr" = "" ]
}

@test "classify: 400 401 403 404 422 are permanent with reason http_N" {
	local s
	for s in 400 401 403 404 422; do
		classify_json "{\"id\":\"d$s\",\"status\":$s,\"error\":null}"
		assert_success
		check "d$s" ".class == \"permanent\" and .reason == \"http_$s\""
	done
}

@test "classify: a 2xx rfp-parse marked is classified by its parse_error (#23)" {
	classify_json '{"id":"f","status":200,"check":null,"parse_error":"failed","parse_detail":"bad"}' \
	    '{"id":"s","status":200,"parse_error":"signal"}' \
	    '{"id":"l","status":200,"parse_error":"too_large"}' \
	    '{"id":"t","status":200,"parse_error":"tempfail"}' \
	    '{"id":"o","status":200,"parse_error":"timeout"}' \
	    '{"id":"e","status":200,"parse_error":"tempfail","x":"\u00e9"}' \
	    '{"id":"n","status":503,"parse_error":"failed"}' \
	    '{"id":"k","status":200,"parsed":"docs/k.parsed"}'
	assert_success
	check f '.class == "permanent" and .reason == "parse_failed" and .parse_detail == "bad"'
	check s '.class == "permanent" and .reason == "parse_signal"'
	check l '.class == "permanent" and .reason == "parse_too_large"'
	check t '.class == "transient" and .reason == "parse_tempfail"'
	check o '.class == "transient" and .reason == "parse_timeout"'
	check e '.class == "transient" and .reason == "parse_tempfail"'
	check n '.class == "transient" and .reason == "http_503"'
	check k '.class == "ok" and .reason == "http_200"'
}

@test "classify: 418 is permanent with reason unknown_http_418" {
	classify_json '{"id":"a","status":418}'
	assert_success
	check a '.class == "permanent" and .reason == "unknown_http_418"'
}

@test "classify: 302 405 501 and other unlisted statuses are permanent unknown_http_N" {
	local s
	for s in 302 304 405 409 501 505 520 100; do
		classify_json "{\"id\":\"d$s\",\"status\":$s}"
		assert_success
		check "d$s" ".class == \"permanent\" and .reason == \"unknown_http_$s\""
	done
}

@test "classify: errors timeout, connect, reset, dns and tls_handshake are transient with the error as reason" {
	local e
	for e in timeout connect reset dns tls_handshake; do
		classify_json "{\"id\":\"$e\",\"status\":null,\"error\":\"$e\"}"
		assert_success
		check "$e" ".class == \"transient\" and .reason == \"$e\""
	done
}

@test "classify: errors tls, too_large and protocol are permanent with the error as reason" {
	local e
	for e in tls too_large protocol; do
		classify_json "{\"id\":\"$e\",\"status\":null,\"error\":\"$e\"}"
		assert_success
		check "$e" ".class == \"permanent\" and .reason == \"$e\""
	done
}

@test "classify: an unknown error is permanent" {
	classify_json '{"id":"a","status":null,"error":"martian"}'
	check a '.class == "permanent" and .reason == "martian"'
}

@test "classify: 200 with no failed check is ok with reason http_200" {
	classify_json '{"id":"a","status":200,"check":null}' '{"id":"b","status":204}'
	assert_success
	check a '.class == "ok" and .reason == "http_200"'
	check b '.class == "ok" and .reason == "http_204"'
}

@test "classify: 2xx with a failed check is permanent invalid_body" {
	classify_json '{"id":"a","status":200,"check":"magic: body does not start with \"%PDF-\""}'
	assert_success
	check a '.class == "permanent" and .reason == "invalid_body"'
}

@test "classify: no status and no error is permanent no_outcome" {
	classify_json '{"id":"a"}' '{"id":"b","status":null,"error":null}'
	assert_success
	check a '.class == "permanent" and .reason == "no_outcome"'
	check b '.class == "permanent" and .reason == "no_outcome"'
}

@test "classify: a status that is not an integer is dead bad_input naming the field, never classified" {
	classify_json '{"id":"a","status":"503"}'
	assert_success
	check a '.fate == "dead" and .dead_reason == "bad_input" and .class == null and .dead_detail == "field \"status\": expected an integer or null"'
}

@test "classify: Retry-After delta-seconds becomes retry_after_s" {
	run --separate-stderr rfp-classify <"$F/retry-after.ndjson"
	assert_success
	check delta '.retry_after_s == 120'
	[ "$stderr" = "" ]
}

@test "classify: Retry-After as IMF-fixdate is taken relative to the record's date" {
	run --separate-stderr rfp-classify <"$F/retry-after.ndjson"
	check imf '.retry_after_s == 10'
}

@test "classify: Retry-After as an RFC 850 date is taken relative to the record's date" {
	run --separate-stderr rfp-classify <"$F/retry-after.ndjson"
	check rfc850 '.retry_after_s == 60'
}

@test "classify: Retry-After as an asctime date is taken relative to the record's date" {
	run --separate-stderr rfp-classify <"$F/retry-after.ndjson"
	check asctime '.retry_after_s == 120'
}

@test "classify: without a date header Retry-After is relative to response_at" {
	run --separate-stderr rfp-classify <"$F/retry-after.ndjson"
	check response_at '.retry_after_s == 5'
}

@test "classify: a Retry-After date in the past is clamped to 0 with a warning" {
	classify_json '{"id":"a","status":429,"retry_after":"Sun, 06 Nov 1994 08:49:27 GMT","date":"Sun, 06 Nov 1994 08:49:37 GMT"}'
	assert_success
	check a '.retry_after_s == 0 and .class == "transient"'
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = 'rfp-classify: line 1: warning: "a": Retry-After "Sun, 06 Nov 1994 08:49:27 GMT" is in the past, clamped to 0' ]
}

@test "classify: a Retry-After over a day is clamped to 86400 with a warning" {
	classify_json '{"id":"x","status":200}' '{"id":"a","status":503,"retry_after":"100000"}'
	assert_success
	check a '.retry_after_s == 86400'
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "${stderr_lines[0]}" == 'rfp-classify: line 2: warning: "a": Retry-After "100000" is over a day, clamped to 86400 s' ]]
}

@test "classify: Retry-After soon is a warning bad Retry-After and retry_after_s null" {
	classify_json '{"id":"a","status":503,"retry_after":"soon"}'
	assert_success
	check a 'has("retry_after_s") and .retry_after_s == null and .class == "transient"'
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = 'rfp-classify: line 1: warning: "a": bad Retry-After "soon", using backoff' ]
}

@test "classify: a Retry-After date with no date and no response_at is not trusted" {
	classify_json '{"id":"a","status":503,"retry_after":"Sun, 06 Nov 1994 08:49:47 GMT"}'
	assert_success
	check a '.retry_after_s == null'
	[[ "$stderr" == *'bad Retry-After'* ]]
}

@test "classify: no Retry-After header adds no retry_after_s" {
	classify_json '{"id":"a","status":503}'
	check a 'has("retry_after_s") | not'
}

@test "classify: records with a fate pass through untouched" {
	run --separate-stderr rfp-classify <"$F/fated.ndjson"
	assert_success
	[ "$stderr" = "" ]
	[ "${#lines[@]}" -eq 3 ]
	diff <(jq -S -c . "$F/fated.ndjson") <(jq -S -c . <<<"$output")
}

@test "classify: unknown fields pass through exactly" {
	run --separate-stderr rfp-classify <"$F/passthrough.ndjson"
	assert_success
	check NIH-R01-001 '.class == "transient" and .reason == "http_503"'
	diff <(jq -S . "$F/passthrough.ndjson") \
	    <(jq -S 'del(.class, .reason)' <<<"$output")
}

@test "classify: each bad line is one stderr line and one dead bad_input record with its line number" {
	run --separate-stderr rfp-classify <"$F/bad-lines.ndjson"
	assert_success
	[ "${#lines[@]}" -eq 7 ]
	check good-1 '.class == "ok"'
	check good-2 '.class == "transient"'
	check good-3 '.class == "transient" and .reason == "reset"'
	for n in 2 3 4 6; do
		check_line "$n" '.fate == "dead" and .dead_reason == "bad_input" and .stage == "rfp-classify"'
	done
	[ "$(jq -s '[.[] | select(.dead_reason == "bad_input")] | length' <<<"$output")" -eq 4 ]
	[ "${#stderr_lines[@]}" -eq 4 ]
	[[ "${stderr_lines[0]}" == 'rfp-classify: line 2: malformed JSON'* ]]
	[[ "${stderr_lines[1]}" == 'rfp-classify: line 3: record is not a JSON object' ]]
	[[ "${stderr_lines[2]}" == 'rfp-classify: line 4: '* ]]
	[[ "${stderr_lines[3]}" == 'rfp-classify: line 6: '* ]]
}

@test "classify: a line over 1 MiB and 64 KiB is dead bad_input and the batch goes on" {
	local in=$BATS_TEST_TMPDIR/in.ndjson
	echo '{"id":"before","status":200}' >"$in"
	huge_record '"id":"huge",' >>"$in"
	echo '{"id":"after","status":404}' >>"$in"
	run --separate-stderr rfp-classify <"$in"
	assert_success
	[ "${#lines[@]}" -eq 3 ]
	check before '.class == "ok"'
	check after '.class == "permanent" and .reason == "http_404"'
	check_line 2 '.dead_reason == "bad_input" and (.raw | length) <= 200'
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = 'rfp-classify: line 2: line longer than 1114112 bytes' ]
}

@test "classify: a record read from its text and its twin read by jansson get the same records and warnings" {
	# A twin with an escaped key ("\u0070ad" is "pad") is outside the
	# fast scan's subset, so it goes the jansson way.
	local in=$F/twins.ndjson twin=$BATS_TEST_TMPDIR/twins.ndjson
	sed -E 's/^\{ *\}$/{"\\u0070ad":0}/; t; s/^\{/{"\\u0070ad":0,/' \
	    "$in" >"$twin"
	run --separate-stderr rfp-classify <"$in"
	assert_success
	local fast=$output fast_err=$stderr
	[ "${#lines[@]}" -eq "$(wc -l <"$in")" ]
	run --separate-stderr rfp-classify <"$twin"
	assert_success
	[ "$stderr" = "$fast_err" ]
	[ -n "$stderr" ]
	diff <(jq -cS . <<<"$fast") <(jq -cS 'del(.pad)' <<<"$output")
	# Read from the text, what it does not set is left byte for byte (jansson
	# would write 1795990507.0000019), and keeps the fields' order.
	output=$fast
	check ok '.class == "ok"'
	check again '.class == "transient" and .retry_after_s == 2 and .retry_after_clamped'
	[[ "${fast%%$'\n'*}" == *'"response_at":1795990507.000002,'* ]]
	diff <(jq -c 'keys_unsorted' <<<"$fast") \
	    <(jq -c 'del(.pad) | keys_unsorted' <<<"$output")
}

@test "classify: each record is out before the stage waits for the next line" {
	# Output is gathered into batches; one that waited for more input
	# would stall the retry loop.  The input stays open throughout.
	local in=$BATS_TEST_TMPDIR/in out=$BATS_TEST_TMPDIR/out i
	mkfifo "$in"
	rfp-classify <"$in" >"$out" 3>&- &
	local pid=$!
	exec 4>"$in"
	echo '{"id":"a","status":200}' >&4
	echo '{"id":"b","status":503,"escaped\u0041":1}' >&4
	POLL_STEP=0.01 poll 5 lines_at_least 2 "$out" || :
	kill -0 "$pid"
	[ "$(wc -l <"$out")" -eq 2 ]
	exec 4>&-
	wait "$pid"
	output=$(cat "$out")
	check a '.class == "ok"'
	check b '.class == "transient"'
}

@test "classify: a record larger than a pipe's atomic write goes out whole and in order" {
	local pad
	pad=$(head -c 20000 /dev/zero | tr '\0' 'x')
	classify_json '{"id":"a","status":200}' \
	    "{\"id\":\"big\",\"status\":503,\"pad\":\"$pad\"}" \
	    "{\"id\":\"big-fated\",\"fate\":\"dead\",\"pad\":\"$pad\"}" \
	    '{"id":"c","status":404}'
	assert_success
	[ "${#lines[@]}" -eq 4 ]
	[ "$(jq -r .id <<<"$output" | paste -sd,)" = "a,big,big-fated,c" ]
	check big ".class == \"transient\" and (.pad | length) == 20000"
	check big-fated "(has(\"class\") | not) and (.pad | length) == 20000"
	check c '.class == "permanent"'
}

@test "classify: a portal's Retry-After quoted in a warning reaches the terminal without its control bytes" {
	classify_json '{"id":"a","status":503,"retry_after":"\u001b]0;owned\u0007\u001b[2J"}'
	assert_success
	[[ "$stderr" != *$'\033'* && "$stderr" != *$'\a'* ]]
	[ "$stderr" = 'rfp-classify: line 1: warning: "a": bad Retry-After "?]0;owned??[2J", using backoff' ]
}

@test "classify: a record of exactly 1 MiB and 64 KiB ending in CR LF passes however the LF arrives" {
	# The reader gives up on a line past the cap before it sees the LF:
	# written late, the LF found the CR already over it.
	local head='{"id":"a","status":200,"x":"' cap=$((1024 * 1024 + 64 * 1024))
	{ printf '%s' "$head"; head -c $((cap - ${#head} - 2)) /dev/zero | tr '\0' x
	  printf '"}\r\n'; } >"$BATS_TEST_TMPDIR/out"
	[ "$(wc -c <"$BATS_TEST_TMPDIR/out")" -eq $((cap + 2)) ]
	# All but the LF, then the LF a moment later.
	run -0 --separate-stderr bash -c '{ head -c -1 "$1"; sleep 0.2; tail -c 1 "$1"; } |
	    timeout 20 rfp-classify' _ "$BATS_TEST_TMPDIR/out"
	[ -z "$stderr" ]
	[ "$(jq -r '.class + " " + .reason' <<<"$output")" = "ok http_200" ]
}

@test "classify: a long non-ASCII error is cut to a reason of whole characters, never null" {
	local e
	e=$(printf '\303\251%.0s' $(seq 40))
	run --separate-stderr rfp-classify <<<"{\"id\":\"a\",\"error\":\"$e\"}"
	assert_success
	jq -e '(.reason | type) == "string" and (.reason | length) == 31 and .class == "permanent"' <<<"$output"
	run --separate-stderr rfp-classify <<<"{\"id\":\"a\",\"status\":200,\"parse_error\":\"$e\"}"
	assert_success
	jq -e '(.reason | type) == "string" and (.reason | startswith("parse_"))' <<<"$output"
}

@test "classify: a field of the contract with the wrong JSON type is one line naming it, the record dead bad_input with its id, the batch going on" {
	classify_json '{"id":"a","status":"200"}' \
	    '{"id":"b","status":503,"retry_after":120}' \
	    '{"id":"c","status":409,"method":"POST","idempotent":"no"}' \
	    '{"id":"d","status":503,"response_at":"now","retry_after":"5"}' \
	    '{"id":"e","error":["timeout"]}' \
	    '{"id":"f","status":503}' \
	    '{"id":"g","fate":"dead","dead_reason":"permanent","status":"404"}'
	assert_success
	[ "${#stderr_lines[@]}" -eq 5 ]
	[ "${stderr_lines[0]}" = 'rfp-classify: line 1: field "status": expected an integer or null' ]
	[ "${stderr_lines[1]}" = 'rfp-classify: line 2: field "retry_after": expected a string' ]
	[ "${stderr_lines[2]}" = 'rfp-classify: line 3: field "idempotent": expected true or false' ]
	[ "${stderr_lines[3]}" = 'rfp-classify: line 4: field "response_at": expected a number' ]
	[ "${stderr_lines[4]}" = 'rfp-classify: line 5: field "error": expected a string or null' ]
	for id in a b c d e; do
		check "$id" '.fate == "dead" and .dead_reason == "bad_input" and .stage == "rfp-classify" and (.dead_detail | startswith("field \"")) and .class == null'
	done
	check a '.line == 1 and .status == "200"'
	check f '.class == "transient" and .reason == "http_503"'
	# A letter passes as it came: it is evidence, not a record to read.
	check g '.dead_reason == "permanent" and .status == "404" and .line == null'
}
