#!/usr/bin/env bats
# rfp-mockportal itself: scenario errors name file, line and key; redirects;
# the limiter zoo (limits:) and --ideal.

load test_helper

# scenario TEXT: write a scenario file and try to start the portal on it.
scenario() {
	printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/s.yaml"
	run --separate-stderr timeout 10 rfp-mockportal \
	    --scenario "$BATS_TEST_TMPDIR/s.yaml" --port 0
}

@test "mockportal: an empty, multi-line or misspelt location is refused with file, line and key" {
	scenario $'routes:\n  - match: /a\n    location: ""'
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfp-mockportal: $BATS_TEST_TMPDIR/s.yaml:3: key \"routes.0.location\": expected a non-empty one-line string" ]
	scenario $'routes:\n  - match: /a\n    script: [302]\n    location: "/b\\r\\nX-Injected: 1"'
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'s.yaml:4: key "routes.0.location": expected a non-empty one-line string' ]]
	scenario $'routes:\n  - match: /a\n    locaton: /b'
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'s.yaml:3: unknown key "routes.0.locaton"' ]]
}

@test "mockportal: a route's 3xx answers carry its location; its other answers do not" {
	printf '%s\n' 'routes:' '  - match: /a' '    script: [302, 200]' \
	    '    location: /b' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	run curl -sS -o /dev/null -D - "$MOCK_URL/a"
	[[ "$output" == "HTTP/1.1 302"* ]]
	[[ "$output" == *$'\nLocation: /b\r'* ]]
	run curl -sS -o /dev/null -D - "$MOCK_URL/a"
	[[ "$output" == "HTTP/1.1 200"* ]]
	[[ "$output" != *Location* ]]
}

@test "mockportal: body_file serves the file as it is, named from the scenario's directory" {
	mkdir "$BATS_TEST_TMPDIR/sc"
	cp "$FIX/parse/award.pdf" "$BATS_TEST_TMPDIR/sc/a.pdf"
	printf '%s\n' 'routes:' '  - match: "/p/*"' '    body: pdf' '    body_file: a.pdf' \
	    '  - match: "/j/*"' '    body_file: a.pdf' >"$BATS_TEST_TMPDIR/sc/s.yaml"
	cd /
	mock_start "$BATS_TEST_TMPDIR/sc/s.yaml"
	run -0 curl -sS -o "$BATS_TEST_TMPDIR/got" -w '%{content_type}' "$MOCK_URL/p/1"
	[ "$output" = application/pdf ]
	cmp "$BATS_TEST_TMPDIR/got" "$FIX/parse/award.pdf"
	run -0 curl -sS -o "$BATS_TEST_TMPDIR/got" -w '%{content_type}' "$MOCK_URL/j/1"
	[ "$output" = application/json ]
	cmp "$BATS_TEST_TMPDIR/got" "$FIX/parse/award.pdf"
}

@test "mockportal: a body_file that cannot be read, with body_bytes, or on an html route is refused with file, line and key" {
	scenario $'routes:\n  - match: /a\n    body_file: no-such.pdf'
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfp-mockportal: $BATS_TEST_TMPDIR/s.yaml:3: key \"routes.0.body_file\": cannot read \"$BATS_TEST_TMPDIR/no-such.pdf\": No such file or directory" ]
	scenario $'routes:\n  - match: /a\n    body: pdf\n    body_bytes: 10\n    body_file: s.yaml'
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'s.yaml:5: key "routes.0.body_file": excludes body_bytes' ]]
	scenario $'routes:\n  - match: /a\n    body: html\n    body_file: s.yaml'
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'s.yaml:4: key "routes.0.body_file": applies only to body "json", "pdf" or "text"' ]]
}

# The limiter zoo (limits:).  Real intervals are logical ones times 0.01.
export RFPIPE_TIME_SCALE=0.01

# limits_scenario LINE...: a scenario of one route /z/* (endpoint z) with
# the given lines appended under it, started.
limits_scenario() {
	printf '%s\n' 'routes:' '  - match: "/z/*"' '    endpoint: z' "$@" \
	    >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
}

# burst N [PREFIX]: N requests for PREFIX/doc-1..N (default /z) at once,
# one connection each; prints "status seconds" per answer.
burst() {
	curl -s -Z --parallel-immediate --parallel-max 200 -o /dev/null \
	    -w '%{http_code} %{time_total}\n' "$MOCK_URL${2:-/z}/doc-[1-$1]" \
	    2>/dev/null
}

# one PATH: one request; prints its status.
one() {
	curl -s -m 10 -o /dev/null -w '%{http_code}\n' "$MOCK_URL$1"
}

# header NAME: the value of header NAME in the headers in $output.
header() {
	tr -d '\r' <<<"$output" | sed -n "s/^$1: //Ip" | head -n 1
}

