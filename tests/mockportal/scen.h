/*
 * scen: the mock portal's scenario, loaded from YAML (lib/config/ydoc) and checked
 * whole before the server starts.  man/rfp-mockportal.1 documents it.
 */
#ifndef MOCK_SCEN_H
#define MOCK_SCEN_H

#include <stddef.h>
#include <stdint.h>

enum act {
	ACT_STATUS,		/* answer with a status */
	ACT_RESET,		/* close with no reply */
	ACT_HANG,		/* sleep hang_ms, then close with no reply */
	ACT_DROP,		/* commit a submission, then as reset */
	ACT_SLOW		/* sleep slow_ms, then answer 200 */
};

struct entry {
	enum act	 act;
	int		 status;	/* 200-599; 200 for slow */
};

struct script {
	struct entry	*e;
	size_t		 n;		/* >= 1; the last repeats */
};

struct mixent {
	long		 weight;
	struct script	 script;
};

enum ra_kind {
	RA_NONE,		/* no Retry-After */
	RA_SECONDS,		/* delta-seconds: n */
	RA_IMF,			/* IMF-fixdate n seconds from now */
	RA_RFC850,		/* obsolete RFC 850 date n seconds from now */
	RA_ASCTIME,		/* asctime() date n seconds from now */
	RA_VERBATIM		/* text, sent as is */
};

struct retry {
	enum ra_kind	 kind;
	long		 n;
	char		*text;
};

enum body {
	BODY_JSON,
	BODY_PDF,
	BODY_HTML,
	BODY_ENVELOPE,
	BODY_TEXT
};

#define LIM_MAX		16	/* limiters per endpoint */

enum lim_kind {
	LIM_GCRA,		/* nginx limit_req: rate, burst, nodelay */
	LIM_FIXED,		/* fixed windows aligned to the start */
	LIM_SLIDING,		/* sliding log */
	LIM_CONC,		/* requests in flight */
	LIM_QUOTA		/* a number for the whole run */
};

enum lim_per {
	PER_ENDPOINT,		/* one state for the endpoint */
	PER_PATH		/* one state per request path */
};

enum lim_hdrs {
	LH_NONE,
	LH_X,			/* X-RateLimit-*, Reset in delta seconds */
	LH_X_EPOCH,		/* X-RateLimit-*, Reset in epoch seconds */
	LH_IETF,		/* draft-08+: RateLimit-Policy, RateLimit */
	LH_DRAFT7		/* draft-07: RateLimit: limit=, ... */
};

struct lstate;
struct tab;

/* One item of an endpoint's limits; run-time state is limit.c's. */
struct limiter {
	enum lim_kind	 kind;
	char		*name;		/* policy name in ietf headers */
	double		 per_s;		/* gcra */
	long		 burst;
	int		 nodelay;
	long		 limit;		/* windows, quota */
	double		 window_s;	/* windows, logical s */
	int		 count_refused;	/* fixed_window */
	long		 max;		/* concurrency */
	int		 status;	/* of its refusals, 400-599 */
	struct retry	 ra;
	enum lim_per	 per;
	double		 from_s, until_s;	/* when active, logical s */
	enum lim_hdrs	 headers;
	/* Run-time state, guarded by the portal's mutex. */
	struct lstate	*st;		/* PER_ENDPOINT */
	struct tab	*paths;		/* PER_PATH: path -> struct lstate */
};

/* Settings and state shared by every route with the same endpoint key. */
struct endpoint {
	char		*name;
	int		 has_rate;
	double		 per_s;
	long		 burst;
	struct retry	 rate_ra;
	int		 has_outage;
	double		 start_s, end_s;	/* logical s; end_s inf */
	struct entry	 outage;	/* ACT_STATUS or ACT_RESET */
	struct retry	 outage_ra;
	struct limiter	 lims[LIM_MAX];
	size_t		 nlims;
	int		 lim_headers;	/* some limiter sends headers */
	/* Where rate, outage and limits were first given (loading only). */
	const void	*rate_src, *outage_src, *limits_src;
	size_t		 rate_route, outage_route, limits_route;
	/* Run-time state, guarded by the portal's mutex. */
	double		 tat;		/* GCRA, clk_mono() */
	long		 inflight;
	long		 arrivals;	/* requests on all its routes so far */
	struct endpoint	*next;
};

struct route {
	char		*match;		/* fnmatch(3) on the path */
	struct endpoint	*ep;
	char		**methods;	/* NULL: any method */
	size_t		 nmethods;
	struct script	 script;	/* used when nmix == 0 */
	struct mixent	*mix;
	size_t		 nmix;
	long		 mixtotal;
	struct retry	 ra;
	double		 delay_ms, hang_ms, slow_ms;
	long		 stall_every;	/* every this many requests one ... */
	double		 stall_ms;	/* ... is read this much late; 0: none */
	int		 rl_headers;
	enum body	 body;
	char		*blob;		/* pdf/text body */
	size_t		 bloblen;
	int		 submit, dedupe;
	char		*location;	/* Location of its 3xx answers */
};

struct scen {
	uint64_t	 seed;
	int		 has_seed;
	int		 epoch_first;	/* time 0 is the first request */
	struct route	*routes;
	size_t		 nroutes;
	struct endpoint	*eps;
};

/* Load and check path; NULL and "file:line: ..." in err when unusable. */
struct scen *scen_load(const char *path, char *err, size_t errlen);
/* Free s and everything it holds; NULL is fine. */
void	scen_free(struct scen *s);

#endif
