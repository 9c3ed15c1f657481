/* scen: load and check a mock portal scenario (YAML via lib/config/ydoc). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/config/ydoc.h"
#include "cmd/msg.h"
#include "lib/base/num.h"
#include "lib/base/x.h"
#include "limit.h"
#include "scen.h"

#define MS_MAX		86400000.0	/* a day */
#define BODY_MAX	(256L * 1024 * 1024)
#define RA_MAX		1000000000L
#define RA_TEXT_MAX	200

struct ld {
	const struct ydoc *c;
	char		*err;
	size_t		 errlen;
};

static const char *top_keys[] = { "epoch", "routes", "seed", NULL };
static const char *route_keys[] = {
	"body", "body_bytes", "body_file", "dedupe", "delay_ms", "endpoint", "hang_ms",
	"limits", "location", "match", "methods", "mix", "outage", "rate",
	"ratelimit_headers",
	"retry_after", "script", "slow_ms", "stall_every", "stall_ms", "submit",
	NULL
};
static const char *mix_keys[] = { "script", "weight", NULL };
static const char *rate_keys[] = { "burst", "per_s", "retry_after", NULL };
static const char *outage_keys[] = {
	"end_s", "retry_after", "start_s", "status", NULL
};
static const char *lim_keys[] = {
	"burst", "count_refused", "from_s", "headers", "kind", "limit", "max",
	"name", "nodelay", "per", "per_s", "retry_after", "status", "until_s",
	"window_s", NULL
};
/* The keys only some kinds take, and the kinds that take them. */
static const struct {
	const char	*key;
	unsigned	 kinds;		/* 1 << enum lim_kind */
} lim_kind_keys[] = {
	{ "burst", 1 << LIM_GCRA }, { "nodelay", 1 << LIM_GCRA },
	{ "per_s", 1 << LIM_GCRA },
	{ "count_refused", 1 << LIM_FIXED },
	{ "limit", 1 << LIM_FIXED | 1 << LIM_SLIDING | 1 << LIM_QUOTA },
	{ "window_s", 1 << LIM_FIXED | 1 << LIM_SLIDING },
	{ "max", 1 << LIM_CONC }
};
static const char *lim_hdr_forms[] = {
	[LH_NONE] = "none", [LH_X] = "x", [LH_X_EPOCH] = "x-epoch",
	[LH_IETF] = "ietf", [LH_DRAFT7] = "draft7"
};
static const char *body_names[] = {
	[BODY_JSON] = "json", [BODY_PDF] = "pdf", [BODY_HTML] = "html",
	[BODY_ENVELOPE] = "envelope", [BODY_TEXT] = "text"
};

/* The first line of a key under prefix kp, or 0. */
static long
first_line_under(const struct ld *ld, const char *kp)
{
	const char *key;
	json_t *v;
	size_t n = strlen(kp);
	long line, best = 0;

	json_object_foreach(ld->c->lines, key, v) {
		if (strncmp(key, kp, n) != 0 || key[n] != '.')
			continue;
		line = (long)json_integer_value(v);
		if (best == 0 || line < best)
			best = line;
	}
	return best;
}

/*
 * The line of kp.  List items have none of their own: use the first key
 * inside the item, else the nearest ancestor's line.
 */
static long
line_of(const struct ld *ld, const char *kp)
{
	char *p, *s = xstrdup(kp);
	long line;

	while ((line = ydoc_line(ld->c, s)) == 0 &&
	    (line = first_line_under(ld, s)) == 0 &&
	    (p = strrchr(s, '.')) != NULL)
		*p = '\0';
	free(s);
	return line;
}

static void
where(const struct ld *ld, const char *kp, char *buf, size_t size)
{
	long line = line_of(ld, kp);

	if (line > 0)
		snprintf(buf, size, "%s:%ld", ld->c->path, line);
	else
		snprintf(buf, size, "%s", ld->c->path);
}

