#!/usr/bin/env bats
# The -O2 build that is installed, under valgrind's memcheck: whole runs
# that take every stage down its paths (refusals, retries, an outage of a
# document, a submission whose reply is lost, a parser, bad input, a
# report, PostgreSQL state and the queue), each stage a valgrind process.
# No invalid read or write, no use of an uninitialised value, no block
# lost (definitely or indirectly) at exit.  The sanitizer pass finds most
# of this; not a value read before it was written, nor what only -O2 does.

load pg

# vg_path: put wrappers first in PATH that run each stage of the build in
# PATH under memcheck, each run's report in a file of its own in $VGLOG
# (STAGE.XXXXXX: a PID may come again); the mock portal is left as it is
# (a test tool).  A stage's exit status is its own: what memcheck says is
# read by vg_clean.
vg_path() {
	local bin f n
	command -v valgrind >/dev/null ||
	    fail "valgrind not found: install the Debian package valgrind (scripts/deps.sh test)"
	bin=$(dirname "$(command -v rfp-fetch)")
	VGLOG=$BATS_TEST_TMPDIR/vglog
	mkdir -p "$BATS_TEST_TMPDIR/vg" "$VGLOG"
	for f in "$bin"/rfp-*; do
		n=${f##*/}
		[ "$n" != rfp-mockportal ] || continue
		printf '#!/bin/sh\nlog=$(mktemp %s/%s.XXXXXX) || exit 1\nexec valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --child-silent-after-fork=yes --log-file="$log" %s "$@"\n' \
		    "$VGLOG" "$n" "$f" >"$BATS_TEST_TMPDIR/vg/$n"
		chmod +x "$BATS_TEST_TMPDIR/vg/$n"
	done
	PATH=$BATS_TEST_TMPDIR/vg:$PATH
	# A stage under memcheck starts in a second and runs 20 to 50 times
	# slower: the run's time collapses less (the timeouts are config's).
	export RFPIPE_TIME_SCALE=0.05
}

# vg_clean STAGE:WORD...: every run under memcheck ended as a process
# does (a stage killed by a signal has no leak check, and its report no
# summary) with no error, lost blocks counted; and each STAGE ran under it
# with WORD in its command line (an option or command only the run's work
# has: rfpipe also starts stages to ask them things, --check, --list,
# --help, on empty input, and those alone prove nothing).
vg_clean() {
	local a f bad=0
	for f in "$VGLOG"/*; do
		grep -q '^==[0-9]*== ERROR SUMMARY: 0 errors' "$f" && continue
		echo "# ${f##*/}:"
		cat "$f"
		bad=1
	done
	[ "$bad" -eq 0 ] || fail "memcheck reported the errors above, or a stage did not end"
	for a; do
		grep -h '^==[0-9]*== Command: ' "$VGLOG/${a%%:*}".* 2>/dev/null |
		    grep -v -e ' --check' -e ' --list' -e ' --help' |
		    grep -qF -e "${a#*:}" ||
		    fail "${a%%:*} never ran with \"${a#*:}\" under valgrind: $(grep -h 'Command: ' "$VGLOG"/*)"
	done
}

# night M: a night's manifest against the mock: documents, submissions,
# PDFs to parse, and a line of each kind of bad input.
night() {
	local i
	for i in $(seq 1 16); do
		printf '{"id":"NIH-%02d","url":"%s/nih/project/%d","endpoint":"nih"}\n' "$i" "$MOCK_URL" "$i"
	done
	for i in 1 2 3 4 5 6; do
		printf '{"id":"GR-%d","url":"%s/grants/opportunity/%d","endpoint":"grants"}\n' "$i" "$MOCK_URL" "$i"
	done
	printf '{"id":"GR-missing","url":"%s/grants/missing","endpoint":"grants"}\n' "$MOCK_URL"
	for i in 1 2; do
		printf '{"id":"APP-%d","url":"%s/grants/apply/%d","method":"POST","body":{"n":%d},"endpoint":"grants","cycle":"2026-A"}\n' \
		    "$i" "$MOCK_URL" "$i" "$i"
	done
	for i in 1 2 3 4; do
		printf '{"id":"NSF-%d","url":"%s/nsf/award/%d.pdf","endpoint":"nsf","expect":{"magic":"%%PDF-"}}\n' "$i" "$MOCK_URL" "$i"
	done
	printf '{"id":"NSF-bad","url":"%s/nsf/bad.pdf","endpoint":"nsf"}\n' "$MOCK_URL"
	printf '{not json\n'
	printf '{"id":"no-url"}\n'
	printf '{"id":"../../etc","url":"%s/nih/escape"}\n' "$MOCK_URL"
	printf '{"id":"ftp-1","url":"ftp://127.0.0.1/etc/passwd"}\n'
	huge_record "\"id\":\"huge\",\"url\":\"$MOCK_URL/nih/huge\","
}

