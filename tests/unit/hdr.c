/*
 * Unit tests of lib/hdr: HTTP-dates in the three RFC 9110 forms,
 * Retry-After, the RateLimit / X-RateLimit headers, and the rules for
 * request headers: which a manifest may set, which follow a redirect.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/record/hdr.h"
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
	/*
	 * Further off than a year, or more digits than a long reads: a
	 * quota's end, a year away (the fetch gate held no endpoint for
	 * 9999999999 while rfp-classify read it as past a day; a date in
	 * 9999 held one 8,000 years).
	 */
	ra_ok("1000000000", 0, HDR_RA_MAX);
	ra_ok("99999999999999999999", 0, HDR_RA_MAX);
	ra_ok(" 99999999999999999999999999999999999999 ", 0, HDR_RA_MAX);
	ra_ok("31622400", 0, HDR_RA_MAX);
	ra_ok("31622399", 0, 31622399);
	ra_ok("0000000000001", 0, 1);
	ra_ok("00000000000000000000000000000000000000000000", 0, 0);
	ra_ok("000000000099999999999", 0, HDR_RA_MAX);
	ra_ok("Fri, 31 Dec 9999 23:59:59 GMT", T1994, HDR_RA_MAX);

	ra_bad(NULL);
	ra_bad("");
	ra_bad("soon");
	ra_bad("1.5");
	ra_bad("12x");
	ra_bad("1 2");
	ra_bad("+5");
	ra_bad("0x10");
	ra_bad("-99999999999999999999");
	ra_bad("99999999999999999999x");
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
	hdr_ratelimit_init(&rl);
	hdr_ratelimit_feed(&rl, "X-RateLimit-Reset", "99999999999", now);
	ok(rl.reset_s == -1, "ratelimit: a reset of more digits than any "
	    "epoch second this century is none (%g)", rl.reset_s);
	hdr_ratelimit_feed(&rl, "X-RateLimit-Reset", "9999999999", now);
	ok(rl.reset_s == -1, "ratelimit: an epoch reset centuries off is none "
	    "(%g)", rl.reset_s);
	hdr_ratelimit_feed(&rl, "X-RateLimit-Reset", "86400", now);
	ok(rl.reset_s == 86400, "ratelimit: a day's reset is kept");
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
	hdr_ratelimit_feed(&rl, "RateLimit", "remaining=0, "
	    "reset=99999999", now);
	ok(rl.reset_s == 9, "ratelimit: RateLimit's reset of three years is "
	    "none (%g)", rl.reset_s);
	hdr_ratelimit_feed(&rl, "RateLimit-Policy", "\"default\";q=50;w=60",
	    now);
	ok(rl.limit == 50 && rl.window_s == 60,
	    "ratelimit: RateLimit-Policy q= and w=");

	hdr_ratelimit_init(&rl);
	hdr_ratelimit_feed(&rl, "RateLimit", "limit=10", now);
	hdr_ratelimit_feed(&rl, "RateLimit-Policy", "q=99;w=1", now);
	ok(rl.limit == 10, "ratelimit: a policy does not override a limit");

	/* The draft's first form: three fields, the reset a delta. */
	hdr_ratelimit_init(&rl);
	ok(hdr_ratelimit_feed(&rl, "RateLimit-Limit", "60", now) == 1 &&
	    hdr_ratelimit_feed(&rl, "ratelimit-remaining", "0", now) == 1 &&
	    hdr_ratelimit_feed(&rl, "RateLimit-Reset", "50", now) == 1 &&
	    rl.limit == 60 && rl.remaining == 0 && rl.reset_s == 50,
	    "ratelimit: RateLimit-Limit, -Remaining, -Reset");

	hdr_ratelimit_init(&rl);
	hdr_ratelimit_feed(&rl, "RateLimit", "xlimit=5, myreset=3", now);
	ok(rl.limit == -1 && rl.reset_s == -1,
	    "ratelimit: parameters match whole names only");
	hdr_ratelimit_feed(&rl, "X-RateLimit-Remaining", "many", now);
	ok(rl.remaining == -1, "ratelimit: a non-number stays absent");
}

