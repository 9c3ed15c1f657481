#!/usr/bin/env bats
# One version: debian/changelog's top entry.  The Makefile reads it into
# every program and fills it into bin/rfpipe; the pages and READMEs name
# none of their own, so nothing can fall behind a release.

load test_helper

# The version as the Makefile and pipeline.sh read it.
version() {
	head -n 1 "$ROOT/debian/changelog" | tr -d '()' | cut -d ' ' -f 2
}

@test "version: dpkg reads debian/changelog's version as the Makefile does" {
	command -v dpkg-parsechangelog >/dev/null 2>&1 ||
	    skip "dpkg-parsechangelog is not installed"
	[ -n "$(version)" ]
	[ "$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)" = "$(version)" ]
}

@test "version: every executable's --version prints debian/changelog's version" {
	local want bin p
	want=$(version)
	[ -n "$want" ]
	# The build's bin/: the stages, the mock portal and rfpipe side by side.
	bin=$(dirname "$(command -v rfp-fetch)")
	for p in rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink \
	    rfp-queue rfp-mockportal rfpipe; do
		run -0 "$bin/$p" --version
		[ "$output" = "$p $want" ] ||
		    fail "$p --version printed \"$output\", not \"$p $want\""
	done
	run -0 "$ROOT/pipeline.sh" --version
	[ "$output" = "rfpipe $want" ] ||
	    fail "pipeline.sh --version printed \"$output\", not \"rfpipe $want\""
}

@test "version: the man pages and READMEs name no version of their own" {
	run grep -nE '(rfp[a-z-]*|rfpipe)[ /][0-9]+\.[0-9]+\.[0-9]+' \
	    "$ROOT"/man/* "$ROOT"/README.md "$ROOT"/examples/README.md \
	    "$ROOT"/tests/mockportal/README.md "$ROOT"/doc/*.md
	[ "$status" -eq 1 ] || fail "a version written out: $output"
}

@test "version: rfp-fetch's requests carry the user agent rfpipe/VERSION" {
	mock_start "$FIX/pipeline/statuses.yaml"
	manifest /ok 1 ok | rfp-fetch >/dev/null
	mock_stop
	jq -e -s --arg ua "rfpipe/$(version)" '.[0].headers["User-Agent"] == $ua' "$MOCK_LOG"
}
