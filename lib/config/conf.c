/* conf: defaults, the YAML schema, per-endpoint settings. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/config/ydoc.h"
#include "lib/config/conf.h"
#include "lib/record/hdr.h"
#include "lib/base/clk.h"
#include "lib/base/num.h"
#include "lib/base/x.h"

enum kind { K_LONG, K_DOUBLE, K_RATE, K_DUR, K_BOOL, K_STR, K_BUDGET, K_ONOPEN,
	K_BREAKER, K_ENDPOINTS, K_SEED, K_PARSE, K_ARGV, K_TRANSIENT,
	K_PERMANENT, K_ORIGINS, K_DEADLINE };

#define ARGV_MAX	256	/* words of a parse command */
#define RATE_LEAST	(1 / 86400.0)	/* a told rate's least: one a day */

struct key {
	const char	*name;
	enum kind	 kind;
	size_t		 off;
	double		 min, max;
};

#define C(f)	offsetof(struct conf, f)
#define E(f)	offsetof(struct conf_ep, f)
#define B(f)	offsetof(struct conf_breaker, f)
#define P(f)	offsetof(struct conf_parse, f)

static const struct key top[] = {
	{ "base", K_DUR, C(base), 0.001, 3600 },
	{ "body_root", K_STR, C(body_root), 0, 0 },
	{ "breaker", K_BREAKER, C(defaults.breaker), 0, 0 },
	{ "budget", K_BUDGET, 0, 0, 0 },
	{ "burst", K_LONG, C(defaults.burst), 0, 100000 },
	{ "ca_file", K_STR, C(ca_file), 0, 0 },
	{ "cap", K_DUR, C(cap), 0.001, 86400 },
	{ "concurrency", K_LONG, C(concurrency), 1, 4096 },
	{ "connect_timeout", K_DUR, C(connect_timeout), 0.001, 3600 },
	{ "deadline", K_DEADLINE, C(deadline), 0, 0 },
	{ "endpoints", K_ENDPOINTS, 0, 0, 0 },
	{ "ledger", K_STR, C(ledger), 0, 0 },
	{ "max_attempts", K_LONG, C(max_attempts), 1, 1000 },
	{ "max_body", K_LONG, C(max_body), 1, 1L << 40 },
	{ "max_redirects", K_LONG, C(max_redirects), 0, 50 },
	{ "max_retry_after", K_DUR, C(max_retry_after), 0, 31536000 },
	{ "on_open", K_ONOPEN, C(on_open_dead), 0, 0 },
	{ "parse", K_PARSE, C(defaults.parse), 0, 0 },
	{ "permanent", K_PERMANENT, C(defaults.status_class), 0, 0 },
	{ "rate", K_RATE, C(defaults.rate), 0, 1e6 },
	{ "seed", K_SEED, C(seed), 0, 0 },
	{ "state", K_STR, C(state), 0, 0 },
	{ "timeout", K_DUR, C(timeout), 0.001, 86400 },
	{ "transient", K_TRANSIENT, C(defaults.status_class), 0, 0 },
	{ "trusted_origins", K_ORIGINS, 0, 0, 0 },
	{ NULL, 0, 0, 0, 0 }
};

static const struct key ep_keys[] = {
	{ "breaker", K_BREAKER, E(breaker), 0, 0 },
	{ "burst", K_LONG, E(burst), 0, 100000 },
	{ "concurrency", K_LONG, E(concurrency), 1, 4096 },
	{ "idempotency_keys", K_BOOL, E(idempotency_keys), 0, 0 },
	{ "parse", K_PARSE, E(parse), 0, 0 },
	{ "permanent", K_PERMANENT, E(status_class), 0, 0 },
	{ "rate", K_RATE, E(rate), 0, 1e6 },
	{ "transient", K_TRANSIENT, E(status_class), 0, 0 },
	{ NULL, 0, 0, 0, 0 }
};

static const struct key parse_keys[] = {
	{ "command", K_ARGV, P(command), 0, 0 },
	{ "concurrency", K_LONG, P(concurrency), 1, 4096 },
	{ "output_max", K_LONG, P(output_max), 1, 1L << 40 },
	{ "timeout", K_DUR, P(timeout), 0.001, 86400 },
	{ NULL, 0, 0, 0, 0 }
};

