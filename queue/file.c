/*
 * file: records passed through untouched, each done or dead one filed in
 * rfp_results and its queue row closed, a group at a time; pull files
 * what its run directory had filed through the same group.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "lib/record/fate.h"
#include "cmd/loop.h"
#include "cmd/msg.h"
#include "lib/state/pg.h"
#include "lib/record/rec.h"
#include "lib/record/view.h"
#include "lib/base/x.h"
#include "queue/queue.h"

/*
 * Group filing: the records of a group are filed by one statement, when
 * the input has nothing more ready (before loop_run's next read), or when
 * the group is full.  A row is closed only while this owner's claim on it
 * stands (or it was never claimed); the others are refused and named.
 */
#define CUT	"deadline_cut"	/* fate_reason(FATE_DEADLINE_CUT) */

static const char q_file[] =
    "WITH f AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS f(id text, "
    "fate text, dead_reason text, rec jsonb, line bigint)), "
    /*
     * The group's rows, locked, found by their ids: a condition on status
     * here led the planner to the (status, seq) index, a scan of the
     * whole queue at every filing.
     */
    "o AS (SELECT id, status, owner FROM rfp_queue WHERE id = ANY "
    "(ARRAY(SELECT id FROM f)) ORDER BY id FOR UPDATE), "
    /*
     * A document the deadline cut never failed: its row goes back to the
     * queue for the next run or another host, not dead (filed dead, no
     * host ever took it up again, and the queue said it reconciled).  It
     * keeps the cutter's name, which pull of that name passes over.  A
     * submission the cut found sent (or maybe sent: "sent" in its letter)
     * keeps saying so in its row, so that the host that takes it up asks
     * before it sends it again, whatever ledger that host keeps
     * (fetch/submit.c).
     */
    "c AS (UPDATE rfp_queue q SET status = CASE WHEN f.dead_reason = "
    "'" CUT "' THEN 'queued' ELSE f.fate END, owner = $2, lease_until = "
    "NULL, " Q_KEEP_SENT("f.dead_reason = '" CUT "'", "f.rec") " "
    "FROM f, o WHERE q.id = f.id AND o.id = f.id AND (o.status = "
    "'queued' OR (o.status = 'claimed' AND o.owner = $2)) RETURNING q.id, "
    "q.status), "
    "r AS (INSERT INTO rfp_results (id, fate, dead_reason, owner, rec) "
    "SELECT f.id, f.fate, f.dead_reason, $2, f.rec FROM f JOIN c USING "
    "(id) WHERE c.status <> 'queued' ON CONFLICT (id) DO UPDATE SET "
    "filings = rfp_results.filings + 1), "
    /* Closed before by this owner: never refused. */
    "m AS (SELECT id FROM o WHERE owner = $2 AND status IN ('done', "
    "'dead')), "
    /*
     * Of those, counted in refiled unless it is the record filed then
     * (response_at and elapsed_ms tell a fetch again from it).  pull
     * files what the run directory has, rfp-sink's copy of what file
     * files here: whichever of the two came second, the record was filed
     * once.  Nor is one whose filing this statement cannot see yet
     * (pull's, which waited on file's lock) counted.
     */
    "d AS (UPDATE rfp_results s SET filings = s.filings + 1 FROM m, f "
    "WHERE s.id = m.id AND f.id = m.id AND s.rec IS DISTINCT FROM f.rec) "
    "SELECT pg_notify('" CHANNEL "', (SELECT count(*) FROM c) || '@' || "
    "pg_current_xact_id() || ' ' || $2), "
    "(SELECT coalesce(json_agg(json_build_array(line, id, (SELECT status "
    "FROM o WHERE o.id = f.id), (SELECT owner FROM o WHERE o.id = f.id))), "
    "'[]')::text FROM f WHERE id NOT IN (SELECT id FROM c) AND id NOT IN "
    "(SELECT id FROM m))";

#define GROUP_MAX	256

/* Add n bytes of s to the group's text. */
static void
grp_add(struct group *g, const char *s, size_t n)
{
	if (g->len + n + 2 > g->cap) {
		g->cap = 2 * (g->len + n + 2);
		g->text = xrealloc(g->text, g->cap);
	}
	memcpy(g->text + g->len, s, n);
	g->len += n;
}

/* Add s (NULL: null) to the group's text as a JSON string. */
static void
grp_str(struct group *g, const char *s)
{
	json_t *j = s != NULL ? json_string(s) : NULL;
	char *t = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	grp_add(g, t != NULL ? t : "null", t != NULL ? strlen(t) : 4);
	free(t);
	json_decref(j);
}

void
grp_open(struct group *g, const char *owner)
{
	g->owner = owner;
	grp_add(g, "[", 1);
	g->ids = json_object();
}

void
grp_close(struct group *g)
{
	free(g->text);
	json_decref(g->ids);
	memset(g, 0, sizeof(*g));
}

