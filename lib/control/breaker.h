/*
 * breaker: the per-endpoint circuit breaker, shared by every process
 * through RUNDIR/state/breaker/<endpoint>.json under flock(2).  Closed: all
 * requests pass.  Open: none do until a cooldown has passed.  Half-open:
 * exactly one probe, owned by one process with a lease, so a probe whose
 * process died frees the slot when the lease runs out.
 */
#ifndef RFP_BREAKER_H
#define RFP_BREAKER_H

#include <stddef.h>

#include <jansson.h>

#include "lib/config/conf.h"

/*
 * With the state in PostgreSQL, an opening is told on this channel, its
 * payload the endpoint, in the transaction that opens it: a process that
 * listens there need not wait for its next read to hold back.
 */
#define BREAKER_CHANNEL	"rfp_breaker"

enum breaker_verdict {
	BREAKER_ALLOW,	/* closed: send */
	BREAKER_PROBE,	/* half-open: send, this request is the probe */
	BREAKER_DENY,	/* open, or a probe is out: hold or dead-letter */
	/* half-open: not this retry; a fresh request may probe */
	BREAKER_FRESH_FIRST
};

enum breaker_outcome {
	BREAKER_SUCCESS,	/* any answer that says the endpoint is up */
	BREAKER_FAILURE	/* a transient failure */
};

/*
 * May a request go to ep at now (real seconds)?  held is 1 when the caller
 * holds a new record back because of the answer (counted as saved); fresh
 * is 1 for a document's first request (preferred as the half-open probe).
 * *until is when to ask again after BREAKER_DENY; *opened_at when it opened.
 */
int	breaker_allow(const char *rundir, const char *ep,
	    const struct conf_breaker *c, double now, double lease, int held,
	    int fresh, enum breaker_verdict *v, double *until,
	    double *opened_at, char *err, size_t errlen);
/*
 * Record an outcome; probe is 1 when the request was the probe, fresh when
 * it was a document's first (only those can open a closed breaker: a
 * document failing again says more about itself than about the endpoint).
 */
int	breaker_record(const char *rundir, const char *ep,
	    const struct conf_breaker *c, enum breaker_outcome o, int probe,
	    int fresh, double now, char *err, size_t errlen);

/*
 * One outcome of breaker_record_n, with its time and when its request was sent:
 * a failure of a request sent before one that was answered since says the
 * endpoint was up after it left, and does not count toward opening.
 * (breaker_record takes the request as sent when it was answered.)
 */
struct breaker_ev {
	enum breaker_outcome out;
	int		 probe;
	int		 fresh;
	double		 now;
	double		 sent_at;
};

/* Record n outcomes in order under one lock, as n breaker_record calls
   would. */
int	breaker_record_n(const char *rundir, const char *ep,
	    const struct conf_breaker *c, const struct breaker_ev *ev, size_t n,
	    char *err, size_t errlen);
/*
 * Whether d (a state file's object) is a breaker a run could have
 * written: 0, or -1 with why (the field) in why.
 */
int	breaker_valid(const json_t *d, char *why, size_t n);

#endif
