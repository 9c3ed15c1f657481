# PostgreSQL for the shared-state tests, shared by pg.bats (the store, the
# queue's commands, the breaker) and pg-hosts.bats (pipelines standing in
# for hosts): a server from Debian's packages, started per file in a
# temporary directory on a Unix socket only (as the unprivileged user
# nobody when the tests run as root), with one fresh database per test.
# The pipelines are in a file of their own so that bats runs the two at
# once, and the sanitizer pass runs only the first.
# shellcheck shell=bash
load test_helper

setup_file() {
	local bin u
	bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	[ -x "$bin/initdb" ] ||
	    { echo "# initdb not found: install the Debian package postgresql" >&3; return 1; }
	PGDIR=$(mktemp -d /tmp/rfp-pg.XXXXXX)
	u=
	if [ "$(id -u)" -eq 0 ]; then
		chown nobody "$PGDIR"
		u="runuser -u nobody --"
	fi
	$u "$bin/initdb" -D "$PGDIR/data" -A trust -U rfp -E UTF8 --no-sync \
	    >"$PGDIR/initdb.log" 2>&1 || return 1
	$u "$bin/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -o \
	    "-k $PGDIR -c listen_addresses= -c fsync=off -c max_connections=200" \
	    start >/dev/null || return 1
	export PGDIR PGBIN=$bin
}

teardown_file() {
	local u=
	[ "$(id -u)" -eq 0 ] && u="runuser -u nobody --"
	$u "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1
	rm -rf "$PGDIR"
}

setup() {
	DB=t$BATS_TEST_NUMBER
	psql -q "postgresql:///postgres?host=$PGDIR&user=rfp" \
	    -c "CREATE DATABASE $DB"
	URL="postgresql:///$DB?host=$PGDIR&user=rfp"
	HOSTS=()
}

teardown() {
	local p
	for p in "${HOSTS[@]}"; do
		kill -KILL -- "-$p" 2>/dev/null
	done
	mock_stop
	# A session killed client side runs on in the server (a psql's
	# pg_sleep, with the locks it holds) into the next test.
	psql -qAt "postgresql:///postgres?host=$PGDIR&user=rfp" -c \
	    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '$DB'" \
	    >/dev/null 2>&1 || :
}

sql() {
	psql -qAt "$URL" -c "$1"
}

# Of pg_locks, the rows of the test's own database: a server session a
# test killed client side may hold a lock for a while after it.
HERE_DB="database = (SELECT oid FROM pg_database WHERE datname = current_database())"

# id_lock_held: wait (5 s at most) for another process to hold an id lock
# (what every rfp process holds while it runs) in the test's database.
id_lock_held() {
	POLL_STEP=0.1 poll 5 sql_at_least \
	    "SELECT count(*) FROM pg_locks WHERE classid = 7270002 AND granted AND $HERE_DB" 1 || :
}

# docs N: N documents, every tenth failing once with 503, then 30
# submissions to an endpoint that would commit a resent key twice.
docs() {
	local i p
	for i in $(seq 1 "$1"); do
		p=nih
		[ $((i % 10)) -eq 0 ] && p=nih/flaky
		printf '{"id":"doc-%d","url":"%s/%s/doc-%d"}\n' "$i" "$MOCK_URL" "$p" "$i"
	done
	for i in $(seq 1 30); do
		printf '{"id":"app-%d","url":"%s/grants/submit/app-%d","method":"POST","body":{"n":%d},"endpoint":"grants","cycle":"2026-A"}\n' \
		    "$i" "$MOCK_URL" "$i" "$i"
	done
}

# host N ARGS...: pipeline N in a session of its own, in the background.
host() {
	local n=$1
	shift
	setsid "$ROOT/pipeline.sh" -q --config "$BATS_TEST_TMPDIR/c.yaml" \
	    --run-dir "$BATS_TEST_TMPDIR/h$n" --queue "$URL" "$@" \
	    >"$BATS_TEST_TMPDIR/h$n.out" 2>"$BATS_TEST_TMPDIR/h$n.err" 3>&- &
	HOSTS[n]=$!
}

# breaker_opened N: wait (at most 20 s) for host N to say its breaker is
# open; fails if it has not.
breaker_opened() {
	poll 20 matches "$BATS_TEST_TMPDIR/h$1.err" 'the breaker is open'
}

# finish N: wait (at most 60 s) for host N; its exit status must be 0 or 3.
finish() {
	local p=${HOSTS[$1]} rc=0
	POLL_STEP=0.1 poll 60 gone "$p" || fail "host $1 still running after 60 s"
	wait "$p" || rc=$?
	[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] ||
	    fail "host $1 exited $rc: $(cat "$BATS_TEST_TMPDIR/h$1.err")"
}

# unserved N: a manifest of N documents d1...dN whose URLs nothing listens
# on (port 9).
unserved() {
	seq 1 "$1" | awk '{ printf "{\"id\":\"d%d\",\"url\":\"http://127.0.0.1:9/d%d\"}\n", $1, $1 }'
}

