#!/usr/bin/env bats
# Submissions: never sent twice when the first one may have gone through.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	mock_start "$FIX/mock/submit.yaml"
}

submissions() {
	local route=$1 n=$2 i
	for i in $(seq 1 "$n"); do
		printf '{"id":"app-%d","url":"%s/grants/%s/app-%d","method":"POST","body":{"n":%d},"endpoint":"grants","cycle":"2026-A"}\n' \
		    "$i" "$MOCK_URL" "$route" "$i" "$i"
	done
}

@test "submit: a submission whose reply was dropped after commit ends ambiguous_submit after one request" {
	submissions nodedupe 3 >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 3 ]
	[ "$(jq -s '[.[] | select(.committed and .duplicate)] | length' "$MOCK_LOG")" -eq 0 ]
	[ "$(jq -s '[.[] | select(.dead_reason == "ambiguous_submit")] | length' "$RUN/dead.ndjson")" -eq 3 ]
}

@test "submit: every submission carries a stable Idempotency-Key derived from id and cycle" {
	submissions submit 2 >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	k1=$(jq -r 'select(.path == "/grants/submit/app-1") | .key' "$MOCK_LOG")
	[[ $k1 == rfp-* ]]
	rm -rf "$RUN"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -r 'select(.path == "/grants/submit/app-1") | .key' "$MOCK_LOG" | sort -u)" = "$k1" ]
	jq -s -e 'map(select(.id == "app-1"))[0].status == 200' "$RUN/results.ndjson"
}

@test "submit: an endpoint declared to honour Idempotency-Key is retried with the same key, committed once" {
	submissions drop 3 >"$BATS_TEST_TMPDIR/m"
	printf 'endpoints:\n  grants:\n    idempotency_keys: true\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.committed == true)] | length' "$MOCK_LOG")" -eq 3 ]
	[ "$(jq -s '[.[] | select(.kind == "request")] | group_by(.path) | map(map(.key) | unique | length) | max' "$MOCK_LOG")" -eq 1 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
}

@test "submit: a 503 before commit on an undeclared endpoint is not re-sent blindly" {
	submissions flaky 2 >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 2 ]
	[ "$(jq -s '[.[] | select(.dead_reason == "ambiguous_submit")] | length' "$RUN/dead.ndjson")" -eq 2 ]
}

@test "submit: a committed submission whose reply was dropped is confirmed through status_url and succeeds once" {
	for i in 1 2 3; do
		printf '{"id":"app-%d","url":"%s/grants/drop/app-%d","method":"POST","body":{"n":%d},"endpoint":"grants","idempotency_key":"key-%d","status_url":"%s/_status/{key}"}\n' \
		    "$i" "$MOCK_URL" "$i" "$i" "$i" "$MOCK_URL"
	done >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" --seed 1 "$BATS_TEST_TMPDIR/m"
	# One submission per document reached the server, and it was committed.
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 3 ]
	[ "$(jq -s '[.[] | select(.committed == true)] | length' "$MOCK_LOG")" -eq 3 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 3 ]
	jq -s -e 'all(.replayed == true and (.reply.tracking_number | startswith("TRK-")))' "$RUN/results.ndjson"
	jq -s -e '[.[] | select(.event == "success")] | length == 3' "$RUN/state/ledger.ndjson"
	# Each status question has its attempt line, marked as one.
	[ "$(grep -Ec '^\{"t":"req","at":[0-9.]+,"id":"app-[123]","ep":"grants","attempt":[0-9]+,"sent":[0-9.]+,"ms":[0-9]+,"status":200,"error":null,"confirm":true,"rate":[0-9.e-]+,"breaker":"closed"\}$' "$RUN/logs/attempts.ndjson")" -eq 3 ]
}

@test "submit: a status_url with a mistyped placeholder is refused before anything is sent" {
	# "{kye}" went out as it stood: the portal, asked about no submission,
	# said none was committed, and the submission was sent again.
	for u in '_status/{kye}' '_status/{key}/{key}' '_status/{key'; do
		printf '{"id":"app-%s","url":"%s/grants/drop/app-1","method":"POST","body":{},"endpoint":"grants","idempotency_key":"key-1","status_url":"%s/%s"}\n' \
		    "${#u}" "$MOCK_URL" "$MOCK_URL" "$u"
	done >"$BATS_TEST_TMPDIR/m"
	run -2 --separate-stderr rfpipe --check "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *'line 1: field "status_url": "{kye}" is not {key}'* ]]
	[[ $stderr == *'line 2: field "status_url": {key} more than once'* ]]
	[[ $stderr == *'line 3: field "status_url": "{key" is not {key}'* ]]
	run --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 0 ]
	[ "$(jq -s '[.[] | select(.dead_reason == "bad_input")] | length' "$RUN/dead.ndjson")" -eq 3 ]
}

