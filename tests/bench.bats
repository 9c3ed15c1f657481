#!/usr/bin/env bats
# The bench is not run by the tests (it takes minutes and measures time),
# so a fault in it would wait for the next bench to show: each script must
# parse (and pass shellcheck with every part it sources: make lint, in
# tests/harness.bats), and its own rules hold on its cheapest path
# (--scale --dry-run: PostgreSQL and nginx start and stop, nothing runs).

load test_helper

@test "bench: run.sh and every part of it parse" {
	local f
	for f in "$ROOT"/bench/run.sh "$ROOT"/bench/lib/*.sh "$ROOT"/bench/*.sh; do
		bash -n "$f" || fail "$f does not parse"
	done
}

@test "bench --work DIR: a directory that was there before is kept, with what it held" {
	[ -n "$(find /usr/lib/postgresql -path '*/bin/initdb' 2>/dev/null)" ] ||
	    skip "initdb not found"
	command -v nginx >/dev/null || skip "nginx not found"
	local w=$BATS_TEST_TMPDIR/work
	mkdir "$w"
	echo mine >"$w/precious.txt"
	run --separate-stderr "$ROOT/bench/run.sh" \
	    --scale --no-build --dry-run --work "$w"
	assert_success
	[ "$(cat "$w/precious.txt")" = mine ]
	[[ $stderr == *"work directory kept: $w"* ]]
}

@test "bench --work DIR: a directory the bench made is removed at the end" {
	[ -n "$(find /usr/lib/postgresql -path '*/bin/initdb' 2>/dev/null)" ] ||
	    skip "initdb not found"
	command -v nginx >/dev/null || skip "nginx not found"
	local w=$BATS_TEST_TMPDIR/new-work
	run --separate-stderr "$ROOT/bench/run.sh" \
	    --scale --no-build --dry-run --work "$w"
	assert_success
	[ ! -e "$w" ]
}

@test "bench --cells: a pattern that matches no cell is named, exit 2, nothing run" {
	local w=$BATS_TEST_TMPDIR/work
	run --separate-stderr "$ROOT/bench/run.sh" \
	    --limiters --no-build --cells 'gcra-1,no-such-*' --work "$w"
	assert_failure 2
	[[ $stderr == *'--cells: "no-such-*" matches no limiter cell: gcra-1 '* ]]
	[ ! -e "$w" ]
	# A cell of the full matrix is none of --quick's.
	run --separate-stderr "$ROOT/bench/run.sh" \
	    --limiters --quick --no-build --cells drop-50-10-ra --work "$w"
	assert_failure 2
	[[ $stderr == *'"drop-50-10-ra" matches no --quick limiter cell'* ]]
	run --separate-stderr "$ROOT/bench/run.sh" \
	    --scale --no-build --cells 'stale-*,queue-9' --work "$w"
	assert_failure 2
	[[ $stderr == *'"queue-9" matches no --scale cell: files-1 '* ]]
	[ ! -e "$w" ]
}

@test "bench --cells: patterns are trimmed, never globbed against files, and an empty one is refused" {
	local w=$BATS_TEST_TMPDIR/work c
	# A file a split pattern would have globbed to, where the bench runs.
	mkdir "$BATS_TEST_TMPDIR/here"
	touch "$BATS_TEST_TMPDIR/here/gcra-9-x"
	cd "$BATS_TEST_TMPDIR/here"
	run --separate-stderr "$ROOT/bench/run.sh" --limiters --no-build \
	    --dry-run --cells ' gcra-1 , nginx*,gcra-*' --work "$w"
	assert_success
	[[ $stderr == *"cells it would measure: gcra-1 "*" nginx-nodelay "* ]]
	[[ $stderr == *" gcra-3-b10 "* ]]
	for c in '' ',' ' ' 'gcra-1,' 'gcra-1,,nginx*'; do
		run --separate-stderr "$ROOT/bench/run.sh" --limiters \
		    --no-build --dry-run --cells "$c" --work "$w"
		assert_failure 2
		[[ $stderr == *"--cells: an empty pattern in \"$c\""* ]]
	done
	[ ! -e "$w" ]
}

@test "bench: a Ctrl-C mid-run stops the runs it started, not only its servers" {
	[ -n "$(find /usr/lib/postgresql -path '*/bin/initdb' 2>/dev/null)" ] ||
	    skip "initdb not found"
	command -v nginx >/dev/null || skip "nginx not found"
	local w=$BATS_TEST_TMPDIR/work b i s=0
	# A process group of its own, as a terminal's foreground job has: the
	# Ctrl-C goes to it, and timeout's groups are others.  Started in the
	# background, it would ignore SIGINT (and a shell cannot trap what it
	# was started ignoring): reset, as a terminal's job has it.
	setsid env --default-signal=INT "$ROOT/bench/run.sh" --scale --quick --no-build \
	    --cells queue-1 --work "$w" 2>"$BATS_TEST_TMPDIR/err" &
	b=$!
	POLL_STEP=0.1 poll 30 running -f "rfp-fetch.*$w/" ||
	    fail "no rfp-fetch ran in 30 s: $(cat "$BATS_TEST_TMPDIR/err")"
	kill -INT -- -"$b"
	POLL_STEP=0.1 poll 30 gone "$b" ||
	    fail "the bench still runs 30 s after the Ctrl-C"
	wait "$b" || s=$?
	[ "$s" -eq 130 ] || fail "exit $s, not 130"
	POLL_STEP=0.1 poll 5 not running -f "$w/" || :
	run pgrep -af "$w/"
	[ -z "$output" ] || fail "still running after the bench: $output"
}

