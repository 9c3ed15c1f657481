#!/usr/bin/env bats
# The attempt log (RUN/logs/attempts.ndjson) against the mock portal's own
# request log, and rfp-report on the run directory: its text, its
# Prometheus metrics, its HTML page in a real browser, and that it leaves
# the run directory as it found it.  Counts and states, never timings.

load test_helper

setup() {
	RUN=$BATS_TEST_TMPDIR/run
	M=$BATS_TEST_TMPDIR/m.ndjson
	LOG=$RUN/logs/attempts.ndjson
}

# scripted: a portal whose documents answer by their path: 429 then 200,
# 503 twice then 200, 404 for good, or 200.
scripted() {
	cat >"$BATS_TEST_TMPDIR/scripted.yaml" <<'YAML'
routes:
  - match: "/p/429/*"
    endpoint: p
    script: [429, 200]
    retry_after: 1
  - match: "/p/503/*"
    endpoint: p
    script: [503, 503, 200]
    retry_after: 1
  - match: "/p/404/*"
    endpoint: p
    script: [404]
  - match: "/p/ok/*"
    endpoint: p
YAML
	mock_start "$BATS_TEST_TMPDIR/scripted.yaml"
	{
		manifest /p/429 3 p | sed 's/"id":"p-/"id":"r-/'
		manifest /p/503 2 p | sed 's/"id":"p-/"id":"s-/'
		manifest /p/404 1 p | sed 's/"id":"p-/"id":"n-/'
		manifest /p/ok 6 p
	} >"$M"
}

# scripted_run: the scripted batch through rfpipe: 11 done, 1 dead.
scripted_run() {
	scripted
	run -3 timeout 60 rfpipe -q --run-dir "$RUN" --seed 1 "$M"
}

# logged_reqs [FILTER]: the attempt log's req lines passing jq FILTER.
logged_reqs() {
	jq -s "[.[] | select(.t == \"req\" and (${1:-true}))] | length" "$LOG"
}

# snapshot DIR: every path under DIR with its type, mode, size and, for a
# file, its sha256: what a read-only reader must leave as it was.
snapshot() {
	(cd "$1" && find . -printf '%p %y %m %s %T@\n' | sort &&
	    find . -type f -exec sha256sum {} + | sort)
}

@test "report: the attempt log has one req line per request the mock logged" {
	scripted_run
	[ "$(logged_reqs)" -eq "$(requests_for)" ]
	# ... per document and attempt too: 2 for a 429, 3 for a 503.
	[ "$(logged_reqs '.id == "s-1"')" -eq "$(requests_for /p/503/doc-1)" ]
	[ "$(logged_reqs '.id == "s-1"')" -eq 3 ]
	[ "$(logged_reqs '.id == "r-2"')" -eq 2 ]
	# Every line is one flat object with a type and a time.
	[ "$(wc -l <"$LOG")" -eq "$(jq -s length "$LOG")" ]
	jq -e -s 'all(.[]; (.t | type) == "string" and (.at | type) ==
	    "number" and all(.[]; type != "object" and type != "array"))' "$LOG"
	# rfp-fetch's start line carries the deadline and the time scale.
	jq -e -s '[.[] | select(.t == "start")] | length == 1 and
	    .[0].scale == 0.01 and .[0].prog == "rfp-fetch"' "$LOG"
	# The statuses are the mock's, by count.
	[ "$(logged_reqs '.status == 503')" -eq "$(logged '.status == 503')" ]
	[ "$(logged_reqs '.status == 429')" -eq "$(logged '.status == 429')" ]
	[ "$(logged_reqs '.status == 200')" -eq "$(logged '.status == 200')" ]
	# Every answered line has its latency, endpoint and attempt.
	jq -e -s 'all(.[] | select(.t == "req"); .ep == "p" and .attempt >= 1
	    and .ms >= 0 and .sent <= .at and .breaker == "closed")' "$LOG"
}

