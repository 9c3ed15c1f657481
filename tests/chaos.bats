#!/usr/bin/env bats
# Chaos: a seeded mix of transient, permanent, poison and slow answers,
# submissions committed and then dropped with no reply, a stage killed with
# SIGKILL at a random moment, and a resume.  CHAOS_N documents (500 in
# make check, 5,000 in make chaos), a fifth of them submissions.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	N=${CHAOS_N:-500}
	export RFPIPE_TIME_SCALE=${CHAOS_SCALE:-0.05}
	mock_start "$FIX/pipeline/chaos.yaml"
	awk -v n="$N" -v u="$MOCK_URL" 'BEGIN {
	    for (i = 1; i <= n; i++)
	        if (i % 5 == 0)
	            printf "{\"id\":\"s-%d\",\"url\":\"%s/s/%d\",\"method\":\"POST\",\"body\":{\"i\":%d},\"endpoint\":\"submit\"}\n", i, u, i, i
	        else
	            printf "{\"id\":\"c-%d\",\"url\":\"%s/c/%d\",\"endpoint\":\"chaos\"}\n", i, u, i
	}' >"$BATS_TEST_TMPDIR/m"
}

teardown() {
	mock_stop
}

@test "chaos: a seeded storm with a SIGKILL and a resume keeps every invariant" {
	local seed=${CHAOS_SEED:-7} stages=(fetch classify backoff sink) stage victim p pid
	stage=${stages[$((seed % 4))]}
	pipeline.sh -q --seed "$seed" --config "$FIX/pipeline/chaos-rfpipe.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m" &
	pid=$!
	# Kill once a seeded share (10-60 %) of the documents has been filed.
	want=$(awk -v s="$seed" -v n="$N" 'BEGIN { srand(s); printf "%d", n * (0.1 + rand() * 0.5) }')
	for i in $(seq 1 3000); do
		[ "$(cat "$RUN/results.ndjson" "$RUN/dead.ndjson" 2>/dev/null | wc -l)" -ge "$want" ] && break
		sleep 0.01
	done
	victim=
	for p in $(descendants "$pid"); do
		[ "$(ps -o comm= -p "$p" 2>/dev/null)" = "rfp-$stage" ] && victim=$p
	done
	[ -n "$victim" ]
	kill -KILL "$victim"
	wait "$pid" || :
	run pipeline.sh -q --seed "$seed" --config "$FIX/pipeline/chaos-rfpipe.yaml" \
	    --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]

	# 1. Every id exactly once across results and dead.
	cat "$RUN/results.ndjson" "$RUN/dead.ndjson" | jq -r .id | sort >"$BATS_TEST_TMPDIR/ids"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/ids")" -eq "$N" ]
	[ -z "$(uniq -d "$BATS_TEST_TMPDIR/ids")" ]

	# 2. Each dead reason matches the mock's script for that document: a
	# document answered 404 is permanent; one answered only 503 (poison) ran
	# out of attempts or budget; a fetch whose script ends in 200 is never dead
	# unless the kill cut it mid-flight (then it was re-fetched, so it is not).
	jq -s '[.[] | select(.kind == "request")] | group_by(.path) |
	    map({key: .[0].path, value: (map(.status) | unique)}) | from_entries' \
	    "$MOCK_LOG" >"$BATS_TEST_TMPDIR/seen.json"
	jq -s -e --slurpfile seen "$BATS_TEST_TMPDIR/seen.json" '
	    map(. as $d | ($d.url | sub("^http://[^/]*"; "")) as $p | $seen[0][$p] as $st |
	        if ($st | index(404)) then $d.dead_reason == "permanent"
	        elif $d.endpoint == "submit" then ($d.dead_reason == "ambiguous_submit")
	        elif $st == [503] then ($d.dead_reason == "exhausted" or $d.dead_reason == "budget_spent")
	        else false end) | all' "$RUN/dead.ndjson"
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
	# keeps counting a killed run's connections for a while.
	d=$(awk -v s="$RFPIPE_TIME_SCALE" 'BEGIN { printf "%.4f", 0.02 * s }')
	jq -s -e --argjson d "$d" '[.[] | select(.kind == "request")] |
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