# load_unserved N: load unserved N into the queue.
load_unserved() {
	unserved "$1" >"$BATS_TEST_TMPDIR/m"
	rfp-queue --state "$URL" load <"$BATS_TEST_TMPDIR/m" >/dev/null
}

# pull_idle LEASE: rfp-queue pull as owner A, --batch 2, in real time
# (for 60 s at most), in the background, $p its pid, once it has written
# the first two records to $BATS_TEST_TMPDIR/out.
pull_idle() {
	RFPIPE_TIME_SCALE=1 timeout 60 rfp-queue --state "$URL" --owner A \
	    --lease "$1" --batch 2 pull >"$BATS_TEST_TMPDIR/out" &
	p=$!
	out_reaches 2
	[ "$(wc -l <"$BATS_TEST_TMPDIR/out")" -eq 2 ]
}

# pull_rundir LEASE: pull as owner A, --batch 2, on the run directory
# $BATS_TEST_TMPDIR/r (made here), its PID in p; back once it has
# claimed two records.
pull_rundir() {
	mkdir "$BATS_TEST_TMPDIR/r"
	RFPIPE_TIME_SCALE=1 timeout 30 rfp-queue --state "$URL" --owner A \
	    --lease "$1" --batch 2 --run-dir "$BATS_TEST_TMPDIR/r" pull \
	    >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	p=$!
	out_reaches 2
}

# pull_ends_reconciled N: pull $p ends within 10 s having said nothing,
# and the N records of the queue are done, none filed twice.
pull_ends_reconciled() {
	timeout 10 tail --pid="$p" -f /dev/null
	wait "$p"
	[ ! -s "$BATS_TEST_TMPDIR/err" ] || fail "pull said: $(cat "$BATS_TEST_TMPDIR/err")"
	local summary
	summary=$(rfp-queue --state "$URL" summary)
	echo "$summary"
	echo "$summary" | jq -e ".total == $1 and .done == $1 and .refiled == 0 and .reconciled"
}

# y_open: a psql session Y of its own, for a transaction a test holds
# open; y_says [SQL] sends it statements (without SQL, its standard
# input), y_hears WANT [SECS] checks its next line of output (10 s at
# most), y_close ends its input.
y_open() {
	coproc Y { psql -qAt "$URL" 2>&1; }
}

y_says() {
	if [ "$#" -gt 0 ]; then
		echo "$1"
	else
		cat
	fi >&"${Y[1]}"
}

y_hears() {
	local l
	read -r -t "${2:-10}" l <&"${Y[0]}" || :
	[ "$l" = "$1" ] || fail "Y said \"$l\", not \"$1\""
}

y_close() {
	eval "exec ${Y[1]}>&-"
}

# lock_waited: wait (5 s at most) for a session to wait on a lock; fail
# if none does.
lock_waited() {
	poll 5 sql_at_least "SELECT count(*) FROM pg_locks WHERE NOT granted" 1
}

# What poll waits for: QUERY answers VALUE; a count of N or more.
sql_is() {
	[ "$(sql "$1")" = "$2" ]
}
sql_at_least() {
	[ "$(sql "$1")" -ge "$2" ]
}

# sql_reaches QUERY VALUE WHAT: wait (10 s at most) for QUERY to answer
# VALUE; fail saying WHAT did not happen if it does not.
sql_reaches() {
	poll 10 sql_is "$1" "$2" ||
	    fail "$3 (after 10 s: $(sql "$1"), not $2)"
}

# out_reaches N: wait (5 s at most) for N lines in $BATS_TEST_TMPDIR/out.
out_reaches() {
	poll 5 lines_at_least "$1" "$BATS_TEST_TMPDIR/out" || :
}

# filed: the ids in every host's results and dead letters, one a line.
filed() {
	cat "$BATS_TEST_TMPDIR"/h*/results.ndjson "$BATS_TEST_TMPDIR"/h*/dead.ndjson |
	    jq -r .id
}

# wait_for FILE PATTERN: at most 10 s for a line matching PATTERN in FILE.
wait_for() {
	poll 10 matches "$1" "$2" ||
	    fail "nothing matching \"$2\" in $1 after 10 s: $(cat "$1")"
}

