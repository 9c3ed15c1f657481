/* rundir: the names of a run directory's files. */
#include <stddef.h>

#include "lib/state/rundir.h"
#include "lib/base/x.h"

static const char *const names[RUNDIR_NFILES] = {
	[RUNDIR_RESULTS] = "results.ndjson",
	[RUNDIR_DEAD] = "dead.ndjson",
	[RUNDIR_SUMMARY] = "summary.json",
	[RUNDIR_DOCS] = "docs",
	[RUNDIR_PART] = "docs/.part",
	[RUNDIR_LOGS] = "logs",
	[RUNDIR_STATE] = "state",
	[RUNDIR_CLAIMS] = "state/claims.ndjson",
	[RUNDIR_OWNERS] = "state/owners",
	[RUNDIR_SINK_LOCK] = "state/sink.lock",
	[RUNDIR_LEDGER] = "state/ledger.ndjson",
	[RUNDIR_SLOTS] = "state/slots",
	[RUNDIR_ATTEMPTS] = "logs/attempts.ndjson",
	[RUNDIR_PARSING] = "docs/.parse"
};

const char *
rundir_name(enum rundir_file f)
{
	return (unsigned)f < RUNDIR_NFILES ? names[f] : NULL;
}

char *
rundir_path(const char *rundir, enum rundir_file f, const char *name)
{
	const char *n = rundir_name(f) ? rundir_name(f) : "";

	if (rundir == NULL)
		return name ? xasprintf("%s/%s", n, name) : xstrdup(n);
	return name ? xasprintf("%s/%s/%s", rundir, n, name) :
	    xasprintf("%s/%s", rundir, n);
}

char *
rundir_state(const char *rundir, const char *kind, const char *key)
{
	const char *st = names[RUNDIR_STATE];

	return key ? xasprintf("%s/%s/%s/%s.json", rundir, st, kind, key) :
	    xasprintf("%s/%s/%s.json", rundir, st, kind);
}
