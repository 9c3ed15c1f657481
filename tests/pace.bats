#!/usr/bin/env bats
# Ceilings, pacing and the breaker across processes and signals, asserted
# from the mock's log.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
}

# most_within W PICK FILE: the most times (seconds), one picked from each
# of FILE's records by the jq filter PICK, in any W seconds from one of
# them on.
most_within() {
	jq -s --argjson w "$1" "[.[] | $2] | sort as \$t |
	    [range(0; \$t | length) as \$i |
	    [\$t[] | select(. >= \$t[\$i] and . < \$t[\$i] + \$w)] | length] | max" "$3"
}

@test "pace: with a rate of 5/s configured, no two-second window holds more than 10 + burst requests" {
	export RFPIPE_TIME_SCALE=0.1
	printf 'routes:\n  - {match: "/p/*", endpoint: p}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /p 40 p >"$BATS_TEST_TMPDIR/m"
	printf 'endpoints:\n  p: {rate: 5, burst: 2}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q -j 16 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	# Every document sent once, each once answered.
	[ "$(requests_for)" -eq 40 ]
	# As they reached the portal, give or take the kernel's delivery:
	# sent several at once (handles held until a timer, say), 40 come in
	# a window.
	[ "$(most_within 0.2 'select(.kind == "request") | .t' "$MOCK_LOG")" -le 16 ]
	# Windows of 2 scaled seconds (0.2 s) starting at each send, as
	# rfp-fetch sent them (the attempt log's "sent"): the mock's arrival
	# times are the kernel's too, and a machine busy with six suites at
	# once delivered more than 12 in one such window.
	[ "$(jq -s '[.[] | select(.t == "req")] | length' "$RUN/logs/attempts.ndjson")" -eq 40 ]
	[ "$(most_within 0.2 'select(.t == "req") | .sent' "$RUN/logs/attempts.ndjson")" -le 12 ]
}

@test "pace: at a told rate, this process's second send waits for the first one's answer, but not for long" {
	# The portal may read a new connection's first request late: the
	# second, written on time, reached a strict limit early.  Portal a
	# answers in 0.2 s: its second request comes after that answer.
	# Portal b answers in 8 s: its second waits 0.5 s, not 8.  At a
	# quarter time the hold ends 0.125 s after the first grant, 0.075 s
	# after a's answer: a machine that stalled the first send 0.03 s
	# between grant and wire, at a tenth time, ended the hold before it.
	export RFPIPE_TIME_SCALE=0.25
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF'
	routes:
	  - {match: "/a/*", endpoint: a, delay_ms: 200}
	  - {match: "/b/*", endpoint: b, delay_ms: 8000}
	EOF
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /a 3 a; manifest /b 3 b; } >"$BATS_TEST_TMPDIR/m"
	printf 'endpoints:\n  a: {rate: 20, burst: 0}\n  b: {rate: 20, burst: 0}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q -j 8 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 6 ]
	# The first two requests of each portal: when each came, and when
	# the first was answered (the mock logs, then waits the delay).
	run -0 jq -s -r '[.[] | select(.kind == "request")] | group_by(.endpoint)[] |
	    sort_by(.t) | "\(.[0].endpoint) \(.[1].t - .[0].t) \(.[0].t_answer - .[0].t)"' "$MOCK_LOG"
	echo "$output"
	# a: 0.2 s scaled is 0.05 s after the answer was decided.  Without
	# the hold the second would come an interval (0.0125 s) after the
	# first; the interval after the answer is timing, not asserted here.
	awk '$1 == "a" { exit !($2 >= $3 + 0.045 && $2 < 0.5) }' <<<"$output"
	# b: its answer 2 s off, the hold 0.125 s from the first send's grant.
	awk '$1 == "b" { exit !($2 < 1.0) }' <<<"$output"
}

@test "pace: after a SIGTERM mid-run, a re-run on the same run directory reaches the full ceiling again" {
	printf 'routes:\n  - {match: "/slow/*", endpoint: slow, delay_ms: 5000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	export RFPIPE_TIME_SCALE=0.05
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /slow 12 slow >"$BATS_TEST_TMPDIR/m"
	printf 'timeout: 1h\nendpoints:\n  slow: {concurrency: 4}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m" &
	pid=$!
	# Wait until four requests are on the wire, then stop the fetcher.
	POLL_STEP=0.01 poll 5 requests_at_least 4 2>/dev/null || :
	pkill -TERM -f -- "rfp-fetch --run-dir=$RUN" || :
	wait "$pid" || :
	# A fresh server: the killed run's requests no longer count as in flight.
	mock_stop
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	sed -i "s|127.0.0.1:[0-9]*|127.0.0.1:$MOCK_PORT|" "$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 12 ]
	[ "$(jq -s '[.[] | select(.kind == "request") | .inflight] | max' "$MOCK_LOG")" -eq 4 ]
}

