/*
 * rfp-report's reading: the run directory's files, each opened read-only
 * and never locked, written or made: results.ndjson and dead.ndjson (the
 * documents, counted by lib/accounts/summ), summary.json (the last
 * pipeline's reconciliation), logs/attempts.ndjson (the requests, delays,
 * breakers and paces) and state/claims.ndjson (ids admitted).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/attlog.h"
#include "lib/accounts/filed.h"
#include "lib/accounts/summ.h"
#include "cmd/msg.h"
#include "lib/record/fate.h"
#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/base/x.h"
#include "report/report.h"

typedef void line_fn(struct rep *r, json_t *line, int dead);

static struct rep_ep *
ep_get(struct rep *r, const char *name)
{
	struct rep_ep *e, **tail = &r->eps;

	if (name == NULL)
		name = "(none)";
	for (e = r->eps; e != NULL; tail = &e->next, e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	e = xcalloc(1, sizeof(*e));
	e->name = xstrdup(name);
	e->summ = summ_new();
	e->errors = json_object();
	*tail = e;
	return e;
}

static void
ev_add(struct rep_ep *e, double at, char kind, int out, double rate)
{
	if (e->nev == e->capev) {
		e->capev = e->capev ? 2 * e->capev : 64;
		e->ev = xrealloc(e->ev, e->capev * sizeof(*e->ev));
	}
	e->ev[e->nev].at = at;
	e->ev[e->nev].kind = kind;
	e->ev[e->nev].out = out;
	e->ev[e->nev].rate = rate;
	e->nev++;
}

static void
seen(struct rep *r, const char *id)
{
	if (id != NULL && json_object_get(r->seen, id) == NULL) {
		json_object_set_new(r->seen, id, json_true());
		json_array_append_new(r->pending, json_string(id));
	}
}

/* Read path a line at a time into fn; 0 when absent, -1 on a read error. */
static int
each_line(struct rep *r, const char *path, line_fn *fn, int dead)
{
	struct rec_reader *rd;
	char *line, err[128];
	size_t len;
	long lineno;
	json_t *j;
	int fd, rc;

	if ((fd = files_open_read(path)) == -1) {
		if (errno == ENOENT)
			return 0;
		if (errno == EINVAL)
			msg_warn("%s: not a regular file", path);
		else
			msg_warn("open %s: %s", path, files_why(errno));
		return -1;
	}
	rd = rec_reader_new(fd, REC_STREAM_MAX);
	while ((rc = rec_next(rd, &line, &len, &lineno)) != REC_EOF &&
	    rc != REC_ERR) {
		/* A torn last line of a killed run is skipped, said once. */
		if (rc != REC_LINE || (j = rec_parse(line, len, err,
		    sizeof(err))) == NULL) {
			msg_warn("%s:%ld: unreadable line, skipped", path,
			    lineno);
			continue;
		}
		r->path = path;
		r->lineno = lineno;
		fn(r, j, dead);
		json_decref(j);
	}
	if (rc == REC_ERR)
		msg_warnsys("read %s", path);
	rec_reader_free(rd);
	close(fd);
	return rc == REC_ERR ? -1 : 0;
}

/*
 * A document's record, filed as dead or not, counted (rep_load's end);
 * path and lineno say where it was read.
 */
static void
doc_count(struct rep *r, json_t *rec, int dead, const char *path,
    long lineno)
{
	const char *id = rec_str(rec, "id"), *why;
	struct rep_ep *e;
	json_t *list;

	e = ep_get(r, rec_str(rec, "endpoint"));
	summ_add(r->all, rec);
	summ_add(e->summ, rec);
	if (id != NULL)
		json_object_set_new(r->filed, id, json_true());
	seen(r, id);
	if (!dead || fate_of(rec_str(rec, "fate")) == FATE_DONE)
		return;
	if (json_object_get(rec, "dead_reason") != NULL &&
	    rec_str(rec, "dead_reason") == NULL)
		msg_warn("%s:%ld: field \"dead_reason\": not a string; "
		    "counted as %s", path, lineno, fate_reason(FATE_BAD_INPUT));
	why = rec_str(rec, "dead_reason") ? rec_str(rec, "dead_reason") :
	    fate_reason(FATE_BAD_INPUT);
	if ((list = json_object_get(r->dead_by, why)) == NULL) {
		list = json_array();
		json_object_set_new(r->dead_by, why, list);
	}
	if (json_array_size(list) < REP_DEAD_LISTED)
		json_array_append_new(list, json_pack("{s:s,s:s,s:s}", "id",
		    id ? id : "?", "ep", e->name, "detail",
		    rec_str(rec, "dead_detail") ? rec_str(rec, "dead_detail") :
		    ""));
}

