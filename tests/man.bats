#!/usr/bin/env bats
# The man pages against the programs: every option that --help shows, long
# or a short letter, heads an item of the page's OPTIONS section (".It Fl
# -name" or ".It Fl x" in the source), every option heading an item there
# is one --help shows, the SYNOPSIS is the usage string, and neither mandoc
# nor man(1), which renders the installed pages with groff, finds anything
# to warn about.  tests/options.bats holds the README's table to --help.

load test_helper

MAN=$ROOT/man

# options_section PAGE: the mdoc source of PAGE's OPTIONS section.
options_section() {
	sed -n '/^\.Sh OPTIONS/,/^\.Sh /p' "$1"
}

# documented_opts PAGE: the options that head an item in OPTIONS.
documented_opts() {
	options_section "$1" | grep '^\.It ' |
	    grep -oE -- 'Fl (-[a-z][a-z0-9-]*|[a-zA-Z]\>)' | sed 's/^Fl /-/' |
	    sort -u
}

# check_options PAGE COMMAND...: PAGE's OPTIONS and COMMAND --help agree.
check_options() {
	local page=$MAN/$1 help missing extra
	shift
	[ -f "$page" ] || fail "no man page $page"
	help=$(help_opts "$@") || fail "$* --help failed"
	[ -n "$help" ] || fail "$* --help shows no option"
	missing=$(comm -23 <(printf '%s\n' "$help") <(documented_opts "$page"))
	extra=$(comm -13 <(printf '%s\n' "$help") <(documented_opts "$page"))
	[ -z "$missing" ] ||
	    fail "${page##*/}: OPTIONS has no item for: ${missing//$'\n'/ }"
	[ -z "$extra" ] ||
	    fail "${page##*/}: OPTIONS documents what --help lacks: ${extra//$'\n'/ }"
}

# squash: the text on stdin on one line, runs of white space made one space.
squash() {
	tr -s ' \t\n' '   ' | sed 's/^ //; s/ $//'
}

# synopsis PAGE: the rendered SYNOPSIS section of PAGE, squashed.
synopsis() {
	mandoc -Tascii "$1" | sed 's/.\x08//g' |
	    awk '/^SYNOPSIS/ { on = 1; next } /^[A-Z]/ { on = 0 } on' | squash
}

# check_synopsis PAGE COMMAND...: the SYNOPSIS reads as the usage string.
check_synopsis() {
	local page=$MAN/$1 want got
	shift
	want=$("$@" --help | sed '1s/^usage: //' | squash)
	got=$(synopsis "$page")
	[ "$got" = "$want" ] ||
	    fail "${page##*/}: SYNOPSIS \"$got\" is not the usage \"$want\""
}

@test "man: rfp-fetch.1 documents every option of --help" {
	check_options rfp-fetch.1 rfp-fetch
}

@test "man: rfp-parse.1 documents every option of --help" {
	check_options rfp-parse.1 rfp-parse
}

@test "man: rfp-classify.1 documents every option of --help" {
	check_options rfp-classify.1 rfp-classify
}

@test "man: rfp-backoff.1 documents every option of --help" {
	check_options rfp-backoff.1 rfp-backoff
}

@test "man: rfp-sink.1 documents every option of --help" {
	check_options rfp-sink.1 rfp-sink
}

@test "man: rfp-queue.1 documents every option of --help" {
	check_options rfp-queue.1 rfp-queue
}

@test "man: rfp-mockportal.1 documents every option of --help" {
	check_options rfp-mockportal.1 rfp-mockportal
}

@test "man: rfp-report.1 documents every option of --help" {
	check_options rfp-report.1 rfp-report
}

@test "man: rfpipe.1 documents every option of --help" {
	check_options rfpipe.1 "$ROOT/pipeline.sh"
}

@test "man: every SYNOPSIS is its program's usage string" {
	command -v mandoc >/dev/null 2>&1 || skip "mandoc is not installed"
	check_synopsis rfp-fetch.1 rfp-fetch
	check_synopsis rfp-parse.1 rfp-parse
	check_synopsis rfp-classify.1 rfp-classify
	check_synopsis rfp-backoff.1 rfp-backoff
	check_synopsis rfp-sink.1 rfp-sink
	check_synopsis rfp-queue.1 rfp-queue
	check_synopsis rfp-mockportal.1 rfp-mockportal
	check_synopsis rfp-report.1 rfp-report
	check_synopsis rfpipe.1 "$ROOT/pipeline.sh"
}

@test "man: every page passes mandoc -Tlint -W warning" {
	command -v mandoc >/dev/null 2>&1 || skip "mandoc is not installed"
	run mandoc -Tlint -W warning "$MAN"/*.1 "$MAN"/*.7
	assert_success
	assert_output ''
}

@test "man: every page renders with man(1) at 80 columns without a warning" {
	command -v man >/dev/null 2>&1 || skip "man-db is not installed"
	local page err
	for page in "$MAN"/*.1 "$MAN"/*.7; do
		err=$(MANWIDTH=80 man -l "$page" 2>&1 >/dev/null)
		[ -z "$err" ] || fail "${page##*/}: $err"
	done
}
