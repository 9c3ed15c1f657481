/*
 * pace: per-endpoint request pacing (GCRA) that adapts to the server.
 * With a configured rate it starts there; without one it starts slow and
 * grows until the first 429 (slow start), then probes gently (additive
 * increase) and backs off multiplicatively on every 429 or 503 with
 * Retry-After.  RateLimit headers cap the pace so the 429 never comes.
 * All times are real seconds; the state lives in RUNDIR/state/rate/.
 */
#ifndef RFP_PACE_H
#define RFP_PACE_H

#include "lib/hdr.h"

enum pace_event {
	PACE_OK,	/* a success: grow */
	PACE_SLOW	/* 429, or 503 with Retry-After: shrink */
};

struct pace_cfg {
	double	rate;		/* configured requests per real second; 0: none */
	long	burst;		/* requests at once; 0 and 1: one at a time */
};

/*
 * Ask to send one request to ep at now.  Returns 0 and reserves the send,
 * 1 with *wait (seconds) when it must wait, -1 on a state-file error.
 * rundir NULL keeps the state in this process.
 */
int	pace_take(const char *rundir, const char *ep, const struct pace_cfg *c,
	    double now, double *wait, char *err, size_t errlen);
/*
 * Ask to send up to want requests to ep at now, as want pace_take calls in
 * a row would: 0 with *granted sends reserved (and *wait, seconds, until
 * more may go when fewer than want were, and *rate, requests a second,
 * when rate is not NULL), -1 on a state-file error.  A reservation is for
 * now: one not used at once is dropped, never kept.
 */
int	pace_take_n(const char *rundir, const char *ep,
	    const struct pace_cfg *c, double now, long want, long *granted,
	    double *wait, double *rate, char *err, size_t errlen);
/* Feed back one outcome of a request sent at sent_at. */
int	pace_feedback(const char *rundir, const char *ep,
	    const struct pace_cfg *c, enum pace_event ev, double sent_at,
	    const struct hdr_ratelimit *rl, double now, char *err,
	    size_t errlen);

/* One outcome for pace_feedback_n. */
struct pace_ev {
	enum pace_event	ev;
	double		sent_at;
	double		now;
	struct hdr_ratelimit rl;
	int		rl_seen;	/* rl holds what the answer said */
};

/* Feed back n outcomes in order under one lock, as n calls would. */
int	pace_feedback_n(const char *rundir, const char *ep,
	    const struct pace_cfg *c, const struct pace_ev *ev, size_t n,
	    char *err, size_t errlen);

#endif
