#!/usr/bin/env bats
# The wire: what rfp-fetch puts on it, and what it never does behind the
# record's back (issue #24).  Each table is one rule of rfpipe(7) SECURITY.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
}

# mock_tls_start SCENARIO: the main portal over https, with a certificate
# for 127.0.0.1 made for the test ($CA, for --ca-file); sets what
# mock_start sets, MOCK_URL in https.  The handshake is part of connecting
# and takes real time (two key exchanges under the sanitizers, on a loaded
# machine), so tests over TLS give rfp-fetch $TLS_CONNECT: 10 real seconds,
# not the collapsed 100 ms.
TLS_CONNECT=--connect-timeout=1000
mock_tls_start() {
	CA=$BATS_TEST_TMPDIR/cert.pem
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	    -nodes -keyout "$BATS_TEST_TMPDIR/key.pem" -out "$CA" -days 2 \
	    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
	mock_start "$1" --tls-cert "$CA" --tls-key "$BATS_TEST_TMPDIR/key.pem" ||
	    return 1
	MOCK_URL=https://127.0.0.1:$MOCK_PORT
}

# redirector STATUS LOCATION: the main portal, answering /r/* with STATUS
# and LOCATION, and /b/* (its own origin) with 200.
redirector() {
	printf 'routes:\n  - match: "/r/*"\n    endpoint: r\n    submit: true\n    script: [%s]\n    location: "%s"\n  - match: "/b/*"\n    endpoint: r\n' \
	    "$1" "$2" >"$BATS_TEST_TMPDIR/a.yaml"
	mock_start "$BATS_TEST_TMPDIR/a.yaml"
}

# --- A submission is never handed to a connection libcurl may replay -----

@test "wire: a submission dropped after commit on a reused connection is sent once, never replayed by libcurl (#24)" {
	mock_start "$FIX/wire/replay.yaml"
	{
		printf '{"id":"warm-%d","url":"%s/warm","endpoint":"s"}\n' 1 "$MOCK_URL" 2 "$MOCK_URL"
		for i in 1 2 3; do
			printf '{"id":"s-%d","url":"%s/s/%d","method":"POST","body":{"i":%d},"endpoint":"s"}\n' \
			    "$i" "$MOCK_URL" "$i" "$i"
		done
	} >"$BATS_TEST_TMPDIR/m"
	run -3 timeout 60 "$ROOT/pipeline.sh" -q -j 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# One request per submission, each on a connection of its own.
	[ "$(requests_for /s/1)" -eq 1 ]
	[ "$(requests_for /s/2)" -eq 1 ]
	[ "$(requests_for /s/3)" -eq 1 ]
	jq -s -e '[.[] | select(.method == "POST")] | length == 3 and all(.conn_seq == 1)' "$MOCK_LOG"
	jq -s -e '[.[] | select(.committed and .duplicate)] | length == 0' "$MOCK_LOG"
	# The client cannot know: each is ambiguous, not done.
	jq -s -e 'length == 3 and all(.dead_reason == "ambiguous_submit")' "$RUN/dead.ndjson"
	jq -s -e 'length == 2 and all(.id | startswith("warm"))' "$RUN/results.ndjson"
	# Only submissions are kept off reused connections: GETs share one.
	jq -s -e '[.[] | select(.method == "GET")] | length == 2 and (map(.conn_seq) | max) == 2' "$MOCK_LOG"
}

