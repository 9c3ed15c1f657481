/* pace: GCRA with slow start and AIMD, kept in a flock'd state file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/clk.h"
#include "lib/doc.h"
#include "lib/pace.h"
#include "lib/store.h"
#include "lib/x.h"

#define START_RATE	8.0	/* logical requests/s before anything is known */
#define SS_ROUND	2.0	/* slow start: the rate doubles per round trip */
#define SS_GROWTH	3.0	/* ... and once pushed back, adds this a success */
#define SS_JUMP		16.0	/* ... rising to a serial pace, at most this-fold */
#define DECREASE	0.85	/* multiplicative decrease on a 429 */
#define MAX_RATE	1e6
#define FLOOR		0.9	/* of the best recent success rate */
#define MARGIN		0.97	/* of a configured rate: a strict limiter
				   refuses a request that arrives a few
				   milliseconds early */
#define SLACK		0.002	/* real seconds a very fast send may come early */
#define F_ALPHA		0.1	/* the recent share of slow answers: ~10 */
#define EVAL_N		20	/* answers after a cut before judging it */
#define TOL_MARGIN	0.05	/* a share this much over the tolerated cuts */
#define TOL_DECAY	0.998	/* per answer: what was tolerated is forgotten */
#define PEAK_DECAY	0.95	/* per second without a better one */

struct pst {
	double	tat;		/* theoretical arrival time (GCRA) */
	double	rate;		/* current requests per real second */
	double	hold_until;	/* nothing is sent before this */
	double	dec_at;		/* when the rate was last cut */
	int	ss;		/* still in slow start */
	long	slows;		/* 429s fed back */
	double	w0;		/* start of the current window */
	long	w_ok;		/* successes in it */
	double	peak;		/* best recent success rate, decaying */
	double	rt_at;		/* slow start: when this round trip began */
	double	rt_rate;	/* ... and the rate then */
	double	f;		/* recent share of slow answers (EWMA) */
	double	tol;		/* a share that cuts have shown not to cure */
	long	eval_n;		/* answers since the last cut; -1: none */
	double	r_before;	/* the rate before that cut */
	double	f_before;	/* the share when it was made */
};

struct op {
	const struct pace_cfg *c;
	const char *ep;
	int	 take;		/* 1: pace_take, 0: feedback */
	double	 now, sent_at, wait;
	enum pace_event ev;
	const struct hdr_ratelimit *rl;
	long	 want;		/* sends asked for */
	long	 granted;	/* ... and reserved */
	double	 rate;		/* ... at this rate (requests per second) */
	const struct pace_ev *evs;	/* feedback: the outcomes, in order */
	size_t	 nev;
};


static void
init(struct pst *p, const struct pace_cfg *c)
{
	memset(p, 0, sizeof(*p));
	if (c->rate > 0) {
		p->rate = c->rate * MARGIN;
	} else {
		p->rate = START_RATE / clk_scale();
		p->ss = 1;
	}
	p->eval_n = -1;
}

static int
load(struct pst *p, const json_t *d, const struct pace_cfg *c)
{
	json_t *v;

	init(p, c);
	if (d == NULL)
		return 0;
#define G(f) do { v = json_object_get(d, #f); \
	if (!json_is_number(v)) return -1; \
	p->f = json_number_value(v); } while (0)
	G(tat);
	G(rate);
	G(hold_until);
	G(dec_at);
#undef G
	v = json_object_get(d, "ss");
	if (!json_is_boolean(v) || !(p->rate > 0))
		return -1;
	p->ss = json_is_true(v);
	p->slows = (long)json_integer_value(json_object_get(d, "slows"));
	p->w0 = json_number_value(json_object_get(d, "w0"));
	p->w_ok = (long)json_integer_value(json_object_get(d, "w_ok"));
	p->peak = json_number_value(json_object_get(d, "peak"));
	p->f = json_number_value(json_object_get(d, "f"));
	p->tol = json_number_value(json_object_get(d, "tol"));
	p->eval_n = json_is_integer(json_object_get(d, "eval_n")) ?
	    (long)json_integer_value(json_object_get(d, "eval_n")) : -1;
	p->r_before = json_number_value(json_object_get(d, "r_before"));
	p->f_before = json_number_value(json_object_get(d, "f_before"));
	p->rt_at = json_number_value(json_object_get(d, "rt_at"));
	p->rt_rate = json_number_value(json_object_get(d, "rt_rate"));
	/* A changed configuration wins over the stored rate. */
	if (c->rate > 0 && p->rate > c->rate * MARGIN)
		p->rate = c->rate * MARGIN;
	return 0;
}

