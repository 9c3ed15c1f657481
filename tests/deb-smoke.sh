#!/bin/sh
# Install the Debian package that make deb left in dist/ and run a batch
# with it as a cron job would: /usr/bin/rfpipe under env -i
# PATH=/usr/bin:/bin, against the tree's mock portal (bin/rfp-mockportal,
# which ./tests/run built; made here if it is missing).  Then man rfpipe
# and every program's --version.  scripts/fresh-check.sh -d runs it as root
# in a fresh Debian 12 root, from the top of the clone, after make deb.
#
# Usage: tests/deb-smoke.sh   (as root; it installs the package)
set -eu

cd "$(dirname "$0")/.."
die() { echo "deb-smoke: $*" >&2; exit 1; }
say() { echo "deb-smoke: $*"; }
[ "$(id -u)" -eq 0 ] || die "must run as root (it installs the package)"

version=$(head -n 1 debian/changelog | tr -d '()' | cut -d ' ' -f 2)
deb=dist/rfpipe_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || die "$deb not found (run make deb)"

say "installing $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "./$deb" >/dev/null
[ "$(dpkg-query -W -f='${Version}' rfpipe)" = "$version" ] ||
	die "dpkg says rfpipe $(dpkg-query -W -f='${Version}' rfpipe), not $version"
for f in /usr/bin/rfpipe /usr/bin/rfp-fetch /usr/bin/rfp-parse \
    /usr/bin/rfp-classify /usr/bin/rfp-backoff /usr/bin/rfp-sink /usr/bin/rfp-queue \
    /usr/bin/rfp-report \
    /usr/share/man/man1/rfpipe.1.gz /usr/share/man/man7/rfpipe.7.gz \
    /usr/share/doc/rfpipe/examples/README.md \
    /usr/share/bash-completion/completions/rfpipe; do
	[ -e "$f" ] || die "$f is not installed"
done
[ ! -e /usr/bin/rfp-mockportal ] || die "the mock portal is installed"

work=$(mktemp -d "${TMPDIR:-/tmp}/deb-smoke.XXXXXX")
mock=
cleanup() {
	[ -z "$mock" ] || kill "$mock" 2>/dev/null || :
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

[ -x bin/rfp-mockportal ] || make -s bin/rfp-mockportal
bin/rfp-mockportal --scenario tests/fixtures/pipeline/statuses.yaml \
    --port 0 --port-file "$work/port" --log "$work/mock.log" >/dev/null &
mock=$!
i=0
while [ ! -s "$work/port" ]; do
	i=$((i + 1))
	[ "$i" -lt 500 ] || die "the mock portal did not start"
	sleep 0.01
done
port=$(cat "$work/port")

# 20 documents: 16 answered at once, 4 after two 503s each (the retry
# loop; four, so that their endpoint's breaker, at five, stays closed).
i=1
while [ "$i" -le 16 ]; do
	printf '{"id":"ok-%d","url":"http://127.0.0.1:%s/ok/%d","endpoint":"ok"}\n' \
	    "$i" "$port" "$i"
	i=$((i + 1))
done >"$work/manifest.ndjson"
i=1
while [ "$i" -le 4 ]; do
	printf '{"id":"flaky-%d","url":"http://127.0.0.1:%s/twice503/%d","endpoint":"flaky"}\n' \
	    "$i" "$port" "$i"
	i=$((i + 1))
done >>"$work/manifest.ndjson"

say "a batch of 20 with /usr/bin/rfpipe under env -i PATH=/usr/bin:/bin"
status=0
env -i PATH=/usr/bin:/bin sh -c 'command -v rfpipe' >"$work/which"
[ "$(cat "$work/which")" = /usr/bin/rfpipe ] ||
	die "rfpipe under cron's PATH is $(cat "$work/which"), not /usr/bin/rfpipe"
(cd "$work" && env -i PATH=/usr/bin:/bin rfpipe --progress none --seed 1 \
    --run-dir run manifest.ndjson) || status=$?
[ "$status" -eq 0 ] || die "rfpipe exited $status, not 0"
ids=$(sed 's/^{"id":"\([^"]*\)".*/\1/' "$work/manifest.ndjson" | sort)
got=$(grep -o '"id":"[^"]*"' "$work/run/results.ndjson" | cut -d '"' -f 4 | sort)
[ "$got" = "$ids" ] || die "results.ndjson does not hold the 20 documents once each"
[ ! -s "$work/run/dead.ndjson" ] || die "dead.ndjson is not empty"
n=$(grep -c '"kind":"request"' "$work/mock.log")
[ "$n" -eq 28 ] || die "the portal saw $n requests, not 16 + 4 x 3 = 28"
say "results.ndjson holds all 20; the portal saw 28 requests"

say "rfpipe report, read-only"
before=$(cd "$work/run" && find . -type f -exec sha256sum {} + | sort)
(cd "$work" && env -i PATH=/usr/bin:/bin rfpipe report run) >"$work/report" ||
	die "rfpipe report exited $?"
grep -q 'succeeded *20' "$work/report" ||
	die "rfpipe report does not say 20 succeeded: $(head -c 300 "$work/report")"
after=$(cd "$work/run" && find . -type f -exec sha256sum {} + | sort)
[ "$before" = "$after" ] || die "rfpipe report changed the run directory"

say "man rfpipe, man 7 rfpipe"
for page in 1 7; do
	man "$page" rfpipe >"$work/man.$page" 2>"$work/man.err" ||
		die "man $page rfpipe failed: $(cat "$work/man.err")"
	sed 's/.\x08//g' "$work/man.$page" | tr -s ' \n' '  ' >"$work/man.txt"
	grep -q 'NAME rfpipe' "$work/man.txt" ||
		die "man $page rfpipe: no NAME section: $(head -c 300 "$work/man.txt")"
	[ ! -s "$work/man.err" ] || die "man $page rfpipe: $(cat "$work/man.err")"
done

say "--version"
for p in rfpipe rfp-fetch rfp-parse rfp-classify rfp-backoff rfp-sink \
    rfp-queue rfp-report; do
	v=$(env -i PATH=/usr/bin:/bin "$p" --version)
	[ "$v" = "$p $version" ] || die "$p --version: \"$v\", not \"$p $version\""
done
say "passed: rfpipe $version installed, a batch of 20 filed, man pages read"