@test "wire: a GET whose reused connection closes with no answer is not sent again at once by libcurl: a reset, retried through the pace" {
	printf 'routes:\n  - {match: "/ok/*", endpoint: p}\n  - {match: "/rst/*", endpoint: p, script: [reset, 200]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	printf '{"id":"a","url":"%s/ok/a"}\n{"id":"b","url":"%s/rst/b"}\n' "$MOCK_URL" "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	run -0 --separate-stderr timeout 30 rfp-fetch -j 1 <"$BATS_TEST_TMPDIR/m"
	# b went out once, on the connection a opened, and came back a reset.
	[ "$(jq -r 'select(.id == "b") | .error' <<<"$output")" = reset ]
	[ "$(jq -r 'select(.id == "b") | .error_detail' <<<"$output")" = "connection closed with no answer" ]
	[ "$(requests_for /rst/b)" -eq 1 ]
	jq -s -e '[.[] | select(.path == "/rst/b")] | .[0].conn_seq == 2' "$MOCK_LOG"
	# In a pipeline it is retried, as any reset, and succeeds.
	printf '{"id":"a2","url":"%s/ok/a2"}\n{"id":"c","url":"%s/rst/c"}\n' "$MOCK_URL" "$MOCK_URL" >"$BATS_TEST_TMPDIR/m2"
	run -0 timeout 30 "$ROOT/pipeline.sh" -q -j 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m2"
	[ "$(jq -r 'select(.id == "c") | .attempt' "$RUN/results.ndjson")" -eq 2 ]
	[ "$(requests_for /rst/c)" -eq 2 ]
}

# --- Headers a manifest may set -------------------------------------------

@test "wire: a framing, hop-by-hop or rfp-fetch header in a record is refused with stage, line and field, and never sent (#24)" {
	mock_start "$FIX/mock/ok.yaml"
	# name TAB value (JSON) TAB why
	cat >"$BATS_TEST_TMPDIR/table" <<'TABLE'
Content-Length	"2"	a framing or hop-by-hop header, set by the client only
transfer-encoding	"chunked"	a framing or hop-by-hop header, set by the client only
Host	"evil.example"	a framing or hop-by-hop header, set by the client only
Connection	"close"	a framing or hop-by-hop header, set by the client only
Keep-Alive	"timeout=5"	a framing or hop-by-hop header, set by the client only
TE	"trailers"	a framing or hop-by-hop header, set by the client only
Trailer	"X-Sum"	a framing or hop-by-hop header, set by the client only
Upgrade	"h2c"	a framing or hop-by-hop header, set by the client only
Expect	"100-continue"	a framing or hop-by-hop header, set by the client only
Proxy-Authorization	"Basic eDp5"	a proxy header, set by the client only
Idempotency-Key	"mine"	set by rfp-fetch only
X-Rfp-Attempt	"1"	set by rfp-fetch only
X(1)	"v"	bad header name
X-Bell	"a\u0007b"	a control character in the value
TABLE
	n=0
	while IFS=$'\t' read -r name value why; do
		n=$((n + 1))
		printf '{"id":"h-%d","url":"%s/nih/h-%d","method":"POST","idempotent":true,"headers":{"%s":%s},"body":"ok\\r\\n\\r\\nPOST /nih/smuggled HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"}\n' \
		    "$n" "$MOCK_URL" "$n" "$name" "$value"
	done <"$BATS_TEST_TMPDIR/table" >"$BATS_TEST_TMPDIR/m"
	printf '{"id":"fine","url":"%s/nih/fine","headers":{"X-Fine":"1"}}\n' "$MOCK_URL" >>"$BATS_TEST_TMPDIR/m"
	run -0 --separate-stderr timeout 60 rfp-fetch <"$BATS_TEST_TMPDIR/m"
	n=0
	while IFS=$'\t' read -r name value why; do
		n=$((n + 1))
		[[ $stderr == *"rfp-fetch: line $n: field \"headers\": \"$name\": $why"* ]] ||
		    { echo "line $n: no message for $name" >&2; false; }
		check "h-$n" '.fate == "dead" and .dead_reason == "bad_input" and .line == '"$n"
	done <"$BATS_TEST_TMPDIR/table"
	# Nothing of them reached the portal; the good record did.
	jq -s -e '[.[] | select(.kind == "request")] | length == 1 and .[0].path == "/nih/fine"' "$MOCK_LOG"
	check fine '.status == 200'
}

