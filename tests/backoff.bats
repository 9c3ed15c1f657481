#!/usr/bin/env bats
# rfp-backoff: fates, attempts, the retry budget, jitter, Retry-After,
# the deadline, bad input, options and the config file.

load test_helper

F=$FIX/backoff

# count EXPR: how many output records satisfy jq EXPR.
count() {
	jq -s "[.[] | select($1)] | length" <<<"$output"
}

# backoff_json ARGS... -- JSON...: run rfp-backoff ARGS on the JSON lines.
backoff_json() {
	local args=()
	while [ "$1" != "--" ]; do
		args+=("$1")
		shift
	done
	shift
	printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/in.ndjson"
	run --separate-stderr rfp-backoff "${args[@]}" <"$BATS_TEST_TMPDIR/in.ndjson"
}

@test "backoff: class ok becomes fate done" {
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$F/mixed.ndjson"
	assert_success
	check ok-1 '.fate == "done" and (has("dead_reason") | not) and (has("not_before") | not)'
}

@test "backoff: class permanent becomes dead with dead_reason permanent" {
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$F/mixed.ndjson"
	assert_success
	check perm-1 '.fate == "dead" and .dead_reason == "permanent" and .dead_detail == "http_404"'
}

@test "backoff: a body the parser refused is dead parse_failed with the parser's words (#23)" {
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <<'EOF'
{"id":"p1","status":200,"class":"permanent","reason":"parse_failed","parse_error":"failed","parse_detail":"Syntax Error: no trailer"}
{"id":"p2","status":200,"class":"permanent","reason":"parse_signal","parse_error":"signal","parse_detail":"killed by SIGSEGV"}
{"id":"p3","status":200,"class":"transient","reason":"parse_tempfail","parse_error":"tempfail","attempt":1}
{"id":"p4","status":404,"class":"permanent","reason":"http_404"}
EOF
	assert_success
	check p1 '.fate == "dead" and .dead_reason == "parse_failed" and .dead_detail == "Syntax Error: no trailer"'
	check p2 '.fate == "dead" and .dead_reason == "parse_failed" and .dead_detail == "killed by SIGSEGV"'
	check p3 '.fate == "retry"'
	check p4 '.fate == "dead" and .dead_reason == "permanent"'
}

@test "backoff: an unrecognised class is dead permanent" {
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$F/mixed.ndjson"
	check weird-1 '.fate == "dead" and .dead_reason == "permanent"'
}

@test "backoff: class transient becomes retry with not_before and delay_s" {
	local t0
	t0=$(date +%s)
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$F/mixed.ndjson"
	assert_success
	check trans-1 ".fate == \"retry\" and (.delay_s | type) == \"number\" and .delay_s >= 0 and (.not_before | type) == \"number\" and .not_before >= $t0 - 1 and .not_before < $t0 + 3600"
	check trans-1 '(has("dead_reason") | not) and .attempt == 1'
}

@test "backoff: a record without class is dead bad_input with its line number" {
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$F/mixed.ndjson"
	assert_success
	check noclass-1 '.fate == "dead" and .dead_reason == "bad_input" and .line == 4'
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = 'rfp-backoff: line 4: missing field "class"' ]
}

@test "backoff: records with a fate pass through untouched" {
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$F/mixed.ndjson"
	diff <(jq -S -c 'select(.id == "fated-1")' "$F/mixed.ndjson") \
	    <(jq -S -c 'select(.id == "fated-1")' <<<"$output")
}

@test "backoff: unknown fields pass through exactly and one record comes out per line" {
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$F/mixed.ndjson"
	assert_success
	[ "${#lines[@]}" -eq 6 ]
	diff <(jq -S -c 'select(.id == "ok-1" or .id == "trans-1")' "$F/mixed.ndjson") \
	    <(jq -S -c 'select(.id == "ok-1" or .id == "trans-1") | del(.fate, .not_before, .delay_s)' <<<"$output")
}

