/*
 * Unit tests of lib/pace, in simulated time: a client that sends as the
 * pace and its window allow, at most 32 at once, against simulated
 * limiters (a GCRA with and without a burst, answering 429 or 503, one
 * that delays what is over its rate as nginx's limit_req without nodelay
 * does, a concurrency cap, none, refusals at random),
 * counting refusals and the makespan against the limiter's ideal.  Then
 * the quota, RateLimit and state-file rules, on a temporary run directory.
 * PACE_EXPLORE=1 prints a grid of GCRA cells instead (PACE_LAT: the
 * answers' latency, default 0.02 s; PACE_CELL="20/s b10": that cell only;
 * PACE_STALL=0.3 PACE_STALLP=0.03: the arrivals stalled 0.3 s at one send
 * in 33, a busy machine; PACE_SEED: the draws' seed;
 * PACE_LATJ=0.05: each answer's latency give or take up to that, at
 * random; PACE_503=1: the limits refuse with 503, not 429; PACE_KIND=delay:
 * the GCRA delays what is over its rate, burst of them at most;
 * PACE_EXPLORE=free: PACE_N documents (300) to a portal with no limit
 * whose answers take PACE_LAT (1 s) give or take up to PACE_LATJ, at
 * random;
 * SIMDBG=1: each second's pace and each refusal on stderr), PACE_EXPLORE=noise one of GCRA cells
 * with refusals at random on top, PACE_EXPLORE=conc concurrency caps of 25
 * and 5 with answers in 0.25 s, PACE_EXPLORE=drop GCRA limits that drop
 * mid-run, to explore a change with.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/control/pace.h"
#include "lib/control/valid.h"
#include "lib/state/files.h"
#include "lib/base/x.h"
#include "tests/unit/tap.h"

#define J	32		/* the client's -j */
#define T0	1e9		/* simulated epoch */

static char dir[] = "/tmp/unit-pace.XXXXXX";
static double t_start = T0;	/* when sim() starts sending */

enum kind { UNLIMITED, GCRA, CONC, SLIDING, NOISE, DELAY };

#define NLOG	256		/* SLIDING: the most a window holds */

struct lim {
	enum kind kind;
	double	rate;		/* GCRA: per second; SLIDING: limit / window */
	long	burst;		/* GCRA: nodelay burst */
	long	cap;		/* CONC: in flight; SLIDING: the limit */
	int	s429;		/* CONC: refuses with 429, not busy (503) */
	int	s503;		/* the others: refuse with 503 (busy), as
				   nginx's limit_req does by default */
	double	lat;		/* every answer's latency */
	double	lat_j;		/* ... give or take up to this, at random */
	double	tat;		/* GCRA and DELAY state */
	double	queued;		/* ... the last admitted one's wait for its
				   turn (DELAY answers after it) */
	double	drop_at;	/* GCRA: from this second of the run ... */
	double	drop_to;	/* ... the rate is this */
	double	stall;		/* a stall of this long now and then: what
				   arrives meanwhile is seen at its end */
	double	stall_end;
	double	stall_p;	/* ... begun at a send with this chance
				   (0: 0.002) */
	double	late;		/* CONC: this share of answers is read ... */
	double	late_s;		/* ... this long after the portal sent it */
	double	share;		/* NOISE, and over any kind: this share of
				   requests refused at random */
	double	log[NLOG];	/* SLIDING: the times of the last allowed */
	long	nlog;
	int	ending;		/* the client says when its work ends within
				   2 s at the pace granted (rfp-fetch does) */
};

struct out {
	long	sent, refused, maxin;
	long	end_ref;	/* refusals with 2 s of work left, or less */
	double	makespan;
	long	window;		/* the last window granted */
	long	last_sec;	/* SIMDBG: the second last traced */
	double	rate;		/* the last pace granted */
	int	paced;
};

/* The limiter's verdict on a request arriving at t with in requests on it. */
static int
admit(struct lim *l, double t, long in)
{
	double iv, win;
	long i, n;

	if (l->share > 0 && drand48() < l->share)
		return 0;
	switch (l->kind) {
	case SLIDING:
		win = (double)l->cap / l->rate;
		for (i = n = 0; i < l->nlog && i < NLOG; i++)
			if (l->log[i] > t - win)
				n++;
		if (n >= l->cap)
			return 0;
		l->log[l->nlog++ % NLOG] = t;
		return 1;
	case GCRA:
	case DELAY:
		/*
		 * One bucket: a request ahead of its turn by up to burst
		 * intervals is let through, the rest refused.  A GCRA answers
		 * it at once; a DELAY (nginx limit_req without nodelay) holds
		 * it until its turn (queued).
		 */
		iv = 1.0 / (l->drop_at > 0 && t - t_start >= l->drop_at ?
		    l->drop_to : l->rate);
		if (l->drop_at < 0)	/* from rate to drop_to over -drop_at s */
			iv = 1.0 / (l->rate + (l->drop_to - l->rate) *
			    fmin(1, (t - t_start) / -l->drop_at));
		l->queued = fmax(l->tat, t) - t;
		if (l->queued > (double)l->burst * iv + 1e-9)
			return 0;
		l->tat = fmax(l->tat, t) + iv;
		return 1;
	case CONC:
		return in <= l->cap;
	default:
		return 1;
	}
}

/* 1 when the environment's name is set to v. */
static int
env_is(const char *name, const char *v)
{
	return getenv(name) != NULL && strcmp(getenv(name), v) == 0;
}

/* The environment's name as a number, or def when it is not set. */
static double
env_num(const char *name, double def)
{
	return getenv(name) != NULL ? atof(getenv(name)) : def;
}

/*
 * Send n documents through the pace of ep against l: a refused one goes to
 * the back of the queue.  Refusals answer at once; successes after l->lat.
 */
static struct out
sim(const char *ep, struct lim *l, const struct pace_cfg *c0, long n)
{
	struct pace_cfg cc = *c0, *c = &cc;
	double done[J], now = t_start, next, sent_at[J], at, pend[J];
	long seq[J], inq[J], in = 0, left = n, limit, i, pin, nb;
	struct pace_grant g;
	struct pace_ev e, b[J];
	struct out o;
	char err[256];
	int acc;

	/* SIMDBG=1 traces every run; SIMDBG=ep only ep's. */
	if (env_is("SIMDBG", "1") || env_is("SIMDBG", ep))
		setenv("SIMDBG_ON", "1", 1);
	else
		unsetenv("SIMDBG_ON");

	memset(&o, 0, sizeof(o));
	memset(&e, 0, sizeof(e));
	while (left > 0 && now < t_start + 3600) {
		/* What the client holds, as rfp-fetch says it. */
		cc.queued = left - in;
		/*
		 * Answers due by now, told in one call as rfp-fetch tells a
		 * turn's (the state is the one as many calls leave; under
		 * ASan, each call's copy of the state took most of the time).
		 */
		for (i = 0, nb = 0; i < in; i++) {
			if (done[i] > now)
				continue;
			b[nb] = e;
			b[nb].ev = PACE_OK;
			b[nb].sent_at = sent_at[i];
			b[nb].now = done[i];
			b[nb].inflight = inq[i];
			b[nb].seq = seq[i];
			b[nb].retry_after = -1;
			b[nb].ending = l->ending && o.rate > 0 &&
			    (double)left < 2 * o.rate;
			nb++;
			left--;
			done[i] = done[in - 1];
			pend[i] = pend[in - 1];
			sent_at[i] = sent_at[in - 1];
			inq[i] = inq[in - 1];
			seq[i] = seq[in - 1];
			in--;
			i--;
		}
		if (nb > 0 && pace_feedback_n(NULL, ep, c, b, (size_t)nb, NULL,
		    err, sizeof(err)) == -1)
			ok(0, "feedback: %s", err);
		if (left == 0)
			break;
		next = now + 1;
		for (i = 0; i < in; i++)
			next = fmin(next, done[i]);
		if (in + 0 < left && in < J) {
			if (pace_take_n(NULL, ep, c, now, 1, &g, err,
			    sizeof(err)) == -1)
				ok(0, "take: %s", err);
			if (getenv("SIMDBG_ON") && (long)(now - t_start) !=
			    o.last_sec) {
				o.last_sec = (long)(now - t_start);
				fprintf(stderr, "T %s %ld rate %.2f win %ld "
				    "sent %ld ref %ld\n", ep, o.last_sec,
				    g.rate, g.window, o.sent, o.refused);
			}
			limit = g.window > 0 && g.window < J ? g.window : J;
			o.window = g.window;
			o.rate = g.rate;
			o.paced = g.rate > 0;
			if (g.granted == 1 && in < limit) {
				o.sent++;
				if (l->stall > 0 && now >= l->stall_end &&
				    drand48() < (l->stall_p > 0 ? l->stall_p : 0.002))
					l->stall_end = now + l->stall;
				at = fmax(now, l->stall_end);
				/* The portal's count: an answer read late is sent. */
				for (i = 0, pin = 1; i < in; i++)
					pin += pend[i] > at;
				acc = admit(l, at, pin);
				if (in + 1 > o.maxin)
					o.maxin = in + 1;
				if (acc) {
					sent_at[in] = now;
					pend[in] = at + l->lat + (l->kind == DELAY ?
					    l->queued : 0) + (l->lat_j > 0 ?
					    (2 * drand48() - 1) * l->lat_j : 0);
					done[in] = pend[in] + (l->late > 0 &&
					    drand48() < l->late ? l->late_s : 0);
					inq[in] = in + 1;
					seq[in] = g.seq;
					in++;
				} else {
					o.refused++;
					if (o.rate > 0 && (double)left < 2 *
					    o.rate)
						o.end_ref++;
					if (getenv("SIMDBG_ON")) fprintf(stderr, "R %.4f at %.4f rate %.1f\n", now - t_start, at - t_start, g.rate);
					/* A stalled portal answers after. */
					now = at;
					e.ev = PACE_SLOW;
					e.busy = l->kind == CONC ? !l->s429 &&
					    getenv("PACE_CAP429") == NULL :
					    l->s503 || getenv("PACE_503") != NULL;
					e.sent_at = now;
					e.now = now + 0.0005;
					e.inflight = in + 1;
					e.seq = g.seq;
					e.retry_after = -1;
					if (pace_feedback_n(NULL, ep, c, &e, 1, NULL,
					    err, sizeof(err)) == -1)
						ok(0, "feedback: %s", err);
					now += 0.0005;
				}
				continue;
			}
			if (g.granted == 0 && g.wait > 0)
				next = fmin(next, now + g.wait);
		}
		now = fmax(next, now + 1e-6);
	}
	o.makespan = now - t_start;
	return o;
}

static void
report(const char *what, const struct out *o, double ideal)
{
	printf("# %s: %ld sent, %ld refused (%.1f %%), %.2f s, %.2f x ideal,"
	    " most in flight %ld, window %ld\n", what, o->sent, o->refused,
	    100.0 * (double)o->refused / (double)o->sent, o->makespan,
	    o->makespan / ideal, o->maxin, o->window);
}

/*
 * 60 documents against a strict limiter of rate a second, not told: at
 * most most refusals, and 1.2 x the ideal.
 */
static void
strict(const char *ep, double rate, long most)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct lim l;
	struct out o;
	char what[64];

	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = rate, l.burst = 0, l.lat = 0.001;
	o = sim(ep, &l, &none, 60);
	snprintf(what, sizeof(what), "%g/s strict", rate);
	report(what, &o, 59 / rate);
	ok(o.refused <= most, "%g/s, no burst: %ld refusals of %ld requests, "
	    "at most %ld", rate, o.refused, o.sent, most);
	ok(o.makespan <= 1.2 * 59 / rate, "%g/s, no burst: %.2f s, at most "
	    "1.2 x the ideal %.2f s", rate, o.makespan, 59 / rate);
}

static void
limiters(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 }, told = { 20, 0, 0, 0, 0, 0, 0, 0 };
	struct lim l;
	struct out o, e;

	memset(&l, 0, sizeof(l));
	l.kind = UNLIMITED;
	l.lat = 0.002;
	o = sim("free", &l, &none, 3000);
	report("unlimited", &o, 3000 * 0.002 / J);
	ok(o.refused == 0 && !o.paced && o.maxin == J,
	    "no limit: never paced, the window opens to -j");

	/*
	 * Slow answers and no limit: a window that grew by one a round trip
	 * (only the last send of a round saw the window full) took 48 s for
	 * 300 documents of 2 s at -j 32, an ideal 19 s.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = UNLIMITED;
	l.lat = 2;
	o = sim("slow", &l, &none, 300);
	report("unlimited, answers in 2 s", &o, 300 / 32.0 * 2);
	ok(o.refused == 0 && o.makespan <= 1.5 * 300 / 32.0 * 2, "no limit, "
	    "answers in 2 s: %.1f s, at most 1.5 x the ideal %.1f s",
	    o.makespan, 300 / 32.0 * 2);

	/*
	 * Answers of every length from 0.1 to 1.9 s and no limit: one far
	 * over the fastest is a queue's only in a run of three so slow, the
	 * last slower than the first.  Taken for a queue at each such
	 * answer alone, the window stayed under -j: 2.0 x the ideal.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = UNLIMITED;
	l.lat = 1, l.lat_j = 0.9;
	srand48(1);
	o = sim("jitter", &l, &none, 300);
	report("unlimited, answers in 0.1 to 1.9 s", &o, 300 / 32.0);
	ok(o.refused == 0 && o.makespan <= 1.6 * 300 / 32.0, "no limit, "
	    "answers in 0.1 to 1.9 s: %.1f s, at most 1.6 x the ideal %.1f s",
	    o.makespan, 300 / 32.0);

	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 20, l.burst = 10, l.lat = 0.001;
	o = sim("burst", &l, &none, 300);
	report("20/s burst 10", &o, (300 - 11) / 20.0);
	ok(o.refused <= 0.05 * o.sent, "20/s burst 10: %ld refusals of %ld "
	    "requests, at most 5 %%", o.refused, o.sent);
	ok(o.makespan <= 1.2 * (300 - 11) / 20.0, "20/s burst 10: %.2f s, "
	    "at most 1.2 x the ideal %.2f s", o.makespan, (300 - 11) / 20.0);

	strict("strict", 3, 3);

	/*
	 * Closed for the first 3 s (an earlier run spent it), then 3/s: the
	 * first answers are refusals, and no burst got through to measure a
	 * window by.  Taken for one of none, the first success put the pace
	 * at one request every 20 s.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 3, l.burst = 0, l.lat = 0.01;
	l.tat = t_start + 3;
	o = sim("shut", &l, &none, 60);
	report("closed 3 s, then 3/s", &o, 3 + 59 / 3.0);
	ok(o.rate >= 1.5 && o.makespan <= 2 * (3 + 59 / 3.0), "closed 3 s, "
	    "then 3/s: the pace ends at %.2f/s, at least 1.5; %.2f s, at most "
	    "2 x the ideal %.2f s (the floor's cut and the cubic probe cost "
	    "the rest)", o.rate, o.makespan, 3 + 59 / 3.0);

	/*
	 * A burst of 10 over 3/s: the first burst reads as 10/s, and the
	 * one success since the pace started says what the limit let
	 * through (taken for none: 4 refusals, 1.22 x).
	 */
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 3, l.burst = 10, l.lat = 0.02;
	o = sim("burst3", &l, &none, 60);
	report("3/s burst 10", &o, 49 / 3.0);
	ok(o.refused <= 3 && o.makespan <= 1.2 * 49 / 3.0, "3/s burst 10: "
	    "%ld refusals of %ld requests, at most 3; %.2f s, at most 1.2 x "
	    "the ideal %.2f s", o.refused, o.sent, o.makespan, 49 / 3.0);
	/*
	 * 1/s strict: the pace starts at its 2/s floor and doubles before
	 * the first cut; nudged down 10 % a cut from there it drew 9
	 * refusals (1.24 x the ideal), cut to what got through since the
	 * start, 5 (1.11 x); once a send the floor granted and the limit
	 * refused cut the floor, 4; now that a step back up refused after
	 * that cut holds the pace under the step before it, 3.
	 */
	strict("strict1", 1, 3);

	/*
	 * 100/s strict, 1,500 documents: cut to 95 % of the delivery
	 * measure, which reads under the limit (96/s), the pace probed from
	 * 87 to 101 and back every second, 1.22 x the ideal; cut to 95 % of
	 * the probe refused just over the measure, 1.13 x.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 100, l.burst = 0, l.lat = 0.02;
	o = sim("strict100", &l, &none, 1500);
	report("100/s strict", &o, 1499 / 100.0);
	ok(o.refused <= 0.05 * o.sent && o.makespan <= 1.2 * 1499 / 100.0,
	    "100/s, no burst: %ld refusals of %ld, %.2f s, at most 1.2 x the "
	    "ideal %.2f s", o.refused, o.sent, o.makespan, 1499 / 100.0);
	/*
	 * The same, the client saying when its work ends within 2 s: the
	 * pace probes no further, and no refusal (whose document would come
	 * back a Retry-After later, after everything else) comes then.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 100, l.burst = 0, l.lat = 0.02;
	l.ending = 1;
	e = sim("strict100e", &l, &none, 1500);
	report("100/s strict, the end said", &e, 1499 / 100.0);
	ok(e.end_ref == 0 && e.refused <= o.refused && e.makespan <= 1.01 *
	    o.makespan, "100/s, the end said: %ld refusals in its last 2 s "
	    "(%ld without), %ld in all (%ld), %.2f s (%.2f)", e.end_ref,
	    o.end_ref, e.refused, o.refused, e.makespan, o.makespan);

	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 20, l.burst = 0, l.lat = 0.001;
	o = sim("told", &l, &told, 300);
	report("20/s told", &o, 299 / 20.0);
	ok(o.refused == 0 && o.makespan <= 1.05 * 299 / 20.0, "20/s told: "
	    "%ld refusals, %.2f s of an ideal %.2f s", o.refused, o.makespan,
	    299 / 20.0);

	memset(&l, 0, sizeof(l));
	l.kind = CONC, l.cap = 4, l.lat = 0.25;
	o = sim("conc", &l, &none, 120);
	report("cap 4", &o, 30 * 0.25);
	ok(o.window == 4, "a concurrency cap of 4 is found and held: window "
	    "%ld", o.window);
	ok(o.refused <= 0.05 * o.sent, "cap 4: %ld refusals of %ld requests",
	    o.refused, o.sent);
	ok(o.makespan <= 1.2 * 30 * 0.25, "cap 4: %.2f s, at most 1.2 x the "
	    "ideal %.2f s", o.makespan, 30 * 0.25);

	/*
	 * A cap that answers 429: its refusals all come over it, so they
	 * are a cap's while the pace is still doubling.  Taken for the
	 * pace's (a 429 before the pace was ever cut, as a strict rate
	 * behind a slow portal is), 1.15 x the ideal, 1.57 x in the bench.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = CONC, l.cap = 5, l.lat = 0.25, l.s429 = 1;
	o = sim("c5-429", &l, &none, 300);
	report("cap 5 answering 429", &o, 15);
	ok(o.window == 5 && o.makespan <= 1.12 * 15, "a cap of 5 answering "
	    "429 is found and held: window %ld; %.2f s, at most 1.12 x the "
	    "ideal 15 s", o.window, o.makespan);

	/*
	 * A cap of 25 whose answers are read late now and then (a loop busy
	 * elsewhere): a send made meanwhile is counted with one more in
	 * flight than the portal has.  The most in flight at a success went
	 * over the cap, the cap's refusals passed for the pace's and the
	 * window never found it: 53 at the end, 3.6 % refused.
	 */
	srand48(3);
	memset(&l, 0, sizeof(l));
	l.kind = CONC, l.cap = 25, l.lat = 0.25, l.late = 0.05, l.late_s = 0.02;
	o = sim("conc-late", &l, &none, 1000);
	report("cap 25, answers read late", &o, 10);
	ok(o.window >= 23 && o.window <= 25, "cap 25, answers read late now "
	    "and then: the window holds at %ld", o.window);
	ok(o.refused <= 0.02 * o.sent && o.makespan <= 1.2 * 10, "cap 25, "
	    "answers read late: %ld refusals of %ld, %.2f s, at most 1.2 x "
	    "the ideal 10 s", o.refused, o.sent, o.makespan);

	/*
	 * A fifth read 30 ms late: successes seem to have gone with 26 to
	 * 28 in flight, and the cap's first refusals pass for the pace's.
	 * Each halved it, for sends the cut had not yet thinned: 262/s to
	 * 33 in 31 ms, 1.30 x the ideal.
	 */
	srand48(3);
	memset(&l, 0, sizeof(l));
	l.kind = CONC, l.cap = 25, l.lat = 0.25, l.late = 0.2, l.late_s = 0.03;
	o = sim("conc-later", &l, &none, 1500);
	report("cap 25, a fifth read 30 ms late", &o, 15);
	ok(o.refused <= 0.05 * o.sent && o.makespan <= 1.2 * 15, "cap 25, a "
	    "fifth read 30 ms late: %ld refusals of %ld, %.2f s, at most 1.2 "
	    "x the ideal 15 s", o.refused, o.sent, o.makespan);
}