@test "wire: a header value that becomes a control character after \${NAME} expansion is refused, never sent" {
	mock_start "$FIX/mock/ok.yaml"
	printf '{"id":"e-1","url":"%s/nih/e-1","headers":{"X-Key":"${RFP_TEST_BELL}"}}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	RFP_TEST_BELL=$'a\ab' run -0 --separate-stderr timeout 60 rfp-fetch <"$BATS_TEST_TMPDIR/m"
	[[ $stderr == *'rfp-fetch: line 1: field "headers": "X-Key": a control character in the value after expansion'* ]]
	check e-1 '.dead_reason == "bad_input"'
	[ "$(requests_for /nih/e-1)" -eq 0 ]
}

# --- Secrets do not follow a redirect to another origin -------------------

# names_at LOG PATH: the header names the portal saw for PATH, comma-joined.
names_at() {
	jq -r --arg p "$2" 'select(.path == $p) | .header_names | join(",")' "$1"
}

secret_manifest() {
	printf '{"id":"g-1","url":"%s/r/g-1","headers":{"X-Api-Key":"${RFP_TEST_TOKEN}","Authorization":"Bearer ${RFP_TEST_TOKEN}","Cookie":"s=1","X-Plain":"p"}}\n' "$MOCK_URL"
	printf '{"id":"p-1","url":"%s/r/p-1","method":"PUT","idempotent":true,"body":{"a":1},"headers":{"X-Api-Key":"${RFP_TEST_TOKEN}","X-Plain":"p"}}\n' "$MOCK_URL"
}

@test "wire: x-api-key from \${NAME}, Authorization and Cookie do not follow a 307 to another origin; plain headers do (#24)" {
	export RFP_TEST_TOKEN=t0ps3cret
	mock2_start "$FIX/mock/ok.yaml"
	redirector 307 "$MOCK2_URL/nih/landed"
	secret_manifest >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 rfp-fetch <"$BATS_TEST_TMPDIR/m"
	check g-1 '.status == 200'
	check p-1 '.status == 200'
	# The first hop had them all; the other origin none of them.
	[[ "$(names_at "$MOCK_LOG" /r/g-1)" == *x-api-key*authorization*cookie*x-plain* ]]
	jq -s -e 'length == 2 and all(.header_names | (index("x-plain") != null) and
	    (index("x-api-key") == null) and (index("authorization") == null) and
	    (index("cookie") == null))' "$MOCK2_LOG"
	# A 307 keeps the method and the body.
	jq -s -e 'map(.method) | sort == ["GET", "PUT"]' "$MOCK2_LOG"
	jq -s -e 'map(select(.method == "PUT"))[0].body_bytes == 7' "$MOCK2_LOG"
}

@test "wire: another host name for the same address is another origin: no secrets" {
	export RFP_TEST_TOKEN=t0ps3cret
	getent hosts localhost | grep -q '127\.0\.0\.1' || skip "localhost is not 127.0.0.1 here"
	redirector 302 "http://localhost:{port}/b/landed"
	secret_manifest | head -1 >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 rfp-fetch <"$BATS_TEST_TMPDIR/m"
	check g-1 '.status == 200'
	[[ "$(names_at "$MOCK_LOG" /r/g-1)" == *x-api-key*cookie* ]]
	[[ "$(names_at "$MOCK_LOG" /b/landed)" == *x-plain* ]]
	[[ "$(names_at "$MOCK_LOG" /b/landed)" != *x-api-key* ]]
	[[ "$(names_at "$MOCK_LOG" /b/landed)" != *cookie* ]]
}

