/* summ: counting records and reconciling them with what was admitted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/base/clk.h"
#include "lib/record/fate.h"
#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/record/view.h"
#include "lib/state/files.h"
#include "lib/accounts/summ.h"
#include "lib/base/x.h"

struct summ {
	json_t	*t;	/* {"succeeded":n,"dead":n,"dead_by_reason":{},...} */
	json_t	*tot;	/* the same of the run directory's files, once read */
	json_t	*out;	/* summary.json's document, once finished */
	char	*rundir;	/* ... of this run directory */
	char	*problems;	/* what summ_finish met, a line each */
	size_t	 plen;
	int	 stopped;	/* the signal that stopped the run, or 0 */
};

static void problem(struct summ *, const char *, ...)
    __attribute__((format(printf, 2, 3)));

/* Note a problem for the stage to tell. */
static void
problem(struct summ *s, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	s->problems = xrealloc(s->problems, s->plen + (size_t)n + 2);
	memcpy(s->problems + s->plen, line, (size_t)n);
	s->plen += (size_t)n;
	s->problems[s->plen++] = '\n';
	s->problems[s->plen] = '\0';
}

static json_t *
tally(void)
{
	json_t *t = json_object(), *r = json_object();
	int i;

	json_object_set_new(t, "succeeded", json_integer(0));
	json_object_set_new(t, "dead", json_integer(0));
	json_object_set_new(t, "stray_lines", json_integer(0));
	for (i = 0; i < FATE_NREASONS; i++)
		json_object_set_new(r, fate_reason(i), json_integer(0));
	json_object_set_new(t, "dead_by_reason", r);
	return t;
}

static void
inc(json_t *obj, const char *key, long by)
{
	json_t *v = json_object_get(obj, key);

	json_object_set_new(obj, key, json_integer((v ?
	    json_integer_value(v) : 0) + by));
}

struct summ *
summ_new(void)
{
	struct summ *s = xcalloc(1, sizeof(*s));

	s->t = tally();
	json_object_set_new(s->t, "attempts", json_integer(0));
	json_object_set_new(s->t, "retries", json_integer(0));
	json_object_set_new(s->t, "http_429", json_integer(0));
	json_object_set_new(s->t, "endpoints", json_object());
	return s;
}

int
summ_stray(const char *fate, const char *id, const char *line_key)
{
	return fate_of(fate) != FATE_DONE && fate_of(fate) != FATE_RETRY &&
	    id == NULL && line_key == NULL;
}

/*
 * Count a terminal record into tally t.  A dead letter without a reason of
 * the table (none, or one a hand-made record invented) counts as
 * bad_input: dead_by_reason keeps the table's keys and no others.  A
 * stray line's letter is no document's: counted apart.
 */
static void
count(json_t *t, const char *fate, const char *why, int stray)
{
	if (stray)
		inc(t, "stray_lines", 1);
	else if (fate_of(fate) == FATE_DONE)
		inc(t, "succeeded", 1);
	else {
		inc(t, "dead", 1);
		inc(json_object_get(t, "dead_by_reason"), why != NULL &&
		    fate_reason_of(why) != -1 ? why :
		    fate_reason(FATE_BAD_INPUT), 1);
	}
}

void
summ_add_in(struct summ *s, const struct summ_in *in)
{
	/* An empty one is none: rfp-fetch refused it (bad_input). */
	const char *ep = in->endpoint && *in->endpoint ? in->endpoint :
	    "(none)";
	json_t *eps, *e;

	if (in->attempted)
		inc(s->t, "attempts", 1);
	if (in->http_429)
		inc(s->t, "http_429", 1);
	if (fate_of(in->fate) == FATE_RETRY) {
		inc(s->t, "retries", 1);
		return;
	}
	count(s->t, in->fate, in->dead_reason, in->stray);
	/* A stray line is no endpoint's document either. */
	if (in->stray)
		return;
	eps = json_object_get(s->t, "endpoints");
	if ((e = json_object_get(eps, ep)) == NULL) {
		e = tally();
		json_object_set_new(eps, ep, e);
	}
	count(e, in->fate, in->dead_reason, 0);
	/* What the operator reads first of an endpoint that never answered. */
	if (fate_of(in->fate) == FATE_DEAD && in->reason != NULL)
		json_object_set_new(e, "last_error", json_string(
		    strcmp(in->reason, "connect") == 0 || strcmp(in->reason,
		    "dns") == 0 ? "unreachable" : in->reason));
}

