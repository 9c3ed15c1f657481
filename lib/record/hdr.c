/*
 * hdr: Retry-After, HTTP-date and rate-limit header parsing; which request
 * headers a manifest may set, and which follow a redirect.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "lib/record/hdr.h"
#include "lib/base/num.h"
#include "lib/base/x.h"

static const char *months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
static const char *wdays[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri",
	"Sat" };
static const char *wdays_long[] = { "Sunday", "Monday", "Tuesday",
	"Wednesday", "Thursday", "Friday", "Saturday" };

static int
month(const char *s)
{
	int i;

	for (i = 0; i < 12; i++)
		if (strncmp(s, months[i], 3) == 0)
			return i;
	return -1;
}

/* Days since 1970-01-01 of a civil date (no timegm, no TZ dependence). */
static long
days_from_civil(long y, int m, int d)
{
	long era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int
valid(long y, int mon, int d, int h, int mi, int sec)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
		30, 31 };
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return y >= 1970 && y <= 9999 && mon >= 0 && mon < 12 && d >= 1 &&
	    d <= mdays[mon] + (mon == 1 && leap) && h >= 0 && h <= 23 &&
	    mi >= 0 && mi <= 59 && sec >= 0 && sec <= 60;
}

static int
wday_prefix(const char *s, const char **list, size_t *len)
{
	int i;
	size_t n;

	for (i = 0; i < 7; i++) {
		n = strlen(list[i]);
		if (strncmp(s, list[i], n) == 0) {
			*len = n;
			return i;
		}
	}
	return -1;
}

int
hdr_date(const char *s, double *epoch)
{
	char mon[4], gmt[4], tail;
	int d, h, mi, sec, m;
	long y;
	size_t n;

	if (s == NULL)
		return -1;
	while (*s == ' ')
		s++;
	if (wday_prefix(s, wdays_long, &n) >= 0 && s[n] == ',') {
		/* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
		if (sscanf(s + n, ", %2d-%3[A-Za-z]-%2ld %2d:%2d:%2d %3s %c", &d,
		    mon, &y, &h, &mi, &sec, gmt, &tail) != 7 || y < 0)
			return -1;
		y += y < 70 ? 2000 : 1900;
	} else if (wday_prefix(s, wdays, &n) >= 0 && s[n] == ',') {
		/* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
		if (sscanf(s + n, ", %2d %3[A-Za-z] %4ld %2d:%2d:%2d %3s %c", &d,
		    mon, &y, &h, &mi, &sec, gmt, &tail) != 7)
			return -1;
	} else if (wday_prefix(s, wdays, &n) >= 0 && s[n] == ' ') {
		/* asctime: Sun Nov  6 08:49:37 1994 */
		if (sscanf(s + n, " %3[A-Za-z] %2d %2d:%2d:%2d %4ld %c", mon, &d,
		    &h, &mi, &sec, &y, &tail) != 6)
			return -1;
		strcpy(gmt, "GMT");
	} else
		return -1;
	if (strcmp(gmt, "GMT") != 0 || strlen(mon) != 3 ||
	    (m = month(mon)) < 0 || !valid(y, m, d, h, mi, sec))
		return -1;
	*epoch = (double)days_from_civil(y, m + 1, d) * 86400.0 +
	    h * 3600.0 + mi * 60.0 + sec;
	return 0;
}

int
hdr_retry_after(const char *s, double now, double *delay)
{
	double t;
	long v;

	if (s == NULL)
		return -1;
	while (*s == ' ')
		s++;
	if (isdigit((unsigned char)*s) || *s == '-') {
		char buf[32];
		size_t n = strcspn(s, " "), z;

		if (s[n + strspn(s + n, " ")] != '\0')
			return -1;
		/* Leading zeros read as nothing: 0000000000001 is 1 s. */
		if (strspn(s, "0123456789") == n) {
			z = strspn(s, "0");
			z = z == n ? n - 1 : z;
			s += z;
			n -= z;
			if (n > 9) {
				*delay = HDR_RA_MAX;
				return 0;
			}
		}
		if (n >= sizeof(buf))
			return -1;
		memcpy(buf, s, n);
		buf[n] = '\0';
		if (num_long(buf, -999999999L, 999999999L, &v) == -1)
			return -1;
		*delay = v > HDR_RA_MAX ? HDR_RA_MAX : (double)v;
		return 0;
	}
	if (hdr_date(s, &t) == -1)
		return -1;
	*delay = t - now > HDR_RA_MAX ? HDR_RA_MAX : t - now;
	return 0;
}

void
hdr_ratelimit_init(struct hdr_ratelimit *rl)
{
	rl->limit = -1;
	rl->remaining = -1;
	rl->reset_s = -1;
	rl->window_s = -1;
}

/* A non-negative integer at the start of s, or -1. */
static long
leading(const char *s)
{
	long v = 0;
	int any = 0;

	while (*s == ' ')
		s++;
	while (isdigit((unsigned char)*s) && v < 1000000000L) {
		v = v * 10 + (*s++ - '0');
		any = 1;
	}
	/* Longer than any count or epoch second this century: garbage. */
	return any && !isdigit((unsigned char)*s) ? v : -1;
}

