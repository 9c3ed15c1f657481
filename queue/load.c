/*
 * load: a manifest on stdin into rfp_queue, each id once, a statement of
 * up to LOAD_MAX records at a time, in one transaction.
 */
#include <sys/stat.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "cmd/msg.h"
#include "lib/base/clk.h"
#include "lib/state/pg.h"
#include "lib/record/rec.h"
#include "queue/queue.h"

#define LOAD_MAX	1000	/* records a statement of load adds */
#define LOAD_LOCK	"7270003"	/* the advisory lock a load holds (7270001:
				   the schema's migration, 7270002: ids,
				   7270004: every process, pg.c) */

/* Add the group of records (a JSON array of {id, rec}); how many were new. */
static long
load_group(json_t *g)
{
	char *s = json_dumps(g, JSON_COMPACT), err[512];
	const char *p[1] = { s };
	PGresult *r;

	/* ORDER BY: seq follows the manifest, so pull takes it in order. */
	if ((r = pg_exec_named("load", "INSERT INTO rfp_queue (id, rec) "
	    "SELECT e->>'id', e->'rec' FROM jsonb_array_elements($1::jsonb) "
	    "WITH ORDINALITY AS f(e, i) ORDER BY i ON CONFLICT (id) DO "
	    "NOTHING", 1, p, PGRES_COMMAND_OK, err,
	    sizeof(err))) == NULL)
		msg_die(1, "%s: %s", q_cmd, err);
	free(s);
	json_array_clear(g);
	return affected(r);
}

/*
 * The manifest's directory, as rfp-fetch takes it in a run (fetch/bodies.c):
 * standard input's when it is a file, else the current directory.  Read
 * here, where the manifest is, for whichever host pulls its records; NULL
 * when it cannot be resolved.
 */
static char *
manifest_dir(void)
{
	char buf[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
	    (n = readlink("/proc/self/fd/0", buf, sizeof(buf) - 1)) > 0 &&
	    buf[0] == '/') {
		buf[n] = '\0';
		*strrchr(buf, '/') = '\0';
		return realpath(buf[0] != '\0' ? buf : "/", NULL);
	}
	return realpath(".", NULL);
}

void
load(void)
{
	struct rec_reader *rd = rec_reader_new(STDIN_FILENO, 0);
	char *dir = manifest_dir();
	long added = 0, valid = 0, bad = 0, lineno;
	json_t *rec, *g = json_array(), *seen = json_object(), *first;
	const char *id;
	enum rec_rc rc;
	char *line, err[256];
	size_t len;

	PQclear(q("BEGIN", 0, NULL, PGRES_COMMAND_OK));
	/*
	 * One load at a time: each adds its records in its manifest's order
	 * and waits on another's rows not yet committed, so two whose
	 * manifests share ids in another order each held a row the other
	 * wanted, and PostgreSQL ended one ("deadlock detected", nothing of
	 * it loaded).  The lock ends with the transaction.
	 */
	PQclear(q("SELECT pg_advisory_xact_lock(" LOAD_LOCK ")", 0, NULL,
	    PGRES_TUPLES_OK));
	while ((rc = rec_next(rd, &line, &len, &lineno)) != REC_EOF) {
		if (rc == REC_ERR)
			msg_diesys(1, "read stdin");
		if (rc == REC_LINE && len == 0)
			continue;
		rec = rc == REC_LINE ? rec_parse(line, len, err, sizeof(err)) :
		    NULL;
		if (rec == NULL || rec_str(rec, "id") == NULL) {
			msg_line(lineno, "%s; not loaded", rc != REC_LINE ?
			    "line too long" : rec == NULL ? err :
			    "missing field \"id\"");
			json_decref(rec);
			bad++;
			continue;
		}
		/*
		 * A later line with an earlier line's id is present (the
		 * queue has the first, or will), and is said: silently, a
		 * manifest that meant two documents under one id had one
		 * fetched, and no one knew.
		 */
		id = rec_str(rec, "id");
		if ((first = json_object_get(seen, id)) != NULL) {
			msg_line(lineno, "duplicate id \"%.*s\" (first on line "
			    "%lld); loaded once", (int)rec_utf8_prefix(id, 200),
			    id, (long long)json_integer_value(first));
			json_decref(rec);
			valid++;
			continue;
		}
		json_object_set_new(seen, id, json_integer(lineno));
		/*
		 * A relative body_file is the manifest's directory's, for
		 * --check, a run and the queue alike: rfp-fetch --from-queue
		 * takes it from here.  A line's own is never taken.
		 */
		json_object_del(rec, REC_MANIFEST_DIR);
		if (json_is_string(json_object_get(rec, "body_file")) &&
		    dir != NULL)
			json_object_set_new(rec, REC_MANIFEST_DIR,
			    json_string(dir));
		json_array_append_new(g, json_pack("{s:s,s:o}", "id",
		    rec_str(rec, "id"), "rec", rec));
		valid++;
		if (json_array_size(g) >= LOAD_MAX)
			added += load_group(g);
	}
	rec_reader_free(rd);
	free(dir);
	json_decref(seen);
	if (json_array_size(g) > 0)
		added += load_group(g);
	json_decref(g);
	/*
	 * Statistics on what was just loaded, before a pull plans its claim:
	 * with none, the planner took the queue for a few rows and read every
	 * queued one to sort them at each claim (3 ms a claim for 10,000).
	 * A user who may not analyze the table is told nothing.
	 */
	if (added > 0) {
		PQclear(q("SET LOCAL client_min_messages = error", 0, NULL,
		    PGRES_COMMAND_OK));
		PQclear(q("ANALYZE rfp_queue", 0, NULL, PGRES_COMMAND_OK));
	}
	/* A pull waiting for work wakes (owner "": nothing of it closed). */
	if (added > 0)
		PQclear(q("SELECT pg_notify('" CHANNEL "', '0 ')", 0, NULL,
		    PGRES_TUPLES_OK));
	PQclear(q("COMMIT", 0, NULL, PGRES_COMMAND_OK));
	printf("{\"added\":%ld,\"present\":%ld,\"bad\":%ld}\n", added,
	    valid - added, bad);
}

