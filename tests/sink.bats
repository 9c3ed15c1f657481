#!/usr/bin/env bats
# rfp-sink: filing by fate, summary.json, reconciliation, exit codes.

load test_helper

F=$FIX/sink

setup() {
	RD=$BATS_TEST_TMPDIR/run
}

# in_file FILE ID EXPR: the one record of FILE with .id == ID satisfies EXPR.
in_file() {
	local rec
	rec=$(jq -c --arg id "$2" 'select(.id == $id)' "$1")
	if [ -z "$rec" ] || [ "$(wc -l <<<"$rec")" -ne 1 ] ||
	    ! jq -e "$3" <<<"$rec" >/dev/null; then
		printf '%s: record %s: %s\ndoes not satisfy: %s\n' "$1" "$2" "${rec:-(none)}" "$3" >&2
		return 1
	fi
}

# ids FILE: the ids in FILE, sorted, on one line.
ids() {
	jq -r '.id // "null"' "$1" | sort | tr '\n' ' '
}

@test "sink: done records go to results.ndjson, dead to dead.ndjson, retry to stdout" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/fates.ndjson"
	assert_success
	[ "$(ids "$RD/results.ndjson")" = "D-1 D-2 D-3 " ]
	[ "$(ids "$RD/dead.ndjson")" = "X-1 X-2 " ]
	[ "${#lines[@]}" -eq 2 ]
	check R-1 '.fate == "retry" and .not_before == 1796018400.25'
	check R-2 '.fate == "retry" and .attempt == 2'
}

@test "sink: a control character in the run directory's name is not written to the terminal in the table" {
	RD="$BATS_TEST_TMPDIR/run$(printf '\033')[31m"
	run --separate-stderr rfp-sink --run-dir "$RD" <"$F/fates.ndjson"
	assert_success
	[[ $stderr == *"rfpipe: summary of $BATS_TEST_TMPDIR/run?[31m ("* ]]
	[ "$(LC_ALL=C grep -c $'\033' <<<"$stderr")" -eq 0 ]
}

@test "sink: filed records are unchanged, unknown fields included" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/fates.ndjson"
	assert_success
	diff <(jq -S -c 'select(.fate == "done")' "$F/fates.ndjson") <(jq -S -c . "$RD/results.ndjson")
	diff <(jq -S -c 'select(.fate == "dead")' "$F/fates.ndjson") <(jq -S -c . "$RD/dead.ndjson")
	diff <(jq -S -c 'select(.fate == "retry")' "$F/fates.ndjson") <(jq -S -c . <<<"$output")
}

@test "sink: summary.json counts match the files" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/fates.ndjson"
	assert_success
	local ok dead
	ok=$(jq -s length "$RD/results.ndjson")
	dead=$(jq -s length "$RD/dead.ndjson")
	jq -e --argjson ok "$ok" --argjson dead "$dead" '
	    .totals.succeeded == $ok and .totals.dead == $dead and
	    .run.succeeded == 3 and .run.dead == 2 and .run.retries == 2 and
	    .run.dead_by_reason.permanent == 1 and
	    .run.dead_by_reason.exhausted == 1 and
	    .run.dead_by_reason.bad_input == 0 and
	    .run.endpoints.nih.succeeded == 2 and .run.endpoints.nih.dead == 1 and
	    .run.endpoints.grants.succeeded == 1 and
	    .run.attempts == 7 and .run.http_429 == 1 and
	    .reconciled == null and .admitted == null' "$RD/summary.json"
}

@test "sink: a second run appends and summary totals cover the whole run directory" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/fates.ndjson"
	jq -c '.id += "-b"' "$F/done.ndjson" >"$BATS_TEST_TMPDIR/more"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/more"
	assert_success
	[ "$(jq -s length "$RD/results.ndjson")" -eq 5 ]
	jq -e '.run.succeeded == 2 and .run.dead == 0 and .totals.succeeded == 5 and .totals.dead == 2' "$RD/summary.json"
}

@test "sink: --admitted-from with a matching count exits 0 and reconciled is true" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" --admitted-from "$F/report-5.json" <"$F/fates.ndjson"
	assert_success
	jq -e '.reconciled == true and .admitted == 5' "$RD/summary.json"
	[[ "$stderr" != *RECONCILIATION* ]]
}

@test "sink: --admitted-from with a mismatching count exits 1 with RECONCILIATION FAILED" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" --admitted-from "$F/report-7.json" <"$F/fates.ndjson"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *'rfp-sink: RECONCILIATION FAILED: admitted 7, filed 5 (succeeded 3 + dead 2)'* ]]
	jq -e '.reconciled == false and .admitted == 7' "$RD/summary.json"
	# The records are filed all the same.
	[ "$(jq -s length "$RD/results.ndjson")" -eq 3 ]
}

@test "sink: an --admitted-from report without an admitted count exits 1" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" --admitted-from "$F/report-none.json" <"$F/fates.ndjson"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"rfp-sink: $F/report-none.json: no admitted count"* ]]
}

@test "sink: a missing --admitted-from file exits 1 naming it" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/nope.json" <"$F/done.ndjson"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"rfp-sink: $BATS_TEST_TMPDIR/nope.json: no admitted count"* ]]
}

@test "sink: --fate-status exits 0 when every record succeeded" {
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" <"$F/done.ndjson"
	[ "$status" -eq 0 ]
}

@test "sink: --fate-status exits 3 when records were dead-lettered" {
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" <"$F/fates.ndjson"
	[ "$status" -eq 3 ]
}

@test "sink: --fate-status exits 4 when the deadline cut some" {
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" <"$F/cut.ndjson"
	[ "$status" -eq 4 ]
	jq -e '.run.dead_by_reason.deadline_cut == 1' "$RD/summary.json"
}