/*
 * A reset further off than a year is none: a portal's garbage (a reset of
 * 99999999999 held an endpoint's documents, run after run, until 2286).
 */
#define RESET_MAX	(366 * 86400.0)

/* Find "key=" as a parameter (after start, ',' or ';') and return its value. */
static long
param(const char *v, const char *key)
{
	size_t n = strlen(key);
	const char *p;

	for (p = v; (p = strstr(p, key)) != NULL; p += n) {
		if ((p == v || p[-1] == ' ' || p[-1] == ',' || p[-1] == ';') &&
		    p[n] == '=')
			return leading(p + n + 1);
	}
	return -1;
}

int
hdr_ratelimit_feed(struct hdr_ratelimit *rl, const char *name,
    const char *value, double now)
{
	const char *n;
	double d;
	long v;

	/* X-RateLimit-*, and the draft's first form without the X-. */
	n = strncasecmp(name, "X-", 2) == 0 ? name + 2 : name;

	if (strcasecmp(n, "RateLimit-Limit") == 0) {
		rl->limit = leading(value);
		return 1;
	}
	if (strcasecmp(n, "RateLimit-Remaining") == 0) {
		rl->remaining = leading(value);
		return 1;
	}
	if (strcasecmp(n, "RateLimit-Reset") == 0) {
		if ((v = leading(value)) < 0)
			return 1;
		/* Large values are an epoch timestamp, small ones a delta. */
		d = v > 1000000000L ? (double)v - now : (double)v;
		if (d <= RESET_MAX)
			rl->reset_s = d < 0 ? 0 : d;
		return 1;
	}
	if (strcasecmp(name, "RateLimit") == 0) {
		/* draft-ietf-httpapi-ratelimit-headers, old and new forms */
		if ((v = param(value, "limit")) >= 0)
			rl->limit = v;
		if ((v = param(value, "remaining")) >= 0 ||
		    (v = param(value, "r")) >= 0)
			rl->remaining = v;
		if (((v = param(value, "reset")) >= 0 ||
		    (v = param(value, "t")) >= 0) && v <= RESET_MAX)
			rl->reset_s = (double)v;
		return 1;
	}
	if (strcasecmp(name, "RateLimit-Policy") == 0) {
		if ((v = param(value, "q")) >= 0 && rl->limit < 0)
			rl->limit = v;
		if ((v = param(value, "w")) >= 0)
			rl->window_s = (double)v;
		return 1;
	}
	return 0;
}

/*
 * Framing, hop-by-hop and connection headers belong to the client: set from
 * a manifest they smuggle a second request into the body, or change where
 * and how the request goes.
 */
static const char *hop[] = { "Connection", "Content-Length", "Expect",
	"Host", "HTTP2-Settings", "Keep-Alive", "TE", "Trailer",
	"Transfer-Encoding", "Upgrade", NULL };
/* rfp-fetch's own: the key comes from the record's idempotency_key. */
static const char *own[] = { "Idempotency-Key", "X-Rfp-Attempt", NULL };

/* Headers that carry credentials wherever their value came from. */
static const char *credentials[] = { "Authorization", "Cookie",
	"Proxy-Authorization", NULL };