@test "backoff: attempt at --max-attempts is dead exhausted" {
	backoff_json --seed 1 --budget 10 --max-attempts 3 -- \
	    '{"id":"a2","class":"transient","attempt":2}' \
	    '{"id":"a3","class":"transient","attempt":3}' \
	    '{"id":"a9","class":"transient","attempt":9}'
	assert_success
	check a2 '.fate == "retry"'
	check a3 '.fate == "dead" and .dead_reason == "exhausted"'
	check a9 '.fate == "dead" and .dead_reason == "exhausted"'
}

@test "backoff: the default is 5 attempts" {
	backoff_json --seed 1 --budget 10 -- \
	    '{"id":"a4","class":"transient","attempt":4}' \
	    '{"id":"a5","class":"transient","attempt":5}'
	check a4 '.fate == "retry"'
	check a5 '.fate == "dead" and .dead_reason == "exhausted"'
}

@test "backoff: --budget 3 with 10 transient records gives exactly 3 retry and 7 budget_spent" {
	run --separate-stderr rfp-backoff --seed 1 --budget 3 <"$F/transient10.ndjson"
	assert_success
	[ "${#lines[@]}" -eq 10 ]
	[ "$(count '.fate == "retry"')" -eq 3 ]
	[ "$(count '.fate == "dead" and .dead_reason == "budget_spent"')" -eq 7 ]
}

@test "backoff: --budget 2x --admitted 5 grants 10 retries" {
	cat "$F/transient10.ndjson" "$F/transient10.ndjson" |
	    jq -c '.id += "-b"' >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-backoff --seed 1 --budget 2x --admitted 5 <"$BATS_TEST_TMPDIR/in"
	assert_success
	[ "$(count '.fate == "retry"')" -eq 10 ]
	[ "$(count '.dead_reason == "budget_spent"')" -eq 10 ]
}

@test "backoff: --budget 0 dead-letters every transient record budget_spent" {
	run --separate-stderr rfp-backoff --seed 1 --budget 0 <"$F/transient10.ndjson"
	assert_success
	[ "$(count '.dead_reason == "budget_spent"')" -eq 10 ]
}

@test "backoff: with --run-dir the budget persists and a second run continues from what is left" {
	local rd=$BATS_TEST_TMPDIR/run
	head -n 4 "$F/transient10.ndjson" >"$BATS_TEST_TMPDIR/four"
	run --separate-stderr rfp-backoff --seed 1 --budget 6 --run-dir "$rd" <"$BATS_TEST_TMPDIR/four"
	assert_success
	[ "$(count '.fate == "retry"')" -eq 4 ]
	jq -e '.total == 6 and .left == 2' "$rd/state/budget.json"
	run --separate-stderr rfp-backoff --seed 1 --budget 6 --run-dir "$rd" <"$F/transient10.ndjson"
	assert_success
	[ "$(count '.fate == "retry"')" -eq 2 ]
	[ "$(count '.dead_reason == "budget_spent"')" -eq 8 ]
	jq -e '.total == 6 and .left == 0' "$rd/state/budget.json"
}

@test "backoff: a budget given to a later run does not refill the run directory's budget" {
	local rd=$BATS_TEST_TMPDIR/run
	run --separate-stderr rfp-backoff --seed 1 --budget 2 --run-dir "$rd" <"$F/transient10.ndjson"
	[ "$(count '.fate == "retry"')" -eq 2 ]
	run --separate-stderr rfp-backoff --seed 1 --budget 50 --run-dir "$rd" <"$F/transient10.ndjson"
	[ "$(count '.fate == "retry"')" -eq 0 ]
}