void
summ_add(struct summ *s, const json_t *rec)
{
	struct summ_in in;

	in.fate = rec_str(rec, "fate");
	in.endpoint = rec_str(rec, "endpoint");
	in.dead_reason = rec_str(rec, "dead_reason");
	in.attempted = json_object_get(rec, "status") != NULL ||
	    json_object_get(rec, "error") != NULL;
	in.http_429 = rec_int(rec, "status", 0) == 429;
	in.reason = rec_str(rec, "reason");
	in.stray = summ_stray(in.fate, rec_str(rec, "id"), rec_str(rec,
	    REC_LINE_KEY));
	summ_add_in(s, &in);
}

/* Recount a results or dead file into t; -1 when it cannot be read. */
static int
recount(struct summ *s, json_t *t, const char *path)
{
	struct rec_reader *r;
	struct view *v;
	char *line, err[128];
	size_t len;
	long lineno;
	int fd, rc;

	if ((fd = files_open_read(path)) == -1)
		return errno == ENOENT ? 0 : -1;
	r = rec_reader_new(fd, REC_STREAM_MAX);
	v = view_new();
	while ((rc = rec_next(r, &line, &len, &lineno)) != REC_EOF) {
		if (rc == REC_ERR)
			break;
		if (rc == REC_LINE && len == 0)
			continue;	/* blank lines are skipped */
		if (rc != REC_LINE || view_open(v, line, len, err,
		    sizeof(err)) == -1) {
			problem(s, "%s:%ld: unreadable record", path, lineno);
			continue;
		}
		count(t, view_str(v, "fate"), view_str(v, "dead_reason"),
		    summ_stray(view_str(v, "fate"), view_str(v, "id"),
		    view_str(v, REC_LINE_KEY)));
	}
	view_free(v);
	rec_reader_free(r);
	close(fd);
	return rc == REC_ERR ? -1 : 0;
}

/* Budget and breaker state, for the report. */
static void
state_report(json_t *out, const char *rundir)
{
	char *path, err[512];
	json_t *doc, *br = json_object();
	struct dirent *de;
	DIR *d;

	path = rundir_state(rundir, "budget", NULL);
	if (files_read(path, &doc, err, sizeof(err)) == 0 && doc != NULL)
		json_object_set_new(out, "budget", doc);
	else
		json_object_set_new(out, "budget", json_null());
	free(path);
	path = rundir_path(rundir, RUNDIR_STATE, "breaker");
	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			char *p;
			size_t n = strlen(de->d_name);

			if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
				continue;
			p = xasprintf("%s/%s", path, de->d_name);
			if (files_read(p, &doc, err, sizeof(err)) == 0 &&
			    doc != NULL) {
				json_t *ep = json_object_get(doc, "endpoint");

				json_object_set(br, json_is_string(ep) ?
				    json_string_value(ep) : de->d_name, doc);
				json_decref(doc);
			}
			free(p);
		}
		closedir(d);
	}
	free(path);
	json_object_set_new(out, "breakers", br);
}

static long
geti(const json_t *o, const char *k)
{
	return (long)json_integer_value(json_object_get(o, k));
}

/*
 * s for the terminal, into buf: a control byte (an escape sequence, a
 * newline) of a record's endpoint or reason becomes '?'.
 */
static const char *
shown(char *buf, size_t len, const char *s)
{
	if (s == NULL)
		return NULL;
	snprintf(buf, len, "%s", s);
	return rec_shown(buf);
}

/*
 * The table as it is written, grown as it needs: one row per endpoint and
 * breaker, so no fixed size holds every batch, and a table cut short
 * would lose its end, the reconciliation and the totals.
 */
struct tbuf {
	char	*p;
	size_t	 len, cap;
};

static void
tprintf(struct tbuf *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t->p ? t->p + t->len : NULL, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= t->cap - t->len) {
		while ((size_t)n >= t->cap - t->len)
			t->cap = t->cap ? 2 * t->cap : 4096;
		t->p = xrealloc(t->p, t->cap);
		va_start(ap, fmt);
		vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
	}
	t->len += (size_t)n;
}

