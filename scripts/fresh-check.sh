#!/bin/sh
# Run the README's two commands in a minimal Debian 12 root, built here from
# the Debian registry with mmdebstrap, on a clean clone of HEAD, with apt set
# never to install recommendations: "works on a fresh machine", tested.
#
# Usage: scripts/fresh-check.sh [-k] [-d] [WORKDIR]
#   -k  keep the root afterwards (default: remove it, and WORKDIR when
#       this script made it; after a failure nothing is removed)
#   -d  also build the Debian package in the root (scripts/deps.sh deb,
#       make deb, which runs lintian), install it there, and run a batch
#       with /usr/bin/rfpipe under cron's PATH, man rfpipe and --version
#       (tests/deb-smoke.sh)
# Needs root, mmdebstrap and a Debian mirror (scripts/deps.sh does not
# install mmdebstrap: this check runs on a developer's machine, not in CI).
# Slow: a few minutes for the root, then the whole test suite.
set -eu

keep=false deb=false
while getopts kd o; do
	case $o in
	k) keep=true ;;
	d) deb=true ;;
	*) echo "usage: scripts/fresh-check.sh [-k] [-d] [WORKDIR]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

die() { echo "fresh-check: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (it builds and enters a chroot)"
command -v mmdebstrap >/dev/null 2>&1 ||
	die "mmdebstrap not found (apt-get install mmdebstrap)"

top=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
# Only what this script made is ever removed: the root, and the work
# directory when it made that too.  A failure keeps everything, logs first.
made=false
if [ $# -gt 0 ]; then
	work=$1
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/rfpipe-fresh.XXXXXX")
	made=true
fi
mkdir -p "$work"
root=$work/root
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}

umount_all() {
	for m in dev/pts dev proc sys; do
		umount -l "$root/$m" 2>/dev/null || :
	done
}
cleanup() {
	rc=$?
	umount_all
	if [ "$rc" -ne 0 ]; then
		echo "fresh-check: kept $work for its logs" >&2
	elif ! $keep; then
		rm -rf "$root"
		! $made || rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
step() { echo "fresh-check: [$(($(date +%s) - t0)) s] $*" >&2; }

if [ ! -x "$root/bin/sh" ]; then
	step "building a minimal Debian 12 root in $root"
	# minbase: essential packages and apt, nothing recommended; sudo is
	# absent, as on a minimal image, and the commands run as root.
	mmdebstrap --variant=minbase --include=ca-certificates,git \
	    --aptopt='APT::Install-Recommends "false"' \
	    --aptopt='APT::Install-Suggests "false"' \
	    bookworm "$root" "$mirror" >"$work/mmdebstrap.log" 2>&1 ||
		die "mmdebstrap failed: see $work/mmdebstrap.log"
fi

step "cloning HEAD into the root"
rm -rf "$root/src/rfpipe"
mkdir -p "$root/src"
git clone -q "$top" "$root/src/rfpipe"

mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || :

in_root() {
	chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
	    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	    /bin/sh -c "$1"
}

step "README command 1: ./demo.sh"
in_root 'cd /src/rfpipe && ./demo.sh' >"$work/demo.log" 2>&1 ||
	{ tail -20 "$work/demo.log" >&2; die "./demo.sh failed: see $work/demo.log"; }
tail -3 "$work/demo.log" >&2
step "README command 2: ./tests/run"
in_root 'cd /src/rfpipe && ./tests/run' >"$work/tests.log" 2>&1 ||
	{ tail -30 "$work/tests.log" >&2; die "./tests/run failed: see $work/tests.log"; }
# -a: the log holds some binary bytes, and grep stops printing at the first.
grep -a -c '^ok' "$work/tests.log" |
	sed 's/^/fresh-check: tests passed (unit and bats, both builds): /' >&2

if $deb; then
	step "building the Debian package"
	in_root 'cd /src/rfpipe && scripts/deps.sh deb && make deb' \
	    >"$work/deb.log" 2>&1 ||
		{ tail -30 "$work/deb.log" >&2; die "make deb failed: see $work/deb.log"; }
	grep '^make deb: ' "$work/deb.log" >&2 || :
	tags=$(grep -cE '^[EWIP]: ' "$work/deb.log") || :
	echo "fresh-check: lintian: $tags tags (errors fail make deb)" >&2
	grep -E '^[EWIP]: ' "$work/deb.log" >&2 || :
	step "installing it into the root and running a batch from /usr/bin"
	in_root 'cd /src/rfpipe && tests/deb-smoke.sh' >"$work/deb-smoke.log" 2>&1 ||
		{ tail -30 "$work/deb-smoke.log" >&2; die "the installed package failed: see $work/deb-smoke.log"; }
	tail -5 "$work/deb-smoke.log" >&2
fi
step "passed"