@test "sink: --fate-status: a stray line's letter is no dead document: 5 while its document is pending, 0 once all are filed, 3 only for a dead one" {
	echo '{"admitted":2}' >"$BATS_TEST_TMPDIR/report.json"
	printf '%s\n' '{"id":"a","fate":"done"}' 'garbage' >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/report.json" <"$BATS_TEST_TMPDIR/in"
	[ "$status" -eq 5 ]
	[[ $stderr == *"pending: run again to take it up"* ]]
	jq -e '.pending == 1 and .reconciled and .totals.dead == 0 and .totals.stray_lines == 1' "$RD/summary.json"
	# The resume files the pending one; the stray's letter stays.
	echo '{"admitted":1}' >"$BATS_TEST_TMPDIR/report.json"
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/report.json" <<<'{"id":"b","fate":"done"}'
	[ "$status" -eq 0 ]
	echo '{"admitted":0}' >"$BATS_TEST_TMPDIR/report.json"
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/report.json" </dev/null
	[ "$status" -eq 0 ]
	jq -e '.totals.succeeded == 2 and .totals.dead == 0 and .totals.stray_lines == 1' "$RD/summary.json"
	echo '{"admitted":1}' >"$BATS_TEST_TMPDIR/report.json"
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/report.json" <<<'{"id":"c","fate":"dead","dead_reason":"permanent"}'
	[ "$status" -eq 3 ]
}

@test "sink: without --fate-status dead records still exit 0" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/cut.ndjson"
	assert_success
}

@test "sink: records with no fate or an unknown fate are dead bad_input with their line" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/bad-lines.ndjson"
	assert_success
	in_file "$RD/dead.ndjson" nofate-1 '.fate == "dead" and .dead_reason == "bad_input" and .line == 2'
	in_file "$RD/dead.ndjson" odd-1 '.fate == "dead" and .dead_reason == "bad_input" and .line == 3'
	in_file "$RD/results.ndjson" ok-1 '.fate == "done"'
	in_file "$RD/dead.ndjson" ok-2 '.dead_reason == "permanent"'
	[[ "$stderr" == *'rfp-sink: line 2: missing field "fate"'* ]]
	[[ "$stderr" == *'rfp-sink: line 3: field "fate": unknown fate "maybe"'* ]]
}

@test "sink: a malformed line is dead-lettered bad_input in dead.ndjson, not on stdout" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/bad-lines.ndjson"
	assert_success
	[ "$output" = "" ]
	[ "$(jq -s '[.[] | select(.line == 4 and .dead_reason == "bad_input")] | length' "$RD/dead.ndjson")" -eq 1 ]
	[ "$(jq -s '[.[] | select(.line == 5 and .dead_reason == "bad_input")] | length' "$RD/dead.ndjson")" -eq 1 ]
	[[ "$stderr" == *'rfp-sink: line 4: malformed JSON'* ]]
	[[ "$stderr" == *'rfp-sink: line 5: record is not a JSON object'* ]]
}

@test "sink: every bad line is counted, so the run reconciles: a stray one (no id) apart, its document pending" {
	echo '{"admitted":6}' >"$BATS_TEST_TMPDIR/report.json"
	run --separate-stderr rfp-sink -q --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/report.json" <"$F/bad-lines.ndjson"
	assert_success
	# Lines 4 and 5 are not records: each may have been a document's.
	jq -e '.reconciled == true and .run.dead_by_reason.bad_input == 2 and .run.dead == 3
	    and .run.stray_lines == 2 and .pending == 2 and .totals.stray_lines == 2' "$RD/summary.json"
	[[ $stderr == *'rfp-sink: 2 stray lines between the stages (no id; kept in dead.ndjson): 2 documents admitted and not filed, pending: run again to take them up'* ]]
	# More missing than there were strays is a mismatch.
	echo '{"admitted":7}' >"$BATS_TEST_TMPDIR/report.json"
	run --separate-stderr rfp-sink -q --run-dir "$RD.2" --admitted-from "$BATS_TEST_TMPDIR/report.json" <"$F/bad-lines.ndjson"
	assert_failure 1
	jq -e '.reconciled == false' "$RD.2/summary.json"
}

@test "sink: a line over 1 MiB and 64 KiB is dead bad_input and the batch goes on" {
	local in=$BATS_TEST_TMPDIR/in
	{
		echo '{"id":"before","fate":"done"}'
		huge_record '"id":"huge","fate":"done",'
		echo '{"id":"after","fate":"done"}'
	} >"$in"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$in"
	assert_success
	[ "$(ids "$RD/results.ndjson")" = "after before " ]
	[[ "$stderr" == *'rfp-sink: line 2: line longer than 1114112 bytes'* ]]
	[ "$(jq -s '[.[] | select(.line == 2 and .dead_reason == "bad_input")] | length' "$RD/dead.ndjson")" -eq 1 ]
}

@test "sink: results, dead and summary files are mode 0600 whatever the umask" {
	umask 000
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/fates.ndjson"
	assert_success
	[ "$(stat -c %a "$RD/results.ndjson")" = 600 ]
	[ "$(stat -c %a "$RD/dead.ndjson")" = 600 ]
	[ "$(stat -c %a "$RD/summary.json")" = 600 ]
	[ "$(stat -c %a "$RD")" = 700 ]
}

@test "sink: the summary table goes to stderr unless -q" {
	run --separate-stderr rfp-sink --run-dir "$RD" --admitted-from "$F/report-5.json" <"$F/fates.ndjson"
	assert_success
	[[ "$stderr" == *'succeeded'*3* ]]
	[[ "$stderr" == *'check: admitted 5 = succeeded 3 + dead 2: ok'* ]]
	run --separate-stderr rfp-sink -q --run-dir "$BATS_TEST_TMPDIR/run2" <"$F/fates.ndjson"
	[ "$stderr" = "" ]
}