@test "submit: a key the ledger shows as succeeded is never sent again" {
	submissions submit 2 >"$BATS_TEST_TMPDIR/m"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	# Lose the results (as a crash before filing would), keep the ledger.
	: >"$RUN/results.ndjson"
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 2 ]
	[ "$(wc -l <"$RUN/results.ndjson")" -eq 2 ]
	jq -s -e 'all(.replayed == true)' "$RUN/results.ndjson"
}

@test "submit: a torn last ledger line is reported with its line number and its key is ambiguous, not unsent" {
	for i in 1 2; do
		printf '{"id":"app-%d","url":"%s/grants/submit/app-%d","method":"POST","body":{},"endpoint":"grants","idempotency_key":"key-%d"}\n' \
		    "$i" "$MOCK_URL" "$i" "$i"
	done >"$BATS_TEST_TMPDIR/m"
	mkdir -p "$RUN/state"
	# app-2's intent, torn mid-write by a crash.
	printf '{"key":"key-0","id":"x","event":"rejected","t":1}\n{"key":"key-2","id":"app-2","ev' \
	    >"$RUN/state/ledger.ndjson"
	run -3 --separate-stderr pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *'state/ledger.ndjson:2: torn entry (a crash while writing); key "key-2" is treated as ambiguous'* ]]
	jq -s -e 'map(select(.id == "app-2"))[0].dead_reason == "ambiguous_submit"' "$RUN/dead.ndjson"
	[ "$(requests_for /grants/submit/app-2)" -eq 0 ]
	[ "$(requests_for /grants/submit/app-1)" -eq 1 ]
	# The next writer started on a line of its own: every line parses now but the torn one.
	[ "$(grep -c . "$RUN/state/ledger.ndjson")" -eq 4 ]
	[ "$(sed -n 3p "$RUN/state/ledger.ndjson" | jq -r .event)" = intent ]
}

# cut_on_the_wire EXTRA: two submissions to a portal that commits at once
# and answers only after 50 s, cut by a 5 s deadline while on the wire
# ({origin} in EXTRA is the mock's).
cut_on_the_wire() {
	mock_stop
	export RFPIPE_TIME_SCALE=0.1
	printf 'routes:\n  - {match: "/slow/*", endpoint: slow, submit: true, dedupe: true, script: [slow], slow_ms: 50000}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	for i in 1 2; do
		printf '{"id":"app-%d","url":"%s/slow/app-%d","method":"POST","body":{"n":%d},"endpoint":"slow"%s}\n' \
		    "$i" "$MOCK_URL" "$i" "$i" "${1:+,$1}"
	done | sed "s|{origin}|$MOCK_URL|g" >"$BATS_TEST_TMPDIR/m"
	run timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" --deadline +5s "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.committed)] | length' "$MOCK_LOG")" -eq 2 ]
}

@test "submit: a submission cut by the deadline on the wire is ambiguous_submit, and a re-run in a new run directory does not send it again" {
	cut_on_the_wire
	[ "$(jq -s 'map(select(.dead_reason == "ambiguous_submit")) | length' "$RUN/dead.ndjson")" -eq 2 ]
	# The README's re-run of what is worth another night, in a new directory.
	jq -c 'select(.dead_reason == "deadline_cut" or .dead_reason == "ambiguous_submit")' "$RUN/dead.ndjson" >"$BATS_TEST_TMPDIR/again"
	run timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$BATS_TEST_TMPDIR/run2" "$BATS_TEST_TMPDIR/again"
	[ "$(jq -s '[.[] | select(.committed)] | length' "$MOCK_LOG")" -eq 2 ]
	[ "$(jq -s 'map(select(.dead_reason == "ambiguous_submit")) | length' "$BATS_TEST_TMPDIR/run2/dead.ndjson")" -eq 2 ]
}

@test "submit: a submission cut on the wire, re-run from its dead letter in a new run directory, is confirmed through status_url, not sent again" {
	cut_on_the_wire '"status_url":"{origin}/_status/{key}"'
	jq -c 'select(.fate == "dead")' "$RUN/dead.ndjson" >"$BATS_TEST_TMPDIR/again"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/again")" -eq 2 ]
	run timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$BATS_TEST_TMPDIR/run2" "$BATS_TEST_TMPDIR/again"
	[ "$(jq -s '[.[] | select(.committed)] | length' "$MOCK_LOG")" -eq 2 ]
	[ "$(jq -s '[.[] | select(.kind == "request" and .method == "POST")] | length' "$MOCK_LOG")" -eq 2 ]
	[ "$(wc -l <"$BATS_TEST_TMPDIR/run2/results.ndjson")" -eq 2 ]
}

