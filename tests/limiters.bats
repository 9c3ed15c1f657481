#!/usr/bin/env bats
# The pace against the limiters portals deploy (the mock's limits:), rate
# not told, -j 32: counts from the mock's log and the run directory, never
# times.  Time runs ten times faster than the portal's clock.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	export RFPIPE_TIME_SCALE=0.1
}

# scenario ENDPOINT LIMITS [ROUTE-KEYS]: one route /ENDPOINT/* with limits.
scenario() {
	printf 'routes:\n  - {match: "/%s/*", endpoint: %s, %slimits: [%s]}\n' \
	    "$1" "$1" "${3:+$3, }" "$2" >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
}

# routes ROUTE...: the mock, serving a route for each ROUTE (a YAML map).
routes() {
	{ echo 'routes:'; printf '  - %s\n' "$@"; } >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
}

# saved PREFIX: the documents filed done whose id starts with PREFIX.
saved() {
	jq -s --arg p "$1" '[.[] | select(.id | startswith($p))] | length' "$RUN/results.ndjson"
}

# told_run EP CONC N: N documents to /EP/* at -j 32, the endpoint told a
# concurrency of CONC; all saved.
told_run() {
	printf 'endpoints:\n  %s:\n    concurrency: %s\n' "$1" "$2" >"$BATS_TEST_TMPDIR/c.yaml"
	manifest "/$1" "$3" "$1" >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 32 --seed 1 --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq "$3" ]
}

# told_a20 N: N documents to /a/* at -j 32, endpoint a told a strict
# 20/s, within 60 s; all saved.
told_a20() {
	printf 'endpoints:\n  a: {rate: 20, burst: 0}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	manifest /a "$1" a >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q -j 32 --seed 1 --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq "$1" ]
}

# all_saved EP N J: N documents to /EP/* at -j J; exit 0, every one saved,
# none dead.
all_saved() {
	manifest "/$1" "$2" "$1" >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j "$3" --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq "$2" ]
	[ ! -s "$RUN/dead.ndjson" ]
}