@test "sink: the summary table is whole with 300 endpoints: every row, the check and the totals" {
	local i
	for i in $(seq 1 300); do
		printf '{"id":"d%d","fate":"done","status":200,"endpoint":"portal-number-%d.example.org"}\n' "$i" "$i"
	done >"$BATS_TEST_TMPDIR/in"
	printf '{"id":"x","fate":"dead","dead_reason":"permanent","status":404,"endpoint":"zz-last.example.org"}\n' >>"$BATS_TEST_TMPDIR/in"
	echo '{"admitted":301}' >"$BATS_TEST_TMPDIR/report.json"
	rfp-sink --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/report.json" \
	    <"$BATS_TEST_TMPDIR/in" 2>"$BATS_TEST_TMPDIR/err"
	# Far past 8 KiB, and nothing lost at its end.
	[ "$(wc -c <"$BATS_TEST_TMPDIR/err")" -gt 12000 ]
	[ "$(grep -c '^  portal-number-[0-9]' "$BATS_TEST_TMPDIR/err")" -eq 300 ]
	grep -q '^  zz-last.example.org  *0  *1  ' "$BATS_TEST_TMPDIR/err"
	grep -qx '  check: admitted 301 = succeeded 300 + dead 1: ok' "$BATS_TEST_TMPDIR/err"
	[ "$(tail -n 1 "$BATS_TEST_TMPDIR/err")" = "  run directory totals: 300 in results.ndjson, 1 in dead.ndjson" ]
}

@test "sink: with --retry-fifo retries go to the FIFO and terminal records are acknowledged" {
	local fifo=$BATS_TEST_TMPDIR/retry.fifo
	mkfifo "$fifo"
	cat "$fifo" >"$BATS_TEST_TMPDIR/back" &
	local reader=$!
	run --separate-stderr rfp-sink -q --run-dir "$RD" --retry-fifo "$fifo" <"$F/fates.ndjson"
	wait "$reader"
	assert_success
	[ "$output" = "" ]
	[ "$(jq -s '[.[] | select(.fate == "retry")] | map(.id) | sort | join(" ")' "$BATS_TEST_TMPDIR/back")" = '"R-1 R-2"' ]
	[ "$(jq -s '[.[] | select(.ack == true)] | length' "$BATS_TEST_TMPDIR/back")" -eq 5 ]
	[ "$(jq -s '[.[] | select(.ack == true and .fate == "dead")] | length' "$BATS_TEST_TMPDIR/back")" -eq 2 ]
}

@test "sink: an ack leaves for rfp-fetch only once its record is in results.ndjson" {
	local fifo=$BATS_TEST_TMPDIR/retry.fifo
	mkfifo "$fifo"
	cat "$fifo" >"$BATS_TEST_TMPDIR/back" &
	local reader=$!
	# Every write(2), in order, with the file it went to.  (LeakSanitizer
	# cannot run under ptrace; the other tests check for leaks.)
	seq 1 3000 | awk '{ printf "{\"id\":\"d-%d\",\"fate\":\"done\"}\n", $1 }' |
	    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -y -s 65536 -e trace=write,writev -e signal=none \
	    -o "$BATS_TEST_TMPDIR/trace" rfp-sink -q --run-dir "$RD" \
	    --retry-fifo "$fifo"
	wait "$reader"
	[ "$(grep -c '"ack":true' "$BATS_TEST_TMPDIR/back")" -eq 3000 ]
	[ "$(grep -c . "$RD/results.ndjson")" -eq 3000 ]
	# Records filed so far (newlines written to results.ndjson) never
	# fall behind the acks written to the FIFO.
	run awk '
	    /results\.ndjson>/ { filed += gsub(/\\n/, "&") }
	    /retry\.fifo>/ {
		acks += gsub(/\\"ack\\":true/, "&")
		if (acks > filed) {
			printf "%d acks written with %d records filed\n", acks, filed
			exit 1
		}
	    }
	    END { printf "%d acks, %d records\n", acks, filed }' "$BATS_TEST_TMPDIR/trace"
	assert_success
	assert_output "3000 acks, 3000 records"
}

@test "sink: a --retry-fifo whose rfp-fetch has finished (its report is there) files on, retries left pending" {
	local fifo=$BATS_TEST_TMPDIR/retry.fifo
	mkfifo "$fifo"
	run --separate-stderr timeout 5 rfp-sink --run-dir "$RD" --retry-fifo "$fifo" \
	    --admitted-from "$F/report-5.json" <"$F/fates.ndjson"
	assert_success
	[ "$output" = "" ]
	[ "${stderr_lines[0]}" = "rfp-sink: $fifo: rfp-fetch has finished; retries are left for a re-run" ]
	[[ "$stderr" == *'check: admitted 5 = succeeded 3 + dead 2: ok'* ]]
	[ "$(grep -c . "$RD/results.ndjson")" -eq 3 ]
}

@test "sink: a --retry-fifo whose rfp-fetch has ended with no report (--fetch-ended is there) files on, retries pending, summary printed" {
	local fifo=$BATS_TEST_TMPDIR/retry.fifo
	mkfifo "$fifo"
	# rfp-fetch killed: no reader will come, and no report.
	echo 137 >"$BATS_TEST_TMPDIR/ended"
	run --separate-stderr timeout 20 rfp-sink --run-dir "$RD" --retry-fifo "$fifo" \
	    --fetch-ended "$BATS_TEST_TMPDIR/ended" \
	    --admitted-from "$BATS_TEST_TMPDIR/report.json" <"$F/fates.ndjson"
	# Without its report the count cannot be checked: 1, said with the table.
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "${stderr_lines[0]}" = "rfp-sink: $fifo: rfp-fetch has ended; retries are left for a re-run" ]
	[[ $stderr == *"rfp-sink: $BATS_TEST_TMPDIR/report.json: no admitted count"* ]]
	[[ $stderr == *"rfpipe: summary of $RD"* ]]
	[ "$(grep -c . "$RD/results.ndjson")" -eq 3 ]
	jq -e '.run.retries == 2 and .run.succeeded == 3' "$RD/summary.json"
}