@test "wire: no secret goes from https down to http, even to a trusted origin (#24)" {
	export RFP_TEST_TOKEN=t0ps3cret
	mock2_start "$FIX/mock/ok.yaml"
	printf 'routes:\n  - match: "/r/*"\n    script: [307]\n    location: "%s/nih/landed"\n' \
	    "$MOCK2_URL" >"$BATS_TEST_TMPDIR/a.yaml"
	mock_tls_start "$BATS_TEST_TMPDIR/a.yaml"
	secret_manifest >"$BATS_TEST_TMPDIR/m"
	: >"$BATS_TEST_TMPDIR/c.yaml"
	for trust in "" "trusted_origins: [\"$MOCK2_URL\"]"; do
		echo "$trust" >"$BATS_TEST_TMPDIR/c.yaml"
		: >"$MOCK2_LOG"
		run -0 timeout 60 rfp-fetch "$TLS_CONNECT" --ca-file "$CA" --config "$BATS_TEST_TMPDIR/c.yaml" <"$BATS_TEST_TMPDIR/m"
		check g-1 '.status == 200'
		[[ "$(names_at "$MOCK_LOG" /r/g-1)" == *x-api-key*authorization*cookie* ]]
		jq -s -e 'length == 2 and all(.header_names | (index("x-plain") != null) and
		    (index("x-api-key") == null) and (index("authorization") == null) and
		    (index("cookie") == null))' "$MOCK2_LOG"
	done
}

@test "wire: an origin listed in trusted_origins has the secrets; the same origin always has them" {
	export RFP_TEST_TOKEN=t0ps3cret
	mock2_start "$FIX/mock/ok.yaml"
	redirector 307 "$MOCK2_URL/nih/landed"
	printf 'trusted_origins: ["%s"]\n' "$MOCK2_URL" >"$BATS_TEST_TMPDIR/c.yaml"
	secret_manifest | head -1 >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 rfp-fetch --config "$BATS_TEST_TMPDIR/c.yaml" <"$BATS_TEST_TMPDIR/m"
	check g-1 '.status == 200'
	[[ "$(names_at "$MOCK2_LOG" /nih/landed)" == *x-api-key*authorization*cookie* ]]
	# Same origin: a redirect within the portal keeps them, trusted or not.
	mock_stop
	redirector 301 "/b/landed"
	secret_manifest | head -1 >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 rfp-fetch <"$BATS_TEST_TMPDIR/m"
	[[ "$(names_at "$MOCK_LOG" /b/landed)" == *x-api-key*authorization*cookie* ]]
}

@test "wire: trusted_origins takes only http or https origins" {
	printf 'trusted_origins: ["ftp://files.example"]\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -2 --separate-stderr rfp-fetch --config "$BATS_TEST_TMPDIR/c.yaml" </dev/null
	[ "$stderr" = "rfp-fetch: $BATS_TEST_TMPDIR/c.yaml:1: key \"trusted_origins\": expected a list of origins such as \"https://files.example.org\"" ]
}

@test "wire: every stage reads trusted_origins as rfp-fetch does, and only rfp-fetch links libcurl" {
	local st dir
	printf 'trusted_origins: ["ftp://files.example"]\n' >"$BATS_TEST_TMPDIR/bad.yaml"
	# curl reads "%32" as "2", and then "2" as 0.0.0.2: an origin of its own.
	printf 'trusted_origins: ["https://files.example.org", "http://%%32:8080"]\n' \
	    >"$BATS_TEST_TMPDIR/good.yaml"
	for st in classify backoff parse; do
		run -2 --separate-stderr "rfp-$st" --config "$BATS_TEST_TMPDIR/bad.yaml" </dev/null
		[ "$stderr" = "rfp-$st: $BATS_TEST_TMPDIR/bad.yaml:1: key \"trusted_origins\": expected a list of origins such as \"https://files.example.org\"" ]
		# rfp-parse reads the bodies of a run directory.
		dir=()
		[ "$st" = parse ] && dir=(--run-dir "$BATS_TEST_TMPDIR")
		run -0 "rfp-$st" --config "$BATS_TEST_TMPDIR/good.yaml" \
		    "${dir[@]}" </dev/null
		if ldd "$(command -v "rfp-$st")" | grep -q libcurl; then
			echo "rfp-$st links libcurl" >&2
			return 1
		fi
	done
	ldd "$(command -v rfp-fetch)" | grep -q libcurl
}

