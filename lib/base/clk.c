/* clk: clocks, scaled sleeps and reproducible jitter draws. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base/clk.h"
#include "lib/base/num.h"

double
clk_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double
clk_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double
clk_scale(void)
{
	static double scale;
	const char *s;
	double v;

	if (scale != 0)
		return scale;
	s = getenv("RFPIPE_TIME_SCALE");
	if (s == NULL || *s == '\0')
		scale = 1;
	else if (num_double(s, 1e-6, 1, &v) == 0)
		scale = v;
	else
		scale = -1;
	return scale;
}

double
clk_real(double logical_s)
{
	double s = clk_scale();

	return logical_s * (s > 0 ? s : 1);
}

void
clk_sleep(double s, volatile int *stop)
{
	struct timespec ts, rem;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &rem) == -1 && errno == EINTR) {
		if (stop != NULL && *stop)
			return;
		ts = rem;
	}
}

static uint64_t
mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t
clk_hash(uint64_t seed, const void *p, unsigned long n)
{
	const unsigned char *b = p;
	uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ULL);
	unsigned long i;

	for (i = 0; i < n; i++)
		h = mix64(h ^ (b[i] + 0x9e3779b97f4a7c15ULL * (i + 1)));
	return mix64(h ^ n);
}

double
clk_draw(uint64_t seed, const char *key, long n)
{
	uint64_t h;

	h = clk_hash(seed, key, strlen(key));
	h = mix64(h ^ mix64((uint64_t)n + 0x632be59bd9b4e019ULL));
	return (double)(h >> 11) / 9007199254740992.0;
}

/* Days in month mo (1 to 12) of year y: 2026-02-30 is no date. */
static int
mdays(int y, int mo)
{
	static const int d[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30,
	    31 };

	return d[mo - 1] + (mo == 2 && y % 4 == 0 && (y % 100 != 0 ||
	    y % 400 == 0));
}

static int
deadline_parse(const char *s, double now, double *out)
{
	struct tm tm, lt;
	time_t t;
	char tail[16];
	int h, mi, sec = 0, n = 0, zh, zm, y, mo, d;
	double v;

	if (s == NULL || *s == '\0')
		return -1;
	if (*s == '+')
		return num_duration(s + 1, &v) == -1 ? -1 :
		    (*out = now + v, 0);
	if (*s == '@')
		return num_double(s + 1, 0, CLK_DEADLINE_MAX, out);
	if (strlen(s) <= 8 && strchr(s, '-') == NULL && ((sscanf(s,
	    "%2d:%2d%n", &h, &mi, &n) == 2 && s[n] == '\0') ||
	    (sscanf(s, "%2d:%2d:%2d%n", &h, &mi, &sec, &n) == 3 &&
	    s[n] == '\0'))) {
		if (h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59)
			return -1;
		t = (time_t)now;
		localtime_r(&t, &lt);
		lt.tm_hour = h;
		lt.tm_min = mi;
		lt.tm_sec = sec;
		lt.tm_isdst = -1;
		if ((double)(t = mktime(&lt)) <= now) {
			lt.tm_mday++;
			lt.tm_isdst = -1;
			t = mktime(&lt);
		}
		*out = (double)t;
		return 0;
	}
	n = 0;
	if (sscanf(s, "%4d-%2d-%2d%*1[T ]%2d:%2d%n", &y, &mo, &d, &h, &mi,
	    &n) != 5 || n == 0)
		return -1;
	s += n;
	if (*s == ':') {
		n = 0;
		if (sscanf(s, ":%2d%n", &sec, &n) != 1)
			return -1;
		s += n;
	}
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays(y, mo) ||
	    h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	if (*s == '\0') {
		tm.tm_isdst = -1;
		*out = (double)mktime(&tm);
		return 0;
	}
	if (strcmp(s, "Z") == 0) {
		*out = (double)timegm(&tm);
		return 0;
	}
	if ((*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d%15s", &zh, &zm,
	    tail) == 2 && strlen(s) == 6 && s[1] != '-' && s[4] != '-' &&
	    zh >= 0 && zh <= 14 && zm >= 0 && zm <= 59) {
		*out = (double)timegm(&tm) - (*s == '+' ? 1 : -1) *
		    (zh * 3600.0 + zm * 60.0);
		return 0;
	}
	return -1;
}

/*
 * Every form within one bound: rfpipe reads the deadline as typed and
 * hands the stages its epoch ("@..."), which must read back; a time one
 * form took and another refused failed the run after --check passed it,
 * naming a value never typed.
 */
int
clk_deadline(const char *s, double now, double *out)
{
	double t;

	if (deadline_parse(s, now, &t) == -1 || !(t >= 0) ||
	    t > CLK_DEADLINE_MAX)
		return -1;
	*out = t;
	return 0;
}

void
clk_iso(double epoch, char *buf, unsigned long len)
{
	time_t t = (time_t)epoch;
	struct tm tm;

	if (len == 0)
		return;
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "@%.0f", epoch);
}
