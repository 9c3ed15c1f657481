/* breaker: closed -> open -> half-open (one probe) -> closed or open. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/control/breaker.h"
#include "lib/base/clk.h"
#include "lib/base/proc.h"
#include "lib/state/store.h"
#include "lib/base/x.h"

#define TRANSITIONS_KEPT	50
#define BUMP_MAX	1.0	/* real s a stamp is moved after the last */

struct op {
	const struct conf_breaker *c;
	const char	*ep;
	double		 now, lease;
	int		 allow;		/* 1: breaker_allow; 0: record */
	int		 held, probe;
	int		 fresh;		/* the request is a document's first */
	enum breaker_outcome out;
	double		 sent_at;
	const struct breaker_ev *ev;	/* record: the outcomes, in order */
	size_t		 nev;
	enum breaker_verdict v;
	double		 until, opened_at;
};


static const char *
sget(const json_t *d, const char *k)
{
	return json_string_value(json_object_get(d, k));
}

static double
nget(const json_t *d, const char *k)
{
	return json_number_value(json_object_get(d, k));
}

static void
nset(json_t *d, const char *k, double v)
{
	json_object_set_new(d, k, json_real(v));
}

static void
iinc(json_t *d, const char *k)
{
	json_object_set_new(d, k, json_integer(json_integer_value(
	    json_object_get(d, k)) + 1));
}

/*
 * A transition, stamped no earlier than the one before it: an answer's
 * news is told late (a batch, a busy loop) with the time it came in, and
 * a half-open made since would come after it in the list and before it
 * in time.  The attempt log, which follows the list by time, dropped it.
 * News is late by a moment; a last stamp further ahead than BUMP_MAX is a
 * clock ahead (another host's) or a hand's, and pinned every stamp after
 * it there: it is not followed.
 */
static void
to(json_t *d, const char *state, double now)
{
	json_t *tr = json_object_get(d, "transitions");
	size_t n = json_array_size(tr);
	double last;

	if (n > 0) {
		last = json_number_value(json_object_get(json_array_get(tr,
		    n - 1), "t"));
		if (now <= last && last - now <= BUMP_MAX)
			now = fmax(last + 1e-6, nextafter(last, INFINITY));
	}
	json_object_set_new(d, "state", json_string(state));
	json_array_append_new(tr, json_pack("{s:f,s:s}", "t", now, "to",
	    state));
	while (json_array_size(tr) > TRANSITIONS_KEPT)
		json_array_remove(tr, 0);
}

static json_t *
fresh(const char *ep, const struct conf_breaker *c)
{
	return json_pack("{s:s,s:s,s:i,s:s,s:f,s:f,s:i,s:f,s:i,s:i,s:[]}",
	    "endpoint", ep, "state", "closed", "fails", 0, "window", "",
	    "opened_at", 0.0, "cooldown", clk_real(c->cooldown), "probe_pid",
	    0, "probe_until", 0.0, "openings", 0, "saved", 0, "transitions");
}

/* The first field of d no run writes so, or NULL. */
static const char *
bad_field(const json_t *d)
{
	/*
	 * Each of its type (JSON_REAL: any number); those written only once
	 * the breaker has been used, if there.
	 */
	static const struct {
		const char	*name;
		json_type	 type;
		int		 always;
	} fields[] = {
		{ "fails", JSON_INTEGER, 1 },
		{ "window", JSON_STRING, 1 },
		{ "opened_at", JSON_REAL, 1 },
		{ "cooldown", JSON_REAL, 1 },
		{ "probe_until", JSON_REAL, 1 },
		{ "transitions", JSON_ARRAY, 1 },
		{ "half_open_at", JSON_REAL, 0 },
		{ "ok_sent", JSON_REAL, 0 },
		{ "probe_pid", JSON_INTEGER, 0 },
		{ "probe_host", JSON_STRING, 0 },
	};
	const char *s = sget(d, "state");
	const json_t *v;
	size_t i;

	if (s == NULL || (strcmp(s, "closed") != 0 && strcmp(s, "open") !=
	    0 && strcmp(s, "half_open") != 0))
		return "state";
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		v = json_object_get(d, fields[i].name);
		if (v == NULL ? fields[i].always : fields[i].type == JSON_REAL ?
		    !json_is_number(v) : json_typeof(v) != fields[i].type)
			return fields[i].name;
	}
	return NULL;
}

int
breaker_valid(const json_t *d, char *why, size_t n)
{
	const char *bad;

	if (!json_is_object(d)) {
		snprintf(why, n, "not an object");
		return -1;
	}
	if ((bad = bad_field(d)) == NULL)
		return 0;
	snprintf(why, n, "field \"%s\"", bad);
	return -1;
}

