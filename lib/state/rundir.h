/*
 * rundir: the layout of a run directory, the one place in C where its
 * names are spelt.  Every path a stage opens in RUNDIR is made here.
 * pipeline.sh names what only the driver makes (state/retry.PID.fifo,
 * state/fetch.PID.json, state/status.PID, state/fetch.PID.pid and
 * state/parse.PID.pid) in one block of its own, which points here;
 * doc/design.md, "The run directory", says what each holds.
 */
#ifndef RFP_RUNDIR_H
#define RFP_RUNDIR_H

enum rundir_file {
	RUNDIR_RESULTS,		/* results.ndjson: the documents done */
	RUNDIR_DEAD,		/* dead.ndjson: the dead letters */
	RUNDIR_SUMMARY,		/* summary.json */
	RUNDIR_DOCS,		/* docs: the bodies, docs/ID */
	RUNDIR_PART,		/* docs/.part: bodies being written */
	RUNDIR_LOGS,		/* logs */
	RUNDIR_STATE,		/* state: the shared state files */
	RUNDIR_CLAIMS,		/* state/claims.ndjson */
	RUNDIR_OWNERS,		/* state/owners: one locked file per owner */
	RUNDIR_SINK_LOCK,	/* state/sink.lock */
	RUNDIR_LEDGER,		/* state/ledger.ndjson: the submissions */
	RUNDIR_SLOTS,		/* state/slots: one file per slot */
	RUNDIR_ATTEMPTS,	/* logs/attempts.ndjson: lib/accounts/attlog */
	RUNDIR_PARSING,		/* docs/.parse: rfp-parse's outputs being
				   written, apart from rfp-fetch's parts */
	RUNDIR_NFILES
};

/* Its name relative to the run directory ("docs/.part"); NULL: none. */
const char *rundir_name(enum rundir_file f);
/*
 * RUNDIR/F, or RUNDIR/F/NAME when name is not NULL (a document in docs,
 * an owner in state/owners); relative to the run directory when rundir
 * is NULL.  Allocated: the caller frees it.
 */
char	*rundir_path(const char *rundir, enum rundir_file f, const char *name);
/*
 * The state file of kind (budget, rate, breaker, ...): RUNDIR/state/KIND.json,
 * or RUNDIR/state/KIND/KEY.json for one key of it (key already made safe
 * for a file name).  Allocated.
 */
char	*rundir_state(const char *rundir, const char *kind, const char *key);

#endif
