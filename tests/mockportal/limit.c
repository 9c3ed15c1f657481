/* limit: the limiter zoo, one set of rules for the portal and --ideal. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/x.h"
#include "limit.h"
#include "scen.h"
#include "tab.h"

#define EPS		1e-9		/* logical s */
#define QUOTA_DAY	86400		/* a quota's nominal window, headers */

const char *const lim_hdr_names[LHI_N] = {
	[LHI_LIMIT] = "X-RateLimit-Limit",
	[LHI_REMAINING] = "X-RateLimit-Remaining",
	[LHI_RESET] = "X-RateLimit-Reset",
	[LHI_RATELIMIT] = "RateLimit",
	[LHI_POLICY] = "RateLimit-Policy"
};

/* What a limiter tells in headers. */
struct lview {
	long		 q;		/* limit */
	long		 r;		/* remaining after this request */
	long		 t;		/* logical s until more is available */
	long		 w;		/* the window, logical s */
};

const char *
lim_kind_name(enum lim_kind k)
{
	static const char *names[] = {
		[LIM_GCRA] = "gcra", [LIM_FIXED] = "fixed_window",
		[LIM_SLIDING] = "sliding_window", [LIM_CONC] = "concurrency",
		[LIM_QUOTA] = "quota"
	};

	return names[k];
}

static int
active(const struct limiter *l, double t)
{
	return t >= l->from_s && t < l->until_s;
}

/* Logical s rounded up to whole seconds; 0 for none. */
static long
up(double s)
{
	return s > EPS ? (long)ceil(s - EPS) : 0;
}

static void
lstate_free(void *p)
{
	struct lstate *st = p;

	if (st != NULL)
		free(st->ring);
	free(st);
}

/* l's state for path (created on first use). */
static struct lstate *
state(struct limiter *l, const char *path)
{
	struct slot *s;

	if (l->per == PER_ENDPOINT) {
		if (l->st == NULL)
			l->st = xcalloc(1, sizeof(*l->st));
		return l->st;
	}
	if (l->paths == NULL)
		l->paths = xcalloc(1, sizeof(*l->paths));
	s = tab_get(l->paths, path, 1);
	if (s->data == NULL)
		s->data = xcalloc(1, sizeof(struct lstate));
	return s->data;
}

void
lim_free(struct limiter *l)
{
	lstate_free(l->st);
	l->st = NULL;
	if (l->paths != NULL)
		tab_free(l->paths, lstate_free);
	free(l->paths);
	l->paths = NULL;
}

static double
ring_at(const struct lstate *st, size_t i)
{
	return st->ring[(st->head + i) % st->cap];
}

/* Forget the accepts at or before t (out of the window). */
static void
ring_prune(struct lstate *st, double t)
{
	while (st->n > 0 && st->ring[st->head] <= t) {
		st->head = (st->head + 1) % st->cap;
		st->n--;
	}
}

static void
ring_push(struct lstate *st, double v)
{
	double *nr;
	size_t i, ncap;

	if (st->n == st->cap) {
		ncap = st->cap == 0 ? 16 : st->cap * 2;
		nr = xcalloc(ncap, sizeof(*nr));
		for (i = 0; i < st->n; i++)
			nr[i] = ring_at(st, i);
		free(st->ring);
		st->ring = nr;
		st->cap = ncap;
		st->head = 0;
	}
	/* In order: requests are judged as they arrived, decided as they may. */
	for (i = st->n; i > 0 && ring_at(st, i - 1) > v; i--)
		st->ring[(st->head + i) % st->cap] = ring_at(st, i - 1);
	st->ring[(st->head + i) % st->cap] = v;
	st->n++;
}

/* A fixed window's count is for the window of t. */
static void
fixed_roll(const struct limiter *l, struct lstate *st, double t)
{
	long w = (long)floor(t / l->window_s);

	if (w != st->win) {
		st->win = w;
		st->count = 0;
	}
}

