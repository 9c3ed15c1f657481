#!/bin/sh
# bench/report-shot.sh: a small night against rfp-mockportal
# (bench/scenarios/report.yaml) on a scaled clock, its HTML report by
# rfp-report, and a screenshot of that page by headless chromium, for
# people to look at: bench/out/report/{run,report.html,report.png}.
# `make report-shot` runs it; chromium comes with scripts/deps.sh test.
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname -- "$here")
out=$root/bench/out/report
PATH=$root/bin:$PATH
RFPIPE_TIME_SCALE=${RFPIPE_TIME_SCALE:-0.05}
export PATH RFPIPE_TIME_SCALE

command -v chromium >/dev/null 2>&1 || {
	echo "report-shot: chromium not found: scripts/deps.sh test installs it" >&2
	exit 1
}
rm -rf "$out"
mkdir -p "$out"
rfp-mockportal --scenario "$here/scenarios/report.yaml" --port 0 \
    --port-file "$out/port" --log "$out/mock.ndjson" >/dev/null \
    2>"$out/mock.err" &
mock=$!
trap 'kill "$mock" 2>/dev/null || true' EXIT
i=0
while [ ! -s "$out/port" ]; do
	i=$((i + 1))
	if [ "$i" -gt 200 ] || ! kill -0 "$mock" 2>/dev/null; then
		cat "$out/mock.err" >&2
		exit 1
	fi
	sleep 0.05
done
url=http://127.0.0.1:$(cat "$out/port")
for ep in nih nsf grants; do
	seq 1 60 | while read -r n; do
		printf '{"id":"%s-%d","url":"%s/%s/doc-%d","endpoint":"%s"}\n' \
		    "$ep" "$n" "$url" "$ep" "$n" "$ep"
	done
done >"$out/manifest.ndjson"
cat >"$out/rfpipe.yaml" <<YAML
breaker: {failures: 5, cooldown: 4s}
YAML
status=0
rfpipe -q --run-dir "$out/run" --seed 1 --config "$out/rfpipe.yaml" \
    --max-attempts 6 "$out/manifest.ndjson" || status=$?
[ "$status" -le 3 ] || exit "$status"
rfp-report --html "$out/report.html" "$out/run"
chromium --headless --no-sandbox --disable-gpu \
    --user-data-dir="$out/chrome" --window-size=1000,2200 \
    --screenshot="$out/report.png" "file://$out/report.html" \
    >/dev/null 2>&1
rm -rf "$out/chrome"
echo "report-shot: $out/report.html, $out/report.png"
