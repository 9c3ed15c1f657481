/* summ: the reconciliation summary (summary.json and the stderr table). */
#ifndef RFP_SUMM_H
#define RFP_SUMM_H

#include <jansson.h>

struct summ;

/* An empty tally. */
struct summ *summ_new(void);
/* Count one record by its fate, dead_reason, endpoint and reason. */
void	summ_add(struct summ *s, const json_t *rec);
/*
 * Reconcile this run's tally with the admitted count in admitted_from (a
 * JSON report from rfp-fetch; NULL: not checked), recount the run
 * directory's files for the cumulative totals, write RUNDIR/summary.json
 * and, unless quiet, the table on stderr.  0 when the counts reconcile.
 */
int	summ_finish(struct summ *s, const char *rundir,
	    const char *admitted_from, double t0, int quiet);
/* This run's count of "succeeded", "dead" or a dead reason. */
long	summ_count(const struct summ *s, const char *what);
/* Free the tally. */
void	summ_free(struct summ *s);

#endif
