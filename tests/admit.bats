#!/usr/bin/env bats
# Admission: what a run refuses at admission it refuses before sending
# anything, as bad_input naming the line and the field, the batch going on;
# and rfpipe --check refuses the same lines.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	M=$BATS_TEST_TMPDIR/m
}

# A portal that commits whatever reaches /apply/, and drops its first answer.
commit_portal() {
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF'
	routes:
	  - match: "/apply/*"
	    endpoint: grants
	    submit: true
	    script: [drop, 200]
	  - match: "/ok/*"
	    endpoint: ok
	EOF
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
}

# refused_both SUMMARY LINE...: --check (exit 2, its summary saying SUMMARY)
# and a run (exit 3) refuse the same lines of $M, each with LINE... alone
# on stderr.
refused_both() {
	local summary=$1
	shift
	run -2 --separate-stderr pipeline.sh --check "$M"
	[[ $output == *"$summary"* ]]
	[ "$stderr" = "$(printf '%s\n' "$@")" ]
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[ "$stderr" = "$(printf '%s\n' "$@")" ]
}

@test "admit: a body with GET, HEAD or no method is bad_input naming the line and the field; nothing is sent" {
	commit_portal
	echo '{}' >"$BATS_TEST_TMPDIR/b.json"
	{
		printf '{"id":"g1","url":"%s/apply/1","method":"GET","body":{"o":1}}\n' "$MOCK_URL"
		printf '{"id":"g2","url":"%s/apply/2","body":"x=1"}\n' "$MOCK_URL"
		printf '{"id":"g3","url":"%s/apply/3","method":"HEAD","body_file":"b.json"}\n' "$MOCK_URL"
		printf '{"id":"g4","url":"%s/apply/4","body_file":"b.json"}\n' "$MOCK_URL"
		printf '{"id":"ok1","url":"%s/ok/1"}\n' "$MOCK_URL"
	} >"$M"
	run -3 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$M"
	# Only the GET without a body reached the portal; nothing committed.
	[ "$(jq -s -c '[.[] | select(.kind == "request") | [.method, .path]]' "$MOCK_LOG")" = '[["GET","/ok/1"]]' ]
	jq -s -e '[.[] | select(.dead_reason == "bad_input") | [.id, .line]] == [["g1",1],["g2",2],["g3",3],["g4",4]]' "$RUN/dead.ndjson"
	jq -s -e 'length == 1 and .[0].id == "ok1" and .[0].status == 200' "$RUN/results.ndjson"
	local want='which sends no body: a body goes only with "method" POST, PUT, PATCH or DELETE'
	[[ $stderr == *"rfp-fetch: line 1: field \"body\": given for a GET, $want"* ]]
	[[ $stderr == *"rfp-fetch: line 2: field \"body\": given for a GET (no \"method\"), $want"* ]]
	[[ $stderr == *"rfp-fetch: line 3: field \"body_file\": given for a HEAD, $want"* ]]
	[[ $stderr == *"rfp-fetch: line 4: field \"body_file\": given for a GET (no \"method\"), $want"* ]]
	# --check refuses the same lines.
	run -2 --separate-stderr pipeline.sh --check "$M"
	[[ $output == *"manifest: 5 lines, 1 documents, 4 bad"* ]]
	[ "$(grep -c '^rfp-fetch: line [1-4]: field "body\(_file\)\?": given for a ' <<<"$stderr")" -eq 4 ]
}

@test "admit: a POST with a body is a submission: sent once with its Idempotency-Key, and its dropped answer never resent blindly" {
	commit_portal
	printf '{"id":"p1","url":"%s/apply/1","method":"POST","body":{"o":1}}\n' "$MOCK_URL" >"$M"
	run -3 pipeline.sh -q --run-dir "$RUN" "$M"
	[ "$(logged '.kind == "request" and .method == "POST" and (.key | startswith("rfp-"))')" -eq 1 ]
	[ "$(logged '.committed == true')" -eq 1 ]
	jq -s -e '.[0].id == "p1" and .[0].dead_reason == "ambiguous_submit"' "$RUN/dead.ndjson"
}