/* "file:line: key "kp": what"; always -1. */
static int
kerr(struct ld *ld, const char *kp, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
kerr(struct ld *ld, const char *kp, const char *fmt, ...)
{
	char loc[512], what[512];
	va_list ap;

	va_start(ap, fmt);
	msg_vfmt(what, sizeof(what), fmt, ap);
	va_end(ap);
	where(ld, kp, loc, sizeof(loc));
	snprintf(ld->err, ld->errlen, "%s: key \"%s\": %s", loc, kp, what);
	return -1;
}

static char *
kpath(const char *prefix, const char *key)
{
	return *prefix ? xasprintf("%s.%s", prefix, key) : xstrdup(key);
}

static int
check_keys(struct ld *ld, const json_t *obj, const char *prefix,
    const char **allowed)
{
	const char *key;
	json_t *v;
	char loc[512], *kp;
	size_t i;

	json_object_foreach((json_t *)obj, key, v) {
		for (i = 0; allowed[i] != NULL; i++)
			if (strcmp(key, allowed[i]) == 0)
				break;
		if (allowed[i] != NULL)
			continue;
		kp = kpath(prefix, key);
		where(ld, kp, loc, sizeof(loc));
		snprintf(ld->err, ld->errlen, "%s: unknown key \"%s\"", loc,
		    kp);
		free(kp);
		return -1;
	}
	return 0;
}

/* An optional member of obj; its key path goes to *kp (caller frees). */
static json_t *
member(const json_t *obj, const char *prefix, const char *key, char **kp)
{
	free(*kp);
	*kp = kpath(prefix, key);
	return json_object_get(obj, key);
}

static int
get_num(struct ld *ld, const json_t *obj, const char *prefix,
    const char *key, double min, double max, double *out)
{
	char *kp = NULL;
	json_t *v;
	int rc = 0;

	if ((v = member(obj, prefix, key, &kp)) != NULL) {
		if (!json_is_number(v) || json_number_value(v) < min ||
		    json_number_value(v) > max)
			rc = kerr(ld, kp, "expected a number from %.15g to "
			    "%.15g", min, max);
		else
			*out = json_number_value(v);
	}
	free(kp);
	return rc;
}

static int
get_int(struct ld *ld, const json_t *obj, const char *prefix,
    const char *key, long min, long max, long *out)
{
	char *kp = NULL;
	json_t *v;
	int rc = 0;

	if ((v = member(obj, prefix, key, &kp)) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < min ||
		    json_integer_value(v) > max)
			rc = kerr(ld, kp, "expected an integer from %ld to %ld",
			    min, max);
		else
			*out = (long)json_integer_value(v);
	}
	free(kp);
	return rc;
}

static int
get_bool(struct ld *ld, const json_t *obj, const char *prefix,
    const char *key, int *out)
{
	char *kp = NULL;
	json_t *v;
	int rc = 0;

	if ((v = member(obj, prefix, key, &kp)) != NULL) {
		if (!json_is_boolean(v))
			rc = kerr(ld, kp, "expected true or false");
		else
			*out = json_is_true(v);
	}
	free(kp);
	return rc;
}

static int
parse_entry(struct ld *ld, const json_t *v, const char *kp, struct entry *e)
{
	static const struct {
		const char	*name;
		enum act	 act;
	} acts[] = {
		{ "drop", ACT_DROP }, { "hang", ACT_HANG },
		{ "reset", ACT_RESET }, { "slow", ACT_SLOW }
	};
	size_t i;

	if (json_is_integer(v) && json_integer_value(v) >= 200 &&
	    json_integer_value(v) <= 599) {
		e->act = ACT_STATUS;
		e->status = (int)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v))
		for (i = 0; i < sizeof(acts) / sizeof(acts[0]); i++)
			if (strcmp(json_string_value(v), acts[i].name) == 0) {
				e->act = acts[i].act;
				e->status = e->act == ACT_SLOW ? 200 : 0;
				return 0;
			}
	return kerr(ld, kp, "expected a status from 200 to 599 or \"reset\", "
	    "\"hang\", \"drop\" or \"slow\"");
}

static int
parse_script(struct ld *ld, const json_t *v, const char *kp,
    struct script *s)
{
	char *ekp;
	size_t i;
	int rc;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return kerr(ld, kp, "expected a non-empty list");
	s->n = json_array_size(v);
	s->e = xcalloc(s->n, sizeof(*s->e));
	for (i = 0; i < s->n; i++) {
		ekp = xasprintf("%s.%zu", kp, i);
		rc = parse_entry(ld, json_array_get(v, i), ekp, &s->e[i]);
		free(ekp);
		if (rc == -1)
			return -1;
	}
	return 0;
}

static int
parse_retry(struct ld *ld, const json_t *v, const char *kp, struct retry *r)
{
	static const struct {
		const char	*prefix;
		enum ra_kind	 kind;
	} dates[] = {
		{ "date:", RA_IMF }, { "date-rfc850:", RA_RFC850 },
		{ "date-asctime:", RA_ASCTIME }
	};
	const char *s, *p;
	size_t i;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0 || json_integer_value(v) > RA_MAX)
			return kerr(ld, kp, "expected seconds from 0 to %ld",
			    RA_MAX);
		r->kind = RA_SECONDS;
		r->n = (long)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return kerr(ld, kp, "expected an integer or a string");
	s = json_string_value(v);
	if (*s == '\0' || strlen(s) > RA_TEXT_MAX)
		return kerr(ld, kp, "expected a string of 1 to %d bytes",
		    RA_TEXT_MAX);
	for (p = s; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return kerr(ld, kp, "control character in value");
	for (i = 0; i < sizeof(dates) / sizeof(dates[0]); i++) {
		if (strncmp(s, dates[i].prefix, strlen(dates[i].prefix)) != 0)
			continue;
		p = s + strlen(dates[i].prefix);
		if ((*p != '+' && *p != '-') ||
		    num_long(p, -RA_MAX, RA_MAX, &r->n) == -1)
			return kerr(ld, kp, "expected \"%s+N\" or \"%s-N\" "
			    "with N in seconds", dates[i].prefix,
			    dates[i].prefix);
		r->kind = dates[i].kind;
		return 0;
	}
	r->kind = RA_VERBATIM;
	r->text = xstrdup(s);
	return 0;
}