static const struct key br_keys[] = {
	{ "cooldown", K_DUR, B(cooldown), 0.001, 86400 },
	{ "cooldown_max", K_DUR, B(cooldown_max), 0, 604800 },
	{ "failures", K_LONG, B(failures), 1, 1000000 },
	{ "max_open", K_DUR, B(max_open), 0, 31536000 },
	{ "min_calls", K_LONG, B(min_calls), 1, 1000000 },
	{ "rate", K_DOUBLE, B(rate), 0, 100 },
	{ "window", K_LONG, B(window), 1, 100000 },
	{ NULL, 0, 0, 0, 0 }
};

void
conf_init(struct conf *c)
{
	memset(c, 0, sizeof(*c));
	c->concurrency = 8;
	c->max_attempts = 5;
	c->base = 0.5;
	c->cap = 30;
	c->budget = -1;
	c->budget_x = 3;
	c->max_retry_after = 3600;
	c->connect_timeout = 10;
	c->timeout = 120;
	c->max_body = 64L * 1024 * 1024;
	c->max_redirects = 5;
	c->defaults.breaker.failures = 5;
	c->defaults.breaker.rate = 0;
	c->defaults.breaker.window = 20;
	c->defaults.breaker.min_calls = 10;
	c->defaults.breaker.cooldown = 30;
	c->defaults.breaker.cooldown_max = 0;	/* no growth */
	c->defaults.breaker.max_open = 0;
	c->defaults.parse.timeout = 30;
	c->defaults.parse.concurrency = 2;
	c->defaults.parse.output_max = 16L * 1024 * 1024;
}

