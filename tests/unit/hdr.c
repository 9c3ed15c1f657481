/*
 * Unit tests of lib/hdr: HTTP-dates in the three RFC 9110 forms,
 * Retry-After, and the RateLimit / X-RateLimit headers.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hdr.h"
#include "tests/unit/tap.h"

#define T1994	784111777.0	/* Sun, 06 Nov 1994 08:49:37 GMT */

static void
date_ok(const char *s, double want)
{
	double t = -1;
	int rc = hdr_date(s, &t);

	ok(rc == 0 && t == want, "hdr_date \"%s\" = %.0f", s, want);
	if (rc != 0 || t != want)
		printf("#   rc %d, got %.0f\n", rc, t);
}

static void
date_bad(const char *s)
{
	double t = -12345;
	int rc = hdr_date(s, &t);

	ok(rc == -1 && t == -12345, "hdr_date rejects \"%s\"", s ? s : "NULL");
	if (rc != -1)
		printf("#   accepted as %.0f\n", t);
}

static void
test_dates(void)
{
	date_ok("Sun, 06 Nov 1994 08:49:37 GMT", T1994);
	date_ok("Sunday, 06-Nov-94 08:49:37 GMT", T1994);
	date_ok("Sun Nov  6 08:49:37 1994", T1994);
	date_ok("Sun Nov 06 08:49:37 1994", T1994);
	date_ok("Thu, 01 Jan 1970 00:00:00 GMT", 0);
	date_ok("Thu, 29 Feb 2024 12:00:00 GMT", 1709208000);
	date_ok("Mon, 30 Nov 2026 06:00:00 GMT", 1796018400);
	date_ok("Monday, 30-Nov-26 06:00:00 GMT", 1796018400);
	date_ok("Mon Nov 30 06:00:00 2026", 1796018400);
	date_ok("Fri, 31 Dec 1999 23:59:59 GMT", 946684799);

	date_bad(NULL);
	date_bad("");
	date_bad("soon");
	date_bad("120");
	date_bad("Sun, 06 Nov 1994 08:49:37 UTC");
	date_bad("Sun, 06 Nov 1994 08:49:37");
	date_bad("Sun, 06 Nov 1994 08:49:37 GMT junk");
	date_bad("Sun, 06 Nov 94 08:49:37 GMT");
	date_bad("Sun, 06 Foo 1994 08:49:37 GMT");
	date_bad("Sun, 32 Nov 1994 08:49:37 GMT");
	date_bad("Sun, 00 Nov 1994 08:49:37 GMT");
	date_bad("Sun, 06 Nov 1994 24:00:00 GMT");
	date_bad("Sun, 06 Nov 1994 08:60:00 GMT");
	date_bad("Sun, 06 Nov 1994 08:49:61 GMT");
	date_bad("Sun, 06 Nov 1969 08:49:37 GMT");
	date_bad("06 Nov 1994 08:49:37 GMT");
	date_bad("Sun 06 Nov 1994 08:49:37 GMT");
	date_bad("Sunday, 06-Nov-1994 08:49:37 GMT");
	date_bad("Sunday, 06-Nov-94 08:49:37");
	date_bad("Sun Nov  6 08:49:37 1994 GMT");
	date_bad("Sun Nov  6 08:49:37");
	date_bad("Sun, 06 November 1994 08:49:37 GMT");
	/* Days that no month has must not roll over into the next month. */
	date_bad("Fri, 30 Feb 2024 00:00:00 GMT");
	date_bad("Mon, 29 Feb 2100 00:00:00 GMT");
	date_bad("Mon, 31 Apr 2024 00:00:00 GMT");
}

static void
ra_ok(const char *s, double now, double want)
{
	double d = -99999;
	int rc = hdr_retry_after(s, now, &d);

	ok(rc == 0 && fabs(d - want) < 1e-9, "Retry-After \"%s\" is %.0f s",
	    s, want);
	if (rc != 0 || fabs(d - want) >= 1e-9)
		printf("#   rc %d, got %f\n", rc, d);
}

static void
ra_bad(const char *s)
{
	double d = -99999;

	ok(hdr_retry_after(s, T1994, &d) == -1 && d == -99999,
	    "Retry-After \"%s\" is refused", s ? s : "NULL");
}