static int
get_retry(struct ld *ld, const json_t *obj, const char *prefix,
    struct retry *r)
{
	char *kp = NULL;
	json_t *v;
	int rc = 0;

	if ((v = member(obj, prefix, "retry_after", &kp)) != NULL)
		rc = parse_retry(ld, v, kp, r);
	free(kp);
	return rc;
}

static struct endpoint *
endpoint_get(struct scen *s, const char *name)
{
	struct endpoint *ep, **tail = &s->eps;

	for (ep = s->eps; ep != NULL; ep = ep->next) {
		if (strcmp(ep->name, name) == 0)
			return ep;
		tail = &ep->next;
	}
	ep = xcalloc(1, sizeof(*ep));
	ep->name = xstrdup(name);
	ep->end_s = HUGE_VAL;
	*tail = ep;
	return ep;
}

static int
parse_rate(struct ld *ld, const json_t *v, const char *kp,
    struct endpoint *ep)
{
	char *skp;

	if (!json_is_object(v))
		return kerr(ld, kp, "expected a mapping");
	if (check_keys(ld, v, kp, rate_keys) == -1)
		return -1;
	if (json_object_get(v, "per_s") == NULL)
		return kerr(ld, kp, "missing key \"per_s\"");
	ep->has_rate = 1;
	if (get_num(ld, v, kp, "per_s", 0, 1e6, &ep->per_s) == -1 ||
	    get_int(ld, v, kp, "burst", 0, 1000000, &ep->burst) == -1 ||
	    get_retry(ld, v, kp, &ep->rate_ra) == -1)
		return -1;
	if (ep->per_s <= 0) {
		skp = kpath(kp, "per_s");
		kerr(ld, skp, "expected a positive number");
		free(skp);
		return -1;
	}
	return 0;
}

static int
parse_outage(struct ld *ld, const json_t *v, const char *kp,
    struct endpoint *ep)
{
	char *skp = NULL;
	json_t *st;
	int rc = 0;

	if (!json_is_object(v))
		return kerr(ld, kp, "expected a mapping");
	if (check_keys(ld, v, kp, outage_keys) == -1)
		return -1;
	ep->has_outage = 1;
	ep->outage.act = ACT_STATUS;
	ep->outage.status = 503;
	if (get_num(ld, v, kp, "start_s", 0, 1e9, &ep->start_s) == -1 ||
	    get_num(ld, v, kp, "end_s", 0, 1e9, &ep->end_s) == -1 ||
	    get_retry(ld, v, kp, &ep->outage_ra) == -1)
		return -1;
	if (ep->end_s <= ep->start_s) {
		skp = kpath(kp, "end_s");
		rc = kerr(ld, skp, "must be after start_s");
		free(skp);
		return rc;
	}
	if ((st = member(v, kp, "status", &skp)) != NULL) {
		if (json_is_integer(st) && json_integer_value(st) >= 200 &&
		    json_integer_value(st) <= 599)
			ep->outage.status = (int)json_integer_value(st);
		else if (json_is_string(st) &&
		    strcmp(json_string_value(st), "reset") == 0)
			ep->outage.act = ACT_RESET;
		else
			rc = kerr(ld, skp, "expected a status from 200 to 599 "
			    "or \"reset\"");
	}
	free(skp);
	return rc;
}

/* The string value of key in obj: one of names[0..n), its index or -1. */
static int
get_enum(struct ld *ld, const json_t *obj, const char *prefix,
    const char *key, const char **names, size_t n, int *out)
{
	char *kp = NULL, what[256];
	json_t *v;
	size_t i, len = 0;
	int rc = 0;

	if ((v = member(obj, prefix, key, &kp)) == NULL)
		goto done;
	for (i = 0; i < n; i++)
		if (json_is_string(v) &&
		    strcmp(json_string_value(v), names[i]) == 0) {
			*out = (int)i;
			goto done;
		}
	what[0] = '\0';
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(what + len, sizeof(what) - len,
		    "%s\"%s\"", i == 0 ? "" : i + 1 == n ? " or " : ", ",
		    names[i]);
	rc = kerr(ld, kp, "expected %s", what);
done:
	free(kp);
	return rc;
}