#define REQ_WAIT	10	/* logical s requeue waits on a row, or is
				   idle half-way, at the most */
#define AFTER	"requeue once no host runs, then start them with " \
		"--retry-dead"
#define BUSY	"a host that runs files what is put back dead again from " \
		"its run directory; " AFTER

/* The dead rows of the reasons in $1 (any if none) queued again. */
static const char q_requeue[] =
    "WITH d AS (DELETE FROM rfp_results r USING rfp_queue q WHERE "
    "q.id = r.id AND q.status = 'dead' AND (jsonb_array_length($1::"
    "jsonb) = 0 OR r.dead_reason IN (SELECT jsonb_array_elements_text("
    "$1::jsonb))) RETURNING r.id, r.rec), "
    "u AS (UPDATE rfp_queue q SET status = 'queued', owner = NULL, "
    "lease_until = NULL, " Q_KEEP_SENT("true", "d.rec") " FROM d "
    "WHERE q.id = d.id RETURNING q.id) "
    "SELECT count(*), pg_notify('" CHANNEL "', '0 ') FROM u";

/*
 * requeue: the rows filed dead (of the dead_reasons in reasons, n of
 * them; any when n is 0) back in the queue, their results dropped, in one
 * statement: the next pull of any host takes them up; refused (exit 1)
 * while a host runs.  A submission its letter says was sent keeps saying
 * so (file.c), so that it is asked about before it is sent again.
 */
void
requeue(char *const *reasons, int n)
{
	json_t *a = json_array();
	char *s;
	const char *p[1];
	PGresult *r;
	char wait[32], err[512];
	long back, others;
	int i, alone;

	/*
	 * A host running (its pull, with a run directory, files what that
	 * directory holds dead again, at once) would undo it, and requeue
	 * would have said it was done.  Asked in the transaction that puts
	 * the rows back: a process that connects meanwhile waits for its
	 * end.  So the transaction is kept short: a row another transaction
	 * holds is waited for REQ_WAIT at most, and the server ends it if
	 * requeue stops half-way (a suspended or hung client) for as long.
	 * pg_locks, where it may be read, counts too: a process of a build
	 * that took no run lock.
	 */
	snprintf(wait, sizeof(wait), "%.0f", fmax(1000, clk_real(REQ_WAIT) *
	    1000));
	p[0] = wait;
	PQclear(q("BEGIN", 0, NULL, PGRES_COMMAND_OK));
	PQclear(q("SELECT set_config('lock_timeout', $1, true), set_config("
	    "'idle_in_transaction_session_timeout', $1, true)", 1, p,
	    PGRES_TUPLES_OK));
	if ((alone = pg_alone(err, sizeof(err))) == -1)
		msg_die(1, "requeue: %s", err);
	if ((others = pg_others()) > 0)
		msg_die(1, "requeue: %ld other rfpipe process%s connected to "
		    "the database: " BUSY, others, others == 1 ? " is" :
		    "es are");
	if (!alone)
		msg_die(1, "requeue: another rfpipe process is, or was a "
		    "moment ago, connected to the database: " BUSY);
	if ((back = q_long("SELECT count(*) FROM rfp_queue WHERE status = "
	    "'claimed' AND lease_until > now()", 0, NULL)) > 0)
		msg_die(1, "requeue: %ld row%s claimed by a host whose "
		    "lease runs yet: " AFTER, back, back == 1 ? " is" :
		    "s are");
	for (i = 0; i < n; i++)
		json_array_append_new(a, json_string(reasons[i]));
	s = json_dumps(a, JSON_COMPACT);
	p[0] = s;
	if ((r = pg_exec(q_requeue, 1, p, PGRES_TUPLES_OK, err,
	    sizeof(err))) == NULL)
		msg_die(1, "requeue: %s; nothing was put back", err);
	back = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQclear(q("COMMIT", 0, NULL, PGRES_COMMAND_OK));
	free(s);
	json_decref(a);
	printf("{\"requeued\":%ld}\n", back);
}