char *
summ_table(const struct summ *sm)
{
	const json_t *s = sm->out;
	const char *rundir = sm->rundir;
	const json_t *run = json_object_get(s, "run");
	const json_t *by = json_object_get(run, "dead_by_reason");
	const json_t *eps = json_object_get(run, "endpoints"), *e, *b;
	const json_t *adm = json_object_get(s, "admitted");
	const json_t *tot = json_object_get(s, "totals"), *br, *v;
	const char *k;
	struct tbuf t = { NULL, 0, 0 };
	char b1[128], b2[128], cuts[32], *rd;
	long cut, dead, ecut;
	int i;

	if (s == NULL)
		return NULL;
#define P(...) tprintf(&t, __VA_ARGS__)
	/* A control character in its name is not the terminal's. */
	rd = rec_shown(xstrdup(rundir));
	P("rfpipe: summary of %s (%.1f s)\n", rd,
	    json_number_value(json_object_get(s, "wall_s")));
	free(rd);
	if (json_is_integer(adm))
		P("  admitted        %7ld\n", (long)json_integer_value(adm));
	/*
	 * A cut is filed in dead.ndjson (reason deadline_cut) and counted in
	 * run.dead, but the table keeps the two apart, each once: listed
	 * under dead-lettered too, 45 cuts read as 125 documents of 80.
	 */
	cut = summ_tally_cut(run);
	dead = geti(run, "dead") - cut;
	P("  succeeded       %7ld\n", geti(run, "succeeded"));
	P("  dead-lettered   %7ld\n", dead);
	for (i = 0; i < FATE_NREASONS; i++)
		if (i != FATE_DEADLINE_CUT && geti(by, fate_reason(i)) > 0)
			P("    %-16s%5ld\n", fate_reason(i), geti(by,
			    fate_reason(i)));
	P("  cut (deadline)  %7ld\n", cut);
	if (cut > 0)
		snprintf(cuts, sizeof(cuts), " + cut %ld", cut);
	else
		cuts[0] = '\0';
	if (geti(run, "stray_lines") > 0)
		P("  stray lines     %7ld  lines between the stages with no "
		    "id: no document's fate, kept in %s\n", geti(run,
		    "stray_lines"), rundir_name(RUNDIR_DEAD));
	if (geti(json_object_get(s, "fetch"), "skipped") > 0)
		P("  already filed   %7ld  by an earlier run or another "
		    "pipeline: not admitted, not sent\n", geti(json_object_get(s, "fetch"),
		    "skipped"));
	if (geti(json_object_get(s, "fetch"), "resumed_cut") > 0)
		P("  taken up        %7ld  cut by an earlier deadline, "
		    "admitted again\n", geti(json_object_get(s, "fetch"),
		    "resumed_cut"));
	if (geti(json_object_get(s, "fetch"), "retried_dead") > 0)
		P("  retried dead    %7ld  dead in an earlier run, admitted "
		    "again (--retry-dead)\n", geti(json_object_get(s,
		    "fetch"), "retried_dead"));
	if (geti(run, "orphaned") > 0)
		P("  orphaned        %7ld  left to a pipeline that ended "
		    "without finishing them: a re-run takes them up\n",
		    geti(run, "orphaned"));
	if (geti(run, "held") > 0) {
		P("  held elsewhere  %7ld  left to", geti(run, "held"));
		json_object_foreach((json_t *)json_object_get(s, "held_by"), k,
		    v)
			P(" %s (%ld)", k, (long)json_integer_value(v));
		P(", still running: in neither file yet\n");
	}
	P("  attempts %ld, retries %ld, 429s %ld", geti(run, "attempts"),
	    geti(run, "retries"), geti(run, "http_429"));
	if ((b = json_object_get(s, "budget")) != NULL && json_is_object(b))
		P(", budget left %ld of %ld", geti(b, "left"),
		    geti(b, "total"));
	P("\n");
	if (json_object_size(eps) > 0) {
		P("  %-24s %8s %8s %8s  %s\n", "endpoint", "ok", "dead", "cut",
		    "last error");
		json_object_foreach((json_t *)eps, k, e) {
			ecut = summ_tally_cut(e);
			P("  %-24.24s %8ld %8ld %8ld  %.40s\n", shown(b1,
			    sizeof(b1), k), geti(e, "succeeded"), geti(e,
			    "dead") - ecut, ecut, shown(b2, sizeof(b2),
			    json_string_value(json_object_get(e,
			    "last_error"))) ?: "-");
		}
	}
	br = json_object_get(s, "breakers");
	json_object_foreach((json_t *)br, k, v)
		P("  breaker %s: %s, opened %ld times, saved %ld requests\n",
		    shown(b1, sizeof(b1), k), shown(b2, sizeof(b2),
		    json_string_value(json_object_get(v, "state"))) ?: "?",
		    geti(v, "openings"), geti(v, "saved"));
	if (json_is_integer(adm) && json_is_true(json_object_get(s,
	    "interrupted")))
		P("  check: interrupted: admitted %ld = succeeded %ld + dead "
		    "%ld%s + pending %ld: %s\n", (long)json_integer_value(adm),
		    geti(run, "succeeded"), dead, cuts, geti(s, "pending"),
		    json_is_true(json_object_get(s, "reconciled")) ? "ok" :
		    "MISMATCH");
	else if (json_is_integer(adm) && geti(s, "pending") > 0)
		P("  check: admitted %ld = succeeded %ld + dead %ld%s + pending "
		    "%ld (its record a stray line): %s\n",
		    (long)json_integer_value(adm), geti(run, "succeeded"),
		    dead, cuts, geti(s, "pending"), json_is_true(
		    json_object_get(s, "reconciled")) ? "ok" : "MISMATCH");
	else if (json_is_integer(adm))
		P("  check: admitted %ld = succeeded %ld + dead %ld%s: %s\n",
		    (long)json_integer_value(adm), geti(run, "succeeded"),
		    dead, cuts, json_is_true(json_object_get(s,
		    "reconciled")) ? "ok" : "MISMATCH");
	P("  run directory totals: %ld in %s, %ld in %s", geti(tot,
	    "succeeded"), rundir_name(RUNDIR_RESULTS), geti(tot, "dead"),
	    rundir_name(RUNDIR_DEAD));
	if (geti(tot, "stray_lines") > 0)
		P(" and %ld stray line%s beside them", geti(tot, "stray_lines"),
		    geti(tot, "stray_lines") == 1 ? "" : "s");
	P("\n");
#undef P
	return t.p;
}