static json_t *
save(const struct pst *p, const char *ep)
{
	return json_pack("{s:s,s:f,s:f,s:f,s:f,s:b,s:I,s:f,s:I,s:f,s:f,s:f,"
	    "s:I,s:f,s:f,s:f,s:f}", "endpoint", ep, "tat", p->tat, "rate",
	    p->rate, "hold_until", p->hold_until, "dec_at", p->dec_at, "ss",
	    p->ss, "slows", (json_int_t)p->slows, "w0", p->w0, "w_ok",
	    (json_int_t)p->w_ok, "peak", p->peak, "f", p->f, "tol", p->tol,
	    "eval_n", (json_int_t)p->eval_n, "r_before", p->r_before,
	    "f_before", p->f_before, "rt_at", p->rt_at, "rt_rate",
	    p->rt_rate);
}

/* Reserve up to o->want sends at o->now, as that many takes in a row. */
static void
take(struct pst *p, struct op *o)
{
	double iv = 1.0 / p->rate, tat;
	/*
	 * A bucket of max(burst, 1): burst 0 and 1 both mean one at a time.
	 * A pace faster than rfp-fetch's loop can turn (a send due every
	 * millisecond or less) gets a couple of milliseconds' slack, so it is
	 * not held to one send per turn; a slower one never sends early.
	 */
	double allow = (double)(o->c->burst > 1 ? o->c->burst - 1 : 0) * iv;

	if (iv < SLACK)
		allow = fmax(allow, SLACK);

	if (o->now < p->hold_until) {
		o->wait = p->hold_until - o->now;
		return;
	}
	while (o->granted < o->want) {
		tat = fmax(p->tat, o->now);
		if (tat - o->now > allow) {
			o->wait = tat - o->now - allow;
			return;
		}
		p->tat = tat + iv;
		o->granted++;
	}
}

static void
feedback(struct pst *p, struct op *o)
{
	const struct hdr_ratelimit *rl = o->rl;
	double cap = o->c->rate > 0 ? o->c->rate * MARGIN : MAX_RATE;
	double sc = clk_scale();
	double r0 = p->rate;
	double w = clk_real(1), n;
	int first;

	/* The success rate of each (logical) second; the best recent one decays. */
	if (p->w0 == 0)
		p->w0 = o->now;
	if (o->now - p->w0 >= w) {
		n = floor((o->now - p->w0) / w);
		p->peak = fmax(p->w_ok / (o->now - p->w0), p->peak *
		    pow(PEAK_DECAY, n));
		p->w0 = o->now;
		p->w_ok = 0;
	}
	if (o->ev == PACE_OK)
		p->w_ok++;
	/*
	 * Did the last cut cure anything?  A limiter answers fewer 429s once
	 * it is driven slower; a portal that answers some share of 429s (or
	 * 503s) whatever the pace does not, and then the cut is undone and
	 * that share is tolerated from now on.
	 */
	p->f = p->f * (1 - F_ALPHA) + F_ALPHA * (o->ev == PACE_SLOW);
	p->tol *= TOL_DECAY;
	if (p->eval_n >= 0 && ++p->eval_n >= EVAL_N) {
		if (p->f > 0.5 * p->f_before) {
			/* A false alarm: back to where it was, and growing. */
			p->rate = fmin(fmax(p->rate, p->r_before), cap);
			p->tol = fmax(p->tol, p->f);
			p->ss = o->c->rate <= 0;
		}
		p->eval_n = -1;
	}
	if (o->ev == PACE_SLOW) {
		first = p->slows++ == 0;
		if (first && p->ss && p->rt_rate > 0) {
			/*
			 * The first push back ends the doubling: back to the
			 * pace of the last round trip that passed, and on from
			 * there in small steps (slow start still, +SS_GROWTH a
			 * success).
			 */
			p->rate = fmin(p->rt_rate, cap);
			p->dec_at = o->now;
			p->tat = fmax(p->tat, o->now) + 1.0 / p->rate;
		} else if (o->sent_at >= p->dec_at &&
		    p->f > p->tol + TOL_MARGIN) {
			/*
			 * One cut per round: requests already on the wire
			 * don't count.  Never below what the endpoint has just
			 * shown it can serve.
			 */
			if (p->eval_n < 0) {
				p->r_before = p->rate;
				p->f_before = p->f;
				p->eval_n = 0;
			}
			p->rate = fmin(fmax(fmax(p->rate * DECREASE, FLOOR *
			    p->peak), 0.01 / sc), cap);
			p->dec_at = o->now;
			p->ss = 0;
			/* Restart the schedule at the new pace. */
			p->tat = fmax(p->tat, o->now) + 1.0 / p->rate;
		}
	} else if (p->ss && p->slows == 0) {
		/*
		 * Slow start before the server ever pushed back: the rate
		 * doubles per round trip, as TCP's window does, however many
		 * requests are on the wire.  A round trip ends with the first
		 * answer to a request sent after it began, so one request at
		 * a time doubles it per answer.  With the schedule brought
		 * forward (below), 8/s passes a thousand a second within
		 * about 1/8 s; the first 429 ends it (above).
		 */
		if (o->sent_at >= p->rt_at) {
			p->rt_at = o->now;
			p->rt_rate = p->rate;
		}
		p->rate = fmin(fmin(SS_ROUND * p->rate, fmax(SS_ROUND *
		    p->rt_rate, p->rate + SS_GROWTH / sc)), cap);
		/*
		 * And up towards a serial client's pace, one request sent as
		 * the last is answered (1/d for an answer in d seconds), at
		 * most SS_JUMP-fold an answer: a burst at a pace never tried
		 * would draw several 429s at once from a strict limiter.  Only
		 * a round trip shorter than 1/START_RATE makes a difference.
		 */
		if (o->now - o->sent_at > 0)
			p->rate = fmax(p->rate, fmin(fmin(1.0 / (o->now -
			    o->sent_at), SS_JUMP * r0), cap));
	} else if (p->ss)	/* pushed back once, so near a limit: +SS_GROWTH */
		p->rate = fmin(p->rate + SS_GROWTH / sc, cap);
	else				/* in logical time: +1/rate */
		p->rate = fmin(p->rate + 1.0 / (p->rate * sc * sc), cap);
	if (rl != NULL && rl->remaining == 0 && rl->reset_s > 0)
		p->hold_until = fmax(p->hold_until, o->now +
		    clk_real(rl->reset_s));
	else if (rl != NULL && rl->remaining > 0 && rl->reset_s > 0 &&
	    p->rate > rl->remaining / clk_real(rl->reset_s))
		p->rate = rl->remaining / clk_real(rl->reset_s);
	/*
	 * A faster pace reschedules what is reserved: the next send comes one
	 * new interval after the last, not one old one (GCRA scaled in time).
	 */
	if (p->ss && p->slows == 0 && p->rate > r0 && p->tat > o->now)
		p->tat = o->now + (p->tat - o->now) * r0 / p->rate;
}