@test "report: a 429 on attempt 1 stays in the log after the document succeeds on attempt 2" {
	scripted_run
	jq -e -s 'any(.[]; .id == "r-1" and .attempt == 2 and .status == 200)' \
	    "$RUN/results.ndjson"
	jq -e -s '[.[] | select(.id == "r-1") | [.t, .attempt, .status]] ==
	    [["req", 1, 429], ["delay", 1, null], ["req", 2, 200]]' "$LOG"
	# The delay says why: the 429's Retry-After.
	jq -e -s '[.[] | select(.t == "delay" and .id == "r-1")][0] |
	    .why == "retry_after" and .delay_s >= 1' "$LOG"
	# rfp-backoff logged every retry rfp-sink counted.
	[ "$(jq -s '[.[] | select(.t == "delay")] | length' "$LOG")" -eq \
	    "$(jq .run.retries "$RUN/summary.json")" ]
	# The 429s started the pace.
	jq -e -s 'any(.[]; .t == "pace" and .ev == "start" and .ep == "p" and
	    .rate > 0)' "$LOG"
}

@test "report: a breaker that opens is logged opening, half-opening and closing" {
	# Down long enough (1.5 s real from the first request: a slow start
	# under load does not eat it) for the breaker to open on a slow
	# machine too, then up.
	cat >"$BATS_TEST_TMPDIR/down.yaml" <<'YAML'
epoch: first_request
routes:
  - match: "/down/*"
    endpoint: down
    outage: {start_s: 0, end_s: 150, status: 503}
YAML
	mock_start "$BATS_TEST_TMPDIR/down.yaml"
	manifest /down 20 down >"$M"
	run timeout 60 rfpipe -q --run-dir "$RUN" --seed 1 \
	    --config "$FIX/pipeline/breaker.yaml" --max-attempts 30 "$M"
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]
	jq -e '.openings >= 1 and .state == "closed"' \
	    "$RUN/state/breaker/down.json" || {
		jq -c . "$RUN/state/breaker/down.json" "$RUN/summary.json"
		false
	}
	# As many openings as the breaker counted, and the changes in order.
	[ "$(jq -s '[.[] | select(.t == "breaker" and .to == "open")] |
	    length' "$LOG")" -eq "$(jq .openings "$RUN/state/breaker/down.json")" ]
	jq -e -s '[.[] | select(.t == "breaker" and .ep == "down") | .to] |
	    .[0] == "open" and .[-1] == "closed" and index("half_open") != null' \
	    "$LOG"
	# The breaker's times, not the log's: they are its transitions'.
	# Within a millisecond: the log prints them with three decimals, and
	# a time on a half millisecond rounds either way.
	jq -e --slurpfile b "$RUN/state/breaker/down.json" -s '
	    [.[] | select(.t == "breaker") | .at] as $l |
	    [$b[0].transitions[] | .t] as $s |
	    ($l | length) == ($s | length) and
	    all(range($l | length); ($l[.] - $s[.]) | fabs <= 0.001)' "$LOG"
	# The probe's request says so; none went while it was open, though
	# some were answered then: the state is the one at the send.
	jq -e -s 'any(.[]; .t == "req" and .breaker == "half_open")' "$LOG"
	jq -e -s 'all(.[] | select(.t == "req"); .breaker != "open")' "$LOG"
	run -0 rfp-report "$RUN"
	assert_output --partial "breaker openings $(jq .openings \
	    "$RUN/state/breaker/down.json")"
}

