#!/usr/bin/env bats
# Issue #24, what rfpipe reads and writes on disk and how long it waits:
# the run directory is ours or refused, its files are never written
# through a planted link, body_file stays under its root and is streamed,
# a record admitted is never refused later for its size, every wait is
# bounded by max_retry_after, and short or failed writes are loud.

load test_helper

setup() {
	RD=$BATS_TEST_TMPDIR/run
	M=$BATS_TEST_TMPDIR/m
}

# as_other CMD...: run CMD as the unprivileged user nobody when root (a
# mode means nothing to root), as is otherwise.
as_other() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u nobody -- env PATH="$PATH" RFPIPE_TIME_SCALE="$RFPIPE_TIME_SCALE" "$@"
	else
		"$@"
	fi
}

@test "files: a line just under 1 MiB is filed done with its id, once, across a resume (#24)" {
	mock_start "$FIX/mock/ok.yaml"
	{
		manifest /nih 1
		# 100 bytes under the cap: what rfp-fetch adds takes it over.
		padded_record "\"id\":\"big\",\"url\":\"$MOCK_URL/nih/big\"," $((1048576 - 100))
	} >"$M"
	[ "$(sed -n 2p "$M" | wc -c)" -eq $((1048576 - 100 + 1)) ]
	run timeout 60 rfpipe --run-dir "$RD" -q "$M"
	assert_success
	[ "$(jq -s '[.[] | select(.id == "big")] | length' "$RD/results.ndjson")" -eq 1 ]
	[ ! -s "$RD/dead.ndjson" ]
	run timeout 60 rfpipe --run-dir "$RD" -q "$M"
	assert_success
	[ "$(jq -s 'length' "$RD/results.ndjson")" -eq 2 ]
	[ ! -s "$RD/dead.ndjson" ]
}

@test "files: fetch: a record over 1 MiB as written is dead bad_input with its id, not sent (#24)" {
	mock_start "$FIX/mock/ok.yaml"
	{
		# 1e15 is written 1000000000000000.0: 300 kB read, 1.1 MB written.
		printf '{"id":"wide","url":"%s/nih/wide","n":[' "$MOCK_URL"
		yes 1e15, | head -n 60000 | tr -d '\n'
		printf '1]}\n'
		manifest /nih 1
	} >"$M"
	run --separate-stderr timeout 20 rfp-fetch --run-dir "$RD" <"$M"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "${#lines[0]}" -lt 2000 ]
	check wide '.fate == "dead" and .dead_reason == "bad_input" and .line == 1'
	[ "$(requests_for /nih/wide)" -eq 0 ]
	[[ "${stderr_lines[0]}" =~ ^'rfp-fetch: line 1: record "wide" is '[0-9]+' bytes as written, over 1048576'$ ]]
	# Filed dead once: a resume skips it.
	printf '%s\n' "${lines[0]}" >"$RD/dead.ndjson"
	run --separate-stderr timeout 20 rfp-fetch --run-dir "$RD" --resume <"$M"
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "${#stderr_lines[@]}" -eq 0 ]
}

@test "files: --check refuses the lines the run refuses for their size as written, naming them alike (#24)" {
	mock_start "$FIX/mock/ok.yaml"
	{
		manifest /nih 1
		# 2 bytes under the cap as read; its endpoint, added, takes it over.
		padded_record "\"id\":\"tall\",\"url\":\"$MOCK_URL/nih/tall\"," $((1048576 - 2))
		# 1e15 is written 1000000000000000.0: 300 kB read, 1.1 MB written.
		printf '{"id":"wide","url":"%s/nih/wide","n":[' "$MOCK_URL"
		yes 1e15, | head -n 60000 | tr -d '\n'
		printf '1]}\n'
	} >"$M"
	run -2 --separate-stderr timeout 60 rfpipe --check "$M"
	[[ $output == *"manifest: 3 lines, 1 documents, 2 bad"* ]]
	[ "${#stderr_lines[@]}" -eq 2 ]
	[[ "${stderr_lines[0]}" =~ ^'rfp-fetch: line 2: record "tall" is '[0-9]+' bytes as written, over 1048576'$ ]]
	[[ "${stderr_lines[1]}" =~ ^'rfp-fetch: line 3: record "wide" is '[0-9]+' bytes as written, over 1048576'$ ]]
	local said=$stderr
	run -3 --separate-stderr timeout 60 rfpipe -q --run-dir "$RD" "$M"
	[ "$stderr" = "$said" ]
	jq -s -e 'map([.id, .dead_reason, .line]) == [["tall","bad_input",2],["wide","bad_input",3]]' "$RD/dead.ndjson"
	[ "$(requests_for)" -eq 1 ]
}