static int
run(json_t **doc, void *arg, char *err, size_t errlen)
{
	struct op *o = arg;
	struct pst p;
	size_t i;

	if (load(&p, *doc, o->c) == -1) {
		snprintf(err, errlen, "state/rate of \"%s\": corrupt state "
		    "file; move it aside to start afresh", o->ep);
		return -1;
	}
	if (o->take) {
		take(&p, o);
		o->rate = p.rate;
	}
	for (i = 0; i < o->nev; i++) {
		o->ev = o->evs[i].ev;
		o->sent_at = o->evs[i].sent_at;
		o->now = o->evs[i].now;
		o->rl = o->evs[i].rl_seen ? &o->evs[i].rl : NULL;
		feedback(&p, o);
	}
	json_decref(*doc);
	*doc = save(&p, o->ep);
	return 0;
}

static int
apply(const char *rundir, struct op *o, char *err, size_t errlen)
{
	return store_update(rundir, "rate", o->ep, run, o, err, errlen);
}

int
pace_take(const char *rundir, const char *ep, const struct pace_cfg *c,
    double now, double *wait, char *err, size_t errlen)
{
	long granted;
	int rc;

	rc = pace_take_n(rundir, ep, c, now, 1, &granted, wait, NULL, err,
	    errlen);
	return rc == -1 ? -1 : granted == 1 ? 0 : 1;
}

int
pace_take_n(const char *rundir, const char *ep, const struct pace_cfg *c,
    double now, long want, long *granted, double *wait, double *rate,
    char *err, size_t errlen)
{
	struct op o;

	memset(&o, 0, sizeof(o));
	o.c = c;
	o.ep = ep;
	o.take = 1;
	o.now = now;
	o.want = want;
	*granted = 0;
	*wait = 0;
	if (apply(rundir, &o, err, errlen) == -1)
		return -1;
	*granted = o.granted;
	*wait = o.wait;
	if (rate != NULL)
		*rate = o.rate;
	return 0;
}

int
pace_feedback(const char *rundir, const char *ep, const struct pace_cfg *c,
    enum pace_event ev, double sent_at, const struct hdr_ratelimit *rl,
    double now, char *err, size_t errlen)
{
	struct pace_ev e;

	memset(&e, 0, sizeof(e));
	e.ev = ev;
	e.sent_at = sent_at;
	e.now = now;
	if (rl != NULL) {
		e.rl = *rl;
		e.rl_seen = 1;
	}
	return pace_feedback_n(rundir, ep, c, &e, 1, err, errlen);
}

int
pace_feedback_n(const char *rundir, const char *ep, const struct pace_cfg *c,
    const struct pace_ev *ev, size_t n, char *err, size_t errlen)
{
	struct op o;

	if (n == 0)
		return 0;
	memset(&o, 0, sizeof(o));
	o.c = c;
	o.ep = ep;
	o.evs = ev;
	o.nev = n;
	return apply(rundir, &o, err, errlen);
}
