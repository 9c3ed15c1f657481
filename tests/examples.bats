#!/usr/bin/env bats
# examples/: every configuration is valid, every manifest line is a record
# rfp-fetch accepts, and what examples/README.md says of them holds.  No
# test here reaches a real portal: a past deadline means nothing is sent.

load test_helper

EX=$ROOT/examples
PORTALS="nih-reporter grants-gov nsf-awards nsf-solicitations sam-gov"

setup() {
	# Should anything try to reach a portal after all, it fails here.
	export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
	export ALL_PROXY=http://127.0.0.1:9 no_proxy=127.0.0.1 NO_PROXY=127.0.0.1
}

@test "examples: each portal has a manifest and a configuration that opens citing the portal's documentation" {
	local d
	for d in $PORTALS; do
		[ -s "$EX/$d/manifest.ndjson" ] || fail "$d: no manifest.ndjson"
		[ -s "$EX/$d/rfpipe.yaml" ] || fail "$d: no rfpipe.yaml"
		head -1 "$EX/$d/rfpipe.yaml" | grep -q '^# ' ||
		    fail "$d/rfpipe.yaml does not open with a comment"
		sed -n '/^[^#]/q;p' "$EX/$d/rfpipe.yaml" | grep -q 'Documented' ||
		    fail "$d/rfpipe.yaml: its opening comment states nothing documented"
	done
}

@test "examples: rfp-backoff and rfp-fetch accept every configuration" {
	local c n=0
	for c in "$EX"/*/rfpipe.yaml; do
		run --separate-stderr rfp-backoff --config "$c" </dev/null
		[ "$status" -eq 0 ] || fail "rfp-backoff --config $c: status $status: $stderr"
		run --separate-stderr rfp-fetch --config "$c" </dev/null
		[ "$status" -eq 0 ] || fail "rfp-fetch --config $c: status $status: $stderr"
		n=$((n + 1))
	done
	[ "$n" -ge 5 ]
}

@test "examples: every manifest line is a JSON object with a string id and url" {
	local d line n
	for d in $PORTALS; do
		n=0
		while IFS= read -r line; do
			n=$((n + 1))
			jq -e 'type == "object" and (.id | type) == "string" and
			    (.url | type) == "string"' <<<"$line" >/dev/null ||
			    fail "$d/manifest.ndjson:$n: not an object with id and url"
		done <"$EX/$d/manifest.ndjson"
		[ "$n" -gt 0 ]
	done
}

@test "examples: past the deadline rfp-fetch sends nothing and every manifest record is dead deadline_cut, none bad_input" {
	local d m
	for d in $PORTALS; do
		m=$EX/$d/manifest.ndjson
		# The secrets the manifests name are set, as they are for a run.
		SAM_API_KEY=test-key run --separate-stderr rfp-fetch --config "$EX/$d/rfpipe.yaml" --deadline +0s <"$m"
		[ "$status" -eq 0 ] || fail "$d: status $status: $stderr"
		[ "$stderr" = "" ] || fail "$d: $stderr"
		[ "${#lines[@]}" -eq "$(grep -c . "$m")" ] || fail "$d: ${#lines[@]} records out"
		jq -se 'all(.fate == "dead" and .dead_reason == "deadline_cut")' <<<"$output" >/dev/null ||
		    fail "$d: not all deadline_cut: $output"
		diff <(jq -r .id "$m" | sort) <(jq -r .id <<<"$output" | sort) ||
		    fail "$d: the ids out are not the ids in"
	done
}

@test "examples: every POST in a manifest is a search marked idempotent" {
	local d
	for d in $PORTALS; do
		jq -se 'all(.[]; .method != "POST" or .idempotent == true)' \
		    "$EX/$d/manifest.ndjson" >/dev/null ||
		    fail "$d: a POST without \"idempotent\": true"
	done
}

@test "examples: an idempotent POST under the NIH configuration is retried after a 503, a plain POST is not" {
	local c=$EX/nih-reporter/rfpipe.yaml rec
	rec='{"id":"nih-1","url":"https://api.reporter.nih.gov/v2/projects/search","method":"POST","idempotent":true,"endpoint":"api.reporter.nih.gov","attempt":1,"status":503,"sent":true}'
	run --separate-stderr sh -c 'rfp-classify | rfp-backoff --config "$1" --admitted 1' sh "$c" <<<"$rec"
	assert_success
	jq -e '.fate == "retry"' <<<"$output"
	run --separate-stderr sh -c 'rfp-classify | rfp-backoff --config "$1" --admitted 1' sh "$c" <<<"$(jq -c 'del(.idempotent)' <<<"$rec")"
	assert_success
	jq -e '.fate == "dead" and .dead_reason == "ambiguous_submit"' <<<"$output"
}

@test "examples: the SAM.gov manifest keeps the key out of its URLs and takes it from the environment" {
	jq -se 'all(.url | test("api_key"; "i") | not) and
	    all(.headers["X-Api-Key"] == "${SAM_API_KEY}")' "$EX/sam-gov/manifest.ndjson" >/dev/null
}

@test "examples: under the SAM.gov configuration a 429 with Retry-After at midnight UTC is dead quota at once" {
	# 22 hours from the response's Date to the quota's reset.
	run --separate-stderr sh -c 'rfp-classify | rfp-backoff --config "$1" --admitted 3' sh "$EX/sam-gov/rfpipe.yaml" \
	    <<<'{"id":"sam-1","url":"https://api.sam.gov/opportunities/v2/search","endpoint":"api.sam.gov","attempt":1,"status":429,"date":"Sun, 29 Nov 2026 02:00:00 GMT","retry_after":"Mon, 30 Nov 2026 00:00:00 GMT"}'
	assert_success
	jq -e '.retry_after_s == 79200 and .fate == "dead" and .dead_reason == "quota" and
	    (.dead_detail | test("max_retry_after"))' <<<"$output"
}

@test "examples: a dead record fed back as a manifest loses the previous attempt's fields and keeps its own" {
	local rec
	rec='{"id":"nsf-water-0001","url":"https://api.nsf.gov/services/v1/awards.json?keyword=water","note":"kept","endpoint":"api.nsf.gov","attempt":4,"status":503,"error":null,"elapsed_ms":120,"bytes":10,"class":"transient","reason":"http_503","fate":"dead","dead_reason":"exhausted","dead_detail":"4 of 4 attempts failed"}'
	run --separate-stderr rfp-fetch --deadline +0s <<<"$rec"
	assert_success
	jq -e '.note == "kept" and .endpoint == "api.nsf.gov" and
	    .dead_reason == "deadline_cut" and .dead_detail != "4 of 4 attempts failed" and
	    ([has("attempt", "status", "error", "elapsed_ms", "bytes", "class", "reason")] | any | not)' <<<"$output"
}

@test "examples: rerun.sh runs the exhausted documents of a run again, in a new run directory" {
	mock_start "$FIX/pipeline/statuses.yaml"
	unset http_proxy https_proxy ALL_PROXY
	mkdir "$BATS_TEST_TMPDIR/bin"
	ln -s "$ROOT/pipeline.sh" "$BATS_TEST_TMPDIR/bin/rfpipe"
	cd "$BATS_TEST_TMPDIR"
	# Two attempts of [503, 503, 200] are not enough; the third is.
	{ manifest /twice503 2 flaky; manifest /ok 1 ok; } >m
	run -3 pipeline.sh -q --max-attempts 2 --run-dir run m
	[ "$(jq -s '[.[] | select(.dead_reason == "exhausted")] | length' run/dead.ndjson)" -eq 2 ]
	PATH=$BATS_TEST_TMPDIR/bin:$PATH run --separate-stderr "$EX/rerun-dead/rerun.sh" run
	assert_success
	[ "$(jq -r .id run-again/results.ndjson | sort | tr '\n' ' ')" = "flaky-1 flaky-2 " ]
	jq -se 'all(.attempt == 1 and .status == 200)' run-again/results.ndjson
	[ ! -e run-again/dead.ndjson ] || [ ! -s run-again/dead.ndjson ]
}

@test "examples: rfp-parse finds every parser the examples name (#23)" {
	command -v pdftotext >/dev/null || skip "pdftotext (poppler-utils) is not installed"
	local c
	for c in "$EX"/*/rfpipe.yaml; do
		run --separate-stderr rfp-parse --config "$c" --list
		[ "$status" -eq 0 ] || fail "rfp-parse --config $c --list: status $status: $stderr"
	done
	run -0 rfp-parse --config "$EX/nsf-solicitations/rfpipe.yaml" --list
	jq -e '.endpoint == "www.nsf.gov" and .command[0] == "pdftotext"' <<<"$output"
}

