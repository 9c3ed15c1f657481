/* hdr: parsers for the response headers that steer retries and pacing. */
#ifndef RFP_HDR_H
#define RFP_HDR_H

/* An HTTP-date in any RFC 9110 form (IMF-fixdate, RFC 850, asctime); 0 or -1. */
int	hdr_date(const char *s, double *epoch);
/*
 * Retry-After: delta-seconds, or an HTTP-date taken relative to now.  The
 * result may be negative (a date in the past); 0 or -1 if unparseable.
 */
int	hdr_retry_after(const char *s, double now, double *delay);

struct hdr_ratelimit {
	long	limit;		/* -1 when absent */
	long	remaining;	/* -1 when absent */
	double	reset_s;	/* seconds until the window resets; -1 absent */
	double	window_s;	/* policy window; -1 when absent */
};
/* Reset all fields to absent. */
void	hdr_ratelimit_init(struct hdr_ratelimit *rl);
/*
 * Feed one header (name, value); understands RateLimit, RateLimit-Policy and
 * X-RateLimit-Limit/-Remaining/-Reset.  Returns 1 if it used the header.
 */
int	hdr_ratelimit_feed(struct hdr_ratelimit *rl, const char *name,
	    const char *value, double now);

#endif
