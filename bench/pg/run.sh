#!/bin/sh
# bench/pg: what shared state in PostgreSQL costs against the run
# directory's flock'd files.  1. microseconds per state operation
# (stateop.c); 2. the stampede (300 documents released at once against a
# 20/s limiter) with --state in PostgreSQL versus in files: makespan and
# 429s.  Starts its own server (postgresql from Debian) in a temporary
# directory, on a Unix socket, as nobody when run as root.
# usage: bench/pg/run.sh [N]   (from the top of the tree, after make)
set -eu
cd "$(dirname "$0")/../.."
n=${1:-2000}
root=$(pwd)
PATH=$root/bin:$PATH
export PATH
tmp=$(mktemp -d /tmp/rfp-bench-pg.XXXXXX)
pgbin=$(find /usr/lib/postgresql -path "*/bin/initdb" | sort -V | tail -n 1)
pgbin=${pgbin%/initdb}
u=
if [ "$(id -u)" -eq 0 ]; then
	chown nobody "$tmp"
	u="runuser -u nobody --"
fi
mock=
cleanup() {
	[ -n "$mock" ] && kill "$mock" 2>/dev/null
	$u "$pgbin/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1 || :
	rm -rf "$tmp"
}
trap cleanup EXIT
$u "$pgbin/initdb" -D "$tmp/data" -A trust -U rfp -E UTF8 >/dev/null
# Durable commits, as a real server would run: the ledger's INSERT is
# the fdatasync of the file backend.
$u "$pgbin/pg_ctl" -D "$tmp/data" -l "$tmp/log" -w \
    -o "-k $tmp -c listen_addresses=" start >/dev/null
base="postgresql:///postgres?host=$tmp&user=rfp"
psql -q "$base" -c 'CREATE DATABASE micro' -c 'CREATE DATABASE f1' \
    -c 'CREATE DATABASE f2'

# shellcheck disable=SC2046
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I. \
    $(pkg-config --cflags jansson libpq) -o "$tmp/stateop" bench/pg/stateop.c \
    obj/lib/librfp.a $(pkg-config --libs libcurl jansson yaml-0.1 libcrypto libpq) -lm
echo "# microseconds per state operation (one process, no contention)"
"$tmp/stateop" "$tmp/files" "" "$n"
"$tmp/stateop" "$tmp/pgrun" "postgresql:///micro?host=$tmp&user=rfp" "$n"

echo "# stampede: 300 documents at once, -j 32, a 20/s limiter (scale 0.02)"
RFPIPE_TIME_SCALE=${RFPIPE_TIME_SCALE:-0.02}
export RFPIPE_TIME_SCALE
rfp-mockportal --scenario tests/fixtures/mock/ratelimit.yaml --port 0 \
    --port-file "$tmp/port" --log "$tmp/mock.log" >/dev/null 2>&1 &
mock=$!
while [ ! -s "$tmp/port" ]; do sleep 0.01; done
url=http://127.0.0.1:$(cat "$tmp/port")
for i in $(seq 1 300); do
	printf '{"id":"doc-%d","url":"%s/nih/doc-%d"}\n' "$i" "$url" "$i"
done >"$tmp/m"
run() {
	name=$1
	shift
	: >"$tmp/mock.log"
	t0=$(date +%s.%N)
	"$root/pipeline.sh" -q -j 32 --seed 1 --run-dir "$tmp/$name" "$@" \
	    "$tmp/m" || :
	t1=$(date +%s.%N)
	printf '%-10s makespan %6.2f s  429s %4d  results %d\n' "$name" \
	    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
	    "$(jq -s '[.[] | select(.status == 429)] | length' "$tmp/mock.log")" \
	    "$(wc -l <"$tmp/$name/results.ndjson")"
}
run files
run postgresql --state "postgresql:///f1?host=$tmp&user=rfp"