# bench/lib/limiters.sh's functions, in a shell of their own, with the
# globals bench/run.sh would set; $1 is run there.
lim_shell() {
	bash -c '
	set -eu
	here=$1/bench work=$2 quick= cells= dry=
	lim_tsv=$work/lim.tsv lim_ep_tsv=$work/eps.tsv lim_notes=$work/notes
	. "$here/lib/common.sh"
	. "$here/lib/limiters.sh"
	eval "$3"' lim_shell "$ROOT" "$BATS_TEST_TMPDIR" "$1"
}

@test "bench --limiters: a cell of several portals is judged portal by portal" {
	local t=$BATS_TEST_TMPDIR hdr ep
	hdr='cell\ttool\tn\tallowed\tideal\tmakespan\tscale\trequests\trefusals\tsaved\tdead\tdead_quota\tcpu\texit\ttimeout\tclock\trate\tspan\n'
	ep='cell\ttool\tendpoint\tideal\trequests\trefusals\tok\tmaxin\tspan\n'
	# The whole cell is within its targets (23 of 742 refused, 1.10 x),
	# one of its portals is not (7 of 71): the cell fails, and says which.
	printf "$hdr" >"$t/lim.tsv"
	printf 'mix-4\trfpipe\t724\t724\t21\t23.5\t1\t747\t23\t724\t0\t0\t0.6\tok\t50\treal\t-\t23.02\n' >>"$t/lim.tsv"
	printf 'mix-4\trfpipe-told\t724\t724\t21\t22\t1\t725\t1\t724\t0\t0\t0.6\tok\t50\treal\t-\t21.5\n' >>"$t/lim.tsv"
	{
		printf "$ep"
		printf 'mix-4\trfpipe\tnih\t14.95\t306\t6\t300\t1\t16.6\n'
		printf 'mix-4\trfpipe\tgrants\t21\t71\t7\t64\t1\t23.02\n'
		printf 'mix-4\trfpipe\tnsf\t15\t306\t6\t300\t6\t15.58\n'
		printf 'mix-4\trfpipe-told\tnih\t14.95\t300\t0\t300\t1\t15.2\n'
		printf 'mix-4\trfpipe-told\tsam\t19.67\t61\t1\t60\t1\t20\n'
	} >"$t/eps.tsv"
	run lim_shell lim_checks
	assert_success
	echo "$output"
	[[ ${lines[0]} == "FAIL mix-4, rfpipe (rate not told):"*"refusals 23/747 = 3.1 % <= 5 % FAIL"*"nih 6/306 refused (2.0 %), 1.110 x PASS; grants 7/71 refused (9.9 %), 1.096 x FAIL; nsf 6/306 refused (2.0 %), 1.039 x PASS" ]]
	[[ ${lines[1]} == "FAIL mix-4, rfpipe, rate told:"*"sam 1/61 refused (1.6 %), 1.017 x FAIL" ]]
	# Every portal within: the cell passes.
	sed -i 's/\tgrants\t21\t71\t7\t64/\tgrants\t21\t67\t3\t64/' "$t/eps.tsv"
	sed -i '/rfpipe-told\tsam/d' "$t/eps.tsv"
	run lim_shell lim_checks
	[[ ${lines[0]} == "PASS mix-4, rfpipe (rate not told):"* ]]
	[[ ${lines[1]} == "PASS mix-4, rfpipe, rate told:"* ]]
	# A portal slower than its own ideal allows fails it, refusals or not.
	sed -i 's/\tnsf\t15\t306\t6\t300\t6\t15.58/\tnsf\t15\t306\t6\t300\t6\t18.5/' "$t/eps.tsv"
	run lim_shell lim_checks
	[[ ${lines[0]} == "FAIL mix-4, rfpipe (rate not told):"*"nsf 6/306 refused (2.0 %), 1.233 x FAIL" ]]
}

@test "bench --limiters: the portals of a mix cell interleave from the first line to the last" {
	run lim_shell 'shape=mix extra="eps=a:3/b:1/c:0,delays=b:250" port=9
		gen_mix "$work"
		jq -r .id "$work/manifest.ndjson" | paste -sd " " -
		jq -r .url "$work/manifest.ndjson" | sed -n 3p
		lim_delays | jq -c .
		mix_eps | paste -sd " " -'
	assert_success
	[ "${lines[0]}" = "a-1 a-2 b-1 a-3" ]
	[ "${lines[1]}" = "http://127.0.0.1:9/b/doc-1" ]
	[ "${lines[2]}" = '{"b":250}' ]
	[ "${lines[3]}" = "a 3 b 1" ]
}
