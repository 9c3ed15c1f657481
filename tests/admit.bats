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