@test "sink: a --fetch-ended file found empty is read again: the status written a moment later counts, and a failed rfp-fetch is not said again" {
	local fifo=$BATS_TEST_TMPDIR/retry.fifo
	mkfifo "$fifo"
	# Made, and written 0.3 s later: what a sink on a busy machine saw
	# when rfpipe wrote it in place.
	: >"$BATS_TEST_TMPDIR/ended"
	{ sleep 0.3; echo 1 >"$BATS_TEST_TMPDIR/ended"; } &
	local writer=$!
	run --separate-stderr timeout 20 rfp-sink -q --run-dir "$RD" --retry-fifo "$fifo" \
	    --fetch-ended "$BATS_TEST_TMPDIR/ended" \
	    --admitted-from "$BATS_TEST_TMPDIR/report.json" <"$F/fates.ndjson"
	wait "$writer"
	[ "$output" = "" ]
	[ "$stderr" = "" ]
	jq -e '.interrupted == true and .run.succeeded == 3' "$RD/summary.json"
}

# fifo_gone STATUS: rfp-sink on fates.ndjson, held back until its FIFO's
# reader (rfp-fetch) has read the hello and gone, and rfpipe has written
# rfp-fetch's STATUS to --fetch-ended: the acks meet no reader.
fifo_gone() {
	local fifo=$BATS_TEST_TMPDIR/retry.fifo
	mkfifo "$fifo"
	{ timeout 10 head -c 1 "$fifo" >/dev/null; echo "$1" >"$BATS_TEST_TMPDIR/ended"; } &
	local reader=$!
	timeout 20 sh -c 'while [ ! -s "$1" ]; do sleep 0.02; done; cat "$2"' sh \
	    "$BATS_TEST_TMPDIR/ended" "$F/fates.ndjson" |
	    timeout 20 rfp-sink -q --run-dir "$RD" --retry-fifo "$fifo" \
	    --fetch-ended "$BATS_TEST_TMPDIR/ended" 2>"$BATS_TEST_TMPDIR/err" || :
	wait "$reader"
	stderr=$(cat "$BATS_TEST_TMPDIR/err")
}

@test "sink: acks that meet no reader say rfp-fetch has gone, unless it failed and said why" {
	fifo_gone 1
	[[ $stderr != *"rfp-fetch has gone"* ]]
	[ "$(grep -c . "$RD/results.ndjson")" -eq 3 ]
	rm -f "$BATS_TEST_TMPDIR/retry.fifo" "$BATS_TEST_TMPDIR/ended"
	: >"$RD/results.ndjson"
	: >"$RD/dead.ndjson"
	# Killed, it said nothing: the sink says what is left.
	fifo_gone 137
	[[ $stderr == *"rfp-fetch has gone; retries are left for a re-run"* ]]
}

@test "sink: a report left by an earlier run is not taken for rfp-fetch's: the sink waits for the reader that comes" {
	local fifo=$BATS_TEST_TMPDIR/retry.fifo
	mkfifo "$fifo"
	# rfp-fetch's read end comes half a second late; the report is old.
	{ sleep 0.5; timeout 10 cat "$fifo" >"$BATS_TEST_TMPDIR/back"; } &
	local reader=$!
	run --separate-stderr timeout 10 rfp-sink -q --run-dir "$RD" --retry-fifo "$fifo" \
	    --admitted-from "$F/report-5.json" <"$F/fates.ndjson"
	wait "$reader"
	assert_success
	[ "$stderr" = "" ]
	[ "$(jq -s '[.[] | select(.fate == "retry")] | length' "$BATS_TEST_TMPDIR/back")" -eq 2 ]
}

@test "sink: a --retry-fifo that does not exist exits 1 naming it" {
	run --separate-stderr rfp-sink -q --run-dir "$RD" --retry-fifo "$BATS_TEST_TMPDIR/nope" <"$F/done.ndjson"
	[ "$status" -eq 1 ]
	[[ "${stderr_lines[0]}" == "rfp-sink: open $BATS_TEST_TMPDIR/nope: No such file or directory" ]]
}

@test "sink: a missing --run-dir exits 2 with the usage" {
	run --separate-stderr -2 rfp-sink <"$F/done.ndjson"
	[ "$output" = "" ]
	[ "${stderr_lines[0]}" = 'rfp-sink: option --run-dir is required' ]
	[[ "$stderr" == *'usage: rfp-sink '* ]]
}

@test "sink: an unusable --run-dir exits 1" {
	touch "$BATS_TEST_TMPDIR/file"
	run --separate-stderr rfp-sink -q --run-dir "$BATS_TEST_TMPDIR/file/run" <"$F/done.ndjson"
	[ "$status" -eq 1 ]
	[ "${stderr_lines[0]}" = "rfp-sink: mkdir $BATS_TEST_TMPDIR/file/run: Not a directory" ]
}

@test "sink: a results file it cannot open exits 1 naming it" {
	mkdir -p "$RD/results.ndjson"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$F/done.ndjson"
	[ "$status" -eq 1 ]
	[[ "${stderr_lines[0]}" == "rfp-sink: open $RD/results.ndjson: "* ]]
}

# slow_input: three done records a tenth of a second apart (0.3 s in all),
# so that a progress line falls due between them.
slow_input() {
	local i
	for i in 1 2 3; do
		sleep 0.1
		printf '{"id":"P-%d","fate":"done","endpoint":"nih"}\n' "$i"
	done
}