@test "files: a run directory of another user, or writable by others, is refused in one line, exit 2 from rfpipe, 1 from a stage (#24)" {
	manifest /nih 1 >"$M"
	mkdir -m 777 "$RD"
	chmod 777 "$RD"
	run --separate-stderr timeout 20 rfpipe --run-dir "$RD" "$M"
	[ "$status" -eq 2 ]
	[[ "${stderr_lines[0]}" == *"run directory $RD: writable by others (mode 0777); chmod go-w it" ]]
	[ -z "$(ls -A "$RD")" ]
	for s in rfp-fetch rfp-sink; do
		run --separate-stderr timeout 20 "$s" --run-dir "$RD" </dev/null
		[ "$status" -eq 1 ]
		[ "$stderr" = "$s: run directory $RD: writable by others (mode 0777); chmod go-w it" ]
	done
	[ "$(id -u)" -eq 0 ] || skip "chown needs root"
	chmod 700 "$RD"
	chown nobody "$RD"
	run --separate-stderr timeout 20 rfp-sink --run-dir "$RD" </dev/null
	[ "$status" -eq 1 ]
	[[ "$stderr" == "rfp-sink: run directory $RD: owned by uid $(id -u nobody), not by this user (uid 0)" ]]
}

@test "files: a run directory named by a slip (other files in it, none of a run's) is refused in one line, nothing written in it; an empty one or a fresh mount's is taken" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 >"$M"
	mkdir -m 700 "$RD"
	echo mine >"$RD/notes.txt"
	run --separate-stderr timeout 20 rfpipe --run-dir "$RD" -q "$M"
	[ "$status" -eq 2 ]
	[ "$stderr" = "rfpipe: run directory $RD: holds other files and no state/: name a new or empty directory, or mkdir -- \"$RD/state\" if it is one" ]
	[ "$(ls -A "$RD")" = notes.txt ]
	# Nor is a project's docs/ or a home's logs/ beside its own files.
	mkdir "$RD/docs" "$RD/logs"
	run -2 --separate-stderr timeout 20 rfpipe --run-dir "$RD" -q "$M"
	[ "$(ls -A "$RD" | tr '\n' ' ')" = "docs logs notes.txt " ]
	# A docs/ alone (a volume mounted for the bodies) is a run's.
	mkdir -m 700 -p "$BATS_TEST_TMPDIR/vol/docs"
	run timeout 20 rfpipe --run-dir "$BATS_TEST_TMPDIR/vol" -q "$M"
	assert_success
	# As the message says: state/ made, it is one.
	mkdir "$RD/state"
	run timeout 20 rfpipe --run-dir "$RD" -q "$M"
	assert_success
	[ "$(wc -l <"$RD/results.ndjson")" -eq 2 ]
	# Empty, or holding only lost+found (a file system of its own): taken.
	mkdir -m 700 "$BATS_TEST_TMPDIR/mnt" "$BATS_TEST_TMPDIR/mnt/lost+found"
	run timeout 20 rfpipe --run-dir "$BATS_TEST_TMPDIR/mnt" -q "$M"
	assert_success
	[ "$(wc -l <"$BATS_TEST_TMPDIR/mnt/results.ndjson")" -eq 2 ]
}

