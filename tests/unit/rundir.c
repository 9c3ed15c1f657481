/*
 * Unit tests of lib/rundir: each name of the run directory's layout
 * (doc/design.md, "The run directory"), and the paths made of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/state/rundir.h"
#include "tests/unit/tap.h"

static void
path_is(char *got, const char *want, const char *name)
{
	is_str(got, want, name);
	free(got);
}

int
main(void)
{
	static const char *want[] = { "results.ndjson", "dead.ndjson",
	    "summary.json", "docs", "docs/.part", "logs", "state",
	    "state/claims.ndjson", "state/owners", "state/sink.lock",
	    "state/ledger.ndjson", "state/slots", "logs/attempts.ndjson",
	    "docs/.parse" };
	const size_t n = sizeof(want) / sizeof(want[0]);
	char name[64];
	size_t i;

	is_long(RUNDIR_NFILES, (long)n, "fourteen names");
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "name %zu is %s", i, want[i]);
		is_str(rundir_name((enum rundir_file)i), want[i], name);
	}
	ok(rundir_name(RUNDIR_NFILES) == NULL, "no name past the table");
	path_is(rundir_path("/r", RUNDIR_RESULTS, NULL), "/r/results.ndjson",
	    "a file of the run directory");
	path_is(rundir_path("run", RUNDIR_DOCS, "a.1"), "run/docs/a.1",
	    "a document");
	path_is(rundir_path("run", RUNDIR_PART, "a.1"), "run/docs/.part/a.1",
	    "a document being written");
	path_is(rundir_path(NULL, RUNDIR_DOCS, "a.parsed"), "docs/a.parsed",
	    "relative to the run directory: body_path, parsed");
	path_is(rundir_path("run", RUNDIR_STATE, "breaker"),
	    "run/state/breaker", "a directory of state");
	path_is(rundir_state("run", "budget", NULL), "run/state/budget.json",
	    "a state file");
	path_is(rundir_state("run", "rate", "h_80"), "run/state/rate/h_80.json",
	    "a state file of one key");
	return tap_done();
}
