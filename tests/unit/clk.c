/*
 * Unit tests of lib/clk: reproducible jitter draws, the time scale, and
 * every form of deadline.  Local-time forms run with TZ=UTC.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/clk.h"
#include "tests/unit/tap.h"

static void
test_draw(void)
{
	double a, b, sum = 0, lo = 1, hi = 0, u;
	long i, same = 0, bins[10] = { 0 }, minbin, maxbin;
	int k;

	a = clk_draw(42, "NIH-R01-001", 1);
	b = clk_draw(42, "NIH-R01-001", 1);
	ok(a == b, "draw: same seed, key and n give the same draw");
	ok(clk_draw(43, "NIH-R01-001", 1) != a,
	    "draw: another seed gives another draw");
	ok(clk_draw(42, "NIH-R01-002", 1) != a,
	    "draw: another key gives another draw");
	ok(clk_draw(42, "NIH-R01-001", 2) != a,
	    "draw: another attempt gives another draw");
	ok(clk_draw(0, "", 0) == clk_draw(0, "", 0),
	    "draw: an empty key is fine and stable");

	for (i = 0; i < 20000; i++) {
		char key[32];

		snprintf(key, sizeof(key), "doc-%ld", i);
		u = clk_draw(7, key, i % 5 + 1);
		if (u < lo)
			lo = u;
		if (u > hi)
			hi = u;
		sum += u;
		if (u >= 0 && u < 1)
			bins[(int)(u * 10)]++;
		if (u == clk_draw(8, key, i % 5 + 1))
			same++;
	}
	ok(lo >= 0 && hi < 1, "draw: 20000 draws all in [0, 1)");
	ok(fabs(sum / 20000 - 0.5) < 0.02, "draw: mean near 0.5 (%.4f)",
	    sum / 20000);
	minbin = maxbin = bins[0];
	for (k = 1; k < 10; k++) {
		if (bins[k] < minbin)
			minbin = bins[k];
		if (bins[k] > maxbin)
			maxbin = bins[k];
	}
	ok(minbin > 1700 && maxbin < 2300,
	    "draw: every tenth of [0, 1) holds about 2000 (%ld..%ld)", minbin,
	    maxbin);
	ok(same < 5, "draw: seeds 7 and 8 disagree (%ld equal)", same);

	ok(clk_hash(1, "abc", 3) == clk_hash(1, "abc", 3) &&
	    clk_hash(1, "abc", 3) != clk_hash(2, "abc", 3) &&
	    clk_hash(1, "abc", 3) != clk_hash(1, "abd", 3) &&
	    clk_hash(1, "abc", 2) != clk_hash(1, "abc", 3),
	    "hash: depends on seed, bytes and length");
}

/* Run clk_scale() in a child with RFPIPE_TIME_SCALE=val (NULL: unset). */
static double
scale_with(const char *val)
{
	int p[2], status;
	double v = -999;
	pid_t pid;

	if (pipe(p) == -1)
		exit(2);
	if ((pid = fork()) == 0) {
		double s;

		if (val == NULL)
			unsetenv("RFPIPE_TIME_SCALE");
		else
			setenv("RFPIPE_TIME_SCALE", val, 1);
		s = clk_scale();
		if (s > 0 && fabs(clk_real(10) - 10 * s) > 1e-12)
			s = -777;	/* clk_real disagrees with the scale */
		(void)!write(p[1], &s, sizeof(s));
		_exit(0);
	}
	close(p[1]);
	(void)!read(p[0], &v, sizeof(v));
	close(p[0]);
	waitpid(pid, &status, 0);
	return v;
}

static void
test_scale(void)
{
	ok(scale_with(NULL) == 1, "scale: unset is 1");
	ok(scale_with("") == 1, "scale: empty is 1");
	ok(scale_with("0.01") == 0.01, "scale: 0.01, and clk_real scales by it");
	ok(scale_with("1") == 1, "scale: 1 is allowed");
	ok(scale_with("0") == -1, "scale: 0 is invalid");
	ok(scale_with("2") == -1, "scale: 2 is invalid");
	ok(scale_with("-0.5") == -1, "scale: negative is invalid");
	ok(scale_with("fast") == -1, "scale: a word is invalid");
	ok(scale_with("0.5x") == -1, "scale: trailing junk is invalid");
}

