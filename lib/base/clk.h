/*
 * clk: every clock read, sleep and jitter draw.  RFPIPE_TIME_SCALE (a factor
 * in (0, 1]) shrinks every protocol delay uniformly so tests run fast.
 */
#ifndef RFP_CLK_H
#define RFP_CLK_H

#include <stdint.h>

/* Wall clock, seconds since the epoch. */
double	clk_now(void);
/* Monotonic clock, seconds. */
double	clk_mono(void);
/* The time scale factor from RFPIPE_TIME_SCALE; 1 when unset; -1 if invalid. */
double	clk_scale(void);
/* Logical seconds to real seconds (multiplies by clk_scale()). */
double	clk_real(double logical_s);
/* Sleep for s real seconds (restarted on EINTR unless *stop becomes nonzero). */
void	clk_sleep(double s, volatile int *stop);
/* A 64-bit hash of a byte string, with a seed (splitmix-style). */
uint64_t clk_hash(uint64_t seed, const void *p, unsigned long n);
/* A uniform draw in [0, 1) determined only by (seed, key, n). */
double	clk_draw(uint64_t seed, const char *key, long n);


/*
 * A deadline as epoch seconds: "+7h30m" (from now), "06:00" or "06:00:30"
 * (the next such local time), ISO 8601 "2026-11-30T06:00[:00][Z|+hh:mm]"
 * (local time without a zone), or "@1796018400" (epoch).  0 or -1.
 * Any form up to CLK_DEADLINE_MAX (10000-01-01T00:00:00Z): the last of
 * the calendar forms, "9999-12-31T23:59:59Z", is a deadline too.
 */
#define CLK_DEADLINE_MAX	253402300800.0
int	clk_deadline(const char *s, double now, double *out);
/* Epoch seconds as UTC ISO 8601, "2026-12-01T06:00:00Z", into buf. */
void	clk_iso(double epoch, char *buf, unsigned long len);
#endif
