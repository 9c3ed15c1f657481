/*
 * pace: per-endpoint pacing that learns a portal's limit from what gets
 * through.  Two controls, kept apart: the spacing of sends (a GCRA at
 * "rate") and the requests in flight (a "window").
 *
 * Before the portal has ever pushed back nothing is paced: the window
 * starts at 2 and grows by a quarter of a request per fast success (a
 * whole one per success slower than 0.1 s) sent with half the window or
 * more in flight, so a portal with no
 * limit is soon driven at the full -j, and a burst allowance is spent with
 * few requests left over to be refused.  The first refusal (429, or 503
 * while the endpoint is answering) starts the pace; from then on the rate
 * is set by the delivery rate of successes between refusals, which under
 * any limiter that is being pushed is the limiter's own rate (BBR's
 * reasoning for policers).  A fast first answer or a spent burst is never
 * taken for the rate.  The start's floor is 2 a second, more for a caller
 * holding many documents (cfg.queued); a raised floor refused before
 * anything got through starts again at 2.  A refusal of a request sent
 * with more in flight than any success ever had implicates the window,
 * not the rate: the window is cut to what succeeded and held, for a
 * window's successes the first time since it was free if a 429 cut it (a
 * rate behind slow answers makes such refusals too while the window
 * opens), for 64 otherwise.  Refusals that cuts do not cure (three cuts
 * to under what got through in a row, each refused again within 32
 * successes) are noise, a flaky gateway's, not a limit: the cuts are
 * undone, the pace let go, and refusals within the share of them learned
 * so leave pace and window alone.  RateLimit headers and a Retry-After
 * past the quota horizon hold the endpoint.
 *
 * A state left by processes that have all ended (the run before, a
 * moment ago or a night) or that nobody has used for a minute is a hint,
 * not a fact: the pace starts afresh, remembering only the rate it had,
 * past which it does not double.  Processes sharing it at once keep it.
 *
 * With a configured rate the pace is that rate, exactly, from the start;
 * with a configured concurrency the window starts there, and only 503s
 * (busy: a concurrency cap's answer, and nginx limit_req's by default; a
 * 429 is taken for the rate's) take it lower.
 * All times are real seconds; the state lives in RUNDIR/state/rate/.
 */
#ifndef RFP_PACE_H
#define RFP_PACE_H

#include "lib/record/hdr.h"

enum pace_event {
	PACE_OK,	/* a success: grow */
	PACE_SLOW,	/* a throttling refusal: 429, or 503 while up */
	PACE_INFO,	/* any other answer: its RateLimit fields only */
	PACE_UNUSED	/* grants dropped unsent: pace_ev.seq on, .unused
			   of them */
};

struct pace_cfg {
	double	rate;		/* configured requests per real second; 0: none */
	long	burst;		/* requests at once; 0 and 1: one at a time */
	double	quota_after;	/* a Retry-After past this (real s) is a quota;
				   0: never */
	double	deadline;	/* epoch; a hold past it ends the endpoint's
				   work (quota_until); 0: none */
	long	conc;		/* the endpoint's concurrency, configured:
				   the window starts there, not at 2, and
				   only a concurrency cap's refusals (503,
				   busy) take it lower; 0: not configured */
	double	lease;		/* real s: sends due this far ahead are
				   granted too, each with its time, when the
				   pace is fast enough for 8 of them; 0: only
				   sends due now */
	int	first;		/* this ask is the caller's first to the
				   endpoint: at a told rate with no burst,
				   its first send is granted alone, and no
				   grant after it (another process's
				   included) until that send is answered,
				   half a logical second at most */
	long	queued;		/* documents the caller holds for the
				   endpoint, ready or waiting for a retry's
				   time, and its share of the input not read
				   yet as far as it knows: the start's floor;
				   0: none known */
};

#define PACE_LEASE_MAX	64	/* sends one grant holds at most */

/*
 * A pace shared through PostgreSQL and taken a lease at a time tells
 * every host on this channel when it is cut or held, "SEQ EP": the sends
 * of ep's leases numbered under SEQ were granted at a pace now too fast.
 */
