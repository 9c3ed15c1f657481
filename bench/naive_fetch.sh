#!/bin/sh
# The naive peer of bench/run.sh, run as `xargs -P 32 -n 2 sh naive_fetch.sh`
# on lines "ID URL": up to 5 tries of curl, each retried at once on any
# failure (a reset, a timeout, a 429, a 5xx, a 4xx: curl -f makes them all
# one).  No backoff, no budget, no pacing: the stampede baseline.
#
# Environment: NAIVE_OUT (directory for the bodies, default "out"),
# NAIVE_MAX_TIME (curl --max-time per try, seconds; empty: none).
# Prints "ok ID" or "fail ID" on stdout, so nothing is lost silently.
id=$1
url=$2
out=${NAIVE_OUT:-out}/$id
try=1
while [ "$try" -le 5 ]; do
	if [ -n "${NAIVE_MAX_TIME:-}" ]; then
		curl -fsS -m "$NAIVE_MAX_TIME" -o "$out" "$url" 2>/dev/null
	else
		curl -fsS -o "$out" "$url" 2>/dev/null
	fi && {
		echo "ok $id"
		exit 0
	}
	try=$((try + 1))
done
rm -f "$out"
echo "fail $id"
exit 1
