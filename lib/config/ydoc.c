/* ydoc: a YAML document (libyaml events) as JSON (jansson), with key lines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <yaml.h>

#include "lib/config/ydoc.h"
#include "lib/base/num.h"
#include "lib/base/x.h"

#define CFG_DEPTH_MAX	64
#define CFG_FILE_MAX	(4 * 1024 * 1024)

struct conv {
	yaml_parser_t	 p;
	const char	*name;
	json_t		*lines;
	char		*err;
	size_t		 errlen;
	int		 depth;
};

static void
seterr(struct conv *cv, long line, const char *what)
{
	snprintf(cv->err, cv->errlen, "%s:%ld: %s", cv->name, line, what);
}

/* A plain scalar becomes null, a boolean, an integer or a real if it reads as one. */
static json_t *
scalar(const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	long l;
	double d;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return json_stringn(s, ev->data.scalar.length);
	if (strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || *s == '\0')
		return json_null();
	if (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0)
		return json_true();
	if (strcmp(s, "false") == 0 || strcmp(s, "no") == 0)
		return json_false();
	if (num_long(s, -9007199254740991L, 9007199254740991L, &l) == 0)
		return json_integer(l);
	if (num_double(s, -1e300, 1e300, &d) == 0)
		return json_real(d);
	return json_stringn(s, ev->data.scalar.length);
}

static json_t *node(struct conv *cv, yaml_event_t *ev, const char *path);

static int
next(struct conv *cv, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&cv->p, ev)) {
		snprintf(cv->err, cv->errlen, "%s:%lu: %s", cv->name,
		    (unsigned long)cv->p.problem_mark.line + 1,
		    cv->p.problem ? cv->p.problem : "YAML syntax error");
		return -1;
	}
	return 0;
}

static json_t *
mapping(struct conv *cv, const char *path)
{
	yaml_event_t ev;
	json_t *obj = json_object(), *v;
	char *sub, what[300];
	long line;

	for (;;) {
		if (next(cv, &ev) == -1)
			goto fail;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return obj;
		}
		line = (long)ev.start_mark.line + 1;
		if (ev.type != YAML_SCALAR_EVENT) {
			seterr(cv, line, "mapping key is not a scalar");
			yaml_event_delete(&ev);
			goto fail;
		}
		sub = *path ? xasprintf("%s.%s", path,
		    (char *)ev.data.scalar.value) :
		    xstrdup((char *)ev.data.scalar.value);
		if (json_object_get(obj, (char *)ev.data.scalar.value)) {
			snprintf(what, sizeof(what), "duplicate key \"%.200s\"",
			    (char *)ev.data.scalar.value);
			seterr(cv, line, what);
			yaml_event_delete(&ev);
			free(sub);
			goto fail;
		}
		json_object_set_new(cv->lines, sub, json_integer(line));
		{
			char *key = xstrdup((char *)ev.data.scalar.value);

			yaml_event_delete(&ev);
			if (next(cv, &ev) == -1) {
				free(key);
				free(sub);
				goto fail;
			}
			v = node(cv, &ev, sub);
			free(sub);
			if (v == NULL) {
				free(key);
				goto fail;
			}
			json_object_set_new(obj, key, v);
			free(key);
		}
	}
fail:
	json_decref(obj);
	return NULL;
}

static json_t *
sequence(struct conv *cv, const char *path)
{
	yaml_event_t ev;
	json_t *arr = json_array(), *v;
	char *sub;
	size_t i = 0;

	for (;;) {
		if (next(cv, &ev) == -1)
			goto fail;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return arr;
		}
		sub = xasprintf("%s.%zu", path, i++);
		v = node(cv, &ev, sub);
		free(sub);
		if (v == NULL)
			goto fail;
		json_array_append_new(arr, v);
	}
fail:
	json_decref(arr);
	return NULL;
}

