/*
 * limit: the rules of an endpoint's limits (rfp-mockportal(1)), in logical
 * seconds since the start, for the portal and for --ideal alike.
 */
#ifndef MOCK_LIMIT_H
#define MOCK_LIMIT_H

#include <stddef.h>

#include "scen.h"

/* One limiter's state for one key (the endpoint, or one path). */
struct lstate {
	double		 tat;		/* gcra: theoretical arrival time */
	long		 win;		/* fixed_window: the window counted */
	long		 count;		/* fixed_window: hits; quota: accepts */
	double		*ring;		/* sliding_window: accept times */
	size_t		 head, n, cap;
	long		 inflight;	/* concurrency: accepted, not done */
};

/* What the limits said about one request. */
struct lim_pass {
	const struct limiter *by;	/* the first that refused, or NULL */
	double		 hold;		/* accepted: logical s to hold it */
	struct lstate	*held[LIM_MAX];	/* concurrency slots it took */
	size_t		 nheld;
};

/* The headers limiters send, by index: lim_hdr_names[i] is the name. */
enum {
	LHI_LIMIT, LHI_REMAINING, LHI_RESET, LHI_RATELIMIT, LHI_POLICY, LHI_N
};
extern const char *const lim_hdr_names[LHI_N];

/* The kind's name, as in the scenario and the log. */
const char *lim_kind_name(enum lim_kind k);

/*
 * Check a request for path at logical time t against ep's active limiters.
 * refused says the legacy rate refused it already.  Accepted (lp->by NULL,
 * refused 0): every active limiter counts it.  Refused: none does, but a
 * fixed_window with count_refused.  Portal's mutex held.
 */
void	lim_decide(struct endpoint *ep, const char *path, double t,
	    int refused, struct lim_pass *lp);
/* The request of lp is done: give back its concurrency slots. */
void	lim_release(struct lim_pass *lp);
/*
 * The rate-limit headers of ep's active limiters for path at logical time
 * t, now being the epoch time: h[i] set (malloc'd) for the headers to send.
 */
void	lim_headers(struct endpoint *ep, const char *path, double t,
	    double now, char *h[LHI_N]);
/* Free l's run-time state. */
void	lim_free(struct limiter *l);

/*
 * The ideal makespan, logical s, of n one-request documents on ep for a
 * client that knows its limits, with latency delay_s; *allowed how many of
 * them the limits let through at all.
 */
void	lim_ideal(const struct endpoint *ep, double delay_s, long n,
	    double *span, long *allowed);

#endif