@test "backoff: run by hand on a retry record (no --admitted) it makes no budget of 0; the next rfpipe run on the directory retries" {
	local rd=$BATS_TEST_TMPDIR/run
	backoff_json --run-dir "$rd" -- '{"id":"x","class":"transient","status":503,"reason":"http_503","attempt":2}'
	assert_success
	[ "$(count '.fate == "retry"')" -eq 1 ]
	[[ $stderr == *"rfp-backoff: no retry budget: no document counted yet (a retry) and none kept in $rd; retry granted, nothing spent"* ]]
	[ ! -e "$rd/state/budget.json" ]
	# A budget that is there is spent from, and not grown from nothing.
	mkdir -p "$rd/state"
	echo '{"total":4,"left":2}' >"$rd/state/budget.json"
	backoff_json --run-dir "$rd" -- '{"id":"x","class":"transient","status":503,"reason":"http_503","attempt":2}'
	[ "$(count '.fate == "retry"')" -eq 1 ]
	[ -z "$stderr" ]
	jq -e '.total == 4 and .left == 1' "$rd/state/budget.json"
	rm "$rd/state/budget.json"
	backoff_json --run-dir "$rd" -- '{"id":"x","class":"transient","status":503,"reason":"http_503","attempt":2}'
	printf 'routes:\n  - {match: "/f/*", endpoint: f, script: [503, 200], retry_after: 0}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	for i in 1 2 3; do printf '{"id":"d%d","url":"%s/f/%d"}\n' "$i" "$MOCK_URL" "$i"; done >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$rd" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$rd/results.ndjson")" -eq 3 ]
	jq -e '.total == 9 and .left == 6' "$rd/state/budget.json"
}

@test "backoff: a corrupt state/budget.json exits 1 naming the file and is never reset" {
	local rd=$BATS_TEST_TMPDIR/run
	mkdir -p "$rd/state"
	echo 'this is not json {' >"$rd/state/budget.json"
	cp "$rd/state/budget.json" "$BATS_TEST_TMPDIR/before"
	run --separate-stderr rfp-backoff --seed 1 --budget 5 --run-dir "$rd" <"$F/transient10.ndjson"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"rfp-backoff: $rd/state/budget.json: corrupt state file"* ]]
	[ "$(count '.fate == "retry"')" -eq 0 ]
	cmp "$rd/state/budget.json" "$BATS_TEST_TMPDIR/before"
}

@test "backoff: a budget.json with left over total exits 1 and is never reset" {
	local rd=$BATS_TEST_TMPDIR/run
	mkdir -p "$rd/state"
	echo '{"total":3,"left":9}' >"$rd/state/budget.json"
	run --separate-stderr rfp-backoff --seed 1 --budget 5 --run-dir "$rd" <"$F/transient10.ndjson"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *'budget.json: corrupt state file'* ]]
	[ "$(cat "$rd/state/budget.json")" = '{"total":3,"left":9}' ]
}

@test "backoff: a budget.json total past 2^53 is corrupt, never renewed into an overflow" {
	local rd=$BATS_TEST_TMPDIR/run
	mkdir -p "$rd/state"
	echo '{"total":9223372036854775807,"left":0}' >"$rd/state/budget.json"
	run --separate-stderr rfp-backoff --run-dir "$rd" --budget 5 --renew-budget </dev/null
	[ "$status" -eq 1 ]
	[ "$stderr" = "rfp-backoff: $rd/state/budget.json: corrupt state file (needs integers 0 <= left <= total <= 2^53); move it aside to start afresh" ]
	[ "$(cat "$rd/state/budget.json")" = '{"total":9223372036854775807,"left":0}' ]
}

@test "backoff: an unusable --run-dir exits 1" {
	touch "$BATS_TEST_TMPDIR/file"
	run --separate-stderr rfp-backoff --seed 1 --run-dir "$BATS_TEST_TMPDIR/file/run" <"$F/transient10.ndjson"
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[[ "${stderr_lines[0]}" == "rfp-backoff: mkdir $BATS_TEST_TMPDIR/file/run: Not a directory" ]]
}

@test "backoff: the same --seed gives identical delay_s across two runs" {
	run --separate-stderr rfp-backoff --seed 42 --budget 100 <"$F/transient10.ndjson"
	local a
	a=$(jq -c -s 'map(.delay_s)' <<<"$output")
	run --separate-stderr rfp-backoff --seed 42 --budget 100 <"$F/transient10.ndjson"
	[ "$(jq -c -s 'map(.delay_s)' <<<"$output")" = "$a" ]
	jq -e 'all(type == "number")' <<<"$a"
}

