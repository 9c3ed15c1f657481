#!/usr/bin/env bats
# debian/ against the rest of the tree: its Build-Depends are the one
# dependency list's build purpose, and it installs every example a user
# can run.  Building and installing the package is tests/deb-smoke.sh's
# (scripts/fresh-check.sh -d), not this suite's: it writes into the tree.

load test_helper

# The packages a debian/control field names, one a line, sorted, without
# version constraints.
control_field() {
	sed -n "/^$1:/,/^[A-Z]/p" "$ROOT/debian/control" | sed '$!b; /^[A-Z]/d' |
	    sed "s/^$1://" | tr ',' '\n' | sed 's/(.*)//; s/[[:space:]]//g' |
	    grep -v '^$' | sort
}

@test "deb: Build-Depends are scripts/deps.sh's build list, less build-essential" {
	local want got
	want=$("$ROOT/scripts/deps.sh" -n build | grep -vxE 'gcc|libc6-dev|make' | sort)
	got=$(control_field Build-Depends | grep -vx 'debhelper-compat')
	[ -n "$want" ]
	[ "$got" = "$want" ] ||
	    fail "Build-Depends: $(echo $got) but scripts/deps.sh build: $(echo $want)"
}

@test "deb: the package builds with what scripts/deps.sh deb installs" {
	run -0 "$ROOT/scripts/deps.sh" -n deb
	for p in build-essential debhelper dpkg-dev fakeroot lintian man-db; do
		assert_line "$p"
	done
	control_field Build-Depends | grep -qx debhelper-compat
	[ "$(cat "$ROOT/debian/source/format")" = "3.0 (native)" ]
}

@test "deb: every example but the mock portal's demo is installed" {
	local want got
	want=$(cd "$ROOT" && ls -d examples/* | grep -vx examples/demo)
	got=$(sort "$ROOT/debian/rfpipe.examples")
	[ "$got" = "$want" ] ||
	    fail "debian/rfpipe.examples: $(echo $got) but examples/: $(echo $want)"
}

@test "deb: libpq5 is suggested, not a dependency: it is loaded only for postgresql:// state" {
	control_field Suggests | grep -qx libpq5
	! control_field Depends | grep -q libpq || false
	grep -q '"libpq.so.5"' "$ROOT/lib/state/pg.c"
}