# never_opened: no endpoint's breaker ever left "closed".
never_opened() {
	local f
	for f in "$RUN"/state/breaker/*.json; do
		[ -e "$f" ] || continue
		jq -e '[.transitions[]? | select(.to != "closed")] | length == 0' "$f" ||
		    { echo "breaker opened: $(cat "$f")" >&2; return 1; }
	done
}

# refused_at_most N FILTER: the mock's log holds no more than N requests
# matching FILTER (its refusals); says how many, of how many requests.
refused_at_most() {
	local n
	n=$(logged "$2")
	echo "refused $n of $(requests_for)"
	[ "$n" -le "$1" ]
}

# noise EP: the share of refusals the pace of EP found to be noise (0: none).
noise() {
	jq -e '.nz // 0' "$RUN/state/rate/$1.json"
}

@test "limiters: refusals at random with no limit behind them are found to be noise, and the pace lets them be" {
	# One document in ten refused once (429 or 503, Retry-After: 1).
	# Each refusal cut the pace under what got through between two of
	# them, the pace's own less the noise: 1,000 such documents saved
	# 440 in a minute, the pace down to 3 requests a second.
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF2'
	routes:
	  - match: "/n/*"
	    endpoint: n
	    retry_after: 1
	    mix:
	      - {weight: 90, script: [200]}
	      - {weight: 5, script: [429, 200]}
	      - {weight: 5, script: [503, 200]}
	EOF2
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	all_saved n 300 32
	never_opened
	echo "refused $(logged '.status == 429 or .status == 503') of $(requests_for); state: $(jq -c '{paced, nz, rate}' "$RUN/state/rate/n.json")"
	# Found to be noise: its share learned, near the one in ten.
	jq -e '.nz > 0.03 and .nz < 0.4' "$RUN/state/rate/n.json"
}

@test "limiters: rarer refusals at random, at -j 4, are found to be noise all the same" {
	# Every twelfth document refused once by a gateway (503,
	# Retry-After: 1), answers in 100 ms, four at a time: 7.7 % of the
	# requests.  Under the 9 % a run of cuts needed to be noise, each
	# refusal cut the pace again: one in ten, 8.8 % counted, was cut 28
	# times from 118 to 10 requests a second, 2.6 x the time of -j 4
	# (real time, --seed 1).  Found under 9 %, the noise holds the pace
	# where the cuts left it (a strict limit whose arrivals a busy
	# machine bunched would be refused as rarely), not let go.
	routes '{match: "/n/flaky/*", endpoint: n, script: [503, 200], retry_after: 1, delay_ms: 100}' \
	    '{match: "/n/*", endpoint: n, delay_ms: 100}'
	manifest /n 300 n | sed '12~12s|/n/doc-|/n/flaky/doc-|' >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 4 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 300 ]
	never_opened
	echo "refused $(logged '.status == 503') of $(requests_for); state: $(jq -c '{paced, nz, rate, cuts}' "$RUN/state/rate/n.json")"
	# Each refused once, and sent once more.
	[ "$(logged '.status == 503')" -eq 25 ]
	[ "$(requests_for)" -eq 325 ]
	# Found in a few cuts (5 here), not cut for each refusal (24).
	jq -e '.nz > 0.03 and .nz < 0.2 and .paced == 1 and .cuts <= 10' "$RUN/state/rate/n.json"
}

@test "limiters: nginx burst 10 nodelay answering 503: all saved, few refused, the breaker never opened" {
	scenario g '{kind: gcra, per_s: 10, burst: 10, status: 503}'
	all_saved g 100 32
	never_opened
	echo "refused $(logged '.action == "rate_limited"') of $(requests_for)"
	# The burst spent, the rest paced: not one refusal per document.
	# 5 to 7 alone; 16 once in a full run of the suite, where the
	# portal's clock, ten times faster, reads the load as bursts.
	[ "$(logged '.action == "rate_limited"')" -le 24 ]
	# A limit, not noise.
	[ "$(noise g)" = 0 ]
}

@test "limiters: an answer neither a success nor a refusal is counted against a RateLimit window" {
	# Three 404s, each with "X-RateLimit-Remaining": the portal counted
	# them, and a window's count waits for every answer (unheard, each
	# was a send on its way for the rest of the window: 7 of 10 went).
	scenario f '{kind: fixed_window, limit: 10, window_s: 1000, headers: x}' 'script: [404]'
	manifest /f 3 f >"$BATS_TEST_TMPDIR/m"
	run pipeline.sh -q -j 1 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 3 ]
	jq -e '.rl_rem == 7 and .rl_left == 7' "$RUN/state/rate/f.json" ||
	    { jq -c . "$RUN/state/rate/f.json"; false; }
}

@test "limiters: a strict 3/s with no burst: all saved, refusals a small share" {
	scenario s '{kind: gcra, per_s: 3, burst: 0}'
	manifest /s 30 s >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 30 ]
	echo "refused $(logged '.action == "rate_limited"') of $(requests_for)"
	# 3 alone; 4 to 6 with the cores busy, 7 or 8 in full runs of the
	# suite, 10 in one.  Pacing over the limit throughout refused 72 of
	# 129.
	[ "$(logged '.action == "rate_limited"')" -le 12 ]
	[ "$(noise s)" = 0 ]
}

@test "limiters: the last documents of a batch go at the pace found, with no probe for a faster one" {
	# 20/s strict, 100 documents: once the manifest is all read and what
	# is queued goes out within 2 s at the pace (under 40 documents), the
	# pace is told so, once.  Half the documents fail once with a 500
	# first, and wait for their retry: a count of waiting documents that
	# never came down would never tell it.
	printf 'routes:\n  - {match: "/s/*", endpoint: s, limits: [{kind: gcra, per_s: 20, burst: 0}], mix: [{weight: 1, script: [200]}, {weight: 1, script: [500, 200]}]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	printf 'endpoints:\n  s:\n    breaker: {failures: 1000}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	manifest /s 100 s >"$BATS_TEST_TMPDIR/m"
	run -0 --separate-stderr pipeline.sh -v -j 32 --seed 1 --config "$BATS_TEST_TMPDIR/c.yaml" --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 100 ]
	echo "500s: $(logged '.status == 500')"
	[ "$(logged '.status == 500')" -ge 40 ]
	said=$(grep -c 'endpoint "s": [0-9]* documents left' <<<"$stderr" || true)
	left=$(grep -o 'endpoint "s": [0-9]* documents left' <<<"$stderr" | grep -o '[0-9]*' | head -1)
	echo "said $said times; $left left"
	[ "$said" -eq 1 ]
	[ "$left" -ge 1 ] && [ "$left" -lt 40 ]
}

@test "limiters: the work's end is judged at the pace this process went at, not the pace's own" {
	# A cap of 4 answering in 0.5 s lets 8 a second through, whatever
	# the pace says (32/s and more): judged at the pace, the end was
	# said with 45 documents left, 5.5 s before it.
	scenario c '{kind: concurrency, max: 4, status: 503}' 'delay_ms: 500'
	manifest /c 60 c >"$BATS_TEST_TMPDIR/m"
	run -0 --separate-stderr pipeline.sh -v -j 16 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 60 ]
	line=$(grep 'endpoint "c": [0-9]* documents left' <<<"$stderr" || true)
	echo "$line"
	left=$(grep -o '"c": [0-9]* documents' <<<"$line" | grep -o '[0-9]*')
	[ -n "$left" ] && [ "$left" -le 20 ]
}

@test "limiters: a concurrency cap of 4 answering 503 is found and held, and never opens the breaker" {
	scenario c '{kind: concurrency, max: 4, status: 503}' 'delay_ms: 250'
	manifest /c 40 c >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 40 ]
	never_opened
	echo "refused $(logged '.action == "rate_limited"') of $(requests_for)"
	# Found after a refusal or two, then held: at most a probe more, and
	# on a loaded machine a few the cap's own accounting draws (it frees
	# a place once its answer is out, and the next request may come
	# before: nginx's limit_conn does the same).  2 to 6 beside three busy
	# loops, 10 once in a sanitizer build with four suites at once.  Not
	# found, it is 28 or more.
	[ "$(logged '.action == "rate_limited"')" -le 12 ]
	# Held at the cap, not far below it: three or four answered at once.
	echo "served at once $(mock_overlap c 0.025 '.action != "rate_limited"')"
	[ "$(mock_overlap c 0.025 '.action != "rate_limited"')" -ge 3 ]
}

@test "limiters: a concurrency told above the portal's cap of 4: its first round's 503s are the cap's, never an outage" {
	scenario c '{kind: concurrency, max: 4, status: 503}' 'delay_ms: 250'
	told_run c 16 40
	# Twelve refused at once, while the portal still held the four it let
	# in, none answered yet: no success to say the portal is up, and the
	# breaker opened on them.
	never_opened
	echo "refused $(logged '.action == "rate_limited"') of $(requests_for)"
	# The first round's 12, and those sent before their news was in: 13
	# to 15 on an idle machine, 13 to 25 beside three busy loops, 31 once
	# in CI (each refusal read frees a place the told window fills again
	# before the next is read).  A pace the refusals do not cut: 87.
	[ "$(logged '.action == "rate_limited"')" -le 45 ]
}

@test "limiters: a concurrency told, a strict rate answering 429: the window stays where it was told" {
	# 20/s answered in a second: 20 in flight to keep up.  The 429s,
	# sent with more in flight than the first successes, were taken for
	# a cap's: the window went to 7, and the run took twice as long.
	# At full time: collapsed tenfold, the answers came back before the
	# first 429s were read, and no cap was taken.
	export RFPIPE_TIME_SCALE=1
	scenario g '{kind: gcra, per_s: 20, burst: 0}' 'delay_ms: 1000'
	told_run g 32 100
	jq -c '{win, rate}' "$RUN/state/rate/g.json"
	jq -e '.win >= 32' "$RUN/state/rate/g.json"
}

@test "limiters: a quota below -j told by X-RateLimit headers is spent on documents, not on reservations" {
	# The first ask reserved -j sends while the window let 2 go: the
	# 30 unused counted against Remaining, and 48 of 50 left dead.
	scenario x '{kind: quota, limit: 30, headers: x}'
	manifest /x 50 x >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# Every one of the 30: a count at 0 with sends on their way waits
	# for their answers (under load, read out of the portal's order, 26
	# saved), and a grant dropped unsent is told back (2 saved before).
	saved=$(wc -l <"$RUN/results.ndjson")
	echo "saved $saved, refused $(logged '.action == "rate_limited"')"
	[ "$saved" -eq 30 ]
	jq -e ".run.dead_by_reason.quota == $((50 - saved))" "$RUN/summary.json"
	# What was in flight or granted when the count ran out, and nothing
	# after: at most -j.  (8 held on an idle machine; under ASan with four
	# suites at once answers are slower than 10 ms, 0.1 s at the tests'
	# scale, each grows the window by a whole request, and 16 to 18 were
	# in flight or granted.  Broken, the hold never ends the run.)
	[ "$(logged '.action == "rate_limited"')" -le 32 ]
}

@test "limiters: a daily quota dead-letters the rest as quota, unsent" {
	scenario q '{kind: quota, limit: 20, retry_after: 86400}'
	manifest /q 60 q >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 20 ]
	[ "$(jq -s 'map(select(.dead_reason == "quota")) | length' "$RUN/dead.ndjson")" -eq 40 ]
	jq -e -s 'all(.[]; .dead_detail | test("come back"))' "$RUN/dead.ndjson"
	echo "refused $(logged '.action == "rate_limited"') of $(requests_for)"
	# What was in flight or granted when the first refusal came, and
	# nothing after: at most -j (10 on a loaded machine, as for the
	# quota above; broken, the hold never ends the run).
	[ "$(logged '.action == "rate_limited"')" -le 32 ]
	jq -e '.run.dead_by_reason.quota == 40' "$RUN/summary.json"
}

@test "limiters: a RateLimit window that resets past the deadline cuts what it holds, for the next run: not quota" {
	# Every answer says Remaining 0 and Reset 1: a request a logical
	# second (0.1 s), 60 documents, a deadline 2 s away.  Filed quota,
	# the cut documents were left for --retry-dead alone.
	routes '{match: "/w/*", endpoint: w, rate: {per_s: 20, burst: 0, retry_after: 1}, ratelimit_headers: true}'
	manifest /w 60 w >"$BATS_TEST_TMPDIR/m"
	run -4 timeout 60 "$ROOT/pipeline.sh" -q -j 32 --seed 1 --deadline +2s --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	done=$(wc -l <"$RUN/results.ndjson")
	[ "$done" -ge 1 ] && [ "$done" -lt 60 ]
	[ "$(jq -s 'map(select(.dead_reason == "quota")) | length' "$RUN/dead.ndjson")" -eq 0 ]
	[ "$(jq -s 'map(select(.dead_reason == "deadline_cut")) | length' "$RUN/dead.ndjson")" -eq $((60 - done)) ]
	run -0 timeout 60 "$ROOT/pipeline.sh" -q -j 32 --seed 1 --deadline +60s --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 60 ]
}

@test "limiters: a quota's hold stays a quota as it runs down, deadline or none" {
	# A 429 with Retry-After 100 s, over max_retry_after 60 s, holds the
	# endpoint; its next documents come in once under 60 s of the hold
	# are left.  They were filed deadline_cut, with no deadline at all.
	export RFPIPE_TIME_SCALE=0.01
	routes '{match: "/q/*", endpoint: q, script: [429], retry_after: 100}'
	echo 'max_retry_after: 60s' >"$BATS_TEST_TMPDIR/c.yaml"
	{
		printf '{"id":"q-1","url":"%s/q/1"}\n' "$MOCK_URL"
		POLL_STEP=0.01 poll 10 matches "$MOCK_LOG" '"/q/1"' || :
		sleep 0.6
		printf '{"id":"q-%d","url":"%s/q/%d"}\n' 2 "$MOCK_URL" 2 3 "$MOCK_URL" 3
	} | { run -0 --separate-stderr timeout 60 rfp-fetch --config "$BATS_TEST_TMPDIR/c.yaml"; echo "$output" >"$BATS_TEST_TMPDIR/out"; }
	[ "$(jq -s 'map(select(.id != "q-1" and .dead_reason == "quota")) | length' "$BATS_TEST_TMPDIR/out")" -eq 2 ] ||
	    fail "$(cat "$BATS_TEST_TMPDIR/out")"
	[ "$(requests_for)" -eq 1 ]
}

# at T0 D: the epoch D seconds after T0 (an EPOCHREALTIME).
at() {
	awk -v t="$1" -v d="$2" 'BEGIN { printf "%.3f", t + d }'
}

# held_state QUOTA_UNTIL [MORE]: endpoint w's pace state, held until
# QUOTA_UNTIL (epoch), MORE its other fields; one user elsewhere, so that
# it is no stale state.
held_state() {
	mkdir -p "$RUN/state/rate"
	chmod 700 "$RUN" "$RUN/state" "$RUN/state/rate"
	printf '{"paced": 0, "win": 4, "quota_until": %s, "seen": %s, "users": {"1@elsewhere.invalid": %s}%s}\n' \
	    "$1" "$EPOCHREALTIME" "$EPOCHREALTIME" "${2:-}" >"$RUN/state/rate/w.json"
}

@test "limiters: a hold saved by a binary that did not tell a quota from a deadline's stays a quota" {
	export RFPIPE_TIME_SCALE=0.01
	routes '{match: "/w/*", endpoint: w}'
	held_state "$(at "$EPOCHREALTIME" 100)"
	manifest /w 3 w >"$BATS_TEST_TMPDIR/m"
	run -3 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s 'map(select(.dead_reason == "quota")) | length' "$RUN/dead.ndjson")" -eq 3 ]
	[ "$(requests_for)" -eq 0 ]
}

@test "limiters: a quota's hold lengthened by a reset only the deadline makes a hold: quota, then deadline_cut" {
	# A quota until +1 s; a RateLimit count at 0 whose reset, at +3.5 s,
	# is within max_retry_after (600 s, 6 real) but past the deadline at
	# +3 s.  One flag for the whole hold filed b, come after the quota's
	# end, quota too.
	export RFPIPE_TIME_SCALE=0.01
	routes '{match: "/w/*", endpoint: w}'
	local t0=$EPOCHREALTIME
	held_state "$(at "$t0" 1)" ", \"q_long\": $(at "$t0" 1), \"rl_left\": 0, \"rl_rem\": 0, \"rl_limit\": 10, \"rl_reset\": $(at "$t0" 3.5)"
	echo 'max_retry_after: 600s' >"$BATS_TEST_TMPDIR/c.yaml"
	{
		printf '{"id":"a","endpoint":"w","url":"%s/w/a"}\n' "$MOCK_URL"
		sleep 1.5
		printf '{"id":"b","endpoint":"w","url":"%s/w/b"}\n' "$MOCK_URL"
	} | { run -0 --separate-stderr timeout 60 rfp-fetch --run-dir "$RUN" --deadline "@$(at "$t0" 3)" \
	    --config "$BATS_TEST_TMPDIR/c.yaml"; echo "$output" >"$BATS_TEST_TMPDIR/out"; }
	jq -s -e 'map(select(.id == "a"))[0].dead_reason == "quota"' "$BATS_TEST_TMPDIR/out" ||
	    fail "$(cat "$BATS_TEST_TMPDIR/out")"
	jq -s -e 'map(select(.id == "b"))[0].dead_reason == "deadline_cut"' "$BATS_TEST_TMPDIR/out" ||
	    fail "$(cat "$BATS_TEST_TMPDIR/out")"
	[ "$(requests_for)" -eq 0 ]
}

@test "limiters: a 503 from an endpoint that never answered is an outage: the breaker opens" {
	printf 'routes:\n  - {match: "/o/*", endpoint: o, outage: {start_s: 0, status: 503}}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /o 10 o >"$BATS_TEST_TMPDIR/m"
	printf 'max_attempts: 3\nbreaker: {failures: 3, cooldown: 1s}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run pipeline.sh -q -j 4 --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ ! -s "$RUN/results.ndjson" ]
	run ! never_opened
}

@test "limiters: 200s that fail expect are no sign of an endpoint up: its 503s open the breaker" {
	# A quarter of the answers a sign-in page with 200, the rest 503:
	# nothing the batch wants is served.  A 2xx counted as up when read,
	# before its body was checked, took the 503s for throttling: the
	# breaker never opened, and the run spent 24 times as long.  (Half
	# and half, the breaker's three first sends failing in a row, none
	# answered later, did not come in one CI run in many.)
	printf 'routes:\n  - {match: "/x/*", endpoint: x, body: html, mix: [{weight: 25, script: [200]}, {weight: 75, script: [503]}]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /x 40 x '"expect":{"content_type":"application/json"}' >"$BATS_TEST_TMPDIR/m"
	printf 'max_attempts: 3\nbreaker: {failures: 3, cooldown: 1s}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run pipeline.sh -q -j 4 --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ ! -s "$RUN/results.ndjson" ]
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 40 ]
	run ! never_opened
}

@test "limiters: 503s held while an older request was on the wire reach the breaker once that one fails too" {
	# Down: three requests sent together, all 503, the first answered
	# last.  The two read first came while it was on the wire (a cap's,
	# maybe), and were dropped: the breaker heard of one failure in
	# three, and stayed closed.
	printf 'routes:\n  - {match: "/s/*", endpoint: o, script: [503], delay_ms: 2000}\n  - {match: "/o/*", endpoint: o, script: [503]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /s 1 o; manifest /o 3 o | sed 's/"id":"o-/"id":"p-/' | tail -n 2; } >"$BATS_TEST_TMPDIR/m"
	printf 'max_attempts: 1\nbreaker: {failures: 3, cooldown: 1s}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run pipeline.sh -q -j 4 --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/dead.ndjson")" -eq 3 ]
	run ! never_opened
}

@test "limiters: 503s while an older request hangs are an outage once it has hung 10 s: the breaker opens" {
	# A portal half down: one request hangs (its answer never comes), the
	# rest are refused at once.  The hung one is not a concurrency cap's
	# hold for long: after 10 s the 503s count, and the breaker opens.
	# (Held all along, the retry budget was spent with the breaker never
	# opened, long before the hang's 600 s timeout.)
	export RFPIPE_TIME_SCALE=0.01
	printf 'routes:\n  - {match: "/h/*", endpoint: h, script: [hang], hang_ms: 600000}\n  - {match: "/o/*", endpoint: o, outage: {start_s: 0, status: 503}}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /h 1 o; manifest /o 10 o | sed 's/"id":"o-/"id":"p-/'; } >"$BATS_TEST_TMPDIR/m"
	printf 'max_attempts: 20\ntimeout: 600s\nbreaker: {failures: 3, cooldown: 1s}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run timeout 60 "$ROOT/pipeline.sh" -q -j 4 --seed 1 --run-dir "$RUN" \
	    --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ ! -s "$RUN/results.ndjson" ]
	run ! never_opened
}

@test "limiters: two requests that hang first keep none of the endpoint's other documents waiting for them" {
	# The window starts at 2 and grows with answers: two hung first had
	# held the other ten unsent until their timeout (2 minutes; here the
	# deadline came first and cut all ten).  Hung for 2 s, they no
	# longer count in the window.
	routes '{match: "/h/*", endpoint: m, script: [hang], hang_ms: 600000}' \
	    '{match: "/g/*", endpoint: m}'
	{ manifest /h 2 m | sed 's/"id":"m-/"id":"h-/'; manifest /g 10 m; } >"$BATS_TEST_TMPDIR/m"
	run timeout 60 "$ROOT/pipeline.sh" -q -j 8 --seed 1 --deadline +5s \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(saved m-)" -eq 10 ]
	jq -s -e 'length == 2 and all(.id | startswith("h-")) and all(.dead_reason == "deadline_cut")' "$RUN/dead.ndjson"
}

@test "limiters: an endpoint whose every request hangs takes no more of -j from another endpoint's documents" {
	# Places freed for hung requests come from -j: given while another
	# endpoint had documents ready, the hanging one took all four and
	# the other's waited out the hangs' timeout.
	routes '{match: "/a/*", endpoint: a, script: [hang], hang_ms: 600000}' \
	    '{match: "/b/*", endpoint: b, delay_ms: 2000}'
	{ manifest /a 10 a; manifest /b 40 b; } >"$BATS_TEST_TMPDIR/m"
	printf 'timeout: 600s\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run timeout 60 "$ROOT/pipeline.sh" -q -j 4 --seed 1 --deadline +8s \
	    --config "$BATS_TEST_TMPDIR/c.yaml" --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	echo "a requested $(logged '.kind == "request" and .endpoint == "a"'), b saved $(saved b-)"
	[ "$(saved b-)" -eq 40 ]
}

@test "limiters: a hung request frees no place in a window the portal has pushed back on: a cap of 3 holding one hung is not overrun" {
	# The portal counts the hung request in its cap for as long as it
	# holds it.  Once the cap has refused, the window is the cap's, and a
	# place freed for each hung request was a refusal every round.
	routes '{match: "/h/*", endpoint: m, script: [hang], hang_ms: 600000, limits: [{kind: concurrency, max: 3, status: 503}]}' \
	    '{match: "/g/*", endpoint: m, delay_ms: 100, limits: [{kind: concurrency, max: 3, status: 503}]}'
	{ manifest /h 1 m | sed 's/"id":"m-/"id":"h-/'; manifest /g 60 m; } >"$BATS_TEST_TMPDIR/m"
	run timeout 60 "$ROOT/pipeline.sh" -q -j 8 --seed 1 --deadline +8s \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(saved m-)" -eq 60 ]
	refused_at_most 10 '.action == "rate_limited"'
}

# stale_portal: one mock, two routes of rfpipe's endpoint p (one pace): /slow/*
# limited to 20/s with no burst, /free/* unlimited, as one portal before and
# after its limit changed.
stale_portal() {
	printf 'routes:\n  - {match: "/slow/*", endpoint: slow, limits: [{kind: gcra, per_s: 20, burst: 0}]}\n  - {match: "/free/*", endpoint: free}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
}

# stale_docs ROUTE N TAG: N documents on ROUTE, ids TAG-I, endpoint p.
stale_docs() {
	local i
	for i in $(seq 1 "$2"); do
		printf '{"id":"%s-%d","url":"%s/%s/%s-%d","endpoint":"p"}\n' \
		    "$3" "$i" "$MOCK_URL" "$1" "$3" "$i"
	done
}

# stale_run MANIFEST [OPTION...]: a pipeline on the run directory, bounded.
stale_run() {
	local m=$1
	shift
	run -0 timeout 60 "$ROOT/pipeline.sh" -q -j 32 --seed 1 --run-dir "$RUN" "$@" "$m"
}

@test "limiters: 503s while requests written after the first of them hang are an outage once the first has hung 10 s" {
	# A portal half down, hanging one request in four and refusing the
	# rest, told a concurrency of 16: the window lets more go.  Each
	# hang written after the first 503 started the 10 s again, and the
	# breaker first opened after 40 s, not 19.
	export RFPIPE_TIME_SCALE=0.01
	printf 'routes:\n  - {match: "/h/*", endpoint: h, script: [hang], hang_ms: 600000}\n  - {match: "/o/*", endpoint: o, outage: {start_s: 0, status: 503}}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	local i
	for i in $(seq 60); do
		if [ $((i % 4)) = 1 ]; then manifest /h 1 o; else manifest /o 1 o; fi |
		    sed "s/o-1\"/o-$i\"/; s/doc-1\"/doc-$i\"/"
	done >"$BATS_TEST_TMPDIR/m"
	printf 'max_attempts: 50\ntimeout: 600s\nbreaker: {failures: 3, cooldown: 1s}\nendpoints:\n  o:\n    concurrency: 16\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run timeout 60 "$ROOT/pipeline.sh" -q -j 16 --seed 1 --deadline +4s \
	    --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	run ! never_opened
	# The 503s answered from 11 s after the first hang was written to the
	# breaker's first opening: the three it opens on (and one on the wire
	# with them, at most); held past 10 s by the later hangs, 5.
	jq -s --argjson o "$(jq '[.transitions[] | select(.to == "open") | .t] | min' "$RUN/state/breaker/o.json")" '
	    map(select(.kind == "request")) |
	    (map(select(.path == "/h/doc-1")) | .[0].t + 0.11) as $from |
	    map(select(.status == 503 and .t > $from and .t < $o)) | length' "$MOCK_LOG" >"$BATS_TEST_TMPDIR/n"
	echo "503s after the first hang's 11 s, before the breaker opened: $(cat "$BATS_TEST_TMPDIR/n")"
	[ "$(cat "$BATS_TEST_TMPDIR/n")" -le 4 ]
}

@test "limiters: the run at once after an unlimited one, on the same run directory, does not stampede the portal now limited" {
	# The pace the first run left (a window grown to -j) was trusted as
	# measured: a quarter of the requests were refused.
	stale_portal
	stale_docs free 300 a >"$BATS_TEST_TMPDIR/m1"
	stale_docs slow 300 b >"$BATS_TEST_TMPDIR/m2"
	stale_run "$BATS_TEST_TMPDIR/m1"
	stale_run "$BATS_TEST_TMPDIR/m2"
	[ "$(grep -c '"id":"b-' "$RUN/results.ndjson")" -eq 300 ]
	refused=$(logged '.endpoint == "slow" and .action == "rate_limited"')
	sent=$(logged '.kind == "request" and .endpoint == "slow"')
	echo "refused $refused of $sent"
	# 2 to 3 % alone, beside busy loops, and under the sanitizers; 5.4
	# and 8.8 % in two sanitizer passes of the whole suite (3 files at
	# once on 2 cores, 200 requests a real second), 12 % (41 of 341) once
	# in the plain pass, five files at once.  The stampede this guards
	# against refused 25 %.
	[ "$((refused * 6))" -le "$sent" ]
}

@test "limiters: the run at once after a limited one, on the same run directory, is not paced at the old rate where the limit is gone" {
	stale_portal
	stale_docs slow 300 a >"$BATS_TEST_TMPDIR/m1"
	stale_docs free 300 b >"$BATS_TEST_TMPDIR/m2"
	stale_run "$BATS_TEST_TMPDIR/m1"
	stale_run "$BATS_TEST_TMPDIR/m2"
	[ "$(grep -c '"id":"b-' "$RUN/results.ndjson")" -eq 300 ]
	# The second run's lines of the attempt log: nothing refused it, so
	# nothing paced it (the first run's 20/s was its pace from the start).
	jq -s -e '(to_entries | map(select(.value.t == "start")) | last.key) as $k
	    | .[$k:] | map(select(.t == "pace")) | length == 0' \
	    "$RUN/logs/attempts.ndjson" || {
		jq -c 'select(.t == "pace")' "$RUN/logs/attempts.ndjson" | tail -n 3
		false
	}
	[ "$(logged '.endpoint == "free" and .action == "rate_limited"')" -eq 0 ]
	# Each run struck itself off the pace's users as it ended.
	jq -e '.users == {}' "$RUN/state/rate/p.json"
}

@test "limiters: the pace starts from a floor of one a second for each 40 documents held, read or not, and from 2 for a small batch (#18)" {
	# The rate the pace first started at, from the attempt log: a floor
	# refused before anything got through starts again at 2 (a loaded
	# machine's first sends bunched), and the state keeps that one.  It
	# is the floor, or what got through before the first refusal if more
	# (a few sends; 30 for the small batch on a loaded machine).
	started() {
		jq -s 'map(select(.t == "pace" and .ev == "start"))[0].rate' \
		    "$1/logs/attempts.ndjson"
	}
	scenario lim '{kind: gcra, per_s: 40, burst: 0}'
	# 240 documents, a file: rfp-fetch reads 193 ahead (4 x 32 + 64,
	# and one) and counts the rest of the file's lines: a floor of 6.
	# The state is in real requests a second: ten times the logical.
	manifest /lim 240 lim >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(saved lim-)" -eq 240 ]
	r=$(started "$RUN")
	echo "file: $r"
	jq -n -e "$r > 50 and $r <= 60"
	# Through a pipe only what was read ahead is known: 4.8 at most.
	# The floor, from the state: the start may be what got through
	# before the first refusal, if more (50 in a loaded run of the
	# suite: five successes in the first tenth of a second).
	mkdir -p "$BATS_TEST_TMPDIR/r2/state" "$BATS_TEST_TMPDIR/r2/docs" "$BATS_TEST_TMPDIR/r2/logs"
	cat "$BATS_TEST_TMPDIR/m" | rfp-fetch -j 32 --run-dir "$BATS_TEST_TMPDIR/r2" >/dev/null
	r=$(started "$BATS_TEST_TMPDIR/r2")
	echo "pipe: $r; $(jq -c '{p_floor, n_ok}' "$BATS_TEST_TMPDIR/r2/state/rate/lim.json")"
	jq -n -e "$r > 20"
	jq -e '.p_floor >= 20 and .p_floor < 50' "$BATS_TEST_TMPDIR/r2/state/rate/lim.json"
	# 60 documents: the floor of 2 a second.
	manifest /lim 60 lim >"$BATS_TEST_TMPDIR/m60"
	run -0 pipeline.sh -q -j 32 --seed 1 --run-dir "$BATS_TEST_TMPDIR/r3" "$BATS_TEST_TMPDIR/m60"
	jq -e '.p_floor == 20' "$BATS_TEST_TMPDIR/r3/state/rate/lim.json"
}

@test "limiters: in a manifest grouped by endpoint, a small endpoint read first starts from the floor of 2, not from the large one's lines (#18)" {
	routes '{match: "/a/*", endpoint: a, limits: [{kind: gcra, per_s: 40, burst: 0}]}' \
	    '{match: "/b/*", endpoint: b}'
	{ manifest /a 60 a; manifest /b 400 b; } >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 460 ]
	jq -e '.p_floor == 20' "$RUN/state/rate/a.json"
}

# passed FROM TO AGE WHAT: of the requests in the attempt log, in the order
# they were sent, those from FROM to TO sent while one sent 5 ms to AGE
# seconds before them was still unanswered: how many of them went past
# one (WHAT .x), or how many they went past, each once (WHAT .r).
passed() {
	jq -s --argjson from "$1" --argjson to "$2" --argjson age "$3" '
		[.[] | select(.t == "req")] | sort_by(.sent) as $r |
		[range($from - 1; $to) as $i | $r[$i] as $x |
		 $r[:$i][] | select(.sent < $x.sent - 0.005 and
		     .sent > $x.sent - $age and .at > $x.sent + 0.002) |
		 {x: $i, r: .sent}] | map('"$4"') | unique | length' \
	    "$RUN/logs/attempts.ndjson"
}

# overlaps FROM TO: how many requests from FROM to TO went past one still
# unanswered, sent 5 ms or more before them.
overlaps() {
	passed "$1" "$2" 1e9 .x
}

# stragglers FROM TO AGE: how many requests, each counted once, those from
# FROM to TO went past while unanswered, 5 ms to AGE seconds after them.
stragglers() {
	passed "$1" "$2" "$3" .r
}

# two_speeds FAST SLOW N: the mock, /f/* answering in FAST ms and /s/* in
# SLOW (the portal's, ten times the real), and a run at -j 8 of N documents
# to one endpoint, p, every other one slow: every one saved.
two_speeds() {
	local i d
	routes "{match: \"/f/*\", endpoint: f, delay_ms: $1}" \
	    "{match: \"/s/*\", endpoint: s, delay_ms: $2}"
	for i in $(seq 1 "$3"); do
		d=f; [ $((i % 2)) -eq 0 ] && d=s
		printf '{"id":"d-%d","url":"%s/%s/doc-%d","endpoint":"p"}\n' "$i" "$MOCK_URL" "$d" "$i"
	done >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 8 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq "$3" ]
}

@test "limiters: a new endpoint's first 64 answers are sent for in rounds, the rest as places free (#18)" {
	# Half the documents answer in 40 ms, half in 50 (real): in a round,
	# the fast ones' places wait for the slow ones.  A place handed on as
	# soon as it was free let a burst allowance's end be refused as
	# many times as the burst's answers came back (a strict 1 r/s
	# refused 3 in its first 2 ms, a burst of 10 five).  Rounds for
	# ever would halve the throughput of a portal with varied answers.
	two_speeds 400 500 120
	echo "overlapping: first 64 $(overlaps 1 64), past $(stragglers 1 64 0.07) young stragglers; from the 80th $(overlaps 80 120)"
	# A round waits for no answer slower than twice its first and 5 ms
	# (85 ms or more here): on a loaded machine a 50 ms answer can be
	# heard later than that, and the next round go without it (2 overlaps,
	# in one CI run of four).  A place handed on as soon as a 40 ms
	# answer freed it passes a request sent less than 70 ms before: so did
	# 62 of the first 64 without rounds, past 43 to 45.  A round that
	# goes late in its sends (its process descheduled) and without a late
	# answer passes one straggler, or two.
	[ "$(stragglers 1 64 0.07)" -le 2 ]
	[ "$(overlaps 80 120)" -gt 10 ]
}

@test "limiters: a round waits for no answer far slower than its first (#18)" {
	# Half in 4 ms, half in 600: a round waits twice as long as its
	# first answer took, and 5 ms more.  Held for every answer, one
	# request that hung held every other document for 2 s.
	two_speeds 40 6000 40
	echo "overlapping: $(overlaps 1 40)"
	[ "$(overlaps 1 40)" -gt 10 ]
}

@test "limiters: no request goes before the pace has heard of the refusal answered before it (#18)" {
	# Eight endpoints, each a strict 1/s with no burst: the first round's
	# second request is refused.  Its body is filed before its news
	# reaches the pace; a round granted meanwhile was refused whole (3
	# refused in the first round trips, at one endpoint in three).  A
	# young endpoint's round waits for its answers' news (and an older
	# one for a refusal's: the next test).
	local r=() m=$BATS_TEST_TMPDIR/m e
	for e in 1 2 3 4 5 6 7 8; do
		r+=("{match: \"/g$e/*\", endpoint: g$e, limits: [{kind: gcra, per_s: 1, burst: 0}]}")
	done
	routes "${r[@]}"
	for e in 1 2 3 4 5 6 7 8; do
		manifest "/g$e" 6 "g$e"
	done >"$m"
	run -0 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 48 ]
	early=$(jq -s '[group_by(.ep)[] | map(select(.t == "pace"))[0].at as $p |
	    [.[] | select(.t == "req" and .status == 429 and .sent < $p)] |
	    length] | max' "$RUN/logs/attempts.ndjson")
	echo "refused before the pace heard, at the worst endpoint: $early"
	# 1; 2 where a first round went out before the second document was
	# read.
	[ "$early" -le 2 ]
}

@test "limiters: after its first 64 answers too, no request goes between a refusal's answer and the pace's news of it (#18)" {
	# A burst of 90, then a strict 1/s, for 100 documents at -j 8, for
	# each of four endpoints: the 429s come once the rounds are over.
	# Their bodies are filed before their news reaches the pace; a send
	# granted meanwhile went at the pace that was just refused.  The pace
	# comes down from the burst's rate, 30 to 90 times the limit, a cut a
	# refusal: the last documents of an endpoint are refused up to four
	# times (five with eight runs at once on two cores, and in one run
	# of 32 so the fifth time at its last attempt: dead, exhausted;
	# doc/limits.md).  Attempts enough for that here: the order is what
	# this test is about.  How many are refused is bounded all the same:
	# 12 to 67 of about 460 requests in all the runs measured.
	local r=() m=$BATS_TEST_TMPDIR/m e
	for e in 1 2 3 4; do
		r+=("{match: \"/b$e/*\", endpoint: b$e, limits: [{kind: gcra, per_s: 1, burst: 90}]}")
	done
	routes "${r[@]}"
	for e in 1 2 3 4; do
		manifest "/b$e" 100 "b$e"
	done >"$m"
	run -0 pipeline.sh -q -j 8 --seed 1 --max-attempts 10 --run-dir "$RUN" "$m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 400 ]
	between=$(jq -s '[group_by(.ep)[] |
	    (map(select(.t == "req" and .status == 429)) | min_by(.at).at) as $r |
	    (map(select(.t == "pace")) | .[0].at) as $p |
	    [.[] | select(.t == "req" and .sent > $r and .sent < $p)] | length] |
	    add' "$RUN/logs/attempts.ndjson")
	echo "sent between a first refusal's answer and the pace's news: $between"
	[ "$between" -eq 0 ]
	refused_at_most 100 '.status == 429'
}

@test "limiters: a window closed longer than its Retry-After says: every document saved, none refused to death (#18)" {
	# 30 in any 20 s, each refusal saying Retry-After: 1.  Once the
	# window is full, nothing gets through for up to 20 s, and the
	# documents' retries, each 1 s after its refusal, are refused one
	# after another: the pace, cut at each, spreads them until the
	# window turns.  Not counted (a rule tried for poison documents,
	# refused every time), they went at 15/s and 10 of 40 documents were
	# refused five times, dead.
	scenario g '{kind: fixed_window, limit: 30, window_s: 20, retry_after: 1}'
	all_saved g 40 8
	echo "refused $(logged '.action == "rate_limited"') of $(requests_for)"
	# 15 (the base, 3 runs); 50 of 80 with the retries not counted.
	[ "$(logged '.action == "rate_limited"')" -le 30 ]
}

@test "limiters: a burst spent, then 0.5/s answering 503 with Retry-After: 1: every document saved (#18)" {
	# The limit lets one through every 2 s and says to come back in 1:
	# most retries are refused, several one after another.  Counted,
	# they cut the pace to under the limit; not counted (the rule tried
	# for poison documents), 100 documents left 3 to 5 dead.
	scenario g '{kind: gcra, per_s: 0.5, burst: 90, status: 503, retry_after: 1}'
	all_saved g 100 8
	never_opened
	echo "refused $(logged '.action == "rate_limited"') of $(requests_for)"
}

@test "limiters: a delaying limiter's queue is not filled past its burst: answers slower each time hold the window (#18)" {
	# A GCRA that queues what is over its 3/s, up to a burst of 10, and
	# refuses past it (nginx limit_req without nodelay, 503).  Each
	# answer waits a third of a second longer than the one before, and
	# the window, grown by each, let 17 in flight: 6 of 66 refused at
	# once, before the pace had started.  Now 0 or 1 on an idle machine;
	# one busy with six suites at once drew 2.
	scenario d '{kind: gcra, per_s: 3, burst: 10, nodelay: false, status: 503, retry_after: 1}'
	all_saved d 60 32
	never_opened
	refused_at_most 3 '.action == "rate_limited"'
}

@test "limiters: a portal just slower than its first answers is no queue: the window opens to -j all the same (#18)" {
	# Ten small documents answered in 50 ms, then 150 in a second, no
	# limit.  Answers as slow at every count in flight are no queue's:
	# taken for one, the window was held at 5 for the whole run.
	local most
	routes '{match: "/x/small/*", endpoint: x, delay_ms: 50}' \
	    '{match: "/x/*", endpoint: x, delay_ms: 1000}'
	{ manifest /x/small 10 x; manifest /x 150 x | sed 's/"x-/"y-/'; } >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 160 ]
	most=$(jq -s '[.[] | select(.kind == "request") | .inflight] | max' "$MOCK_LOG")
	echo "most in flight: $most"
	[ "$most" -ge 24 ]
}

@test "limiters: a redirect to the same portal asks the pace as a send does: at a strict 20/s told, every hop gets through (#18)" {
	# /a/doc-N answers 302 to /a/file, both behind one strict 20/s.
	# Followed at once, every hop came on its 302's heels and was
	# refused: told, 0 of 30 saved, 120 of 240 requests refused; not
	# told, the pace held itself 32 s a send and saved none.  In real
	# time: a told rate collapsed to hundreds a second is no strict one.
	export RFPIPE_TIME_SCALE=1
	routes '{match: "/a/doc-*", endpoint: a, script: [302], location: "/a/file", limits: [{kind: gcra, per_s: 20}]}' \
	    '{match: "/a/file", endpoint: a}'
	told_a20 30
	echo "refused $(logged '.status == 429') of $(requests_for); state: $(jq -c '{takes}' "$RUN/state/rate/a.json")"
	# None on an idle machine; a loaded one delivers some sends bunched
	# (3 of 64 in a full run of the suite, once 9 of 75), as it does any
	# told pace's (doc/limits.md).  Every hop refused is 30 and more.
	[ "$(logged '.status == 429')" -le 15 ]
	# Each hop took a grant of the pace, as the first request did.
	jq -e --argjson n "$(requests_for)" '.takes == $n' "$RUN/state/rate/a.json"
}

@test "limiters: a redirect to the same portal, rate not told: all saved, few refused (#18)" {
	# 40 r/s in real time, not this file's 200: at 200 a machine busy
	# with two other processes bunched the arrivals, and the refusals
	# went from 5 to 8 to as many as 20 of 268; at 40, 5 to 7 of 247
	# either way.
	export RFPIPE_TIME_SCALE=0.5
	routes '{match: "/a/doc-*", endpoint: a, script: [302], location: "/a/file", limits: [{kind: gcra, per_s: 20}]}' \
	    '{match: "/a/file", endpoint: a}'
	manifest /a 120 a >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 60 "$ROOT/pipeline.sh" -q -j 32 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 120 ]
	[ ! -s "$RUN/dead.ndjson" ]
	never_opened
	echo "state: $(jq -c '{rate, cuts, n_ok}' "$RUN/state/rate/a.json")"
	refused_at_most 12 '.status == 429'
	# Each 302 is a success for the pace, as the answer after it is:
	# untold, the pace heard of half the requests that got through, and
	# ended at 119/s where the limit was 200 (at a time scale of 0.1).
	jq -e --argjson n "$(logged '.status == 200 or .status == 302')" '.n_ok == $n' "$RUN/state/rate/a.json"
}

@test "limiters: a redirect to another host (a download server) is not the portal's: it takes no grant of its pace (#18)" {
	export RFPIPE_TIME_SCALE=1
	routes '{match: "/a/doc-*", endpoint: a, script: [302], location: "http://localhost:{port}/cdn/file", limits: [{kind: gcra, per_s: 20}]}' \
	    '{match: "/cdn/*", endpoint: cdn}'
	told_a20 20
	# Each request to the portal took a grant, a retry's too (a loaded
	# machine delivers some sends of a told strict pace bunched, and one
	# was refused in a run of the suite at six files at once); each hop
	# to the download server took none.
	local portal refused
	portal=$(jq -s '[.[] | select(.kind == "request" and (.path | startswith("/a/")))] | length' "$MOCK_LOG")
	refused=$(logged '.status == 429')
	[ "$(requests_for)" -eq $((portal + 20)) ]
	[ "$refused" -le 3 ]
	# Every request to the portal past the 20 documents' is a refusal's
	# retry: none sent again after a hop.
	[ "$portal" -eq $((20 + refused)) ]
	jq -e --argjson n "$portal" '.takes == $n' "$RUN/state/rate/a.json"
}
