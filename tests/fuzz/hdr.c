/*
 * Fuzz lib/hdr: the input is a response header block, one "Name: value"
 * per line (a line without ':' is a bare value).  Each value goes through
 * hdr_date and hdr_retry_after, and each name and value through
 * hdr_ratelimit_feed.  A date that parses must be in years 1970 to 9999
 * and read back the same once written as an IMF-fixdate; the rate-limit
 * state must stay "absent" (-1) or non-negative.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/record/hdr.h"
#include "tests/fuzz/fuzz.h"

#define NOW	1700000000.0	/* 2023-11-14T22:13:20Z */
#define Y10K	253402300800.0	/* 10000-01-01T00:00:00Z */

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void
date(const char *v)
{
	double t, again, d;
	struct tm tm;
	time_t tt;
	char buf[64];

	if (hdr_date(v, &t) == 0) {
		/* <=: a leap second at the end of 9999 is the next second. */
		FUZZ_CHECK(t >= 0 && t <= Y10K && t == floor(t),
		    "an HTTP-date is a whole second in 1970-9999");
		tt = (time_t)(t < Y10K ? t : t - 1);
		FUZZ_CHECK(gmtime_r(&tt, &tm) != NULL, "gmtime_r");
		strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		FUZZ_CHECK(hdr_date(buf, &again) == 0 &&
		    again == (double)tt,
		    "a parsed date reads back the same as an IMF-fixdate");
	}
	if (hdr_retry_after(v, NOW, &d) == 0)
		FUZZ_CHECK(isfinite(d) && d > -NOW - 1 && d < Y10K,
		    "a Retry-After delay is finite and bounded");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hdr_ratelimit rl;
	char *s = fuzz_str(data, size), *line, *next, *colon, *v;

	hdr_ratelimit_init(&rl);
	for (line = s; line != NULL; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		line[strcspn(line, "\r")] = '\0';
		if ((colon = strchr(line, ':')) == NULL) {
			date(line);
			continue;
		}
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		date(v);
		(void)hdr_ratelimit_feed(&rl, line, v, NOW);
	}
	FUZZ_CHECK(rl.limit >= -1 && rl.remaining >= -1,
	    "limit and remaining are counts or absent");
	FUZZ_CHECK(rl.reset_s == -1 || rl.reset_s >= 0,
	    "reset is a delay or absent");
	FUZZ_CHECK(rl.window_s == -1 || rl.window_s >= 0,
	    "window is a delay or absent");
	free(s);
	return 0;
}