/* A name fit for a quoted structured-field string: [A-Za-z0-9_.:-]{1,64}. */
static int
good_name(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") == n;
}

static int
parse_limiter(struct ld *ld, const json_t *v, const char *kp,
    struct limiter *l)
{
	static const char *pers[] = { "endpoint", "path" };
	const char *key, *kinds[5];
	char *skp = NULL;
	json_t *m;
	size_t i;
	long status = 429;
	int k = -1, per = PER_ENDPOINT, hd = LH_NONE, rc = -1;

	for (i = 0; i < 5; i++)
		kinds[i] = lim_kind_name((enum lim_kind)i);
	if (!json_is_object(v))
		return kerr(ld, kp, "expected a mapping with a kind");
	if (check_keys(ld, v, kp, lim_keys) == -1)
		return -1;
	if (json_object_get(v, "kind") == NULL)
		return kerr(ld, kp, "missing key \"kind\"");
	if (get_enum(ld, v, kp, "kind", kinds, 5, &k) == -1)
		return -1;
	l->kind = (enum lim_kind)k;
	json_object_foreach((json_t *)v, key, m)
		for (i = 0; i < sizeof(lim_kind_keys) /
		    sizeof(lim_kind_keys[0]); i++)
			if (strcmp(key, lim_kind_keys[i].key) == 0 &&
			    !(lim_kind_keys[i].kinds & 1U << k)) {
				skp = kpath(kp, key);
				kerr(ld, skp, "not a key of kind \"%s\"",
				    kinds[k]);
				goto out;
			}
	key = k == LIM_GCRA ? "per_s" : k == LIM_CONC ? "max" : "limit";
	if (json_object_get(v, key) == NULL ||
	    ((k == LIM_FIXED || k == LIM_SLIDING) &&
	    json_object_get(v, key = "window_s") == NULL)) {
		kerr(ld, kp, "missing key \"%s\"", key);
		goto out;
	}
	l->nodelay = 1;
	l->count_refused = 1;
	l->until_s = HUGE_VAL;
	if (get_num(ld, v, kp, "per_s", 0, 1e6, &l->per_s) == -1 ||
	    get_int(ld, v, kp, "burst", 0, 1000000, &l->burst) == -1 ||
	    get_bool(ld, v, kp, "nodelay", &l->nodelay) == -1 ||
	    get_int(ld, v, kp, "limit", k == LIM_QUOTA ? 0 : 1, 1000000000,
	    &l->limit) == -1 ||
	    get_num(ld, v, kp, "window_s", 0, 1e9, &l->window_s) == -1 ||
	    get_bool(ld, v, kp, "count_refused", &l->count_refused) == -1 ||
	    get_int(ld, v, kp, "max", 1, 1000000, &l->max) == -1 ||
	    get_int(ld, v, kp, "status", 400, 599, &status) == -1 ||
	    get_retry(ld, v, kp, &l->ra) == -1 ||
	    get_enum(ld, v, kp, "per", pers, 2, &per) == -1 ||
	    get_num(ld, v, kp, "from_s", 0, 1e9, &l->from_s) == -1 ||
	    get_num(ld, v, kp, "until_s", 0, 1e9, &l->until_s) == -1 ||
	    get_enum(ld, v, kp, "headers", lim_hdr_forms, 5, &hd) == -1)
		goto out;
	l->status = (int)status;
	l->per = (enum lim_per)per;
	l->headers = (enum lim_hdrs)hd;
	key = NULL;
	if (l->kind == LIM_GCRA && l->per_s <= 0)
		key = "per_s";
	else if ((l->kind == LIM_FIXED || l->kind == LIM_SLIDING) &&
	    l->window_s <= 0)
		key = "window_s";
	if (key != NULL) {
		skp = kpath(kp, key);
		kerr(ld, skp, "expected a positive number");
		goto out;
	}
	if (l->until_s <= l->from_s) {
		skp = kpath(kp, "until_s");
		kerr(ld, skp, "must be after from_s");
		goto out;
	}
	if (l->kind == LIM_CONC && l->headers != LH_NONE) {
		skp = kpath(kp, "headers");
		kerr(ld, skp, "a concurrency limiter sends no headers: "
		    "expected \"none\"");
		goto out;
	}
	if ((m = member(v, kp, "name", &skp)) != NULL) {
		if (!json_is_string(m) || !good_name(json_string_value(m))) {
			kerr(ld, skp,
			    "expected 1 to 64 of A-Z a-z 0-9 _ . : -");
			goto out;
		}
		l->name = xstrdup(json_string_value(m));
	} else
		l->name = xstrdup(lim_kind_name(l->kind));
	rc = 0;
out:
	free(skp);
	return rc;
}