/*
 * n documents against a GCRA of from a second that drops to to at 5 s,
 * answers in lat, not told; reported against ideal.
 */
static struct out
drop_sim(const char *ep, double from, double to, long n, double lat,
    double ideal)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct lim l;
	struct out o;
	char what[64];

	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = from, l.drop_at = 5, l.drop_to = to;
	l.lat = lat;
	o = sim(ep, &l, &none, n);
	snprintf(what, sizeof(what), "%g/s dropping to %g/s at 5 s, n %ld",
	    from, to, n);
	report(what, &o, ideal);
	return o;
}

/*
 * Limiters of other shapes, not told: a sliding window filled by the first
 * burst, a rate that drops mid-run, and a told rate whose arrivals the
 * portal sees bunched after a stall now and then (a busy machine).
 */
static void
shapes(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 }, told = { 100, 10, 0, 0, 0, 0, 0, 0 };
	struct lim l;
	struct out o;
	char ep[128];
	double sum;
	long s, sent, refused;

	/*
	 * The first burst fills the window; the pace that starts then was
	 * cut again and again while the window stayed full, and had to find
	 * its way back up: 2.56 x the ideal, 2.32 x once the probe grew as
	 * a cube, 1.58 x once it held while nothing got through, 1.14 x now
	 * that the pace held is not taken for the pace that failed.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = SLIDING, l.cap = 20, l.rate = 20, l.lat = 0.02;
	o = sim("sliding", &l, &none, 301);
	report("sliding 20/1 s", &o, 15);
	ok(o.refused <= 0.05 * o.sent, "sliding 20/1 s: %ld refusals of %ld "
	    "requests, at most 5 %%", o.refused, o.sent);
	ok(o.makespan <= 1.25 * 15 && o.rate >= 0.7 * 20, "sliding 20/1 s: "
	    "%.2f s, at most 1.25 x the ideal 15 s; the pace ends at %.1f/s, "
	    "at least 0.7 x the limit", o.makespan, o.rate);

	/*
	 * A window of 9 in 3 s: the first burst fills it, and while it
	 * stays closed nothing is measured (counted: 1.78 x the ideal).
	 * The burst, read over its first second, is 7/s: back up to 6.3
	 * once it opened, the pace filled it again, and the refusals that
	 * went on for a window cut it to 1.7/s (1.60 x, 7 refusals).  The
	 * time it took to open says 9 in about 3 s.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = SLIDING, l.cap = 9, l.rate = 3, l.lat = 0.02;
	o = sim("sliding3", &l, &none, 64);
	report("sliding 9/3 s", &o, 21);
	ok(o.makespan <= 1.2 * 21, "sliding 9/3 s: %.2f s, at most 1.2 x the "
	    "ideal 21 s", o.makespan);
	/* Four of them while the first burst's window is closed. */
	ok(o.refused <= 5, "sliding 9/3 s: %ld refusals, at most 5",
	    o.refused);

	/* Most of the ideal is lost finding the first rate: 1.2 x is not met. */
	o = drop_sim("drop", 50, 10, 350, 0.02, 14.9);
	ok(o.refused <= 0.07 * o.sent, "50/s dropping to 10/s: %ld refusals "
	    "of %ld requests, at most 7 %%", o.refused, o.sent);
	ok(o.rate >= 8 && o.rate <= 11 && o.makespan <= 1.65 * 14.9, "50/s "
	    "dropping to 10/s: the pace follows it down to %.1f/s; %.2f s, at "
	    "most 1.65 x the ideal 14.9 s", o.rate, o.makespan);

	/*
	 * A limit that falls refuses most of what the pace sends until the
	 * pace has followed it: a limit, not noise, and never let go for.
	 * Taken for noise (its refusals counted as a share of all answers
	 * since an early cut, the served ones before the fall among them),
	 * it drew 41 refusals.
	 */
	o = drop_sim("drop8", 20, 8, 130, 0.02, 13.4);
	ok(o.paced && o.rate <= 8.5 && o.refused <= 20, "20/s dropping to "
	    "8/s: paced at the end, at %.1f/s; %ld refusals of %ld requests, "
	    "at most 20", o.rate, o.refused, o.sent);

	/*
	 * A fall the measure was slow to follow, taken for noise: followed
	 * down, its last cuts each a round of one success and one refusal,
	 * it left a run of 4 refusals in 28 answers that the probe's next
	 * refusal took for noise at 11 %: the pace was let go (5 refused at
	 * once) and, under that share, refusals 8 in a second cut nothing
	 * (39 refusals of 443, 1.47 x the ideal).  A run that has refused
	 * as often as it served is a limit's: 18 of 422, 1.27 x.
	 */
	o = drop_sim("drop13", 40, 13.6, 404, 0.02, 20);
	ok(o.refused <= 0.06 * o.sent && o.makespan <= 1.35 * 20, "40/s "
	    "dropping to 13.6/s: %ld refusals of %ld requests, at most 6 %%; "
	    "%.2f s, at most 1.35 x the ideal 20 s", o.refused, o.sent,
	    o.makespan);

	/*
	 * Far under the pace, a strict limit served the first send after
	 * each refusal some way into its interval: 3/s read as 2.35/s, and
	 * the pace settled 26 % under the limit.
	 */
	o = drop_sim("drop3", 20, 3, 130, 0.02, 14.7);
	ok(o.paced && o.rate >= 0.85 * 3 && o.rate <= 3, "20/s dropping to "
	    "3/s: the pace ends at %.2f/s, 0.85 to 1 x the limit", o.rate);

	/*
	 * A strict rate behind a slow portal: answers in 0.5 s, so that the
	 * limit holds 10 (20/s) or 25 (50/s) in flight.  The first refusals
	 * came as the window opened, at more in flight than the successes
	 * before; taken for a concurrency cap, the window was held at 3 to
	 * 5 and the pace never cut (2.73 and 6.48 x the ideal).  Not taken
	 * for one, the pace was cut to what got through while the window
	 * was full, the window's rate (1.43 and 1.70 x).  Then the measure
	 * of the first seconds, counted while the window opened, was kept
	 * for 30 s under the rounds that delivered more, and cut each probe
	 * back under it: 1.26 and 1.42 x, and at 0.25 s, 50/s and 100/s
	 * 1.32 and 1.35 x; floored by a whole round's delivery, 1.15, 1.20,
	 * 1.11 and 1.13 x.  (The same limits answering 503, nginx's
	 * limit_req's default, are still taken for a cap's: 2.73, 6.48,
	 * 3.24 and 1.55 x; PACE_503=1.  doc/limits.md says what was tried.)
	 */
	for (s = 0; s < 4; s++) {
		static const double rate[] = { 20, 50, 50, 100 },
		    lat[] = { 0.5, 0.5, 0.25, 0.25 },
		    most[] = { 1.2, 1.25, 1.2, 1.2 };

		memset(&l, 0, sizeof(l));
		l.kind = GCRA, l.rate = rate[s], l.lat = lat[s];
		snprintf(ep, sizeof(ep), "slow-%ld", s);
		o = sim(ep, &l, &none, (long)(15 * l.rate));
		snprintf(ep, sizeof(ep), "%g/s strict, answers in %g s",
		    l.rate, l.lat);
		report(ep, &o, 15 - 1 / l.rate);
		ok(o.makespan <= most[s] * 15 && o.refused <= 0.05 * o.sent,
		    "%s: %.2f s, at most %.2f x the ideal 15 s; %ld refusals "
		    "of %ld requests, at most 5 %%", ep, o.makespan, most[s],
		    o.refused, o.sent);
	}

	/*
	 * A cap answering 503 in 20 ms, a fifth of its answers read 30 ms
	 * late: successes seem sent with more in flight than the cap, so a
	 * refusal at the cap's edge comes with fewer than they had.  A 503
	 * sent behind sends from before the last cut cuts nothing (cut()):
	 * read as a 429's once such a refusal had come, each cut the pace,
	 * 1.47 x the ideal (3.4 % refused), not 1.20 x (4.3 %).
	 */
	srand48(3);
	memset(&l, 0, sizeof(l));
	l.kind = CONC, l.cap = 25, l.lat = 0.02, l.late = 0.2, l.late_s = 0.03;
	o = sim("conc-fast-late", &l, &none, 3000);
	report("cap 25 in 20 ms, a fifth read 30 ms late", &o, 2.4);
	ok(o.makespan <= 1.3 * 2.4, "cap 25 answering 503 in 20 ms, a fifth "
	    "read 30 ms late: %.2f s, at most 1.3 x the ideal 2.4 s (%ld "
	    "refusals of %ld)", o.makespan, o.refused, o.sent);

	/*
	 * A limit that delays what is over its rate, a burst of it at most
	 * (nginx's limit_req without nodelay), answering 503: the window
	 * opens no further than its queue lets through, and what it refuses
	 * once the queue is full is the rate's.  Answers far over the
	 * fastest and slowing, three in a row, are a queue: the window grew
	 * by each all the same, to 11 at 3/s, and the queue refused 2 (none
	 * now, 4 in flight at the most).
	 */
	for (s = 0; s < 2; s++) {
		static const double rate[] = { 3, 20 }, lat[] = { 0.02, 0.25 };
		long n = (long)fmax(60, 15 * rate[s] + 10);
		double ideal = (double)(n - 1) / rate[s];

		memset(&l, 0, sizeof(l));
		l.kind = DELAY, l.rate = rate[s], l.burst = 10, l.lat = lat[s];
		l.s503 = 1;
		snprintf(ep, sizeof(ep), "delay-%ld", s);
		o = sim(ep, &l, &none, n);
		snprintf(ep, sizeof(ep), "%g/s delaying a burst of 10, "
		    "answers in %g s, 503", l.rate, l.lat);
		report(ep, &o, ideal);
		ok(o.makespan <= 1.1 * ideal && o.refused <= (s == 0 ? 1 :
		    0.05 * o.sent), "%s: %.2f s, at most 1.1 x the ideal; %ld "
		    "refusals of %ld requests, at most %s", ep, o.makespan,
		    o.refused, o.sent, s == 0 ? "1" : "5 %");
	}

	/*
	 * A burst behind slow answers, over a minute: a round that spent
	 * the burst refilled under the pace delivered more than the limit,
	 * and raised to that, the measure let each cut go 5 %, and the runs
	 * of cuts that followed passed for noise: 227 refusals of 3,237
	 * (7.0 %), not 49 of 3,059.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 50, l.burst = 10, l.lat = 0.5;
	o = sim("slow50b10", &l, &none, 3010);
	report("50/s burst 10, answers in 0.5 s, a minute", &o, 60);
	ok(o.refused <= 0.03 * o.sent && o.makespan <= 1.1 * 60, "50/s burst "
	    "10, answers in 0.5 s: %ld refusals of %ld, at most 3 %%; %.2f s, "
	    "at most 1.1 x the ideal 60 s", o.refused, o.sent, o.makespan);

	/*
	 * A limit that falls far is followed down at the rate that gets
	 * through, not a tenth a refusal: 20/s to 3/s drew 18 refusals
	 * (10 now), 50/s to 10/s 21 (14), 100/s to 20/s 36 (26).
	 */
	for (s = 0; s < 3; s++) {
		static const double from[] = { 20, 50, 100 }, to[] = { 3, 10,
		    20 };
		static const long most[] = { 12, 17, 30 };

		snprintf(ep, sizeof(ep), "fall-%ld", s);
		o = drop_sim(ep, from[s], to[s], (long)(5 * from[s] + 15 *
		    to[s]), 0.02, 20);
		ok(o.refused <= most[s], "%g/s falling to %g/s: %ld refusals "
		    "of %ld requests, at most %ld", from[s], to[s], o.refused,
		    o.sent, most[s]);
	}

	/*
	 * A burst spent behind slow answers is a fall too, from the burst
	 * to the rate; the sends still in flight at its refusals are not
	 * yet counted through, and counted out, a 10/s with a burst of 10
	 * answering in 1 s read as under half itself (1.55 x the ideal).
	 */
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 10, l.burst = 10, l.lat = 1;
	o = sim("fall-slow", &l, &none, 160);
	report("10/s burst 10, answers in 1 s", &o, 149 / 10.0);
	ok(o.makespan <= 1.4 * 14.9, "10/s burst 10, answers in 1 s: %.2f s, "
	    "at most 1.4 x the ideal 14.9 s", o.makespan);

	/*
	 * Arrivals bunched by a stall are refused two at once, with nothing
	 * through between: no fall.  Taken for one at the first refusal
	 * after, a strict 100/s answering in 0.25 s was halved for a stall,
	 * measured anew over the stalls, and crawled: 5.99 x the ideal in
	 * this draw, not 4.00.
	 */
	{
		/* srand48(10)'s draw, the cells after left their own. */
		unsigned short ten[3] = { 0x330e, 10, 0 }, keep[3];

		memcpy(keep, seed48(ten), sizeof(keep));
		memset(&l, 0, sizeof(l));
		l.kind = GCRA, l.rate = 100, l.lat = 0.25;
		l.stall = 0.3, l.stall_p = 0.03;
		o = sim("fall-stall", &l, &none, 1500);
		report("100/s strict, answers in 0.25 s, stalls of 0.3 s", &o,
		    14.99);
		ok(o.makespan <= 4.5 * 14.99, "100/s strict, answers in 0.25 "
		    "s, stalls: %.2f s, at most 4.5 x the ideal 14.99 s",
		    o.makespan);
		(void)seed48(keep);
	}

	/*
	 * A limit that falls step by step, 50/s to 5/s over 30 s, refuses
	 * now and then at each step, with successes between.  Which
	 * refusals come when is chaos here: answers in 20 ms drew 90, and
	 * 130 with a change to how intervals are measured (doc/limits.md) whose
	 * mean over six answer times was 112 where this one's is 105; the
	 * fall's rule that refusals outnumber the successes, once taken
	 * from the one run (118 without it, 89 with it), moves that mean by
	 * less.  So six answer times, from 10 to 50 ms, each bounded, and
	 * their mean more tightly: a pace cut to 99.5 % of the measure, not
	 * 95 %, drew 146 on average and 179 at one.
	 */
	{
		static const double lats[] = { 0.01, 0.015, 0.02, 0.03, 0.04,
		    0.05 };
		const size_t nl = sizeof(lats) / sizeof(lats[0]);
		long nref = 0, most = 0;
		size_t k;
		char rep[32];

		for (k = 0; k < nl; k++) {
			memset(&l, 0, sizeof(l));
			l.kind = GCRA, l.rate = 50, l.drop_to = 5;
			l.drop_at = -30;
			l.lat = lats[k];
			snprintf(rep, sizeof(rep), "fall-ramp-%zu", k);
			o = sim(rep, &l, &none, 1000);
			report("50/s falling to 5/s over 30 s", &o, 0);
			nref += o.refused;
			most = o.refused > most ? o.refused : most;
		}
		ok(most <= 160 && nref <= 120 * (long)nl, "50/s falling to 5/s "
		    "over 30 s, answers in 10 to 50 ms: %.1f refusals on "
		    "average, at most 120; %ld at the most, at most 160",
		    (double)nref / (double)nl, most);
	}

	/*
	 * Followed down from 40/s to a strict 30/s, every other send refused
	 * on the way: the measure read 17.5/s, and each probe that reached
	 * 30 after a clean round was cut back to 16.7 and climbed for 8 s
	 * (1.56 x the ideal).  What the round delivered outdates it.
	 */
	o = drop_sim("drop30", 40, 30, 650, 0.02, 20);
	ok(o.makespan <= 1.35 * 20 && o.rate >= 0.9 * 30, "40/s dropping to "
	    "30/s: %.2f s, at most 1.35 x the ideal 20 s; the pace ends at "
	    "%.1f/s, at least 0.9 x the limit", o.makespan, o.rate);

	/*
	 * A strict 50/s, its probes refused at 50.0 to 50.2 each time: cut
	 * to 45 each time and probed back over 81 successes, the pace ran
	 * 1.16 x the ideal.  The same pace refused again is the limit found.
	 */
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 50, l.lat = 0.02;
	o = sim("strict50", &l, &none, 750);
	report("50/s strict", &o, 749 / 50.0);
	ok(o.makespan <= 1.14 * 749 / 50.0 && o.refused <= 0.03 * o.sent,
	    "50/s strict: %.2f s, at most 1.14 x the ideal %.2f s; %ld "
	    "refusals of %ld, at most 3 %%", o.makespan, 749 / 50.0, o.refused,
	    o.sent);

	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 100, l.burst = 10, l.lat = 0.005;
	l.stall = 0.3;
	o = sim("stalls", &l, &told, 1500);
	report("100/s burst 10 told, stalls of 0.3 s", &o, 14.9);
	ok(o.makespan <= 1.2 * 14.9 && o.refused <= 0.05 * o.sent, "100/s "
	    "told, stalls: %.2f s, at most 1.2 x the ideal 14.9 s; %ld "
	    "refusals of %ld, at most 5 %%", o.makespan, o.refused, o.sent);

	/*
	 * Not told, a strict 100/s whose arrivals stall 0.3 s at one send
	 * in 33 (busier than any bench's machine): the bunches are refused
	 * at any pace, and cuts do not cure them.  Over eight draws: cut for
	 * each, the pace crawled (14.2 x the ideal on average, 428 refusals
	 * of 12,428); let go as noise, 743 of 12,743 (5.8 %) at 6.8 x;
	 * held where the cuts left it, 692 of 12,692 (5.5 %) at 7.3 x.
	 */
	for (s = 1, sum = 0, sent = 0, refused = 0; s <= 8; s++) {
		srand48(s);
		memset(&l, 0, sizeof(l));
		l.kind = GCRA, l.rate = 100, l.lat = 0.02;
		l.stall = 0.3, l.stall_p = 0.03;
		snprintf(ep, sizeof(ep), "stalls-strict-%ld", s);
		o = sim(ep, &l, &none, 1500);
		snprintf(ep, sizeof(ep), "100/s strict, stalls of 0.3 s at one "
		    "send in 33, seed %ld", s);
		report(ep, &o, 14.99);
		sum += o.makespan;
		sent += o.sent;
		refused += o.refused;
	}
	ok(sum / 8 <= 10 * 14.99 && refused <= 0.06 * sent, "100/s strict, "
	    "not told, stalls: %.2f s on average over eight draws, at most 10 x "
	    "the ideal 14.99 s; %ld refusals of %ld, at most 6 %%", sum / 8,
	    refused, sent);
}

