/* scan: find a record's top-level members in one strict pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/record/rec.h"
#include "lib/record/scan.h"

#define NESTED_KEYS	32	/* keys of a nested object checked for twins */
#define INT_DIGITS	18	/* below long long's overflow */
#define REAL_DIGITS	40	/* with a 2-digit exponent, far from overflow */

struct cur {
	const char	*p;
	const char	*end;
};

struct span {
	const char	*s;
	size_t		 len;
};

static int value(struct cur *, int, enum scan_type *, int *);

static void
ws(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
	    *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int
lit(struct cur *c, const char *word, size_t n)
{
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
		return -1;
	c->p += n;
	return 0;
}

/*
 * A string of printable ASCII.  \u escapes are left to jansson (a NUL or a
 * lone surrogate is an error there); the short escapes are counted.
 */
static int
string(struct cur *c, int *escaped)
{
	unsigned char ch;

	for (c->p++; c->p < c->end; c->p++) {
		ch = (unsigned char)*c->p;
		if (ch == '"') {
			c->p++;
			return 0;
		}
		if (ch < 0x20 || ch >= 0x7f)
			return -1;
		if (ch == '\\') {
			if (++c->p == c->end ||
			    strchr("\"\\/bfnrt", *c->p) == NULL || *c->p == '\0')
				return -1;
			*escaped = 1;
		}
	}
	return -1;
}

static size_t
digits(struct cur *c)
{
	const char *p = c->p;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
		c->p++;
	return (size_t)(c->p - p);
}

/* JSON's number grammar, within what strtoll and strtod read whole. */
static int
number(struct cur *c, enum scan_type *t)
{
	size_t n, e;

	if (*c->p == '-')
		c->p++;
	if (c->p == c->end)
		return -1;
	if (*c->p == '0') {
		c->p++;
		n = 1;
		if (c->p < c->end && *c->p >= '0' && *c->p <= '9')
			return -1;
	} else if ((n = digits(c)) == 0)
		return -1;
	*t = SCAN_INTEGER;
	if (c->p < c->end && *c->p == '.') {
		c->p++;
		if ((e = digits(c)) == 0)
			return -1;
		n += e;
		*t = SCAN_REAL;
	}
	if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
		c->p++;
		if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
			c->p++;
		if ((e = digits(c)) == 0 || e > 2)
			return -1;
		*t = SCAN_REAL;
	}
	return n > (*t == SCAN_INTEGER ? INT_DIGITS : REAL_DIGITS) ? -1 : 0;
}

/* A key: an escape-free string, so equal keys are equal bytes. */
static int
key(struct cur *c, struct span *k)
{
	int esc = 0;

	if (c->p == c->end || *c->p != '"')
		return -1;
	k->s = c->p + 1;
	if (string(c, &esc) == -1 || esc)
		return -1;
	k->len = (size_t)(c->p - 1 - k->s);
	return 0;
}

static int
twin(const struct span *keys, int n, const struct span *k)
{
	int i;

	for (i = 0; i < n; i++)
		if (keys[i].len == k->len &&
		    memcmp(keys[i].s, k->s, k->len) == 0)
			return 1;
	return 0;
}

/* An object (close '}'), its keys checked for twins, or an array (']'). */
static int
container(struct cur *c, int depth, char close)
{
	struct span keys[NESTED_KEYS];
	enum scan_type t;
	int n = 0, esc;

	c->p++;
	ws(c);
	if (c->p < c->end && *c->p == close) {
		c->p++;
		return 0;
	}
	for (;;) {
		if (close == '}') {
			if (n == NESTED_KEYS || key(c, &keys[n]) == -1 ||
			    twin(keys, n, &keys[n]))
				return -1;
			n++;
			ws(c);
			if (c->p == c->end || *c->p++ != ':')
				return -1;
			ws(c);
		}
		if (value(c, depth, &t, &esc) == -1)
			return -1;
		ws(c);
		if (c->p == c->end)
			return -1;
		if (*c->p == close) {
			c->p++;
			return 0;
		}
		if (*c->p++ != ',')
			return -1;
		ws(c);
	}
}

static int
value(struct cur *c, int depth, enum scan_type *t, int *escaped)
{
	*escaped = 0;
	if (c->p == c->end)
		return -1;
	switch (*c->p) {
	case '"':
		*t = SCAN_STRING;
		return string(c, escaped);
	case '{':
		*t = SCAN_OBJECT;
		return depth == SCAN_DEPTH ? -1 : container(c, depth + 1, '}');
	case '[':
		*t = SCAN_ARRAY;
		return depth == SCAN_DEPTH ? -1 : container(c, depth + 1, ']');
	case 't':
		*t = SCAN_TRUE;
		return lit(c, "true", 4);
	case 'f':
		*t = SCAN_FALSE;
		return lit(c, "false", 5);
	case 'n':
		*t = SCAN_NULL;
		return lit(c, "null", 4);
	default:
		if (*c->p != '-' && (*c->p < '0' || *c->p > '9'))
			return -1;
		return number(c, t);
	}
}