@test "mockportal: --ready-fd gets the port and a newline once it listens, then end of file while it serves" {
	local f=$BATS_TEST_TMPDIR/ready
	mkfifo "$f"
	MOCK_LOG=$BATS_TEST_TMPDIR/mock.log
	rfp-mockportal --scenario "$FIX/mock/ok.yaml" --ready-fd 4 \
	    --log "$MOCK_LOG" 4>"$f" >/dev/null 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	MOCK_PID=$!
	# To end of file: the portal closed it, and runs on.
	timeout 5 cat "$f" >"$BATS_TEST_TMPDIR/got"
	kill -0 "$MOCK_PID"
	MOCK_PORT=$(cat "$BATS_TEST_TMPDIR/got")
	[[ $MOCK_PORT =~ ^[1-9][0-9]*$ ]]
	printf '%s\n' "$MOCK_PORT" | cmp - "$BATS_TEST_TMPDIR/got"
	# It listened before it said so.
	MOCK_URL=http://127.0.0.1:$MOCK_PORT
	[ "$(one /nih/doc-1)" = 200 ]
	[ "$(requests_for /nih/doc-1)" -eq 1 ]
	[ ! -s "$BATS_TEST_TMPDIR/err" ]
}

@test "mockportal: a port it cannot listen on is an error, and --ready-fd ends with no line" {
	mock_start "$FIX/mock/ok.yaml"
	run --separate-stderr timeout 10 bash -c 'rfp-mockportal --scenario "$1" \
	    --port "$2" --ready-fd 4 4>&1 >/dev/null' sh "$FIX/mock/ok.yaml" "$MOCK_PORT"
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	[[ $stderr == *"rfp-mockportal: listen 127.0.0.1:$MOCK_PORT: cannot start the server"* ]]
	# mock_start's wait ends at once, and says why.
	run --separate-stderr ready_start m rfp-mockportal \
	    --scenario "$FIX/mock/ok.yaml" --port "$MOCK_PORT" --ready-fd 4
	[ "$status" -eq 1 ]
	[[ $stderr == "m: fd 4 closed with no line: rfp-mockportal: "*"listen 127.0.0.1:$MOCK_PORT: cannot start the server"* ]]
}

@test "mockportal: --ready-fd below 3, not open, or with --ideal is a usage error" {
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" --ready-fd 1
	[ "${stderr_lines[0]}" = 'rfp-mockportal: option --ready-fd: expected an integer from 3 to 2147483647, got "1"' ]
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" --ready-fd 9 9>&-
	[ "${stderr_lines[0]}" = 'rfp-mockportal: option --ready-fd: 9 is not an open file descriptor' ]
	[[ ${stderr_lines[1]} == 'usage: rfp-mockportal '* ]]
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" --ideal 3 --ready-fd 4 4>/dev/null
	[ "${stderr_lines[0]}" = 'rfp-mockportal: option --ideal starts no server: no --log, --port, --port-file, --ready-fd, --seed, --tls-* or --hold-at' ]
}

@test "mockportal: --tls-cert and --tls-key go together; {port} in a location is its own port" {
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" --tls-cert /dev/null
	[[ "${stderr_lines[0]}" == "rfp-mockportal: options --tls-cert and --tls-key go together" ]]
	printf 'routes:\n  - match: /a\n    script: [302]\n    location: "http://localhost:{port}/b"\n' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	run -0 curl -si "$MOCK_URL/a"
	[[ "$output" == *$'\nLocation: http://localhost:'"$MOCK_PORT"$'/b\r'* ]]
}

@test "limits: gcra nodelay lets burst+1 of 30 at once through, refuses the rest at once, and refusals cost nothing" {
	local burst=10
	# One slot per 100 logical s (1 s real); answers take 0.3 s.
	limits_scenario '    delay_ms: 30000' '    limits:' \
	    "      - {kind: gcra, per_s: 0.01, burst: $burst, retry_after: 7}"
	t0=$(date +%s.%N)
	run burst 30
	[ "$(grep -c '^200 ' <<<"$output")" -eq $((burst + 1)) ]
	[ "$(grep -c '^429 ' <<<"$output")" -eq $((30 - burst - 1)) ]
	# Refused in front of the backend: without the route's delay_ms.
	awk '$1 == 429 && $2 >= 0.25 { bad = 1 } END { exit bad }' <<<"$output"
	[ "$(logged '.status == 200 and .limiter == null')" -eq $((burst + 1)) ]
	[ "$(logged '.action == "rate_limited" and .limiter == "gcra" and .status == 429 and .retry_after == "7"')" -eq $((30 - burst - 1)) ]
	# A slot a second is free again from the burst on: the 19 refusals
	# took none (taken, none would be free for 19 s).  How many is read
	# off the clock, not assumed: on a busy machine the burst itself has
	# taken over a second.
	sleep 0.8
	t1=$(date +%s.%N)
	run burst 5 /z/later
	t2=$(date +%s.%N)
	n=$(grep -c '^200 ' <<<"$output" || true)
	awk -v n="$n" -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN {
	    # The first request of the burst reached it up to 0.3 s after t0.
	    lo = int(t1 - t0 - 0.3); if (lo < 1) lo = 1
	    hi = int(t2 - t0); if (hi > 5) hi = 5
	    printf "%d let through, %d to %d free\n", n, lo, hi
	    exit !(n >= lo && n <= hi) }'
}

