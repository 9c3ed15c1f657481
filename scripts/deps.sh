#!/bin/sh
# The one list of Debian packages rfpipe needs, by purpose, and the one
# place that installs them.  demo.sh, tests/run and bench/run.sh call it;
# .ci/run reaches it through tests/run.
#
# Usage: scripts/deps.sh [-n] [build|demo|test|bench|deb]...   (default: test)
#   -n  print the packages the purposes need, one per line; install nothing
#
# Packages are installed with --no-install-recommends: a minimal or
# container image skips recommendations, so nothing here may rest on one
# (bats only recommends GNU parallel, which `bats --jobs` needs).
set -eu

# Build: compiler, make, and the libraries' headers (Makefile's DEPS);
# debian/control's Build-Depends are these, less build-essential's.
build="make gcc libc6-dev pkg-config libcurl4-openssl-dev libjansson-dev
libyaml-dev libssl-dev libmicrohttpd-dev libpq-dev"
# The demo: the build (the mock portal is built from the tree), and the
# parser its NSF PDFs are read with.
demo="$build poppler-utils"
# The tests: bats and what its parallel jobs need, the sanitizer build, the
# PostgreSQL state backend's server, and the tools the suites call (man-db
# renders the pages as an installed system does; mandoc lints them; the
# parse suite runs real parsers: pdftotext and jq; GNU time measures the
# largest resident size; openssl makes the https tests' certificate;
# valgrind runs the plain build's stages under memcheck, tests/memcheck.bats).
# The browser that loads rfp-report's HTML page in tests/report.bats (and
# keeps a screenshot of it in make report-shot): headless, no display.
browser="chromium"
test="$build bats bats-support bats-assert parallel clang libclang-rt-14-dev
postgresql jq poppler-utils shellcheck strace mandoc man-db curl procps time
openssl valgrind $browser"
# The bench: the peers it measures rfpipe against, and a real nginx limiter.
bench="$test python3 python3-aiohttp time gawk coreutils nginx-light"
# The Debian package: its build tools (dpkg-buildpackage checks for
# build-essential itself), its checker, and man to read it.
deb="$build build-essential debhelper dpkg-dev fakeroot lintian man-db"

list=false
if [ "${1:-}" = -n ]; then
	list=true
	shift
fi
[ $# -gt 0 ] || set -- test
pkgs=
for purpose; do
	case $purpose in
	build) pkgs="$pkgs $build" ;;
	demo) pkgs="$pkgs $demo" ;;
	test) pkgs="$pkgs $test" ;;
	bench) pkgs="$pkgs $bench" ;;
	deb) pkgs="$pkgs $deb" ;;
	*)
		echo "scripts/deps.sh: unknown purpose \"$purpose\" (build, demo, test, bench, deb)" >&2
		exit 2
		;;
	esac
done
# shellcheck disable=SC2086  # one word per package
pkgs=$(printf '%s\n' $pkgs | sort -u)

if $list; then
	printf '%s\n' "$pkgs"
	exit 0
fi

missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
	sudo=
elif command -v sudo >/dev/null 2>&1; then
	sudo=sudo
else
	echo "rfpipe: missing Debian packages:$missing" >&2
	echo "rfpipe: as root, run: apt-get update && apt-get install -y --no-install-recommends$missing" >&2
	exit 1
fi
echo "rfpipe: installing:$missing" >&2
$sudo apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends $missing >/dev/null