/*
 * One endpoint, one set of each header: one limiter with X-RateLimit-*, one
 * with a RateLimit of draft 7 or any with distinct names in draft 8's.
 */
static int
check_lim_headers(struct ld *ld, const char *kp, struct endpoint *ep)
{
	const struct limiter *l, *o;
	char *skp;
	size_t i, j;
	int rc = 0;

	for (i = 0; i < ep->nlims && rc == 0; i++) {
		l = &ep->lims[i];
		if (l->headers == LH_NONE)
			continue;
		ep->lim_headers = 1;
		for (j = 0; j < i && rc == 0; j++) {
			o = &ep->lims[j];
			skp = xasprintf("%s.%zu.%s", kp, i,
			    l->headers == LH_IETF && o->headers == LH_IETF ?
			    "name" : "headers");
			if ((l->headers == LH_X || l->headers == LH_X_EPOCH) &&
			    (o->headers == LH_X || o->headers == LH_X_EPOCH))
				rc = kerr(ld, skp, "%s.%zu sends X-RateLimit-* "
				    "already", kp, j);
			else if ((l->headers == LH_DRAFT7 &&
			    (o->headers == LH_DRAFT7 ||
			    o->headers == LH_IETF)) ||
			    (l->headers == LH_IETF &&
			    o->headers == LH_DRAFT7))
				rc = kerr(ld, skp, "%s.%zu sends RateLimit "
				    "already", kp, j);
			else if (l->headers == LH_IETF &&
			    o->headers == LH_IETF &&
			    strcmp(l->name, o->name) == 0)
				rc = kerr(ld, skp, "\"%s\" is %s.%zu's name "
				    "too: give each a distinct name", l->name,
				    kp, j);
			free(skp);
		}
	}
	return rc;
}

static int
parse_limits(struct ld *ld, const json_t *v, const char *kp,
    struct endpoint *ep)
{
	char *ikp;
	size_t i;
	int rc;

	if (!json_is_array(v) || json_array_size(v) > LIM_MAX)
		return kerr(ld, kp, "expected a list of at most %d limiters",
		    LIM_MAX);
	for (i = 0; i < json_array_size(v); i++) {
		ikp = xasprintf("%s.%zu", kp, i);
		rc = parse_limiter(ld, json_array_get(v, i), ikp,
		    &ep->lims[i]);
		free(ikp);
		ep->nlims = i + 1;
		if (rc == -1)
			return -1;
	}
	return check_lim_headers(ld, kp, ep);
}

/*
 * rate, outage and limits belong to the endpoint: every route naming it
 * must agree.
 */
static int
endpoint_setting(struct ld *ld, const json_t *route, const char *prefix,
    size_t ri, struct endpoint *ep, const char *key)
{
	const void **src;
	size_t *from;
	char *kp = NULL;
	json_t *v;
	int rc = 0;

	if ((v = member(route, prefix, key, &kp)) == NULL)
		goto out;
	if (strcmp(key, "rate") == 0) {
		src = &ep->rate_src;
		from = &ep->rate_route;
	} else if (strcmp(key, "outage") == 0) {
		src = &ep->outage_src;
		from = &ep->outage_route;
	} else {
		src = &ep->limits_src;
		from = &ep->limits_route;
	}
	if (*src != NULL) {
		if (!json_equal(v, (json_t *)*src))
			rc = kerr(ld, kp, "differs from routes.%zu.%s for "
			    "endpoint \"%s\"", *from, key, ep->name);
		goto out;
	}
	*src = v;
	*from = ri;
	if (strcmp(key, "rate") == 0)
		rc = parse_rate(ld, v, kp, ep);
	else if (strcmp(key, "outage") == 0)
		rc = parse_outage(ld, v, kp, ep);
	else
		rc = parse_limits(ld, v, kp, ep);
out:
	free(kp);
	return rc;
}

static int
parse_methods(struct ld *ld, const json_t *v, const char *kp,
    struct route *r)
{
	const char *m, *p;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return kerr(ld, kp, "expected a non-empty list of methods");
	r->nmethods = json_array_size(v);
	r->methods = xcalloc(r->nmethods, sizeof(*r->methods));
	for (i = 0; i < r->nmethods; i++) {
		m = json_string_value(json_array_get(v, i));
		if (m == NULL || *m == '\0')
			return kerr(ld, kp, "expected a list of method names");
		for (p = m; *p != '\0'; p++)
			if (strchr("!#$%&'*+-.^_`|~", *p) == NULL &&
			    !(*p >= 'A' && *p <= 'Z') &&
			    !(*p >= 'a' && *p <= 'z') &&
			    !(*p >= '0' && *p <= '9'))
				return kerr(ld, kp, "bad method name \"%.40s\"",
				    m);
		r->methods[i] = xstrdup(m);
	}
	return 0;
}