/*
 * Refusals at random, with no limit behind them (a flaky gateway), and
 * with one: each refusal cut the pace to under what got through between
 * two of them, which was the pace's own less the noise, and the run
 * crawled.  600 documents of 0.1 s with 10 % or 20 % refused at random
 * were not done in an hour; a 50/s limit with 10 % on top took 5 to 178
 * times its ideal.  Now the refusals are found to be noise after a few
 * cuts that did not cure them, the pace is let go, and the noise's share
 * no longer cuts it.
 */
static void
noise(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	/*
	 * 3 % is found late or not at all: a run of cuts often ends at 32
	 * successes with no refusal, and starts again (10 x the ideal).
	 */
	static const double shares[] = { 0.03, 0.1, 0.2 }, most[] = { 15, 3, 3 };
	const size_t nsh = sizeof(shares) / sizeof(shares[0]);
	struct lim l;
	struct out o;
	char ep[64];
	double ideal, sum;
	size_t i;
	long s;

	/* Each share refused with 429, then with 503. */
	for (i = 0; i < 2 * nsh; i++) {
		srand48(2);
		memset(&l, 0, sizeof(l));
		l.kind = NOISE, l.share = shares[i % nsh], l.lat = 0.1;
		l.s503 = i >= nsh;
		snprintf(ep, sizeof(ep), "noise-%zu", i);
		o = sim(ep, &l, &none, 600);
		/* -j 32 of 0.1 s answers, every refusal sent again. */
		ideal = 600 / (1 - shares[i % nsh]) * 0.1 / J;
		snprintf(ep, sizeof(ep), "%.0f %% refused at random, %d", 100 *
		    shares[i % nsh], l.s503 ? 503 : 429);
		report(ep, &o, ideal);
		/*
		 * 20 %: 6.3 x while a refusal that came first after a cut,
		 * alone, began the run of cuts again.
		 */
		ok(o.makespan <= most[i % nsh] * ideal, "%s, no limit: %.2f s, "
		    "at most %.0f x the %.2f s of -j 32 (finding it noise costs "
		    "a few cuts at a low pace)", ep, o.makespan, most[i % nsh],
		    ideal);
	}
	/*
	 * Which refusals come when is chaos here: a seed's makespan moves by
	 * 10 % or more with any change to the pace.  Each seed is bounded,
	 * and the three together more tightly (1.75, 1.80 and 2.01 x; 1.87,
	 * 1.57 and 6.21 x while a refusal that came first after a cut, alone,
	 * began the run of cuts again; 7.03 x for the third before noise was
	 * found at 3 % once the pace was halved).
	 */
	for (s = 1, sum = 0; s <= 3; s++) {
		srand48(s);
		memset(&l, 0, sizeof(l));
		l.kind = GCRA, l.rate = 50, l.lat = 0.1, l.share = 0.1;
		snprintf(ep, sizeof(ep), "noise-gcra-%ld", s);
		o = sim(ep, &l, &none, 750);
		snprintf(ep, sizeof(ep), "50/s strict, 10 %% refused at "
		    "random, seed %ld", s);
		report(ep, &o, 749 / 50.0);
		ok(o.makespan <= 3 * 749 / 50.0 && o.refused <= 0.16 *
		    o.sent, "50/s with 10 %% refused at random, seed %ld: "
		    "%.2f s, at most 3 x the ideal 14.98 s; %ld refusals of "
		    "%ld, at most 16 %%", s, o.makespan, o.refused, o.sent);
		sum += o.makespan;
	}
	ok(sum / 3 <= 2.5 * 749 / 50.0, "50/s with 10 %% refused at random: "
	    "%.2f s on average over the three seeds, at most 2.5 x the ideal",
	    sum / 3);
}

/*
 * A told rate is the operator's word: refusals (late arrivals, a wrong
 * word) cut it, but never under half of it, and it comes back to it.
 */