@test "limits: a delaying gcra holds the burst one interval apart and refuses beyond it at once" {
	local burst=3
	limits_scenario '    limits:' \
	    "      - {kind: gcra, per_s: 0.02, burst: $burst, nodelay: false}"
	run burst 8
	[ "$(grep -c '^200 ' <<<"$output")" -eq $((burst + 1)) ]
	[ "$(grep -c '^429 ' <<<"$output")" -eq $((8 - burst - 1)) ]
	# The last one let through waited about burst intervals (0.5 s each).
	awk -v b=$burst '$1 == 200 && $2 > max { max = $2 }
	    END { exit !(max >= b * 0.5 - 0.05) }' <<<"$output"
	awk '$1 == 429 && $2 > 0.3 { bad = 1 } END { exit bad }' <<<"$output"
	# Logged: one not held, then held 50 s, 100 s, 150 s (logical).
	[ "$(logged '.status == 200 and .queued_ms == null')" -eq 1 ]
	run jq -s -c '[.[] | select(.queued_ms != null) | .queued_ms / 50000 | round] | sort' "$MOCK_LOG"
	[ "$output" = "[1,2,3]" ]
	[ "$(logged '.limiter == "gcra" and .queued_ms == null and .status == 429')" -eq $((8 - burst - 1)) ]
}

@test "limits: stall_every reads every nth request stall_ms late, and its limits judge it by then" {
	# One slot per 100 logical s (1 s real).  The second request, sent
	# at once after the first, is read 1.2 s late: judged then, the slot
	# is free again (judged as it came, it was refused).  The third, sent
	# at once after the second's answer, is refused: the second took the
	# slot when it was read.
	limits_scenario '    stall_every: 2' '    stall_ms: 120000' '    limits:' \
	    '      - {kind: gcra, per_s: 0.01}'
	[ "$(one /z/a)" = 200 ]
	[ "$(one /z/b)" = 200 ]
	[ "$(one /z/c)" = 429 ]
	run jq -s -c '[.[] | select(.kind == "request") | .stalled]' "$MOCK_LOG"
	[ "$output" = "[false,true,false]" ]
	# Logged at the read: 1.2 s after the first.
	jq -s -e '[.[] | select(.kind == "request") | .t] | .[1] - .[0] >= 1.15' "$MOCK_LOG"
}

@test "limits: stall_every counts every request of the endpoint, on all its routes" {
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-'EOF'
	routes:
	  - {match: "/x/*", endpoint: e, stall_every: 3, stall_ms: 100}
	  - {match: "/y/*", endpoint: e}
	EOF
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	for i in 1 2 3; do one /x/$i >/dev/null; one /y/$i >/dev/null; done
	run jq -s -c '[.[] | select(.kind == "request") | .stalled]' "$MOCK_LOG"
	[ "$output" = "[false,false,true,false,false,false]" ]
}

@test "limits: a limiter's status and Retry-After are its own: 503 with none" {
	limits_scenario '    limits:' \
	    '      - {kind: gcra, per_s: 0.01, status: 503}'
	run curl -s -o /dev/null -D - "$MOCK_URL/z/a"
	[[ "$output" == "HTTP/1.1 200"* ]]
	run curl -s -o /dev/null -D - "$MOCK_URL/z/b"
	[[ "$output" == "HTTP/1.1 503"* ]]
	[ -z "$(header Retry-After)" ]
	[ "$(logged '.status == 503 and .limiter == "gcra" and .retry_after == null')" -eq 1 ]
}

@test "limits: a fixed window counts refused hits (count_refused), or only accepted ones" {
	local cr
	for cr in true false; do
		mock_stop
		rm -f "$BATS_TEST_TMPDIR/mock.log"
		# A slot in flight at a time, 0.3 s each; 4 a window of 10 s.
		limits_scenario '    delay_ms: 30000' '    limits:' \
		    '      - {kind: concurrency, max: 1}' \
		    "      - {kind: fixed_window, limit: 4, window_s: 1000, count_refused: $cr}"
		run burst 3
		[ "$(grep -c '^200 ' <<<"$output")" -eq 1 ]
		[ "$(logged '.limiter == "concurrency"')" -eq 2 ]
		for i in 1 2 3; do one "/z/next-$i"; done
		if [ $cr = true ]; then
			# 3 hits counted: one more fits, then the window is full.
			[ "$(logged '.status == 200')" -eq 2 ]
			[ "$(logged '.limiter == "fixed_window"')" -eq 2 ]
		else
			[ "$(logged '.status == 200')" -eq 4 ]
			[ "$(logged '.limiter == "fixed_window"')" -eq 0 ]
		fi
	done
}

