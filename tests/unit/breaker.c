/*
 * Unit tests of lib/breaker: what opens it, what closes it, and who may
 * probe, on a state file in a temporary run directory.
 */
#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/control/breaker.h"
#include "lib/control/valid.h"
#include "lib/config/conf.h"
#include "lib/state/files.h"
#include "lib/base/proc.h"
#include "lib/base/x.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/unit-breaker.XXXXXX";
static struct conf_breaker bc;
static double t0;

/* The breaker's state for ep, from its file. */
static char *
state(const char *ep)
{
	static char buf[32];
	char *path = xasprintf("%s/state/breaker/%s.json", dir, ep), err[256];
	json_t *d;

	buf[0] = '\0';
	if (files_read(path, &d, err, sizeof(err)) == 0 && d != NULL)
		snprintf(buf, sizeof(buf), "%s", json_string_value(
		    json_object_get(d, "state")));
	json_decref(d);
	free(path);
	return buf;
}

static void
record(const char *ep, enum breaker_outcome o, int probe, int fresh, double t)
{
	char err[256];

	if (breaker_record(dir, ep, &bc, o, probe, fresh, t0 + t, err,
	    sizeof(err)) == -1)
		ok(0, "breaker_record: %s", err);
}

static enum breaker_verdict
allow(const char *ep, int fresh, double t)
{
	enum breaker_verdict v;
	double until, opened;
	char err[256];

	if (breaker_allow(dir, ep, &bc, t0 + t, 60, 0, fresh, &v, &until, &opened,
	    err, sizeof(err)) == -1)
		ok(0, "breaker_allow: %s", err);
	return v;
}

