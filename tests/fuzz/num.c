/*
 * Fuzz lib/num and clk_deadline: the input, as one NUL-terminated string,
 * goes through num_long, num_double, num_duration, conf_budget and
 * clk_deadline.  num.h promises strict parsing: "the whole string must be
 * the number", so nothing accepted may start with white space, and values
 * stay in the range asked for; a duration is a finite, non-negative number
 * of seconds up to 1e9.
 */
#include <ctype.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/base/num.h"
#include "tests/fuzz/fuzz.h"

#define NOW	1700000000.0	/* 2023-11-14T22:13:20Z */

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* clk_deadline reads local time: make it the same everywhere. */
	setenv("TZ", "UTC", 1);
	tzset();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size);
	int lead = isspace((unsigned char)s[0]);
	struct conf c;
	double d, t;
	long l;

	if (num_long(s, LONG_MIN, LONG_MAX, &l) == 0)
		FUZZ_CHECK(!lead, "num_long: the whole string is the number");
	if (num_long(s, -5, 100, &l) == 0)
		FUZZ_CHECK(l >= -5 && l <= 100, "num_long: in range");
	if (num_double(s, -DBL_MAX, DBL_MAX, &d) == 0)
		FUZZ_CHECK(!lead && isfinite(d),
		    "num_double: the whole string is a finite number");
	if (num_double(s, 0, 1, &d) == 0)
		FUZZ_CHECK(d >= 0 && d <= 1, "num_double: in range");
	if (num_duration(s, &d) == 0)
		FUZZ_CHECK(!lead && isfinite(d) && d >= 0 && d <= 1e9,
		    "num_duration: whole string, 0 to 1e9 seconds");
	conf_init(&c);
	if (conf_budget(&c, s) == 0)
		FUZZ_CHECK((c.budget >= 0 && c.budget <= 1000000000L) ||
		    (c.budget == -1 && c.budget_x >= 0 && c.budget_x <= 1000),
		    "conf_budget: a count or a multiple in range");
	conf_free(&c);
	if (clk_deadline(s, NOW, &t) == 0)
		FUZZ_CHECK(isfinite(t), "clk_deadline: a finite time");
	free(s);
	return 0;
}