@test "submit: runs in different run directories that share a ledger: never send a key twice; retiring the ledger ends it" {
	submissions submit 3 >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 "$BATS_TEST_TMPDIR/cycle"
	printf 'ledger: %s/cycle/2026-A.ndjson\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ -s "$BATS_TEST_TMPDIR/cycle/2026-A.ndjson" ]
	[ ! -e "$RUN/state/ledger.ndjson" ]
	# The next night, a new run directory, the same manifest.
	run -0 pipeline.sh -q --run-dir "$BATS_TEST_TMPDIR/run2" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request" and .method == "POST")] | length' "$MOCK_LOG")" -eq 3 ]
	jq -s -e 'length == 3 and all(.replayed == true and .status == 200)' "$BATS_TEST_TMPDIR/run2/results.ndjson"
	# The cycle over, its ledger moved aside: a third night sends again.
	mv "$BATS_TEST_TMPDIR/cycle/2026-A.ndjson" "$BATS_TEST_TMPDIR/cycle/2026-A.done"
	run -0 pipeline.sh -q --run-dir "$BATS_TEST_TMPDIR/run3" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s '[.[] | select(.kind == "request" and .method == "POST")] | length' "$MOCK_LOG")" -eq 6 ]
}

@test "submit: the same id in a new cycle is a new submission, sent and committed under a new key" {
	submissions submit 2 >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 "$BATS_TEST_TMPDIR/cycle"
	printf 'ledger: %s/cycle/shared.ndjson\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	sed 's/"cycle":"2026-A"/"cycle":"2026-B"/' "$BATS_TEST_TMPDIR/m" >"$BATS_TEST_TMPDIR/m2"
	run -0 pipeline.sh -q --run-dir "$BATS_TEST_TMPDIR/run2" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m2"
	# Two keys per id, each committed once, none a duplicate.
	[ "$(jq -s '[.[] | select(.committed)] | length' "$MOCK_LOG")" -eq 4 ]
	[ "$(jq -rs '[.[] | select(.path == "/grants/submit/app-1") | .key] | unique | length' "$MOCK_LOG")" -eq 2 ]
	[ "$(jq -s '[.[] | select(.duplicate)] | length' "$MOCK_LOG")" -eq 0 ]
}

@test "submit: a dead letter the ledger left in doubt says sent, so a new run directory without that ledger does not send it" {
	printf '{"id":"app-1","url":"%s/grants/submit/app-1","method":"POST","body":{},"endpoint":"grants","idempotency_key":"key-1"}\n' \
	    "$MOCK_URL" >"$BATS_TEST_TMPDIR/m"
	mkdir -p "$RUN/state"
	# An earlier run sent it and died before the answer.
	printf '{"key":"key-1","id":"app-1","event":"intent","t":1}\n' >"$RUN/state/ledger.ndjson"
	run -3 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	jq -s -e 'length == 1 and .[0].dead_reason == "ambiguous_submit" and .[0].sent == true' "$RUN/dead.ndjson"
	# The README's re-run, in a new directory with a ledger of its own.
	jq -c 'select(.dead_reason == "ambiguous_submit")' "$RUN/dead.ndjson" >"$BATS_TEST_TMPDIR/again"
	run -3 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$BATS_TEST_TMPDIR/run2" "$BATS_TEST_TMPDIR/again"
	[ "$(requests_for /grants/submit/app-1)" -eq 0 ]
	jq -s -e 'length == 1 and .[0].dead_reason == "ambiguous_submit"' "$BATS_TEST_TMPDIR/run2/dead.ndjson"
}

@test "submit: --retry-dead where the ledger was deleted or emptied sends no ambiguous submission again: its dead letter says it left" {
	submissions nodedupe 3 >"$BATS_TEST_TMPDIR/m"
	run -3 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -s 'map(select(.dead_reason == "ambiguous_submit" and .sent)) | length' "$RUN/dead.ndjson")" -eq 3 ]
	for gone in deleted emptied; do
		if [ "$gone" = deleted ]; then
			rm "$RUN/state/ledger.ndjson"
		else
			: >"$RUN/state/ledger.ndjson"
		fi
		run -3 pipeline.sh -q --retry-dead --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
		[ "$(jq -s 'map(select(.kind == "request")) | length' "$MOCK_LOG")" -eq 3 ] ||
		    fail "ledger $gone: sent again"
		tail -n 3 "$RUN/dead.ndjson" | jq -s -e 'length == 3 and all(.dead_reason == "ambiguous_submit" and .sent)'
	done
	[ "$(jq -s 'map(select(.committed)) | length' "$MOCK_LOG")" -eq 3 ]
}