static void
argv_free(char **v)
{
	size_t i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

static char **
argv_dup(char *const *v)
{
	char **d;
	size_t i, n;

	if (v == NULL)
		return NULL;
	for (n = 0; v[n] != NULL; n++)
		;
	d = xcalloc(n + 1, sizeof(*d));
	for (i = 0; i < n; i++)
		d[i] = xstrdup(v[i]);
	return d;
}

int
conf_budget(struct conf *c, const char *s)
{
	size_t n = strlen(s);
	char buf[32];
	double x;
	long v;

	if (n > 0 && n < sizeof(buf) && s[n - 1] == 'x') {
		memcpy(buf, s, n - 1);
		buf[n - 1] = '\0';
		if (num_double(buf, 0, 1000, &x) == -1)
			return -1;
		c->budget = -1;
		c->budget_x = x;
		return 0;
	}
	if (num_long(s, 0, 1000000000L, &v) == -1)
		return -1;
	c->budget = v;
	return 0;
}

long
conf_budget_total(const struct conf *c, long admitted)
{
	if (c->budget >= 0)
		return c->budget;
	return (long)ceil(c->budget_x * (double)admitted);
}

/*
 * A status "408" or a range "520-524" (a copy of s is cut at the dash):
 * 0 with [*lo, *hi], or -1.  2xx is success, never a failure's class.
 */
static int
status_range(const char *s, long *lo, long *hi)
{
	char buf[16], *dash;

	if (strlen(s) >= sizeof(buf))
		return -1;
	memcpy(buf, s, strlen(s) + 1);
	if ((dash = strchr(buf, '-')) != NULL)
		*dash++ = '\0';
	if (num_long(buf, 100, CONF_STATUS_MAX, lo) == -1 ||
	    num_long(dash ? dash : buf, *lo, CONF_STATUS_MAX, hi) == -1)
		return -1;
	return *lo <= 299 && *hi >= 200 ? -1 : 0;
}

/*
 * Mark the statuses of v (an integer, "408" or "520-524") as cls in t.
 * A mark is upper case until settle(): a status marked both ways in one
 * mapping is caught, one marked by the mapping inherited is overridden.
 */
static int
mark(char *t, const json_t *v, char cls, const char **why)
{
	char num[24];
	long lo, hi;

	if (json_is_integer(v))
		snprintf(num, sizeof(num), "%lld",
		    (long long)json_integer_value(v));
	*why = "expected a status from 100 to 599 (not 2xx) or a range such "
	    "as \"520-524\"";
	if ((!json_is_integer(v) && !json_is_string(v)) || status_range(
	    json_is_integer(v) ? num : json_string_value(v), &lo, &hi) == -1)
		return -1;
	for (; lo <= hi; lo++) {
		if (isupper((unsigned char)t[lo]) &&
		    t[lo] != toupper((unsigned char)cls)) {
			*why = "a status is in both transient and permanent";
			return -1;
		}
		t[lo] = (char)toupper((unsigned char)cls);
	}
	return 0;
}

/* The marks of one mapping made, lower them for the next to override. */
static void
settle(char *t)
{
	int i;

	for (i = 0; i <= CONF_STATUS_MAX; i++)
		t[i] = (char)tolower((unsigned char)t[i]);
}

int
conf_statuses(struct conf *c, const char *list, char cls)
{
	char *dup = xstrdup(list), *p, *tok, *save = NULL;
	char t[CONF_STATUS_MAX + 1];
	const char *why;
	size_t i, j;
	json_t *v;
	int rc = 0, n = 0;

	memset(t, 0, sizeof(t));
	for (p = dup; rc == 0 && (tok = strtok_r(p, ",", &save)) != NULL;
	    p = NULL, n++) {
		v = json_string(tok);
		rc = mark(t, v, cls, &why);
		json_decref(v);
	}
	free(dup);
	if (rc == -1 || n == 0)
		return -1;	/* an empty list is a mistake too */
	settle(t);
	for (i = 0; i <= CONF_STATUS_MAX; i++) {
		if (t[i] == 0)
			continue;
		c->defaults.status_class[i] = t[i];
		for (j = 0; j < c->neps; j++)
			c->eps[j].status_class[i] = t[i];
	}
	return 0;
}

struct ctx {
	const struct ydoc *cfg;
	struct conf	*c;
	char		*err;
	size_t		 errlen;
};

static int
bad(struct ctx *x, const char *path, const char *what)
{
	const char *key = strrchr(path, '.');

	snprintf(x->err, x->errlen, "%s:%ld: key \"%s\": %s", x->cfg->path,
	    ydoc_line(x->cfg, path), key ? key + 1 : path, what);
	return -1;
}

static int apply(struct ctx *, const struct key *, const char *, json_t *,
    void *);

static int
endpoints(struct ctx *x, const char *path, json_t *v)
{
	const char *name;
	json_t *e;
	struct conf_ep *ep;
	char *sub;
	int rc;

	if (!json_is_object(v))
		return bad(x, path, "expected a mapping of endpoint names");
	json_object_foreach(v, name, e) {
		sub = xasprintf("%s.%s", path, name);
		if (!json_is_object(e) && !json_is_null(e)) {
			rc = bad(x, sub, "expected a mapping");
			free(sub);
			return rc;
		}
		x->c->eps = xrealloc(x->c->eps, (x->c->neps + 1) *
		    sizeof(*x->c->eps));
		ep = &x->c->eps[x->c->neps++];
		*ep = x->c->defaults;
		ep->name = xstrdup(name);
		ep->parse.command = argv_dup(x->c->defaults.parse.command);
		rc = e ? apply(x, ep_keys, sub, e, ep) : 0;
		settle(ep->status_class);
		free(sub);
		if (rc == -1)
			return -1;
	}
	return 0;
}

/* A command as a list of words, run as it is: no shell sees it. */
static int
argv(struct ctx *x, const char *path, json_t *v, char ***out)
{
	size_t i, n = json_array_size(v);
	char **w;

	if (!json_is_array(v) || n == 0 || n > ARGV_MAX)
		return bad(x, path, "expected a list of 1 to 256 strings, "
		    "the program first");
	for (i = 0; i < n; i++)
		if (!json_is_string(json_array_get(v, i)) ||
		    (i == 0 && *json_string_value(json_array_get(v, 0)) ==
		    '\0'))
			return bad(x, path, i == 0 ? "expected the program's "
			    "name first" : "expected a list of strings");
	w = xcalloc(n + 1, sizeof(*w));
	for (i = 0; i < n; i++)
		w[i] = xstrdup(json_string_value(json_array_get(v, i)));
	argv_free(*out);
	*out = w;
	return 0;
}

/* parse: a mapping over the inherited settings; null turns it off. */
static int
parse(struct ctx *x, const char *path, json_t *v, struct conf_parse *p)
{
	if (json_is_null(v)) {
		argv_free(p->command);
		p->command = NULL;
		return 0;
	}
	if (!json_is_object(v))
		return bad(x, path, "expected a mapping or null");
	if (apply(x, parse_keys, path, v, p) == -1)
		return -1;
	if (p->command == NULL)
		return bad(x, path, "missing key \"command\"");
	return 0;
}

/* trusted_origins: a list of http or https origins. */
static int
origins(struct ctx *x, const char *path, json_t *v)
{
	const char *why;
	char o[512];
	size_t i;
	json_t *u;

	if (!json_is_array(v))
		return bad(x, path, "expected a list of origins such as "
		    "\"https://files.example.org\"");
	json_array_foreach(v, i, u)
		if (!json_is_string(u) || hdr_origin(json_string_value(u), o,
		    sizeof(o)) == -1)
			return bad(x, path, (why = hdr_url_error()) != NULL ?
			    why : "expected a list of origins such as "
			    "\"https://files.example.org\"");
	while (x->c->ntrusted > 0)
		free(x->c->trusted[--x->c->ntrusted]);
	x->c->trusted = xrealloc(x->c->trusted, (json_array_size(v) + 1) *
	    sizeof(*x->c->trusted));
	json_array_foreach(v, i, u)
		x->c->trusted[x->c->ntrusted++] = xstrdup(json_string_value(u));
	return 0;
}

static int
one(struct ctx *x, const struct key *k, const char *path, json_t *v,
    void *base)
{
	char *p = (char *)base + k->off;
	double d;

	switch (k->kind) {
	case K_LONG:
		if (!json_is_integer(v) || json_integer_value(v) < k->min ||
		    json_integer_value(v) > k->max) {
			char what[80];

			snprintf(what, sizeof(what), "expected an integer from "
			    "%.0f to %.0f", k->min, k->max);
			return bad(x, path, what);
		}
		*(long *)p = (long)json_integer_value(v);
		return 0;
	case K_SEED:
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return bad(x, path, "expected a non-negative integer");
		*(unsigned long *)p = (unsigned long)json_integer_value(v);
		return 0;
	case K_DOUBLE:
	case K_RATE:
	case K_DUR:
		if (json_is_number(v))
			d = json_number_value(v);
		else if (k->kind == K_DUR && json_is_string(v) &&
		    num_duration(json_string_value(v), &d) == 0)
			;
		else
			return bad(x, path, k->kind == K_DUR ?
			    "expected a duration such as 30 or \"1m30s\"" :
			    "expected a number");
		if (d < k->min || d > k->max)
			return bad(x, path, "out of range");
		/*
		 * 0 is none; a rate under one a day is a slip (1e-300 ran,
		 * with no deadline, until it was killed).
		 */
		if (k->kind == K_RATE && d > 0 && d < RATE_LEAST)
			return bad(x, path, "out of range: 0 (none), or from "
			    "one a day (1/86400, 0.0000115741) to 1e6");
		*(double *)p = d;
		return 0;
	case K_BOOL:
		if (!json_is_boolean(v))
			return bad(x, path, "expected true or false");
		*(int *)p = json_is_true(v);
		return 0;
	case K_STR:
		if (!json_is_string(v))
			return bad(x, path, "expected a string");
		free(*(char **)p);
		*(char **)p = xstrdup(json_string_value(v));
		return 0;
	case K_DEADLINE:
		/* Read now, so a mistake is named as the key, not as an option. */
		if (!json_is_string(v))
			return bad(x, path, "expected a time such as \"06:00\", "
			    "\"2026-12-01T06:00Z\" or \"+8h\"");
		if (clk_deadline(json_string_value(v), clk_now(), &d) == -1) {
			char what[160];

			snprintf(what, sizeof(what), "expected a time such as "
			    "\"06:00\", \"2026-12-01T06:00Z\" or \"+8h\", "
			    "got \"%.40s\"", json_string_value(v));
			return bad(x, path, what);
		}
		free(*(char **)p);
		*(char **)p = xstrdup(json_string_value(v));
		return 0;
	case K_BUDGET:
		if (json_is_integer(v) && json_integer_value(v) >= 0) {
			x->c->budget = (long)json_integer_value(v);
			return 0;
		}
		if (!json_is_string(v) || conf_budget(x->c,
		    json_string_value(v)) == -1)
			return bad(x, path, "expected a count or a multiple "
			    "such as \"3x\"");
		return 0;
	case K_ONOPEN:
		if (json_is_string(v) && strcmp(json_string_value(v),
		    "wait") == 0)
			*(int *)p = 0;
		else if (json_is_string(v) && strcmp(json_string_value(v),
		    "dead") == 0)
			*(int *)p = 1;
		else
			return bad(x, path, "expected \"wait\" or \"dead\"");
		return 0;
	case K_BREAKER:
		if (!json_is_object(v))
			return bad(x, path, "expected a mapping");
		return apply(x, br_keys, path, v, p);
	case K_ENDPOINTS:
		return endpoints(x, path, v);
	case K_PARSE:
		return parse(x, path, v, (struct conf_parse *)p);
	case K_ARGV:
		return argv(x, path, v, (char ***)p);
	case K_TRANSIENT:
	case K_PERMANENT: {
		const char *why;
		size_t i;

		if (!json_is_array(v))
			return bad(x, path, "expected a list of statuses");
		for (i = 0; i < json_array_size(v); i++)
			if (mark(p, json_array_get(v, i), k->kind ==
			    K_TRANSIENT ? CONF_TRANSIENT : CONF_PERMANENT,
			    &why) == -1)
				return bad(x, path, why);
		return 0;
	}
	case K_ORIGINS:
		return origins(x, path, v);
	}
	return 0;
}

static int
apply(struct ctx *x, const struct key *keys, const char *path, json_t *obj,
    void *base)
{
	const struct key *k;
	const char *name;
	json_t *v;
	char *sub;
	int rc;

	json_object_foreach(obj, name, v) {
		sub = *path ? xasprintf("%s.%s", path, name) : xstrdup(name);
		for (k = keys; k->name != NULL; k++)
			if (strcmp(k->name, name) == 0)
				break;
		if (k->name == NULL) {
			snprintf(x->err, x->errlen, "%s:%ld: unknown key "
			    "\"%s\"", x->cfg->path, ydoc_line(x->cfg, sub),
			    name);
			free(sub);
			return -1;
		}
		rc = one(x, k, sub, v, base);
		free(sub);
		if (rc == -1)
			return -1;
	}
	return 0;
}

int
conf_load(struct conf *c, const char *path, char *err, size_t errlen)
{
	struct ctx x;
	struct ydoc *cfg;
	json_t *eps;
	int rc;

	if ((cfg = ydoc_load(path, err, errlen)) == NULL)
		return -1;
	x.cfg = cfg;
	x.c = c;
	x.err = err;
	x.errlen = errlen;
	/* Endpoints inherit the top-level defaults, so apply those first. */
	eps = json_object_get(cfg->root, "endpoints");
	json_incref(eps);
	json_object_del(cfg->root, "endpoints");
	rc = apply(&x, top, "", cfg->root, c);
	/* Shared by the nights of a cycle: not where cron happens to be. */
	if (rc == 0 && c->ledger != NULL && c->ledger[0] != '/')
		rc = bad(&x, "ledger", "expected an absolute path");
	settle(c->defaults.status_class);
	if (rc == 0 && eps != NULL)
		rc = endpoints(&x, "endpoints", eps);
	json_decref(eps);
	ydoc_free(cfg);
	return rc;
}

const struct conf_ep *
conf_endpoint(const struct conf *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->neps; i++)
		if (strcmp(c->eps[i].name, name) == 0)
			return &c->eps[i];
	return &c->defaults;
}

int
conf_has_parse(const struct conf *c)
{
	size_t i;

	for (i = 0; i < c->neps; i++)
		if (c->eps[i].parse.command != NULL)
			return 1;
	return c->defaults.parse.command != NULL;
}

int
conf_wait_past(double wait, double bound)
{
	return !(wait <= bound);	/* NaN is past every bound */
}

void
conf_free(struct conf *c)
{
	size_t i;

	for (i = 0; i < c->neps; i++) {
		free(c->eps[i].name);
		argv_free(c->eps[i].parse.command);
	}
	argv_free(c->defaults.parse.command);
	c->defaults.parse.command = NULL;
	free(c->eps);
	for (i = 0; i < c->ntrusted; i++)
		free(c->trusted[i]);
	free(c->trusted);
	c->trusted = NULL;
	c->ntrusted = 0;
	free(c->deadline);
	free(c->ca_file);
	free(c->state);
	free(c->ledger);
	free(c->body_root);
	c->eps = NULL;
	c->neps = 0;
	c->deadline = c->ca_file = c->state = c->body_root = c->ledger = NULL;
}
