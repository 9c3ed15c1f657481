#!/usr/bin/env bats
# Crash and resume, seeds 1-6: the stages fetch, classify, backoff, sink
# (tests/resume.bash says what each test asserts).
load resume

@test "resume: SIGKILL of rfp-fetch (seed 1), then a re-run: every id once, no double commit" {
	crash_and_resume 1 fetch
}
@test "resume: SIGKILL of rfp-classify (seed 2), then a re-run: every id once, no double commit" {
	crash_and_resume 2 classify
}
@test "resume: SIGKILL of rfp-backoff (seed 3), then a re-run: every id once, no double commit" {
	crash_and_resume 3 backoff
}
@test "resume: SIGKILL of rfp-sink (seed 4), then a re-run: every id once, no double commit" {
	crash_and_resume 4 sink
}
@test "resume: SIGKILL of rfp-fetch (seed 5), then a re-run: every id once, no double commit" {
	crash_and_resume 5 fetch
}
@test "resume: SIGKILL of rfp-classify (seed 6), then a re-run: every id once, no double commit" {
	crash_and_resume 6 classify
}