# --- A redirect of a submission is never followed -------------------------

@test "wire: a 302, 303 or 307 to a submission is its answer: not followed, not sent again, filed dead (#24)" {
	for st in 302 303 307; do
		mock_stop
		rm -f "$BATS_TEST_TMPDIR/mock.log"
		redirector "$st" "/b/landed"
		printf '{"id":"s-1","url":"%s/r/s-1","method":"POST","body":{"a":1},"endpoint":"r"}\n' "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
		rm -rf "$RUN"
		run -3 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
		[ "$(requests_for /r/s-1)" -eq 1 ]
		[ "$(requests_for /b/landed)" -eq 0 ]
		jq -s -e --argjson st "$st" 'length == 1 and .[0].status == $st and .[0].dead_reason == "permanent" and .[0].reason == "unknown_http_\($st)"' "$RUN/dead.ndjson"
	done
}

@test "wire: a 303, and a 301 or 302 of a POST, are followed as a GET without the body; 307 and 308 keep both" {
	# status TAB method TAB method at the target TAB body bytes there
	while IFS=$'\t' read -r st m want bytes; do
		mock_stop
		rm -f "$BATS_TEST_TMPDIR/mock.log"
		redirector "$st" "/b/landed"
		printf '{"id":"p-1","url":"%s/r/p-1","method":"%s","idempotent":true,"body":{"a":1}}\n' "$MOCK_URL" "$m" >"$BATS_TEST_TMPDIR/m"
		run -0 timeout 60 rfp-fetch <"$BATS_TEST_TMPDIR/m"
		check p-1 '.status == 200'
		jq -s -e --arg m "$want" --argjson n "$bytes" 'map(select(.path == "/b/landed")) | length == 1 and .[0].method == $m and .[0].body_bytes == $n' "$MOCK_LOG" ||
		    { echo "$st $m: not $want with $bytes bytes" >&2; false; }
	done <<'TABLE'
303	PUT	GET	0
303	POST	GET	0
302	POST	GET	0
301	POST	GET	0
302	PUT	PUT	7
307	POST	POST	7
308	PATCH	PATCH	7
TABLE
}

# --- A status_url confirms only with a well-formed answer -----------------

@test "wire: a status_url that answers 404 or babbles cannot tell: the submission stays ambiguous, never re-sent (#24)" {
	mock_start "$FIX/wire/status.yaml"
	for s in lie babble; do
		printf '{"id":"%s","url":"%s/s/%s","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-%s","status_url":"%s/%s/{key}"}\n' \
		    "$s" "$MOCK_URL" "$s" "$s" "$MOCK_URL" "$s"
	done >"$BATS_TEST_TMPDIR/m"
	# A well-formed "no" lets a submission that never committed go again.
	printf '{"id":"no","url":"%s/f/no","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-no","status_url":"%s/_status/{key}"}\n' \
	    "$MOCK_URL" "$MOCK_URL" >>"$BATS_TEST_TMPDIR/m"
	run -3 timeout 60 "$ROOT/pipeline.sh" -q --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for /s/lie)" -eq 1 ]
	[ "$(requests_for /s/babble)" -eq 1 ]
	jq -s -e '[.[] | select(.committed and .duplicate)] | length == 0' "$MOCK_LOG"
	jq -s -e 'map(select(.id == "lie"))[0] | .dead_reason == "ambiguous_submit" and (.dead_detail | contains("status_url answered 404"))' "$RUN/dead.ndjson"
	jq -s -e 'map(select(.id == "babble"))[0] | .dead_reason == "ambiguous_submit" and (.dead_detail | contains("without a boolean \"committed\""))' "$RUN/dead.ndjson"
	[ "$(requests_for /f/no)" -eq 2 ]
	jq -s -e 'length == 1 and .[0].id == "no" and .[0].status == 201' "$RUN/results.ndjson"
}