# keyed ID PATH KEY: a POST of ID to the submit route with idempotency_key KEY.
keyed() {
	printf '{"id":"%s","url":"%s/grants/submit/%s","method":"POST","body":{"id":"%s"},"idempotency_key":"%s"}\n' \
	    "$1" "$MOCK_URL" "$2" "$1" "$3"
}

@test "admit: a second submission with another's idempotency_key is bad_input naming the key and the id; the first is sent, the batch goes on" {
	mock_start "$FIX/mock/submit.yaml"
	{ keyed app1 1 K1; keyed app2 2 K1; keyed app3 3 K3; } >"$M"
	run -3 --separate-stderr pipeline.sh -q -j 1 --run-dir "$RUN" "$M"
	[ "$(jq -s -c '[.[] | select(.kind == "request") | .path] | sort' "$MOCK_LOG")" = '["/grants/submit/1","/grants/submit/3"]' ]
	jq -s -e 'map(.id) | sort == ["app1","app3"]' "$RUN/results.ndjson"
	jq -s -e 'all(has("replayed") | not)' "$RUN/results.ndjson"
	jq -s -e 'length == 1 and .[0].id == "app2" and .[0].dead_reason == "bad_input" and .[0].line == 2' "$RUN/dead.ndjson"
	[ "$stderr" = 'rfp-fetch: line 2: field "idempotency_key": "K1" is already used by id "app1" (line 1); each submission needs its own key' ]
	run -2 --separate-stderr pipeline.sh --check "$M"
	[[ $output == *"manifest: 3 lines, 2 documents, 1 bad"* ]]
	[ "$stderr" = 'rfp-fetch: line 2: field "idempotency_key": "K1" is already used by id "app1" (line 1); each submission needs its own key' ]
}

@test "admit: a submission reusing a key the ledger holds for another id is bad_input naming both, never sent nor replayed" {
	mock_start "$FIX/mock/submit.yaml"
	keyed app1 1 K1 >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	# The next night a new record copies the key.
	keyed app2 2 K1 >"$M"
	run -3 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$M"
	[ "$(logged '.kind == "request"')" -eq 1 ]
	[ "$(requests_for /grants/submit/2)" -eq 0 ]
	jq -s -e 'length == 1 and .[0].id == "app1" and (.[0] | has("replayed") | not)' "$RUN/results.ndjson"
	jq -s -e 'length == 1 and .[0].id == "app2" and .[0].dead_reason == "bad_input" and .[0].line == 1' "$RUN/dead.ndjson"
	[ "$stderr" = 'rfp-fetch: line 1: field "idempotency_key": "K1" is already used by id "app1" (ledger: success); each submission needs its own key' ]
	# The ledger still holds the key for app1 alone, and app1 is still
	# replayed from it, not sent again, when its result is lost.
	jq -s -e 'map(.id) | unique == ["app1"]' "$RUN/state/ledger.ndjson"
	: >"$RUN/results.ndjson"
	: >"$RUN/dead.ndjson"
	keyed app1 1 K1 >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	[ "$(logged '.kind == "request"')" -eq 1 ]
	jq -s -e 'length == 1 and .[0].id == "app1" and .[0].replayed == true' "$RUN/results.ndjson"
}

@test "admit: an unset \${NAME}, a missing body_file and a port out of range are bad_input at admission naming the field, and --check refuses the same lines" {
	mock_start "$FIX/mock/submit.yaml"
	unset RFP_TEST_UNSET_VAR
	cd "$BATS_TEST_TMPDIR"
	{
		printf '{"id":"a","url":"%s/grants/submit/a","method":"POST","body":"x"}\n' "$MOCK_URL"
		printf '{"id":"b","url":"%s/grants/submit/b","headers":{"X-Key":"${RFP_TEST_UNSET_VAR}"}}\n' "$MOCK_URL"
		printf '{"id":"c","url":"%s/grants/submit/c","method":"POST","body_file":"missing.json"}\n' "$MOCK_URL"
		printf '{"id":"d","url":"http://127.0.0.1:99999/grants/submit/d"}\n'
		printf '{"id":"e","url":"http://127.0.0.1:0/grants/submit/e","method":"POST","body":"x"}\n'
	} >"$M"
	local want=(
	    'rfp-fetch: line 2: field "headers": "X-Key": environment variable "RFP_TEST_UNSET_VAR" is not set'
	    'rfp-fetch: line 3: field "body_file": cannot read "missing.json": No such file or directory'
	    'rfp-fetch: line 4: field "url": port "99999" is not a number from 1 to 65535'
	    'rfp-fetch: line 5: field "url": port "0" is not a number from 1 to 65535')
	refused_both "manifest: 5 lines, 1 documents, 4 bad" "${want[@]}"
	[ "$(logged '.kind == "request"')" -eq 1 ]
	[ "$(requests_for /grants/submit/a)" -eq 1 ]
	jq -s -e '[.[] | [.id, .dead_reason, .line]] == [["b","bad_input",2],["c","bad_input",3],["d","bad_input",4],["e","bad_input",5]]' "$RUN/dead.ndjson"
	# Refused before it was sent: the ledger never heard of e.
	jq -s -e 'map(.id) | unique == ["a"]' "$RUN/state/ledger.ndjson"
}

