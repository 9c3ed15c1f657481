#!/bin/sh
# The demo batch: 300 documents and 3 applications across NIH RePORTER-,
# Grants.gov- and NSF-shaped routes on the bundled mock portal
# (examples/demo/portal.yaml): one rate limited, one overloaded, one down
# for a while.  The NSF PDFs are read with pdftotext; the summary shows
# the 429s paced, the retries, the breaker that opened and closed, and the
# dead letters by reason.
# Usage: ./demo.sh [RUN-DIR]   (default demo-run in the source tree; a
# relative RUN-DIR is taken from where the demo is run; an earlier demo's
# directory is removed first, anything else there is refused)
set -eu

run=${1:-$(dirname "$0")/demo-run}
case $run in
/*) ;;
*) run=$PWD/$run ;;
esac
# Only an earlier demo's directory (its manifest and mock log) is removed.
if [ -e "$run" ] && [ -n "$(ls -A "$run" 2>/dev/null)" ] &&
    ! { [ -f "$run/manifest.ndjson" ] && [ -f "$run/mock.log" ]; }; then
	echo "demo: $run is not an earlier demo's directory; give a new one" >&2
	exit 2
fi
cd "$(dirname "$0")"
./scripts/deps.sh demo
make -s all
rm -rf "$run"
mkdir -p "$run"

# Demo time runs ten times faster than the portals' clocks.
RFPIPE_TIME_SCALE=${RFPIPE_TIME_SCALE:-0.1}
export RFPIPE_TIME_SCALE

bin/rfp-mockportal --scenario examples/demo/portal.yaml --port 0 \
    --port-file "$run/mock.port" --log "$run/mock.log" >/dev/null &
mock=$!
trap 'kill "$mock" 2>/dev/null || :' EXIT INT TERM
i=0
while [ ! -s "$run/mock.port" ]; do
	i=$((i + 1))
	[ "$i" -lt 500 ] || { echo "demo: the mock portal did not start" >&2; exit 1; }
	sleep 0.01
done
port=$(cat "$run/mock.port")

# 100 documents per portal: NIH as JSON, Grants.gov as JSON, NSF as PDF.
i=1
while [ "$i" -le 100 ]; do
	printf '{"id":"NIH-R01-%03d","url":"http://127.0.0.1:%s/nih/project/%d","endpoint":"nih","expect":{"json":true}}\n' "$i" "$port" "$i"
	printf '{"id":"GRANTS-%03d","url":"http://127.0.0.1:%s/grants/opportunity/%d","endpoint":"grants","expect":{"json":true}}\n' "$i" "$port" "$i"
	printf '{"id":"NSF-%03d","url":"http://127.0.0.1:%s/nsf/award/%d.pdf","endpoint":"nsf","expect":{"magic":"%%PDF-","min_bytes":1000}}\n' "$i" "$port" "$i"
	i=$((i + 1))
done >"$run/manifest.ndjson"
# Three applications: submissions, each with its own Idempotency-Key.
for i in 1 2 3; do
	printf '{"id":"APP-%d","url":"http://127.0.0.1:%s/grants/apply/%d","method":"POST","body":{"opportunity":%d},"endpoint":"grants","cycle":"2026-A"}\n' "$i" "$port" "$i" "$i"
done >>"$run/manifest.ndjson"

echo "demo: 300 documents and 3 applications: NIH allows 2 requests a second (rfpipe is not told),"
echo "demo: Grants.gov answers 503 past 3 at once, NSF is down for its first minute"
status=0
./pipeline.sh --run-dir "$run/run" --config examples/demo/rfpipe.yaml \
    --seed 1 "$run/manifest.ndjson" || status=$?
echo
echo "demo: results in $run/run/results.ndjson, dead letters in $run/run/dead.ndjson"
echo "demo: the NSF awards as text in $run/run/docs/NSF-*.parsed"
echo "demo: triage with: jq -r .dead_reason $run/run/dead.ndjson | sort | uniq -c"
# The morning's page: timelines per portal, dead letters by reason.
./pipeline.sh report -q --html "$run/report.html" "$run/run"
echo "demo: the report to open or mail: $run/report.html"
# 3 means "finished with dead letters", which the demo's portals guarantee.
[ "$status" -eq 0 ] || [ "$status" -eq 3 ]
