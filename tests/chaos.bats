#!/usr/bin/env bats
# Chaos: a seeded mix of transient, permanent, poison and slow answers,
# submissions committed and then dropped with no reply, a stage killed with
# SIGKILL at a random moment, and a resume.  CHAOS_N documents (500 in
# make check, 5,000 in make chaos), a fifth of them submissions.  Then
# what the operator does next (#19): the dead letters run again in a new
# run directory that shares the ledger, and a second pipeline of the same
# manifest on the same run directory, one of the two killed.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	N=${CHAOS_N:-500}
	export RFPIPE_TIME_SCALE=${CHAOS_SCALE:-0.05}
}

# chaos_start SCENARIO: the mock portal playing SCENARIO (of
# fixtures/pipeline/), and the manifest of N documents, a fifth of them
# submissions, in $BATS_TEST_TMPDIR/m.
chaos_start() {
	mock_start "$FIX/pipeline/$@"
	awk -v n="$N" -v u="$MOCK_URL" 'BEGIN {
	    for (i = 1; i <= n; i++)
	        if (i % 5 == 0)
	            printf "{\"id\":\"s-%d\",\"url\":\"%s/s/%d\",\"method\":\"POST\",\"body\":{\"i\":%d},\"endpoint\":\"submit\"}\n", i, u, i, i
	        else
	            printf "{\"id\":\"c-%d\",\"url\":\"%s/c/%d\",\"endpoint\":\"chaos\"}\n", i, u, i
	}' >"$BATS_TEST_TMPDIR/m"
}

# share SEED SALT LO SPAN: a seeded number of documents, N * (LO + SPAN * u)
# with u uniform in [0, 1) from SEED and SALT.
share() {
	awk -v s="$1" -v t="$2" -v lo="$3" -v w="$4" -v n="$N" \
	    'BEGIN { srand(s * 7919 + t); printf "%d", n * (lo + rand() * w) }'
}

# slow_posts: the mock's log lines of the "slow" submissions committed
# so far.
slow_posts() {
	grep '"method":"POST".*"action":"slow"' "$MOCK_LOG"
}

# What poll waits for: N slow submissions or more; N pipelines or more
# owning the run directory.
slow_posts_reach() {
	[ "$(slow_posts | wc -l)" -ge "$1" ]
}
owners_reach() {
	[ "$(ls "$RUN/state/owners" 2>/dev/null | wc -l)" -ge "$1" ]
}

# stage_of PID NAME: the pid of rfp-NAME under PID, if it still runs.
stage_of() {
	local p
	for p in $(descendants "$1"); do
		[ "$(ps -o comm= -p "$p" 2>/dev/null)" = "rfp-$2" ] && echo "$p"
	done
	return 0
}

# refetched: the ids of the documents (GET) of the mock's log on stdin
# that were fetched again: asked for after the mock had answered them for
# good (200 or 404), or more than max_attempts (5) times, the poison ones
# (each answer a 500, which libcurl never sends again on its own, as it
# may after a reset).
refetched() {
	jq -rs '[.[] | select(.kind == "request" and .method == "GET")] |
	    group_by(.path)[] | select(
	        (map(.status == 200 or .status == 404) | index(true)) as $f |
	        ($f != null and length > $f + 1) or length > 5) |
	    .[0].path | sub("^/c/"; "c-")' | sort
}

# commits: the most times one key was committed, by the mock's log.
commits() {
	jq -s '[.[] | select(.committed == true) | .key] | group_by(.) | map(length) | max // 0' "$MOCK_LOG"
}

