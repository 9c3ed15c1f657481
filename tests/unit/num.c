/*
 * Unit tests of lib/num: the whole string must be the number, ranges are
 * enforced, durations take units.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/num.h"
#include "tests/unit/tap.h"

/* s with control characters shown as '?', for test names. */
static const char *
show(const char *s)
{
	static char buf[64];
	size_t i;

	if (s == NULL)
		return "NULL";
	for (i = 0; s[i] != '\0' && i < sizeof(buf) - 1; i++)
		buf[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
	buf[i] = '\0';
	return buf;
}

static void
long_ok(const char *s, long min, long max, long want)
{
	long v = -424242;
	int rc = num_long(s, min, max, &v);

	ok(rc == 0 && v == want, "num_long \"%s\" = %ld", s, want);
	if (rc != 0 || v != want)
		printf("#   rc %d, got %ld\n", rc, v);
}

static void
long_bad(const char *s, long min, long max, int err)
{
	long v = -424242;
	int rc;

	errno = 0;
	rc = num_long(s, min, max, &v);
	ok(rc == -1 && v == -424242 && errno == err,
	    "num_long rejects \"%s\" in [%ld, %ld] (%s)", show(s), min,
	    max, err == EINVAL ? "EINVAL" : "ERANGE");
	if (rc != -1 || errno != err)
		printf("#   rc %d, v %ld, errno %d\n", rc, v, errno);
}

static void
test_long(void)
{
	long_ok("0", 0, 10, 0);
	long_ok("10", 0, 10, 10);
	long_ok("-3", -5, 5, -3);
	long_ok("007", 0, 10, 7);
	long_ok("9223372036854775807", 0, LONG_MAX, LONG_MAX);

	long_bad(NULL, 0, 10, EINVAL);
	long_bad("", 0, 10, EINVAL);
	long_bad(" 1", 0, 10, EINVAL);
	long_bad("\t1", 0, 10, EINVAL);
	long_bad("1 ", 0, 10, EINVAL);
	long_bad("1x", 0, 10, EINVAL);
	long_bad("x", 0, 10, EINVAL);
	long_bad("1.0", 0, 10, EINVAL);
	long_bad("1e3", 0, 10000, EINVAL);
	long_bad("0x10", 0, 100, EINVAL);
	long_bad("1\n", 0, 10, EINVAL);
	long_bad("-", 0, 10, EINVAL);
	long_bad("11", 0, 10, ERANGE);
	long_bad("-1", 0, 10, ERANGE);
	long_bad("0", 1, 1000, ERANGE);
	long_bad("9223372036854775808", 0, LONG_MAX, ERANGE);
	long_bad("-9223372036854775809", LONG_MIN, 0, ERANGE);
	long_bad("99999999999999999999999", 0, LONG_MAX, ERANGE);
}

static void
double_ok(const char *s, double want)
{
	double v = -4242;
	int rc = num_double(s, -1e9, 1e9, &v);

	ok(rc == 0 && v == want, "num_double \"%s\" = %g", s, want);
}

static void
double_bad(const char *s, double min, double max)
{
	double v = -4242;

	ok(num_double(s, min, max, &v) == -1 && v == -4242,
	    "num_double rejects \"%s\"", show(s));
}

static void
test_double(void)
{
	double_ok("1.5", 1.5);
	double_ok("-0.25", -0.25);
	double_ok("3", 3);
	double_ok(".5", 0.5);
	double_ok("1e3", 1000);

	double_bad(NULL, 0, 10);
	double_bad("", 0, 10);
	double_bad(" 1", 0, 10);
	double_bad("1 ", 0, 10);
	double_bad("1.5x", 0, 10);
	double_bad("nan", -1e300, 1e300);
	double_bad("NaN", -1e300, 1e300);
	double_bad("inf", -1e300, 1e300);
	double_bad("-Infinity", -1e300, 1e300);
	double_bad("0x1p3", 0, 100);
	double_bad("1e400", -1e300, 1e300);
	double_bad("11", 0, 10);
	double_bad("-0.001", 0, 10);
	double_bad("1,5", 0, 10);
}

static void
dur_ok(const char *s, double want)
{
	double v = -4242;
	int rc = num_duration(s, &v);

	ok(rc == 0 && fabs(v - want) < 1e-9, "num_duration \"%s\" = %g s", s,
	    want);
	if (rc != 0 || fabs(v - want) >= 1e-9)
		printf("#   rc %d, got %g\n", rc, v);
}

static void
dur_bad(const char *s)
{
	double v = -4242;
	int rc = num_duration(s, &v);

	ok(rc == -1 && v == -4242, "num_duration rejects \"%s\"", show(s));
	if (rc != -1)
		printf("#   accepted as %g\n", v);
}

static void
test_duration(void)
{
	dur_ok("90", 90);
	dur_ok("1.5", 1.5);
	dur_ok("0", 0);
	dur_ok("250ms", 0.25);
	dur_ok("2s", 2);
	dur_ok("3m", 180);
	dur_ok("1h", 3600);
	dur_ok("1d", 86400);
	dur_ok("1h30m", 5400);
	dur_ok("1h30m15s", 5415);
	dur_ok("1.5h", 5400);
	dur_ok("2m500ms", 120.5);

	dur_bad(NULL);
	dur_bad("");
	dur_bad("-1");
	dur_bad("-1s");
	dur_bad("+5s");
	dur_bad(" 5s");
	dur_bad("5s ");
	dur_bad("1 h");
	dur_bad("h");
	dur_bad("ms");
	dur_bad("5x");
	dur_bad("5sec");
	dur_bad("1h30");
	dur_bad("1e3s");
	dur_bad("inf");
	dur_bad("nan");
	dur_bad("0x10s");
	dur_bad("2000000000");
	dur_bad("99999999h");
}

int
main(void)
{
	test_long();
	test_double();
	test_duration();
	return tap_done();
}