@test "backoff: different seeds give different delay_s" {
	run --separate-stderr rfp-backoff --seed 1 --budget 100 <"$F/transient10.ndjson"
	local a
	a=$(jq -c -s 'map(.delay_s)' <<<"$output")
	run --separate-stderr rfp-backoff --seed 2 --budget 100 <"$F/transient10.ndjson"
	[ "$(jq -c -s 'map(.delay_s)' <<<"$output")" != "$a" ]
}

@test "backoff: delay_s varies between records of the same attempt (jitter)" {
	run --separate-stderr rfp-backoff --seed 7 --budget 100 <"$F/transient10.ndjson"
	[ "$(jq -s 'map(.delay_s) | unique | length' <<<"$output")" -ge 5 ]
}

@test "backoff: delay_s never exceeds --cap" {
	jq -c '.attempt = 4' "$F/transient10.ndjson" >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-backoff --seed 3 --budget 100 --base 10s --cap 1s <"$BATS_TEST_TMPDIR/in"
	assert_success
	[ "$(count '.fate == "retry" and .delay_s >= 0 and .delay_s <= 1')" -eq 10 ]
}

@test "backoff: not_before is now plus delay_s scaled by RFPIPE_TIME_SCALE" {
	local t0
	t0=$(date +%s)
	run --separate-stderr env RFPIPE_TIME_SCALE=0.001 rfp-backoff --seed 5 --budget 100 --base 1000s --cap 1000s <"$F/transient10.ndjson"
	assert_success
	# Each delay is up to 1000 logical s, at most 1 real s.
	[ "$(count ".not_before >= $t0 - 1 and .not_before <= $t0 + 5 and .delay_s <= 1000")" -eq 10 ]
	[ "$(count '.delay_s > 5')" -ge 1 ]
}

@test "backoff: Retry-After is a floor, retry_after_s 2 gives delay_s at least 2" {
	run --separate-stderr rfp-backoff --seed 11 --budget 100 <"$F/floor.ndjson"
	assert_success
	[ "$(count '.fate == "retry"')" -eq 6 ]
	[ "$(count '.retry_after_s != null and .delay_s >= .retry_after_s')" -eq 5 ]
}

@test "backoff: records told the same Retry-After do not return in lockstep" {
	jq -c '.retry_after_s = 2' "$F/transient10.ndjson" >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-backoff --seed 11 --budget 100 <"$BATS_TEST_TMPDIR/in"
	[ "$(count '.delay_s >= 2')" -eq 10 ]
	[ "$(jq -s 'map(.delay_s) | unique | length' <<<"$output")" -ge 5 ]
}

@test "backoff: a Retry-After is spread by no more than the backoff would wait" {
	# Attempt 1 backs off up to base (0.5 s): told 10 s, each waits 10 to
	# 10.5 s, not up to 20.
	jq -c '.retry_after_s = 10' "$F/transient10.ndjson" >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-backoff --seed 11 --budget 100 <"$BATS_TEST_TMPDIR/in"
	assert_success
	[ "$(count '.delay_s >= 10 and .delay_s <= 10.5')" -eq 10 ]
	[ "$(jq -s 'map(.delay_s) | unique | length' <<<"$output")" -ge 5 ]
}

@test "backoff: Retry-After 0 is still spread, by the backoff at that attempt" {
	# Attempt 5 backs off up to 8 s (0.5 x 2^4): told 0, not all at once.
	jq -c '.retry_after_s = 0 | .attempt = 5' "$F/transient10.ndjson" >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-backoff --seed 11 --budget 100 --max-attempts 10 <"$BATS_TEST_TMPDIR/in"
	assert_success
	[ "$(count '.delay_s >= 0 and .delay_s <= 8')" -eq 10 ]
	[ "$(jq -s 'map(.delay_s) | unique | length' <<<"$output")" -ge 5 ]
	[ "$(jq -s 'map(.delay_s) | max > 1' <<<"$output")" = true ]
}