static int
tchar(int c)
{
	return isalnum(c) || (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

const char *
hdr_request_check(const char *name, const char *value, size_t vlen)
{
	const unsigned char *p;
	size_t i;

	if (*name == '\0')
		return "empty header name";
	for (p = (const unsigned char *)name; *p != '\0'; p++)
		if (*p >= 0x80 || !tchar(*p))
			return "bad header name";
	for (i = 0; hop[i] != NULL; i++)
		if (strcasecmp(name, hop[i]) == 0)
			return "a framing or hop-by-hop header, set by the "
			    "client only";
	if (strncasecmp(name, "Proxy-", 6) == 0)
		return "a proxy header, set by the client only";
	for (i = 0; own[i] != NULL; i++)
		if (strcasecmp(name, own[i]) == 0)
			return "set by rfp-fetch only";
	if (value == NULL)
		return NULL;
	/* Visible characters, space and tab only (RFC 9110, 5.5). */
	for (i = 0, p = (const unsigned char *)value; i < vlen; i++)
		if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
			return p[i] == '\r' || p[i] == '\n' ? "CR or LF in "
			    "the value" : p[i] == 0 ? "NUL in the value" :
			    "a control character in the value";
	return NULL;
}

int
hdr_is_credential(const char *name)
{
	size_t i;

	for (i = 0; credentials[i] != NULL; i++)
		if (strcasecmp(name, credentials[i]) == 0)
			return 1;
	return 0;
}

/*
 * An origin is what curl's own URL parser reads, so that the origin a
 * redirect is checked against is the one curl connects to.  Every stage
 * reads the configuration and its trusted_origins, but only rfp-fetch
 * transfers: the others would pay for loading libcurl and the 35
 * libraries it needs (13 ms a start, measured, where a stage starts in 5)
 * on every start, for a key few configurations have.  So the parser is
 * looked up when an origin is first asked for: first among what the
 * program linked (rfp-fetch's libcurl, whatever its soname: the parser
 * that connects), then in libcurl.so.4.  Without it no URL has an origin,
 * and hdr_url_error says why.
 */
static struct {
	__typeof__(curl_url)		*url;
	__typeof__(curl_url_cleanup)	*cleanup;
	__typeof__(curl_url_set)	*set;
	__typeof__(curl_url_get)	*get;
	__typeof__(curl_free)		*free;
} cu;
static char cu_err[256];
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

/* name from h into *slot (a function pointer), or -1 saying why. */
static int
cu_sym(void *h, const char *name, void *slot, size_t len)
{
	void *p = dlsym(h, name);

	if (p == NULL) {
		snprintf(cu_err, sizeof(cu_err), "libcurl has no %s", name);
		return -1;
	}
	memcpy(slot, &p, len);
	return 0;
}

static void
cu_load(void)
{
	void *h = RTLD_DEFAULT;
	const char *e;

	if (dlsym(h, "curl_url") == NULL &&
	    (h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		e = dlerror();
		snprintf(cu_err, sizeof(cu_err), "libcurl.so.4 (the Debian "
		    "package libcurl4) could not be loaded: %s",
		    e != NULL ? e : "no reason given");
		return;
	}
	if (cu_sym(h, "curl_url_cleanup", &cu.cleanup, sizeof(cu.cleanup)) ||
	    cu_sym(h, "curl_url_set", &cu.set, sizeof(cu.set)) ||
	    cu_sym(h, "curl_url_get", &cu.get, sizeof(cu.get)) ||
	    cu_sym(h, "curl_free", &cu.free, sizeof(cu.free)) ||
	    cu_sym(h, "curl_url", &cu.url, sizeof(cu.url)))
		cu.url = NULL;
}

const char *
hdr_url_error(void)
{
	pthread_once(&cu_once, cu_load);
	return cu.url == NULL ? cu_err : NULL;
}

/* One reading of url's origin (caller frees), or NULL. */
static char *
origin_once(const char *url)
{
	CURLU *u;
	char *scheme = NULL, *host = NULL, *port = NULL, *q, *o = NULL;

	if (hdr_url_error() != NULL || (u = cu.url()) == NULL)
		return NULL;
	if (cu.set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    cu.get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    cu.get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    cu.get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ==
	    CURLUE_OK && (strcmp(scheme, "http") == 0 ||
	    strcmp(scheme, "https") == 0)) {
		/*
		 * A host decoded into a control byte ("b.e%7fxample") names
		 * no server, and its origin would not parse again: none.  Nor
		 * does one that keeps a '%' (curl decodes "%44" and keeps
		 * "%%"): lowercased, a "%D4" left in it reads as a byte the
		 * next time, and the origin is not its own origin.
		 */
		for (q = host; *q != '\0'; q++) {
			if ((unsigned char)*q <= 0x20 || *q == 0x7f || *q == '%')
				goto out;
			*q = (char)tolower((unsigned char)*q);
		}
		o = xasprintf("%s://%s:%s", scheme, host, port);
	}
out:
	cu.free(scheme);
	cu.free(host);
	cu.free(port);
	cu.cleanup(u);
	return o;
}

/*
 * The origin of url (caller frees), or NULL: hdr_origin without a limit.
 * curl decodes a host ("%32" is "2") after it has written numeric hosts
 * out ("2" is 0.0.0.2), so one reading can still change when read again:
 * the origin is the reading that reads back as itself, and a URL whose
 * readings do not settle in three has none.
 */
static char *
origin_of(const char *url)
{
	char *o = origin_once(url), *again;
	int i;

	for (i = 0; o != NULL && i < 2; i++) {
		again = origin_once(o);
		if (again != NULL && strcmp(again, o) == 0) {
			free(again);
			return o;
		}
		free(o);
		o = again;
	}
	free(o);
	return NULL;
}

int
hdr_origin(const char *url, char *buf, size_t len)
{
	char *o = origin_of(url);
	int rc = o != NULL && strlen(o) < len ? 0 : -1;

	if (rc == 0)
		memcpy(buf, o, strlen(o) + 1);
	free(o);
	return rc;
}

int
hdr_may_carry(const char *first, const char *next, char *const *trusted,
    size_t ntrusted)
{
	char *a = origin_of(first), *b = origin_of(next), *t;
	size_t i;
	int ok = 0;

	if (a == NULL || b == NULL)
		goto out;
	if (strcmp(a, b) == 0) {
		ok = 1;
		goto out;
	}
	/* Never from https down to http, trusted or not. */
	if (strncmp(a, "https:", 6) == 0 && strncmp(b, "http:", 5) == 0)
		goto out;
	for (i = 0; i < ntrusted && !ok; i++) {
		t = origin_of(trusted[i]);
		ok = t != NULL && strcmp(t, b) == 0;
		free(t);
	}
out:
	free(a);
	free(b);
	return ok;
}
