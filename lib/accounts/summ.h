/* summ: the reconciliation summary (summary.json and the stderr table). */
#ifndef RFP_SUMM_H
#define RFP_SUMM_H

#include <jansson.h>

struct summ;

/* An empty tally. */
struct summ *summ_new(void);
/* What the tally reads of a record. */
struct summ_in {
	const char	*fate;		/* NULL: taken as dead */
	const char	*endpoint;	/* NULL: "(none)" */
	const char	*dead_reason;	/* NULL: taken as bad_input */
	int		 attempted;	/* it has a status or an error */
	int		 http_429;	/* its status is the integer 429 */
	const char	*reason;	/* rfp-classify's reason, or NULL */
	int		 stray;		/* a stray line's letter: summ_stray */
};

/*
 * Whether a record is a stray line's letter: dead, with no id of its own
 * (a string) and no line_key.  A line between stages that was not a
 * record (not JSON, no id) is no document's fate: the document whose
 * record it may have been is still pending, and a resume takes it up.
 * Such a letter is kept in dead.ndjson as evidence and counted apart, as
 * "stray_lines", never as a dead document.  rfp-fetch keys every letter
 * of a manifest line (an id, or a line_key), so none of its letters is
 * one.
 */
int	summ_stray(const char *fate, const char *id, const char *line_key);

/* Count one record by its fate, dead_reason, endpoint and reason. */
void	summ_add(struct summ *s, const json_t *rec);
/* The same, from what was read of it. */
void	summ_add_in(struct summ *s, const struct summ_in *in);
/* Note that the run was stopped by signal sig: what is unfiled is pending. */
void	summ_stopped(struct summ *s, int sig);
/*
 * Reconcile this run's tally with the admitted count in admitted_from (a
 * JSON report from rfp-fetch; NULL: not checked), recount the run
 * directory's files for the cumulative totals and write
 * RUNDIR/summary.json.  0 when the counts reconcile and everything could
 * be read and written, else -1; summ_problems says what went wrong.  A
 * run stopped by a signal (here or in the report's "stopped") reconciles
 * when nothing was filed twice, the rest being pending; so does one that
 * filed fewer than it admitted by no more than its stray lines (each may
 * have been a document's record: that document is pending).
 */
int	summ_finish(struct summ *s, const char *rundir,
	    const char *admitted_from, double t0);
/* What summ_finish met, a line each ("" when nothing): for the stage to tell. */
const char *summ_problems(const struct summ *s);
/* The operator's table of a finished summary (caller frees), or NULL. */
char	*summ_table(const struct summ *s);
/* This run's count of "succeeded", "dead" or a dead reason. */
long	summ_count(const struct summ *s, const char *what);
/*
 * The documents the deadline cut: of this run, or of a tally as
 * summary.json holds one (its run, an endpoint).  Filed in dead.ndjson
 * (deadline_cut) and counted in "dead", they are shown apart from the
 * dead-lettered wherever a person reads the counts, each document once.
 */
long	summ_cut(const struct summ *s);
long	summ_tally_cut(const json_t *tally);
/* The same of the whole run directory, after summ_finish. */
long	summ_total(const struct summ *s, const char *what);
/*
 * After summ_finish: the documents this run admitted and left in neither
 * file though it was not stopped (as many as its stray lines at most, a
 * reconciled run's "pending"); a re-run takes them up.  0 for a stopped
 * run, whose pending are the signal's.
 */
long	summ_unfiled(const struct summ *s);
/* Free the tally. */
void	summ_free(struct summ *s);

#endif