@test "submit: a submission without a body whose reply is lost is sent once: out whole is sent (#19)" {
	printf 'routes:\n  - {match: "/n/*", endpoint: n, submit: true, script: [drop, 200]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_stop
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	for i in 1 2; do
		printf '{"id":"del-%d","url":"%s/n/del-%d","method":"DELETE","endpoint":"n","cycle":"2026-A"}\n' "$i" "$MOCK_URL" "$i"
		printf '{"id":"post-%d","url":"%s/n/post-%d","method":"POST","endpoint":"n","cycle":"2026-A"}\n' "$i" "$MOCK_URL" "$i"
	done >"$BATS_TEST_TMPDIR/m"
	run -3 timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for)" -eq 4 ]
	jq -s -e '[.[] | select(.committed and .duplicate)] | length == 0' "$MOCK_LOG"
	jq -s -e 'length == 4 and all(.dead_reason == "ambiguous_submit" and .sent == true)' "$RUN/dead.ndjson"
}

@test "submit: runs on different run directories sharing a ledger at the same time send each key once (#19)" {
	printf 'routes:\n  - {match: "/n/*", endpoint: n, submit: true}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_stop
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	mkdir -m 700 "$BATS_TEST_TMPDIR/cycle"
	printf 'ledger: %s/cycle/2026-A.ndjson\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/c.yaml"
	for i in $(seq 1 150); do
		printf '{"id":"app-%d","url":"%s/n/app-%d","method":"POST","body":{"n":%d},"endpoint":"n","cycle":"2026-A"}\n' "$i" "$MOCK_URL" "$i" "$i"
	done >"$BATS_TEST_TMPDIR/m"
	pids=()
	for r in 1 2 3 4; do
		timeout 120 "$ROOT/pipeline.sh" -q --run-dir "$BATS_TEST_TMPDIR/run$r" \
		    --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m" 2>/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || :
	done
	# Each key sent by one run; the others found it sent, never resent.
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -eq 150 ]
	jq -s -e '[.[] | select(.committed and .duplicate)] | length == 0' "$MOCK_LOG"
	[ "$(jq -s '[.[] | select(.event == "intent")] | group_by(.key) | map(select(length > 1)) | length' "$BATS_TEST_TMPDIR/cycle/2026-A.ndjson")" -eq 0 ]
}

@test "submit: a ledger: naming a file that is not a ledger (the manifest) is refused by --check and by the run, exit 2; the file untouched, nothing sent" {
	submissions submit 1 >"$BATS_TEST_TMPDIR/m"
	cp "$BATS_TEST_TMPDIR/m" "$BATS_TEST_TMPDIR/m.orig"
	printf 'ledger: %s/m\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/c.yaml"
	run -2 pipeline.sh --check --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	assert_output --partial "ledger $BATS_TEST_TMPDIR/m: not a ledger"
	run -2 --separate-stderr pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == *"key \"ledger\": ledger $BATS_TEST_TMPDIR/m: not a ledger (its first line is not an entry)"* ]]
	cmp "$BATS_TEST_TMPDIR/m" "$BATS_TEST_TMPDIR/m.orig"
	[ "$(requests_for)" -eq 0 ]
}