static void
open_now(json_t *d, const struct op *o, int reopen)
{
	double cd = nget(d, "cooldown");

	/* Growth is opt-in: cooldown_max above cooldown. */
	if (reopen && o->c->cooldown_max > o->c->cooldown)
		cd = fmin(cd * 2, clk_real(o->c->cooldown_max));
	else
		cd = clk_real(o->c->cooldown);
	nset(d, "cooldown", cd);
	nset(d, "opened_at", o->now);
	json_object_set_new(d, "probe_pid", json_integer(0));
	iinc(d, "openings");
	to(d, "open", o->now);
	store_tell(BREAKER_CHANNEL, o->ep);
}

/* Should a closed breaker open after this failure? */
static int
trips(json_t *d, const struct conf_breaker *c, int failed)
{
	const char *w = sget(d, "window");
	char *nw;
	size_t n = strlen(w), i, bad = 0;
	long fails = (long)json_integer_value(json_object_get(d, "fails"));

	fails = failed ? fails + 1 : 0;
	json_object_set_new(d, "fails", json_integer(fails));
	nw = xasprintf("%s%c", n >= (size_t)c->window ? w + n -
	    (size_t)c->window + 1 : w, failed ? '1' : '0');
	json_object_set_new(d, "window", json_string(nw));
	for (i = 0; nw[i] != '\0'; i++)
		bad += nw[i] == '1';
	n = strlen(nw);
	free(nw);
	if (!failed)
		return 0;
	if (fails >= c->failures)
		return 1;
	return c->rate > 0 && (long)n >= c->min_calls &&
	    100.0 * (double)bad / (double)n >= c->rate;
}

/* Apply one outcome to the breaker d. */
static void
record(json_t *d, struct op *o)
{
	const char *st = sget(d, "state");

	if (o->out == BREAKER_SUCCESS && o->sent_at > nget(d, "ok_sent"))
		nset(d, "ok_sent", o->sent_at);

	if (strcmp(st, "half_open") == 0 && o->probe) {
		if (o->out == BREAKER_SUCCESS) {
			json_object_set_new(d, "fails", json_integer(0));
			json_object_set_new(d, "window", json_string(""));
			to(d, "closed", o->now);
		} else if (o->fresh)
			open_now(d, o, 1);
		else	/* a retry failing again proves nothing: next probe */
			json_object_set_new(d, "probe_pid", json_integer(0));
	} else if (strcmp(st, "closed") == 0 && o->out == BREAKER_FAILURE &&
	    o->sent_at < nget(d, "ok_sent")) {
		/*
		 * A request sent after this one has been answered since: the
		 * endpoint was up after this one left (a document that hangs
		 * while the rest are served, not an outage).
		 */
	} else if (strcmp(st, "closed") == 0 &&
	    (o->fresh || o->out == BREAKER_SUCCESS) && trips(d, o->c,
	    o->out == BREAKER_FAILURE))
		open_now(d, o, 0);	/* retries' failures say little */
	else if (strcmp(st, "closed") != 0 && o->out == BREAKER_SUCCESS &&
	    !o->probe) {
		/*
		 * An answer from a request already on the wire when the
		 * breaker opened: the endpoint is up after all.  (In an
		 * outage those fail too, and this never happens.)
		 */
		json_object_set_new(d, "fails", json_integer(0));
		json_object_set_new(d, "window", json_string(""));
		to(d, "closed", o->now);
	}
}

/*
 * 1 when the probe's owner, pid on host (NULL: this one), is known to be
 * gone: its database session let go (any host), or, with files, its pid
 * ended on this host.  On another host with files only the lease tells.
 */
static int
owner_gone(pid_t pid, const char *host)
{
	char id[300];
	int here = host == NULL || strcmp(host, proc_host()) == 0, a;

	if (here && pid == getpid())
		return 0;
	proc_name(id, sizeof(id), (long)pid, here ? proc_host() : host);
	if ((a = store_alive(id)) >= 0)
		return !a;
	return here && !proc_alive(pid);
}

/*
 * No time a run writes is ahead of now, nor a probe's lease longer than a
 * lease: such were written by hand, or by a host whose clock runs ahead.
 * A lease of 1e300 held a half-open breaker for ever (no probe, nothing
 * said), and a success sent in 1e300 made every failure older than it:
 * the breaker never opened.  1 when one was brought back.
 */
static int
clamp(json_t *d, double now, double lease)
{
	static const char *k[] = { "half_open_at", "ok_sent" };
	size_t i;
	int dirty = 0;

	for (i = 0; i < sizeof(k) / sizeof(k[0]); i++)
		if (nget(d, k[i]) > now) {
			nset(d, k[i], now);
			dirty = 1;
		}
	if (nget(d, "probe_until") > now + lease) {
		nset(d, "probe_until", now + lease);
		dirty = 1;
	}
	return dirty;
}

