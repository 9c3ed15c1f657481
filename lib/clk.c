/* clk: clocks, scaled sleeps and reproducible jitter draws. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clk.h"
#include "lib/num.h"

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