static int
parse_mix(struct ld *ld, const json_t *v, const char *kp, struct route *r)
{
	const json_t *m;
	char *mkp, *skp;
	size_t i;
	int rc;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return kerr(ld, kp, "expected a non-empty list");
	r->nmix = json_array_size(v);
	r->mix = xcalloc(r->nmix, sizeof(*r->mix));
	for (i = 0; i < r->nmix; i++) {
		m = json_array_get(v, i);
		mkp = xasprintf("%s.%zu", kp, i);
		if (!json_is_object(m))
			rc = kerr(ld, mkp, "expected a mapping with weight and "
			    "script");
		else if ((rc = check_keys(ld, m, mkp, mix_keys)) == -1)
			;
		else if (json_object_get(m, "weight") == NULL ||
		    json_object_get(m, "script") == NULL)
			rc = kerr(ld, mkp, "expected both weight and script");
		else if ((rc = get_int(ld, m, mkp, "weight", 1, 1000000,
		    &r->mix[i].weight)) == 0) {
			skp = kpath(mkp, "script");
			rc = parse_script(ld, json_object_get(m, "script"), skp,
			    &r->mix[i].script);
			free(skp);
		}
		free(mkp);
		if (rc == -1)
			return -1;
		r->mixtotal += r->mix[i].weight;
	}
	return 0;
}

/* A deterministic body of n bytes: pdf or text filler. */
static void
build_blob(struct route *r, long n)
{
	static const char pdfhead[] = "%PDF-1.4\n", pdftail[] = "%%EOF\n";
	static const char fill[] =
	    "rfp-mockportal filler 0123456789 abcdefghijklmnopqrstuvwxyz\n";
	size_t len = (size_t)n, i, start = 0;

	r->blob = xmalloc(len + 1);
	r->bloblen = len;
	if (r->body == BODY_PDF) {
		start = len < sizeof(pdfhead) - 1 ? len : sizeof(pdfhead) - 1;
		memcpy(r->blob, pdfhead, start);
	}
	for (i = start; i < len; i++)
		r->blob[i] = fill[(i - start) % (sizeof(fill) - 1)];
	if (r->body == BODY_PDF && len >= sizeof(pdfhead) - 1 +
	    sizeof(pdftail) - 1)
		memcpy(r->blob + len - (sizeof(pdftail) - 1), pdftail,
		    sizeof(pdftail) - 1);
	r->blob[len] = '\0';
}

/* body_file: the file's bytes, named relative to the scenario's directory. */
static int
read_blob(struct ld *ld, const char *kp, const char *name, struct route *r)
{
	const char *slash = strrchr(ld->c->path, '/');
	char *path;
	FILE *f;
	long n;
	int rc = 0;

	if (name[0] == '/' || slash == NULL)
		path = xstrdup(name);
	else
		path = xasprintf("%.*s/%s", (int)(slash - ld->c->path),
		    ld->c->path, name);
	errno = 0;
	if ((f = fopen(path, "rb")) == NULL || fseek(f, 0, SEEK_END) == -1 ||
	    (n = ftell(f)) < 0 || n > BODY_MAX || fseek(f, 0, SEEK_SET) == -1) {
		rc = kerr(ld, kp, "cannot read \"%s\": %s", path,
		    errno == 0 ? "too large" : strerror(errno));
		goto out;
	}
	r->blob = xmalloc((size_t)n + 1);
	r->bloblen = (size_t)n;
	if (fread(r->blob, 1, (size_t)n, f) != (size_t)n) {
		rc = kerr(ld, kp, "cannot read \"%s\"", path);
		goto out;
	}
	r->blob[n] = '\0';
out:
	if (f != NULL)
		fclose(f);
	free(path);
	return rc;
}

static int
parse_body(struct ld *ld, const json_t *obj, const char *prefix,
    struct route *r)
{
	char *kp = NULL;
	json_t *v;
	long bytes = 2048;
	size_t i;
	int rc = 0;