@test "limits: fixed windows start with the server; X-RateLimit-Reset says when the next opens" {
	# 2 a window of 300 logical s (3 s real): three requests, each a
	# curl, in each window from the server's start.  At 1 s, a machine
	# busy with six suites at once had turned the window before the
	# third.
	limits_scenario '    limits:' \
	    '      - {kind: fixed_window, limit: 2, window_s: 300, headers: x}'
	run curl -s -o /dev/null -D - "$MOCK_URL/z/1"
	[ "$(header X-RateLimit-Limit)" = 2 ]
	[ "$(header X-RateLimit-Remaining)" = 1 ]
	run curl -s -o /dev/null -D - "$MOCK_URL/z/2"
	[ "$(header X-RateLimit-Remaining)" = 0 ]
	run curl -s -o /dev/null -D - "$MOCK_URL/z/3"
	[[ "$output" == "HTTP/1.1 429"* ]]
	[ "$(header X-RateLimit-Remaining)" = 0 ]
	reset=$(header X-RateLimit-Reset)
	[ "$reset" -ge 1 ]
	[ "$reset" -le 300 ]
	sleep "$(awk -v r="$reset" 'BEGIN { print r * 0.01 + 0.05 }')"
	[ "$(one /z/4)" = 200 ]
	[ "$(one /z/5)" = 200 ]
	[ "$(one /z/6)" = 429 ]
}