static void
dl_ok(const char *s, double now, double want)
{
	double t = -1;
	int rc = clk_deadline(s, now, &t);

	ok(rc == 0 && fabs(t - want) < 1e-6, "deadline \"%s\" = %.0f", s, want);
	if (rc != 0 || fabs(t - want) >= 1e-6)
		printf("#   rc %d, got %.3f\n", rc, t);
}

static void
dl_bad(const char *s)
{
	double t = -4242;
	int rc = clk_deadline(s, 1796014800, &t);

	ok(rc == -1, "deadline rejects \"%s\"", s ? s : "NULL");
	if (rc != -1)
		printf("#   accepted as %.3f\n", t);
}

static void
test_deadline(void)
{
	/* 2026-11-30T05:00:00Z */
	double now = 1796014800;

	setenv("TZ", "UTC", 1);
	tzset();
	dl_ok("+0s", now, now);
	dl_ok("+90", now, now + 90);
	dl_ok("+7h30m", now, now + 27000);
	dl_ok("+250ms", now, now + 0.25);
	dl_ok("@1796018400", now, 1796018400);
	dl_ok("@1796018400.5", now, 1796018400.5);
	dl_ok("06:00", now, now + 3600);
	dl_ok("06:00:30", now, now + 3630);
	dl_ok("05:00", now, now + 86400);	/* now itself: the next day */
	dl_ok("04:59", now, now + 86340);
	dl_ok("00:00", now, now + 68400);
	dl_ok("2026-11-30T06:00Z", now, 1796018400);
	dl_ok("2026-11-30T06:00:30Z", now, 1796018430);
	dl_ok("2026-11-30T06:00", now, 1796018400);
	dl_ok("2026-11-30 06:00:00", now, 1796018400);
	dl_ok("2026-11-30T08:00+02:00", now, 1796018400);
	dl_ok("2026-11-30T01:00-05:00", now, 1796018400);
	dl_ok("2026-11-30T06:00:00+00:00", now, 1796018400);
	/* The last calendar time, and its epoch as rfpipe hands it on. */
	dl_ok("9999-12-31T23:59:59Z", now, 253402300799);
	dl_ok("@253402300799.000", now, 253402300799);
	dl_ok("@253402300800", now, CLK_DEADLINE_MAX);

	dl_bad(NULL);
	dl_bad("");
	dl_bad("tomorrow");
	/* No such day: mktime rolled 2026-02-30 over to 2 March. */
	dl_bad("2026-02-30T06:00Z");
	dl_bad("2026-02-29T06:00Z");
	dl_bad("2026-04-31T00:00Z");
	dl_ok("2028-02-29T06:00Z", now, 1835416800);
	dl_ok("2000-02-29T00:00Z", now, 951782400);
	dl_bad("+");
	dl_bad("+-5s");
	dl_bad("+5x");
	dl_bad("@");
	dl_bad("@-1");
	dl_bad("@soon");
	dl_bad("24:00");
	dl_bad("06:60");
	dl_bad("6:00pm");
	dl_bad("06:00:61");
	dl_bad("2026-13-01T00:00Z");
	dl_bad("2026-11-32T00:00Z");
	dl_bad("2026-11-30T25:00Z");
	dl_bad("2026-11-30");
	dl_bad("2026-11-30T06:00+2");
	dl_bad("2026-11-30T06:00+02:00junk");
	dl_bad("2026-11-30T06:00Zjunk");
	dl_bad("1969-12-31T23:59Z");
	/* Past the bound in any form: refused alike. */
	dl_bad("@253402300801");
	dl_bad("@1e300");
	dl_bad("9999-12-31T23:59:59-14:00");
	dl_bad("+100000000000s");
}

int
main(void)
{
	test_draw();
	test_scale();
	test_deadline();
	return tap_done();
}
