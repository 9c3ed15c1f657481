/*
 * Unit tests of lib/pace: a batch of takes or of outcomes does what as
 * many single calls do, and how slow start grows, on state files in a
 * temporary run directory.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/pace.h"
#include "lib/state.h"
#include "lib/x.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/unit-pace.XXXXXX";

/* The pace file of ep, without its endpoint name. */
static json_t *
doc(const char *ep)
{
	char *path = xasprintf("%s/state/rate/%s.json", dir, ep), err[256];
	json_t *d = NULL;

	if (state_read(path, &d, err, sizeof(err)) == -1)
		ok(0, "state_read: %s", err);
	json_object_del(d, "endpoint");
	free(path);
	return d;
}

/* The current rate of ep. */
static double
rate(const char *ep)
{
	json_t *d = doc(ep);
	double r = json_number_value(json_object_get(d, "rate"));

	json_decref(d);
	return r;
}

static int
same(const char *a, const char *b)
{
	json_t *da = doc(a), *db = doc(b);
	int eq = da != NULL && json_equal(da, db);

	json_decref(da);
	json_decref(db);
	return eq;
}

int
main(void)
{
	struct pace_cfg fast = { 0, 0 }, limited = { 10, 4 };
	struct pace_ev ev[30];
	double t0 = 1e9, wait, w1, prev, r;
	long granted, n;
	char err[256], *p;
	int i, rc, good;

	if (mkdtemp(dir) == NULL || state_mkdirs(dir) == -1)
		return 1;
	p = xasprintf("%s/state/rate", dir);
	mkdir(p, 0700);
	free(p);

	/* 10/s with a burst of 4: about four at once, then one each 0.1 s. */
	for (n = 0; pace_take(dir, "a", &limited, t0, &w1, err,
	    sizeof(err)) == 0; n++)
		;
	rc = pace_take_n(dir, "b", &limited, t0, 10, &granted, &wait, NULL, err,
	    sizeof(err));
	ok(rc == 0 && granted == n && n >= 3 && n <= 4,
	    "take_n: grants what single takes would (%ld of 10, %ld)",
	    granted, n);
	ok(wait > 0 && wait == w1, "take_n: and says how long to wait");
	ok(same("a", "b"), "take_n: the file is what single takes make");
	ok(pace_take_n(dir, "b", &limited, t0 + 0.1, 10, &granted, &wait,
	    NULL, err, sizeof(err)) == 0 && granted == 1,
	    "take_n: a reservation spent is spent: one more 0.1 s later");
	ok(pace_take_n(dir, "c", &limited, t0, 2, &granted, &wait, NULL, err,
	    sizeof(err)) == 0 && granted == 2 && wait == 0,
	    "take_n: never more than asked for");

	/* Outcomes: slow start, a 429, recovery; one by one and at once. */
	for (i = 0; i < 30; i++) {
		memset(&ev[i], 0, sizeof(ev[i]));
		ev[i].ev = i == 12 || i == 13 ? PACE_SLOW : PACE_OK;
		ev[i].sent_at = t0 + 0.01 * i;
		ev[i].now = t0 + 0.01 * i + 0.005;
		if (i == 20) {
			hdr_ratelimit_init(&ev[i].rl);
			ev[i].rl.remaining = 50;
			ev[i].rl.reset_s = 1;
			ev[i].rl_seen = 1;
		}
		rc = pace_feedback(dir, "d", &fast, ev[i].ev, ev[i].sent_at,
		    ev[i].rl_seen ? &ev[i].rl : NULL, ev[i].now, err,
		    sizeof(err));
		if (rc == -1)
			ok(0, "pace_feedback: %s", err);
	}
	ok(pace_feedback_n(dir, "e", &fast, ev, 30, err, sizeof(err)) == 0,
	    "feedback_n: thirty outcomes at once");
	ok(same("d", "e"), "feedback_n: the file is what thirty calls make");
	ok(pace_feedback_n(dir, "f", &fast, ev, 0, err, sizeof(err)) == 0 &&
	    doc("f") == NULL, "feedback_n: no outcomes, no file");

	/*
	 * Slow start, one request per round trip: each success is a round
	 * trip of its own and doubles the rate, up to the cap.  (Round trips
	 * of 0.5 s: a serial client's pace, 2/s, is below all of it.)
	 */
	good = 1;
	for (i = 0; i < 10; i++) {
		pace_feedback(dir, "g", &fast, PACE_OK, t0 + i,
		    NULL, t0 + i + 0.5, err, sizeof(err));
		r = rate("g");
		if (r != 8 * (double)(2L << i))
			good = 0;
	}
	ok(good, "slow start: each round trip doubles the rate (%.0f after "
	    "10)", r);
	for (i = 10; i < 40; i++)
		pace_feedback(dir, "g", &fast, PACE_OK, t0 + i,
		    NULL, t0 + i + 0.5, err, sizeof(err));
	ok(rate("g") == 1e6, "slow start: never past the cap (%.0f)",
	    rate("g"));
	/*
	 * 100 requests on the wire at once: one round trip, at most double
	 * (or 3 a success, which is always allowed).
	 */
	for (i = 0; i < 4; i++)
		pace_feedback(dir, "h", &fast, PACE_OK, t0 + 0.01 * i,
		    NULL, t0 + 0.01 * i + 0.005, err, sizeof(err));
	prev = rate("h");
	for (i = 0; i < 100; i++)
		pace_feedback(dir, "h", &fast, PACE_OK, t0 + 0.04 + 0.0001 * i,
		    NULL, t0 + 0.5 + 0.0001 * i, err, sizeof(err));
	r = rate("h");
	ok(r >= 2 * prev && r <= 2 * prev + 3 * 100, "slow start: one round trip of 100 answers at most "
	    "doubles the rate (%.0f from %.0f)", r, prev);
	/*
	 * A faster pace brings the next send forward: at 8/s the second
	 * send waits 1/8 s, but once an answer doubles the rate, 1/16 s.
	 */
	pace_take(dir, "k", &fast, t0, &wait, err, sizeof(err));
	rc = pace_take(dir, "k", &fast, t0 + 0.065, &wait, err, sizeof(err));
	pace_feedback(dir, "k", &fast, PACE_OK, t0, NULL, t0 + 0.001, err,
	    sizeof(err));
	ok(rc == 1 && pace_take(dir, "k", &fast, t0 + 0.065, &wait, err,
	    sizeof(err)) == 0, "slow start: a faster pace brings the next "
	    "send forward");
	/*
	 * Up to a serial client's pace, one request each 2 ms for answers in
	 * 2 ms, but at most 16-fold an answer: 8, 128, then 500.
	 */
	pace_feedback(dir, "s", &fast, PACE_OK, t0, NULL, t0 + 0.002, err,
	    sizeof(err));
	r = rate("s");
	pace_feedback(dir, "s", &fast, PACE_OK, t0 + 0.003, NULL, t0 + 0.005,
	    err, sizeof(err));
	ok(r == 128 && rate("s") >= 499 && rate("s") <= 501, "slow start: up "
	    "to a serial client's pace, 16-fold an answer at most (%.1f, then "
	    "%.1f for 2 ms round trips)", r, rate("s"));
	/*
	 * The first 429 ends the doubling: back to the rate of the last
	 * round trip that passed, then no more than 3 a success.
	 */
	pace_feedback(dir, "i", &fast, PACE_OK, t0, NULL, t0 + 0.1, err,
	    sizeof(err));
	pace_feedback(dir, "i", &fast, PACE_OK, t0 + 0.1, NULL, t0 + 0.2,
	    err, sizeof(err));
	pace_feedback(dir, "i", &fast, PACE_SLOW, t0 + 0.3, NULL, t0 + 0.4,
	    err, sizeof(err));
	prev = rate("i");
	ok(prev == 16, "slow start: the first 429 goes back to the last good "
	    "round trip's rate (%.1f, from 32)", prev);
	for (i = 0; i < 40; i++)
		pace_feedback(dir, "i", &fast, PACE_OK, t0 + 0.1 * i + 0.5,
		    NULL, t0 + 0.1 * i + 0.501, err, sizeof(err));
	r = rate("i");
	ok(r > prev && r <= prev + 3 * 40,
	    "slow start: after a 429, no more than 3 a success, however "
	    "short the round trip (%.1f to %.1f)", prev, r);
	/* ... and nothing is brought forward any more. */
	pace_take(dir, "i", &fast, t0 + 5, &wait, err, sizeof(err));
	w1 = 1 / rate("i");
	pace_feedback(dir, "i", &fast, PACE_OK, t0 + 5, NULL, t0 + 5.001, err,
	    sizeof(err));
	ok(pace_take(dir, "i", &fast, t0 + 5 + 0.99 * w1, &wait, err,
	    sizeof(err)) == 1, "slow start: after a 429, a faster pace does "
	    "not bring the next send forward");

	p = xasprintf("rm -rf %s", dir);
	if (system(p) != 0)
		ok(0, "cleanup");
	free(p);
	return tap_done();
}