static int
run(json_t **doc, void *arg, char *err, size_t errlen)
{
	struct op *o = arg;
	json_t *d = *doc;
	const char *st;
	const char *ph;
	double cd;
	pid_t pid;
	size_t i;
	int dirty = 0;

	if (d == NULL) {
		d = *doc = fresh(o->ep, o->c);
		dirty = 1;
	}
	if (breaker_valid(d, err, errlen) == -1)
		return FILES_CORRUPT;
	if (o->allow)
		dirty |= clamp(d, o->now, o->lease);
	else if (o->nev > 0)
		dirty |= clamp(d, o->ev[o->nev - 1].now, HUGE_VAL);
	st = sget(d, "state");
	o->opened_at = nget(d, "opened_at");
	if (!o->allow) {
		for (i = 0; i < o->nev; i++) {
			o->now = o->ev[i].now;
			o->out = o->ev[i].out;
			o->probe = o->ev[i].probe;
			o->fresh = o->ev[i].fresh;
			o->sent_at = o->ev[i].sent_at;
			record(d, o);
		}
		return 0;
	}
	o->v = BREAKER_ALLOW;
	if (strcmp(st, "open") == 0) {
		/*
		 * What was stored is held to what is configured now: a
		 * cooldown cut from 1 h to 5 s waited the hour, and one
		 * opened in the future (a clock ahead, by hand) waited days.
		 */
		cd = clk_real(fmax(o->c->cooldown, o->c->cooldown_max));
		if (nget(d, "cooldown") > cd) {
			nset(d, "cooldown", cd);
			dirty = 1;
		}
		if (nget(d, "opened_at") > o->now) {
			nset(d, "opened_at", o->now);
			dirty = 1;
		}
		if (o->now < nget(d, "opened_at") + nget(d, "cooldown")) {
			o->v = BREAKER_DENY;
			o->until = nget(d, "opened_at") + nget(d, "cooldown");
		} else {
			to(d, "half_open", o->now);
			st = "half_open";
			json_object_set_new(d, "probe_pid", json_integer(0));
			nset(d, "half_open_at", o->now);
			dirty = 1;
		}
	}
	if (strcmp(st, "half_open") == 0) {
		pid = (pid_t)json_integer_value(json_object_get(d,
		    "probe_pid"));
		ph = sget(d, "probe_host");
		/* A probe whose owner died, or whose lease ran out, is void. */
		if (!o->fresh && o->now < nget(d, "half_open_at") +
		    clk_real(1)) {
			/* For a moment, leave the probe to a fresh document:
			 * a poison one would only open the breaker again. */
			o->v = BREAKER_FRESH_FIRST;
			o->until = nget(d, "half_open_at") + clk_real(1);
		} else if (pid == 0 || o->now > nget(d, "probe_until") ||
		    owner_gone(pid, ph)) {
			json_object_set_new(d, "probe_pid",
			    json_integer(getpid()));
			json_object_set_new(d, "probe_host",
			    json_string(proc_host()));
			nset(d, "probe_until", o->now + o->lease);
			o->v = BREAKER_PROBE;
			dirty = 1;
		} else {
			o->v = BREAKER_DENY;
			o->until = o->now + 0.05;
		}
	}
	if (o->v == BREAKER_DENY && o->held) {
		iinc(d, "saved");
		dirty = 1;
	}
	/* A verdict that changed nothing leaves the file as it was. */
	return dirty ? 0 : 1;
}

static int
apply(const char *rundir, struct op *o, char *err, size_t errlen)
{
	return store_update(rundir, "breaker", o->ep, run, o, err, errlen);
}

int
breaker_allow(const char *rundir, const char *ep, const struct conf_breaker *c,
    double now, double lease, int held, int fresh, enum breaker_verdict *v,
    double *until, double *opened_at, char *err, size_t errlen)
{
	struct op o;

	memset(&o, 0, sizeof(o));
	o.c = c;
	o.ep = ep;
	o.now = now;
	o.lease = lease;
	o.allow = 1;
	o.held = held;
	o.fresh = fresh;
	if (apply(rundir, &o, err, errlen) == -1)
		return -1;
	*v = o.v;
	*until = o.until;
	*opened_at = o.opened_at;
	return 0;
}

int
breaker_record(const char *rundir, const char *ep, const struct conf_breaker *c,
    enum breaker_outcome out, int probe, int fresh, double now, char *err,
    size_t errlen)
{
	struct breaker_ev ev;

	ev.out = out;
	ev.probe = probe;
	ev.fresh = fresh;
	ev.now = now;
	ev.sent_at = now;
	return breaker_record_n(rundir, ep, c, &ev, 1, err, errlen);
}

int
breaker_record_n(const char *rundir, const char *ep,
    const struct conf_breaker *c, const struct breaker_ev *ev, size_t n,
    char *err, size_t errlen)
{
	struct op o;

	if (n == 0)
		return 0;
	memset(&o, 0, sizeof(o));
	o.c = c;
	o.ep = ep;
	o.ev = ev;
	o.nev = n;
	return apply(rundir, &o, err, errlen);
}