/* Whether l lets a request through at t. */
static int
admits(const struct limiter *l, struct lstate *st, double t)
{
	double T;

	switch (l->kind) {
	case LIM_GCRA:
		T = 1 / l->per_s;
		return fmax(st->tat, t) - t <= (double)l->burst * T + EPS;
	case LIM_FIXED:
		fixed_roll(l, st, t);
		return st->count < l->limit;
	case LIM_SLIDING:
		ring_prune(st, t - l->window_s);
		return (long)st->n < l->limit;
	case LIM_CONC:
		return st->inflight < l->max;
	case LIM_QUOTA:
		return st->count < l->limit;
	}
	return 0;
}

/* Count a request accepted at t; the logical s it is to be held. */
static double
take(const struct limiter *l, struct lstate *st, double t)
{
	double tat;

	switch (l->kind) {
	case LIM_GCRA:
		/* nginx's excess is (tat - t) / T; it holds excess / rate. */
		tat = fmax(st->tat, t);
		st->tat = tat + 1 / l->per_s;
		return l->nodelay ? 0 : tat - t;
	case LIM_FIXED:
		fixed_roll(l, st, t);
		st->count++;
		break;
	case LIM_SLIDING:
		ring_push(st, t);
		break;
	case LIM_CONC:
		st->inflight++;
		break;
	case LIM_QUOTA:
		st->count++;
		break;
	}
	return 0;
}

/* Count a refused request, where that is the rule. */
static void
refuse(const struct limiter *l, struct lstate *st, double t)
{
	if (l->kind == LIM_FIXED && l->count_refused) {
		fixed_roll(l, st, t);
		st->count++;
	}
}

/*
 * The earliest time from t at which l, refusing at t, could admit; INFINITY
 * for never (or, for concurrency, for the caller to say).
 */
static double
next_admit(const struct limiter *l, const struct lstate *st, double t)
{
	switch (l->kind) {
	case LIM_GCRA:
		return fmax(t, st->tat - (double)l->burst / l->per_s);
	case LIM_FIXED:
		return (floor(t / l->window_s) + 1) * l->window_s;
	case LIM_SLIDING:
		return ring_at(st, st->n - (size_t)l->limit) + l->window_s;
	case LIM_CONC:
	case LIM_QUOTA:
		break;
	}
	return INFINITY;
}

static void
view(const struct limiter *l, struct lstate *st, double t, struct lview *v)
{
	double T, tau, tat, rem;

	memset(v, 0, sizeof(*v));
	switch (l->kind) {
	case LIM_GCRA:
		T = 1 / l->per_s;
		tau = (double)l->burst * T;
		tat = fmax(st->tat, t);
		v->q = l->burst + 1;
		rem = floor((tau - (tat - t)) / T + EPS) + 1;
		v->r = rem < 0 ? 0 : rem > v->q ? v->q : (long)rem;
		v->t = up(tat - tau - t);
		v->w = up((double)v->q * T);
		break;
	case LIM_FIXED:
		fixed_roll(l, st, t);
		v->q = l->limit;
		v->r = st->count < l->limit ? l->limit - st->count : 0;
		v->t = up((floor(t / l->window_s) + 1) * l->window_s - t);
		v->w = up(l->window_s);
		break;
	case LIM_SLIDING:
		ring_prune(st, t - l->window_s);
		v->q = l->limit;
		v->r = (long)st->n < l->limit ? l->limit - (long)st->n : 0;
		v->t = st->n > 0 ? up(ring_at(st, 0) + l->window_s - t) : 0;
		v->w = up(l->window_s);
		break;
	case LIM_QUOTA:
		v->q = l->limit;
		v->r = st->count < l->limit ? l->limit - st->count : 0;
		v->t = up(QUOTA_DAY - t);
		v->w = QUOTA_DAY;
		break;
	case LIM_CONC:
		break;
	}
	if (v->w < 1)
		v->w = 1;
}

void
lim_decide(struct endpoint *ep, const char *path, double t, int refused,
    struct lim_pass *lp)
{
	struct lstate *st[LIM_MAX];
	struct limiter *l;
	double h;
	size_t i;

	memset(lp, 0, sizeof(*lp));
	for (i = 0; i < ep->nlims; i++) {
		l = &ep->lims[i];
		if (!active(l, t))
			continue;
		st[i] = state(l, path);
		if (!refused && lp->by == NULL && !admits(l, st[i], t))
			lp->by = l;
	}
	for (i = 0; i < ep->nlims; i++) {
		l = &ep->lims[i];
		if (!active(l, t))
			continue;
		if (refused || lp->by != NULL) {
			refuse(l, st[i], t);
			continue;
		}
		h = take(l, st[i], t);
		if (h > lp->hold)
			lp->hold = h;
		if (l->kind == LIM_CONC)
			lp->held[lp->nheld++] = st[i];
	}
}