int
main(void)
{
	struct conf c;
	char *p;
	int i;

	if (mkdtemp(dir) == NULL || files_mkdirs(dir, NULL, 0) == -1)
		return 1;
	p = xasprintf("%s/state/breaker", dir);
	mkdir(p, 0700);
	free(p);
	conf_init(&c);
	bc = c.defaults.breaker;	/* 5 failures, 30 s cooldown */
	t0 = 1e9;

	for (i = 0; i < 4; i++)
		record("a", BREAKER_FAILURE, 0, 1, i);
	ok(strcmp(state("a"), "closed") == 0, "4 fresh failures leave it closed");
	record("a", BREAKER_FAILURE, 0, 1, 4);
	ok(strcmp(state("a"), "open") == 0, "the 5th opens it");
	ok(allow("a", 1, 5) == BREAKER_DENY, "open: a request is turned away");

	for (i = 0; i < 10; i++)
		record("b", BREAKER_FAILURE, 0, 0, i);
	ok(strcmp(state("b"), "closed") == 0,
	    "retries failing again never open it (a poison document)");
	for (i = 0; i < 4; i++)
		record("c", BREAKER_FAILURE, 0, 1, i);
	record("c", BREAKER_SUCCESS, 0, 1, 4);
	record("c", BREAKER_FAILURE, 0, 1, 5);
	ok(strcmp(state("c"), "closed") == 0, "a success between resets the count");

	record("a", BREAKER_SUCCESS, 0, 1, 6);
	ok(strcmp(state("a"), "closed") == 0,
	    "a success from a request already on the wire closes it");
	for (i = 0; i < 5; i++)
		record("a", BREAKER_FAILURE, 0, 1, 10 + i);
	ok(strcmp(state("a"), "open") == 0, "open again");
	ok(allow("a", 0, 100) == BREAKER_FRESH_FIRST,
	    "after the cooldown, a retry leaves the probe to a fresh one");
	ok(allow("a", 1, 100) == BREAKER_PROBE, "a fresh request is the probe");
	ok(allow("a", 1, 100.1) == BREAKER_DENY, "one probe at a time");
	record("a", BREAKER_FAILURE, 1, 1, 101);
	ok(strcmp(state("a"), "open") == 0, "a failed probe re-opens it");
	ok(allow("a", 1, 102) == BREAKER_DENY, "and the cooldown starts again");
	ok(allow("a", 1, 140) == BREAKER_PROBE, "a probe after the next cooldown");
	record("a", BREAKER_SUCCESS, 1, 1, 141);
	ok(strcmp(state("a"), "closed") == 0, "a successful probe closes it");
	ok(allow("a", 0, 142) == BREAKER_ALLOW, "closed: everything passes");

	for (i = 0; i < 5; i++)
		record("d", BREAKER_FAILURE, 0, 1, i);
	ok(allow("d", 0, 40) == BREAKER_FRESH_FIRST, "d open, then half-open");
	ok(allow("d", 0, 42) == BREAKER_PROBE,
	    "with no fresh request about, a retry probes");
	record("d", BREAKER_FAILURE, 1, 0, 43);
	ok(strcmp(state("d"), "half_open") == 0,
	    "a retry's failed probe does not re-open it (a poison document)");
	ok(allow("d", 0, 43.1) == BREAKER_PROBE, "and the next may probe at once");

	/*
	 * Failures of requests sent before one answered since do not count:
	 * ten documents that hang while a later request is served ("g"), as
	 * against ten sent after it ("h").
	 */
	{
		struct breaker_ev ev[11];
		char err[256];

		for (i = 0; i < 11; i++) {
			ev[i].out = i == 0 ? BREAKER_SUCCESS : BREAKER_FAILURE;
			ev[i].probe = 0;
			ev[i].fresh = 1;
			ev[i].now = t0 + 100 + i;
			ev[i].sent_at = t0 + (i == 0 ? 50 : 40 + i);
		}
		breaker_record_n(dir, "g", &bc, ev, 11, err, sizeof(err));
		ok(strcmp(state("g"), "closed") == 0, "ten failures of requests "
		    "sent before a success's leave it closed");
		for (i = 1; i < 11; i++)
			ev[i].sent_at = t0 + 50 + i;
		breaker_record_n(dir, "h", &bc, ev, 11, err, sizeof(err));
		ok(strcmp(state("h"), "open") == 0, "five of requests sent after "
		    "it open it");
	}

	/* The same outcomes one by one ("e") and in one batch ("f"). */
	{
		static const int fails[] = { 1, 1, 0, 1, 1, 1, 1, 1, 0, 0 };
		struct breaker_ev ev[10];
		char err[256], *pe, *pf;
		json_t *de, *df;

		for (i = 0; i < 10; i++) {
			ev[i].out = fails[i] ? BREAKER_FAILURE : BREAKER_SUCCESS;
			ev[i].probe = 0;
			ev[i].fresh = 1;
			ev[i].now = t0 + i;
			ev[i].sent_at = t0 + i;
			record("e", ev[i].out, 0, 1, i);
		}
		ok(breaker_record_n(dir, "f", &bc, ev, 10, err, sizeof(err)) == 0,
		    "breaker_record_n: ten outcomes at once");
		pe = xasprintf("%s/state/breaker/e.json", dir);
		pf = xasprintf("%s/state/breaker/f.json", dir);
		de = json_load_file(pe, 0, NULL);
		df = json_load_file(pf, 0, NULL);
		json_object_set_new(de, "endpoint", json_string("f"));
		ok(de != NULL && json_equal(de, df) && json_integer_value(
		    json_object_get(df, "openings")) == 1,
		    "breaker_record_n: the file is what ten breaker_record calls make");
		json_decref(de);
		json_decref(df);
		free(pe);
		free(pf);
	}

	/*
	 * News told late: a success answered at 41 s, of a request on the
	 * wire when the breaker opened, told after the half-open made at
	 * 42 s.  The transitions keep their order in time too, each after
	 * the one before: the attempt log follows them by time.
	 */
	{
		char *pi = xasprintf("%s/state/breaker/i.json", dir);
		json_t *di, *tr;
		size_t k;
		int order = 1;

		for (i = 0; i < 5; i++)
			record("i", BREAKER_FAILURE, 0, 1, i);
		ok(allow("i", 1, 40) == BREAKER_PROBE, "i open, then a probe");
		record("i", BREAKER_SUCCESS, 0, 1, 39);
		ok(strcmp(state("i"), "closed") == 0, "a success told late "
		    "closes it");
		di = json_load_file(pi, 0, NULL);
		tr = json_object_get(di, "transitions");
		for (k = 1; k < json_array_size(tr); k++)
			order &= json_number_value(json_object_get(
			    json_array_get(tr, k), "t")) > json_number_value(
			    json_object_get(json_array_get(tr, k - 1), "t"));
		ok(json_array_size(tr) == 3 && order, "its %zu transitions "
		    "are in order in time", json_array_size(tr));
		json_decref(di);
		free(pi);

		/*
		 * A last stamp far ahead (another host's clock, a clock set
		 * back) is not followed: every later stamp was pinned to it.
		 */
		pi = xasprintf("%s/state/breaker/k.json", dir);
		for (i = 0; i < 5; i++)
			record("k", BREAKER_FAILURE, 0, 1, 1000 + i);
		record("k", BREAKER_SUCCESS, 0, 1, 50);
		di = json_load_file(pi, 0, NULL);
		tr = json_object_get(di, "transitions");
		ok(json_array_size(tr) == 2 && json_number_value(
		    json_object_get(json_array_get(tr, 1), "t")) == t0 + 50,
		    "a close 950 s before the open is stamped when it came");
		json_decref(di);
		free(pi);
	}

	/*
	 * A state no run writes is refused, before the run and in it, with
	 * the file and the field named, and left as it was.
	 */
	{
		char *pz = xasprintf("%s/state/breaker/z.json", dir), err[512];
		char *want = xasprintf("%s: corrupt state file (field "
		    "\"fails\"); move it aside to start afresh", pz);
		enum breaker_verdict v;
		double until, opened;
		FILE *f = fopen(pz, "w");
		json_t *d;

		if (f == NULL || fputs("{\"state\":\"closed\",\"fails\":"
		    "\"x\"}\n", f) == EOF || fclose(f) == EOF)
			ok(0, "write %s", pz);
		d = json_load_file(pz, 0, NULL);
		ok(breaker_valid(d, err, sizeof(err)) == -1 && strcmp(err,
		    "field \"fails\"") == 0, "breaker_valid names the field: %s",
		    err);
		json_decref(d);
		ok(files_check_state(dir, 0, control_valid, err, sizeof(err)) ==
		    -1 && strcmp(err, want) == 0, "files_check_state names the "
		    "file and the field: %s", err);
		ok(breaker_allow(dir, "z", &bc, t0, 60, 0, 1, &v, &until,
		    &opened, err, sizeof(err)) == -1 && strcmp(err, want) == 0,
		    "breaker_allow names the file and the field: %s", err);
		d = json_load_file(pz, 0, NULL);
		ok(json_is_string(json_object_get(d, "fails")),
		    "the corrupt file is left as it was");
		json_decref(d);
		unlink(pz);
		ok(files_check_state(dir, 0, control_valid, err, sizeof(err)) == 0,
		    "moved aside, the state is usable again: %s", err);
		free(want);
		free(pz);
	}
	/*
	 * Times from a hand or a clock ahead: a probe's lease of 1e300 held
	 * pid 1's half-open probe for ever, and a success sent in 1e300 made
	 * every failure older than it.
	 */
	{
		char *pf = xasprintf("%s/state/breaker/far.json", dir);
		char *po = xasprintf("%s/state/breaker/oks.json", dir);
		FILE *f = fopen(pf, "w");

		if (f == NULL || fprintf(f, "{\"state\":\"half_open\",\"fails\":"
		    "0,\"window\":\"\",\"opened_at\":0,\"cooldown\":30,"
		    "\"probe_pid\":1,\"probe_host\":\"%s\",\"probe_until\":"
		    "1e300,\"half_open_at\":0,\"transitions\":[]}\n",
		    proc_host()) < 0 || fclose(f) == EOF)
			ok(0, "write %s", pf);
		ok(allow("far", 1, 0) == BREAKER_DENY, "a probe on its lease "
		    "is another's");
		ok(allow("far", 1, 61) == BREAKER_PROBE, "a lease of 1e300 "
		    "runs out a lease after it was read");
		f = fopen(po, "w");
		if (f == NULL || fputs("{\"state\":\"closed\",\"fails\":0,"
		    "\"window\":\"\",\"opened_at\":0,\"cooldown\":30,"
		    "\"probe_until\":0,\"ok_sent\":1e300,\"transitions\":[]}"
		    "\n", f) == EOF || fclose(f) == EOF)
			ok(0, "write %s", po);
		for (i = 0; i < 5; i++)
			record("oks", BREAKER_FAILURE, 0, 1, 100 + i);
		ok(strcmp(state("oks"), "open") == 0, "a success sent in 1e300 "
		    "does not keep five failures from opening it (%s)",
		    state("oks"));
		free(pf);
		free(po);
	}
	p = xasprintf("rm -rf %s", dir);
	if (system(p) != 0)
		ok(0, "cleanup");
	free(p);
	conf_free(&c);
	return tap_done();
}