static void
told_floor(void)
{
	static const struct {
		const char	*ep;
		double		 rate, hold;
	} hc[] = {
		/* Paced 1 ms under the rate told. */
		{ "told-hold-20", 20, 0.15 },	/* 2 intervals: 0.102 s */
		{ "told-hold-5", 5, 2 * (1 / 5.0 + 0.001) },
		{ "told-hold-3", 3, 0.5 },	/* 2 intervals: 0.668 s */
	};
	struct pace_cfg told = { 20, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	double t = T0 + 7200;
	int i;

	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	for (i = 0; i < 40; i++, t += 0.1) {
		pace_take_n(NULL, "told-floor", &told, t, 1, &g, err,
		    sizeof(err));
		e.ev = PACE_SLOW, e.sent_at = t, e.now = t + 0.01;
		e.seq = g.seq, e.inflight = 1;
		pace_feedback_n(NULL, "told-floor", &told, &e, 1, NULL, err,
		    sizeof(err));
	}
	pace_take_n(NULL, "told-floor", &told, t, 0, &g, err, sizeof(err));
	ok(g.rate >= 0.5 / (1 / 20.0 + 0.001) - 1e-9 && g.rate < 19.6, "40 "
	    "refusals cut a told 20/s to %.2f/s, no less than half", g.rate);
	for (i = 0; i < 20; i++, t += 0.1) {
		pace_take_n(NULL, "told-floor", &told, t, 1, &g, err,
		    sizeof(err));
		e.ev = PACE_OK, e.sent_at = t, e.now = t + 0.01;
		e.seq = g.seq;
		pace_feedback_n(NULL, "told-floor", &told, &e, 1, NULL, err,
		    sizeof(err));
	}
	pace_take_n(NULL, "told-floor", &told, t, 0, &g, err, sizeof(err));
	ok(fabs(g.rate - 1 / (1 / 20.0 + 0.001)) < 1e-6, "20 successes later it "
	    "is back at the told rate: %.2f/s", g.rate);

	/*
	 * A told rate leaves 1 ms more between sends, at most 2 %: it was
	 * 3 % always, a 60 s ideal at 1/s taking 61.9 s; and 3 % at most
	 * until sends were spaced as written.
	 */
	told.rate = 1;
	pace_take_n(NULL, "told-1", &told, t, 1, &g, err, sizeof(err));
	ok(fabs(g.rate - 1 / 1.001) < 1e-9, "told 1/s, paced at %.4f/s: 1 ms "
	    "more between sends", g.rate);
	told.rate = 100;
	pace_take_n(NULL, "told-100", &told, t, 1, &g, err, sizeof(err));
	ok(fabs(g.rate - 98) < 1e-9, "told 100/s, paced at %.2f/s: 2 %% "
	    "under", g.rate);

	/* The first send of all holds the next 5 ms more: it arrives late. */
	told.rate = 20;
	pace_take_n(NULL, "told-first", &told, t, 2, &g, err, sizeof(err));
	ok(g.granted == 1 && fabs(g.wait - (1 / 20.0 + 0.001 + 0.005)) < 1e-6,
	    "told 20/s: after the first send of all, the next in %.4f s",
	    g.wait);
	pace_take_n(NULL, "told-first", &told, t + g.wait, 2, &g, err,
	    sizeof(err));
	ok(g.granted == 1 && fabs(g.wait - (1 / 20.0 + 0.001)) < 1e-6,
	    "... and after the second, in %.4f s", g.wait);

	/*
	 * A process's first send holds every grant after it, another
	 * process's too, until its answer (then an interval after it), and
	 * half a second at the most.
	 */
	told.first = 1;
	pace_take_n(NULL, "told-hold", &told, t, 1, &g, err, sizeof(err));
	told.first = 0;
	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	e.ev = PACE_OK, e.seq = g.seq, e.inflight = 1;
	pace_take_n(NULL, "told-hold", &told, t + 0.1, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && g.wait > 0 && g.wait <= 1 / 20.0 + 0.001 + 1e-9,
	    "told 20/s: after a process's first send, no grant 0.1 s on "
	    "(asked again in %.4f s)", g.wait);
	e.sent_at = t, e.now = t + 0.3;
	pace_feedback_n(NULL, "told-hold", &told, &e, 1, NULL, err,
	    sizeof(err));
	pace_take_n(NULL, "told-hold", &told, t + 0.3, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && fabs(g.wait - (1 / 20.0 + 0.001)) < 1e-6,
	    "... its answer at 0.3 s: the next an interval after (%.4f s)",
	    g.wait);
	pace_take_n(NULL, "told-hold", &told, t + 0.3 + g.wait, 1, &g, err,
	    sizeof(err));
	ok(g.granted == 1, "... and granted then");
	/*
	 * Unanswered, held two intervals: 0.15 s at the least, 0.5 s at
	 * the most.
	 */
	for (i = 0; i < (int)(sizeof(hc) / sizeof(hc[0])); i++) {
		told.rate = hc[i].rate;
		told.first = 1;
		pace_take_n(NULL, hc[i].ep, &told, t, 1, &g, err, sizeof(err));
		told.first = 0;
		pace_take_n(NULL, hc[i].ep, &told, t + hc[i].hold - 0.001, 1,
		    &g, err, sizeof(err));
		ok(g.granted == 0, "told %g/s, unanswered: still held at "
		    "%.3f s", hc[i].rate, hc[i].hold - 0.001);
		pace_take_n(NULL, hc[i].ep, &told, t + hc[i].hold, 1, &g, err,
		    sizeof(err));
		ok(g.granted == 1, "... and not at %.3f s", hc[i].hold);
	}
	told.rate = 20;
	told.burst = 10;
	told.first = 1;
	pace_take_n(NULL, "told-hold-burst", &told, t, 1, &g, err, sizeof(err));
	told.first = 0;
	pace_take_n(NULL, "told-hold-burst", &told, t + 0.1, 1, &g, err,
	    sizeof(err));
	ok(g.granted == 1, "with a burst told, nothing is held");
	told.burst = 0;
	/*
	 * Where a lease is granted (400/s, 25 ms ahead), a first send is
	 * granted alone: the lease's others would go before its answer.
	 */
	told.rate = 400;
	told.lease = 0.025;
	pace_take_n(NULL, "told-hold-lease", &told, t, 8, &g, err,
	    sizeof(err));
	ok(g.granted == 8, "told 400/s, not a first send: a lease of %ld",
	    g.granted);
	told.first = 1;
	pace_take_n(NULL, "told-hold-lease1", &told, t, 8, &g, err,
	    sizeof(err));
	told.first = 0;
	ok(g.granted == 1, "... a first send: granted alone (%ld)", g.granted);
	pace_take_n(NULL, "told-hold-lease1", &told, t + 0.01, 8, &g, err,
	    sizeof(err));
	ok(g.granted == 0, "... and the next held for its answer (%ld)",
	    g.granted);
	told.rate = 20;
	told.lease = 0;

	/*
	 * A send written 3 ms after its grant holds the next a whole
	 * interval after it went out, not after it was granted; one written
	 * on time changes nothing.
	 */
	told.rate = 20;
	pace_take_n(NULL, "told-late", &told, t, 1, &g, err, sizeof(err));
	pace_take_n(NULL, "told-late", &told, t + 0.056, 1, &g, err,
	    sizeof(err));
	memset(&e, 0, sizeof(e));
	e.ev = PACE_OK;
	e.sent_at = t + 0.056;
	e.wrote_at = t + 0.056;
	e.now = t + 0.058;
	e.seq = -1;
	e.retry_after = -1;
	pace_feedback_n(NULL, "told-late", &told, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "told-late", &told, t + 0.058, 1, &g, err,
	    sizeof(err));
	ok(g.granted == 0 && fabs(g.wait - (0.051 - 0.002)) < 1e-6,
	    "told 20/s, a send written on time: the next in %.4f s", g.wait);
	e.wrote_at = t + 0.059;
	e.now = t + 0.060;
	pace_feedback_n(NULL, "told-late", &told, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "told-late", &told, t + 0.060, 1, &g, err,
	    sizeof(err));
	ok(g.granted == 0 && fabs(g.wait - 0.050) < 1e-6,
	    "... written 3 ms late: the next 51 ms after it went out, in "
	    "%.4f s", g.wait);

	/*
	 * A send granted 4 ms after its time keeps 1 ms more after it (what
	 * held it up may hold its way to the portal too); one granted 0.3 ms
	 * after keeps to the pace.
	 */
	pace_take_n(NULL, "told-held", &told, t, 1, &g, err, sizeof(err));
	pace_take_n(NULL, "told-held", &told, t + 0.060, 1, &g, err,
	    sizeof(err));
	pace_take_n(NULL, "told-held", &told, t + 0.060, 1, &g, err,
	    sizeof(err));
	ok(g.granted == 0 && fabs(g.wait - 0.052) < 1e-6,
	    "told 20/s, a send granted 4 ms late: the next in %.4f s", g.wait);
	pace_take_n(NULL, "told-held", &told, t + 0.1123, 1, &g, err,
	    sizeof(err));
	pace_take_n(NULL, "told-held", &told, t + 0.1123, 1, &g, err,
	    sizeof(err));
	ok(g.granted == 0 && fabs(g.wait - 0.051) < 1e-6,
	    "... granted 0.3 ms late: the next in %.4f s", g.wait);
}

/*
 * Several processes start at once: their first sends are refused together,
 * and one refusal starts the pace at its floor (nothing delivered yet to
 * measure).  The others, answered a moment later, are of the same burst:
 * they must not cut the floor, or the pace takes 2/s for the limit.
 */
static void
floor_start(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	double t = T0 + 3 * 7200;
	int i;

	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	e.ev = PACE_SLOW, e.sent_at = t, e.now = t + 0.001, e.seq = -1;
	pace_feedback_n(NULL, "floor", &none, &e, 1, NULL, err, sizeof(err));
	/* Sent by another process just after, refused just after. */
	e.sent_at = t + 0.002, e.now = t + 0.003;
	pace_feedback_n(NULL, "floor", &none, &e, 1, NULL, err, sizeof(err));
	for (t += 0.05, i = 0; i < 8; i++, t += 0.05) {
		e.ev = PACE_OK, e.sent_at = t, e.now = t + 0.01;
		pace_feedback_n(NULL, "floor", &none, &e, 1, NULL, err, sizeof(err));
	}
	pace_take_n(NULL, "floor", &none, t, 0, &g, err, sizeof(err));
	ok(g.rate >= 16, "a pace started at its floor by a burst's refusals "
	    "doubles from it: %.1f/s after 8 successes", g.rate);
}

/*
 * A caller holding many documents starts the pace from a higher floor
 * (one a second for each 40, 16 at most; 2 for 80 or fewer), and a floor
 * so raised that is refused before anything got through starts again
 * from 2, as any start.  Against strict limits, 300 documents: the high
 * limits found sooner, the low ones at no more than a refusal's cost.
 * Before: 50/s 1.23 x, 100/s 1.43 x the ideal.  A floor of 7.5 without
 * the start again: 1/s 1.23 x, 3/s 1.28 x.  Without taking an interval
 * over which the pace grew for the limit's (HELD), 10/s 1.31 x; with the
 * successes at the slowest pace taken for the limiter's (SPACED), 1.19 x.
 */
static void
floor_many(void)
{
	struct pace_cfg held = { 0, 0, 0, 0, 0, 0, 0, 0 };
	static const double rates[] = { 1, 3, 10, 50, 100 },
	    most[] = { 1.1, 1.1, 1.1, 1.15, 1.2 };
	struct pace_grant g;
	struct pace_ev e;
	struct lim l;
	struct out o;
	char err[256], ep[64];
	double t = T0 + 5 * 7200;
	size_t i;

	for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		memset(&l, 0, sizeof(l));
		l.kind = GCRA, l.rate = rates[i], l.lat = 0.02;
		snprintf(ep, sizeof(ep), "many-%zu", i);
		o = sim(ep, &l, &held, 300);
		snprintf(ep, sizeof(ep), "%g/s strict, 300 documents", rates[i]);
		report(ep, &o, 299 / rates[i]);
		ok(o.makespan <= most[i] * 299 / rates[i] && o.refused <= 0.05 *
		    o.sent, "%g/s strict, 300 documents: %.2f s, at most %g x "
		    "the ideal %.1f s; %ld refusals of %ld, at most 5 %%",
		    rates[i], o.makespan, most[i], 299 / rates[i], o.refused,
		    o.sent);
	}

	/* The floor: 300 held, 7.5/s; 60 held, 2/s. */
	memset(&e, 0, sizeof(e));
	e.retry_after = -1, e.seq = -1;
	held.queued = 300;
	e.ev = PACE_SLOW, e.sent_at = t, e.now = t + 0.001;
	pace_feedback_n(NULL, "floor300", &held, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "floor300", &held, t + 0.002, 1, &g, err, sizeof(err));
	ok(fabs(g.rate - 7.5) < 1e-9, "300 documents held: the pace starts "
	    "at %.2f/s", g.rate);
	held.queued = 60;
	pace_feedback_n(NULL, "floor60", &held, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "floor60", &held, t + 0.002, 1, &g, err, sizeof(err));
	ok(fabs(g.rate - 2) < 1e-9, "60 documents held: the pace starts at "
	    "%.2f/s", g.rate);
	/* The raised floor's own send refused: from 2/s, not 3.75. */
	held.queued = 300;
	e.sent_at = t + 0.2, e.now = t + 0.201, e.seq = g.seq;
	pace_take_n(NULL, "floor300", &held, t + 0.2, 1, &g, err, sizeof(err));
	e.seq = g.seq;
	pace_feedback_n(NULL, "floor300", &held, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "floor300", &held, t + 0.202, 1, &g, err, sizeof(err));
	ok(fabs(g.rate - 2) < 1e-9, "a raised floor refused before anything "
	    "got through: the pace starts again at %.2f/s", g.rate);
}

/*
 * Three processes share a pace no one has pushed back on: each was
 * granted its sends before the first refusal started the pace.  Another's
 * refusal of such a send, answered after the start, is no news of the
 * pace when it carries its grant's number; numberless, it passes for a
 * send made under the pace and cuts it while it starts (rfp-fetch's free
 * sends were numberless, and three hosts crawled at 4/s to 500 for 40 s).
 */
static void
shared_start(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant a, b, c, g;
	struct pace_ev e;
	char err[256];
	double t = T0 + 4 * 7200, r0;
	int i;

	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	/* Two sends each (the window before any push back). */
	pace_take_n(NULL, "shared", &none, t, 2, &a, err, sizeof(err));
	pace_take_n(NULL, "shared", &none, t, 2, &b, err, sizeof(err));
	pace_take_n(NULL, "shared", &none, t, 2, &c, err, sizeof(err));
	for (i = 0; i < 4; i++) {
		e.ev = PACE_OK, e.sent_at = t, e.now = t + 0.001;
		e.seq = a.seq + i;
		pace_feedback_n(NULL, "shared", &none, &e, 1, NULL, err, sizeof(err));
	}
	e.ev = PACE_SLOW, e.now = t + 0.002, e.seq = c.seq;
	pace_feedback_n(NULL, "shared", &none, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "shared", &none, t + 0.002, 0, &g, err, sizeof(err));
	r0 = g.rate;
	/* c's other, sent after the start, refused. */
	e.sent_at = t + 0.003, e.now = t + 0.004, e.seq = c.seq + 1;
	pace_feedback_n(NULL, "shared", &none, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "shared", &none, t + 0.004, 0, &g, err, sizeof(err));
	ok(a.granted + b.granted + c.granted == 6 && r0 > 0 && g.rate == r0,
	    "a refusal of a send granted before the "
	    "pace started, by its number, leaves it at %.2f/s (%.2f/s)", r0,
	    g.rate);
	e.seq = -1, e.sent_at = t + 0.005, e.now = t + 0.006;
	pace_feedback_n(NULL, "shared", &none, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "shared", &none, t + 0.006, 0, &g, err, sizeof(err));
	ok(g.rate < r0, "numberless, sent after the start, it cuts it: %.2f/s",
	    g.rate);
}

/*
 * A burst allowance spent at a low rate: the successes it let through at
 * once, and those still on the wire when it ran out, say nothing of the
 * rate; the pace comes down to what gets through in a few steps.
 */
static void
bursts(void)
{
	static const struct {
		double	rate;
		long	burst, n;
		double	most;		/* refusals, a share of requests */
	} c[] = {
		{ 1, 60, 75, 0.30 }, { 3, 60, 105, 0.16 },
	};
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct lim l;
	struct out o;
	char ep[64];
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		memset(&l, 0, sizeof(l));
		l.kind = GCRA, l.rate = c[i].rate, l.burst = c[i].burst;
		l.lat = 0.02;
		snprintf(ep, sizeof(ep), "burst%zu", i);
		o = sim(ep, &l, &none, c[i].n);
		snprintf(ep, sizeof(ep), "%g/s burst %ld", c[i].rate,
		    c[i].burst);
		report(ep, &o, (double)(c[i].n - c[i].burst - 1) / c[i].rate);
		ok(o.refused <= c[i].most * (double)o.sent, "%s, %ld documents: "
		    "%ld refusals of %ld requests, at most %.0f %%", ep, c[i].n,
		    o.refused, o.sent, 100 * c[i].most);
	}
}

/*
 * What an earlier night learned is a hint: against a portal whose limit
 * rose, the next night does not crawl; against one whose limit fell, it
 * does not stampede; against the same, it refuses less than afresh.
 */
static void
stale(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct lim l;
	struct out o, fresh;
	char err[256];
	double end;

	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 20, l.lat = 0.001;
	o = sim("rose", &l, &none, 300);
	end = T0 + o.makespan;
	pace_take_n(NULL, "rose", &none, end + 30, 1, &g, err, sizeof(err));
	ok(g.rate > 0, "a pace used 30 s ago still holds (rate %.1f)", g.rate);
	t_start = end + 3600;
	memset(&l, 0, sizeof(l));
	l.kind = UNLIMITED, l.lat = 0.002;
	o = sim("rose", &l, &none, 3000);
	report("a night later, unlimited", &o, 3000 * 0.002 / J);
	ok(!o.paced && o.maxin == J && o.makespan <= 2 * 3000 * 0.002 / J,
	    "a night at 20/s, then unlimited: not held to 20/s (%.2f s, "
	    "most in flight %ld)", o.makespan, o.maxin);

	t_start = T0;
	o = sim("fell", &l, &none, 3000);
	t_start = T0 + 3600;
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 20, l.lat = 0.001;
	o = sim("fell", &l, &none, 300);
	report("a night later, 20/s", &o, 299 / 20.0);
	ok(o.refused <= 0.05 * o.sent, "an unlimited night, then 20/s: %ld "
	    "refusals of %ld requests, at most 5 %%", o.refused, o.sent);

	t_start = T0;
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 20, l.lat = 0.001;
	fresh = sim("same", &l, &none, 300);
	t_start = T0 + 3600;
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 20, l.lat = 0.001;
	o = sim("same", &l, &none, 300);
	report("a night later, 20/s again", &o, 299 / 20.0);
	ok(o.refused < fresh.refused && o.makespan <= 1.2 * 299 / 20.0,
	    "20/s two nights running: %ld refusals the second (%ld the first), "
	    "%.2f s", o.refused, fresh.refused, o.makespan);

	t_start = T0 + 7200;
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 5, l.lat = 0.001;
	fresh = sim("fresh5", &l, &none, 100);
	report("fresh 5/s", &fresh, 99 / 5.0);
	memset(&l, 0, sizeof(l));
	l.kind = GCRA, l.rate = 5, l.lat = 0.001;
	o = sim("same", &l, &none, 100);
	report("a night later, 5/s", &o, 99 / 5.0);
	/* No stampede; the makespan is #18's mid-run drop, not met yet. */
	ok(o.refused <= 0.1 * o.sent, "20/s, then 5/s: %ld refusals of %ld "
	    "requests, at most 10 %%", o.refused, o.sent);
	t_start = T0;
}

/* Pace ep in dir at t, as a run against a limit would: paced, not fast. */
static void
learn(const char *ep, double t)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	int i;

	memset(&e, 0, sizeof(e));
	e.seq = -1;
	e.retry_after = -1;
	for (i = 0; i < 8; i++) {
		pace_take_n(dir, ep, &none, t, 1, &g, err, sizeof(err));
		e.ev = i < 7 ? PACE_OK : PACE_SLOW;
		e.sent_at = t;
		e.now = t + 0.01;
		e.inflight = 1;
		pace_feedback_n(dir, ep, &none, &e, 1, NULL, err, sizeof(err));
		t += 0.1;
	}
}

/* The pace a take of ep at t is granted; 0: not paced. */
static double
rate_at(const char *ep, double t)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	char err[256];

	memset(&g, 0, sizeof(g));
	if (pace_take_n(dir, ep, &none, t, 1, &g, err, sizeof(err)) == -1)
		ok(0, "take: %s", err);
	return g.rate;
}

/* Write the state of ep in dir as text. */
static void
put_state(const char *ep, const char *text)
{
	char *path = xasprintf("%s/state/rate/%s.json", dir, ep);
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
	free(path);
}

/*
 * A pace another process left a moment ago is a hint when that process
 * has ended (the run before, at once), a fact while it still runs (one of
 * the pipelines sharing the state); on another host, while it was heard
 * from within a minute.
 */
/*
 * A process that learns ep's pace at T0 (and, when leave, strikes itself
 * from the users of its paces), then runs on until *end is closed: its
 * pid, once it has done so.
 */
static pid_t
holder(const char *ep, int leave, int *end)
{
	int go[2], hold[2];
	char c, err[256];
	pid_t pid;

	if (pipe(go) == -1 || pipe(hold) == -1)
		ok(0, "pipe");
	if ((pid = fork()) == 0) {
		close(go[0]);
		close(hold[1]);
		learn(ep, T0);
		if (leave)
			pace_leave(dir, err, sizeof(err));
		(void)!write(go[1], "x", 1);
		(void)!read(hold[0], &c, 1);
		_exit(0);
	}
	close(go[1]);
	close(hold[0]);
	(void)!read(go[0], &c, 1);
	close(go[0]);
	*end = hold[1];
	return pid;
}