@test "sink: --progress plain writes progress lines to stderr for a slow input" {
	RFPIPE_PROGRESS_INTERVAL=0.05 run --separate-stderr rfp-sink --progress plain --total 5 --run-dir "$RD" < <(slow_input)
	assert_success
	grep -Eq '^rfp-sink: progress: [1-3]/5 done, ok [1-3], dead 0, pending [2-4], [0-9]+\.[0-9]/s, eta [0-9hms]+$' <<<"$stderr"
	[ "$(jq -s length "$RD/results.ndjson")" -eq 3 ]
	# The summary table still follows.
	[[ "$stderr" == *'succeeded'*3* ]]
}

@test "sink: --progress=plain without --total shows done, ok, dead and rate" {
	RFPIPE_PROGRESS_INTERVAL=0.05 run --separate-stderr rfp-sink --progress=plain --run-dir "$RD" < <(slow_input)
	assert_success
	grep -Eq '^rfp-sink: progress: [1-3] done, ok [1-3], dead 0, [0-9]+\.[0-9]/s$' <<<"$stderr"
}

@test "sink: --progress=none writes no progress line" {
	RFPIPE_PROGRESS_INTERVAL=0.05 run --separate-stderr rfp-sink --progress=none --total 5 --run-dir "$RD" < <(slow_input)
	assert_success
	[[ "$stderr" != *progress:* ]]
	[[ "$stderr" == *'succeeded'*3* ]]
}

@test "sink: --progress=auto prints plain progress lines when stderr is not a terminal (issue #25)" {
	RFPIPE_PROGRESS_INTERVAL=0.05 run --separate-stderr rfp-sink --total 5 --run-dir "$RD" < <(slow_input)
	assert_success
	grep -Eq '^rfp-sink: progress: [0-9]+/5 done, ' <<<"$stderr"
	[[ "$stderr" != *$'\r'* ]]
}

@test "sink: -q silences the progress line even with --progress=plain" {
	RFPIPE_PROGRESS_INTERVAL=0.05 run --separate-stderr rfp-sink -q --progress=plain --total 5 --run-dir "$RD" < <(slow_input)
	assert_success
	[ "$stderr" = "" ]
}

@test "sink: --progress=auto on a terminal redraws one line and blanks it before the summary" {
	command -v script >/dev/null 2>&1 || skip "script (util-linux) is not installed"
	run script -qec "rfp-sink --total 3 --run-dir '$RD' <'$F/done.ndjson' >/dev/null" /dev/null
	assert_success
	# Drawn at the first record, from column 0, with no newline of its own.
	[[ "$output" == $'\r'"rfp-sink: progress: 1/3 done, ok 1, dead 0, pending 2, "*$'\r'* ]]
	[[ "$output" != *$'\n'*'progress:'* ]]
	# Blanked with spaces, and the table starts on a clean line.
	[[ "$output" == *$'\r'"     "*$'\r'"rfpipe: summary of $RD"* ]]
}

@test "sink: --progress with an unknown mode exits 2 naming it" {
	run --separate-stderr -2 rfp-sink --progress=sometimes --run-dir "$RD" </dev/null
	[ "${stderr_lines[0]}" = 'rfp-sink: option --progress: expected "auto", "plain" or "none", got "sometimes"' ]
	[ ! -e "$RD" ]
}

@test "sink: --total that is not a count exits 2" {
	run --separate-stderr -2 rfp-sink --total many --run-dir "$RD" </dev/null
	[ "${stderr_lines[0]}" = 'rfp-sink: option --total: expected an integer from 0 to 1000000000, got "many"' ]
}

@test "sink: RFPIPE_PROGRESS_INTERVAL that is not a number of seconds exits 2" {
	RFPIPE_PROGRESS_INTERVAL=soon run --separate-stderr -2 rfp-sink --progress=plain --run-dir "$RD" </dev/null
	[ "${stderr_lines[0]}" = 'rfp-sink: environment RFPIPE_PROGRESS_INTERVAL: expected a number of seconds from 0.001 to 86400, got "soon"' ]
}

@test "sink: --progress plain keeps writing lines while no record comes in" {
	# One record, then silence until three lines have come for it (at
	# most 10 s), then the last: lines fall due every 0.05 s, so the wait
	# alone must bring them.  The input waits on the sink's own lines,
	# not on a clock, so a slow start on a loaded machine is no matter.
	local err=$BATS_TEST_TMPDIR/progress.err waiting i
	quiet_input() {
		printf '{"id":"Q-1","fate":"done","endpoint":"nih"}\n'
		said_thrice() {
			[ "$(grep -c "$1" "$err" 2>/dev/null)" -ge 3 ]
		}
		poll 10 said_thrice "$1" || :
		printf '{"id":"Q-2","fate":"done","endpoint":"nih"}\n'
	}
	local want='^rfp-sink: progress: 1/2 done, ok 1, dead 0, pending 1, '
	RFPIPE_PROGRESS_INTERVAL=0.05 rfp-sink --progress plain --total 2 \
	    --run-dir "$RD" >/dev/null 2>"$err" < <(quiet_input "$want")
	waiting=$(grep -c "$want" "$err")
	[ "$waiting" -ge 3 ]
	[ "$(wc -l <"$RD/results.ndjson")" -eq 2 ]
}