@test "chaos: a seeded storm with a SIGKILL and a resume keeps every invariant" {
	local seed=${CHAOS_SEED:-7} stages=(fetch classify backoff sink) stage pid
	stage=${stages[$((seed % 4))]}
	# Kill once the portal has had requests for a seeded share (10-60 %)
	# of the documents; it holds the rest meanwhile.
	want=$(awk -v s="$seed" -v n="$N" 'BEGIN { srand(s); printf "%d", n * (0.1 + rand() * 0.5) }')
	chaos_start chaos.yaml --hold-at "$want"
	pipeline.sh -q --seed "$seed" --config "$FIX/pipeline/chaos-rfpipe.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" &
	pid=$!
	kill_stage_at "$pid" "$stage" 30
	wait "$pid" || :
	run pipeline.sh -q --seed "$seed" --config "$FIX/pipeline/chaos-rfpipe.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]

	# 1. Every id exactly once across results and dead.
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/ids")" -eq "$N" ]

	# 2. Each dead reason matches the mock's script for that document: a
	# document answered 404 is permanent; one answered only 503 (poison) ran
	# out of attempts or budget; a fetch whose script ends in 200 is never dead
	# unless the kill cut it mid-flight (then it was re-fetched, so it is not).
	jq -s '[.[] | select(.kind == "request")] | group_by(.path) |
	    map({key: .[0].path, value: (map(.status) | unique)}) | from_entries' \
	    "$MOCK_LOG" >"$BATS_TEST_TMPDIR/seen.json"
	# The dead letters that break it, printed: none.
	run -0 jq -c --slurpfile seen "$BATS_TEST_TMPDIR/seen.json" '
	    . as $d | ($d.url | sub("^http://[^/]*"; "")) as $p | $seen[0][$p] as $st |
	        select(if ($st | index(404)) then $d.dead_reason == "permanent"
	        elif $d.endpoint == "submit" then ($d.dead_reason == "ambiguous_submit")
	        elif $st == [503] then ($d.dead_reason == "exhausted" or $d.dead_reason == "budget_spent")
	        else false end | not) | {id, dead_reason, dead_detail, statuses: $st}' "$RUN/dead.ndjson"
	[ -z "$output" ] || fail "dead letters the portal's answers do not account for: $output"
	jq -s -e 'all(.fate == "done")' "$RUN/results.ndjson"

	# 3. No submission key committed twice, though some were committed and
	# dropped with no reply (#24); each went on a connection of its own,
	# which libcurl never silently sends again.
	[ "$(jq -s '[.[] | select(.committed == true) | .key] | group_by(.) | map(length) | max // 0' "$MOCK_LOG")" -le 1 ]
	jq -s -e 'any(.[]; .action == "drop")' "$MOCK_LOG"
	jq -s -e '[.[] | select(.method == "POST")] | all(.conn_seq == 1)' "$MOCK_LOG"

	# 4. The ceiling was never exceeded.  A request held its slot at least
	# from its arrival to its answer (plus the route's 20 ms delay), so count
	# overlaps of those spans: the mock's own "inflight" lags under load, and
	# keeps counting a killed run's connections for a while.  Those the mock
	# held for the kill had timed out at the client long before their answer.
	d=$(awk -v s="$RFPIPE_TIME_SCALE" 'BEGIN { printf "%.4f", 0.02 * s }')
	jq -s -e --argjson d "$d" '[.[] | select(.kind == "request" and (.held | not))] |
	    group_by(.endpoint) | map({key: .[0].endpoint, value: (. as $r |
	        $r | map(.t as $t | [$r[] | select(.t <= $t and $t < .t_answer + $d)] |
	        length) | max)}) | from_entries | .chaos <= 8 and .submit <= 4' "$MOCK_LOG"

	# For the record: what the storm left, and what the server saw.
	printf '# chaos %s docs: %s; requests %s, of them 429 %s\n' "$N" \
	    "$(jq -c '{succeeded: .totals.succeeded, dead: (.totals.dead_by_reason | with_entries(select(.value > 0)))}' "$RUN/summary.json")" \
	    "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" \
	    "$(jq -s '[.[] | select(.status == 429)] | length' "$MOCK_LOG")" >&3
	# The summary of the resumed run reconciles.
	jq -e '.reconciled == true and .totals.succeeded + .totals.dead == '"$N" "$RUN/summary.json"
}