int
summ_finish(struct summ *s, const char *rundir, const char *admitted_from,
    double t0)
{
	json_t *out = json_object(), *tot = tally(), *rep = NULL;
	json_error_t je;
	char *path, *tmp;
	long admitted = -1, filed, stray;
	int ok, rc = 0;

	json_object_set_new(out, "run_dir", json_string(rundir));
	json_object_set_new(out, "finished_at", json_real(clk_now()));
	json_object_set_new(out, "wall_s", json_real(clk_now() - t0));
	if (admitted_from != NULL) {
		rep = files_load(admitted_from, 0, &je);
		if (!json_is_integer(json_object_get(rep, "admitted"))) {
			problem(s, "%s: no admitted count (%s)", admitted_from,
			    rep ? "field \"admitted\" missing" : rec_json_why(&je));
			rc = -1;
		} else
			admitted = geti(rep, "admitted");
		if (geti(rep, "stopped") > 0)
			s->stopped = (int)geti(rep, "stopped");
		/* Left to a live pipeline: in neither file yet. */
		json_object_set_new(s->t, "held", json_integer(geti(rep,
		    "held")));
		json_object_set_new(s->t, "orphaned", json_integer(geti(rep,
		    "orphaned")));
		json_object_set_new(out, "held_by", json_is_object(
		    json_object_get(rep, "held_by")) ? json_deep_copy(
		    json_object_get(rep, "held_by")) : json_object());
	}
	filed = geti(s->t, "succeeded") + geti(s->t, "dead");
	stray = geti(s->t, "stray_lines");
	json_object_set_new(out, "admitted", admitted >= 0 ?
	    json_integer(admitted) : json_null());
	if (rep != NULL) {
		json_object_set(out, "fetch", rep);
		json_decref(rep);
	}
	json_object_set(out, "run", s->t);
	path = rundir_path(rundir, RUNDIR_RESULTS, NULL);
	if (recount(s, tot, path) == -1)
		problem(s, "read %s: %s", path, files_why(errno)), rc = -1;
	free(path);
	path = rundir_path(rundir, RUNDIR_DEAD, NULL);
	if (recount(s, tot, path) == -1)
		problem(s, "read %s: %s", path, files_why(errno)), rc = -1;
	free(path);
	json_object_set(out, "totals", tot);
	json_decref(s->tot);
	s->tot = tot;
	state_report(out, rundir);
	json_object_set_new(out, "interrupted", json_boolean(s->stopped));
	if (admitted >= 0 && s->stopped) {
		/* Stopped: the unfiled are left for a re-run, not lost. */
		json_object_set_new(out, "reconciled", json_boolean(filed <=
		    admitted));
		json_object_set_new(out, "pending", json_integer(filed <=
		    admitted ? admitted - filed : 0));
		if (filed > admitted) {
			problem(s, "RECONCILIATION FAILED: admitted %ld, filed "
			    "%ld (succeeded %ld + dead %ld)", admitted, filed,
			    geti(s->t, "succeeded"), geti(s->t, "dead"));
			rc = -1;
		}
	} else if (admitted >= 0) {
		/*
		 * A stray line may have been a document's record, mangled on
		 * its way: that document is in neither file, pending, and a
		 * re-run takes it up.  Only as many as there were strays.
		 */
		ok = filed <= admitted && admitted - filed <= stray;
		json_object_set_new(out, "reconciled", json_boolean(ok));
		if (ok && filed < admitted) {
			json_object_set_new(out, "pending", json_integer(
			    admitted - filed));
			problem(s, "%ld stray line%s between the stages (no id; "
			    "kept in %s): %ld document%s admitted and not "
			    "filed, pending: run again to take %s up", stray,
			    stray == 1 ? "" : "s", rundir_name(RUNDIR_DEAD),
			    admitted - filed, admitted - filed == 1 ? "" : "s",
			    admitted - filed == 1 ? "it" : "them");
		}
		if (!ok) {
			problem(s, "RECONCILIATION FAILED: admitted %ld, filed "
			    "%ld (succeeded %ld + dead %ld)", admitted, filed,
			    geti(s->t, "succeeded"), geti(s->t, "dead"));
			rc = -1;
		}
	} else
		json_object_set_new(out, "reconciled", json_null());
	path = rundir_path(rundir, RUNDIR_SUMMARY, NULL);
	tmp = xasprintf("%s.%ld", path, (long)getpid());
	if (files_dump(out, path, tmp, JSON_INDENT(2)) == -1) {
		problem(s, "write %s: %s", path, strerror(errno));
		rc = -1;
	}
	free(tmp);
	free(path);
	json_decref(s->out);
	s->out = out;
	free(s->rundir);
	s->rundir = xstrdup(rundir);
	return rc;
}