@test "sink: a record read from its text and its twin read by jansson are filed and counted the same" {
	# A twin with an escaped key ("\u0070ad" is "pad") is outside the
	# fast scan's subset, so it goes the jansson way.
	local in=$FIX/sink/twins.ndjson twin=$BATS_TEST_TMPDIR/twins.ndjson f
	sed 's/^{/{"\\u0070ad":0,/' "$in" >"$twin"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$in"
	assert_success
	local fast=$output fast_err=$stderr
	run --separate-stderr rfp-sink -q --run-dir "$RD.twin" <"$twin"
	assert_success
	[ "$stderr" = "$fast_err" ]
	diff <(jq -cS . <<<"$fast") <(jq -cS 'del(.pad)' <<<"$output")
	for f in results.ndjson dead.ndjson; do
		diff <(jq -cS . "$RD/$f") <(jq -cS 'del(.pad)' "$RD.twin/$f")
	done
	diff <(jq -S 'del(.wall_s, .started_at, .finished_at, .run_dir)' "$RD/summary.json") \
	    <(jq -S 'del(.wall_s, .started_at, .finished_at, .run_dir)' "$RD.twin/summary.json")
	# k's status 429.0 is not an integer: refused, bad_input.
	[ "$(wc -l <"$RD/results.ndjson")" -eq 3 ]
	[ "$(wc -l <"$RD/dead.ndjson")" -eq 6 ]
	[ "${#lines[@]}" -eq 2 ]
	jq -e '.run.http_429 == 1 and .run.retries == 2 and .run.attempts == 9 and .run.dead_by_reason.bad_input == 4' "$RD/summary.json"
	# Filed byte for byte: jansson would write 1795990507.0000019.
	[ "$(head -n 1 "$RD/results.ndjson")" = "$(head -n 1 "$in")" ]
}

@test "sink: the compaction never drops a dead letter over the cap; it leaves dead.ndjson as it was" {
	# An unknown fate near the cap: rfp-sink's own kill takes the letter
	# past 1 MiB and 64 KiB; b's first letter is superseded.
	{ printf '{"id":"a","fate":"bogus","x":"'
	  head -c $((1024 * 1024 + 64 * 1024 - 60)) /dev/zero | tr '\0' x
	  printf '"}\n'
	  printf '%s\n' '{"id":"b","fate":"dead","dead_reason":"permanent"}' \
	      '{"id":"b","fate":"dead","dead_reason":"exhausted"}'; } >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	assert_success
	[ "$(wc -l <"$RD/dead.ndjson")" -eq 3 ]
	[ "$(head -n 1 "$RD/dead.ndjson" | jq -r '.id + " " + .dead_reason')" = "a bad_input" ]
	grep -q 'dead.ndjson: read [^ ]*/dead.ndjson: File too large; left as it was' <<<"$stderr"
}

@test "sink: a FIFO at dead.ndjson.compact does not hold the compaction" {
	mkdir -m 700 "$RD"
	mkfifo "$RD/dead.ndjson.compact"
	printf '%s\n' '{"id":"b","fate":"dead","dead_reason":"permanent"}' \
	    '{"id":"b","fate":"dead","dead_reason":"exhausted"}' >"$BATS_TEST_TMPDIR/in"
	run -0 timeout -s KILL 10 rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	[ "$(jq -r .dead_reason "$RD/dead.ndjson")" = exhausted ]
	[ ! -e "$RD/dead.ndjson.compact" ]
}

@test "sink: a torn last line of results.ndjson and dead.ndjson is cut, said once each, and the whole records stay" {
	mkdir -m 700 "$RD"
	printf '%s\n%s' '{"id":"a","fate":"done"}' '{"id":"c","fate":"do' >"$RD/results.ndjson"
	printf '%s' '{"id":"x","fate":"dead","dead_reason":"permanent"}' >"$RD/dead.ndjson"
	printf '%s\n' '{"id":"b","fate":"dead","dead_reason":"permanent"}' '{"id":"d","fate":"done"}' >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	[ "${#stderr_lines[@]}" -eq 2 ]
	[ "${stderr_lines[0]}" = "rfp-sink: $RD/results.ndjson: cut a torn last line of 20 bytes (a write an earlier run did not end; never a whole record)" ]
	[ "${stderr_lines[1]}" = "rfp-sink: $RD/dead.ndjson: cut a torn last line of 50 bytes (a write an earlier run did not end; never a whole record)" ]
	# jq reads both files (the README's triage), every record whole.
	[ "$(jq -r .id "$RD/results.ndjson" | tr '\n' ' ')" = "a d " ]
	[ "$(jq -r .dead_reason "$RD/dead.ndjson")" = permanent ]
	[ "$(jq -r .id "$RD/dead.ndjson")" = b ]
	jq -e '.totals.succeeded == 2 and .totals.dead == 1' "$RD/summary.json"
	# Said once: the next sink finds nothing to cut.
	run -0 --separate-stderr rfp-sink -q --run-dir "$RD" </dev/null
	[ -z "$stderr" ]
}

@test "sink: while another sink files, a torn last line is ended, not cut, and not glued to the next letter" {
	mkdir -m 700 "$RD" "$RD/state"
	printf '%s' '{"id":"x","fate":"de' >"$RD/dead.ndjson"
	printf '%s\n' '{"id":"b","fate":"dead","dead_reason":"permanent"}' >"$BATS_TEST_TMPDIR/in"
	# Another sink's shared lock, held while this one runs (30 s at most).
	flock -s "$RD/state/sink.lock" sleep 30 &
	local holder=$!
	# flock(1) starts sleep once it holds the lock.
	POLL_STEP=0.01 poll 5 running -P "$holder"
	run -0 --separate-stderr timeout 10 rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	kill $(ps -o pid= --ppid "$holder") "$holder"
	[[ $stderr != *'cut a torn'* ]]
	[ "$(wc -l <"$RD/dead.ndjson")" -eq 2 ]
	[ "$(tail -n 1 "$RD/dead.ndjson")" = '{"id":"b","fate":"dead","dead_reason":"permanent"}' ]
	jq -e '.totals.dead == 1' "$RD/summary.json"
}