/* Which headers a manifest may set (rfpipe(7) SECURITY). */
static void
test_request_headers(void)
{
	static const struct {
		const char *name, *value;
		size_t vlen;
		const char *why;	/* NULL: allowed */
	} t[] = {
		{ "Accept", "application/json", 16, NULL },
		{ "Authorization", "Bearer ${TOKEN}", 15, NULL },
		{ "X-Api-Key", "k", 1, NULL },
		{ "Content-Type", "text/plain", 10, NULL },
		{ "x-tab", "a\tb", 3, NULL },
		{ "Content-Length", "2", 1, "a framing or hop-by-hop header, "
		    "set by the client only" },
		{ "content-length", "2", 1, "a framing or hop-by-hop header, "
		    "set by the client only" },
		{ "Transfer-Encoding", "chunked", 7, "a framing or hop-by-hop "
		    "header, set by the client only" },
		{ "Host", "evil", 4, "a framing or hop-by-hop header, set by "
		    "the client only" },
		{ "Connection", "close", 5, "a framing or hop-by-hop header, "
		    "set by the client only" },
		{ "Keep-Alive", "1", 1, "a framing or hop-by-hop header, set "
		    "by the client only" },
		{ "TE", "trailers", 8, "a framing or hop-by-hop header, set by "
		    "the client only" },
		{ "Trailer", "X", 1, "a framing or hop-by-hop header, set by "
		    "the client only" },
		{ "Upgrade", "h2c", 3, "a framing or hop-by-hop header, set by "
		    "the client only" },
		{ "Expect", "100-continue", 12, "a framing or hop-by-hop "
		    "header, set by the client only" },
		{ "HTTP2-Settings", "x", 1, "a framing or hop-by-hop header, "
		    "set by the client only" },
		{ "Proxy-Authorization", "x", 1, "a proxy header, set by the "
		    "client only" },
		{ "proxy-connection", "x", 1, "a proxy header, set by the "
		    "client only" },
		{ "Idempotency-Key", "k", 1, "set by rfp-fetch only" },
		{ "X-Rfp-Attempt", "9", 1, "set by rfp-fetch only" },
		{ "", "x", 1, "empty header name" },
		{ "X:Y", "x", 1, "bad header name" },
		{ "X Y", "x", 1, "bad header name" },
		{ "X\r\nY", "x", 1, "bad header name" },
		{ "X(Y)", "x", 1, "bad header name" },
		{ "X\xc3\xa9", "x", 1, "bad header name" },
		{ "X", "a\r\nEvil: 1", 11, "CR or LF in the value" },
		{ "X", "a\nb", 3, "CR or LF in the value" },
		{ "X", "a\0b", 3, "NUL in the value" },
		{ "X", "a\x01", 2, "a control character in the value" },
		{ "X", "a\x7f", 2, "a control character in the value" },
	};
	size_t i;
	char name[120];

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(name, sizeof(name), "hdr_request_check table row %zu",
		    i + 1);
		is_str(hdr_request_check(t[i].name, t[i].value, t[i].vlen),
		    t[i].why, name);
	}
	ok(hdr_is_credential("authorization") && hdr_is_credential("Cookie")
	    && hdr_is_credential("Proxy-Authorization") &&
	    !hdr_is_credential("X-Api-Key"), "hdr_is_credential");
}

/* Origins, and what may follow a redirect to one. */
static void
test_origins(void)
{
	static const struct {
		const char *url, *origin;	/* NULL: none */
	} o[] = {
		{ "http://Example.ORG/a?b", "http://example.org:80" },
		{ "https://example.org", "https://example.org:443" },
		{ "https://user:pw@example.org:8443/x",
		    "https://example.org:8443" },
		{ "http://127.0.0.1:9/", "http://127.0.0.1:9" },
		{ "http://[::1]:9/", "http://[::1]:9" },
		{ "ftp://example.org/", NULL },
		{ "/relative", NULL },
		/* A host that decodes into a control byte names no server. */
		{ "https://b.e%7fxample/", NULL },
		{ "https://b.e%0axample/", NULL },
		/*
		 * A '%' left in a host (curl decodes "%44" to 'D', and keeps
		 * "%%"): lowercased, "%D4" read again as a byte, so the origin
		 * was not its own origin.
		 */
		{ "https://aTEx%%%%444%%%%%amp", NULL },
		{ "https://a%25b.example/", NULL },
		/*
		 * curl decodes "%32" to "2" after it writes numeric hosts out:
		 * the origin is the one "http://2:80" reads as, where curl
		 * connects, and the same as the written-out host's.
		 */
		{ "http:/%32", "http://0.0.0.2:80" },
		{ "http://%31%32%37.1:8/x", "http://127.0.0.1:8" },
	};
	static const struct {
		const char *first, *next;
		int trusted, carry;
	} r[] = {
		/* Same origin, whatever the path. */
		{ "https://a.example/x", "https://a.example/y", 0, 1 },
		{ "https://a.example/x", "https://A.EXAMPLE:443/y", 0, 1 },
		/* Another host, port or scheme is another origin. */
		{ "https://a.example/x", "https://b.example/x", 0, 0 },
		{ "http://127.0.0.1:80/x", "http://localhost:80/x", 0, 0 },
		{ "http://127.0.0.1:8080/", "http://127.0.0.1:8081/", 0, 0 },
		{ "http://a.example/", "https://a.example/", 0, 0 },
		/* https to http: never, not even to a trusted origin. */
		{ "https://a.example/", "http://a.example/", 0, 0 },
		{ "https://a.example/", "http://b.example/", 1, 0 },
		{ "https://a.example/", "http://c.example:81/", 1, 0 },
		/* A trusted origin may have them. */
		{ "https://a.example/", "https://b.example/z", 1, 1 },
		{ "http://a.example/", "http://b.example/z", 1, 0 },
		{ "http://a.example/", "http://c.example:81/z", 1, 1 },
		{ "https://a.example/", "ftp://a.example/", 0, 0 },
	};
	char *trusted[] = { "https://b.example", "http://c.example:81/" };
	char buf[256], name[200];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(o) / sizeof(o[0]); i++) {
		rc = hdr_origin(o[i].url, buf, sizeof(buf));
		snprintf(name, sizeof(name), "hdr_origin \"%s\"", o[i].url);
		is_str(rc == 0 ? buf : NULL, o[i].origin, name);
	}
	for (i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		ok(hdr_may_carry(r[i].first, r[i].next, trusted, r[i].trusted ?
		    2 : 0) == r[i].carry, "hdr_may_carry %s -> %s%s: %d",
		    r[i].first, r[i].next, r[i].trusted ? " (trusted)" : "",
		    r[i].carry);
	ok(hdr_may_carry("http://a.example/", "http://c.example:81/q",
	    trusted, 2), "a trusted origin given as a URL");
}

int
main(void)
{
	test_dates();
	test_retry_after();
	test_ratelimit();
	test_request_headers();
	test_origins();
	return tap_done();
}
