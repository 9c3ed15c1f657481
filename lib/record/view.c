/*
 * view: a record read and edited through its text while it can be, through
 * a jansson tree once it must be.  view.h says when.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/base/x.h"
#include "lib/record/view.h"

#define STR_MAX		(REC_STREAM_MAX + 1)

/* A member set while the view holds text: its key and JSON text. */
struct set {
	const char	*key;		/* a constant of the stage's */
	size_t		 at;		/* the text's place in the set buffer */
	size_t		 len;
};

struct view {
	const char	*line;		/* the text, when text */
	size_t		 len;
	json_t		*tree;		/* the tree, once it was needed */
	struct scan_rec	 s;
	const char	*str[SCAN_MEMBERS];	/* members read, unquoted */
	char		*arena;		/* ... kept here */
	size_t		 asize, aused;
	struct set	 set[SCAN_SETS];
	int		 nset;
	struct rec_buf	 sets;		/* the sets' texts, each ended by NUL */
	struct rec_buf	 out;		/* the text put out */
	int		 ok;		/* opened on a record */
};

struct view *
view_new(void)
{
	return xcalloc(1, sizeof(struct view));
}

void
view_free(struct view *v)
{
	if (v == NULL)
		return;
	json_decref(v->tree);
	free(v->arena);
	free(v->sets.s);
	free(v->out.s);
	free(v);
}

static void
reset(struct view *v)
{
	json_decref(v->tree);
	v->tree = NULL;
	v->line = NULL;
	v->len = 0;
	v->nset = 0;
	v->sets.len = 0;
	v->aused = 0;
	v->ok = 0;
}

int
view_open(struct view *v, const char *line, size_t len, char *err,
    size_t errlen)
{
	reset(v);
	if (scan_record(line, len, &v->s) == 0) {
		/* Every string read fits in the arena: they are the line's. */
		if (v->asize < len + 1) {
			free(v->arena);
			v->asize = len + 1;
			v->arena = xmalloc(v->asize);
		}
		memset(v->str, 0, sizeof(v->str[0]) * (size_t)v->s.n);
		v->line = line;
		v->len = len;
		v->ok = 1;
		return 0;
	}
	if ((v->tree = rec_parse(line, len, err, errlen)) == NULL)
		return -1;
	v->ok = 1;
	return 0;
}

void
view_open_tree(struct view *v, json_t *rec)
{
	reset(v);
	v->tree = rec;
	v->ok = 1;
}

int
view_is_text(const struct view *v)
{
	return v->tree == NULL;
}

/* The tree the text stands for, with what was set on it. */
json_t *
view_tree(struct view *v)
{
	char err[256];
	json_t *val;
	int i;

	if (v->tree != NULL || !v->ok)
		return v->tree;
	/*
	 * scan accepts nothing that jansson refuses (tests/fuzz/scan.c), so
	 * this cannot fail; were it to, the record would be dead, not lost.
	 */
	if ((v->tree = rec_parse(v->line, v->len, err, sizeof(err))) == NULL)
		v->tree = rec_bad_input("rfpipe", 0, err, v->line, v->len);
	for (i = 0; i < v->nset; i++) {
		val = json_loadb(v->sets.s + v->set[i].at, v->set[i].len,
		    JSON_DECODE_ANY, NULL);
		json_object_set_new(v->tree, v->set[i].key, val ? val :
		    json_null());
	}
	v->nset = 0;
	return v->tree;
}

/* The scanned member key, or NULL; the tree when the key was set. */
static const struct scan_member *
member(struct view *v, const char *key)
{
	int i;

	for (i = 0; i < v->nset; i++)
		if (strcmp(v->set[i].key, key) == 0) {
			view_tree(v);
			return NULL;
		}
	return scan_get(&v->s, key);
}

/* The scan type of a jansson value: what view_type says of a member. */
int
view_jtype(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_STRING:
		return SCAN_STRING;
	case JSON_INTEGER:
		return SCAN_INTEGER;
	case JSON_REAL:
		return SCAN_REAL;
	case JSON_TRUE:
		return SCAN_TRUE;
	case JSON_FALSE:
		return SCAN_FALSE;
	case JSON_OBJECT:
		return SCAN_OBJECT;
	case JSON_ARRAY:
		return SCAN_ARRAY;
	default:
		return SCAN_NULL;
	}
}

int
view_type(struct view *v, const char *key)
{
	const struct scan_member *m;
	json_t *j;

	if (v->tree == NULL && v->ok) {
		m = member(v, key);
		if (v->tree == NULL)
			return m == NULL ? -1 : (int)m->type;
	}
	if ((j = json_object_get(v->tree, key)) == NULL)
		return -1;
	return view_jtype(j);
}

const char *
view_str(struct view *v, const char *key)
{
	const struct scan_member *m;
	char *p;
	int i, n;

	if (v->tree == NULL && v->ok) {
		m = member(v, key);
		if (v->tree == NULL) {
			if (m == NULL || m->type != SCAN_STRING)
				return NULL;
			i = (int)(m - v->s.m);
			if (v->str[i] != NULL)
				return v->str[i];
			p = v->arena + v->aused;
			n = scan_str(m, p, v->asize - v->aused);
			if (n >= 0) {
				v->aused += (size_t)n + 1;
				return v->str[i] = p;
			}
			view_tree(v);	/* an escape: jansson reads it */
		}
	}
	return json_string_value(json_object_get(v->tree, key));
}