@test "chaos: the dead letters re-run in a new run directory that shares the ledger: no key committed twice, run 1 untouched" {
	local seed=${CHAOS_SEED:-7} run2=$BATS_TEST_TMPDIR/run2 pid victim k n1
	chaos_start chaos-again.yaml
	mkdir -m 700 "$BATS_TEST_TMPDIR/cycle"
	{ cat "$FIX/pipeline/chaos-again-rfpipe.yaml"
	  printf 'ledger: %s/cycle/2026-A.ndjson\n' "$BATS_TEST_TMPDIR"; } >"$BATS_TEST_TMPDIR/c.yaml"
	timeout 120 "$ROOT/pipeline.sh" -q --seed "$seed" --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" &
	pid=$!
	# Once the k-th "slow" submission is committed and not yet answered
	# (it is held 1 s), kill rfp-fetch, the ledger's writer: its key is
	# left in doubt.  k is seeded, from 1 to half the slow ones the
	# mix holds (a tenth of the submissions: 1 to 5 of 500 documents).
	# (Counted in submissions, not in documents filed: the submissions,
	# fewer and on their own slots, had all been answered before 60 % of
	# the documents were filed on a loaded machine, and nothing was left
	# to kill.)
	k=$(($(share "$seed" 1 0 0.01) + 1))
	POLL_STEP=0.01 poll 30 slow_posts_reach "$k" ||
	    fail "fewer than $k slow submissions committed in 30 s"
	victim=$(stage_of "$pid" fetch)
	[ -n "$victim" ]
	kill -KILL "$victim"
	# The slow submissions committed by then, as ids.
	slow_posts | jq -r '.path | sub("^/s/"; "s-")' | sort >"$BATS_TEST_TMPDIR/slow"
	wait "$pid" || :
	run timeout 120 "$ROOT/pipeline.sh" -q --seed "$seed" --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	[ ! -e "$RUN/state/ledger.ndjson" ]

	# The README's re-run of the dead letters worth another night, the
	# next night, in a new run directory, with the same config.
	jq -c 'select(.dead_reason == "exhausted" or .dead_reason == "ambiguous_submit")' \
	    "$RUN/dead.ndjson" >"$BATS_TEST_TMPDIR/again"
	jq -r 'select(.dead_reason == "ambiguous_submit") | .id' "$RUN/dead.ndjson" |
	    sort >"$BATS_TEST_TMPDIR/ambiguous"
	[ -s "$BATS_TEST_TMPDIR/ambiguous" ]
	# One of them at least was in doubt when the kill came: a slow
	# submission is answered in 1 s, long before the 600 s timeout, and
	# only a kill leaves one without its answer (the drops are in doubt
	# whatever the kill).
	[ -n "$(comm -12 "$BATS_TEST_TMPDIR/slow" "$BATS_TEST_TMPDIR/ambiguous")" ] ||
	    fail "no slow submission committed before the kill ($(paste -sd' ' "$BATS_TEST_TMPDIR/slow")) is ambiguous"
	(cd "$RUN" && find . -type f -exec sha256sum {} + | sort) >"$BATS_TEST_TMPDIR/run1.sums"
	n1=$(wc -l <"$MOCK_LOG")
	run timeout 120 "$ROOT/pipeline.sh" -q --seed "$seed" --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$run2" "$BATS_TEST_TMPDIR/again"
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]

	# 1. No key committed twice, across both run directories.
	[ "$(commits)" -le 1 ]
	# 2. No submission run 1 left ambiguous is sent again: run 2 asks
	# (these have no status_url, so it cannot) or leaves it ambiguous.
	[ "$(tail -n +"$((n1 + 1))" "$MOCK_LOG" | jq -s --rawfile amb "$BATS_TEST_TMPDIR/ambiguous" '
	    ($amb | split("\n") | map(select(. != "") | sub("^s-"; "/s/"))) as $p |
	    [.[] | select(.kind == "request" and .method == "POST" and
	        (.path as $x | $p | index($x)))] | length')" -eq 0 ]
	jq -s -e --rawfile amb "$BATS_TEST_TMPDIR/ambiguous" '
	    ($amb | split("\n") | map(select(. != ""))) as $a |
	    [.[] | select(.id as $i | $a | index($i))] |
	    length == ($a | length) and all(
	        (.fate == "dead" and .dead_reason == "ambiguous_submit") or
	        (.fate == "done" and .replayed == true))' \
	    "$run2/results.ndjson" "$run2/dead.ndjson"
	# 3. Every id of run 2 stands once in run 2's files.
	filed_once "$run2" "$BATS_TEST_TMPDIR/again"
	jq -e '.reconciled == true' "$run2/summary.json"
	# 4. Run 1's directory is as run 1 left it.
	(cd "$RUN" && find . -type f -exec sha256sum {} + | sort) | diff "$BATS_TEST_TMPDIR/run1.sums" -

	printf '# run 1: %s, of them cut by the kill %s; run 2: %s\n' \
	    "$(jq -c '.totals.dead_by_reason | with_entries(select(.value > 0))' "$RUN/summary.json")" \
	    "$(jq -s '[.[] | select(.dead_reason == "ambiguous_submit" and .sent != true)] | length' "$RUN/dead.ndjson")" \
	    "$(jq -c '{succeeded: .totals.succeeded, dead: (.totals.dead_by_reason | with_entries(select(.value > 0)))}' "$run2/summary.json")" >&3
}