@test "report: rfpipe report prints the whole run directory, its pending ids and top errors" {
	scripted_run
	# Two more admitted by an rfp-fetch whose sink never filed them.
	{ manifest /p/ok 2 p | sed 's/"id":"p-/"id":"q-/'; } |
	    timeout 30 rfp-fetch --run-dir "$RUN" >/dev/null
	run -0 --separate-stderr timeout 30 "$ROOT/pipeline.sh" report "$RUN"
	[ -z "$stderr" ]
	assert_line "rfp-report: $RUN"
	assert_line --regexp '^  succeeded +11$'
	assert_line --regexp '^  dead-lettered +1$'
	assert_line --regexp '^    permanent +1$'
	assert_line --regexp '^  pending +2$'
	assert_line "  requests 21, retries 7, 429s 3, breaker openings 0"
	assert_line "  last run: admitted 12 = succeeded 11 + dead 1: ok"
	assert_line --regexp '^  p +11 +1 +0 +21 +3  http_503 4, http_429 3, http_404 1$'
	[ "${lines[-3]}" = "pending ids:" ]
	# In the order they were seen: their answers may cross.
	[ "$(printf '%s\n' "${lines[-2]}" "${lines[-1]}" | sort | tr '\n' ' ')" = "  q-1   q-2 " ]
}

@test "report: rfp-report leaves the run directory byte for byte as it was" {
	scripted_run
	snapshot "$RUN" >"$BATS_TEST_TMPDIR/before"
	run -0 timeout 30 rfp-report --html "$BATS_TEST_TMPDIR/r.html" \
	    --metrics "$BATS_TEST_TMPDIR/r.prom" "$RUN"
	run -0 timeout 30 "$ROOT/pipeline.sh" report -q "$RUN"
	snapshot "$RUN" >"$BATS_TEST_TMPDIR/after"
	diff "$BATS_TEST_TMPDIR/before" "$BATS_TEST_TMPDIR/after"
	[ -s "$BATS_TEST_TMPDIR/r.html" ]
	[ -s "$BATS_TEST_TMPDIR/r.prom" ]
	# An empty directory, or one that is no run directory (a typo in a
	# crontab), is an error, not a report of zeros; nothing is made.
	mkdir "$BATS_TEST_TMPDIR/empty"
	run -1 --separate-stderr timeout 30 rfp-report --metrics \
	    "$BATS_TEST_TMPDIR/e.prom" "$BATS_TEST_TMPDIR/empty"
	[ "$stderr" = "rfp-report: $BATS_TEST_TMPDIR/empty: not a run directory (no results.ndjson, dead.ndjson, summary.json, logs/ or state/)" ]
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/empty")" ]
	[ ! -e "$BATS_TEST_TMPDIR/e.prom" ]
	run -1 timeout 30 rfp-report /etc
	# A file in it named instead, as a tired admin does: said as such,
	# not "Permission denied".
	run -1 --separate-stderr timeout 30 rfp-report "$RUN/summary.json"
	[ "$stderr" = "rfp-report: $RUN/summary.json: not a directory: give the run directory (--run-dir), not a file in it" ]
}

@test "report: --metrics writes the Prometheus text format, each sample name{labels} value" {
	local d=$BATS_TEST_TMPDIR/'odd "run" \ dir' p=$BATS_TEST_TMPDIR/rfpipe.prom
	scripted_run
	cp -a "$RUN" "$d"
	run -0 timeout 30 rfp-report -q --metrics "$p" "$d"
	[ -z "$output" ]
	[ ! -e "$p.tmp" ]
	# Every line: a HELP or TYPE comment, or one sample.
	run grep -vE '^# HELP [a-z_][a-z0-9_]* .+$|^# TYPE [a-z_][a-z0-9_]* (counter|gauge)$|^[a-z_][a-z0-9_]*\{([a-z_]+="([^"\\]|\\["\\n])*",)*[a-z_]+="([^"\\]|\\["\\n])*"\} [0-9.e+-]+$' "$p"
	[ "$status" -eq 1 ] || fail "not the exposition format: $output"
	# The run directory's name, escaped.
	grep -qF 'run_dir="'"$BATS_TEST_TMPDIR"'/odd \"run\" \\ dir"' "$p"
	# Each TYPE once, before its samples.
	[ "$(grep -c '^# TYPE' "$p")" -eq "$(grep '^# TYPE' "$p" | sort -u | wc -l)" ]
	# The figures are summary.json's and the mock's.
	prom() { grep -F "$1{" "$p" | grep -F "$2" | awk '{ s += $NF } END { print s }'; }
	[ "$(prom rfpipe_documents 'state="succeeded"')" -eq "$(jq .totals.succeeded "$RUN/summary.json")" ]
	[ "$(prom rfpipe_documents 'state="dead"')" -eq "$(jq .totals.dead "$RUN/summary.json")" ]
	[ "$(prom rfpipe_dead_letters 'reason="permanent"')" -eq 1 ]
	[ "$(prom rfpipe_requests_total 'endpoint="p"')" -eq "$(requests_for)" ]
	[ "$(prom rfpipe_requests_total 'outcome="refused"')" -eq 7 ]
	[ "$(prom rfpipe_http_429_total 'endpoint="p"')" -eq "$(jq .run.http_429 "$RUN/summary.json")" ]
	[ "$(prom rfpipe_retries_total 'endpoint="p"')" -eq "$(jq .run.retries "$RUN/summary.json")" ]
	[ "$(prom rfpipe_reconciled run_dir)" -eq 1 ]
}