/* Convert the node that starts with ev (which this function deletes). */
static json_t *
node(struct conv *cv, yaml_event_t *ev, const char *path)
{
	json_t *v = NULL;
	long line = (long)ev->start_mark.line + 1;

	if (++cv->depth > CFG_DEPTH_MAX) {
		seterr(cv, line, "nesting too deep");
		yaml_event_delete(ev);
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		v = scalar(ev);
		break;
	case YAML_MAPPING_START_EVENT:
		yaml_event_delete(ev);
		v = mapping(cv, path);
		cv->depth--;
		return v;
	case YAML_SEQUENCE_START_EVENT:
		yaml_event_delete(ev);
		v = sequence(cv, path);
		cv->depth--;
		return v;
	case YAML_ALIAS_EVENT:
		seterr(cv, line, "aliases are not supported");
		break;
	default:
		seterr(cv, line, "unexpected YAML event");
		break;
	}
	yaml_event_delete(ev);
	cv->depth--;
	return v;
}

struct ydoc *
ydoc_parse(const char *name, const char *text, size_t len, char *err,
    size_t errlen)
{
	struct conv cv;
	yaml_event_t ev;
	struct ydoc *c;
	json_t *root = NULL;
	int done = 0;

	memset(&cv, 0, sizeof(cv));
	cv.name = name;
	cv.err = err;
	cv.errlen = errlen;
	cv.lines = json_object();
	if (!yaml_parser_initialize(&cv.p)) {
		snprintf(err, errlen, "%s: out of memory", name);
		json_decref(cv.lines);
		return NULL;
	}
	yaml_parser_set_input_string(&cv.p, (const unsigned char *)text, len);
	while (!done) {
		if (next(&cv, &ev) == -1)
			goto fail;
		switch (ev.type) {
		case YAML_DOCUMENT_START_EVENT:
			if (root != NULL) {
				seterr(&cv, (long)ev.start_mark.line + 1,
				    "more than one document");
				yaml_event_delete(&ev);
				goto fail;
			}
			/* FALLTHROUGH */
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			yaml_event_delete(&ev);
			break;
		case YAML_STREAM_END_EVENT:
			yaml_event_delete(&ev);
			done = 1;
			break;
		default:
			if (root != NULL) {
				seterr(&cv, (long)ev.start_mark.line + 1,
				    "more than one document");
				yaml_event_delete(&ev);
				goto fail;
			}
			if ((root = node(&cv, &ev, "")) == NULL)
				goto fail;
			break;
		}
	}
	if (root == NULL || json_is_null(root)) {
		json_decref(root);
		root = json_object();
	}
	if (!json_is_object(root)) {
		seterr(&cv, 1, "top level is not a mapping");
		goto fail;
	}
	yaml_parser_delete(&cv.p);
	c = xcalloc(1, sizeof(*c));
	c->path = xstrdup(name);
	c->root = root;
	c->lines = cv.lines;
	return c;
fail:
	json_decref(root);
	json_decref(cv.lines);
	yaml_parser_delete(&cv.p);
	return NULL;
}

struct ydoc *
ydoc_load(const char *path, char *err, size_t errlen)
{
	FILE *f;
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	struct ydoc *c;

	if ((f = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (cap - len < 8192) {
			cap = cap ? cap * 2 : 16384;
			buf = xrealloc(buf, cap);
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (len > CFG_FILE_MAX) {
			snprintf(err, errlen, "%s: file larger than %d bytes",
			    path, CFG_FILE_MAX);
			fclose(f);
			free(buf);
			return NULL;
		}
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "read %s: %s", path, strerror(errno));
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	c = ydoc_parse(path, buf, len, err, errlen);
	free(buf);
	return c;
}

long
ydoc_line(const struct ydoc *c, const char *keypath)
{
	json_t *v;

	if (c == NULL || (v = json_object_get(c->lines, keypath)) == NULL)
		return 0;
	return (long)json_integer_value(v);
}

void
ydoc_free(struct ydoc *c)
{
	if (c == NULL)
		return;
	free(c->path);
	json_decref(c->root);
	json_decref(c->lines);
	free(c);
}