@test "pace: a shared rate of 1e-300 written by hand is read as the pace's floor in logical time, not held 20 real seconds a send" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 ep >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 -p "$RUN/state/rate"
	chmod 700 "$RUN" "$RUN/state"
	# Another host's, used a moment ago: a fact, not a hint.
	now=$(date +%s.%N)
	printf '{"paced": 1, "rate": 1e-300, "win": 4, "seen": %s, "users": {"1@elsewhere.invalid": %s}}\n' \
	    "$now" "$now" >"$RUN/state/rate/ep.json"
	# At 1 % time the floor (one send every 20 logical s) is 0.2 real s.
	run -0 timeout 10 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
	[ "$(requests_for)" -eq 3 ]
}

@test "breaker: two pipelines on one run directory never have two probes in flight at once" {
	export RFPIPE_TIME_SCALE=0.05
	# The outage counted from the first request: a slow start under load
	# must not eat it.
	printf 'epoch: first_request\nroutes:\n  - {match: "/d/*", endpoint: d, delay_ms: 200, outage: {start_s: 0, end_s: 40, status: 503}}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /d 20 d >"$BATS_TEST_TMPDIR/m1"
	manifest /d 20 d | sed 's/"id":"d-/"id":"e-/' >"$BATS_TEST_TMPDIR/m2"
	printf 'max_attempts: 20\nbudget: 1000\nbreaker: {failures: 3, cooldown: 2s}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m1" &
	p1=$!
	pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m2" || :
	wait "$p1" || :
	[ "$(cat "$RUN/results.ndjson" | wc -l)" -eq 40 ]
	# From the first half-open moment to the end of the outage, every request
	# was a probe: never two in flight at once.  (Requests let through just
	# before the first opening may still arrive after it; none can arrive
	# after a whole cooldown.)
	probing=$(jq '[.transitions[] | select(.to == "half_open")][0].t' "$RUN/state/breaker/d.json")
	jq -s -e --argjson o "$probing" '[.[] | select(.kind == "request" and .t > $o and .action == "outage") | .inflight] | max <= 1' "$MOCK_LOG"
	jq -e '.openings >= 1 and .state == "closed"' "$RUN/state/breaker/d.json"
}

@test "breaker: a probe whose process was killed with SIGKILL frees the half-open slot when its lease runs out" {
	mkdir -p "$RUN/state/breaker"
	now=$(date +%s)
	# Half-open, with a probe owned by a process that no longer exists.
	sleep 1000 & dead=$!
	kill -KILL "$dead"; wait "$dead" 2>/dev/null || :
	jq -n --argjson t "$now" --argjson pid "$dead" '{endpoint:"ep",state:"half_open",fails:5,window:"11111",
	    opened_at:($t-100),cooldown:1,probe_pid:$pid,probe_until:($t+3600),openings:1,saved:0,transitions:[]}' \
	    >"$RUN/state/breaker/ep.json"
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 ep >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
	jq -e '.state == "closed"' "$RUN/state/breaker/ep.json"
}

@test "breaker: an open breaker left by a run waits no longer than the cooldown configured now, nor from a time to come" {
	# Left open for an hour (cooldown 1h), then the cooldown cut to 2s:
	# the stored hour was waited.  And one opened in the future (a clock
	# ahead) waited until then and an hour more.
	mkdir -p "$RUN/state/breaker"
	now=$(date +%s)
	printf 'breaker: {failures: 3, cooldown: 2s}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 ep >"$BATS_TEST_TMPDIR/m"
	for at in "$now" $((now + 86400)); do
		jq -n --argjson t "$at" '{endpoint:"ep",state:"open",fails:3,window:"111",
		    opened_at:$t,cooldown:3600,probe_pid:0,probe_until:0,openings:1,saved:0,transitions:[]}' \
		    >"$RUN/state/breaker/ep.json"
		rm -f "$RUN/results.ndjson"
		run -0 timeout 30 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
		[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
		jq -e '.state == "closed" and .cooldown <= 2' "$RUN/state/breaker/ep.json"
	done
}