@test "admit: a field of the contract of the wrong type or an attempt out of range is bad_input at admission naming the line and the field, never sent; --check refuses the same lines" {
	mock_start "$FIX/mock/submit.yaml"
	{
		printf '{"id":"a","url":"%s/grants/submit/a","method":"POST","body":"x","idempotent":"yes"}\n' "$MOCK_URL"
		printf '{"id":"b","url":"%s/grants/submit/b","method":"POST","body":"x","fate":"retry","attempt":1,"sent":"no"}\n' "$MOCK_URL"
		printf '{"id":"c","url":"%s/grants/submit/c","fate":"retry","attempt":9223372036854775807}\n' "$MOCK_URL"
		printf '{"id":"d","url":"%s/grants/submit/d","fate":"retry","attempt":-1000000}\n' "$MOCK_URL"
		printf '{"id":"e","url":"%s/grants/submit/e","fate":"retry","attempt":0}\n' "$MOCK_URL"
		printf '{"id":"f","url":"%s/grants/submit/f","method":"POST","body":"x","idempotent":false}\n' "$MOCK_URL"
		# The highest attempt: tried once more, and never past it.
		printf '{"id":"g","url":"%s/grants/submit/g","fate":"retry","attempt":1000000}\n' "$MOCK_URL"
	} >"$M"
	local r='expected an integer from 1 to 1000000' want
	want=(
	    'rfp-fetch: line 1: field "idempotent": expected true or false'
	    'rfp-fetch: line 2: field "sent": expected true or false'
	    "rfp-fetch: line 3: field \"attempt\": $r"
	    "rfp-fetch: line 4: field \"attempt\": $r"
	    "rfp-fetch: line 5: field \"attempt\": $r")
	refused_both "manifest: 7 lines, 2 documents, 5 bad" "${want[@]}"
	[ "$(logged '.kind == "request"')" -eq 2 ]
	[ "$(requests_for /grants/submit/f)" -eq 1 ]
	[ "$(requests_for /grants/submit/g)" -eq 1 ]
	jq -s -e '[.[] | [.id, .dead_reason, .line, .stage]] == [["a","bad_input",1,null],["b","bad_input",2,null],["c","bad_input",3,null],["d","bad_input",4,null],["e","bad_input",5,null]]' "$RUN/dead.ndjson"
	jq -s -e 'map([.id, .attempt]) | sort == [["f",1],["g",1000000]]' "$RUN/results.ndjson"
}

@test "admit: a NUL byte, raw or escaped, and a retry fed back with a not_before past max_retry_after are bad_input naming them; --check refuses the same lines" {
	mock_start "$FIX/mock/ok.yaml"
	{
		printf '{"id":"n1",\0"url":"%s/nih/n1"}\n' "$MOCK_URL"
		printf '{"id":"n2\\u0000","url":"%s/nih/n2"}\n' "$MOCK_URL"
		printf '{"id":"nb","url":"%s/nih/nb","fate":"retry","attempt":3,"not_before":99999999999}\n' "$MOCK_URL"
		printf '{"id":"ok","url":"%s/nih/ok"}\n' "$MOCK_URL"
	} >"$M"
	local want
	want=(
	    'rfp-fetch: line 1: malformed JSON at column 12: a NUL byte (a binary file, or a file in UTF-16?)'
	    'rfp-fetch: line 2: malformed JSON at column 16: \u0000 (a NUL) in a string'
	    'rfp-fetch: line 3: field "not_before": not a time within max_retry_after (3600 s) of now')
	refused_both "manifest: 4 lines, 1 documents, 3 bad" "${want[@]}"
	[ "$(requests_for)" -eq 1 ]
	[ "$(requests_for /nih/ok)" -eq 1 ]
	jq -s -e '[.[] | .dead_reason] == ["bad_input","bad_input","bad_input"]' "$RUN/dead.ndjson"
}