#define PACE_CHANNEL	"rfp_pace"
/* SEQ from a PACE_CHANNEL payload for endpoint ep, or -1: not ep's. */
long	pace_news_seq(const char *payload, const char *ep);

/* What pace_take_n grants. */
struct pace_grant {
	long	granted;	/* sends reserved: a lease of ... */
	double	due[PACE_LEASE_MAX];	/* ... sends, each not before
				   its time, as the pace's "now" counts ... */
	double	late;		/* ... nor more than this after it (real s);
				   0: not a lease, every send due now */
	double	wait;		/* until more may go, when fewer than asked */
	double	rate;		/* the pace, requests a real second */
	long	window;		/* requests in flight allowed; 0: no limit */
	long	seq;		/* the first grant's number; the rest follow */
	double	quota_until;	/* > 0: the endpoint is held until then, a
				   quota: nothing is granted ... */
	int	quota_long;	/* ... 1: for a wait past max_retry_after;
				   0: only the deadline comes first */
	int	counted;	/* a RateLimit remaining is counted down by
				   the grants: every send must be granted */
};

/*
 * Ask to send up to want requests to ep at now (at most PACE_LEASE_MAX),
 * as want single asks in a row would.  0 with *g filled, -1 on a
 * state-file error.  With c->lease, a lease: the sends due up to that
 * far ahead are granted too, due[i] saying when each may go, so that the
 * store is asked once a lease rather than once a send, and processes
 * sharing the pace take it a lease at a time.  A send that goes late puts
 * the rest off as much, and none goes more than g->late after the
 * lease's last time: what would is dropped, never kept, for it would
 * crowd the next grant, another process's perhaps, which the pace puts
 * that much after the lease's last.
 * rundir NULL keeps the state in this process.
 */
int	pace_take_n(const char *rundir, const char *ep,
	    const struct pace_cfg *c, double now, long want,
	    struct pace_grant *g, char *err, size_t errlen);
/* One send: 0 reserved, 1 with *wait when it must wait, -1 on error. */
int	pace_take(const char *rundir, const char *ep, const struct pace_cfg *c,
	    double now, double *wait, char *err, size_t errlen);

/* One outcome of a request, for pace_feedback_n. */
struct pace_ev {
	enum pace_event	ev;
	double		sent_at;
	double		wrote_at;	/* when it went out to the portal (the
					   request written, after any connect);
					   0: unknown */
	double		now;
	long		inflight;	/* on the endpoint at its send, itself
					   included; 0: unknown */
	long		seq;		/* its grant's number; -1: unknown */
	double		retry_after;	/* Retry-After, real s; -1: none */
	struct hdr_ratelimit rl;
	int		rl_seen;	/* rl holds what the answer said */
	int		busy;		/* a 503, which a concurrency cap may
					   answer (a 429 is the rate's) */
	int		ending;		/* the caller's sends to the endpoint
					   end soon at this pace: nothing is
					   left to probe a faster one for */
	long		unused;		/* PACE_UNUSED: how many grants */
};

/*
 * Feed back n outcomes in order under one lock; *window, unless window is
 * NULL, is then the window as pace_grant's (a success may have grown it,
 * and one held by it is not asked for a grant until it has).
 */
int	pace_feedback_n(const char *rundir, const char *ep,
	    const struct pace_cfg *c, const struct pace_ev *ev, size_t n,
	    long *window, char *err, size_t errlen);
/* Feed back one outcome with nothing known but its kind and times. */
int	pace_feedback(const char *rundir, const char *ep,
	    const struct pace_cfg *c, enum pace_event ev, double sent_at,
	    const struct hdr_ratelimit *rl, double now, char *err,
	    size_t errlen);

/*
 * This process is done pacing: struck from the users of every endpoint it
 * paced, so that whoever comes next, on any host, finds what is left a
 * hint at once (rather than a minute after this process was last heard
 * from).  0, or -1 with err set.
 */
int	pace_leave(const char *rundir, char *err, size_t errlen);
/*
 * Whether d (a state file's object) is a pace state a run could have
 * written: 0, or -1 with why (the field) in why.
 */
int	pace_valid(const json_t *d, char *why, size_t n);

#endif