@test "sink: blank lines in the run directory's files are skipped by the recount, not called unreadable" {
	mkdir -m 700 "$RD"
	printf '\n%s\n\n' '{"id":"x","fate":"dead","dead_reason":"permanent"}' >"$RD/dead.ndjson"
	printf '%s\n' '{"id":"b","fate":"done"}' >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	[ -z "$stderr" ]
	jq -e '.totals.dead == 1 and .totals.succeeded == 1' "$RD/summary.json"
}

@test "sink: a record's endpoint and reason reach the summary table without their control bytes" {
	printf '%s\n' '{"id":"a","fate":"dead","dead_reason":"permanent","endpoint":"ev\u001b[31mil\nfake","reason":"x\u001b[2J"}' >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr rfp-sink --progress none --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	[[ "$stderr" != *$'\033'* ]]
	grep -qF '  ev?[31mil?fake ' <<<"$stderr"
	grep -qF ' x?[2J' <<<"$stderr"
	# Nor C1 (U+009B, a CSI in 8 bits) or a bidi override (U+202E), which
	# turns the rest of the line around: one ? each.
	printf '%s\n' '{"id":"b","fate":"dead","dead_reason":"permanent","endpoint":"ab\u202econ\u009b2J","reason":"y"}' >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr rfp-sink --progress none --run-dir "$BATS_TEST_TMPDIR/r2" <"$BATS_TEST_TMPDIR/in"
	[[ "$stderr" != *$'\u202e'* && "$stderr" != *$'\u009b'* ]]
	grep -qF '  ab?con?2J ' <<<"$stderr"
}