@test "files: a link planted in the run directory is not written through (#24)" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 >"$M"
	mkdir -p "$RD/state" "$RD/docs" "$RD/logs"
	chmod 700 "$RD" "$RD"/*
	echo precious >"$BATS_TEST_TMPDIR/target"
	ln -s "$BATS_TEST_TMPDIR/target" "$RD/results.ndjson"
	run --separate-stderr timeout 20 rfpipe --run-dir "$RD" -q "$M"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"$RD/results.ndjson: a symbolic link (the run directory's files are never followed: put the file itself there)"* ]]
	[ "$(cat "$BATS_TEST_TMPDIR/target")" = precious ]
	rm "$RD/results.ndjson"
	ln -s "$BATS_TEST_TMPDIR/target" "$RD/state/ledger.ndjson"
	printf '{"id":"s1","url":"%s/nih/s1","method":"POST","body":{}}\n' "$MOCK_URL" >"$M"
	run --separate-stderr timeout 20 rfp-fetch --run-dir "$RD" <"$M"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"open $RD/state/ledger.ndjson: a symbolic link (the run directory's files are never followed"* ]]
	[ "$(cat "$BATS_TEST_TMPDIR/target")" = precious ]
	rm "$RD/state/ledger.ndjson"
	ln -s "$BATS_TEST_TMPDIR/target" "$RD/summary.json"
	manifest /nih 1 >"$M"
	run timeout 20 rfpipe --run-dir "$RD" -q "$M"
	assert_success
	[ "$(cat "$BATS_TEST_TMPDIR/target")" = precious ]
	[ ! -L "$RD/summary.json" ]
}

@test "files: a file where a run directory keeps a directory of its own is refused before any stage starts, exit 2, nothing sent" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 >"$M"
	local d
	for d in state/owners state/slots state/rate state/breaker logs docs/.part; do
		rm -rf "$RD"
		mkdir -p "$RD/state" "$RD/docs"
		: >"$RD/$d"
		run --separate-stderr timeout 20 rfpipe -q --run-dir "$RD" "$M"
		[ "$status" -eq 2 ]
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" == *"run directory $RD/$d: not a directory" ]]
	done
	[ "$(requests_for)" -eq 0 ]
}

@test "files: a symbolic link for state/, results.ndjson, dead.ndjson, state/claims.ndjson or logs/attempts.ndjson is refused as one before any stage starts, exit 2, one line, nothing sent" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 >"$M"
	local f want
	for f in state results.ndjson dead.ndjson state/claims.ndjson logs/attempts.ndjson; do
		rm -rf "$RD" "$BATS_TEST_TMPDIR/real"
		mkdir -p "$RD/state" "$RD/logs" "$BATS_TEST_TMPDIR/real"
		if [ "$f" = state ]; then
			rmdir "$RD/state"
			want="run directory $RD/state: a symbolic link, never followed (put the directory itself there)"
		else
			want="$RD/$f: a symbolic link (the run directory's files are never followed: put the file itself there)"
		fi
		ln -s "$BATS_TEST_TMPDIR/real" "$RD/$f"
		run --separate-stderr timeout 20 rfpipe -q --run-dir "$RD" "$M"
		[ "$status" -eq 2 ] || fail "$f: $status: $stderr"
		[ "${#stderr_lines[@]}" -eq 1 ] || fail "$f: $stderr"
		[[ "$stderr" == *": $want" ]] || fail "$f: $stderr"
	done
	[ "$(requests_for)" -eq 0 ]
}

@test "files: a file where a parser's room is, with a parser configured, is refused before any stage starts, exit 2, nothing sent" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 2 >"$M"
	printf 'parse:\n  command: [cat]\n' >"$BATS_TEST_TMPDIR/c.yaml"
	mkdir -p "$RD/state" "$RD/docs"
	: >"$RD/docs/.parse"
	run --separate-stderr timeout 20 rfpipe -q --config "$BATS_TEST_TMPDIR/c.yaml" --run-dir "$RD" "$M"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"run directory $RD/docs/.parse: not a directory" ]]
	[ "$(requests_for)" -eq 0 ]
}

@test "files: a read-only run directory exits 2, as rfpipe(1) says, and does not hang (#24)" {
	local d
	d=$(mktemp -d /tmp/rfp-files.XXXXXX)
	chmod 755 "$d"
	mkdir -p "$d/run/state" "$d/run/docs" "$d/run/logs"
	manifest /nih 1 >"$d/m"
	[ "$(id -u)" -ne 0 ] || chown -R nobody "$d"
	chmod 555 "$d/run"
	run --separate-stderr as_other timeout 20 rfpipe --run-dir "$d/run" -q "$d/m"
	chmod 755 "$d/run"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"run directory $d/run: Permission denied"* ]]
	chmod 555 "$d/run/state"
	run --separate-stderr as_other timeout 20 rfpipe --run-dir "$d/run" -q "$d/m"
	chmod 755 "$d/run/state"
	rm -rf "$d"
	[ "$status" -eq 2 ]
}

# body_file BODYFILE: a POST of BODYFILE to the mock's submit route.
body_record() {
	printf '{"id":"%s","url":"%s/grants/submit/%s","method":"POST","body_file":"%s"}\n' \
	    "$1" "$MOCK_URL" "$1" "$2"
}

@test "files: fetch: body_file only under its root, no link, no FIFO, no device, nothing too large (#24)" {
	mock_start "$FIX/mock/submit.yaml"
	local d=$BATS_TEST_TMPDIR/man
	mkdir -p "$d/sub" "$BATS_TEST_TMPDIR/out"
	echo '{"a":1}' >"$d/sub/ok.json"
	echo s3cr3t-content >"$BATS_TEST_TMPDIR/out/secret"
	ln -s "$BATS_TEST_TMPDIR/out/secret" "$d/link"
	ln -s "$BATS_TEST_TMPDIR/out" "$d/dirlink"
	mkfifo "$d/fifo"
	head -c 3000 /dev/zero >"$d/big"
	{
		body_record ok sub/ok.json
		body_record abs "$d/sub/ok.json"
		body_record link link
		body_record dirlink dirlink/secret
		body_record up ../out/secret
		body_record outside "$BATS_TEST_TMPDIR/out/secret"
		body_record fifo fifo
		body_record stdin /dev/stdin
		body_record environ /proc/self/environ
		body_record big big
		body_record dir sub
	} >"$d/m"
	run --separate-stderr timeout 20 rfp-fetch --max-body 2000 <"$d/m"
	assert_success
	[ "${#lines[@]}" -eq 11 ]
	check ok '.status == 200'
	check abs '.status == 200'
	for id in link dirlink up outside fifo stdin environ big dir; do
		check "$id" '.fate == "dead" and .dead_reason == "bad_input"'
		[ "$(requests_for "/grants/submit/$id")" -eq 0 ]
	done
	[ "$(jq -s '[.[] | select(.kind == "request")] | map(.body_bytes) | add' "$MOCK_LOG")" -eq 16 ]
	[ "${#stderr_lines[@]}" -eq 9 ]
	[ "${stderr_lines[0]}" = 'rfp-fetch: line 3: field "body_file": cannot read "link": a symbolic link' ]
	[ "${stderr_lines[1]}" = 'rfp-fetch: line 4: field "body_file": cannot read "dirlink/secret": a symbolic link or a file on its way' ]
	[ "${stderr_lines[2]}" = 'rfp-fetch: line 5: field "body_file": cannot read "../out/secret": outside body_root' ]
	[ "${stderr_lines[4]}" = 'rfp-fetch: line 7: field "body_file": cannot read "fifo": not a regular file' ]
	[ "${stderr_lines[7]}" = 'rfp-fetch: line 10: field "body_file": "big" is too large: 3000 bytes, over max_body 2000' ]
	[[ "$output" != *s3cr3t* ]]
}

@test "files: fetch: a body_root reached through a symbolic link takes absolute paths by either name, and no more (#24)" {
	mock_start "$FIX/mock/submit.yaml"
	local d=$BATS_TEST_TMPDIR/data
	mkdir -p "$d/bodies" "$BATS_TEST_TMPDIR/srv"
	ln -s "$d/bodies" "$BATS_TEST_TMPDIR/srv/bodies"
	echo '{"a":1}' >"$d/bodies/ok.json"
	echo s3cr3t >"$d/secret"
	printf 'body_root: %s\n' "$BATS_TEST_TMPDIR/srv/bodies" >"$BATS_TEST_TMPDIR/c.yaml"
	{
		body_record named "$BATS_TEST_TMPDIR/srv/bodies/ok.json"
		body_record real "$d/bodies/ok.json"
		body_record rel ok.json
		body_record beside "$BATS_TEST_TMPDIR/srv/bodies2/ok.json"
		body_record up "$BATS_TEST_TMPDIR/srv/bodies/../../data/secret"
	} >"$M"
	run --separate-stderr timeout 20 rfp-fetch --config "$BATS_TEST_TMPDIR/c.yaml" <"$M"
	assert_success
	check named '.status == 200'
	check real '.status == 200'
	check rel '.status == 200'
	check beside '.fate == "dead" and .dead_reason == "bad_input"'
	check up '.fate == "dead" and .dead_reason == "bad_input"'
	[ "$(requests_for /grants/submit/beside)" -eq 0 ]
	[ "$(requests_for /grants/submit/up)" -eq 0 ]
	[[ "$output" != *s3cr3t* ]]
}

@test "files: fetch: body_root from the config; a body is streamed, not held (#24)" {
	mock_start "$FIX/mock/submit.yaml"
	local d=$BATS_TEST_TMPDIR/bodies
	mkdir -p "$d"
	head -c 40000000 /dev/zero >"$d/b1"
	printf 'body_root: %s\n' "$d" >"$BATS_TEST_TMPDIR/c.yaml"
	body_record b1 b1 >"$M"
	# GNU time's %M: the largest resident size, in kB.
	run --separate-stderr timeout 60 /usr/bin/time -f %M -o "$BATS_TEST_TMPDIR/rss" \
	    rfp-fetch --config "$BATS_TEST_TMPDIR/c.yaml" <"$M"
	assert_success
	check b1 '.status == 200'
	[ "$(jq -s '[.[] | select(.kind == "request")][0].body_bytes' "$MOCK_LOG")" -eq 40000000 ]
	# Held, the 40 MB body alone would pass any bound under 40,000 kB:
	# 11,604 kB plain, 31,040 under ASan (the bound was 30,000).
	[ "$(cat "$BATS_TEST_TMPDIR/rss")" -lt 36000 ]
}

@test "files: fetch: X-RateLimit-Remaining 0 with a reset past max_retry_after is a quota, not a hang (#24)" {
	mock_start "$BATS_TEST_DIRNAME/fixtures/files/quota-headers.yaml"
	manifest /q 4 q >"$M"
	run --separate-stderr timeout 20 rfp-fetch -j 1 --run-dir "$RD" <"$M"
	assert_success
	[ "${#lines[@]}" -eq 4 ]
	check q-1 '.status == 200'
	# One may have been sent before the first answer was read: the
	# portal's 429 then; the others are held as a quota, not for a day.
	jq -s -e '[.[] | select(.id != "q-1")] | all(.status == 429 or
	    (.fate == "dead" and .dead_reason == "quota" and
	    (.dead_detail | test("come back at"))))' <<<"$output"
	[ "$(jq -s '[.[] | select(.dead_reason == "quota")] | length' <<<"$output")" -ge 2 ]
	# The resume does not hang either.
	run --separate-stderr timeout 20 rfp-fetch -j 1 --run-dir "$RD" <"$M"
	assert_success
	[ "${#lines[@]}" -eq 4 ]
}

@test "files: fetch: a not_before past max_retry_after is bad_input in one line (#24)" {
	mock_start "$FIX/mock/ok.yaml"
	{
		printf '{"id":"far","url":"%s/nih/far","fate":"retry","attempt":1,"not_before":1e300}\n' "$MOCK_URL"
		printf '{"id":"str","url":"%s/nih/str","fate":"retry","attempt":1,"not_before":"soon"}\n' "$MOCK_URL"
		printf '{"id":"near","url":"%s/nih/near","fate":"retry","attempt":1,"not_before":1}\n' "$MOCK_URL"
	} >"$M"
	run --separate-stderr timeout 20 rfp-fetch --run-dir "$RD" <"$M"
	assert_success
	check far '.fate == "dead" and .dead_reason == "bad_input"'
	check str '.fate == "dead" and .dead_reason == "bad_input"'
	check near '.status == 200'
	[ "${stderr_lines[0]}" = 'rfp-fetch: line 1: field "not_before": not a time within max_retry_after (3600 s) of now' ]
	[ "${#stderr_lines[@]}" -eq 2 ]
}

@test "files: a Retry-After of 999999999999 is dead quota, not retried as bad, and holds the endpoint as 7200 does (#24)" {
	mock_start "$BATS_TEST_DIRNAME/fixtures/files/huge-retry-after.yaml"
	manifest /ra 4 ra >"$M"
	run timeout 30 rfpipe --run-dir "$RD" -q -j 1 "$M"
	[ "$status" -eq 3 ]
	jq -s -e 'length == 4 and all(.dead_reason == "quota")' "$RD/dead.ndjson"
	# The first answer, and at most one sent while it was being filed:
	# read as no Retry-After, the gate sent all four to hear it.
	[ "$(jq -s '[.[] | select(.kind == "request")] | length' "$MOCK_LOG")" -le 2 ]
	# A year at the most (logical time), not 31,700 years.
	jq -e --argjson now "$(date +%s)" --argjson k "$RFPIPE_TIME_SCALE" \
	    '.quota_until > $now + 300 * 86400 * $k and
	    .quota_until <= $now + 366 * 86400 * $k + 60' "$RD/state/rate/ra.json"
}

@test "files: fetch: expect.min_bytes 1e300 or \"100\" and expect.json \"yes\" are bad_input in one line (#24)" {
	mock_start "$FIX/mock/ok.yaml"
	{
		printf '{"id":"a","url":"%s/nih/a","expect":{"min_bytes":1e300}}\n' "$MOCK_URL"
		printf '{"id":"b","url":"%s/nih/b","expect":{"min_bytes":"100"}}\n' "$MOCK_URL"
		printf '{"id":"c","url":"%s/nih/c","expect":{"json":"yes"}}\n' "$MOCK_URL"
		printf '{"id":"d","url":"%s/nih/d","expect":{"json":true,"min_bytes":10}}\n' "$MOCK_URL"
	} >"$M"
	run --separate-stderr timeout 20 rfp-fetch --run-dir "$RD" <"$M"
	assert_success
	for id in a b c; do
		check "$id" '.fate == "dead" and .dead_reason == "bad_input"'
		[ "$(requests_for "/nih/$id")" -eq 0 ]
	done
	check d '.status == 200 and .check == null'
	[ "${stderr_lines[0]}" = 'rfp-fetch: line 1: field "expect.min_bytes": not an integer from 0 to 2^40' ]
	[ "${stderr_lines[1]}" = 'rfp-fetch: line 2: field "expect.min_bytes": not an integer from 0 to 2^40' ]
	[ "${stderr_lines[2]}" = 'rfp-fetch: line 3: field "expect.json": not true or false' ]
}

# raw_server RESPONSE: a one-connection-at-a-time server on 127.0.0.1 that
# answers every request with RESPONSE (backslash escapes as printf %b);
# sets RAW_PORT and RAW_PID.
raw_server() {
	ready_start raw perl -MIO::Socket::INET -e '
	    my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1:0",
	        Listen => 16, ReuseAddr => 1) or die;
	    open(my $f, ">&=", 4) or die; print $f $s->sockport, "\n"; close $f;
	    while (my $c = $s->accept) {
	        my $req = ""; while (<$c>) { $req .= $_; last if /^\r?\n$/ }
	        print $c $ARGV[0]; close $c;
	    }' "$(printf '%b' "$1")" || return 1
	RAW_PID=$READY_PID
	RAW_PORT=$READY_LINE
}

@test "files: fetch: HTTP/0.9 and status lines 000, 099 and 2000 are error protocol, not scheme (#24)" {
	local r
	for r in 'hello\n' 'HTTP/1.1 000 X\r\nContent-Length: 0\r\n\r\n' \
	    'HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n' \
	    'HTTP/1.1 2000 X\r\nContent-Length: 0\r\n\r\n'; do
		raw_server "$r"
		run --separate-stderr timeout 20 rfp-fetch <<<"{\"id\":\"x\",\"url\":\"http://127.0.0.1:$RAW_PORT/x\"}"
		kill "$RAW_PID"
		wait "$RAW_PID" 2>/dev/null || true
		assert_success
		check x '.error == "protocol" and .status == null'
	done
}

@test "files: fetch: a response header over libcurl's 100 KB is said to be one, not only \"Out of memory\"" {
	raw_server "HTTP/1.1 200 OK\\r\\nX-Big: $(head -c 120000 /dev/zero | tr '\0' a)\\r\\nContent-Length: 0\\r\\n\\r\\n"
	run --separate-stderr timeout 20 rfp-fetch <<<"{\"id\":\"x\",\"url\":\"http://127.0.0.1:$RAW_PORT/x\"}"
	kill "$RAW_PID"
	wait "$RAW_PID" 2>/dev/null || true
	assert_success
	jq -c '{error, error_detail}' <<<"$output"
	check x '.status == null and .error == "protocol" and (.error_detail | startswith("a response header over"))'
}

@test "files: sink: a file size limit fails loudly and leaves no torn line (#24)" {
	mkdir -p "$RD"
	for i in $(seq 1 400); do
		printf '{"id":"doc-%d","fate":"done","status":200,"pad":"%0200d"}\n' "$i" 0
	done >"$M"
	run --separate-stderr bash -c 'trap "" XFSZ; ulimit -f 40; exec timeout 20 rfp-sink --run-dir "$1" -q <"$2"' _ "$RD" "$M"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"rfp-sink: write $RD/results.ndjson: File too large"* ]]
	# Every line in the file is whole.
	[ -s "$RD/results.ndjson" ]
	[ "$(tail -c 1 "$RD/results.ndjson" | od -An -c | tr -d ' ')" = '\n' ]
	jq -e . "$RD/results.ndjson" >/dev/null
}

@test "files: backoff: full jitter stays within base*2^(attempt-1), and reaches above half of it (#24)" {
	local a
	for a in 1 3 5; do
		for i in $(seq 1 40); do
			printf '{"id":"j-%d-%d","class":"transient","reason":"http_503","attempt":%d}\n' "$a" "$i" "$a"
		done
	done >"$M"
	run --separate-stderr timeout 20 rfp-backoff --seed 7 --base 1 --cap 100 --max-attempts 10 --budget 1000 <"$M"
	assert_success
	for a in 1 3 5; do
		jq -s -e --argjson a "$a" '[.[] | select(.attempt == $a) | .delay_s] as $d |
		    ($d | length) == 40 and ($d | max) <= pow(2; $a - 1) and
		    ($d | max) > pow(2; $a - 1) / 2' <<<"$output"
	done
	# Under the cap, the cap bounds it: attempt 5 is 16 s uncapped.
	run --separate-stderr timeout 20 rfp-backoff --seed 7 --base 1 --cap 3 --max-attempts 10 --budget 1000 <"$M"
	assert_success
	jq -s -e '[.[] | select(.attempt == 5) | .delay_s] | max <= 3 and max > 1.5' <<<"$output"
}

@test "files: fetch: --from-queue reads a body_file under the record's manifest_dir, still never out of it, and refuses a manifest file; without it a record's manifest_dir is nobody's root" {
	mock_start "$FIX/mock/submit.yaml"
	local d=$BATS_TEST_TMPDIR/man w=$BATS_TEST_TMPDIR/here
	mkdir -p "$d" "$w" "$BATS_TEST_TMPDIR/out"
	echo '{"a":1}' >"$d/b.json"
	echo '{"decoy":"the current directory'"'"'s"}' >"$w/b.json"
	echo s3cr3t-content >"$BATS_TEST_TMPDIR/out/secret"
	rec() {
		printf '{"id":"%s","url":"%s/grants/submit/%s","method":"POST","body_file":"%s","manifest_dir":"%s"}\n' \
		    "$1" "$MOCK_URL" "$1" "$2" "$3"
	}
	{
		rec ok b.json "$d"
		rec up ../out/secret "$d"
		rec rel b.json man
		rec gone b.json "$d/nope"
	} >"$BATS_TEST_TMPDIR/m"
	cd "$w"
	# A file on standard input is a manifest, not the queue's records:
	# refused, and no line of it chooses a root.
	run -2 --separate-stderr timeout 20 rfp-fetch --from-queue <"$BATS_TEST_TMPDIR/m"
	[ "$output" = "" ]
	[ "$stderr" = 'rfp-fetch: option --from-queue: standard input is a file; the records come from rfp-queue pull, on a pipe (a manifest is read without --from-queue)' ]
	run -2 --separate-stderr timeout 20 rfp-fetch --check --from-queue <"$BATS_TEST_TMPDIR/m"
	[[ $stderr == 'rfp-fetch: option --from-queue: standard input is a file;'* ]]
	[ "$(requests_for)" -eq 0 ]
	# On a pipe, as rfp-queue pull writes them.
	run --separate-stderr timeout 20 sh -c 'cat "$1" | rfp-fetch --from-queue' sh "$BATS_TEST_TMPDIR/m"
	assert_success
	check ok '.status == 200'
	[ "$(jq -s '[.[] | select(.path == "/grants/submit/ok") | .body_bytes] | .[0]' "$MOCK_LOG")" -eq 8 ]
	check up '.dead_reason == "bad_input" and .dead_detail == "field \"body_file\": cannot read \"../out/secret\": outside body_root"'
	check rel '.dead_reason == "bad_input" and .dead_detail == "field \"body_file\": manifest_dir \"man\": not an absolute path"'
	check gone '.dead_reason == "bad_input" and (.dead_detail | startswith("field \"body_file\": the manifest'"'"'s directory \"'"$d"'/nope\": No such file"))'
	# Not from the queue: the manifest's directory is standard input's
	# (here a pipe: the current directory), whatever the record says.
	run --separate-stderr timeout 20 sh -c 'head -n 1 "$1" | sed "s/\"id\":\"ok\"/\"id\":\"plain\"/; s|/ok\"|/plain\"|" | rfp-fetch' sh "$BATS_TEST_TMPDIR/m"
	assert_success
	check plain '.status == 200'
	[ "$(jq -s '[.[] | select(.path == "/grants/submit/plain") | .body_bytes] | .[0]' "$MOCK_LOG")" -eq 36 ]
}

@test "files: a batch over 300 endpoints runs to its end under a limit of 256 open files" {
	# Each endpoint's state files were kept open: 400 hosts ran out of
	# descriptors under the usual 1,024 a third of the way through.
	mock_start "$FIX/mock/ok.yaml"
	for i in $(seq 1 300); do
		printf '{"id":"d%d","url":"%s/nih/d%d","endpoint":"site%d"}\n' "$i" "$MOCK_URL" "$i" "$i"
	done >"$M"
	run -0 --separate-stderr bash -c 'ulimit -n 256 && exec "$0" -q --run-dir "$1" "$2"' "$ROOT/pipeline.sh" "$RD" "$M"
	[ "$(wc -l <"$RD/results.ndjson")" -eq 300 ]
	[ ! -s "$RD/dead.ndjson" ]
}

@test "files: a directory where summary.json goes is refused before anything is sent" {
	mock_start "$FIX/mock/ok.yaml"
	manifest /nih 3 nih >"$M"
	mkdir -p "$RD/summary.json"
	run -2 --separate-stderr timeout 60 "$ROOT/pipeline.sh" -q --run-dir "$RD" "$M"
	[[ $stderr == *"$RD/summary.json: a directory, where the run puts its summary"* ]] || fail "$stderr"
	run -2 --separate-stderr timeout 20 rfp-fetch --check --resume --run-dir "$RD" <"$M"
	[[ $stderr == *"$RD/summary.json: a directory"* ]] || fail "$stderr"
	[ "$(requests_for)" -eq 0 ]
	[ ! -s "$RD/results.ndjson" ]
}