const char *
summ_problems(const struct summ *s)
{
	return s->problems != NULL ? s->problems : "";
}

void
summ_stopped(struct summ *s, int sig)
{
	s->stopped = sig;
}

long
summ_cut(const struct summ *s)
{
	return summ_count(s, fate_reason(FATE_DEADLINE_CUT));
}

long
summ_tally_cut(const json_t *tally)
{
	return geti(json_object_get(tally, "dead_by_reason"),
	    fate_reason(FATE_DEADLINE_CUT));
}

long
summ_count(const struct summ *s, const char *what)
{
	json_t *v = json_object_get(s->t, what);

	if (v == NULL)
		v = json_object_get(json_object_get(s->t, "dead_by_reason"),
		    what);
	return (long)json_integer_value(v);
}

long
summ_total(const struct summ *s, const char *what)
{
	json_t *v = json_object_get(s->tot, what);

	if (v == NULL)
		v = json_object_get(json_object_get(s->tot, "dead_by_reason"),
		    what);
	return (long)json_integer_value(v);
}

long
summ_unfiled(const struct summ *s)
{
	if (s->stopped || s->out == NULL || !json_is_true(json_object_get(
	    s->out, "reconciled")))
		return 0;
	return geti(s->out, "pending");
}

void
summ_free(struct summ *s)
{
	if (s == NULL)
		return;
	json_decref(s->t);
	json_decref(s->tot);
	json_decref(s->out);
	free(s->rundir);
	free(s->problems);
	free(s);
}
