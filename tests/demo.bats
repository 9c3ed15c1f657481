#!/usr/bin/env bats
# demo.sh, the README's first command: its portals misbehave as real ones
# do, and its summary shows what rfpipe did about it.  The counts are the
# same every run (--seed, and scripts written down in portal.yaml).

load test_helper

setup() {
	command -v pdftotext >/dev/null || skip "pdftotext (poppler-utils) is not installed"
	D=$BATS_FILE_TMPDIR/demo
}

# The demo, once per file: its run is the fixture of every test here.
setup_file() {
	command -v pdftotext >/dev/null || return 0
	D=$BATS_FILE_TMPDIR/demo
	# 0.05, not the suite's 0.01: NSF's 60 s outage is then 3 s, longer
	# than it takes to start the pipeline, so the breaker opens every time.
	RFPIPE_TIME_SCALE=0.05 timeout 120 "$ROOT/demo.sh" "$D" \
	    >"$BATS_FILE_TMPDIR/out" 2>"$BATS_FILE_TMPDIR/err" ||
	    echo $? >"$BATS_FILE_TMPDIR/failed"
}

# sum JQ: evaluate JQ on the demo's summary.json.
sum() {
	jq -e "$1" "$BATS_FILE_TMPDIR/demo/run/summary.json"
}

@test "demo: runs to the end and exits 0 (dead letters are expected)" {
	[ ! -e "$BATS_FILE_TMPDIR/failed" ] ||
	    fail "demo.sh exit $(cat "$BATS_FILE_TMPDIR/failed"): $(tail -20 "$BATS_FILE_TMPDIR/err")"
}

@test "demo: the counts reconcile: 303 admitted, 293 succeeded, 10 dead" {
	sum '.admitted == 303 and .run.succeeded == 293 and .run.dead == 10 and .reconciled == true'
	grep -Fx '  check: admitted 303 = succeeded 293 + dead 10: ok' "$BATS_FILE_TMPDIR/err"
}

@test "demo: dead letters by reason: 8 permanent, 1 parse_failed, 1 exhausted, nothing else" {
	sum '.run.dead_by_reason | . == (map_values(0) + {permanent: 8, parse_failed: 1, exhausted: 1})'
	[ "$(jq -r 'select(.dead_reason == "exhausted") | .id' "$D/run/dead.ndjson")" = NIH-R01-013 ]
	[ "$(jq -r 'select(.dead_reason == "parse_failed") | .id' "$D/run/dead.ndjson")" = NSF-042 ]
	jq -se 'map(select(.id == "GRANTS-007"))[0].dead_detail == "invalid_body"' "$D/run/dead.ndjson"
}

@test "demo: the rate-limited portal answered 429s, paced: retried, never dead" {
	sum '.run.http_429 > 0 and .run.retries > .run.http_429'
	grep -Eq '^  attempts [0-9]+, retries [1-9][0-9]*, 429s [1-9][0-9]*,' "$BATS_FILE_TMPDIR/err"
	[ "$(jq -s 'map(select(.endpoint == "nih" and .status == 429)) | length' "$D/mock.log")" -gt 0 ]
	[ "$(grep -c '"NIH-' "$D/run/results.ndjson")" -eq 99 ]
}

@test "demo: the overloaded portal answered 503s and every document but the broken ones came through" {
	[ "$(jq -s 'map(select(.endpoint == "grants" and .action == "rate_limited" and .status == 503)) | length' "$D/mock.log")" -gt 0 ]
	[ "$(grep -c '"GRANTS-' "$D/run/results.ndjson")" -eq 92 ]
}

@test "demo: the portal that was down opened its breaker, which closed again, and said so" {
	sum '.breakers.nsf.openings >= 1 and .breakers.nsf.state == "closed"'
	grep -Eq '^  breaker nsf: closed, opened [1-9][0-9]* times?' "$BATS_FILE_TMPDIR/err"
	grep -q '^rfp-fetch: endpoint "nsf": the breaker is open' "$BATS_FILE_TMPDIR/err"
	[ "$(grep -c '"NSF-' "$D/run/results.ndjson")" -eq 99 ]
}

@test "demo: each application is committed once; the one whose reply was lost was sent again with its key" {
	jq -se 'map(select(.id | startswith("APP-"))) | length == 3' "$D/run/results.ndjson"
	jq -se '[.[] | select(.method == "POST")] | (map(select(.committed)) | length == 3) and
	    (map(select(.committed and .duplicate)) | length == 0) and
	    (map(select(.path == "/grants/apply/1") | .key) | length == 2 and .[0] == .[1])' "$D/mock.log"
}

@test "demo: it ends by writing the HTML report, whose figures are the summary's" {
	grep -Fx "demo: the report to open or mail: $D/report.html" "$BATS_FILE_TMPDIR/out"
	[ -s "$D/report.html" ]
	grep -q "id=\"n-succeeded\" data-n=\"$(jq .run.succeeded "$D/run/summary.json")\"" "$D/report.html"
}

@test "demo: a relative RUN-DIR is the caller's, and a directory that is no earlier demo's is refused untouched" {
	cd "$BATS_TEST_TMPDIR"
	mkdir doc
	echo keep >doc/f
	run -2 --separate-stderr "$ROOT/demo.sh" doc
	[ "$stderr" = "demo: $BATS_TEST_TMPDIR/doc is not an earlier demo's directory; give a new one" ]
	[ "$(cat doc/f)" = keep ]
	[ -d "$ROOT/doc" ] && [ -f "$ROOT/doc/design.md" ]
}