@test "wire: five status_urls that hang do not hold up GETs to another endpoint (#24)" {
	mock_start "$FIX/wire/status.yaml"
	mkdir -p "$RUN/state"
	for i in 1 2 3 4 5; do
		printf '{"id":"s-%d","url":"%s/s/%d","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-%d","status_url":"%s/hang/{key}"}\n' \
		    "$i" "$MOCK_URL" "$i" "$i" "$MOCK_URL"
		# An earlier run sent it and died before the answer.
		printf '{"key":"key-%d","id":"s-%d","event":"intent","t":1}\n' "$i" "$i" >>"$RUN/state/ledger.ndjson"
	done >"$BATS_TEST_TMPDIR/m"
	manifest /g 20 g >>"$BATS_TEST_TMPDIR/m"
	# Confirmation may take its full timeout (30 s here): the GETs may not.
	rfp-fetch -j 2 --run-dir "$RUN" --timeout 3000 --connect-timeout 3000 \
	    <"$BATS_TEST_TMPDIR/m" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	fetched_all() {
		[ "$(jq -s '[.[] | select(.endpoint == "g" and .status == 200)] | length' "$BATS_TEST_TMPDIR/out")" -eq 20 ]
	}
	POLL_STEP=0.01 poll 10 fetched_all || :
	kill "$pid"
	wait "$pid" || :
	jq -s -e '[.[] | select(.endpoint == "g" and .status == 200)] | length == 20' "$BATS_TEST_TMPDIR/out"
	# Nothing of the submissions was sent; their status_urls were asked.
	[ "$(jq -s '[.[] | select(.path | startswith("/s/"))] | length' "$MOCK_LOG")" -eq 0 ]
	[ "$(jq -s '[.[] | select(.path | startswith("/hang/"))] | length' "$MOCK_LOG")" -ge 4 ]
}

@test "wire: a status_url is asked with the record's headers and User-Agent, like any request" {
	mock_start "$FIX/wire/status.yaml"
	export RFP_TEST_TOKEN=t0ps3cret
	mkdir -p "$RUN/state"
	printf '{"id":"s-1","url":"%s/s/1","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-1","headers":{"X-Api-Key":"${RFP_TEST_TOKEN}"},"status_url":"%s/_status/{key}"}\n' \
	    "$MOCK_URL" "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	printf '{"key":"key-1","id":"s-1","event":"intent","t":1}\n' >"$RUN/state/ledger.ndjson"
	run -0 timeout 60 rfp-fetch --run-dir "$RUN" <"$BATS_TEST_TMPDIR/m"
	jq -s -e 'map(select(.kind == "control"))[0] | (.headers["User-Agent"] | startswith("rfpipe/")) and (.header_names | index("x-api-key") != null) and (.header_names | index("idempotency-key") == null)' "$MOCK_LOG"
}

@test "wire: status_urls still unanswered at the deadline leave their submissions deadline_cut, unsent" {
	mock_start "$FIX/wire/status.yaml"
	mkdir -p "$RUN/state"
	for i in 1 2 3 4 5 6; do
		printf '{"id":"s-%d","url":"%s/s/%d","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-%d","status_url":"%s/hang/{key}"}\n' \
		    "$i" "$MOCK_URL" "$i" "$i" "$MOCK_URL"
		printf '{"key":"key-%d","id":"s-%d","event":"intent","t":1}\n' "$i" "$i" >>"$RUN/state/ledger.ndjson"
	done >"$BATS_TEST_TMPDIR/m"
	run -0 --separate-stderr timeout 60 rfp-fetch --run-dir "$RUN" --timeout 3000 --deadline +1s <"$BATS_TEST_TMPDIR/m"
	[ "$(jq -s 'map(select(.dead_reason == "deadline_cut")) | length' <<<"$output")" -eq 6 ]
	jq -s -e 'map(select(.dead_detail | contains("status_url"))) | length == 6' <<<"$output"
	[ "$(jq -s '[.[] | select(.path | startswith("/s/"))] | length' "$MOCK_LOG")" -eq 0 ]
}