@test "submit: a ledger others can write, or in a directory others can write, is refused before anything is sent: a forged success replays nothing" {
	submissions submit 1 >"$BATS_TEST_TMPDIR/m"
	# The key, learnt from a run of its own.
	run -0 pipeline.sh -q --run-dir "$BATS_TEST_TMPDIR/probe" "$BATS_TEST_TMPDIR/m"
	key=$(jq -r 'select(.event == "success") | .key' "$BATS_TEST_TMPDIR/probe/state/ledger.ndjson")
	[ -n "$key" ]
	mkdir "$BATS_TEST_TMPDIR/shared"
	chmod 1777 "$BATS_TEST_TMPDIR/shared"
	L=$BATS_TEST_TMPDIR/shared/2026-A.ndjson
	printf '{"key":"%s","id":"app-1","event":"success","t":1,"pid":1,"attempt":1,"status":200,"reply":{"tracking_number":"FORGED"}}\n' "$key" >"$L"
	chmod 666 "$L"
	printf 'ledger: %s\n' "$L" >"$BATS_TEST_TMPDIR/c.yaml"
	run -2 pipeline.sh --check --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	assert_output --partial "ledger $L: writable by others (mode 0666); chmod go-w it"
	run -2 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	assert_output --partial "ledger $L: writable by others (mode 0666)"
	[ ! -e "$RUN/results.ndjson" ]
	[ "$(requests_for)" -eq 1 ]
	# Ours and 0600 in a directory others may write that is not sticky:
	# refused too (another's file could be put in its place).
	D=$BATS_TEST_TMPDIR/open
	mkdir "$D"
	chmod 0777 "$D"
	printf 'ledger: %s/2026-A.ndjson\n' "$D" >"$BATS_TEST_TMPDIR/c2.yaml"
	run -2 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c2.yaml" "$BATS_TEST_TMPDIR/m"
	assert_output --partial "ledger $D/2026-A.ndjson: directory $D writable by others (mode 0777); chmod go-w it"
	[ ! -e "$D/2026-A.ndjson" ]
	# A new ledger of ours in the sticky directory: used, the submission sent.
	rm "$L"
	run -0 pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for)" -eq 2 ]
	[ "$(stat -c %a "$L")" = 600 ]
	jq -s -e 'length == 1 and .[0].replayed != true' "$RUN/results.ndjson"
}

@test "submit: a ledger whose first line is torn is still a ledger; a JSON document written out is not" {
	submissions submit 1 >"$BATS_TEST_TMPDIR/m"
	mkdir -m 700 "$BATS_TEST_TMPDIR/cycle"
	L=$BATS_TEST_TMPDIR/cycle/2026-A.ndjson
	printf 'ledger: %s\n' "$L" >"$BATS_TEST_TMPDIR/c.yaml"
	# A crash cut the first entry short; a later writer went on after it.
	printf '{"ke\n{"key":"other","id":"x","event":"success","t":1}\n' >"$L"
	run -0 --separate-stderr pipeline.sh -q --run-dir "$RUN" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for)" -eq 1 ]
	printf '{\n  "ledger": "no"\n}\n' >"$L"
	run -2 --separate-stderr pipeline.sh -q --run-dir "$BATS_TEST_TMPDIR/run2" --config "$BATS_TEST_TMPDIR/c.yaml" "$BATS_TEST_TMPDIR/m"
	[[ $stderr == *"ledger $L: not a ledger"* ]]
	[ "$(wc -l <"$L")" -eq 3 ]
}

@test "submit: a submission answered as rfp-fetch stops goes out with its answer, and the ledger has it: a re-run files it, sending nothing" {
	# The body thread is held renaming the answer into docs/ (strace
	# delays that one call 3 s), and rfp-fetch is stopped then.  It
	# dropped what that thread held: the ledger kept only the intent,
	# and the re-run filed the submission ambiguous_submit.
	need_strace
	submissions submit 1 >"$BATS_TEST_TMPDIR/m"
	mkdir -p "$RUN"
	# LeakSanitizer cannot run under a tracer.
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	    strace -f -o /dev/null -P "$RUN/docs/.part" -e trace=renameat \
	    -e inject=renameat:delay_enter=3000000 \
	    rfp-fetch --run-dir "$RUN" <"$BATS_TEST_TMPDIR/m" \
	    >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	local tracer=$! fetch=
	POLL_STEP=0.01 poll 10 nonempty_dir "$RUN/docs/.part" || :
	fetch=$(pgrep -P "$tracer" -x rfp-fetch)
	[ -n "$fetch" ]
	kill -TERM "$fetch"
	timeout 30 tail --pid="$tracer" -f /dev/null
	wait "$tracer" || i=$?
	cat "$BATS_TEST_TMPDIR/err"
	[ "$i" -eq 1 ]
	grep -q "stopped by signal 15" "$BATS_TEST_TMPDIR/err"
	jq -s -e 'length == 1 and (.[0] | .id == "app-1" and .status == 200 and
	    .body_path == "docs/app-1")' "$BATS_TEST_TMPDIR/out"
	[ -f "$RUN/docs/app-1" ]
	jq -s -e 'map(select(.id == "app-1") | .event) == ["intent", "success"]' \
	    "$RUN/state/ledger.ndjson"
	# The record never reached a sink here: the re-run files it from the
	# ledger, and the portal hears it once.
	run -0 pipeline.sh -q --run-dir "$RUN" "$BATS_TEST_TMPDIR/m"
	[ "$(requests_for /grants/submit/app-1)" -eq 1 ]
	jq -s -e 'length == 1 and .[0].replayed == true' "$RUN/results.ndjson"
}