@test "backoff: a Retry-After over --max-retry-after is dead quota at once without spending budget" {
	local rd=$BATS_TEST_TMPDIR/run
	backoff_json --seed 1 --budget 5 --run-dir "$rd" --max-retry-after 60 -- \
	    '{"id":"far","class":"transient","attempt":1,"retry_after_s":120}' \
	    '{"id":"near","class":"transient","attempt":1,"retry_after_s":60}'
	assert_success
	check far '.fate == "dead" and .dead_reason == "quota" and (has("not_before") | not)'
	check far '.dead_detail | test("come back in 120 s")'
	check near '.fate == "retry" and .delay_s >= 60'
	jq -e '.left == 4' "$rd/state/budget.json"
}

@test "backoff: the default max_retry_after is an hour" {
	backoff_json --seed 1 --budget 5 -- \
	    '{"id":"far","class":"transient","attempt":1,"retry_after_s":7200}'
	check far '.fate == "dead" and .dead_reason == "quota"'
}

@test "backoff: a deadline already past cuts transient records deadline_cut" {
	run --separate-stderr rfp-backoff --seed 1 --budget 100 --deadline +0s <"$F/mixed.ndjson"
	assert_success
	check trans-1 '.fate == "dead" and .dead_reason == "deadline_cut"'
	check ok-1 '.fate == "done"'
	check perm-1 '.dead_reason == "permanent"'
}

@test "backoff: a deadline given as a past epoch cuts every transient record" {
	run --separate-stderr rfp-backoff --seed 1 --budget 100 --deadline @1000000000 <"$F/transient10.ndjson"
	assert_success
	[ "$(count '.dead_reason == "deadline_cut"')" -eq 10 ]
}

@test "backoff: a retry whose not_before falls past the deadline is cut at once" {
	backoff_json --seed 1 --budget 100 --deadline +1h --max-retry-after 1000000 -- \
	    '{"id":"late","class":"transient","attempt":1,"retry_after_s":500000}' \
	    '{"id":"soon","class":"transient","attempt":1,"retry_after_s":1}'
	assert_success
	check late '.fate == "dead" and .dead_reason == "deadline_cut"'
	check soon '.fate == "retry"'
}

@test "backoff: a Retry-After over --max-retry-after is quota even past the deadline, as rfp-fetch files its endpoint's others; a shorter one past it is cut" {
	backoff_json --seed 1 --budget 100 --deadline +10s --max-retry-after 3600 -- \
	    '{"id":"day","class":"transient","attempt":1,"retry_after_s":86400}' \
	    '{"id":"hour","class":"transient","attempt":1,"retry_after_s":3599}'
	assert_success
	check day '.fate == "dead" and .dead_reason == "quota"'
	check hour '.fate == "dead" and .dead_reason == "deadline_cut"'
}

@test "backoff: each bad line is one stderr line and one dead bad_input record, and the batch goes on" {
	local in=$BATS_TEST_TMPDIR/in
	{
		echo '{"id":"g1","class":"ok"}'
		echo '{"id":'
		echo '[1,2,3]'
		huge_record '"id":"huge","class":"ok",'
		echo '{"id":"g2","class":"permanent","reason":"http_404"}'
	} >"$in"
	run --separate-stderr rfp-backoff --seed 1 --budget 1 <"$in"
	assert_success
	[ "${#lines[@]}" -eq 5 ]
	check g1 '.fate == "done"'
	check g2 '.fate == "dead" and .dead_reason == "permanent"'
	for n in 2 3 4; do
		check_line "$n" '.fate == "dead" and .dead_reason == "bad_input" and .stage == "rfp-backoff"'
	done
	[ "${#stderr_lines[@]}" -eq 3 ]
	[[ "${stderr_lines[0]}" == 'rfp-backoff: line 2: malformed JSON'* ]]
	[ "${stderr_lines[1]}" = 'rfp-backoff: line 3: record is not a JSON object' ]
	[ "${stderr_lines[2]}" = 'rfp-backoff: line 4: line longer than 1114112 bytes' ]
}

@test "backoff: --max-attempts x exits 2 with expected an integer" {
	run --separate-stderr -2 rfp-backoff --max-attempts x </dev/null
	[ "$output" = "" ]
	[ "${stderr_lines[0]}" = 'rfp-backoff: option --max-attempts: expected an integer from 1 to 1000, got "x"' ]
}