@test "wire: a submission cut while its status_url was asked, resumed with its ledger gone, is asked again and never sent" {
	mock_start "$FIX/wire/status.yaml"
	mkdir -p "$RUN/state"
	printf '{"id":"s-1","url":"%s/s/1","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-1","status_url":"%s/hang/{key}"}\n' \
	    "$MOCK_URL" "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	printf '{"key":"key-1","id":"s-1","event":"intent","t":1}\n' >"$RUN/state/ledger.ndjson"
	echo 'timeout: 3000s' >"$BATS_TEST_TMPDIR/c.yaml"
	run -4 timeout 60 "$ROOT/pipeline.sh" -q --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$RUN" --deadline +1s "$BATS_TEST_TMPDIR/m"
	jq -e 'select(.id == "s-1") | .dead_reason == "deadline_cut" and .sent' "$RUN/dead.ndjson"
	# The letter is all that says it may have gone: the resume asks again.
	rm "$RUN/state/ledger.ndjson"
	run -4 timeout 60 "$ROOT/pipeline.sh" -q --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$RUN" --deadline +1s "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.path | startswith("/s/"))] | length' "$MOCK_LOG")" -eq 0 ]
	[ "$(jq -s '[.[] | select(.path | startswith("/hang/"))] | length' "$MOCK_LOG")" -eq 2 ]
}

@test "wire: a status_url over https is asked with --ca-file, as every request is (#24)" {
	mock_tls_start "$FIX/wire/status.yaml"
	mkdir -p "$RUN/state"
	printf '{"id":"f-1","url":"%s/f/1","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-1","status_url":"%s/_status/{key}"}\n' \
	    "$MOCK_URL" "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	printf '{"key":"key-1","id":"f-1","event":"intent","t":1}\n' >"$RUN/state/ledger.ndjson"
	run -0 timeout 60 rfp-fetch "$TLS_CONNECT" --run-dir "$RUN" --ca-file "$CA" <"$BATS_TEST_TMPDIR/m"
	# The status_url said "not committed" over verified TLS: it was sent.
	[ "$(jq -s 'map(select(.kind == "control")) | length' "$MOCK_LOG")" -eq 1 ]
	[ "$(requests_for /f/1)" -eq 1 ]
	check f-1 '.status == 503 and .dead_reason == null'
}

@test "wire: a status check leaves the manifest's stream open: lines after it still come in" {
	mock_start "$FIX/wire/status.yaml"
	mkdir -p "$RUN/state"
	printf '{"key":"key-1","id":"s-1","event":"intent","t":1}\n' >"$RUN/state/ledger.ndjson"
	# The manifest arrives over a pipe, the rest of it after the check.
	{
		printf '{"id":"s-1","url":"%s/f/1","method":"POST","body":{},"endpoint":"s","idempotency_key":"key-1","status_url":"%s/_status/{key}"}\n' \
		    "$MOCK_URL" "$MOCK_URL"
		POLL_STEP=0.01 poll 5 matches "$MOCK_LOG" '"kind":"control"' || :
		sleep 0.3
		manifest /g 5 g
	} | { run -0 --separate-stderr timeout 60 rfp-fetch --run-dir "$RUN"; echo "$output" >"$BATS_TEST_TMPDIR/out"; }
	[ "$(jq -s 'map(select(.endpoint == "g" and .status == 200)) | length' "$BATS_TEST_TMPDIR/out")" -eq 5 ]
	jq -s -e 'map(select(.id == "s-1"))[0].status == 503' "$BATS_TEST_TMPDIR/out"
}