# stale_runs FIRST THEN: on one database, 300 documents through rfp's
# endpoint p on the mock's route FIRST, then at once 300 on THEN, each run
# with a run directory of its own; /slow/* is limited to 20/s with no
# burst, /free/* is not.  Time ten times faster, so that the second run
# starts well within the minute after which any pace is only a hint.
stale_runs() {
	local r i
	export RFPIPE_TIME_SCALE=0.1
	printf 'routes:\n  - {match: "/slow/*", endpoint: slow, limits: [{kind: gcra, per_s: 20, burst: 0}]}\n  - {match: "/free/*", endpoint: free}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	for r in "$1" "$2"; do
		for i in $(seq 1 300); do
			printf '{"id":"%s-%d","url":"%s/%s/%d","endpoint":"p"}\n' \
			    "$r" "$i" "$MOCK_URL" "$r" "$i"
		done >"$BATS_TEST_TMPDIR/$r.m"
		run -0 timeout 60 "$ROOT/pipeline.sh" -q -j 32 --seed 1 \
		    --run-dir "$BATS_TEST_TMPDIR/$r" --state "$URL" \
		    "$BATS_TEST_TMPDIR/$r.m"
		[ "$(wc -l <"$BATS_TEST_TMPDIR/$r/results.ndjson")" -eq 300 ]
	done
}

# other_host ALIVE: 4 documents to an unlimited endpoint p, on a database
# where a process on another host had paced p at 2/s a moment ago; with
# ALIVE 1 that process's session (a psql holding its lock) is still
# connected, with 0 it is gone, as a host killed or cut off is.
other_host() {
	local now i
	export RFPIPE_TIME_SCALE=1
	printf 'routes:\n  - {match: "/free/*", endpoint: free}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	if [ "$1" -eq 1 ]; then
		setsid psql -qAt "$URL" -c "SELECT pg_advisory_lock(7270002, hashtext('4242@elsewhere'))" \
		    -c 'SELECT pg_sleep(30)' >/dev/null 2>&1 3>&- &
		HOSTS+=("$!")
		id_lock_held
	fi
	# The schema, as any rfp process makes it.
	rfp-fetch --state "$URL" </dev/null >/dev/null
	now=$(date +%s.%N)
	sql "INSERT INTO rfp_state (kind, key, doc) VALUES ('rate', 'p', '{\"endpoint\": \"p\", \"paced\": 1, \"rate\": 2, \"win\": 4, \"tat\": $now, \"seen\": $now, \"users\": {\"4242@elsewhere\": $now}}')"
	for i in 1 2 3 4; do
		printf '{"id":"d-%d","url":"%s/free/%d","endpoint":"p"}\n' "$i" "$MOCK_URL" "$i"
	done >"$BATS_TEST_TMPDIR/m"
	run -0 timeout 30 "$ROOT/pipeline.sh" -q --run-dir "$BATS_TEST_TMPDIR/r" \
	    --state "$URL" "$BATS_TEST_TMPDIR/m"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/r/results.ndjson")" -eq 4 ]
}

# The store's updates of rfp_state so far (pace, breaker, budget).
state_updates() {
	sql "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'rfp_state'"
}

# pace_listen: another host, listening on rfp_pace into $BATS_TEST_TMPDIR/news
# (psql prints what it was told after each statement) for up to 30 s;
# returns once it listens.
pace_listen() {
	local i
	{
		echo 'LISTEN rfp_pace;'
		for i in $(seq 1 600); do echo 'SELECT pg_sleep(0.05);'; done
	} | psql -X -qAt "$URL" >"$BATS_TEST_TMPDIR/news" 2>&1 &
	HOSTS[0]=$!
	POLL_STEP=0.1 poll 10 sql_at_least \
	    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()" 1 || :
}

# pace_heard: wait up to 10 s for pace_listen's host to be told of a cut,
# then stop it.
pace_heard() {
	POLL_STEP=0.1 poll 10 matches "$BATS_TEST_TMPDIR/news" rfp_pace || :
	kill "${HOSTS[0]}" 2>/dev/null
}

# limited_run AUTHORITY [listen]: 40 documents to /l/ against a 20/s
# limit with no burst, one pipeline on the shared state, -j 8 (run -0);
# AUTHORITY names the mock in the URLs (the endpoint is taken from it),
# "" for the mock's own with endpoint "l".  With listen, a host listens
# for the pace's news (pace_listen) before the run.
limited_run() {
	local i
	printf 'routes:\n  - {match: "/l/*", endpoint: l, limits: [{kind: gcra, per_s: 20, burst: 0}]}\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	for i in $(seq 1 40); do
		if [ -n "$1" ]; then
			printf '{"id":"d%d","url":"http://%s:%s/l/%d"}\n' "$i" \
			    "$1" "$MOCK_PORT" "$i"
		else
			printf '{"id":"d%d","url":"%s/l/%d","endpoint":"l"}\n' \
			    "$i" "$MOCK_URL" "$i"
		fi
	done >"$BATS_TEST_TMPDIR/m"
	rfp-fetch --state "$URL" </dev/null >/dev/null
	[ -z "${2:-}" ] || pace_listen
	run -0 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q -j 8 --state "$URL" \
	    --run-dir "$BATS_TEST_TMPDIR/r" "$BATS_TEST_TMPDIR/m"
	[ "$(jq -r .status "$BATS_TEST_TMPDIR/r/results.ndjson" | grep -c '^200$')" -eq 40 ]
	[ "$(logged '.action == "rate_limited"')" -ge 1 ]
}