@test "backoff: --resolve-deadline prints the deadline as @epoch" {
	run --separate-stderr rfp-backoff --resolve-deadline 2026-11-30T06:00Z
	assert_success
	[ "$output" = "@1796018400.000" ]
	run --separate-stderr -2 rfp-backoff --resolve-deadline never
	[ "${stderr_lines[0]}" = 'rfp-backoff: option --resolve-deadline: cannot read "never" as a time' ]
}

@test "backoff: a misspelt config key exits 2 naming file:line" {
	cd "$BATS_TEST_TMPDIR"
	printf '# retries\nbase: 1s\nmax_atempts: 3\ncap: 10s\n' >rfpipe.yaml
	run --separate-stderr -2 rfp-backoff --config rfpipe.yaml <"$F/transient10.ndjson"
	[ "$output" = "" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = 'rfp-backoff: rfpipe.yaml:3: unknown key "max_atempts"' ]
}

@test "backoff: config values apply and flags win over them" {
	backoff_json --config "$F/config.yaml" -- '{"id":"a","class":"transient","attempt":2}'
	assert_success
	check a '.fate == "dead" and .dead_reason == "exhausted"'
	backoff_json --config "$F/config.yaml" --max-attempts 3 -- '{"id":"a","class":"transient","attempt":2}'
	check a '.fate == "retry" and .delay_s <= 1'
}

@test "backoff: a seed in the config file makes delays reproducible" {
	run --separate-stderr rfp-backoff --config "$F/config.yaml" <"$F/transient10.ndjson"
	local a
	a=$(jq -c -s 'map(.delay_s)' <<<"$output")
	run --separate-stderr rfp-backoff --config "$F/config.yaml" <"$F/transient10.ndjson"
	[ "$(jq -c -s 'map(.delay_s)' <<<"$output")" = "$a" ]
	[ "$(count '.fate == "retry"')" -eq 10 ]
}

@test "backoff: a record read from its text and its twin read by jansson get the same" {
	# A twin with an escaped key ("\u0070ad" is "pad") is outside the
	# fast scan's subset, so it goes the jansson way.
	local in=$F/twins.ndjson twin=$BATS_TEST_TMPDIR/twins.ndjson
	sed 's/^{/{"\\u0070ad":0,/' "$in" >"$twin"
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$in"
	assert_success
	local fast=$output fast_err=$stderr
	[ "${#lines[@]}" -eq "$(wc -l <"$in")" ]
	run --separate-stderr rfp-backoff --seed 1 --budget 10 <"$twin"
	assert_success
	[ "$stderr" = "$fast_err" ]
	diff <(jq -cS . <<<"$fast") <(jq -cS 'del(.pad)' <<<"$output")
	output=$fast
	check ok '.fate == "done"'
	check spaced '.fate == "done"'
	check perm '.fate == "dead" and .dead_reason == "permanent"'
	check no-class '.fate == "dead" and .dead_reason == "bad_input"'
	# What it does not set it leaves byte for byte, read from the text.
	[[ "${fast%%$'\n'*}" == '{"id":"ok","class":"ok","reason":"http_200","status":200,"response_at":1795990507.000002,"attempt":1,"fate":"done"}' ]]
	[[ "$fast" == *'{"id":"fated","fate":"dead","dead_reason":"bad_input","class":"ok"}'* ]]
}

@test "backoff: a retry and a dead letter keep every byte they do not set" {
	# jansson would write these reals back as 1795990507.0000019 and
	# 1.1000000000000001, and pad the spacing away.
	backoff_json --seed 1 --budget 10 -- \
	    '{"id":"r", "class":"transient","reason":"http_503","attempt":1,"response_at":1795990507.000002,"w":1.1}' \
	    '{"id":"d", "class":"permanent","reason":"http_404","attempt":1,"response_at":1795990507.000002,"w":1.1}'
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} == '{"id":"r", "class":"transient","reason":"http_503","attempt":1,"response_at":1795990507.000002,"w":1.1,"fate":"retry","not_before":'* ]]
	[ "${lines[1]}" = '{"id":"d", "class":"permanent","reason":"http_404","attempt":1,"response_at":1795990507.000002,"w":1.1,"fate":"dead","dead_reason":"permanent","dead_detail":"http_404"}' ]
}

