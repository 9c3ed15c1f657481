/*
 * Unit tests of lib/fate: every fate and every dead reason of the record
 * contract (rfpipe(7), "Dead reasons"), spelt as the records carry them and
 * in that order, each with its meaning.
 */
#include <stdio.h>
#include <string.h>

#include "lib/record/fate.h"
#include "tests/unit/tap.h"

int
main(void)
{
	static const char *want[] = { "permanent", "parse_failed",
	    "exhausted", "budget_spent", "circuit_open", "quota",
	    "deadline_cut", "ambiguous_submit", "bad_input" };
	static const char *fates[] = { "done", "retry", "dead" };
	const size_t n = sizeof(want) / sizeof(want[0]);
	char name[64];
	size_t i;
	int j, dup;

	is_long(FATE_NREASONS, (long)n, "nine dead reasons");
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "reason %zu is %s", i, want[i]);
		is_str(fate_reason((enum fate_reason)i), want[i], name);
		snprintf(name, sizeof(name), "%s is found by its name",
		    want[i]);
		is_long(fate_reason_of(want[i]), (long)i, name);
		ok(fate_meaning((enum fate_reason)i) != NULL &&
		    fate_meaning((enum fate_reason)i)[0] != '\0',
		    "%s has a meaning", want[i]);
	}
	for (i = 0, dup = 0; i < FATE_NREASONS; i++)
		for (j = 0; j < (int)i; j++)
			if (strcmp(fate_reason((enum fate_reason)i),
			    fate_reason((enum fate_reason)j)) == 0)
				dup++;
	is_long(dup, 0, "no reason is named twice");
	is_long(fate_reason_of("deadline"), -1, "a prefix is no reason");
	is_long(fate_reason_of("Bad_input"), -1, "names are lower case");
	is_long(fate_reason_of(NULL), -1, "NULL is no reason");
	ok(fate_reason(FATE_NREASONS) == NULL, "past the table: NULL");
	ok(fate_meaning(FATE_NREASONS) == NULL, "no meaning past the table");

	is_long(FATE_NKINDS, 3, "three fates");
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "fate %zu is %s", i, fates[i]);
		is_str(fate_name((enum fate_kind)i), fates[i], name);
		snprintf(name, sizeof(name), "%s is found by its name",
		    fates[i]);
		is_long(fate_of(fates[i]), (long)i, name);
	}
	is_long(fate_of("ok"), -1, "a class is no fate");
	is_long(fate_of(NULL), -1, "NULL is no fate");
	ok(fate_name(FATE_NKINDS) == NULL, "no fate past the table");
	return tap_done();
}
