/*
 * hdr: parsers for the response headers that steer retries and pacing, and
 * the rules for the request headers a manifest sets (rfpipe(7) SECURITY).
 */
#ifndef RFP_HDR_H
#define RFP_HDR_H

/* An HTTP-date in any RFC 9110 form (IMF-fixdate, RFC 850, asctime); 0 or -1. */
int	hdr_date(const char *s, double *epoch);
/*
 * Retry-After: delta-seconds, or an HTTP-date taken relative to now.  The
 * result may be negative (a date in the past); 0 or -1 if unparseable.
 * No wait is longer than HDR_RA_MAX: a date further off, or more digits
 * than a long holds, is that far (a quota's end, not a bad header).
 */
#define HDR_RA_MAX	(366 * 86400.0)
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

/*
 * Whether a manifest may set request header name (to value, vlen bytes;
 * NULL: the name only): NULL, or why not.  Refused: names that are not
 * tokens, framing and hop-by-hop headers (Content-Length,
 * Transfer-Encoding, Host, Connection, Keep-Alive, TE, Trailer, Upgrade,
 * Expect, HTTP2-Settings, Proxy-*), rfp-fetch's own (Idempotency-Key,
 * X-Rfp-Attempt), and values with CR, LF, NUL or another control character.
 */
const char *hdr_request_check(const char *name, const char *value,
	    size_t vlen);
/* 1 when header name carries credentials (Authorization, Cookie, ...). */
int	hdr_is_credential(const char *name);
/*
 * The origin of an http or https URL, "scheme://host:port" with the host in
 * lower case and the port always given, into buf; 0, or -1 when it has none.
 */
int	hdr_origin(const char *url, char *buf, size_t len);
/* Why no URL has an origin (curl's URL parser could not be loaded), or NULL. */
const char *hdr_url_error(void);
/*
 * 1 when the secrets of a request to first may go with one to next: the
 * same origin, or an origin among trusted (URLs or origins), never from
 * https down to http.
 */
int	hdr_may_carry(const char *first, const char *next,
	    char *const *trusted, size_t ntrusted);

#endif