@test "backoff: a dead_detail the cap cuts inside a UTF-8 character is cut before it, not null" {
	local r e
	r=$(printf 'r%.0s' $(seq 62))
	e=$(printf '\303\251%.0s' $(seq 50))
	backoff_json --seed 1 -- "{\"id\":\"a\",\"class\":\"transient\",\"reason\":\"$r\",\"method\":\"POST\",\"sent\":true,\"endpoint\":\"$e\"}"
	assert_success
	jq -e '.dead_reason == "ambiguous_submit" and (.dead_detail | type == "string" and endswith("\u00e9") and (utf8bytelength == 198))' <<<"$output"
}

@test "backoff: an attempt outside 1 to 1000000 is one line naming it, the record dead bad_input, never a delay worked out of it" {
	local a
	mkdir -p "$BATS_TEST_TMPDIR/rd"
	backoff_json --seed 1 --budget 10 --max-attempts 5 --run-dir "$BATS_TEST_TMPDIR/rd" -- \
	    '{"id":"a","class":"transient","reason":"http_503","attempt":-9223372036854775808}' \
	    '{"id":"b","class":"transient","reason":"http_503","attempt":-1}' \
	    '{"id":"c","class":"transient","reason":"http_503","attempt":0}' \
	    '{"id":"d","class":"transient","reason":"http_503","attempt":1000001}' \
	    '{"id":"e","class":"transient","reason":"http_503","attempt":9223372036854775807}' \
	    '{"id":"f","class":"transient","reason":"http_503","attempt":1000000}' \
	    '{"id":"g","class":"transient","reason":"http_503","attempt":1}'
	assert_success
	[ "${#stderr_lines[@]}" -eq 5 ]
	for a in 0 1 2 3 4; do
		[ "${stderr_lines[a]}" = "rfp-backoff: line $((a + 1)): field \"attempt\": expected an integer from 1 to 1000000" ]
	done
	for a in a b c d e; do
		check "$a" '.fate == "dead" and .dead_reason == "bad_input" and .stage == "rfp-backoff" and (has("delay_s") | not)'
	done
	check f '.fate == "dead" and .dead_reason == "exhausted"'
	check g '.fate == "retry"'
}

@test "backoff: a field of the contract with the wrong JSON type is one line naming it, the record dead bad_input with its id, no retry spent" {
	mkdir -p "$BATS_TEST_TMPDIR/rd"
	backoff_json --seed 1 --budget 10 --run-dir "$BATS_TEST_TMPDIR/rd" -- \
	    '{"id":"a","class":"transient","reason":"http_503","attempt":"3"}' \
	    '{"id":"b","class":"transient","reason":"http_503","attempt":1,"retry_after_s":"x"}' \
	    '{"id":"c","class":5,"reason":"http_503","attempt":1}' \
	    '{"id":"d","class":"transient","reason":"http_503","attempt":1,"method":"POST","sent":"yes"}' \
	    '{"id":"e","class":"transient","reason":"http_503","attempt":1}'
	assert_success
	[ "${#stderr_lines[@]}" -eq 4 ]
	[ "${stderr_lines[0]}" = 'rfp-backoff: line 1: field "attempt": expected an integer from 1 to 1000000' ]
	[ "${stderr_lines[1]}" = 'rfp-backoff: line 2: field "retry_after_s": expected a number or null' ]
	[ "${stderr_lines[2]}" = 'rfp-backoff: line 3: field "class": expected a string' ]
	[ "${stderr_lines[3]}" = 'rfp-backoff: line 4: field "sent": expected true or false' ]
	for id in a b c d; do
		check "$id" '.fate == "dead" and .dead_reason == "bad_input" and .stage == "rfp-backoff" and (.dead_detail | startswith("field \"")) and (has("not_before") | not)'
	done
	check a '.attempt == "3" and .line == 1'
	check e '.fate == "retry"'
	# One retry granted, for e alone.
	jq -e '.total == 10 and .left == 9' "$BATS_TEST_TMPDIR/rd/state/budget.json"
}