int
grp_flush(struct group *g)
{
	const char *p[2], *st, *by;
	char why[160];
	json_t *refused, *v;
	json_int_t line;
	PGresult *r;
	size_t i;
	char err[512];

	if (g->n == 0)
		return 0;
	/* rfp-sink has the records before the store says they are done. */
	if (g->out != NULL && rec_out_flush(g->out) == -1)
		return -1;
	grp_add(g, "]", 2);	/* and its NUL */
	p[0] = g->text;
	p[1] = g->owner;
	if ((r = pg_exec_named("file", q_file, 2, p, PGRES_TUPLES_OK, err,
	    sizeof(err))) == NULL)
		msg_die(1, "%s: %s", q_cmd, err);
	refused = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
	json_array_foreach(refused, i, v) {
		line = json_integer_value(json_array_get(v, 0));
		st = json_string_value(json_array_get(v, 2));
		by = json_string_value(json_array_get(v, 3));
		if (st == NULL)
			snprintf(why, sizeof(why), "not in the queue");
		else if (strcmp(st, "claimed") == 0)
			snprintf(why, sizeof(why), "claimed by another host "
			    "since (%.80s)", by ? by : "?");
		else
			snprintf(why, sizeof(why), "filed %s already by "
			    "%.80s", st, by ? by : "?");
		/* Line 0: pull's, from the run directory. */
		if (line > 0)
			msg_line(line, "\"%s\": %s; not filed",
			    json_string_value(json_array_get(v, 1)), why);
		else
			msg_warn("pull: \"%s\": %s; not filed",
			    json_string_value(json_array_get(v, 1)), why);
	}
	json_decref(refused);
	PQclear(r);
	msg_debug("filed %ld records", g->n);
	g->len = 1;		/* "[" */
	g->n = 0;
	json_object_clear(g->ids);
	return 0;
}

/*
 * Add to the group the filing of id with its fate, dead_reason (or NULL)
 * and the text of its record (n bytes, no newline), from line lineno of
 * standard input.  The group is filed before when it holds id already,
 * and after when it is full.  0, or -1 when rfp-sink's side could not be
 * written.
 */
int
grp_put(struct group *g, const char *id, const char *fate,
    const char *why, const char *t, size_t n, long lineno)
{
	char num[48];

	if (json_object_get(g->ids, id) != NULL && grp_flush(g) == -1)
		return -1;
	if (g->n++ > 0)
		grp_add(g, ",", 1);
	grp_add(g, "{\"id\":", 6);
	grp_str(g, id);
	grp_add(g, ",\"fate\":", 8);
	grp_str(g, fate);
	grp_add(g, ",\"dead_reason\":", 15);
	grp_str(g, why);
	grp_add(g, ",\"rec\":", 7);
	grp_add(g, t, n);
	grp_add(g, num, (size_t)snprintf(num, sizeof(num),
	    ",\"line\":%ld}", lineno));
	json_object_set_new(g->ids, id, json_true());
	if (g->n >= GROUP_MAX && grp_flush(g) == -1)
		return -1;
	return 0;
}

/* loop_run's drain: the group filed before each read. */
static int
file_drain(void *arg)
{
	return grp_flush(arg);
}

/*
 * One record: filed in the group when it is done or dead, and passed on.
 * The group holds the record's text, not a tree of it: what goes on to
 * rfp-sink and into rfp_results is every byte as it came.
 */
static int
file1(struct view *v, long lineno, struct rec_out *out, void *arg)
{
	struct group *g = arg;
	const char *fate = view_str(v, "fate"), *id = view_str(v, "id"), *t;
	size_t n;

	g->out = out;
	if (id == NULL || (fate_of(fate) != FATE_DONE &&
	    fate_of(fate) != FATE_DEAD))
		return 0;
	if ((t = view_text(v, &n)) == NULL)
		return -1;
	/* Without its newline. */
	return grp_put(g, id, fate, view_str(v, "dead_reason"), t, n - 1,
	    lineno);
}

void
file(const char *owner)
{
	const struct loop_hooks h = { .drain = file_drain };
	struct group g;
	int rc;

	/*
	 * The filings skip the wait for the WAL flush: one lost to a server
	 * crash leaves its row claimed, to be claimed and done again after
	 * the lease like a record in flight at the crash; a submission is
	 * not sent again, as the ledger's entries are committed durably.
	 */
	PQclear(q("SET synchronous_commit = off", 0, NULL, PGRES_COMMAND_OK));
	memset(&g, 0, sizeof(g));
	grp_open(&g, owner);
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = loop_run(msg_prog(), STDIN_FILENO, STDOUT_FILENO, &h, file1,
	    &g);
	g.out = NULL;
	if (rc == -1 || grp_flush(&g) == -1)
		msg_die(1, "stopped: output is incomplete");
	grp_close(&g);
}
