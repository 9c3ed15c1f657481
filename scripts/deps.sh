#!/bin/sh
# Install the Debian packages rfpipe needs to build, test and run its demo,
# if any is missing (with sudo when not root).  Prints what it runs.
set -eu

pkgs="make gcc pkg-config libcurl4-openssl-dev libjansson-dev libyaml-dev
libssl-dev libmicrohttpd-dev libpq-dev postgresql clang libclang-rt-14-dev bats bats-support bats-assert
jq shellcheck strace
mandoc curl"

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
	echo "rfpipe: as root, run: apt-get update && apt-get install -y$missing" >&2
	exit 1
fi
echo "rfpipe: installing:$missing" >&2
# shellcheck disable=SC2086
$sudo apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