@test "breaker: a corrupt breaker state file is a clear error, never a silent reset" {
	mkdir -p "$RUN/state/breaker"
	echo '{"state":"sideways"}' >"$RUN/state/breaker/ep.json"
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 ep >"$BATS_TEST_TMPDIR/m"
	run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$stderr" = "rfp-backoff: $RUN/state/breaker/ep.json: corrupt state file (field \"state\"); move it aside to start afresh" ]
	[ "$(cat "$RUN/state/breaker/ep.json")" = '{"state":"sideways"}' ]
	[ "$(requests_for)" -eq 0 ]
}

@test "breaker: poison documents left alone at the end of a batch do not keep the breaker opening" {
	# One at a time, the good ones first: the five bad first attempts fail
	# in a row and open the breaker, and then only their retries are left.
	# (500, not 503: a 503 right after successes is throttling, which
	# never opens the breaker; tests/limiters.bats.)
	printf 'routes:\n  - {match: "/p/bad/*", endpoint: p, script: [500]}\n  - {match: "/p/*", endpoint: p}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	{ manifest /p/ok 20 p | sed 's/"id":"p-/"id":"q-/'; manifest /p/bad 5 p; } >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q -j 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 20 ]
	[ "$(jq -s '[.[] | select(.dead_reason == "exhausted")] | length' "$RUN/dead.ndjson")" -eq 5 ]
	# The five first attempts open it once; their retries never again.
	jq -e '.openings == 1' "$RUN/state/breaker/p.json"
}

@test "pace: every answer reaches the shared pace by the end of the run, the successes it let wait included" {
	export RFPIPE_TIME_SCALE=1	# a one-second window, in real seconds
	printf 'routes:\n  - {match: "/f/*", endpoint: f}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /f 200 f >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 8 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 200 ]
	# n_ok counts every success the pace was told of.
	jq -e '.n_ok == 200' "$RUN/state/rate/f.json"
}

@test "pace: a window that slow successes grew holds the round it grew in, not the round after" {
	# Answers in 1 s: sends go out in rounds, each when the round before
	# is answered, and the window grows with the successes of each.  The
	# first six rounds are 2, 4, 7, 11 or 12, 19 or 20 and 32 (2, 3, 5, 8,
	# 14 and 20 when a round's answers come in the order that grows it
	# least).  Held to the window of its last grant (an endpoint its
	# window held asks for none), each round went out at the window of
	# the round before: 30 to 41 in six.
	export RFPIPE_TIME_SCALE=0.1
	printf 'routes:\n  - {match: "/s/*", endpoint: s, delay_ms: 10000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /s 80 s >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q -j 32 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 80 ]
	# Rounds by arrival, 1 s apart: a send up to 0.7 s late is still
	# in its own.
	rounds=$(jq -s -r '[.[] | select(.kind == "request") | .t] | sort |
	    .[0] as $t0 | map(. - $t0 + 0.3 | floor) | group_by(.) |
	    map(length) | map(tostring) | join(" ")' "$MOCK_LOG")
	echo "requests a round: $rounds"
	[ "$(echo "$rounds" | awk '{ print $1 + $2 + $3 + $4 + $5 + $6 }')" -ge 48 ]
}

@test "pace: what a run learned and nobody used for a minute is a hint: the next run against a portal that lifted its limit is not paced" {
	# 2/s at 0.05: 40 real sends a second.  At the suites' 0.01 (200 a
	# second), a busy machine bunched them, and the refusals the cuts
	# did not cure let the pace go as noise: nothing learned to test.
	export RFPIPE_TIME_SCALE=0.05
	printf 'routes:\n  - {match: "/g/*", endpoint: g, limits: [{kind: gcra, per_s: 2, burst: 0}]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /g 40 g >"$BATS_TEST_TMPDIR/m1"
	run -0 pipeline.sh -q -j 8 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m1"
	jq -e '.paced == 1' "$RUN/state/rate/g.json"
	mock_stop
	# A minute of the portal's time later, its limit gone.
	sleep 3.5
	printf 'routes:\n  - {match: "/g/*", endpoint: g}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /g 40 g | sed 's/"id":"g-/"id":"h-/' >"$BATS_TEST_TMPDIR/m2"
	run -0 pipeline.sh -q -j 8 --seed 1 --run-dir "$RUN" "$BATS_TEST_TMPDIR/m2"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 80 ]
	jq -e '.paced == 0 and .hint > 0' "$RUN/state/rate/g.json"
}