@test "limits: a sliding window holds at most limit in any trailing window" {
	# 2 in any 200 logical s (2 s real): b comes 1 s after a, so e, sent
	# just after d, meets b still in the window even on a loaded machine
	# (at 1 s and 0.5 s apart, e once came after b had slid out).
	limits_scenario '    limits:' \
	    '      - {kind: sliding_window, limit: 2, window_s: 200, headers: ietf}'
	[ "$(one /z/a)" = 200 ]
	sleep 1
	[ "$(one /z/b)" = 200 ]
	run curl -s -o /dev/null -D - "$MOCK_URL/z/c"
	[[ "$output" == "HTTP/1.1 429"* ]]
	[ "$(header RateLimit-Policy)" = '"sliding_window";q=2;w=200' ]
	[[ "$(header RateLimit)" =~ ^\"sliding_window\"\;r=0\;t=([0-9]+)$ ]]
	t=${BASH_REMATCH[1]}
	[ "$t" -ge 1 ]
	[ "$t" -le 200 ]
	# When a slides out, one slot frees; b still holds the other (a fixed
	# window starting then would let two through).
	sleep "$(awk -v t="$t" 'BEGIN { print t * 0.01 + 0.05 }')"
	[ "$(one /z/d)" = 200 ]
	[ "$(one /z/e)" = 429 ]
	# Never more than 2 accepted within 2 s of each other.
	jq -e -s '[.[] | select(.status == 200) | .t_answer] as $a |
	    all($a[]; . as $t | [$a[] | select(. > $t - 2 and . <= $t)] |
	    length <= 2)' "$MOCK_LOG"
}

@test "limits: a concurrency cap refuses at once over max in flight, and frees slots as answers finish" {
	local max=3
	# Every answer takes 0.8 s.
	limits_scenario '    delay_ms: 80000' '    limits:' \
	    "      - {kind: concurrency, max: $max, retry_after: 1}"
	run burst 10
	[ "$(grep -c '^200 ' <<<"$output")" -eq $max ]
	[ "$(grep -c '^429 ' <<<"$output")" -eq $((10 - max)) ]
	awk '$1 == 429 && $2 > 0.4 { bad = 1 } END { exit bad }' <<<"$output"
	run burst 10 /z/again
	[ "$(grep -c '^200 ' <<<"$output")" -eq $max ]
	[ "$(logged '.limiter == "concurrency" and .retry_after == "1"')" -eq $((20 - 2 * max)) ]
	# At no instant were more than max accepted answers under way.
	jq -e -s --argjson max $max '[.[] | select(.status == 200) | .t_answer] as $a |
	    all($a[]; . as $t | [$a[] | select(. <= $t and . + 0.8 > $t)] |
	    length <= $max)' "$MOCK_LOG"
}

@test "limits: a quota refuses everything after limit, for the rest of the run, with its Retry-After" {
	local limit=5 i
	limits_scenario '    limits:' \
	    "      - {kind: quota, limit: $limit, retry_after: 86400, headers: x}"
	for i in $(seq 1 $limit); do
		run curl -s -o /dev/null -D - "$MOCK_URL/z/$i"
		[[ "$output" == "HTTP/1.1 200"* ]]
		[ "$(header X-RateLimit-Remaining)" = $((limit - i)) ]
	done
	for i in 1 2 3; do
		run curl -s -o /dev/null -D - "$MOCK_URL/z/more-$i"
		[[ "$output" == "HTTP/1.1 429"* ]]
		[ "$(header Retry-After)" = 86400 ]
		[ "$(header X-RateLimit-Remaining)" = 0 ]
		sleep 0.2
	done
	[ "$(logged '.limiter == "quota" and .retry_after == "86400"')" -eq 3 ]
}

@test "limits: per: path keeps one state per path; per endpoint, one for all" {
	printf '%s\n' 'routes:' \
	    '  - match: "/pp/*"' \
	    '    limits: [{kind: gcra, per_s: 0.001, per: path}]' \
	    '  - match: "/pe/*"' \
	    '    limits: [{kind: gcra, per_s: 0.001}]' >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	run one /pp/a; [ "$output" = 200 ]
	run one /pp/a; [ "$output" = 429 ]
	run one /pp/b; [ "$output" = 200 ]
	run one /pp/b; [ "$output" = 429 ]
	run one /pe/a; [ "$output" = 200 ]
	run one /pe/b; [ "$output" = 429 ]
}

@test "limits: from_s and until_s switch limiters on and off (a portal tightening at night)" {
	# Burst 2 for the first 300 logical s (3 s real), burst 0 after.  At
	# 1 s, a machine busy with six suites at once was past it before the
	# day's last request.
	limits_scenario '    limits:' \
	    '      - {kind: gcra, per_s: 0.01, burst: 2, until_s: 300, headers: ietf, name: day}' \
	    '      - {kind: gcra, per_s: 0.01, from_s: 300, headers: ietf, name: night}'
	run burst 5 /z/day
	[ "$(grep -c '^200 ' <<<"$output")" -eq 3 ]
	run curl -s -o /dev/null -D - "$MOCK_URL/z/day-x"
	[[ "$(header RateLimit-Policy)" == '"day";q=3;w='* ]]
	sleep 3.1
	run burst 5 /z/night
	[ "$(grep -c '^200 ' <<<"$output")" -eq 1 ]
	run curl -s -o /dev/null -D - "$MOCK_URL/z/night-x"
	[[ "$(header RateLimit-Policy)" == '"night";q=1;w='* ]]
	[ "$(logged '.status == 200')" -eq 4 ]
}

@test "limits: header forms x-epoch and draft7 are present and parse; stacked ietf policies are listed together" {
	printf '%s\n' 'routes:' \
	    '  - match: "/e/*"' \
	    '    limits: [{kind: fixed_window, limit: 3, window_s: 600, headers: x-epoch}]' \
	    '  - match: "/d/*"' \
	    '    limits: [{kind: gcra, per_s: 0.5, burst: 4, headers: draft7}]' \
	    '  - match: "/s/*"' \
	    '    limits:' \
	    '      - {kind: quota, limit: 9, headers: ietf}' \
	    '      - {kind: sliding_window, limit: 4, window_s: 60, headers: ietf, name: minute}' \
	    >"$BATS_TEST_TMPDIR/s.yaml"
	mock_start "$BATS_TEST_TMPDIR/s.yaml"
	run curl -s -o /dev/null -D - "$MOCK_URL/e/1"
	now=$(date +%s)
	[ "$(header X-RateLimit-Limit)" = 3 ]
	[ "$(header X-RateLimit-Remaining)" = 2 ]
	reset=$(header X-RateLimit-Reset)
	[ "$reset" -ge "$now" ]
	[ "$reset" -le $((now + 602)) ]
	run curl -s -o /dev/null -D - "$MOCK_URL/d/1"
	[ "$(header RateLimit)" = "limit=5, remaining=4, reset=0" ]
	[ "$(header RateLimit-Policy)" = "5;w=10" ]
	[ -z "$(header X-RateLimit-Limit)" ]
	run curl -s -o /dev/null -D - "$MOCK_URL/s/1"
	[ "$(header RateLimit-Policy)" = '"quota";q=9;w=86400, "minute";q=4;w=60' ]
	[[ "$(header RateLimit)" =~ ^\"quota\"\;r=8\;t=[0-9]+,\ \"minute\"\;r=3\;t=[0-9]+$ ]]
}

@test "limits: the legacy rate's refusals are logged with limiter rate; other answers with null" {
	mock_start "$FIX/mock/ratelimit.yaml"
	run burst 5 /nih
	[ "$(grep -c '^200 ' <<<"$output")" -ge 1 ]
	[ "$(logged '.status == 200 and .limiter == null and .queued_ms == null')" -eq "$(grep -c '^200 ' <<<"$output")" ]
	[ "$(logged '.action == "rate_limited" and .limiter == "rate"')" -eq "$(grep -c '^429 ' <<<"$output")" ]
}

@test "limits: the zoo fixture loads, and each of its endpoints answers" {
	mock_start "$FIX/mock/zoo.yaml"
	for ep in gcra delay fixed sliding conc quota night stacked perpath; do
		[ "$(one "/$ep/doc-1")" = 200 ]
	done
}

# ideal ARGS...: rfp-mockportal --ideal with ARGS on $BATS_TEST_TMPDIR/s.yaml.
ideal() {
	run --separate-stderr rfp-mockportal --scenario "$BATS_TEST_TMPDIR/s.yaml" --ideal "$@"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
}

# ideal_of DELAY_MS LIMITS N: the --ideal N output for one route with them.
ideal_of() {
	printf 'routes:\n  - match: /a\n    delay_ms: %s\n    limits: [%s]\n' \
	    "$1" "$2" >"$BATS_TEST_TMPDIR/s.yaml"
	ideal "$3" --allowed
}

@test "ideal: each shape's makespan by its formula, plus the latency once" {
	# gcra nodelay: (30 - (4 + 1)) / 2 + 0.5
	ideal_of 500 '{kind: gcra, per_s: 2, burst: 4}' 30
	[ "$output" = $'13.000\nallowed 30' ]
	# delaying: (9 - 1) / 4
	ideal_of 0 '{kind: gcra, per_s: 4, burst: 2, nodelay: false}' 9
	[ "$output" = $'2.000\nallowed 9' ]
	# windows: floor(99 / 7) * 60 + 0.25
	ideal_of 250 '{kind: fixed_window, limit: 7, window_s: 60}' 100
	[ "$output" = $'840.250\nallowed 100' ]
	ideal_of 250 '{kind: sliding_window, limit: 7, window_s: 60}' 100
	[ "$output" = $'840.250\nallowed 100' ]
	# concurrency: ceil(10 / 4) * 1.5
	ideal_of 1500 '{kind: concurrency, max: 4}' 10
	[ "$output" = $'4.500\nallowed 10' ]
	# quota: 5 of 12, at 1/s: (5 - 1) / 1
	ideal_of 0 '{kind: quota, limit: 5}, {kind: gcra, per_s: 1}' 12
	[ "$output" = $'4.000\nallowed 5' ]
	# stacked: max((40 - 10) / 1, floor(39 / 10) * 60)
	ideal_of 0 '{kind: gcra, per_s: 1, burst: 9}, {kind: fixed_window, limit: 10, window_s: 60}' 40
	[ "$output" = $'180.000\nallowed 40' ]
	# per path: one request per document never binds
	ideal_of 0 '{kind: gcra, per_s: 0.001, per: path}' 40
	[ "$output" = $'0.000\nallowed 40' ]
}

@test "ideal: with from_s/until_s or an outage it simulates, and agrees with the formulas where both apply" {
	local l lims a
	for l in '{kind: gcra, per_s: 2, burst: 4}' \
	    '{kind: gcra, per_s: 3, burst: 2, nodelay: false}' \
	    '{kind: fixed_window, limit: 3, window_s: 0.3}' \
	    '{kind: sliding_window, limit: 3, window_s: 0.7}' \
	    '{kind: concurrency, max: 4}'; do
		ideal_of 250 "$l" 100
		a=$output
		ideal_of 250 "${l%\}}, until_s: 1e9}" 100
		[ "$output" = "$a" ]
	done
	# 10/s for 10 s (100 documents), then 1/s: the 150th goes at 59 s.
	lims='{kind: gcra, per_s: 10, until_s: 10}, {kind: gcra, per_s: 1, from_s: 10}'
	ideal_of 0 "$lims" 150
	[ "$output" = $'59.000\nallowed 150' ]
	# A quota that lapses at 30 s: 5 at once, the other 7 at 30 s.
	ideal_of 0 '{kind: quota, limit: 5, until_s: 30}' 12
	[ "$output" = $'30.000\nallowed 12' ]
	# 1/s, down from 5 s to 65 s: 0..4 s, then 65..71 s.
	printf '%s\n' 'routes:' '  - match: /a' '    limits: [{kind: gcra, per_s: 1}]' \
	    '    outage: {start_s: 5, end_s: 65}' >"$BATS_TEST_TMPDIR/s.yaml"
	ideal 12
	[ "$output" = 71.000 ]
}

@test "ideal: the endpoint is the first route's unless named; the legacy rate counts" {
	printf '%s\n' 'routes:' '  - match: /a' '    endpoint: a' \
	    '    rate: {per_s: 4}' '  - match: /b' '    endpoint: b' \
	    '    delay_ms: 2000' '    limits: [{kind: concurrency, max: 2}]' \
	    >"$BATS_TEST_TMPDIR/s.yaml"
	ideal 9
	[ "$output" = 2.000 ]
	ideal 9 --endpoint b
	[ "$output" = 10.000 ]
	run --separate-stderr rfp-mockportal --ideal 9 --endpoint c \
	    --scenario "$BATS_TEST_TMPDIR/s.yaml"
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfp-mockportal: $BATS_TEST_TMPDIR/s.yaml: no route has endpoint \"c\"" ]
	run --separate-stderr rfp-mockportal --ideal 9 --log x \
	    --scenario "$BATS_TEST_TMPDIR/s.yaml"
	[ "$status" -eq 2 ]
	run --separate-stderr rfp-mockportal --allowed \
	    --scenario "$BATS_TEST_TMPDIR/s.yaml"
	[ "$status" -eq 2 ]
	[[ "$stderr" == "rfp-mockportal: option --allowed needs --ideal"* ]]
}

@test "mockportal: epoch: first_request starts the scenario's clock at the first request, not at start-up" {
	local e
	for e in listen first_request; do
		printf '%s\n' "epoch: $e" 'routes:' '  - match: /a' \
		    '    outage: {start_s: 0, end_s: 50}' >"$BATS_TEST_TMPDIR/s.yaml"
		mock_start "$BATS_TEST_TMPDIR/s.yaml"
		# 0.6 s: past the 0.5 s outage counted from start-up.
		sleep 0.6
		run -0 curl -sS -o /dev/null -w '%{http_code}' "$MOCK_URL/a"
		if [ "$e" = listen ]; then
			[ "$output" = 200 ]
		else
			[ "$output" = 503 ]
		fi
		mock_stop
	done
	scenario $'epoch: first\nroutes: []'
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfp-mockportal: $BATS_TEST_TMPDIR/s.yaml:1: key \"epoch\": expected listen or first_request" ]
}

@test "mockportal: epoch: first_request: a 405 to a route starts the clock, with rate-limit headers or without" {
	local h
	for h in "" ", limits: [{kind: gcra, per_s: 100, burst: 10, headers: ietf}]"; do
		printf '%s\n' 'epoch: first_request' 'routes:' \
		    "  - {match: /a, methods: [GET], outage: {start_s: 0, end_s: 50}$h}" \
		    >"$BATS_TEST_TMPDIR/s.yaml"
		mock_start "$BATS_TEST_TMPDIR/s.yaml"
		run -0 curl -sS -o /dev/null -w '%{http_code}' -X POST "$MOCK_URL/a"
		[ "$output" = 405 ]
		# 0.6 s after that first request: past the 0.5 s outage.
		sleep 0.6
		run -0 curl -sS -o /dev/null -w '%{http_code}' "$MOCK_URL/a"
		[ "$output" = 200 ] || fail "headers '$h': $output"
		mock_stop
	done
}

@test "limits: bad limiters are refused with file, line and key" {
	local f="$BATS_TEST_TMPDIR/s.yaml"
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: leaky\n        per_s: 1'
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfp-mockportal: $f:4: key \"routes.0.limits.0.kind\": expected \"gcra\", \"fixed_window\", \"sliding_window\", \"concurrency\" or \"quota\"" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - per_s: 1'
	[ "$stderr" = "rfp-mockportal: $f:4: key \"routes.0.limits.0\": missing key \"kind\"" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: gcra\n        burst: 1'
	[ "$stderr" = "rfp-mockportal: $f:4: key \"routes.0.limits.0\": missing key \"per_s\"" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: quota\n        limit: 3\n        burst: 1'
	[ "$stderr" = "rfp-mockportal: $f:6: key \"routes.0.limits.0.burst\": not a key of kind \"quota\"" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: quota\n        limits: 3'
	[ "$stderr" = "rfp-mockportal: $f:5: unknown key \"routes.0.limits.0.limits\"" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: gcra\n        per_s: 0'
	[ "$stderr" = "rfp-mockportal: $f:5: key \"routes.0.limits.0.per_s\": expected a positive number" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: gcra\n        per_s: 1\n        status: 302'
	[ "$stderr" = "rfp-mockportal: $f:6: key \"routes.0.limits.0.status\": expected an integer from 400 to 599" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: gcra\n        per_s: 1\n        nodelay: "no"'
	[ "$stderr" = "rfp-mockportal: $f:6: key \"routes.0.limits.0.nodelay\": expected true or false" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: gcra\n        per_s: 1\n        per: client'
	[ "$stderr" = "rfp-mockportal: $f:6: key \"routes.0.limits.0.per\": expected \"endpoint\" or \"path\"" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: quota\n        limit: 1\n        from_s: 10\n        until_s: 5'
	[ "$stderr" = "rfp-mockportal: $f:7: key \"routes.0.limits.0.until_s\": must be after from_s" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - kind: concurrency\n        max: 2\n        headers: x'
	[ "$stderr" = "rfp-mockportal: $f:6: key \"routes.0.limits.0.headers\": a concurrency limiter sends no headers: expected \"none\"" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - {kind: quota, limit: 2, headers: x}\n      - {kind: quota, limit: 3, headers: x-epoch}'
	[ "$stderr" = "rfp-mockportal: $f:5: key \"routes.0.limits.1.headers\": routes.0.limits.0 sends X-RateLimit-* already" ]
	scenario $'routes:\n  - match: /a\n    limits:\n      - {kind: fixed_window, limit: 2, window_s: 9, retry_after: "date:soon"}'
	[ "$stderr" = "rfp-mockportal: $f:4: key \"routes.0.limits.0.retry_after\": expected \"date:+N\" or \"date:-N\" with N in seconds" ]
	scenario $'routes:\n  - match: /a\n    endpoint: e\n    limits: [{kind: quota, limit: 2}]\n  - match: /b\n    endpoint: e\n    limits: [{kind: quota, limit: 3}]'
	[ "$stderr" = "rfp-mockportal: $f:7: key \"routes.1.limits\": differs from routes.0.limits for endpoint \"e\"" ]
	scenario $'routes:\n  - match: /a\n    rate: {per_s: 1}\n    ratelimit_headers: true\n    limits: [{kind: quota, limit: 2, headers: draft7}]'
	[ "$stderr" = "rfp-mockportal: $f:4: key \"routes.0.ratelimit_headers\": endpoint \"/a\" has limits that send headers (routes.0.limits)" ]
	scenario $'routes:\n  - match: /a\n    stall_every: 1.5'
	[ "$stderr" = "rfp-mockportal: $f:3: key \"routes.0.stall_every\": expected an integer from 0 to 9223372036854775807" ]
	scenario $'routes:\n  - match: /a\n    stall_ms: -3'
	[ "$stderr" = "rfp-mockportal: $f:3: key \"routes.0.stall_ms\": expected a number from 0 to 86400000" ]
	[ "$status" -eq 2 ]
}

@test "mockportal: --hold-at holds every request after the nth, undecided, until SIGUSR1; the next hold follows" {
	local i
	mock_start "$FIX/mock/ok.yaml" --hold-at 2 --hold-at 4
	[ "$(one /nih/doc-1)" = 200 ]
	[ "$(one /nih/doc-2)" = 200 ]
	# The third waits: asked with a deadline, it gets no answer.
	[ "$(curl -s -o /dev/null -m 0.5 -w '%{http_code}' "$MOCK_URL/nih/doc-3")" = 000 ]
	mock_held 1 5
	# A control request is not held.
	[ "$(one /_health)" = 200 ]
	# Held: undecided, so not yet logged.
	[ "$(requests_for /nih/doc-3)" -eq 0 ]
	curl -s -o "$BATS_TEST_TMPDIR/a4" -w '%{http_code}\n' "$MOCK_URL/nih/doc-4" >"$BATS_TEST_TMPDIR/s4" &
	i=$!
	sleep 0.3
	kill -0 "$i"
	mock_release
	wait "$i"
	[ "$(cat "$BATS_TEST_TMPDIR/s4")" = 200 ]
	jq -s -e '[.[] | select(.path == "/nih/doc-4")] | length == 1 and .[0].held' "$MOCK_LOG"
	# Four have come: the second hold begins with the fifth.
	[ "$(curl -s -o /dev/null -m 0.5 -w '%{http_code}' "$MOCK_URL/nih/doc-6")" = 000 ]
	mock_held 2 5
	mock_release
	[ "$(one /nih/doc-7)" = 200 ]
	jq -s -e '[.[] | select(.kind == "hold") | .after] == [2, 4] and
	    ([.[] | select(.kind == "release")] | length) == 2 and
	    ([.[] | select(.path == "/nih/doc-1" or .path == "/nih/doc-7") | .held] == [false, false])' "$MOCK_LOG"
}

@test "mockportal: --hold-at takes rising counts, 16 at most, and not with --ideal" {
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" --hold-at 5 --hold-at 5
	[ "${stderr_lines[0]}" = 'rfp-mockportal: option --hold-at: expected an integer from 6 to 9223372036854775806, got "5"' ]
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" --hold-at -1
	[[ ${stderr_lines[0]} == 'rfp-mockportal: option --hold-at: expected an integer from 0 to '* ]]
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" $(seq -f '--hold-at %g' 1 17)
	[ "${stderr_lines[0]}" = 'rfp-mockportal: option --hold-at: at most 16' ]
	run -2 --separate-stderr rfp-mockportal --scenario "$FIX/mock/ok.yaml" --ideal 3 --hold-at 1
	[[ ${stderr_lines[0]} == *'--hold-at'* ]]
}