	if ((v = member(obj, prefix, "body", &kp)) != NULL) {
		for (i = 0; i < sizeof(body_names) / sizeof(body_names[0]); i++)
			if (json_is_string(v) &&
			    strcmp(json_string_value(v), body_names[i]) == 0)
				break;
		if (i == sizeof(body_names) / sizeof(body_names[0])) {
			rc = kerr(ld, kp, "expected one of \"json\", \"pdf\", "
			    "\"html\", \"envelope\", \"text\"");
			goto out;
		}
		r->body = (enum body)i;
	}
	if ((v = member(obj, prefix, "body_bytes", &kp)) != NULL) {
		if (r->body != BODY_PDF && r->body != BODY_TEXT) {
			rc = kerr(ld, kp, "applies only to body \"pdf\" or "
			    "\"text\"");
			goto out;
		}
		if ((rc = get_int(ld, obj, prefix, "body_bytes", 0, BODY_MAX,
		    &bytes)) == -1)
			goto out;
	}
	if ((v = member(obj, prefix, "body_file", &kp)) != NULL) {
		if (r->body != BODY_PDF && r->body != BODY_TEXT &&
		    r->body != BODY_JSON) {
			rc = kerr(ld, kp, "applies only to body \"json\", "
			    "\"pdf\" or \"text\"");
			goto out;
		}
		if (json_object_get(obj, "body_bytes") != NULL) {
			rc = kerr(ld, kp, "excludes body_bytes");
			goto out;
		}
		if (!json_is_string(v)) {
			rc = kerr(ld, kp, "expected a file name");
			goto out;
		}
		rc = read_blob(ld, kp, json_string_value(v), r);
		goto out;
	}
	if (r->body == BODY_PDF || r->body == BODY_TEXT)
		build_blob(r, bytes);
out:
	free(kp);
	return rc;
}

static int
parse_route(struct ld *ld, struct scen *s, const json_t *v, size_t ri)
{
	struct route *r = &s->routes[ri];
	char *prefix, *kp = NULL;
	const char *name;
	json_t *m, *e, *sc, *mix;
	int rc = -1;

	prefix = xasprintf("routes.%zu", ri);
	r->hang_ms = 30000;
	r->slow_ms = 2000;
	if (!json_is_object(v)) {
		kerr(ld, prefix, "expected a mapping");
		goto out;
	}
	if (check_keys(ld, v, prefix, route_keys) == -1)
		goto out;
	m = member(v, prefix, "match", &kp);
	if (!json_is_string(m) || *json_string_value(m) == '\0') {
		kerr(ld, m == NULL ? prefix : kp, m == NULL ?
		    "missing key \"match\"" : "expected a non-empty string");
		goto out;
	}
	r->match = xstrdup(json_string_value(m));
	name = r->match;
	if ((e = member(v, prefix, "endpoint", &kp)) != NULL) {
		if (!json_is_string(e) || *json_string_value(e) == '\0') {
			kerr(ld, kp, "expected a non-empty string");
			goto out;
		}
		name = json_string_value(e);
	}
	r->ep = endpoint_get(s, name);
	if ((m = member(v, prefix, "methods", &kp)) != NULL &&
	    parse_methods(ld, m, kp, r) == -1)
		goto out;
	sc = json_object_get(v, "script");
	mix = json_object_get(v, "mix");
	if (sc != NULL && mix != NULL) {
		free(kp);
		kp = kpath(prefix, "mix");
		kerr(ld, kp, "give either script or mix, not both");
		goto out;
	}
	if (sc != NULL) {
		free(kp);
		kp = kpath(prefix, "script");
		if (parse_script(ld, sc, kp, &r->script) == -1)
			goto out;
	} else if (mix != NULL) {
		free(kp);
		kp = kpath(prefix, "mix");
		if (parse_mix(ld, mix, kp, r) == -1)
			goto out;
	} else {
		r->script.n = 1;
		r->script.e = xcalloc(1, sizeof(*r->script.e));
		r->script.e[0].act = ACT_STATUS;
		r->script.e[0].status = 200;
	}
	if (get_retry(ld, v, prefix, &r->ra) == -1 ||
	    get_num(ld, v, prefix, "delay_ms", 0, MS_MAX, &r->delay_ms) == -1 ||
	    get_num(ld, v, prefix, "hang_ms", 0, MS_MAX, &r->hang_ms) == -1 ||
	    get_num(ld, v, prefix, "slow_ms", 0, MS_MAX, &r->slow_ms) == -1 ||
	    get_int(ld, v, prefix, "stall_every", 0, LONG_MAX,
	    &r->stall_every) == -1 ||
	    get_num(ld, v, prefix, "stall_ms", 0, MS_MAX, &r->stall_ms) == -1 ||
	    get_bool(ld, v, prefix, "ratelimit_headers",
	    &r->rl_headers) == -1 ||
	    get_bool(ld, v, prefix, "submit", &r->submit) == -1 ||
	    get_bool(ld, v, prefix, "dedupe", &r->dedupe) == -1 ||
	    parse_body(ld, v, prefix, r) == -1 ||
	    endpoint_setting(ld, v, prefix, ri, r->ep, "rate") == -1 ||
	    endpoint_setting(ld, v, prefix, ri, r->ep, "outage") == -1 ||
	    endpoint_setting(ld, v, prefix, ri, r->ep, "limits") == -1)
		goto out;
	if ((m = member(v, prefix, "location", &kp)) != NULL) {
		if (!json_is_string(m) || *json_string_value(m) == '\0' ||
		    strpbrk(json_string_value(m), "\r\n") != NULL) {
			kerr(ld, kp, "expected a non-empty one-line string");
			goto out;
		}
		r->location = xstrdup(json_string_value(m));
	}
	if (r->dedupe && !r->submit) {
		free(kp);
		kp = kpath(prefix, "dedupe");
		kerr(ld, kp, "needs submit: true");
		goto out;
	}
	rc = 0;
out:
	free(kp);
	free(prefix);
	return rc;
}