@test "sink: a fate that is not a string is named so, not called missing" {
	printf '{"id":"n","fate":5}\n{"id":"o","fate":{"x":1}}\n' >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	assert_success
	[ "$stderr" = 'rfp-sink: line 1: field "fate": not a string
rfp-sink: line 2: field "fate": not a string' ]
	in_file "$RD/dead.ndjson" n '.dead_reason == "bad_input" and .dead_detail == "field \"fate\": not a string" and .line == 1'
	in_file "$RD/dead.ndjson" o '.dead_reason == "bad_input" and .line == 2'
}

@test "sink: a dead reason outside the table counts as bad_input; the summary keeps the table's keys" {
	printf '%s\n' '{"id":"a","fate":"dead","dead_reason":"zzz"}' \
	    '{"id":"b","fate":"dead","dead_reason":"succeeded"}' \
	    '{"id":"c","fate":"dead","dead_reason":"permanent"}' >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	assert_success
	jq -e '.run.dead == 3 and .run.dead_by_reason.bad_input == 2 and .run.dead_by_reason.permanent == 1
	    and (.run.dead_by_reason | has("zzz") or has("succeeded") | not)
	    and .totals.dead_by_reason.bad_input == 2' "$RD/summary.json"
	# The letters themselves are filed as they came.
	[ "$(jq -r .dead_reason "$RD/dead.ndjson" | tr '\n' ' ')" = "zzz succeeded permanent " ]
}

@test "sink: a field of the contract with the wrong JSON type is one line naming it, the record filed dead bad_input with its id, never sent back as a retry" {
	printf '%s\n' '{"id":"a","fate":"retry","attempt":2,"not_before":true}' \
	    '{"id":"b","fate":"retry","attempt":"2","not_before":1796018400}' \
	    '{"id":"c","fate":"done","status":"200"}' \
	    '{"id":"d","fate":"done","endpoint":7}' \
	    '{"id":"e","fate":"dead","dead_reason":"permanent","status":"404"}' \
	    '{"id":"f","fate":"done","status":200}' >"$BATS_TEST_TMPDIR/in"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	assert_success
	[ "$output" = "" ]
	[ "${#stderr_lines[@]}" -eq 4 ]
	[ "${stderr_lines[0]}" = 'rfp-sink: line 1: field "not_before": expected a number' ]
	[ "${stderr_lines[1]}" = 'rfp-sink: line 2: field "attempt": expected an integer from 1 to 1000000' ]
	[ "${stderr_lines[2]}" = 'rfp-sink: line 3: field "status": expected an integer or null' ]
	[ "${stderr_lines[3]}" = 'rfp-sink: line 4: field "endpoint": expected a string' ]
	for id in a b c d; do
		in_file "$RD/dead.ndjson" "$id" '.dead_reason == "bad_input" and .stage == "rfp-sink" and (.dead_detail | startswith("field \""))'
	done
	# A letter is filed as it came.
	in_file "$RD/dead.ndjson" e '.dead_reason == "permanent" and .status == "404"'
	[ "$(ids "$RD/results.ndjson")" = "f " ]
	jq -e '.run.succeeded == 1 and .run.dead == 5 and .run.dead_by_reason.bad_input == 4' "$RD/summary.json"
}

@test "sink: a result or a retry with no id is no document's: a stray line, kept in dead.ndjson and counted apart, never a success" {
	printf '%s\n' '{"fate":"done","status":200}' '{"id":null,"fate":"retry","attempt":2,"not_before":1}' \
	    '{"id":"a","fate":"done"}' '{"fate":"dead","dead_reason":"bad_input","line_key":"0123456789abcdef.1"}' >"$BATS_TEST_TMPDIR/in"
	echo '{"admitted":4}' >"$BATS_TEST_TMPDIR/report.json"
	run --separate-stderr rfp-sink -q --fate-status --run-dir "$RD" --admitted-from "$BATS_TEST_TMPDIR/report.json" <"$BATS_TEST_TMPDIR/in"
	# Two documents pending (their records may be the strays): run again.
	[ "$status" -eq 5 ]
	[ "$output" = "" ]
	[[ $stderr == *'rfp-sink: line 1: missing field "id"'* && $stderr == *'rfp-sink: line 2: missing field "id"'* ]]
	[ "$(ids "$RD/results.ndjson")" = "a " ]
	[ "$(jq -c '[.line, .dead_reason, .dead_detail]' "$RD/dead.ndjson" | head -2 | tr '\n' ' ')" = '[1,"bad_input","missing field \"id\""] [2,"bad_input","missing field \"id\""] ' ]
	# A manifest line's letter (a line_key) is a document's: dead.
	jq -e '.run.succeeded == 1 and .run.dead == 1 and .run.stray_lines == 2 and .totals.stray_lines == 2
	    and .pending == 2 and .reconciled == true and .run.endpoints["(none)"].dead == 1' "$RD/summary.json"
}

@test "sink: a letter whose endpoint is empty (refused by rfp-fetch) is counted under (none), not under a blank row" {
	printf '%s\n' '{"id":"a","endpoint":"","fate":"dead","dead_reason":"bad_input","dead_detail":"field \"endpoint\": not a string of 1 to 100 bytes"}' \
	    '{"id":"b","endpoint":"nih","fate":"done","status":200}' >"$BATS_TEST_TMPDIR/in"
	run -3 --separate-stderr rfp-sink --fate-status --run-dir "$RD" <"$BATS_TEST_TMPDIR/in"
	jq -e '(.run.endpoints | keys == ["(none)", "nih"]) and
	    .run.endpoints["(none)"].dead_by_reason.bad_input == 1' "$RD/summary.json" ||
	    { jq -c .run.endpoints "$RD/summary.json"; false; }
	# The table's rows: none blank.
	run ! grep -E '^    +[0-9]+ +[0-9]+' <<<"$stderr"
	[[ $stderr == *"(none)"* ]]
}

@test "sink: dead.ndjson keeps an id's last letter, none of an id filed since, a key's last and every stray; with none to drop it is left as it was" {
	# Three thousand letters of ids seen once: the screen that spares
	# holding their ids must tell each of x, y and k1 from them.
	{
		seq 1 3000 | awk '{ printf "{\"id\":\"d%d\",\"fate\":\"dead\",\"dead_reason\":\"permanent\"}\n", $1 }'
		echo '{"id":"x","fate":"dead","dead_reason":"exhausted"}'
		echo '{"id":"y","fate":"dead","dead_reason":"exhausted"}'
		echo '{"id":"z","fate":"dead","dead_reason":"bad_input","line_key":"k1","line":7}'
		echo 'not json'
	} >"$BATS_TEST_TMPDIR/1"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/1"
	assert_success
	[ "$(wc -l <"$RD/dead.ndjson")" -eq 3004 ]
	# Each case on a copy of its own, so that none makes the others'
	# compaction run.
	cp -a "$RD" "$BATS_TEST_TMPDIR/x"
	cp -a "$RD" "$BATS_TEST_TMPDIR/y"
	cp -a "$RD" "$BATS_TEST_TMPDIR/k"
	echo '{"id":"x","fate":"dead","dead_reason":"permanent"}' |
	    rfp-sink -q --run-dir "$BATS_TEST_TMPDIR/x"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/x/dead.ndjson")" -eq 3004 ]
	in_file "$BATS_TEST_TMPDIR/x/dead.ndjson" x '.dead_reason == "permanent"'
	echo '{"id":"y","fate":"done","status":200}' |
	    rfp-sink -q --run-dir "$BATS_TEST_TMPDIR/y"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/y/dead.ndjson")" -eq 3003 ]
	[ "$(jq -s 'map(select(.id == "y")) | length' "$BATS_TEST_TMPDIR/y/dead.ndjson")" -eq 0 ]
	echo '{"id":"z","fate":"dead","dead_reason":"bad_input","line_key":"k1","line":8}' |
	    rfp-sink -q --run-dir "$BATS_TEST_TMPDIR/k"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/k/dead.ndjson")" -eq 3004 ]
	[ "$(jq -s 'map(select(.line_key == "k1")) | map(.line)' -c "$BATS_TEST_TMPDIR/k/dead.ndjson")" = "[8]" ]
	for d in x y k; do
		[ "$(jq -s 'map(select(.raw == "not json")) | length' "$BATS_TEST_TMPDIR/$d/dead.ndjson")" -eq 1 ]
	done
	# New ids dead once and results of ids no letter has: nothing goes,
	# and the file is not rewritten (the same inode).
	ino=$(stat -c %i "$RD/dead.ndjson")
	{
		seq 1 500 | awk '{ printf "{\"id\":\"e%d\",\"fate\":\"dead\",\"dead_reason\":\"permanent\"}\n", $1 }'
		seq 1 500 | awk '{ printf "{\"id\":\"f%d\",\"fate\":\"done\",\"status\":200}\n", $1 }'
	} >"$BATS_TEST_TMPDIR/3"
	run --separate-stderr rfp-sink -q --run-dir "$RD" <"$BATS_TEST_TMPDIR/3"
	assert_success
	[ "$(wc -l <"$RD/dead.ndjson")" -eq 3504 ]
	[ "$(stat -c %i "$RD/dead.ndjson")" = "$ino" ]
}

@test "sink: a FIFO where dead.ndjson or results.ndjson should be is named at the end, not waited on" {
	mkdir -p "$RD"
	mkfifo "$RD/dead.ndjson"
	run --separate-stderr timeout -k 1 10 rfp-sink -q --run-dir "$RD" </dev/null
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"read $RD/dead.ndjson: not a regular file; left as it was"* ]]
	rm -rf "$RD"
	mkdir -p "$RD"
	mkfifo "$RD/results.ndjson"
	run --separate-stderr timeout -k 1 10 rfp-sink -q --run-dir "$RD" <<<'{"id":"a","fate":"dead","dead_reason":"permanent"}'
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"read $RD/results.ndjson: not a regular file; left as it was"* ]]
	[ "$(wc -l <"$RD/dead.ndjson")" -eq 1 ]
}