@test "memcheck: a night's run through every stage, its report and a run again with --retry-dead, valgrind-clean" {
	mock_start "$FIX/memcheck/portal.yaml"
	vg_path
	night >"$BATS_TEST_TMPDIR/m"
	R=$BATS_TEST_TMPDIR/r
	run -3 timeout 240 "$ROOT/pipeline.sh" -q --seed 1 --run-dir "$R" \
	    --config "$FIX/memcheck/rfpipe.yaml" "$BATS_TEST_TMPDIR/m"
	# Reconciled: every line admitted is a result or a dead letter.
	[ "$(cat "$R/results.ndjson" "$R/dead.ndjson" | jq -s 'map(.id) | unique | length')" -eq 34 ] ||
	    fail "$(jq -c '{id, dead_reason}' "$R/dead.ndjson")"
	jq -s -e 'map(select(.id == "NIH-13"))[0].dead_reason == "exhausted"' "$R/dead.ndjson"
	jq -s -e 'map(select(.id == "NSF-bad"))[0].dead_reason == "parse_failed"' "$R/dead.ndjson"
	[ "$(jq -s 'map(select(.dead_reason == "bad_input")) | length' "$R/dead.ndjson")" -eq 5 ]
	# The submission whose reply was lost was committed once.
	[ "$(jq -s 'map(select(.committed and .duplicate)) | length' "$MOCK_LOG")" -eq 0 ]
	[ "$(jq -s 'map(select(.id == "APP-1" and .status == 200)) | length' "$R/results.ndjson")" -eq 1 ]
	# The report, and the run again on its directory: what was filed is
	# skipped, the dead letters tried once more (--retry-dead).
	run -0 timeout 120 "$ROOT/pipeline.sh" report -q --html "$BATS_TEST_TMPDIR/r.html" "$R"
	[ -s "$BATS_TEST_TMPDIR/r.html" ]
	run -3 timeout 240 "$ROOT/pipeline.sh" -q --retry-dead --seed 1 --run-dir "$R" \
	    --config "$FIX/memcheck/rfpipe.yaml" "$BATS_TEST_TMPDIR/m"
	vg_clean rfp-fetch:--retry-fifo rfp-classify:--config rfp-backoff:--admitted \
	    rfp-sink:--retry-fifo rfp-parse:--run-dir rfp-report:--html
}

@test "memcheck: hosts' state and the queue in PostgreSQL, a corrupt row among them, valgrind-clean" {
	mock_start "$FIX/memcheck/portal.yaml"
	vg_path
	night >"$BATS_TEST_TMPDIR/m"
	run -0 rfp-queue --state "$URL" load <"$BATS_TEST_TMPDIR/m"
	sql "UPDATE rfp_queue SET rec = '[1]' WHERE id = 'GR-6'"
	run timeout 240 "$ROOT/pipeline.sh" -q --seed 1 --run-dir "$BATS_TEST_TMPDIR/r" \
	    --config "$FIX/memcheck/rfpipe.yaml" --queue "$URL"
	[ "$status" -eq 3 ] || fail "exit $status: $output"
	[ "$(sql "SELECT count(*) FROM rfp_queue WHERE status NOT IN ('done', 'dead')")" -eq 0 ]
	[ "$(sql "SELECT count(*) FROM rfp_results WHERE dead_reason = 'bad_input'")" -ge 1 ]
	run -0 rfp-queue --state "$URL" summary
	vg_clean 'rfp-queue: load' 'rfp-queue: pull' 'rfp-queue: file' \
	    rfp-fetch:--from-queue rfp-classify:--config rfp-backoff:--admitted \
	    rfp-sink:--retry-fifo rfp-parse:--run-dir
}