static int
parse_top(struct ld *ld, struct scen *s)
{
	const json_t *root = ld->c->root, *routes, *v;
	long seed = 0;
	char *kp;
	size_t i;

	if (check_keys(ld, root, "", top_keys) == -1)
		return -1;
	if (json_object_get(root, "seed") != NULL) {
		if (get_int(ld, root, "", "seed", 0, LONG_MAX, &seed) == -1)
			return -1;
		s->seed = (uint64_t)seed;
		s->has_seed = 1;
	}
	if ((v = json_object_get(root, "epoch")) != NULL) {
		if (json_is_string(v) && strcmp(json_string_value(v),
		    "first_request") == 0)
			s->epoch_first = 1;
		else if (!json_is_string(v) || strcmp(json_string_value(v),
		    "listen") != 0)
			return kerr(ld, "epoch",
			    "expected listen or first_request");
	}
	if ((routes = json_object_get(root, "routes")) == NULL) {
		snprintf(ld->err, ld->errlen, "%s: missing key \"routes\"",
		    ld->c->path);
		return -1;
	}
	if (!json_is_array(routes))
		return kerr(ld, "routes", "expected a list of routes");
	s->nroutes = json_array_size(routes);
	s->routes = xcalloc(s->nroutes, sizeof(*s->routes));
	for (i = 0; i < s->nroutes; i++)
		if (parse_route(ld, s, json_array_get(routes, i), i) == -1)
			return -1;
	for (i = 0; i < s->nroutes; i++) {
		if (!s->routes[i].rl_headers)
			continue;
		kp = xasprintf("routes.%zu.ratelimit_headers", i);
		if (!s->routes[i].ep->has_rate)
			kerr(ld, kp, "needs a rate for endpoint \"%s\"",
			    s->routes[i].ep->name);
		else if (s->routes[i].ep->lim_headers)
			kerr(ld, kp, "endpoint \"%s\" has limits that send "
			    "headers (routes.%zu.limits)",
			    s->routes[i].ep->name,
			    s->routes[i].ep->limits_route);
		free(kp);
		if (!s->routes[i].ep->has_rate || s->routes[i].ep->lim_headers)
			return -1;
	}
	return 0;
}

struct scen *
scen_load(const char *path, char *err, size_t errlen)
{
	struct ld ld;
	struct ydoc *c;
	struct scen *s;
	struct endpoint *ep;
	int rc;

	if ((c = ydoc_load(path, err, errlen)) == NULL)
		return NULL;
	ld.c = c;
	ld.err = err;
	ld.errlen = errlen;
	s = xcalloc(1, sizeof(*s));
	rc = parse_top(&ld, s);
	for (ep = s->eps; ep != NULL; ep = ep->next)
		ep->rate_src = ep->outage_src = ep->limits_src = NULL;
	ydoc_free(c);
	if (rc == -1) {
		scen_free(s);
		return NULL;
	}
	return s;
}

static void
script_free(struct script *sc)
{
	free(sc->e);
}

void
scen_free(struct scen *s)
{
	struct endpoint *ep, *next;
	struct route *r;
	size_t i, j;

	if (s == NULL)
		return;
	for (i = 0; i < s->nroutes; i++) {
		r = &s->routes[i];
		free(r->match);
		for (j = 0; j < r->nmethods; j++)
			free(r->methods[j]);
		free(r->methods);
		script_free(&r->script);
		for (j = 0; j < r->nmix; j++)
			script_free(&r->mix[j].script);
		free(r->mix);
		free(r->ra.text);
		free(r->blob);
		free(r->location);
	}
	free(s->routes);
	for (ep = s->eps; ep != NULL; ep = next) {
		next = ep->next;
		free(ep->name);
		free(ep->rate_ra.text);
		free(ep->outage_ra.text);
		for (i = 0; i < ep->nlims; i++) {
			free(ep->lims[i].name);
			free(ep->lims[i].ra.text);
			lim_free(&ep->lims[i]);
		}
		free(ep);
	}
	free(s);
}
