#!/usr/bin/env bats
# Crash and resume, seeds 7-12: the stages backoff, sink, fetch, parse
# (tests/resume.bash says what each test asserts).
load resume

@test "resume: SIGKILL of rfp-backoff (seed 7), then a re-run: every id once, no double commit" {
	crash_and_resume 7 backoff
}
@test "resume: SIGKILL of rfp-sink (seed 8), then a re-run: every id once, no double commit" {
	crash_and_resume 8 sink
}
@test "resume: SIGKILL of rfp-fetch (seed 9), then a re-run: every id once, no double commit" {
	crash_and_resume 9 fetch
}
@test "resume: SIGKILL of rfp-sink (seed 10), then a re-run: every id once, no double commit" {
	crash_and_resume 10 sink
}
@test "resume: SIGKILL of rfp-parse (seed 11), then a re-run: every id once, every result parsed (#23)" {
	crash_and_resume 11 parse "$FIX/pipeline/crash-parse-rfpipe.yaml"
	jq -s -e 'all(.parsed == "docs/\(.id).parsed")' "$RUN/results.ndjson"
}
@test "resume: SIGKILL of rfp-parse (seed 12), then a re-run: every id once, every result parsed (#23)" {
	crash_and_resume 12 parse "$FIX/pipeline/crash-parse-rfpipe.yaml"
	jq -s -e 'all(.parsed == "docs/\(.id).parsed")' "$RUN/results.ndjson"
}