# retry_place KEYS: 80 documents at a configured 10/s, doc-1 answered
# first as its route's KEYS say, then 200; the whole manifest is read
# ahead (4 x 4 + 64 >= 80) and takes 8 s.  Sets n to the place of
# doc-1's second request among the 81 the portal saw (0: the first).
retry_place() {
	export RFPIPE_TIME_SCALE=0.05
	printf 'routes:\n  - {match: "/r/doc-1", endpoint: r, %s}\n  - {match: "/r/*", endpoint: r}\n' "$1" >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /r 80 r >"$BATS_TEST_TMPDIR/m"
	printf 'endpoints:\n  r: {rate: 10, burst: 1}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q -j 4 --seed 1 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 80 ]
	n=$(jq -s '[.[] | select(.kind == "request")] | map(.path) | indices("/r/doc-1") | .[1]' "$MOCK_LOG")
	echo "the retry was request $((n + 1)) of 81"
	# Shown when a test fails: what the portal and rfp-fetch saw of it.
	jq -c 'select(.kind == "request" and .path == "/r/doc-1") | {t, status, action, conn_seq}' "$MOCK_LOG"
	grep '"id":"r-1"' "$RUN/logs/attempts.ndjson" || true
}

@test "pace: a retry that is due goes before the manifest's records read ahead of it" {
	# Refused once with Retry-After 1: due after 1 to 1.5 s, some 15
	# sends; at the end (81) had it waited behind the manifest.
	retry_place 'script: [429, 200], retry_after: 1'
	[ "$n" -le 40 ]
}

@test "pace: a retry no Retry-After timed keeps its place behind the manifest's records" {
	# A reset gives no time (an outage, perhaps, whose failed attempts
	# are to be spread over the documents).
	retry_place 'script: [reset, 200]'
	[ "$n" -ge 70 ]
}

@test "breaker: with due retries ahead of fresh records in the queue, the half-open probe is still a fresh document" {
	export RFPIPE_TIME_SCALE=0.05
	# Its 503s say Retry-After: 1, so the retries go first.
	printf 'epoch: first_request\nroutes:\n  - {match: "/o/*", endpoint: o, outage: {start_s: 0, end_s: 6, status: 503, retry_after: 1}}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /o 80 o >"$BATS_TEST_TMPDIR/m"
	printf 'endpoints:\n  o: {rate: 5, burst: 1}\nbreaker: {failures: 3, cooldown: 4s}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q -j 4 --seed 1 --max-attempts 10 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 80 ]
	# The probes' attempts: 1, a fresh document's, each time (a retry as
	# the probe is what the fresh-first rule is there to prevent).
	probes=$(jq -r 'select(.t == "req" and .breaker == "half_open") | .attempt' "$RUN/logs/attempts.ndjson" | sort | uniq -c)
	echo "$probes"
	[ -n "$probes" ]
	[ "$(jq -r 'select(.t == "req" and .breaker == "half_open" and .attempt != 1) | .id' "$RUN/logs/attempts.ndjson" | wc -l)" -eq 0 ]
}

@test "pace: at a told rate, another process's first send also waits for the answer to the first send of all" {
	# Two pipelines on one run directory share the pace.  The first
	# send of all opens a connection the portal may read late; the next,
	# the other process's first, must not go before its answer (in
	# 80 ms, under the hold's 0.15 s at 20/s) either.  In real time: a
	# told rate collapsed to hundreds a second is no strict one.  The
	# hold ends 0.15 s after the first grant whatever comes, so the
	# first send's own way to the portal is margin (70 ms; 60 ms on a
	# busy machine failed a 45 ms margin).  Without the hold the second
	# comes at the pace, 50 ms after: the test asks for 75.
	export RFPIPE_TIME_SCALE=1
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF2'
	routes:
	  - {match: "/a/*", endpoint: a, delay_ms: 80}
	EOF2
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	manifest /a 3 a >"$BATS_TEST_TMPDIR/m1"
	manifest /a 3 a | sed 's/"id":"a-/"id":"b-/' >"$BATS_TEST_TMPDIR/m2"
	printf 'endpoints:\n  a: {rate: 20, burst: 0}\n' >"$BATS_TEST_TMPDIR/c.yaml"
	pipeline.sh -q -j 4 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m1" &
	p1=$!
	run -0 pipeline.sh -q -j 4 --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m2"
	wait "$p1"
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 6 ]
	run -0 jq -s -r '[.[] | select(.kind == "request")] | sort_by(.t) |
	    "\(.[1].t - .[0].t) \(.[0].t_answer - .[0].t)"' "$MOCK_LOG"
	echo "$output"
	awk '{ exit !($1 >= $2 + 0.075) }' <<<"$output"
}
