/* budget: the run-wide retry budget, one document in the store. */
#ifndef RFP_BUDGET_H
#define RFP_BUDGET_H

#include <stddef.h>

/*
 * The run-wide retry budget in RUNDIR/state/budget.json (or PostgreSQL's
 * rfp_state), created with init_total retries on first use.  Returns 1
 * when one retry was granted, 0 when none is left, -1 on error; *left is
 * what remains.
 */
int	budget_spend(const char *rundir, long init_total, long *left,
	    char *err, size_t errlen);
/*
 * The same for a budget that grows as documents arrive: a total above the
 * stored one raises it, and what is left by as much.
 */
int	budget_spend_grown(const char *rundir, long total, long *left,
	    char *err, size_t errlen);
/*
 * As budget_spend_grown, but only from a budget already there: 2 when
 * there is none, and none is made (a stage run by hand on a retry, with
 * no document counted, would make a budget of 0 that outlives it).
 */
int	budget_spend_existing(const char *rundir, long total, long *left,
	    char *err, size_t errlen);
/*
 * Whether RUNDIR/state/budget.json, when there, is a budget: checked
 * before a run starts (files_check_state checks that it parses).  0, or
 * -1 and err.
 */
int	budget_check(const char *rundir, char *err, size_t errlen);
/*
 * Make what is left of the budget total (the --budget given to a re-run
 * of dead letters): spent retries stay counted, the total grows by the
 * difference.  *was_left: what was left before.  0, or -1 and err.
 */
int	budget_renew(const char *rundir, long total, long *was_left,
	    char *err, size_t errlen);
/*
 * The run directory's budget as it stands: 1 with *total and *left, 0
 * when there is none (or it is in PostgreSQL), -1 and err.
 */
int	budget_peek(const char *rundir, long *total, long *left, char *err,
	    size_t errlen);

#endif