static void
inherited(void)
{
	json_t *d;
	pid_t pid;
	char *path, *text, err[256];
	int end;
	double r;
	int i;

	if ((pid = fork()) == 0) {
		learn("ended", T0);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	r = rate_at("ended", T0 + 1);
	ok(r == 0, "a pace left by a run "
	    "that ended a second ago starts afresh (rate %.1f)", r);
	pid = holder("shared", 0, &end);
	r = rate_at("shared", T0 + 1);
	ok(r > 0, "a pace shared with a "
	    "process still running holds (rate %.1f)", r);
	close(end);
	waitpid(pid, NULL, 0);
	r = rate_at("shared", T0 + 2);
	ok(r > 0, "... and once joined, holds "
	    "after it ends (rate %.1f)", r);

	/* One still running that said it is done: as if it had ended. */
	pid = holder("left", 1, &end);
	r = rate_at("left", T0 + 1);
	ok(r == 0, "a pace its process left, still running, starts afresh "
	    "(rate %.1f)", r);
	close(end);
	waitpid(pid, NULL, 0);

	text = xasprintf("{\"paced\": 1, \"rate\": 10, \"seen\": %.3f, "
	    "\"users\": {\"1@elsewhere.invalid\": %.3f}}\n", T0 + 1,
	    T0 + 1);
	put_state("far", text);
	free(text);
	r = rate_at("far", T0 + 2);
	ok(r > 0, "a pace another host used a "
	    "second ago holds (rate %.1f)", r);
	text = xasprintf("{\"paced\": 1, \"rate\": 10, \"seen\": %.3f, "
	    "\"users\": {\"1@elsewhere.invalid\": %.3f}}\n", T0 + 1,
	    T0 - 100);
	put_state("far-gone", text);
	free(text);
	r = rate_at("far-gone", T0 + 2);
	ok(r == 0, "one another host last "
	    "used over a minute ago starts afresh (rate %.1f)", r);

	/* However many have come and gone, a bounded list. */
	d = json_pack("{s:i,s:i,s:f,s:o}", "paced", 1, "rate", 10, "seen",
	    T0 + 1, "users", json_object());
	for (i = 1; i <= 100; i++) {
		text = xasprintf("%d@elsewhere.invalid", i);
		json_object_set_new(json_object_get(d, "users"), text,
		    json_real(T0 + 1));
		free(text);
	}
	text = json_dumps(d, 0);
	json_decref(d);
	put_state("many", text);
	free(text);
	rate_at("many", T0 + 2);
	path = xasprintf("%s/state/rate/many.json", dir);
	d = NULL;
	files_read(path, &d, err, sizeof(err));
	ok(d != NULL && json_object_size(json_object_get(d, "users")) <= 64,
	    "a state names at most 64 users (%zu)", d == NULL ? 0 :
	    json_object_size(json_object_get(d, "users")));
	json_decref(d);
	rate_at("many", T0 + 100);
	d = NULL;
	files_read(path, &d, err, sizeof(err));
	ok(d != NULL && json_object_size(json_object_get(d, "users")) == 1,
	    "... and forgets those not heard from for a minute (%zu left)",
	    d == NULL ? 0 : json_object_size(json_object_get(d, "users")));
	json_decref(d);
	free(path);
}

/* A Retry-After past quota_after holds the endpoint; a shorter one doesn't. */
static void
quota(void)
{
	struct pace_cfg c = { 0, 0, 3600, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];

	memset(&e, 0, sizeof(e));
	e.ev = PACE_SLOW;
	e.sent_at = T0;
	e.now = T0 + 0.01;
	e.seq = -1;
	e.retry_after = 3600;
	pace_feedback_n(dir, "q", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "q", &c, T0 + 1, 5, &g, err, sizeof(err));
	ok(g.quota_until == 0, "a Retry-After of exactly quota_after is no "
	    "quota");
	e.retry_after = 86400;
	pace_feedback_n(dir, "q", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "q", &c, T0 + 2, 5, &g, err, sizeof(err));
	ok(g.granted == 0 && fabs(g.quota_until - (T0 + 0.01 + 86400)) <
	    1e-3, "a Retry-After of a day holds the endpoint until then");
	pace_take_n(dir, "q", &c, T0 + 86401, 1, &g, err, sizeof(err));
	ok(g.granted == 1 && g.quota_until == 0, "... and no longer");
}

/*
 * One send to ep at t, granted and answered ok_lat later if ev is a
 * success, 1 ms later if a refusal (busy or not), with inflight in
 * flight at its send: the window after it.
 */
static long
send_one(const char *ep, double t, enum pace_event ev, long inflight,
    int busy, double ok_lat)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];

	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	pace_take_n(NULL, ep, &none, t, 1, &g, err, sizeof(err));
	e.ev = ev;
	e.busy = busy;
	e.seq = g.seq;
	e.inflight = inflight;
	e.sent_at = t;
	e.now = t + (ev == PACE_OK ? ok_lat : 0.001);
	pace_feedback_n(NULL, ep, &none, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, ep, &none, t, 0, &g, err, sizeof(err));
	return g.window;
}

/*
 * A window opening fast meets a cap: the successes heard by the first
 * refusal were sent an answer's time ago, with 17 in flight at most; the
 * refusals come at 27.  The window is cut to 25, not to 17.
 */
static void
cap_fast(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	char err[256];
	int i;

	for (i = 1; i <= 40; i++)
		send_one("capfast", T0 + i * 0.01, PACE_OK, i < 17 ? i : 17, 0,
		    0.25);
	for (i = 0; i < 2; i++)
		send_one("capfast", T0 + 0.7, PACE_SLOW, 27, 1, 0);
	pace_take_n(NULL, "capfast", &none, T0 + 0.8, 1, &g, err, sizeof(err));
	ok(g.window == 25, "a cap met while the window opened fast: window "
	    "%ld, two under the refused count, not the 17 successes had",
	    g.window);
}

/*
 * A cap met with a 429 while the window opened is a guess: a strict rate
 * answering slowly, refused as the window opened, has more in flight at
 * each refusal than the successes had.  Cut the first time, to 4, the
 * window is held for a window's successes (4 at the least) before it
 * probes again, by 1/window a success sent with it full: 4.92 after
 * seven, 5.13 after eight.  Cut again, it is a cap, held for 64; and so
 * is one a 503 cut the first time (busy: a cap's answer).
 */
static void
cap_guess_one(int busy)
{
	double t = T0;
	long w[2], win = 0, at = 0;
	int i, round;
	const char *ep = busy ? "capguess503" : "capguess";

	for (i = 1; i <= 40; i++, t += 0.01)
		win = send_one(ep, t, PACE_OK, i < 4 ? i : 4, 0, 0.005);
	for (round = 0; round < 2; round++) {
		/*
		 * Refused at one over the window (the first refusal of all
		 * starts the pace).
		 */
		for (i = round; i < 2; i++, t += 0.01) {
			at = round ? win + 1 : 5;
			win = send_one(ep, t, PACE_SLOW, at, busy, 0);
		}
		if (round == 0)
			ok(win == 4, "a first cap, a %d at 5 in flight: "
			    "window %ld (4)", busy ? 503 : 429, win);
		/* Successes sent with the window full. */
		for (i = 1; i <= 8; i++, t += 0.5) {
			win = send_one(ep, t, PACE_OK, win, 0, 0.005);
			if (i >= 7)
				w[i - 7] = win;
		}
		if (round == 0 && !busy)
			ok(w[0] == 4 && w[1] == 5, "... 7 and 8 successes at "
			    "a full window later: window %ld, %ld (4, 5)",
			    w[0], w[1]);
		else if (round == 0)
			ok(w[0] == 4 && w[1] == 4, "... held 8 successes "
			    "later (%ld, %ld)", w[0], w[1]);
		else
			ok(w[0] == 4 && w[1] == 4, "a second cap, at %ld in "
			    "flight: window 4, held 8 successes later (%ld, "
			    "%ld)", at, w[0], w[1]);
	}
}

static void
cap_guess(void)
{
	cap_guess_one(0);
	cap_guess_one(1);
}

/*
 * The news tells the window it leaves: two slow successes sent with the
 * window full grow it from 2 to 4, and a caller held by its window (who
 * asks for no grant) learns that from the feedback itself.  With a rate
 * told, no window, as a grant says.
 */