void
lim_release(struct lim_pass *lp)
{
	size_t i;

	for (i = 0; i < lp->nheld; i++)
		lp->held[i]->inflight--;
	lp->nheld = 0;
}

/* Append to *h, a list joined by ", ". */
static void
hdr_add(char **h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
hdr_add(char **h, const char *fmt, ...)
{
	va_list ap;
	char buf[256], *j;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	j = *h == NULL ? xstrdup(buf) : xasprintf("%s, %s", *h, buf);
	free(*h);
	*h = j;
}

void
lim_headers(struct endpoint *ep, const char *path, double t, double now,
    char *h[LHI_N])
{
	struct limiter *l;
	struct lview v;
	size_t i;

	for (i = 0; i < ep->nlims; i++) {
		l = &ep->lims[i];
		if (l->headers == LH_NONE || !active(l, t))
			continue;
		view(l, state(l, path), t, &v);
		switch (l->headers) {
		case LH_X:
		case LH_X_EPOCH:
			hdr_add(&h[LHI_LIMIT], "%ld", v.q);
			hdr_add(&h[LHI_REMAINING], "%ld", v.r);
			hdr_add(&h[LHI_RESET], "%ld", l->headers == LH_X ? v.t :
			    (long)ceil(now) + v.t);
			break;
		case LH_IETF:
			hdr_add(&h[LHI_POLICY], "\"%s\";q=%ld;w=%ld", l->name,
			    v.q, v.w);
			hdr_add(&h[LHI_RATELIMIT], "\"%s\";r=%ld;t=%ld",
			    l->name, v.r, v.t);
			break;
		case LH_DRAFT7:
			hdr_add(&h[LHI_RATELIMIT], "limit=%ld, remaining=%ld, "
			    "reset=%ld", v.q, v.r, v.t);
			hdr_add(&h[LHI_POLICY], "%ld;w=%ld", v.q, v.w);
			break;
		case LH_NONE:
			break;
		}
	}
}

/*
 * The limiters that bind one request per document: the endpoint's own (a
 * path's see one request each, which only a quota of 0 refuses) and the
 * legacy rate as a gcra.
 */
static size_t
ideal_limiters(const struct endpoint *ep, struct limiter *out)
{
	const struct limiter *l;
	size_t i, n = 0;

	for (i = 0; i < ep->nlims; i++) {
		l = &ep->lims[i];
		if (l->per == PER_ENDPOINT ||
		    (l->kind == LIM_QUOTA && l->limit == 0)) {
			out[n] = *l;
			out[n].st = NULL;
			out[n].paths = NULL;
			out[n].per = PER_ENDPOINT;
			n++;
		}
	}
	if (ep->has_rate) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].kind = LIM_GCRA;
		out[n].per_s = ep->per_s;
		out[n].burst = ep->burst;
		out[n].nodelay = 1;
		out[n].until_s = INFINITY;
		n++;
	}
	return n;
}

/* The max of the limiters' bounds on when the last of n can be served. */
static double
ideal_bound(const struct limiter *l, size_t nl, double d, long n)
{
	double v, b = 0;
	size_t i;

	for (i = 0; i < nl; i++, l++) {
		switch (l->kind) {
		case LIM_GCRA:
			v = (double)(n - (l->nodelay ? l->burst + 1 : 1)) /
			    l->per_s;
			break;
		case LIM_FIXED:
		case LIM_SLIDING:
			v = (double)((n - 1) / l->limit) * l->window_s;
			break;
		case LIM_CONC:
			v = (double)((n - 1) / l->max) * d;
			break;
		default:
			v = 0;
			break;
		}
		if (v > b)
			b = v;
	}
	return b;
}

/* A min-heap of the end times of requests in flight on a concurrency cap. */
struct heap {
	double		*v;
	size_t		 n;
};