@test "admit: a malformed line never quotes a header's value: not on stderr, nor in --check, the dead letter's detail or the report" {
	mock_start "$FIX/mock/ok.yaml"
	{
		printf '{"id":"s1","url":"%s/nih/s1","headers":{"Authorization":"Bearer TOPSECRET1\001"}}\n' "$MOCK_URL"
		printf '{"id":"s2","url":"%s/nih/s2","headers":{"Authorization":"Bearer TOPSECRET2\\x"}}\n' "$MOCK_URL"
		printf '{"id":"s3","url":"%s/nih/s3","headers":{"Authorization":"Bearer TOPSECRET3\377"}}\n' "$MOCK_URL"
		printf '{"id":"s4","url":"%s/nih/s4","headers":{"Authorization":"Bearer TOPSECRET4\n' "$MOCK_URL"
		printf '{"id":"ok","url":"%s/nih/ok"}\n' "$MOCK_URL"
	} >"$M"
	run -2 --separate-stderr pipeline.sh --check "$M"
	[[ $output$stderr != *TOPSECRET* ]]
	[ "$(grep -c '^rfp-fetch: line [1-4]: malformed JSON at column [0-9]*: [a-z]' <<<"$stderr")" -eq 4 ]
	run -3 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$M"
	[[ $output$stderr != *TOPSECRET* ]]
	[ "$(grep -c '^rfp-fetch: line [1-4]: malformed JSON' <<<"$stderr")" -eq 4 ]
	jq -s -e '[.[] | .dead_reason] == ["bad_input","bad_input","bad_input","bad_input"]' "$RUN/dead.ndjson"
	jq -s -e 'all(.dead_detail | test("TOPSECRET") | not)' "$RUN/dead.ndjson"
	run -0 timeout 60 rfp-report --html "$BATS_TEST_TMPDIR/r.html" "$RUN"
	! grep -q TOPSECRET "$BATS_TEST_TMPDIR/r.html"
	[ "$(requests_for /nih/ok)" -eq 1 ]
}

@test "admit: an id that names a file the stages derive from another id (ID.parsed, ID.parsed.PID) is bad_input at admission, never sent, and --check refuses it" {
	mock_start "$FIX/mock/submit.yaml"
	{
		printf '{"id":"a","url":"%s/grants/submit/a","method":"POST","body":"x"}\n' "$MOCK_URL"
		printf '{"id":"s.parsed.4000000","url":"%s/grants/submit/s","method":"POST","body":"x"}\n' "$MOCK_URL"
		printf '{"id":"b.parsed","url":"%s/grants/submit/b"}\n' "$MOCK_URL"
		printf '{"id":"c.parsed.x","url":"%s/grants/submit/c"}\n' "$MOCK_URL"
		printf '{"id":"parsed.1","url":"%s/grants/submit/d"}\n' "$MOCK_URL"
	} >"$M"
	local want=(
	    'rfp-fetch: line 2: field "id": unsafe id: contains ".parsed."'
	    'rfp-fetch: line 3: field "id": unsafe id: ends in ".parsed"'
	    'rfp-fetch: line 4: field "id": unsafe id: contains ".parsed."')
	refused_both "manifest: 5 lines, 2 documents, 3 bad" "${want[@]}"
	[ "$(requests_for /grants/submit/a)" -eq 1 ]
	[ "$(requests_for /grants/submit/d)" -eq 1 ]
	[ "$(logged '.kind == "request"')" -eq 2 ]
	jq -s -e '[.[] | [.id, .dead_reason, .line]] == [["s.parsed.4000000","bad_input",2],["b.parsed","bad_input",3],["c.parsed.x","bad_input",4]]' "$RUN/dead.ndjson"
	jq -s -e 'map(.id) | unique == ["a"]' "$RUN/state/ledger.ndjson"
	[ ! -e "$RUN/docs/s.parsed.4000000" ]
}