@test "examples: the NSF parser reads a PDF; the NIH one passes pages with the office's fields and refuses one short of a project number (#23)" {
	command -v pdftotext >/dev/null || skip "pdftotext (poppler-utils) is not installed"
	local run=$BATS_TEST_TMPDIR/run
	# The parsers' timeouts at a tenth: NIH's jq 3 s real, NSF's pdftotext
	# 12 s.  At the suite's hundredth, jq on a busy machine was not done
	# in 0.3 s.
	export RFPIPE_TIME_SCALE=0.1
	mkdir -p "$run/docs"
	cp "$FIX/parse/award.pdf" "$run/docs/sol-1"
	jq -c '{results: [.]}' "$FIX/parse/nih-good.json" >"$run/docs/page-1"
	jq -c '{results: [.]}' "$FIX/parse/nih-short.json" >"$run/docs/page-2"
	jq -c '{results: [.] | map(del(.project_num))}' "$FIX/parse/nih-short.json" >"$run/docs/page-3"
	printf '{"id":"sol-1","url":"https://www.nsf.gov/x.pdf","status":200,"error":null,"body_path":"docs/sol-1"}\n' >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr rfp-parse --run-dir "$run" --config "$EX/nsf-solicitations/rfpipe.yaml" <"$BATS_TEST_TMPDIR/in"
	jq -e '.parsed == "docs/sol-1.parsed"' <<<"$output"
	grep -q 'Proposal due' "$run/docs/sol-1.parsed"
	for p in 1 2 3; do
		printf '{"id":"page-%d","url":"https://api.reporter.nih.gov/v2/projects/search","status":200,"error":null,"body_path":"docs/page-%d"}\n' "$p" "$p"
	done >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr rfp-parse --run-dir "$run" --config "$EX/nih-reporter/rfpipe.yaml" <"$BATS_TEST_TMPDIR/in"
	check page-1 '.parsed == "docs/page-1.parsed"'
	check page-2 '.parse_error == null and .parsed == "docs/page-2.parsed"'
	check page-3 '.parse_error == "failed" and .parse_detail == "exit 1"'
}

@test "examples: rerun.sh passes shellcheck" {
	command -v shellcheck >/dev/null 2>&1 || skip "shellcheck is not installed"
	run shellcheck "$EX/rerun-dead/rerun.sh"
	assert_success
}