static void
test_retry_after(void)
{
	double d = -99999;
	int rc;

	ra_ok("120", 0, 120);
	ra_ok("0", 0, 0);
	ra_ok(" 5", 0, 5);
	ra_ok("5 ", 0, 5);
	ra_ok("Sun, 06 Nov 1994 08:49:47 GMT", T1994, 10);
	ra_ok("Sunday, 06-Nov-94 08:49:47 GMT", T1994, 10);
	ra_ok("Sun Nov  6 08:49:47 1994", T1994, 10);
	/* A date in the past is a negative delay, for the caller to clamp. */
	ra_ok("Sun, 06 Nov 1994 08:49:27 GMT", T1994, -10);
	ra_ok("Sun, 06 Nov 1994 08:49:37 GMT", T1994, 0);

	ra_bad(NULL);
	ra_bad("");
	ra_bad("soon");
	ra_bad("1.5");
	ra_bad("12x");
	ra_bad("1 2");
	ra_bad("+5");
	ra_bad("0x10");
	ra_bad("99999999999999999999");
	ra_bad("Sun, 06 Nov 1994 08:49:47 PST");

	/* delta-seconds is 1*DIGIT: a negative one never means "wait". */
	rc = hdr_retry_after("-5", 0, &d);
	ok(rc == -1 || d <= 0, "Retry-After \"-5\" is never a positive wait");
}

static void
test_ratelimit(void)
{
	struct hdr_ratelimit rl;
	double now = 2000000000.0;

	hdr_ratelimit_init(&rl);
	ok(rl.limit == -1 && rl.remaining == -1 && rl.reset_s == -1 &&
	    rl.window_s == -1, "ratelimit: init marks every field absent");

	ok(hdr_ratelimit_feed(&rl, "X-RateLimit-Limit", "100", now) == 1 &&
	    rl.limit == 100, "ratelimit: X-RateLimit-Limit");
	ok(hdr_ratelimit_feed(&rl, "x-ratelimit-remaining", " 7", now) == 1 &&
	    rl.remaining == 7, "ratelimit: names are case-insensitive");
	ok(hdr_ratelimit_feed(&rl, "X-RateLimit-Reset", "30", now) == 1 &&
	    rl.reset_s == 30, "ratelimit: a small reset is a delta");
	hdr_ratelimit_feed(&rl, "X-RateLimit-Reset", "2000000045", now);
	ok(rl.reset_s == 45, "ratelimit: a large reset is an epoch time");
	hdr_ratelimit_feed(&rl, "X-RateLimit-Reset", "1999999000", now);
	ok(rl.reset_s == 0, "ratelimit: a past epoch reset is 0");
	ok(hdr_ratelimit_feed(&rl, "Content-Type", "text/plain", now) == 0,
	    "ratelimit: other headers are not used");

	hdr_ratelimit_init(&rl);
	hdr_ratelimit_feed(&rl, "RateLimit", "limit=10, remaining=3, reset=5",
	    now);
	ok(rl.limit == 10 && rl.remaining == 3 && rl.reset_s == 5,
	    "ratelimit: RateLimit limit=, remaining=, reset=");

	hdr_ratelimit_init(&rl);
	hdr_ratelimit_feed(&rl, "RateLimit", "\"default\";r=4;t=9", now);
	ok(rl.remaining == 4 && rl.reset_s == 9 && rl.limit == -1,
	    "ratelimit: RateLimit r= and t= (structured form)");
	hdr_ratelimit_feed(&rl, "RateLimit-Policy", "\"default\";q=50;w=60",
	    now);
	ok(rl.limit == 50 && rl.window_s == 60,
	    "ratelimit: RateLimit-Policy q= and w=");

	hdr_ratelimit_init(&rl);
	hdr_ratelimit_feed(&rl, "RateLimit", "limit=10", now);
	hdr_ratelimit_feed(&rl, "RateLimit-Policy", "q=99;w=1", now);
	ok(rl.limit == 10, "ratelimit: a policy does not override a limit");

	hdr_ratelimit_init(&rl);
	hdr_ratelimit_feed(&rl, "RateLimit", "xlimit=5, myreset=3", now);
	ok(rl.limit == -1 && rl.reset_s == -1,
	    "ratelimit: parameters match whole names only");
	hdr_ratelimit_feed(&rl, "X-RateLimit-Remaining", "many", now);
	ok(rl.remaining == -1, "ratelimit: a non-number stays absent");
}

int
main(void)
{
	test_dates();
	test_retry_after();
	test_ratelimit();
	return tap_done();
}