@test "admit: --deadline 9999-12-31T23:59:59Z: --check and the run both take it" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 nih >"$M"
	run -0 --separate-stderr pipeline.sh --check --deadline 9999-12-31T23:59:59Z "$M"
	[[ $output == *"deadline: 9999-12-31T23:59:59Z"* ]]
	[ -z "$stderr" ]
	run -0 --separate-stderr pipeline.sh -q --run-dir "$RUN" --deadline 9999-12-31T23:59:59Z "$M"
	[ -z "$stderr" ]
	jq -s -e 'length == 2 and all(.status == 200)' "$RUN/results.ndjson"
}

@test "admit: a --deadline past any the stages read is refused alike by --check and the run, as typed, nothing made" {
	manifest /nih 2 nih >"$M"
	local d
	for d in @253402300801 +9999999999999s 9999-12-31T23:59:59-14:00; do
		run -2 --separate-stderr pipeline.sh --check --deadline "$d" "$M"
		[ "$stderr" = "rfpipe: option --deadline: cannot read \"$d\" as a time" ]
		run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" --deadline "$d" "$M"
		[ "$stderr" = "rfpipe: option --deadline: cannot read \"$d\" as a time" ]
		[ ! -e "$RUN" ]
		# Each stage on its own says the same of it.
		run -2 --separate-stderr rfp-fetch --check --deadline "$d" <"$M"
		[ "$stderr" = "rfp-fetch: option --deadline: cannot read \"$d\" as a time" ]
	done
}

@test "admit: a manifest that starts with a UTF-8 byte order mark runs as the same manifest without it; a mark anywhere else is a bad line saying so" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	{ printf '\357\273\277'; cat "$M"; } >"$M.bom"
	# A config file written so is read as YAML reads it (libyaml skips it).
	printf '\357\273\277max_attempts: 3\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 --separate-stderr pipeline.sh --check --config "$BATS_TEST_TMPDIR/c.yaml" "$M.bom"
	[[ ${lines[0]} == "manifest: 3 lines, 3 documents, 0 bad" ]]
	[[ $output == *"max_attempts 3"* ]]
	run -0 --separate-stderr pipeline.sh -q --run-dir "$RUN" --seed 1 "$M.bom"
	[ -z "$stderr" ]
	run -0 pipeline.sh -q --run-dir "$RUN.plain" --seed 1 "$M"
	for d in "$RUN" "$RUN.plain"; do
		jq -c '{admitted, succeeded: .run.succeeded, dead: .run.dead, reconciled}' "$d/summary.json" >>"$BATS_TEST_TMPDIR/both"
		jq -r .id "$d/results.ndjson" | sort | tr '\n' ' ' >>"$BATS_TEST_TMPDIR/both"
		echo >>"$BATS_TEST_TMPDIR/both"
	done
	[ "$(sed -n 1,2p "$BATS_TEST_TMPDIR/both")" = "$(sed -n 3,4p "$BATS_TEST_TMPDIR/both")" ]
	[ "$(sed -n 1p "$BATS_TEST_TMPDIR/both")" = '{"admitted":3,"succeeded":3,"dead":0,"reconciled":true}' ]
	# A mark before a later line (files joined by cat) is named as one.
	{ cat "$M"; printf '\357\273\277{"id":"late","url":"%s/nih/late"}\n' "$MOCK_URL"; } >"$M.mid"
	run -2 --separate-stderr pipeline.sh --check "$M.mid"
	[[ $stderr == *'rfp-fetch: line 4: malformed JSON at column 1: a UTF-8 byte order mark (EF BB BF) before the record (one is skipped only at the start of a manifest)'* ]]
	run -3 --separate-stderr pipeline.sh -q --run-dir "$RUN.mid" "$M.mid"
	jq -e 'select(.line == 4) | .dead_reason == "bad_input" and (.dead_detail | test("byte order mark"))' "$RUN.mid/dead.ndjson"
	[ "$(wc -l <"$RUN.mid/results.ndjson")" -eq 3 ]
}