# dom_attr DOM ID ATTR: attribute ATTR of the element with id ID.
dom_attr() {
	grep -o "<[^>]* id=\"$2\"[^>]*>" "$1" | grep -o " $3=\"[^\"]*\"" |
	    cut -d '"' -f 2
}

# dom_sum DOM CLASS: the sum of data-n over the SVG rects of CLASS.
dom_sum() {
	grep -o "<rect class=\"$2\"[^>]*>" "$1" | grep -o ' data-n="[0-9]*"' |
	    cut -d '"' -f 2 | awk '{ s += $1 } END { print s + 0 }'
}

@test "report: --html loads in chromium with no console error, and its DOM's figures are summary.json's" {
	command -v chromium >/dev/null 2>&1 ||
	    skip "chromium is not installed (scripts/deps.sh test installs it)"
	# make check runs this suite under the sanitizers only: the page is
	# the sanitized rfp-report's (4 to 6 s of that pass, chromium's).
	local h=$BATS_TEST_TMPDIR/r.html dom=$BATS_TEST_TMPDIR/dom.html s r
	scripted_run
	s=$RUN/summary.json
	run -0 timeout 30 rfp-report -q --html "$h" "$RUN"
	[ ! -e "$h.tmp" ]
	run -0 timeout 120 chromium --headless --no-sandbox --disable-gpu \
	    --user-data-dir="$BATS_TEST_TMPDIR/chrome" --enable-logging=stderr \
	    --v=0 --dump-dom "file://$h"
	printf '%s\n' "$output" | grep -v ':CONSOLE' >"$dom"
	# A console message (a CSP refusal, a script error) is a failure.
	if grep ':CONSOLE' <<<"$output"; then
		fail "chromium's console was not quiet"
	fi
	grep -q '<section id="summary">' "$dom"
	! grep -qi '<script' "$dom" || false
	[ "$(dom_attr "$dom" n-succeeded data-n)" -eq "$(jq .totals.succeeded "$s")" ]
	# Cuts apart from the dead, as rfp-sink's table has them.
	[ "$(dom_attr "$dom" n-dead data-n)" -eq "$(jq '.totals.dead - .totals.dead_by_reason.deadline_cut' "$s")" ]
	[ "$(dom_attr "$dom" n-cut data-n)" -eq "$(jq .totals.dead_by_reason.deadline_cut "$s")" ]
	[ "$(dom_attr "$dom" n-requests data-n)" -eq "$(jq .run.attempts "$s")" ]
	[ "$(dom_attr "$dom" n-retries data-n)" -eq "$(jq .run.retries "$s")" ]
	[ "$(dom_attr "$dom" n-http429 data-n)" -eq "$(jq .run.http_429 "$s")" ]
	[ "$(dom_attr "$dom" n-pending data-n)" -eq 0 ]
	for r in $(jq -r '.totals.dead_by_reason | to_entries[] |
	    select(.value > 0) | .key' "$s"); do
		[ "$(dom_attr "$dom" "dead-$r" data-n)" -eq \
		    "$(jq ".totals.dead_by_reason.$r" "$s")" ]
	done
	[ "$(grep -c '<div class="reason"' "$dom")" -eq "$(jq \
	    '[.totals.dead_by_reason[] | select(. > 0)] | length' "$s")" ]
	[ "$(dom_attr "$dom" reconciliation data-reconciled)" = \
	    "$(jq .reconciled "$s")" ]
	[ "$(dom_attr "$dom" reconciliation data-admitted)" -eq "$(jq .admitted "$s")" ]
	# The endpoint's figures, and its timeline's bars add up to them.
	[ "$(dom_attr "$dom" ep-0 data-endpoint)" = p ]
	[ "$(dom_attr "$dom" ep-0 data-requests)" -eq "$(requests_for)" ]
	[ "$(dom_attr "$dom" ep-0 data-ok)" -eq "$(dom_sum "$dom" ok)" ]
	[ "$(dom_attr "$dom" ep-0 data-refused)" -eq "$(dom_sum "$dom" refused)" ]
	[ "$(dom_attr "$dom" ep-0 data-failed)" -eq "$(dom_sum "$dom" failed)" ]
	[ "$(dom_attr "$dom" ep-0 data-retries)" -eq "$(dom_sum "$dom" retry)" ]
	[ "$(dom_attr "$dom" ep-0 data-ok)" -eq "$(logged '.status == 200')" ]
	[ "$(dom_attr "$dom" ep-0 data-succeeded)" -eq "$(jq .run.endpoints.p.succeeded "$s")" ]
	[ "$(dom_attr "$dom" ep-0 data-dead)" -eq "$(jq .run.endpoints.p.dead "$s")" ]
	# The pace the 429s started is drawn.
	grep -q '<path class="pace"' "$dom"
}

@test "report: a usage error exits 2 with the usage, an unreadable run directory 1" {
	run -2 --separate-stderr rfp-report
	[ "${stderr_lines[0]}" = "rfp-report: expected a RUN_DIR" ]
	[[ ${stderr_lines[1]} == "usage: rfp-report "* ]]
	run -2 --separate-stderr rfp-report --bogus "$RUN"
	[ "${stderr_lines[0]}" = "rfp-report: unknown option \"--bogus\"" ]
	run -2 --separate-stderr rfp-report a b
	[ "${stderr_lines[0]}" = "rfp-report: expected one RUN_DIR, got 2 operands" ]
	run -2 --separate-stderr rfp-report --html
	[[ ${stderr_lines[0]} == "rfp-report: option --html: "* ]]
	run -1 --separate-stderr rfp-report "$BATS_TEST_TMPDIR/none"
	[ "${stderr_lines[0]}" = "rfp-report: open $BATS_TEST_TMPDIR/none: No such file or directory" ]
	run -0 rfp-report --version
	[ "$output" = "rfp-report $(head -n 1 "$ROOT/debian/changelog" |
	    tr -d '()' | cut -d ' ' -f 2)" ]
	run -0 pipeline.sh report --help
	[[ ${lines[0]} == "usage: rfp-report "* ]]
	# An output that cannot be written is named, and exits 1.
	mkdir -p "$RUN"
	: >"$RUN/results.ndjson"
	run -1 --separate-stderr rfp-report -q --metrics /nonexistent/m.prom "$RUN"
	[ "$stderr" = "rfp-report: /nonexistent/m.prom: No such file or directory" ]
}

@test "report: a request cut by a signal is logged stopped, and is pending in the report" {
	cat >"$BATS_TEST_TMPDIR/hang.yaml" <<'YAML'
routes:
  - match: "/h/*"
    endpoint: h
    script: [hang]
    hang_ms: 2000000
YAML
	mock_start "$BATS_TEST_TMPDIR/hang.yaml"
	manifest /h 2 h >"$M"
	rfp-fetch --run-dir "$RUN" <"$M" >/dev/null 2>&1 &
	local pid=$!
	requests_reach 2 10 || :
	[ "$(requests_for)" -eq 2 ]
	kill -TERM "$pid"
	if ! gone_within "$pid" 10; then
		kill -KILL "$pid"
		fail "rfp-fetch still runs 10 s after SIGTERM"
	fi
	wait "$pid" || true
	[ "$(logged_reqs '.error == "stopped" and .status == null')" -eq 2 ]
	run -0 rfp-report "$RUN"
	assert_line --regexp '^  pending +2$'
	assert_line "  requests 0, retries 0, 429s 0, breaker openings 0"
}

@test "report: --html draws breaker spans, the pace and the deadline from the log, escaped, each change once" {
	mkdir -p "$RUN/logs"
	cat >"$LOG" <<'NDJSON'
{"t":"start","at":1000,"prog":"rfp-fetch","pid":1,"deadline":1015,"scale":1}
{"t":"req","at":1001,"id":"<i>y</i>","ep":"e&1","attempt":1,"sent":1000.5,"ms":500,"status":503,"error":null,"rate":0,"breaker":"closed"}
{"t":"breaker","at":1002,"ep":"e&1","to":"open"}
{"t":"breaker","at":1002,"ep":"e&1","to":"open"}
{"t":"pace","at":1003,"ep":"e&1","ev":"start","rate":2,"was":0,"window":2}
{"t":"delay","at":1003,"id":"<i>y</i>","ep":"e&1","attempt":1,"delay_s":8,"why":"backoff","not_before":1011}
{"t":"a type of a later version","at":1004}
{"t":"breaker","at":1010,"ep":"e&1","to":"half_open"}
{"t":"req","at":1011,"id":"<i>y</i>","ep":"e&1","attempt":2,"sent":1010.5,"ms":500,"status":null,"error":"timeout","rate":2,"breaker":"half_open"}
{"t":"breaker","at":1011,"ep":"e&1","to":"closed"}
{"t":"req","at":10
NDJSON
	printf '{"id":"<i>y</i>","endpoint":"e&1","fate":"dead","dead_reason":"deadline_cut","dead_detail":"a <b>detail</b>"}\n' >"$RUN/dead.ndjson"
	run -0 --separate-stderr rfp-report --html "$BATS_TEST_TMPDIR/r.html" "$RUN"
	[ "$stderr" = "rfp-report: $LOG:11: unreadable line, skipped" ]
	assert_line "  requests 2, retries 1, 429s 0, breaker openings 1"
	assert_line --regexp '^  e&1 +0 +0 +1 +2 +0  http_503 1, timeout 1$'
	local h=$BATS_TEST_TMPDIR/r.html
	grep -qF '<rect class="brk-open" ' "$h"
	grep -F '<rect class="brk-open" ' "$h" | grep -qF 'data-from="2.000" data-to="10.000"'
	grep -F '<rect class="brk-half" ' "$h" | grep -qF 'data-from="10.000" data-to="11.000"'
	[ "$(grep -c '<rect class="brk-' "$h")" -eq 2 ]
	grep -qF '<line class="deadline" ' "$h"
	grep -F '<line class="deadline" ' "$h" | grep -qF 'data-at="1015.000"'
	grep -qF '<path class="pace" data-max="2.000"' "$h"
	grep -qF 'data-endpoint="e&amp;1"' "$h"
	grep -qF '&lt;i&gt;y&lt;/i&gt;' "$h"
	grep -qF 'a &lt;b&gt;detail&lt;/b&gt;' "$h"
	! grep -qF '<i>y</i>' "$h" || false
	grep -qF '<div class="reason" id="dead-deadline_cut" data-n="1">' "$h"
	grep -qF '; the deadline 1970-01-01T00:16:55Z' "$h"
	grep -qF 'Run the same command again in the next window' "$h"
	grep -qF 'id="n-openings" data-n="1"' "$h"
	grep -qF 'id="reconciliation" data-reconciled="unknown"' "$h"
}

@test "report: an output is never a link followed, a device replaced or a file of the run directory" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	before=$(cd "$RUN" && find . -type f -exec sha256sum {} + | sort)
	# A device is written straight, not replaced by a file.
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	timeout 20 cat "$BATS_TEST_TMPDIR/fifo" >"$BATS_TEST_TMPDIR/fifo.out" &
	reader=$!
	run -0 timeout 20 rfp-report -q --metrics "$BATS_TEST_TMPDIR/fifo" "$RUN"
	wait "$reader"
	[ -p "$BATS_TEST_TMPDIR/fifo" ]
	grep -q '^rfpipe_' "$BATS_TEST_TMPDIR/fifo.out"
	# A link (and a planted temporary file's name) is not followed.
	echo precious >"$BATS_TEST_TMPDIR/target"
	ln -s "$BATS_TEST_TMPDIR/target" "$BATS_TEST_TMPDIR/link.prom"
	ln -s "$BATS_TEST_TMPDIR/target" "$BATS_TEST_TMPDIR/out.prom.tmp"
	run -1 --separate-stderr rfp-report -q --metrics "$BATS_TEST_TMPDIR/link.prom" "$RUN"
	[ "$stderr" = "rfp-report: $BATS_TEST_TMPDIR/link.prom: a symbolic link; name the file itself" ]
	run -0 rfp-report -q --metrics "$BATS_TEST_TMPDIR/out.prom" "$RUN"
	[ "$(cat "$BATS_TEST_TMPDIR/target")" = precious ]
	[ -L "$BATS_TEST_TMPDIR/link.prom" ]
	grep -q '^rfpipe_' "$BATS_TEST_TMPDIR/out.prom"
	# Nothing is written into the run directory, by any name.
	run -1 --separate-stderr rfp-report -q --metrics "$RUN/summary.json" "$RUN"
	[[ $stderr == *"in the run directory, which rfp-report never changes" ]]
	run -1 rfp-report -q --html "$RUN/logs/../r.html" "$RUN"
	run -1 rfp-report -q --html "$RUN" "$RUN"
	after=$(cd "$RUN" && find . -type f -exec sha256sum {} + | sort)
	[ "$before" = "$after" ]
	[ -z "$(ls "$BATS_TEST_TMPDIR" | grep -E 'out\.prom\.[A-Za-z0-9]{6}$')" ]
}

@test "report: a line torn by an earlier run is ended before the next run logs" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 nih >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	printf '{"t":"req","id":"torn' >>"$LOG"
	manifest /nih 4 nih >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	# The torn line stands alone; every other line is whole JSON.
	[ "$(grep -c '^{"t":"req","id":"torn$' "$LOG")" -eq 1 ]
	[ "$(grep -v '^{"t":"req","id":"torn$' "$LOG" | jq -c . | wc -l)" -eq \
	    "$(grep -vc '^{"t":"req","id":"torn$' "$LOG")" ]
	[ "$(jq -R 'fromjson? | select(.t == "req")' "$LOG" | jq -s length)" -eq 4 ]
}

@test "report: control bytes in ids and endpoint names are shown escaped, never raw" {
	mkdir -p "$RUN/logs"
	: >"$RUN/results.ndjson"
	printf '%s\n' '{"t":"req","at":1e9,"id":"evil\n  succeeded 99\u001b[2J","ep":"ep\nx","attempt":1,"sent":1e9,"ms":1,"status":503,"error":null,"rate":0,"breaker":"closed"}' >"$LOG"
	run -0 --separate-stderr rfp-report "$RUN"
	assert_line '  evil\x0a  succeeded 99\x1b[2J'
	refute_line '  succeeded 99'
	[[ $output != *$'\e'* ]]
	assert_line --regexp '^  ep\\x0ax '
	# A bidi override (U+202E) and C1 (U+009B), byte by byte.
	printf '%s\n' '{"t":"req","at":1e9,"id":"rtl\u202ex\u009by","ep":"e","attempt":1,"sent":1e9,"ms":1,"status":503,"error":null,"rate":0,"breaker":"closed"}' >"$LOG"
	run -0 --separate-stderr rfp-report "$RUN"
	assert_line '  rtl\xe2\x80\xaex\xc2\x9by'
}

@test "report: a FIFO where a file of the run directory should be is named, not waited on" {
	mkdir -p "$RUN"
	mkfifo "$RUN/results.ndjson"
	run -1 --separate-stderr timeout 20 rfp-report -q "$RUN"
	[ "$stderr" = "rfp-report: $RUN/results.ndjson: not a regular file" ]
}

@test "report: a corrupt summary.json is named and exits 1, the rest still reported" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 nih >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	echo '{torn' >"$RUN/summary.json"
	run -1 --separate-stderr rfp-report "$RUN"
	[[ ${stderr_lines[0]} == "rfp-report: $RUN/summary.json: "* ]]
	assert_line --regexp '^  succeeded +2$'
}

@test "report: a summary.json that is no object, a line filed twice and a dead_reason that is no string are each named, and counted once" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 4 nih >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	# By hand: a result filed again, and a dead letter with a number
	# for its reason.
	head -n 1 "$RUN/results.ndjson" >>"$RUN/results.ndjson"
	printf '{"id":"x-1","fate":"dead","dead_reason":42,"endpoint":"nih"}\n' >>"$RUN/dead.ndjson"
	echo '[]' >"$RUN/summary.json"
	run -1 --separate-stderr rfp-report "$RUN"
	assert_line --regexp '^  succeeded +4$'
	assert_line --regexp '^  dead-lettered +1$'
	[[ $stderr == *"$RUN/summary.json: not a JSON object; not read"* ]] || fail "$stderr"
	[[ $stderr == *"$RUN/results.ndjson:5: id \"nih-1\" has a result already; counted once"* ]] || fail "$stderr"
	[[ $stderr == *"$RUN/dead.ndjson:1: field \"dead_reason\": not a string; counted as bad_input"* ]] || fail "$stderr"
}

@test "report: letters a later filing superseded, not yet compacted away, are counted as rfp-fetch reads them, without a word" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	run -0 pipeline.sh -q --run-dir "$RUN" "$M"
	# As dead.ndjson holds them while another sink of the run directory
	# runs: nih-1 cut, then filed permanent; x-2 cut, then filed again
	# cut; nih-2 cut and nih-3 dead (its reason mangled: no word of a
	# line that does not count) before their results.
	{
		printf '{"id":"nih-1","fate":"dead","dead_reason":"deadline_cut","endpoint":"nih"}\n'
		printf '{"id":"x-2","fate":"dead","dead_reason":"deadline_cut","endpoint":"nih"}\n'
		printf '{"id":"nih-2","fate":"dead","dead_reason":"deadline_cut","endpoint":"nih"}\n'
		printf '{"id":"nih-3","fate":"dead","dead_reason":7,"endpoint":"nih"}\n'
		printf '{"id":"x-2","fate":"dead","dead_reason":"deadline_cut","endpoint":"nih"}\n'
	} >"$RUN/dead.ndjson"
	grep -v '"nih-1"' "$RUN/results.ndjson" >"$RUN/r" && mv "$RUN/r" "$RUN/results.ndjson"
	printf '{"id":"nih-1","fate":"dead","dead_reason":"permanent","endpoint":"nih"}\n' >>"$RUN/dead.ndjson"
	run -0 --separate-stderr rfp-report "$RUN"
	[ -z "$stderr" ] || fail "$stderr"
	assert_line --regexp '^  succeeded +2$'
	assert_line --regexp '^  dead-lettered +1$'
	assert_line --regexp '^  cut \(deadline\) +1$'
}