@test "chaos: two pipelines of one manifest on one run directory, one killed, then a resume: no id fetched twice but the dead one's" {
	local seed=${CHAOS_SEED:-7} stages=(fetch classify backoff sink) stage a b k p pids shs victim fetch at held h1 h2 id
	stage=${stages[$(((seed / 2) % 4))]}
	# The portal holds its requests twice: once it has had requests for a
	# seeded share (0-20 %) of the documents, and for a further share
	# (5-25 %).
	h1=$(share "$seed" 2 0 0.2)
	h2=$((h1 + $(share "$seed" 3 0.05 0.2)))
	chaos_start chaos-again.yaml --hold-at "$h1" --hold-at "$h2"
	timeout 120 "$ROOT/pipeline.sh" -q --seed "$seed" --config "$FIX/pipeline/chaos-again-rfpipe.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" 2>"$BATS_TEST_TMPDIR/e1" &
	a=$!
	# The second cron job starts in the first hold,
	mock_held 1 30
	timeout 120 "$ROOT/pipeline.sh" -q --seed "$seed" --config "$FIX/pipeline/chaos-again-rfpipe.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" 2>"$BATS_TEST_TMPDIR/e2" &
	b=$!
	pids=("$a" "$b")
	# which ends once both own the directory; in the second, a seeded
	# stage of one of them is killed.
	POLL_STEP=0.01 poll 30 owners_reach 2
	mock_release
	# rfpipe (timeout's child) names its pipeline after its pid.
	shs=("$(pgrep -P "$a" | head -n 1)" "$(pgrep -P "$b" | head -n 1)")
	mock_held 2 30
	# The seeded one, unless it has no request held and has done its
	# share (under load the second can finish first): then the other,
	# which has.
	for k in $((seed % 2)) $((1 - seed % 2)); do
		p=${pids[$k]}
		fetch=$(stage_of "$p" fetch)
		victim=$(stage_of "$p" "$stage")
		[ -n "$fetch" ] && [ -n "$victim" ] && break
	done
	[ -n "$fetch" ] && [ -n "$victim" ] || {
		echo "# no rfp-fetch and rfp-$stage of one pipeline; filed $(cat "$RUN/results.ndjson" "$RUN/dead.ndjson" | wc -l) of $N"
		ps -o pid,ppid,stat,etimes,args -e --forest | grep -v ' \[' >&2
		cat "$BATS_TEST_TMPDIR/e1" "$BATS_TEST_TMPDIR/e2" >&2
		false
	}
	# What the mock logged before this line, it logged while both lived.
	at=$(wc -l <"$MOCK_LOG")
	# One with no request held may have ended a moment ago, its share
	# done: then nothing died.
	kill -KILL "$victim" 2>/dev/null || :
	mock_release
	wait "$p" || :
	# Who claimed what, its claims named after its pipeline, read once it
	# is dead: read before the kill, the claims it made in between were
	# missed, and their ids, fetched again, failed the test.  (A
	# pipeline that finds no owner alive empties the file: the other
	# one still lives.)
	jq -r --arg p "${shs[$k]}." 'select(.owner | startswith($p)) | .id' \
	    "$RUN/state/claims.ndjson" | sort -u >"$BATS_TEST_TMPDIR/victims"
	# The next cron job, a resume, starts at once: the other pipeline may
	# still hold ids, the dead one's claims are nobody's.
	run timeout 120 "$ROOT/pipeline.sh" -q --seed "$seed" --config "$FIX/pipeline/chaos-again-rfpipe.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# 5: it left ids to the other, still running.
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ] || [ "$status" -eq 5 ]
	held=$output
	wait "${pids[$((1 - k))]}" || :

	# 1. Every id exactly once across results and dead.
	filed_once "$RUN" "$BATS_TEST_TMPDIR/m"
	# 2. While both pipelines lived no document was fetched twice; over
	# the whole story, only ids the killed pipeline had claimed were.
	[ -z "$(head -n "$at" "$MOCK_LOG" | refetched)" ]
	refetched <"$MOCK_LOG" >"$BATS_TEST_TMPDIR/refetched"
	comm -23 "$BATS_TEST_TMPDIR/refetched" "$BATS_TEST_TMPDIR/victims" >"$BATS_TEST_TMPDIR/extra"
	# Shown if it is not empty: each such id's requests and claims.
	while read -r id; do
		echo "# $id, not the killed one's ($stage of pipeline $((k + 1)), ${shs[$k]}):"
		jq -c --arg p "/c/${id#c-}" 'select(.path == $p) | {t, status, held, action}' "$MOCK_LOG"
		grep "\"$id\"" "$RUN/state/claims.ndjson"
	done <"$BATS_TEST_TMPDIR/extra"
	[ ! -s "$BATS_TEST_TMPDIR/extra" ]
	# 3. No key committed twice.
	[ "$(commits)" -le 1 ]
	# 4. The summary of the last to end speaks for the whole directory.
	jq -e '.reconciled == true and .totals.succeeded + .totals.dead == '"$N" "$RUN/summary.json"
	# They met: one skipped ids the other held, and said so.
	cat "$BATS_TEST_TMPDIR/e1" "$BATS_TEST_TMPDIR/e2" |
	    grep -q 'is being processed by another pipeline on this run directory'

	printf '# killed rfp-%s of pipeline %d; it had claimed %d ids, %d fetched again; the resume left %d to the other; %s\n' \
	    "$stage" "$((k + 1))" "$(wc -l <"$BATS_TEST_TMPDIR/victims")" \
	    "$(wc -l <"$BATS_TEST_TMPDIR/refetched")" \
	    "$(grep -o '[0-9]* ids held by other pipelines' <<<"$held" | cut -d' ' -f1)" \
	    "$(jq -c '{succeeded: .totals.succeeded, dead: (.totals.dead_by_reason | with_entries(select(.value > 0)))}' "$RUN/summary.json")" >&3
}