static void
heap_push(struct heap *h, double x)
{
	size_t i = h->n++, p;

	while (i > 0 && h->v[p = (i - 1) / 2] > x) {
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = x;
}

static void
heap_pop(struct heap *h)
{
	double x = h->v[--h->n];
	size_t i = 0, c;

	while ((c = 2 * i + 1) < h->n) {
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (h->v[c] >= x)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n > 0)
		h->v[i] = x;
}

/* The first time after t at which some limiter or the outage switches. */
static double
next_switch(const struct limiter *l, size_t nl, const struct endpoint *ep,
    double t)
{
	double b = INFINITY;
	size_t i;

	for (i = 0; i < nl; i++) {
		if (l[i].from_s > t && l[i].from_s < b)
			b = l[i].from_s;
		if (l[i].until_s > t && l[i].until_s < b)
			b = l[i].until_s;
	}
	if (ep->has_outage && ep->start_s > t && ep->start_s < b)
		b = ep->start_s;
	return b;
}

/*
 * Send each document at the earliest time every active limiter admits it
 * (and the outage, if any, is over), in turn; *span is when the last answer
 * is in, *allowed how many ever got through.
 */
static void
ideal_sim(const struct limiter *l, size_t nl, const struct endpoint *ep,
    double d, long n, double *span, long *allowed)
{
	struct lstate st[LIM_MAX + 1];
	struct heap hp[LIM_MAX + 1];
	double t = 0, need, nt, sw, done, hold, h;
	size_t i;
	long k;
	int ok;

	memset(st, 0, sizeof(st));
	memset(hp, 0, sizeof(hp));
	for (i = 0; i < nl; i++)
		if (l[i].kind == LIM_CONC)
			hp[i].v = xcalloc((size_t)l[i].max, sizeof(double));
	*span = 0;
	for (k = 0; k < n; k++) {
		for (;;) {
			if (ep->has_outage && t >= ep->start_s &&
			    t < ep->end_s) {
				t = ep->end_s;
				if (isinf(t))
					goto out;
				continue;
			}
			ok = 1;
			need = t;
			for (i = 0; i < nl; i++) {
				if (!active(&l[i], t))
					continue;
				if (l[i].kind == LIM_CONC) {
					while (hp[i].n > 0 && hp[i].v[0] <= t)
						heap_pop(&hp[i]);
					st[i].inflight = (long)hp[i].n;
				}
				if (admits(&l[i], &st[i], t))
					continue;
				ok = 0;
				nt = l[i].kind == LIM_CONC ? hp[i].v[0] :
				    next_admit(&l[i], &st[i], t);
				if (nt > need)
					need = nt;
			}
			if (ok)
				break;
			/* A switch a rounding error away is the switch. */
			sw = next_switch(l, nl, ep, t);
			nt = !isinf(sw) && sw - need <= EPS * fmax(1, sw) ? sw :
			    need;
			if (isinf(nt))
				goto out;
			/* Rounding must not hold the clock still. */
			t = nt > t ? nt : t + EPS * fmax(1, t);
		}
		hold = 0;
		for (i = 0; i < nl; i++)
			if (active(&l[i], t) && (h = take(&l[i], &st[i],
			    t)) > hold)
				hold = h;
		done = t + hold;
		for (i = 0; i < nl; i++)
			if (l[i].kind == LIM_CONC && active(&l[i], t))
				heap_push(&hp[i], done + d);
		if (done + d > *span)
			*span = done + d;
	}
out:
	*allowed = k;
	for (i = 0; i < nl; i++) {
		free(st[i].ring);
		free(hp[i].v);
	}
}

void
lim_ideal(const struct endpoint *ep, double delay_s, long n, double *span,
    long *allowed)
{
	struct limiter l[LIM_MAX + 1];
	size_t i, nl;
	int sim = ep->has_outage;

	nl = ideal_limiters(ep, l);
	for (i = 0; i < nl; i++)
		if (l[i].from_s > 0 || !isinf(l[i].until_s))
			sim = 1;
	if (sim) {
		ideal_sim(l, nl, ep, delay_s, n, span, allowed);
		return;
	}
	for (i = 0; i < nl; i++)
		if (l[i].kind == LIM_QUOTA && l[i].limit < n)
			n = l[i].limit;
	*allowed = n;
	*span = n > 0 ? ideal_bound(l, nl, delay_s, n) + delay_s : 0;
}