/*
 * A line of results.ndjson or dead.ndjson.  An id's lines are counted
 * once, as rfp-fetch reads them (filed_weight): a result over any letter,
 * a letter over a deadline cut, and of lines of one weight the last.  dead.ndjson holds the letters a later filing superseded until the
 * last sink of the run directory compacts it (a run going on, or another
 * pipeline's, or one killed), and each line counted read 40 documents as
 * 41.  A result filed twice in results.ndjson is no sink's doing: named.
 */
static void
doc_line(struct rep *r, json_t *rec, int dead)
{
	const char *id = rec_str(rec, "id");
	enum filed_as weight;
	json_t *was;

	/* A stray line's letter is no document's, nor an endpoint's. */
	if (dead && summ_stray(rec_str(rec, "fate"), id, rec_str(rec,
	    REC_LINE_KEY))) {
		summ_add(r->all, rec);
		return;
	}
	if (id == NULL) {
		doc_count(r, rec, dead, r->path, r->lineno);
		return;
	}
	weight = filed_weight(!dead, rec_str(rec, "dead_reason"));
	if ((was = json_object_get(r->chosen, id)) == NULL)
		json_array_append_new(r->order, json_string(id));
	else if (json_integer_value(json_array_get(was, 0)) > weight)
		return;
	else if (weight == FILED_DONE)
		msg_warn("%s:%ld: id \"%s\" has a result already; counted "
		    "once", r->path, r->lineno, id);
	json_object_set_new(r->chosen, id, json_pack("[i,O,s,I]", (int)weight,
	    rec, r->path, (json_int_t)r->lineno));
}

const char *
rep_error_key(const json_t *line, char *buf, size_t len)
{
	const char *err = rec_str(line, "error");
	long st = rec_int(line, "status", 0);

	if (st > 0)
		snprintf(buf, len, "http_%ld", st);
	else
		snprintf(buf, len, "%s", err ? err : "unknown");
	return buf;
}

static double
mind(double a, double b)
{
	return a == 0 || (b != 0 && b < a) ? b : a;
}

/* One line of the attempt log. */
static void
log_line(struct rep *r, json_t *l, int unused)
{
	const char *to, *k;
	struct rep_ep *e;
	double at = rec_num(l, "at", 0);
	long st;
	char key[64];
	int out;

	(void)unused;
	r->has_log = 1;
	r->t0 = mind(r->t0, at);
	if (at > r->t1)
		r->t1 = at;
	switch (attlog_type(rec_str(l, "t"))) {
	case ATTLOG_START:
		if (rec_num(l, "deadline", 0) > r->deadline)
			r->deadline = rec_num(l, "deadline", 0);
		if (rec_num(l, "scale", 0) > 0)
			r->scale = rec_num(l, "scale", 1);
		return;
	case ATTLOG_REQ:
		seen(r, rec_str(l, "id"));
		if (json_is_true(json_object_get(l, "confirm")))
			return;	/* a status check: not an attempt */
		e = ep_get(r, rec_str(l, "ep"));
		if (rec_str(l, "error") != NULL && strcmp(rec_str(l, "error"),
		    "stopped") == 0) {
			r->dropped++;
			return;
		}
		r->t0 = mind(r->t0, rec_num(l, "sent", 0));
		st = rec_int(l, "status", 0);
		out = st >= 100 && st < 400 ? OUT_OK : st == 429 || st == 503 ?
		    OUT_REFUSED : OUT_FAILED;
		e->n[out]++;
		e->reqs++;
		r->reqs++;
		if (st == 429) {
			e->http_429++;
			r->http_429++;
		}
		if (out != OUT_OK) {
			k = rep_error_key(l, key, sizeof(key));
			json_object_set_new(e->errors, k, json_integer(
			    json_integer_value(json_object_get(e->errors, k)) +
			    1));
		}
		ev_add(e, at, 'q', out, 0);
		return;
	case ATTLOG_DELAY:
		seen(r, rec_str(l, "id"));
		e = ep_get(r, rec_str(l, "ep"));
		e->retries++;
		r->retries++;
		ev_add(e, at, 'y', 0, 0);
		return;
	case ATTLOG_PACE:
		e = ep_get(r, rec_str(l, "ep"));
		ev_add(e, at, 'p', 0, rec_num(l, "rate", 0));
		return;
	case ATTLOG_BREAKER:
		e = ep_get(r, rec_str(l, "ep"));
		to = rec_str(l, "to") ? rec_str(l, "to") : "";
		out = strcmp(to, "open") == 0 ? 1 : strcmp(to, "half_open") ==
		    0 ? 2 : 0;
		/* Each pipeline logs what it saw: the same change once. */
		if (e->nev > 0) {
			size_t i = e->nev;

			while (i-- > 0)
				if (e->ev[i].kind == 'b')
					break;
			if (i < e->nev && e->ev[i].at == at &&
			    e->ev[i].out == out)
				return;
		}
		if (out == 1) {
			e->openings++;
			r->openings++;
		}
		ev_add(e, at, 'b', out, 0);
		return;
	default:
		return;	/* a type of a later version */
	}
}