/* A cheap fingerprint of a key, so most keys are never compared twice. */
static unsigned
hbit(const struct span *k)
{
	unsigned h = (unsigned)k->len * 31U;

	if (k->len > 0)
		h += (unsigned char)k->s[0] * 7U +
		    (unsigned char)k->s[k->len - 1];
	return h & 63U;
}

int
scan_record(const char *line, size_t len, struct scan_rec *s)
{
	struct cur c = { line, line + len };
	struct scan_member *m;
	unsigned long long seen = 0, bit;
	struct span k;
	int i;

	s->n = 0;
	ws(&c);
	if (c.p == c.end || *c.p++ != '{')
		return -1;
	ws(&c);
	if (c.p < c.end && *c.p == '}')
		goto close;
	for (;;) {
		if (s->n == SCAN_MEMBERS || key(&c, &k) == -1)
			return -1;
		bit = 1ULL << hbit(&k);
		if (seen & bit)
			for (i = 0; i < s->n; i++)
				if (s->m[i].klen == k.len &&
				    memcmp(s->m[i].key, k.s, k.len) == 0)
					return -1;
		seen |= bit;
		m = &s->m[s->n++];
		m->key = k.s;
		m->klen = k.len;
		ws(&c);
		if (c.p == c.end || *c.p++ != ':')
			return -1;
		ws(&c);
		m->val = c.p;
		if (value(&c, 1, &m->type, &m->escaped) == -1)
			return -1;
		m->vlen = (size_t)(c.p - m->val);
		ws(&c);
		if (c.p == c.end)
			return -1;
		if (*c.p == '}')
			break;
		if (*c.p++ != ',')
			return -1;
		ws(&c);
	}
close:
	s->close = c.p++;
	ws(&c);
	return c.p == c.end ? 0 : -1;
}

const struct scan_member *
scan_get(const struct scan_rec *s, const char *key)
{
	size_t n = strlen(key);
	int i;

	for (i = 0; i < s->n; i++)
		if (s->m[i].klen == n && memcmp(s->m[i].key, key, n) == 0)
			return &s->m[i];
	return NULL;
}

int
scan_str(const struct scan_member *m, char *buf, size_t len)
{
	size_t n;

	if (m == NULL || m->type != SCAN_STRING || m->escaped)
		return -1;
	n = m->vlen - 2;
	if (n >= len)
		return -1;
	memcpy(buf, m->val + 1, n);
	buf[n] = '\0';
	return (int)n;
}

int
scan_field(const struct scan_rec *s, const char *key, char *buf, size_t len,
    const char **v)
{
	const struct scan_member *m = scan_get(s, key);

	*v = NULL;
	if (m == NULL || m->type != SCAN_STRING)
		return 1;
	if (scan_str(m, buf, len) == -1)
		return -1;
	*v = buf;
	return 0;
}

void
scan_edit(const char *line, const struct scan_rec *s,
    const struct scan_set *set, int n, struct rec_buf *out)
{
	const struct scan_member *at[SCAN_SETS], *ta;
	const struct scan_set *order[SCAN_SETS], *ts;
	const char *p = line;
	int i, j, members = s->n;

	if (n > SCAN_SETS)
		n = SCAN_SETS;
	for (i = 0; i < n; i++) {
		order[i] = &set[i];
		at[i] = scan_get(s, set[i].key);
		/* By place in the line, the new ones last, in their order. */
		for (j = i; j > 0 && at[j] != NULL && (at[j - 1] == NULL ||
		    at[j]->val < at[j - 1]->val); j--) {
			ta = at[j], at[j] = at[j - 1], at[j - 1] = ta;
			ts = order[j], order[j] = order[j - 1],
			    order[j - 1] = ts;
		}
	}
	out->len = 0;
	for (i = 0; i < n && at[i] != NULL; i++) {
		rec_put(out, p, (size_t)(at[i]->val - p));
		rec_put(out, order[i]->text, strlen(order[i]->text));
		p = at[i]->val + at[i]->vlen;
	}
	rec_put(out, p, (size_t)(s->close - p));
	for (; i < n; i++) {
		if (members++ > 0)
			rec_puts(out, ",");
		rec_puts(out, "\"");
		rec_put(out, order[i]->key, strlen(order[i]->key));
		rec_puts(out, "\":");
		rec_put(out, order[i]->text, strlen(order[i]->text));
	}
	rec_puts(out, "}\n");
}