long
view_int(struct view *v, const char *key, long def)
{
	const struct scan_member *m;
	json_t *j;

	if (v->tree == NULL && v->ok) {
		m = member(v, key);
		if (v->tree == NULL)
			return m != NULL && m->type == SCAN_INTEGER ?
			    strtol(m->val, NULL, 10) : def;
	}
	j = json_object_get(v->tree, key);
	return json_is_integer(j) ? (long)json_integer_value(j) : def;
}

double
view_num(struct view *v, const char *key, double def)
{
	const struct scan_member *m;
	json_t *j;

	if (v->tree == NULL && v->ok) {
		m = member(v, key);
		if (v->tree == NULL)
			return m != NULL && (m->type == SCAN_INTEGER ||
			    m->type == SCAN_REAL) ? strtod(m->val, NULL) : def;
	}
	j = json_object_get(v->tree, key);
	return json_is_number(j) ? json_number_value(j) : def;
}

/*
 * Set key to the JSON text t (n bytes) while the view holds text, or to
 * val on the tree (taken).  A key set twice keeps its last value.
 */
static void
set(struct view *v, const char *key, const char *t, size_t n, json_t *val)
{
	int i;

	if (!v->ok) {
		json_decref(val);
		return;
	}
	if (v->tree == NULL) {
		for (i = 0; i < v->nset && strcmp(v->set[i].key, key); i++)
			;
		if (i < SCAN_SETS && t != NULL) {
			v->set[i].key = key;
			v->set[i].at = v->sets.len;
			v->set[i].len = n;
			rec_put(&v->sets, t, n);
			rec_put(&v->sets, "", 1);
			if (i == v->nset)
				v->nset++;
			json_decref(val);
			return;
		}
		view_tree(v);
	}
	if (val == NULL && t != NULL)
		val = json_loadb(t, n, JSON_DECODE_ANY, NULL);
	json_object_set_new(v->tree, key, val ? val : json_null());
}

/* Set key to the value val, its text written by jansson. */
static void
set_json(struct view *v, const char *key, json_t *val)
{
	char buf[256], *big = NULL, *t = buf;
	size_t n = 0;

	if (val != NULL && v->tree == NULL) {
		n = json_dumpb(val, buf, sizeof(buf), JSON_ENCODE_ANY);
		if (n > sizeof(buf)) {
			big = xmalloc(n);
			n = json_dumpb(val, big, n, JSON_ENCODE_ANY);
			t = big;
		}
	}
	set(v, key, n > 0 ? t : val == NULL ? "null" : NULL, n > 0 ? n :
	    val == NULL ? 4 : 0, val);
	free(big);
}

void
view_set_str(struct view *v, const char *key, const char *s)
{
	char buf[128];
	size_t n;

	/* The common case, plain ASCII, without jansson. */
	if (s != NULL && (n = strlen(s)) + 2 < sizeof(buf) &&
	    strspn(s, " !#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTU"
	    "VWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~") == n &&
	    v->tree == NULL) {
		buf[0] = '"';
		memcpy(buf + 1, s, n);
		buf[n + 1] = '"';
		set(v, key, buf, n + 2, NULL);
		return;
	}
	/* Not UTF-8: null, as jansson would refuse it. */
	set_json(v, key, s != NULL ? json_string(s) : json_null());
}

void
view_set_int(struct view *v, const char *key, long n)
{
	char buf[32];

	if (v->tree != NULL)
		set(v, key, NULL, 0, json_integer(n));
	else
		set(v, key, buf, (size_t)snprintf(buf, sizeof(buf), "%ld", n),
		    NULL);
}

void
view_set_real(struct view *v, const char *key, double d)
{
	set_json(v, key, json_real(d));
}

void
view_set_null(struct view *v, const char *key)
{
	set(v, key, "null", 4, json_null());
}

void
view_set_true(struct view *v, const char *key)
{
	set(v, key, "true", 4, json_true());
}

void
view_kill(struct view *v, enum fate_reason reason, const char *detail)
{
	view_set_str(v, "fate", fate_name(FATE_DEAD));
	view_set_str(v, "dead_reason", fate_reason(reason));
	if (detail != NULL)
		view_set_str(v, "dead_detail", detail);
}

const char *
view_text(struct view *v, size_t *len)
{
	struct scan_set e[SCAN_SETS];
	int i;

	if (!v->ok)
		return NULL;
	if (v->tree != NULL) {
		v->out.len = 0;
		if (rec_dump_to(&v->out, v->tree) == -1)
			return NULL;
		*len = v->out.len;
		return v->out.s;
	}
	if (v->nset > 0) {
		for (i = 0; i < v->nset; i++) {
			e[i].key = v->set[i].key;
			e[i].text = v->sets.s + v->set[i].at;
		}
		scan_edit(v->line, &v->s, e, v->nset, &v->out);
		*len = v->out.len;
		return v->out.s;
	}
	/* As it came, up to its closing brace. */
	v->out.len = 0;
	rec_put(&v->out, v->line, (size_t)(v->s.close + 1 - v->line));
	rec_puts(&v->out, "\n");
	*len = v->out.len;
	return v->out.s;
}