static void
claim_line(struct rep *r, json_t *l, int unused)
{
	(void)unused;
	seen(r, rec_str(l, "id"));
}

int
rep_load(struct rep *r, const char *dir)
{
	static const struct {
		enum rundir_file f;
		line_fn *fn;
		int dead;
	} files[] = {
		{ RUNDIR_ATTEMPTS, log_line, 0 },
		{ RUNDIR_CLAIMS, claim_line, 0 },
		{ RUNDIR_RESULTS, doc_line, 0 },
		{ RUNDIR_DEAD, doc_line, 1 }
	};
	json_error_t je;
	json_t *left, *rec;
	size_t i;
	char *path;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->dir = dir;
	r->all = summ_new();
	r->dead_by = json_object();
	r->filed = json_object();
	r->seen = json_object();
	r->pending = json_array();
	r->chosen = json_object();
	r->order = json_array();
	r->scale = 1;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path = rundir_path(dir, files[i].f, NULL);
		if (each_line(r, path, files[i].fn, files[i].dead) == -1)
			rc = -1;
		free(path);
	}
	for (i = 0; i < json_array_size(r->order); i++) {
		rec = json_object_get(r->chosen, json_string_value(
		    json_array_get(r->order, i)));
		doc_count(r, json_array_get(rec, 1), json_integer_value(
		    json_array_get(rec, 0)) != FILED_DONE, json_string_value(
		    json_array_get(rec, 2)), (long)json_integer_value(
		    json_array_get(rec, 3)));
	}
	json_decref(r->chosen);
	json_decref(r->order);
	r->chosen = r->order = NULL;
	path = rundir_path(dir, RUNDIR_SUMMARY, NULL);
	if ((r->summary = files_load(path, 0, &je)) == NULL &&
	    access(path, F_OK) == 0) {
		if (je.line > 0)
			msg_warn("%s: %s at line %d, column %d", path,
			    rec_json_why(&je), je.line, je.column);
		else
			msg_warn("%s: %s", path, rec_json_why(&je));
		rc = -1;
	} else if (r->summary != NULL && !json_is_object(r->summary)) {
		msg_warn("%s: not a JSON object; not read", path);
		json_decref(r->summary);
		r->summary = NULL;
		rc = -1;
	}
	free(path);
	/* Pending: every id seen, less those filed, in the order seen. */
	left = json_array();
	for (i = 0; i < json_array_size(r->pending); i++)
		if (json_object_get(r->filed, json_string_value(
		    json_array_get(r->pending, i))) == NULL)
			json_array_append(left, json_array_get(r->pending, i));
	json_decref(r->pending);
	r->pending = left;
	r->succeeded = summ_count(r->all, "succeeded");
	r->dead = summ_count(r->all, "dead");
	r->stray = summ_count(r->all, "stray_lines");
	return rc;
}

/* Order [key, n] pairs by n, most first, then by key. */
static int
by_count(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	json_int_t m = json_integer_value(json_array_get(x, 1));
	json_int_t n = json_integer_value(json_array_get(y, 1));

	if (m != n)
		return m < n ? 1 : -1;
	return strcmp(json_string_value(json_array_get(x, 0)),
	    json_string_value(json_array_get(y, 0)));
}

json_t *
rep_top_errors(const struct rep_ep *e)
{
	json_t **v, *out = json_array(), *n;
	const char *k;
	size_t i = 0, cnt = json_object_size(e->errors);

	v = xcalloc(cnt ? cnt : 1, sizeof(*v));
	json_object_foreach((json_t *)e->errors, k, n)
		v[i++] = json_pack("[s,O]", k, n);
	qsort(v, cnt, sizeof(*v), by_count);
	for (i = 0; i < cnt; i++)
		json_array_append_new(out, v[i]);
	free(v);
	return out;
}

void
rep_free(struct rep *r)
{
	struct rep_ep *e, *en;

	for (e = r->eps; e != NULL; e = en) {
		en = e->next;
		summ_free(e->summ);
		json_decref(e->errors);
		free(e->ev);
		free(e->name);
		free(e);
	}
	summ_free(r->all);
	json_decref(r->dead_by);
	json_decref(r->summary);
	json_decref(r->filed);
	json_decref(r->seen);
	json_decref(r->pending);
}
