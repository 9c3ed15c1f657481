#!/usr/bin/env bats
# The dead reasons of lib/record/fate.c, as the summary's dead_by_reason keys show
# them, against the lists the README, rfpipe(7) and doc/design.md give: a
# reason added, dropped or misspelt in one place and not the others fails.

load test_helper

# table_reasons: the keys of an empty run's dead_by_reason, in order.
table_reasons() {
	local rd=$BATS_TEST_TMPDIR/rd
	timeout 10 rfp-sink -q --run-dir "$rd" </dev/null >/dev/null ||
	    fail "rfp-sink on no input failed"
	jq -r '.run.dead_by_reason | keys_unsorted[]' "$rd/summary.json"
}

# readme_reasons: the README's "Dead reasons: `a`, `b`, ..." sentence.
readme_reasons() {
	sed -n '/Dead reasons: /,/\.$/p' "$ROOT/README.md" |
	    sed 's/.*Dead reasons: //' | grep -oE '`[a-z_]+`' | tr -d '`'
}

# man_reasons: the items of rfpipe(7)'s "Dead reasons" list.
man_reasons() {
	sed -n '/^\.Ss Dead reasons/,/^\.El/p' "$ROOT/man/rfpipe.7" |
	    sed -n 's/^\.It \([a-z_]*\)$/\1/p'
}

# design_reasons: doc/design.md's "Dead reasons, and who gives them", the
# names only (its other words in backquotes are fields and keys).
design_reasons() {
	sed -n '/^Dead reasons, and who gives them/,/no known fate)/p' \
	    "$ROOT/doc/design.md" |
	    grep -oE '`[a-z_]+`' | tr -d '`' |
	    grep -vxE 'dead_detail|parse_error|max_retry_after'
}

@test "fates: the summary has a key for each of the nine dead reasons" {
	run -0 table_reasons
	[ "${#lines[@]}" -eq 9 ]
	assert_line --index 0 permanent
	assert_line --index 8 bad_input
}

# as_table WHAT LISTER: LISTER prints the reasons of the table, in order.
as_table() {
	local want got
	want=$(table_reasons)
	got=$("$2")
	[ "$got" = "$want" ] || fail "$1: $(echo $got); the table: $(echo $want)"
}

@test "fates: the README lists the dead reasons of the table, in its order" {
	as_table README.md readme_reasons
}

@test "fates: rfpipe(7) describes the dead reasons of the table, in its order" {
	as_table rfpipe.7 man_reasons
}

@test "fates: doc/design.md says who gives each dead reason of the table" {
	as_table doc/design.md design_reasons
}

@test "fates: rfp-sink counts a letter of each reason under its own key" {
	local rd=$BATS_TEST_TMPDIR/rd2 r
	for r in $(table_reasons); do
		printf '{"id":"%s","fate":"dead","dead_reason":"%s"}\n' "$r" "$r"
	done >"$BATS_TEST_TMPDIR/in.ndjson"
	run -4 timeout 10 rfp-sink -q --fate-status --run-dir "$rd" \
	    <"$BATS_TEST_TMPDIR/in.ndjson"
	[ "$(jq '[.run.dead_by_reason[]] | all(. == 1)' "$rd/summary.json")" = true ]
	[ "$(jq '.run.dead_by_reason | length' "$rd/summary.json")" -eq 9 ]
}