static void
window_told(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_cfg told = { 20, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e[2];
	char err[256];
	long w = -1, wt = -1;
	int i;

	pace_take_n(NULL, "wtold", &none, T0, 2, &g, err, sizeof(err));
	memset(e, 0, sizeof(e));
	for (i = 0; i < 2; i++) {
		e[i].ev = PACE_OK;
		e[i].seq = g.seq + i;
		e[i].sent_at = T0;
		e[i].now = T0 + 0.25;
		e[i].inflight = i + 1;
		e[i].retry_after = -1;
	}
	pace_feedback_n(NULL, "wtold", &none, e, 2, &w, err, sizeof(err));
	pace_take_n(NULL, "wtold", &none, T0 + 0.25, 0, &g, err, sizeof(err));
	ok(g.window == 2 + 2 && w == g.window, "two slow successes at a full "
	    "window: told window %ld, granted %ld (4)", w, g.window);
	pace_feedback_n(NULL, "wtold-r", &told, e, 2, &wt, err, sizeof(err));
	ok(wt == 0, "a rate told: told window %ld (0: none)", wt);
}

/*
 * A pace still doubling from its start doubles no more once the caller's
 * work ends soon: one success with the end said keeps it, one without
 * doubles it.
 */
static void
ending_start(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	double r[2];
	int i;

	for (i = 0; i < 2; i++) {
		const char *ep = i ? "endst1" : "endst0";

		pace_take_n(NULL, ep, &none, T0, 1, &g, err, sizeof(err));
		memset(&e, 0, sizeof(e));
		e.ev = PACE_SLOW;
		e.sent_at = T0;
		e.now = T0 + 0.001;
		e.seq = g.seq;
		e.retry_after = -1;
		pace_feedback_n(NULL, ep, &none, &e, 1, NULL, err, sizeof(err));
		pace_take_n(NULL, ep, &none, T0 + 1, 1, &g, err, sizeof(err));
		e.ev = PACE_OK;
		e.sent_at = T0 + 1;
		e.now = T0 + 1.01;
		e.seq = g.seq;
		e.ending = i;
		pace_feedback_n(NULL, ep, &none, &e, 1, NULL, err, sizeof(err));
		pace_take_n(NULL, ep, &none, T0 + 2, 1, &g, err, sizeof(err));
		r[i] = g.rate;
	}
	ok(r[0] > 1.5 * r[1] && r[1] > 0, "a pace doubling from its start: "
	    "%.2f/s after a success, %.2f/s with the work's end said", r[0],
	    r[1]);
}

/* RateLimit: remaining counts down across sends; 0 holds until reset. */
static void
ratelimit(void)
{
	/*
	 * A told concurrency of 4096: the window starts there, so a take may
	 * grant 10 or 40.
	 */
	struct pace_cfg c = { 0, 0, 0, T0 + 100, 4096, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	long n;
	int i;

	pace_take_n(dir, "rl", &c, T0, 1, &g, err, sizeof(err));
	memset(&e, 0, sizeof(e));
	e.ev = PACE_OK;
	e.sent_at = T0;
	e.now = T0 + 0.01;
	e.seq = g.seq;
	e.retry_after = -1;
	e.rl_seen = 1;
	e.rl.limit = 30;
	e.rl.remaining = 3;
	e.rl.reset_s = 2;
	e.rl.window_s = 2;
	pace_feedback_n(dir, "rl", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "rl", &c, T0 + 0.02, 10, &g, err, sizeof(err));
	ok(g.granted == 3 && fabs(g.wait - 1.99) < 1e-6, "remaining 3: three "
	    "sends, then a wait for the reset (granted %ld, wait %.3f)",
	    g.granted, g.wait);
	pace_take_n(dir, "rl", &c, T0 + 2.02, 40, &g, err, sizeof(err));
	ok(g.granted == 30, "after the reset, the limit's 30 in the policy's "
	    "window (granted %ld)", g.granted);
	e.seq = g.seq + 29;
	e.now = T0 + 2.1;
	e.rl.remaining = 0;
	e.rl.reset_s = 200;
	pace_feedback_n(dir, "rl", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "rl", &c, T0 + 2.2, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && g.quota_until > T0 + 100, "nothing left until "
	    "past the deadline: a quota");
	/*
	 * With a window, no more is granted than it lets fly: a grant not
	 * used is still counted against what a RateLimit header says is left.
	 */
	c.conc = 0;
	pace_take_n(dir, "rl-win", &c, T0, 32, &g, err, sizeof(err));
	ok(g.window == 2 && g.granted == 2, "the first ask of 32 is granted "
	    "the window's 2 (granted %ld, window %ld)", g.granted, g.window);
	/*
	 * Answers come at once: 30 have been granted, two at a time, when
	 * the first one's "remaining 99" is heard.  All 29 after it count
	 * against it, not only a window's 2 (a fixed window of 100 drew 16
	 * refusals more at each turn).
	 */
	for (i = 0; i < 14; i++)
		pace_take_n(dir, "rl-win", &c, T0, 2, &g, err, sizeof(err));
	e.seq = 0;
	e.now = T0 + 0.01;
	e.rl.limit = 100;
	e.rl.remaining = 99;
	e.rl.reset_s = 2;
	e.rl.window_s = 2;
	pace_feedback_n(dir, "rl-win", &c, &e, 1, NULL, err, sizeof(err));
	for (n = 0, i = 0; i < 100; i++) {
		pace_take_n(dir, "rl-win", &c, T0 + 0.02, 2, &g, err,
		    sizeof(err));
		n += g.granted;
	}
	ok(n == 70, "remaining 99 heard after 29 more were granted: 70 more "
	    "(granted %ld)", n);

	/*
	 * Sends on several connections reach the portal out of the order
	 * they were granted in.  A window of 10 turns; 7 go (grants 0 to 6
	 * of it), the portal counting 2, 3 and 4 first; then 3 more, the
	 * portal counting the last before the other two.  Its "1 left" is
	 * not one to send: the two before it are yet to be counted (read as
	 * one, an 11th went, and was refused).
	 */
	{
		static const struct { long k, rem; } first[] = {
			{ 2, 7 }, { 4, 6 }, { 5, 4 }, { 6, 3 },
			{ 0, 9 }, { 1, 8 }, { 3, 5 } };
		long base;

		memset(&e, 0, sizeof(e));
		e.ev = PACE_OK;
		e.retry_after = -1;
		e.rl_seen = 1;
		e.rl.limit = 10;
		e.rl.window_s = -1;
		c.conc = 4096;
		pace_take_n(dir, "rl-ooo", &c, T0, 1, &g, err, sizeof(err));
		e.seq = g.seq;
		e.sent_at = T0;
		e.now = T0 + 0.01;
		e.rl.remaining = 0;
		e.rl.reset_s = 1;
		pace_feedback_n(dir, "rl-ooo", &c, &e, 1, NULL, err, sizeof(err));
		pace_take_n(dir, "rl-ooo", &c, T0 + 1.02, 7, &g, err,
		    sizeof(err));
		base = g.seq;
		ok(g.granted == 7, "the window turns: 7 of 10 (granted %ld)",
		    g.granted);
		e.rl.reset_s = 10;
		for (i = 0; i < 4; i++) {
			e.seq = base + first[i].k;
			e.now = T0 + 1.03;
			e.rl.remaining = first[i].rem;
			pace_feedback_n(dir, "rl-ooo", &c, &e, 1, NULL, err,
			    sizeof(err));
		}
		pace_take_n(dir, "rl-ooo", &c, T0 + 1.031, 3, &g, err,
		    sizeof(err));
		ok(g.granted == 0, "\"3 left\" with three sends before it "
		    "not yet answered: none yet (granted %ld)", g.granted);
		for (i = 4; i < 7; i++) {
			e.seq = base + first[i].k;
			e.rl.remaining = first[i].rem;
			pace_feedback_n(dir, "rl-ooo", &c, &e, 1, NULL, err,
			    sizeof(err));
		}
		pace_take_n(dir, "rl-ooo", &c, T0 + 1.032, 3, &g, err,
		    sizeof(err));
		ok(g.granted == 3, "all 7 answered: the 3 left (granted %ld)",
		    g.granted);
		e.seq = g.seq + 2;
		e.now = T0 + 1.04;
		e.rl.remaining = 1;
		pace_feedback_n(dir, "rl-ooo", &c, &e, 1, NULL, err, sizeof(err));
		pace_take_n(dir, "rl-ooo", &c, T0 + 1.041, 1, &g, err,
		    sizeof(err));
		ok(g.granted == 0 && g.wait > 0.9, "\"1 left\" from the last "
		    "of three, the two before it unanswered: none until the "
		    "turn (granted %ld, wait %.2f)", g.granted, g.wait);
	}
}

/*
 * rl_order's and rl_quota's answers, under c: a success or another
 * (PACE_INFO) saying rem left.
 */
static struct pace_ev rlo_e;
static const struct pace_cfg rlo_c = { 0, 0, 0, 0, 4096, 0, 0, 0 };

static void
rlo_ans(const struct pace_cfg *c, const char *ep, long seq, double now,
    long rem, double reset, long limit, enum pace_event ev)
{
	char err[256];

	memset(&rlo_e, 0, sizeof(rlo_e));
	rlo_e.ev = ev;
	rlo_e.retry_after = -1;
	rlo_e.rl_seen = 1;
	rlo_e.rl.limit = limit;
	rlo_e.rl.window_s = -1;
	rlo_e.seq = seq;
	rlo_e.sent_at = now - 0.02;
	rlo_e.now = now;
	rlo_e.rl.remaining = rem;
	rlo_e.rl.reset_s = reset;
	pace_feedback_n(NULL, ep, c, &rlo_e, 1, NULL, err, sizeof(err));
}

/* n grants from seq on dropped unsent, told under c at now. */
static void
rl_unused(const struct pace_cfg *c, const char *ep, long seq, long n,
    double now)
{
	struct pace_ev e;
	char err[256];

	memset(&e, 0, sizeof(e));
	e.ev = PACE_UNUSED;
	e.seq = seq;
	e.unused = n;
	e.now = now;
	e.retry_after = -1;
	pace_feedback_n(NULL, ep, c, &e, 1, NULL, err, sizeof(err));
}

static long
rlo_take(const char *ep, double t, long want, long *seq)
{
	struct pace_grant g;
	char err[256];

	pace_take_n(NULL, ep, &rlo_c, t, want, &g, err, sizeof(err));
	if (seq != NULL)
		*seq = g.seq;
	return g.granted;
}

/*
 * A window's count read from answers in any order: every answer counts
 * (not only successes and refusals), a turn is proved by a send granted
 * after the least was heard, and a portal that gives no limit is not
 * counted.
 */
static void
rl_order(void)
{
	double t;
	long s, sent, rem, n;
	int i;

	/* Every other answer a 404: still the portal's count, still news. */
	rlo_take("rlo-c", T0, 1, &s);
	rlo_ans(&rlo_c, "rlo-c", s, T0 + 0.01, 0, 1, 10, PACE_OK);
	for (i = 0, sent = 0, rem = 10, t = T0 + 1.02; i < 20; i++, t += 0.1) {
		if (rlo_take("rlo-c", t, 1, &s) != 1)
			break;
		sent++;
		rlo_ans(&rlo_c, "rlo-c", s, t + 0.05, --rem, 9, 10, i % 2 ?
		    PACE_INFO : PACE_OK);
	}
	ok(sent == 10, "a window of 10, every other answer neither success "
	    "nor refusal: %ld sent before the hold (7: those were never "
	    "counted as answered)", sent);

	/*
	 * Windows of a second: the portal turns at 2.0; a send granted
	 * after "0 left"... "2 left" was heard says 9: a turn, whatever its
	 * whole-second reset says.
	 */
	rlo_take("rlo-b", T0, 1, &s);
	rlo_ans(&rlo_c, "rlo-b", s, T0 + 0.01, 0, 1, 10, PACE_OK);
	rlo_take("rlo-b", T0 + 1.02, 8, &s);
	for (i = 0; i < 8; i++)
		rlo_ans(&rlo_c, "rlo-b", s + i, T0 + 1.05, 9 - i, 1, 10, PACE_OK);
	rlo_take("rlo-b", T0 + 1.97, 1, &s);
	rlo_ans(&rlo_c, "rlo-b", s, T0 + 2.03, 9, 1, 10, PACE_OK);
	n = rlo_take("rlo-b", T0 + 2.04, 20, NULL);
	ok(n == 9, "windows of 1 s: an answer sent after the least was heard, "
	    "saying more, is the portal's turn: 9 granted (%ld)", n);

	/* No Limit: the window is not counted, as before (no shared seq). */
	rlo_take("rlo-d", T0, 1, &s);
	rlo_ans(&rlo_c, "rlo-d", s, T0 + 0.01, 0, 1, -1, PACE_OK);
	rlo_take("rlo-d", T0 + 1.02, 3, &s);
	for (i = 0; i < 3; i++)
		rlo_ans(&rlo_c, "rlo-d", s + i, T0 + 1.05, 9 - i, 9, -1, PACE_OK);
	rlo_take("rlo-d", T0 + 9.99, 1, &s);
	for (i = 0; i < 6; i++)
		rlo_ans(&rlo_c, "rlo-d", s, T0 + 10.03 + i * 0.001, 9 - i, 10, -1,
		    PACE_OK);
	rlo_take("rlo-d", T0 + 10.05, 20, NULL);
	rlo_ans(&rlo_c, "rlo-d", s + 1, T0 + 10.08, 3, 10, -1, PACE_OK);
	n = rlo_take("rlo-d", T0 + 10.09, 20, NULL);
	ok(n == 0, "no limit given: the freshest answer's count, none left "
	    "with 3 on their way (granted %ld)", n);
}

/*
 * A quota of a day told by X-RateLimit headers, its count read out of the
 * portal's order: the answer read first says 4 left, with 9 granted after
 * it that the portal had counted before it.  No quota yet: the count
 * settles as they are answered, and the 4 are spent.  Sends never
 * answered hold it RL_SETTLE at most; grants dropped unsent are not spent.
 */
static void
rl_quota(void)
{
	static const struct pace_cfg c = { 0, 0, 3600, 0, 4096, 0, 0, 0 };
	struct pace_grant g;
	char err[256];
	long s, i, n;

	/* A day's quota of 30, X-RateLimit style, answered as a success. */
#define RQ_ANS(ep, sq, t, rem)	rlo_ans(&c, ep, sq, t, rem, 86400, 30, \
	PACE_OK)

	pace_take_n(NULL, "rq", &c, T0, 1, &g, err, sizeof(err));
	RQ_ANS("rq", g.seq, T0 + 0.01, 14);
	pace_take_n(NULL, "rq", &c, T0 + 0.02, 10, &g, err, sizeof(err));
	s = g.seq;
	ok(g.granted == 10, "14 left: 10 granted (%ld)", g.granted);
	RQ_ANS("rq", s, T0 + 0.05, 4);
	pace_take_n(NULL, "rq", &c, T0 + 0.06, 10, &g, err, sizeof(err));
	ok(g.granted == 0 && g.quota_until == 0 && g.wait > 0 &&
	    g.wait <= 10, "\"4 left\" read first, 9 granted after it "
	    "unanswered: held, no quota (granted %ld, quota %.0f, wait %.2f)",
	    g.granted, g.quota_until - T0, g.wait);
	for (i = 1; i < 10; i++)
		RQ_ANS("rq", s + i, T0 + 0.07, 14 - i);
	pace_take_n(NULL, "rq", &c, T0 + 0.08, 10, &g, err, sizeof(err));
	ok(g.granted == 4 && g.quota_until == 0, "... which the portal had "
	    "counted before it: once answered, its 4 are granted (%ld)",
	    g.granted);
	for (s = g.seq, i = 0; i < 4; i++)
		RQ_ANS("rq", s + i, T0 + 0.1, 3 - i);
	pace_take_n(NULL, "rq", &c, T0 + 0.11, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && g.quota_until > T0 + 86000, "\"0 left\": a "
	    "quota (%.0f)", g.quota_until - T0);

	pace_take_n(NULL, "rq-lost", &c, T0, 1, &g, err, sizeof(err));
	RQ_ANS("rq-lost", g.seq, T0 + 0.01, 5);
	pace_take_n(NULL, "rq-lost", &c, T0 + 0.02, 10, &g, err, sizeof(err));
	pace_take_n(NULL, "rq-lost", &c, T0 + 5, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && g.quota_until == 0, "5 granted, unanswered for "
	    "5 s: held (quota %.0f)", g.quota_until - T0);
	pace_take_n(NULL, "rq-lost", &c, T0 + 10.02, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && g.quota_until > T0 + 86000, "... for 10 s: "
	    "answers lost, a quota (%.0f)", g.quota_until - T0);

	pace_take_n(NULL, "rq-void", &c, T0, 1, &g, err, sizeof(err));
	RQ_ANS("rq-void", g.seq, T0 + 0.01, 5);
	pace_take_n(NULL, "rq-void", &c, T0 + 0.02, 5, &g, err, sizeof(err));
	rl_unused(&c, "rq-void", g.seq + 2, 3, T0 + 0.03);
	pace_take_n(NULL, "rq-void", &c, T0 + 0.04, 10, &g, err, sizeof(err));
	ok(g.granted == 3, "5 left, 5 granted and 3 of them dropped unsent: "
	    "3 granted again (%ld)", g.granted);

	/*
	 * Told in the order they came: an answer that turns the window (a
	 * minute's 10), then 3 of the 5 granted before it dropped unsent.
	 * Told before it, the turn started the count again without them.
	 */
	pace_take_n(NULL, "rq-turn", &c, T0, 1, &g, err, sizeof(err));
	rlo_ans(&c, "rq-turn", g.seq, T0 + 0.01, 5, 60, 10, PACE_OK);
	pace_take_n(NULL, "rq-turn", &c, T0 + 0.02, 5, &g, err, sizeof(err));
	s = g.seq;
	rlo_ans(&c, "rq-turn", s, T0 + 0.03, 9, 60, 10, PACE_OK);
	rl_unused(&c, "rq-turn", s + 2, 3, T0 + 0.03);
	pace_take_n(NULL, "rq-turn", &c, T0 + 0.04, 20, &g, err, sizeof(err));
	ok(g.granted == 8, "a turn, 9 left, then 3 of the 4 after it dropped: "
	    "8 granted (%ld)", g.granted);

	/*
	 * A free pace's sends all carry the number of the grant before it:
	 * five answers to "one" send are one answered.
	 */
	pace_take_n(NULL, "rq-free", &c, T0, 1, &g, err, sizeof(err));
	for (s = g.seq, i = 0; i < 5; i++)
		rlo_ans(&c, "rq-free", s, T0 + 0.01, 9 - i, 86400, 10,
		    PACE_OK);
	pace_take_n(NULL, "rq-free", &c, T0 + 0.02, 20, &g, err, sizeof(err));
	n = g.granted;
	rlo_ans(&c, "rq-free", g.seq, T0 + 0.03, 4, 86400, 10, PACE_OK);
	pace_take_n(NULL, "rq-free", &c, T0 + 0.04, 20, &g, err, sizeof(err));
	n += g.granted;
	ok(n == 5, "five answers numbered alike, 5 left: 5 granted in all, "
	    "none with 4 on their way (%ld)", n);
#undef RQ_ANS

	/*
	 * A last count heard far ahead (a host whose clock runs ahead, a
	 * hand): 10 granted, 2 answered, the rest lost with a process, none
	 * left till a reset past the deadline.  A quota at once, as with no
	 * time at all (a state an older rfp-fetch wrote).
	 */
	for (i = 0; i < 3; i++) {
		static const char *at[] = { "", ", \"rl_at\": 1e300",
		    ", \"rl_at\": 1000000600" };
		char name[32], *text;

		snprintf(name, sizeof(name), "rq-ahead-%ld", i);
		text = xasprintf("{\"takes\": 10, \"rl_seq\": 1, "
		    "\"rl_left\": 0, \"rl_reset\": %.3f, \"rl_limit\": 30, "
		    "\"rl_rem\": 5, \"rl_tseq\": 0, \"rl_min\": 5, "
		    "\"rl_ans\": 2, \"rl_mtakes\": 10, \"seen\": %.3f%s}\n",
		    T0 + 86400, T0, at[i]);
		put_state(name, text);
		free(text);
		pace_take_n(dir, name, &c, T0 + 1, 1, &g, err, sizeof(err));
		ok(g.granted == 0 && g.quota_until > T0 + 86000, "%s: a quota "
		    "(%.0f)", i == 0 ? "no time of the last count" : i == 1 ?
		    "a last count at 1e300" : "a last count 10 min ahead",
		    g.quota_until - T0);
	}
}

/*
 * A whole-second Reset is an upper bound: within one window (Remaining
 * going down) the earliest answer's bound holds, and a window that turned
 * (Remaining up) has an end of its own.  t: when the ten sends of a window
 * of 10 start; the wait asked after the tenth's "remaining 0".
 */
static double
heard_window(const char *ep, double t)
{
	struct pace_cfg c = { 0, 0, 0, 0, 4096, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	int i;

	memset(&e, 0, sizeof(e));
	e.ev = PACE_OK;
	e.retry_after = -1;
	e.rl_seen = 1;
	e.rl.limit = 10;
	e.rl.reset_s = 1;
	e.rl.window_s = -1;
	for (i = 0; i < 10; i++) {
		pace_take_n(dir, ep, &c, t + i * 0.05, 1, &g, err,
		    sizeof(err));
		e.seq = g.seq;
		e.sent_at = t + i * 0.05;
		e.now = e.sent_at + 0.01;
		e.rl.remaining = 9 - i;
		pace_feedback_n(dir, ep, &c, &e, 1, NULL, err, sizeof(err));
	}
	pace_take_n(dir, ep, &c, e.now + 0.01, 1, &g, err, sizeof(err));
	return g.granted == 0 ? g.wait : -1;
}

static void
reset_heard(void)
{
	struct pace_cfg c = { 0, 0, 0, 0, 4096, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	double w;

	w = heard_window("heard", T0);
	ok(fabs(w - 0.54) < 1e-6, "remaining 0 heard 0.46 s into a window whose "
	    "first answer said reset 1: a wait to then (0.54 s), not a "
	    "second (%.3f)", w);
	/*
	 * The portal's window turned before that bound (a clock-aligned one,
	 * its first answer 0.01 s into it): the answer with Remaining back up
	 * is a window of its own, its end a second on, and its 9 left are all
	 * that is granted.  Held to the old bound, the count started afresh
	 * at it, and 10 were granted.
	 */
	memset(&e, 0, sizeof(e));
	e.ev = PACE_OK;
	e.retry_after = -1;
	e.rl_seen = 1;
	e.seq = -1;
	e.sent_at = T0 + 0.50;
	e.now = T0 + 0.53;
	e.rl.limit = 10;
	e.rl.remaining = 9;
	e.rl.reset_s = 1;
	e.rl.window_s = -1;
	pace_feedback_n(dir, "heard", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "heard", &c, T0 + 1.02, 20, &g, err, sizeof(err));
	ok(g.granted == 9, "a window turned before the last one's bound: its "
	    "own remaining 9 granted, no more (granted %ld)", g.granted);

	/*
	 * A Remaining that went down across a turn: others sharing the
	 * quota took the new window (20 in 10 s) at its start.  Its own
	 * Reset, 10, says it is no window that the bound heard at 9.3 s
	 * (10.3) can end.
	 */
	memset(&e, 0, sizeof(e));
	e.ev = PACE_OK;
	e.retry_after = -1;
	e.rl_seen = 1;
	e.rl.limit = 20;
	e.rl.window_s = -1;
	pace_take_n(dir, "shared", &c, T0 + 9, 1, &g, err, sizeof(err));
	e.seq = g.seq;
	e.sent_at = T0 + 9;
	e.now = T0 + 9.3;
	e.rl.remaining = 10;
	e.rl.reset_s = 1;
	pace_feedback_n(dir, "shared", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "shared", &c, T0 + 10, 1, &g, err, sizeof(err));
	e.seq = g.seq;
	e.sent_at = T0 + 10;
	e.now = T0 + 10.1;
	e.rl.remaining = 0;
	e.rl.reset_s = 10;
	pace_feedback_n(dir, "shared", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "shared", &c, T0 + 10.31, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && g.wait > 9.7, "remaining down across a turn, its "
	    "reset 10 s off: held to it, not to the last window's bound "
	    "(granted %ld, wait %.2f)", g.granted, g.wait);
}

/*
 * Five minutes unpaced at a request every 2 s, then a fixed window of 20
 * in 10 s that the first sends fill: no first burst, and the run's
 * average (0.5/s) is no window's rate.  Taken for one, it was the pace,
 * and 100 documents took 200 s, not 50.
 */
static void
quiet_then_window(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	double t = T0, t1, ws, w0 = -1;
	long n = 0, in_win = 0;
	char err[256];
	int okay;

	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	e.inflight = 1;
	while (t < T0 + 300) {
		pace_take_n(NULL, "quiet", &none, t, 1, &g, err, sizeof(err));
		e.ev = PACE_OK;
		e.seq = g.seq;
		e.sent_at = t;
		e.now = t + 0.05;
		pace_feedback_n(NULL, "quiet", &none, &e, 1, NULL, err, sizeof(err));
		t += 2;
	}
	for (t1 = t; n < 100 && t < t1 + 3600; ) {
		pace_take_n(NULL, "quiet", &none, t, 1, &g, err, sizeof(err));
		if (g.granted == 0) {
			t += g.wait > 0 ? g.wait : 0.001;
			continue;
		}
		ws = floor((t - t1) / 10);
		if (ws != w0) {
			w0 = ws;
			in_win = 0;
		}
		okay = in_win++ < 20;
		n += okay;
		e.ev = okay ? PACE_OK : PACE_SLOW;
		e.seq = g.seq;
		e.sent_at = t;
		e.now = t + 0.01;
		pace_feedback_n(NULL, "quiet", &none, &e, 1, NULL, err, sizeof(err));
		t += 0.0101;
	}
	ok(t - t1 <= 1.5 * 50, "five minutes at 0.5/s, then 20 in 10 s: 100 "
	    "documents in %.1f s, at most 1.5 x the ideal 50 s", t - t1);
}

/* Issue #24: a reset past quota_after is a quota, not a hold for ever. */
static void
reset_bound(void)
{
	struct pace_cfg c = { 0, 0, 3600, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256] = "", *path;
	FILE *f;

	pace_take_n(dir, "far", &c, T0, 1, &g, err, sizeof(err));
	memset(&e, 0, sizeof(e));
	e.ev = PACE_OK;
	e.sent_at = T0;
	e.now = T0 + 0.01;
	e.seq = g.seq;
	e.retry_after = -1;
	e.rl_seen = 1;
	e.rl.limit = 10;
	e.rl.remaining = 0;
	e.rl.reset_s = 3600;
	e.rl.window_s = -1;
	pace_feedback_n(dir, "far", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "far", &c, T0 + 0.02, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && g.quota_until == 0 && g.wait > 3599,
	    "a reset an hour off, quota_after 3600: waited (wait %.0f)",
	    g.wait);
	e.rl.reset_s = 1e9;
	pace_feedback_n(dir, "far", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(dir, "far", &c, T0 + 0.03, 1, &g, err, sizeof(err));
	ok(g.granted == 0 && fabs(g.quota_until - (T0 + 0.01 + 1e9)) < 1,
	    "a reset past quota_after is a quota until it (%.0f)",
	    g.quota_until - T0);
	/* A policy's window of 1e12 s is none, not a state refused after. */
	e.rl.window_s = 1e12;
	e.rl.reset_s = 1;
	e.rl.remaining = 5;
	pace_feedback_n(dir, "far", &c, &e, 1, NULL, err, sizeof(err));
	*err = '\0';
	ok(pace_take_n(dir, "far", &c, T0 + 0.04, 1, &g, err, sizeof(err)) ==
	    0, "a RateLimit-Policy window of 1e12 s leaves a state that reads "
	    "back %s", err);
	/* As an earlier run saved it: a reset held, no quota. */
	path = xasprintf("%s/state/rate/saved.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"rl_left\": 0, \"rl_reset\": %.3f, \"rl_limit\": -1, "
	    "\"win\": 2}\n", T0 + 1e9);
	fclose(f);
	free(path);
	ok(pace_take_n(dir, "saved", &c, T0, 1, &g, err, sizeof(err)) == 0 &&
	    g.granted == 0 && g.quota_until > T0 + 1e8,
	    "a saved reset past quota_after is a quota too (%s)", err);
}

/*
 * 1 when the state text is refused as a corrupt state file, saying so
 * and naming the file and field, before the run (control_valid) and in
 * it (pace_take_n).
 */
static int
refused(const char *text, const char *field, char *err, size_t errlen)
{
	struct pace_cfg c = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	json_t *d;
	char *want, *named, why[128];
	int rc;

	put_state("bad", text);
	d = json_loads(text, 0, NULL);
	named = xasprintf("field \"%s\"", field);
	want = xasprintf("%s/state/rate/bad.json: corrupt state file (%s)",
	    dir, named);
	*why = '\0';
	rc = control_valid("rate", d, why, sizeof(why)) == -1 &&
	    strcmp(why, named) == 0;
	json_decref(d);
	free(named);
	*err = '\0';
	rc = rc && pace_take_n(dir, "bad", &c, T0, 1, &g, err, errlen) == -1 &&
	    strncmp(err, want, strlen(want)) == 0;
	free(want);
	return rc;
}

static void
corrupt(void)
{
	char err[256];

	ok(refused("{\"rate\": \"fast\", \"tat\": 0}\n", "rate", err,
	    sizeof(err)),
	    "a corrupt state file is an error that says so: %s", err);
	/* The last answers' refusals, a 32-bit set: more is no count. */
	ok(refused("{\"r_bits\": 1e300, \"r_n\": 32}\n", "r_bits", err,
	    sizeof(err)),
	    "a refusal set out of range is corrupt: %s", err);
	/* A noise share past what the rule can learn, a negative rate. */
	ok(refused("{\"p_held\": 3}\n", "p_held", err, sizeof(err)),
	    "a held flag of 3 is corrupt: %s", err);
	ok(refused("{\"r_low\": 0.5}\n", "r_low", err, sizeof(err)),
	    "a flag of a refusal under the successes' count of 0.5 is "
	    "corrupt: %s", err);
	ok(refused("{\"nz\": 0.99}\n", "nz", err, sizeof(err)),
	    "a noise share of 0.99 is corrupt: %s", err);
	ok(refused("{\"e_ref\": -2}\n", "e_ref", err, sizeof(err)),
	    "a negative count of a fall's refusals is corrupt: %s", err);
	/* A run of slow answers in part, or past Q_RUN; a negative time. */
	ok(refused("{\"l_up\": 1.5}\n", "l_up", err, sizeof(err)),
	    "a run of 1.5 slow answers is corrupt: %s", err);
	ok(refused("{\"l_up\": 4}\n", "l_up", err, sizeof(err)),
	    "a run of slow answers past Q_RUN is corrupt: %s", err);
	ok(refused("{\"l_min\": -1}\n", "l_min", err, sizeof(err)),
	    "a negative fastest answer is corrupt: %s", err);
	ok(refused("{\"l_first\": -0.5}\n", "l_first", err, sizeof(err)),
	    "a negative first slow answer is corrupt: %s", err);
	ok(refused("{\"e_ok\": 5, \"n_ok\": 3}\n", "e_ok", err,
	    sizeof(err)), "a fall begun at more successes than the run has "
	    "had is corrupt: %s", err);
	ok(refused("{\"r_noise\": -1}\n", "r_noise", err, sizeof(err)),
	    "a negative pace to start again at is corrupt: %s", err);
	/* A run's counts: a negative one could pass the noise test. */
	ok(refused("{\"k_ref\": -3}\n", "k_ref", err, sizeof(err)),
	    "a negative count of refusals in a run of cuts is corrupt: %s",
	    err);
	ok(refused("{\"k_cuts\": 1e300}\n", "k_cuts", err, sizeof(err)),
	    "1e300 cuts in a run is corrupt: %s", err);
	ok(refused("{\"c_ok\": -1}\n", "c_ok", err, sizeof(err)),
	    "a negative count of successes since a cut is corrupt: %s", err);
	/* Measured intervals: a negative count made the measure infinite. */
	ok(refused("{\"iv_s\": [-1, 9, 9, 9, 9, 9, 9, 9]}\n", "iv_s", err,
	    sizeof(err)),
	    "a negative count of successes in an interval is corrupt: %s", err);
	/* A success count that placed the next success time before ok_t. */
	ok(refused("{\"paced\": 1, \"rate\": 5, \"p_ok\": -1}\n", "p_ok", err,
	    sizeof(err)), "a negative count of successes since the pace "
	    "started is corrupt: %s", err);
	ok(refused("{\"win\": 1e300}\n", "win", err, sizeof(err)),
	    "a window past the largest is corrupt: %s", err);
	ok(refused("{\"iv_s\": [1e300, 9, 9, 9, 9, 9, 9, 9]}\n", "iv_s", err,
	    sizeof(err)), "an interval of 1e300 successes is corrupt: %s", err);
	/*
	 * A rate of 1e308 went to inf at the first success, and the state
	 * then saved was refused by the next stage to read it; a window of
	 * 1e300 s with nothing left in it held every send that long.
	 */
	ok(refused("{\"paced\": 1, \"rate\": 1e308}\n", "rate", err,
	    sizeof(err)),
	    "a rate of 1e308 a second is corrupt: %s", err);
	ok(refused("{\"paced\": 1, \"rate\": 5, \"hint\": 1e300}\n", "hint", err,
	    sizeof(err)), "a hint of 1e300 a second is corrupt: %s", err);
	ok(refused("{\"n_cut\": 1e200}\n", "n_cut", err, sizeof(err)),
	    "1e200 successes since a cut is corrupt: %s", err);
	ok(refused("{\"cut_seq\": 1e300}\n", "cut_seq", err, sizeof(err)),
	    "a cut at grant 1e300 is corrupt: %s", err);
	ok(refused("{\"n_ok\": 1e300}\n", "n_ok", err, sizeof(err)),
	    "1e300 successes is corrupt: %s", err);
	/* A window's count from a grant no run makes, or a negative one. */
	ok(refused("{\"rl_tseq\": 1e300}\n", "rl_tseq", err, sizeof(err)),
	    "a window counted from grant 1e300 is corrupt: %s", err);
	ok(refused("{\"rl_ans\": -3}\n", "rl_ans", err, sizeof(err)),
	    "-3 answers in a window is corrupt: %s", err);
	ok(refused("{\"quota_until\": 1e308}\n", "quota_until", err,
	    sizeof(err)), "a quota that ends past the year 9999 is corrupt: %s",
	    err);
	ok(refused("{\"paced\": 2, \"rate\": 5}\n", "paced", err,
	    sizeof(err)), "a paced flag of 2 is corrupt: %s", err);
	ok(refused("{\"seen\": -1}\n", "seen", err, sizeof(err)),
	    "a last use before 1970 is corrupt: %s", err);
	ok(refused("{\"rl_min\": 2.5}\n", "rl_min", err, sizeof(err)),
	    "2.5 left in a window is corrupt: %s", err);
}

/*
 * Write the state of ep as another host uses it now (so a fact, not a
 * hint): FIELDS, then its last use and that user at T0 + 1.
 */
static void
put_shared(const char *ep, const char *fields)
{
	char *text = xasprintf("{%s, \"seen\": %.3f, \"users\": "
	    "{\"1@elsewhere.invalid\": %.3f}}\n", fields, T0 + 1, T0 + 1);

	put_state(ep, text);
	free(text);
}

/*
 * n sends to ep from t, 0.2 s apart, each answered 10 ms after: a
 * success, or every other one refused (slow); the time after them.
 */
static double
answer_n(const char *ep, double t, int n, int slow)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	int i;

	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	for (i = 0; i < n; i++, t += 0.2) {
		pace_take_n(dir, ep, &none, t, 1, &g, err, sizeof(err));
		e.ev = slow && i % 2 ? PACE_SLOW : PACE_OK;
		e.sent_at = t, e.now = t + 0.01;
		e.seq = g.seq, e.inflight = 1;
		pace_feedback_n(dir, ep, &none, &e, 1, NULL, err, sizeof(err));
	}
	return t;
}

/*
 * What a state file may say and the pace would never have: a rate far
 * under its floor, intervals far past the longest it keeps.  A pace
 * another host shares (so a fact, not a hint) is read as written.
 */
static void
out_of_reach(void)
{
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	char *text, err[256];
	double r, t;
	int i, rc;

	/*
	 * A state with no last use, another host named its user: kept a
	 * fact for ever, whoever wrote it; now a hint, as a stale one is.
	 */
	text = xasprintf("{\"paced\": 1, \"rate\": 2, \"users\": "
	    "{\"1@elsewhere.invalid\": %.3f}}\n", T0 + 1);
	put_state("unseen", text);
	free(text);
	r = rate_at("unseen", T0 + 2);
	ok(r == 0, "a state with no last use is a hint: not paced at its "
	    "rate (%g)", r);
	/* ... and one last used, by its user too, in 1e300. */
	put_state("ahead", "{\"paced\": 1, \"rate\": 2, \"seen\": 1e300, "
	    "\"users\": {\"1@elsewhere.invalid\": 1e300}}\n");
	r = rate_at("ahead", T0 + 2);
	ok(r == 0, "a state last used in 1e300 is a hint: not paced at its "
	    "rate (%g)", r);
	put_state("uahead", "{\"paced\": 1, \"rate\": 2, \"seen\": "
	    "1000000001, \"users\": {\"1@elsewhere.invalid\": 1e300}}\n");
	r = rate_at("uahead", T0 + 2);
	ok(r == 0, "a state whose one user was last heard from in 1e300 is "
	    "a hint (%g)", r);

	put_shared("crawl", "\"paced\": 1, \"rate\": 1e-300");
	r = rate_at("crawl", T0 + 2);
	ok(r >= 0.05 - 1e-12, "a stored rate of 1e-300 is read as the floor, "
	    "one every 20 s (rate %g)", r);

	text = xasprintf("\"paced\": 1, \"rate\": 10, \"cuts\": 1, "
	    "\"iv_s\": [9, 0, 0, 0, 0, 0, 0, 0], "
	    "\"iv_t\": [1e308, 0, 0, 0, 0, 0, 0, 0], "
	    "\"iv_e\": [%.3f, 0, 0, 0, 0, 0, 0, 0]", T0 + 1);
	put_shared("vast", text);
	free(text);
	t = answer_n("vast", T0 + 2, 6, 1);
	r = rate_at("vast", t);
	ok(r > 1, "an interval of 1e308 s is no measure of 0/s: the "
	    "refusals cut the pace from 10/s to %g/s, not to the floor", r);

	/*
	 * A window of 1e300 s, or 1e-300 s, with nothing left in it (as a
	 * binary that did not bound them kept it): none, and the next send
	 * goes now, not in 1e300 s.
	 */
	for (i = 0; i < 2; i++) {
		text = xasprintf("\"rl_limit\": 0, \"rl_left\": 0, "
		    "\"rl_reset\": %.3f, \"rl_win\": %s", T0 + 1,
		    i ? "1e-300" : "1e300");
		put_shared("win", text);
		free(text);
		*err = '\0';
		rc = pace_take_n(dir, "win", &none, T0 + 2, 1, &g, err,
		    sizeof(err));
		ok(rc == 0 && g.granted == 1, "a stored window "
		    "of %s s is none: the send goes now (granted %ld) %s",
		    i ? "1e-300" : "1e300", g.granted, err);
	}

	/*
	 * A pace at the most a state holds, still finding the limit: it
	 * doubles no further, and what it saves reads back (a rate past
	 * the most is refused, and one grown to inf was saved without it).
	 */
	put_shared("probe", "\"paced\": 1, \"rate\": 1e12");
	t = answer_n("probe", T0 + 2, 3, 0);
	*err = '\0';
	rc = pace_take_n(dir, "probe", &none, t, 1, &g, err, sizeof(err));
	ok(rc == 0 && g.rate <= 1e12, "a pace of 1e12/s doubles no further, and its "
	    "state reads back (rate %g) %s", g.rate, err);
}

/*
 * Six rounds of 16 to ep, told a concurrency of 16: four served, twelve
 * refused at once, busy (503) or not (429); the window granted after.
 */
static long
cap_rounds(const char *ep, int busy)
{
	struct pace_cfg c = { 0, 0, 0, 0, 16, 0, 0, 0 };
	struct pace_grant g;
	struct pace_ev e;
	char err[256];
	double t = T0;
	int i, j;

	memset(&e, 0, sizeof(e));
	e.retry_after = -1;
	e.seq = -1;
	e.busy = busy;
	for (j = 0; j < 6; j++, t += 0.3) {
		for (i = 1; i <= 16; i++) {
			e.ev = i <= 4 ? PACE_OK : PACE_SLOW;
			e.sent_at = t;
			e.now = t + (i <= 4 ? 0.25 : 0.001);
			e.inflight = i;
			pace_feedback_n(NULL, ep, &c, &e, 1, NULL, err, sizeof(err));
		}
	}
	pace_take_n(NULL, ep, &c, t, 32, &g, err, sizeof(err));
	return g.window;
}

/*
 * A told concurrency is where the window starts, not a fact: a portal
 * capped under it refuses the rest, and the window goes to the cap.  (It
 * had no window at all: a told 40 against a cap of 10 drew 25 to 141
 * refusals of 300 documents, where 30 are the first round's.)
 */
static void
told_conc(void)
{
	struct pace_cfg c = { 0, 0, 0, 0, 16, 0, 0, 0 };
	struct pace_grant g;
	char err[256];
	long w;

	pace_take_n(NULL, "conc16", &c, T0, 32, &g, err, sizeof(err));
	ok(g.window == 16 && g.granted == 16, "a told concurrency of 16: the "
	    "window starts there (window %ld, granted %ld)", g.window,
	    g.granted);
	w = cap_rounds("conc16", 1);
	ok(w >= 3 && w <= 5, "refused with 503 past 4 in flight, served "
	    "under: the window goes to the cap (window %ld)", w);
	/* The same with 429: the rate's answer, the window left as told. */
	w = cap_rounds("conc16r", 0);
	ok(w >= 16, "refused with 429 past 4 in flight, told 16: the "
	    "window stays at 16 (window %ld)", w);
}

/* n outcomes in one call leave what n calls leave. */
static void
batch(void)
{
	struct pace_cfg c = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_ev ev[40];
	json_t *a, *b;
	char *pa, *pb, err[256];
	size_t i;

	memset(ev, 0, sizeof(ev));
	for (i = 0; i < 40; i++) {
		ev[i].ev = i % 9 == 8 ? PACE_SLOW : PACE_OK;
		ev[i].sent_at = T0 + 0.05 * (double)i;
		ev[i].now = ev[i].sent_at + 0.01;
		ev[i].inflight = 1 + (long)(i % 3);
		ev[i].seq = -1;
		ev[i].retry_after = -1;
		pace_feedback_n(dir, "one", &c, &ev[i], 1, NULL, err,
		    sizeof(err));
	}
	pace_feedback_n(dir, "all", &c, ev, 40, NULL, err, sizeof(err));
	pa = xasprintf("%s/state/rate/one.json", dir);
	pb = xasprintf("%s/state/rate/all.json", dir);
	a = b = NULL;
	files_read(pa, &a, err, sizeof(err));
	files_read(pb, &b, err, sizeof(err));
	json_object_del(a, "endpoint");
	json_object_del(b, "endpoint");
	ok(a != NULL && json_equal(a, b), "40 outcomes in one call leave the "
	    "state 40 calls leave");
	json_decref(a);
	json_decref(b);
	free(pa);
	free(pb);
}

/*
 * Three processes sharing a pace, each asking again as soon as its lease
 * is used up or its wait is over: a lease is never cut short to the one or
 * two sends that fit when it is asked for (each costs its lateness: ten
 * hosts at 400/s sent 314 a second, the pace 392), but one asking for
 * fewer than 8 gets them as soon as they fit.
 */
static void
lease_hosts(void)
{
	struct pace_cfg c = { 400, 0, 0, 0, 0, 0.025, 0, 0 };
	struct pace_grant g;
	double next[3] = { T0, T0 + 1e-4, T0 + 2e-4 }, t = T0;
	long sends = 0, least = PACE_LEASE_MAX, k, h;
	char err[256];

	while (sends < 2000) {
		for (h = 0, k = 0; h < 3; h++)
			if (next[h] < next[k])
				k = h;
		t = next[k];
		pace_take_n(NULL, "hosts", &c, t, 32, &g, err, sizeof(err));
		if (g.granted > 0) {
			sends += g.granted;
			if (g.granted < least)
				least = g.granted;
			next[k] = fmax(t + 1e-4, g.due[g.granted - 1]);
		} else
			next[k] = t + fmax(g.wait, 1e-4);
	}
	ok(least >= 8, "three processes asking as soon as they may: leases "
	    "of %ld sends at the least", least);
	pace_take_n(NULL, "hosts", &c, t, 2, &g, err, sizeof(err));
	if (g.granted == 0)
		pace_take_n(NULL, "hosts", &c, t + g.wait, 2, &g, err,
		    sizeof(err));
	ok(g.granted == 2, "asked for 2: granted as soon as 2 fit (%ld)",
	    g.granted);
}

/*
 * An ask told to wait, with nothing changed, writes nothing: the state file
 * stays the one written by the lease before it; a second later the use is
 * written again.
 */
static void
quiet_wait(void)
{
	struct pace_cfg c = { 400, 0, 0, 0, 0, 0.025, 0, 0 };
	struct pace_grant g, h;
	struct stat a, b, d;
	char err[256], *path = xasprintf("%s/state/rate/quiet.json", dir);

	pace_take_n(dir, "quiet", &c, T0, 32, &g, err, sizeof(err));
	stat(path, &a);
	pace_take_n(dir, "quiet", &c, T0 + 0.001, 32, &h, err, sizeof(err));
	stat(path, &b);
	ok(g.granted >= 8 && h.granted == 0 && a.st_ino == b.st_ino &&
	    a.st_mtim.tv_nsec == b.st_mtim.tv_nsec, "told to wait with "
	    "nothing changed: the state is not written again");
	/* Asked for nothing, 2 s on: the pace is the same, its use is not. */
	pace_take_n(dir, "quiet", &c, T0 + 2, 0, &h, err, sizeof(err));
	stat(path, &d);
	ok(h.granted == 0 && (d.st_ino != b.st_ino || d.st_mtim.tv_nsec !=
	    b.st_mtim.tv_nsec), "2 s later, the use is written");
	free(path);
}

/*
 * A lease: sends due within c.lease are granted with their times, spaced
 * by the pace, and each may go g.late after its time; a second process
 * asking at once gets none of them, and is told to wait until its own
 * lease could begin: one interval and that lateness after the last.  A
 * refusal meanwhile does not bring the next send before the lease's end.
 * A pace too slow for LEASE_MIN (8) sends a lease gets none.
 */
static void
lease(void)
{
	struct pace_cfg c = { 400, 0, 0, 0, 0, 0.025, 0, 0 };
	struct pace_grant g, h;
	struct pace_ev e;
	char err[256];
	double last, iv;
	long i;
	int spaced = 1;

	pace_take_n(NULL, "lease", &c, T0, 32, &g, err, sizeof(err));
	iv = 1 / g.rate;
	last = g.due[g.granted - 1];
	/* The first send of all is given FIRST_LATE more. */
	for (i = 2; i < g.granted; i++)
		spaced &= fabs(g.due[i] - g.due[i - 1] - iv) < 1e-6;
	ok(g.granted >= 8 && g.due[0] == T0 && g.due[1] - g.due[0] >= iv &&
	    spaced && last <= T0 + 0.025 && last + iv > T0 + 0.025 &&
	    fabs(g.late - iv / 4) < 1e-9, "a lease of 25 ms at %.1f/s: %ld "
	    "sends, the first now, then one an interval, the last %.4f s ahead,"
	    " each may go %.4f s late", g.rate, g.granted, last - T0, g.late);
	pace_take_n(NULL, "lease", &c, T0 + 0.001, 32, &h, err, sizeof(err));
	ok(h.granted == 0 && h.wait > 0 && fabs(T0 + 0.001 + h.wait + 0.025 -
	    (last + iv + g.late + 7 * iv)) < 1e-9, "asked again at once: "
	    "nothing, wait %.4f s, until a lease of 8 would fit, the first an "
	    "interval and the lateness after the last", h.wait);
	pace_take_n(NULL, "lease", &c, T0 + 0.025, 32, &h, err, sizeof(err));
	ok(h.granted > 0 && h.due[0] >= last + iv + g.late - 1e-9, "the next "
	    "lease's first send is %.4f s after the last one's time, at "
	    "least %.4f", h.due[0] - last, iv + g.late);
	/* Refused now: the pace is cut, but the lease out there stands. */
	last = h.due[h.granted - 1];
	memset(&e, 0, sizeof(e));
	e.ev = PACE_SLOW;
	e.sent_at = e.now = T0 + 0.026;
	e.seq = h.seq;
	e.retry_after = -1;
	pace_feedback_n(NULL, "lease", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "lease", &c, T0 + 0.05, 32, &g, err, sizeof(err));
	ok(g.granted == 0 || g.due[0] >= last + iv + h.late - 1e-9, "refused "
	    "while a lease is out: the next send %.4f s after its last, at "
	    "least %.4f", g.granted ? g.due[0] - last : -1, iv + h.late);
	/*
	 * A host whose clock runs 30 s ahead takes a lease; refused here, the
	 * pace is cut and the next send comes now, not after that lease's
	 * end 30 s off (it held every send back until then).
	 */
	pace_take_n(NULL, "skew", &c, T0 + 30, 32, &h, err, sizeof(err));
	memset(&e, 0, sizeof(e));
	e.ev = PACE_SLOW;
	e.sent_at = e.now = T0;
	e.seq = h.seq;
	e.retry_after = -1;
	pace_feedback_n(NULL, "skew", &c, &e, 1, NULL, err, sizeof(err));
	pace_take_n(NULL, "skew", &c, T0 + 0.1, 32, &g, err, sizeof(err));
	ok(h.granted > 0 && g.granted > 0 && g.due[0] < T0 + 1, "a lease "
	    "ending 30 s ahead (a clock ahead) does not hold the pace once cut:"
	    " next send %.3f s after now", g.granted ? g.due[0] - T0 - 0.1 :
	    -1);
	/*
	 * A next send written 10 minutes ahead (a clock ahead, a hand edit):
	 * no hold or burst puts one there, and the pace sends now.
	 */
	pace_take_n(NULL, "ahead", &c, T0, 1, &g, err, sizeof(err));
	pace_take_n(NULL, "ahead", &c, T0 + 600, 1, &g, err, sizeof(err));
	pace_take_n(NULL, "ahead", &c, T0 + 0.1, 1, &h, err, sizeof(err));
	ok(h.granted == 1 && h.due[0] == T0 + 0.1, "a next send 600 s ahead "
	    "(another clock) does not hold the pace: granted %ld, wait %.1f s",
	    h.granted, h.wait);
	lease_hosts();
	c.lease = 0;
	pace_take_n(NULL, "lease0", &c, T0, 32, &g, err, sizeof(err));
	ok(g.granted == 1 && g.due[0] == T0 && g.late == 0, "no lease: one "
	    "send, due now (%ld)", g.granted);
	c.rate = 100;
	c.lease = 0.025;
	pace_take_n(NULL, "lease100", &c, T0, 32, &g, err, sizeof(err));
	ok(g.granted == 1 && g.late == 0, "100/s, 25 ms: too slow for a lease "
	    "of 8, one send (%ld)", g.granted);
	c.rate = 1e5;
	c.lease = 10;
	pace_take_n(NULL, "lease10", &c, T0, 1000, &g, err, sizeof(err));
	ok(g.granted == PACE_LEASE_MAX, "a lease holds at most %d sends (%ld)",
	    PACE_LEASE_MAX, g.granted);
}

static void
explore(void)
{
	static const double rates[] = { 1, 3, 5, 7, 10, 20, 50, 100 };
	static const long bursts[] = { 0, 10, 60 };
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct lim l;
	struct out o;
	char ep[64];
	size_t i, j;
	long n;

	for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		for (j = 0; j < 3; j++) {
			memset(&l, 0, sizeof(l));
			l.kind = GCRA, l.rate = rates[i], l.burst = bursts[j];
			if (env_is("PACE_KIND", "delay"))
				l.kind = DELAY;
			l.lat = env_num("PACE_LAT", 0.02);
			l.lat_j = env_num("PACE_LATJ", 0);
			l.stall = env_num("PACE_STALL", 0);
			l.stall_p = env_num("PACE_STALLP", 0);
			if (getenv("PACE_SEED") != NULL)
				srand48(atol(getenv("PACE_SEED")));
			n = (long)fmax(60, 15 * rates[i] + (double)bursts[j]);
			if (getenv("PACE_N") != NULL)
				n = atol(getenv("PACE_N"));
			snprintf(ep, sizeof(ep), "%g/s b%ld", rates[i],
			    bursts[j]);
			if (getenv("PACE_CELL") != NULL &&
			    !env_is("PACE_CELL", ep))
				continue;
			snprintf(ep, sizeof(ep), "x%zu-%zu", i, j);
			o = sim(ep, &l, &none, n);
			snprintf(ep, sizeof(ep), "%g/s b%ld n%ld", rates[i],
			    bursts[j], n);
			report(ep, &o, (double)(n - (l.kind == DELAY ? 0 :
			    bursts[j]) - 1) / rates[i]);
		}
}

/* PACE_EXPLORE=noise: GCRA cells with refusals at random on top. */
static void
explore_noise(void)
{
	static const double rates[] = { 3, 20, 50 }, shares[] = { 0, 0.03, 0.1 };
	struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
	struct lim l;
	struct out o;
	char ep[64];
	size_t i, j;
	long n, s;

	for (i = 0; i < 3; i++)
		for (j = 0; j < 3; j++)
			for (s = 1; s <= 3; s++) {
				srand48(s);
				memset(&l, 0, sizeof(l));
				l.kind = GCRA, l.rate = rates[i], l.share = shares[j];
				l.lat = 0.1;
				n = (long)fmax(60, 15 * rates[i]);
				snprintf(ep, sizeof(ep), "n%zu-%zu-%ld", i, j, s);
				o = sim(ep, &l, &none, n);
				snprintf(ep, sizeof(ep), "%g/s %.0f%% seed %ld", rates[i],
				    100 * shares[j], s);
				report(ep, &o, (double)(n - 1) / rates[i]);
			}
	/* A limit that falls step by step: 50/s to 5/s over 30 s. */
	for (s = 1; s <= 3; s++) {
		srand48(s);
		memset(&l, 0, sizeof(l));
		l.kind = GCRA, l.rate = 50, l.drop_to = 5, l.drop_at = -30;
		l.lat = 0.02;
		snprintf(ep, sizeof(ep), "ramp-%ld", s);
		o = sim(ep, &l, &none, 1000);
		snprintf(ep, sizeof(ep), "50/s falling to 5/s over 30 s, seed %ld",
		    s);
		report(ep, &o, 0);
	}
}

/* PACE_EXPLORE=drop: GCRA limits that drop at 5 s, answers in 20 ms. */
static void
explore_drop(void)
{
	static const double from[] = { 40, 50, 20, 100, 30, 40 },
	    to[] = { 13.6, 10, 3, 20, 12, 30 };
	char ep[64];
	size_t i;

	for (i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
		snprintf(ep, sizeof(ep), "drop-%zu", i);
		if (getenv("PACE_CELL") != NULL &&
		    !env_is("PACE_CELL", ep))
			continue;
		(void)drop_sim(ep, from[i], to[i], (long)(5 * from[i] +
		    15 * to[i]), env_num("PACE_LAT", 0.02), 5 + 15);
	}
}

/*
 * A first send's hold read from the state holds no longer than it could
 * have been set for: one written further off (by hand, or by a host whose
 * clock runs ahead) is dropped.
 */
static void
hold_bound(void)
{
	static const struct {
		const char	*ep;
		double		 off;	/* the hold's end, this far off */
		long		 granted;
		const char	*what;
	} c[] = {
		{ "hold-near", 0.4, 0, "a first send's hold 0.4 s off, from "
		    "the state, holds" },
		{ "hold-far", 0.6, 1, "one 0.6 s off, more than it could have "
		    "been set for, is dropped" },
	};
	struct pace_cfg told = { 20, 0, 0, 0, 0, 0, 0, 0 };
	struct pace_grant g;
	char *text, err[256];
	double t = T0 + 2;
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		text = xasprintf("{\"paced\": 1, \"rate\": 19.6, \"tat\": "
		    "%.3f, \"takes\": 1, \"f_seq\": 0, \"f_until\": %.3f, "
		    "\"seen\": %.3f, \"users\": {\"1@elsewhere.invalid\": "
		    "%.3f}}\n", t, t + c[i].off, t, t);
		put_state(c[i].ep, text);
		free(text);
		pace_take_n(dir, c[i].ep, &told, t, 1, &g, err, sizeof(err));
		ok(g.granted == c[i].granted, "%s", c[i].what);
	}
}

int
main(void)
{
	char *sub, err[256];

	if (env_is("PACE_EXPLORE", "drop")) {
		explore_drop();
		return 0;
	}

	if (env_is("PACE_EXPLORE", "noise")) {
		explore_noise();
		return 0;
	}
	if (env_is("PACE_EXPLORE", "shapes")) {
		shapes();
		return 0;
	}
	if (env_is("PACE_EXPLORE", "free")) {
		struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
		struct lim l;
		struct out o;
		long n = (long)env_num("PACE_N", 300);

		memset(&l, 0, sizeof(l));
		l.kind = UNLIMITED;
		l.lat = env_num("PACE_LAT", 1);
		l.lat_j = env_num("PACE_LATJ", 0);
		srand48((long)env_num("PACE_SEED", 1));
		o = sim("free", &l, &none, n);
		report("no limit", &o, (double)n / J * l.lat);
		return 0;
	}
	if (env_is("PACE_EXPLORE", "conc")) {
		struct pace_cfg none = { 0, 0, 0, 0, 0, 0, 0, 0 };
		struct lim l;
		struct out o;
		memset(&l, 0, sizeof(l));
		l.kind = CONC, l.cap = 25, l.lat = 0.25;
		o = sim("c25", &l, &none, 1500);
		report("cap 25 0.25 s", &o, 15);

		memset(&l, 0, sizeof(l));
		l.kind = CONC, l.cap = 5, l.lat = 0.25;
		o = sim("c5", &l, &none, 300);
		report("cap 5 0.25 s", &o, 15);
		return 0;
	}
	if (getenv("PACE_EXPLORE") != NULL) {
		explore();
		return 0;
	}

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	sub = xasprintf("mkdir -p %s/state/rate", dir);
	if (system(sub) != 0)
		return 1;
	free(sub);
	srand48(1);
	limiters();
	shapes();
	noise();
	told_floor();
	floor_start();
	floor_many();
	shared_start();
	bursts();
	stale();
	hold_bound();
	inherited();
	quota();
	reset_bound();
	cap_fast();
	cap_guess();
	window_told();
	ending_start();
	ratelimit();
	rl_order();
	rl_quota();
	reset_heard();
	quiet_then_window();
	corrupt();
	out_of_reach();
	told_conc();
	batch();
	lease();
	quiet_wait();
	pace_leave(NULL, err, sizeof(err));
	sub = xasprintf("rm -rf %s", dir);
	if (system(sub) != 0)
		return 1;
	free(sub);
	printf("1..%d\n", tap_n);
	return tap_fail != 0;
}
