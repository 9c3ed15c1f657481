/*
 * rfp-queue: the work queue that several hosts share, in the PostgreSQL
 * database named by --state (or the config's state: key).
 *
 * load reads a manifest on stdin and adds each record under its "id" to
 * rfp_queue, once: loading the same manifest again adds nothing.  It
 * prints {"added":N,"present":N,"bad":N}: present, the lines whose id the
 * queue held already, an earlier line's among them; bad, the lines that
 * are not an object with a string "id", reported and not loaded.  A
 * duplicate id is reported too, and loaded once, from its first line.
 * pull claims records with FOR UPDATE SKIP LOCKED (queued ones, and those
 * whose claimant's lease ran out), at most --batch held at a time, and
 * writes them to stdout as a manifest for rfp-fetch; it claims again when
 * file notifies it that some were filed.  A record whose id --run-dir has
 * filed already it files itself, as file would, with the run directory's
 * record: rfp-fetch would skip it, and nothing would ever file it.  While
 * it runs it renews the lease of what it holds, so only a dead or stalled
 * host's records are claimed again.  It ends when nothing in the queue is
 * left to do.
 * file passes records through untouched; each one with fate done or dead
 * is recorded in rfp_results and its queue row closed, a group at a time,
 * while the claim of --owner on the row stands.
 * count prints how many records the queue holds; summary prints the
 * combined reconciliation of every host as one JSON object.
 *
 * It never fetches anything and never decides a fate.
 *
 * Exit: 0 done, 1 a fatal error (the server, stdout), 2 a usage or
 * configuration error.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "lib/accounts/filed.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/record/fate.h"
#include "cmd/loop.h"
#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/state/pg.h"
#include "lib/record/rec.h"
#include "lib/record/view.h"
#include "lib/state/store.h"
#include "lib/base/x.h"

#define PROG	"rfp-queue"

static const char usage[] =
    "usage: rfp-queue [-hv] [--batch N] [--config FILE] [--lease S]\n"
    "                 [--owner NAME] [--retry-dead] [--run-dir DIR]\n"
    "                 [--state URL] [--version]\n"
    "                 load|pull|file|count|summary\n";

/*
 * file tells pull on this channel, in the statement that files a group,
 * how many of an owner's records it closed: "N OWNER"; load, that it
 * added some.
 */
#define CHANNEL	"rfp_queue_filed"

static struct opts {
	long	 batch;
	double	 lease;		/* real seconds */
	char	*owner;
	const char *run_dir;	/* pull: what it filed is not handed on */
	int	 retry_dead;	/* ... but for its dead letters */
} opts;

/* Run sql or die 1 with the server's word. */
static PGresult *
q(const char *sql, int n, const char *const *p, ExecStatusType want)
{
	char err[512];
	PGresult *r;

	if ((r = pg_exec(sql, n, p, want, err, sizeof(err))) == NULL)
		msg_die(1, "%s", err);
	return r;
}

static long
q_long(const char *sql, int n, const char *const *p)
{
	PGresult *r = q(sql, n, p, PGRES_TUPLES_OK);
	long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);

	PQclear(r);
	return v;
}

static long
affected(PGresult *r)
{
	long n = strtol(PQcmdTuples(r), NULL, 10);

	PQclear(r);
	return n;
}

#define LOAD_MAX	1000	/* records a statement of load adds */

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
		msg_die(1, "%s", err);
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

static void
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

/*
 * Claim up to $3 records for $1 in load order: queued ones, an index scan
 * on (status, seq) that SKIP LOCKED lets hosts run side by side; with
 * q_sweep, first the expired claims of other owners (a dead host's).
 * Those are looked for once a quarter lease, not at every claim: the scan
 * of status 'claimed' meets the dead row versions of every record done
 * since the last vacuum, and cost 3 ms a claim after 5,000 records.
 * The rows to update are named by an array of ids, so that they are
 * found through the primary key, not by a hash join over the queue.
 */
static const char q_claim[] =
    "WITH n AS (SELECT id, seq FROM rfp_queue WHERE status = 'queued' "
    "ORDER BY seq LIMIT $3::int FOR UPDATE SKIP LOCKED) "
    "UPDATE rfp_queue SET status = 'claimed', owner = $1, lease_until = "
    "now() + $2::float8 * interval '1 second', claims = claims + 1 WHERE "
    "id = ANY (ARRAY(SELECT id FROM n)) RETURNING id, rec::text";
static const char q_sweep[] =
    "WITH e AS (SELECT id, seq FROM rfp_queue WHERE status = 'claimed' AND "
    "lease_until < now() AND owner <> $1 ORDER BY seq LIMIT $3::int FOR "
    "UPDATE SKIP LOCKED), n AS (SELECT id, seq FROM rfp_queue WHERE status "
    "= 'queued' ORDER BY seq LIMIT $3::int FOR UPDATE SKIP LOCKED) "
    "UPDATE rfp_queue SET status = 'claimed', owner = $1, lease_until = "
    "now() + $2::float8 * interval '1 second', claims = claims + 1 WHERE id "
    "= ANY (ARRAY(SELECT id FROM (SELECT * FROM e UNION ALL SELECT * FROM "
    "n) x ORDER BY seq LIMIT $3::int)) RETURNING id, rec::text";
static const char q_renew[] =
    "UPDATE rfp_queue SET lease_until = now() + $2::float8 * interval "
    "'1 second' WHERE status = 'claimed' AND owner = $1";
static const char q_left[] =
    "SELECT count(*) FROM (SELECT 1 FROM rfp_queue WHERE status IN "
    "('queued', 'claimed') LIMIT 1) x";

static long held;	/* pull: records claimed and not yet filed */
static struct filed *run_filed;	/* pull: what --run-dir has filed */

static int file_flush(void *);
static int grp_put(const char *, const char *, const char *, const char *,
    size_t, long);
static void grp_open(void);
static void grp_close(void);

/*
 * A notification from file (or from pull, filing what the run directory
 * had filed): what it closed of ours is no longer held.
 */
static void
filed(const char *channel, const char *payload, void *arg)
{
	char *end;
	long n = strtol(payload, &end, 10);

	(void)channel;
	(void)arg;
	if (*end == ' ' && strcmp(end + 1, opts.owner) == 0)
		held = n < held ? held - n : 0;
}

/*
 * Read what the run directory has filed since the last read.  Nothing is
 * said of a line passed over: rfp-fetch, reading the same files, says it.
 */
static void
read_filed(void)
{
	char err[PATH_MAX + 128];

	if (filed_read(run_filed, NULL, NULL, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
}

/*
 * Whether the record of id, claimed, is one the run directory has filed:
 * then it joins the group to be filed, with the run directory's record,
 * as file would file it, and is not written for rfp-fetch, which would
 * skip it as filed, so that nothing would ever file it in the queue and
 * pull would renew its lease for ever.
 */
static int
filed_here(const char *id)
{
	enum filed_as as = filed_as(run_filed, id);
	char *text, err[64];
	json_t *rec;
	size_t len;

	if (as < FILED_DEAD || (text = filed_record(run_filed, id, &len)) ==
	    NULL)
		return 0;
	rec = rec_parse(text, len, err, sizeof(err));
	/* Line 0: it comes from no line of standard input (file_flush). */
	(void)grp_put(id, fate_name(as == FILED_DONE ? FATE_DONE : FATE_DEAD),
	    as == FILED_DEAD ? rec_str(rec, "dead_reason") : NULL, text, len,
	    0);
	json_decref(rec);
	free(text);
	return 1;
}

/*
 * Claim, write what was claimed for rfp-fetch and file what the run
 * directory has filed already; how many were claimed.  Those filed here
 * are held, as any, until file's notification (this one's own, in the
 * same session) says they are closed.
 */
static long
claim(const char *const *p, int sweep)
{
	PGresult *r;
	long i, n, here = 0;
	char *buf = NULL, err[512];
	size_t len = 0, cap = 0, l;

	if ((r = pg_exec_named(sweep ? "sweep" : "claim", sweep ? q_sweep :
	    q_claim, 3, p, PGRES_TUPLES_OK, err, sizeof(err))) == NULL)
		msg_die(1, "%s", err);
	n = PQntuples(r);
	if (n > 0 && run_filed != NULL && filed_changed(run_filed))
		read_filed();
	for (i = 0; i < n; i++) {
		if (run_filed != NULL && filed_here(PQgetvalue(r, (int)i, 0))) {
			here++;
			continue;
		}
		l = strlen(PQgetvalue(r, (int)i, 1));
		if (len + l + 1 > cap) {
			cap = (len + l + 1) * 2;
			buf = xrealloc(buf, cap);
		}
		memcpy(buf + len, PQgetvalue(r, (int)i, 1), l);
		len += l;
		buf[len++] = '\n';
	}
	PQclear(r);
	if (here > 0) {
		msg_debug("claimed %ld records, %ld of them filed in the run "
		    "directory", n, here);
		(void)file_flush(NULL);
	} else if (n > 0)
		msg_debug("claimed %ld records", n);
	if (len > 0 && rec_write_all(STDOUT_FILENO, buf, len) == -1)
		msg_diesys(1, "write stdout");
	free(buf);
	return n;
}

/*
 * Hold at most --batch claimed records; claim again, a chunk at a time,
 * when file says it closed some (LISTEN), and renew the leases in one
 * statement three times per lease.  Without a notification it waits a
 * quarter of the lease, for a dead host's records to be claimed soon
 * after the host's lease ran out.
 */
static void
pull(void)
{
	char lease[32], want[32], err[512];
	const char *p[3] = { opts.owner, lease, want };
	long chunk = opts.batch >= 4 ? opts.batch / 4 : 1, n;
	double renew = 0, sweep = 0;
	int swept, gone;

	snprintf(lease, sizeof(lease), "%.3f", opts.lease);
	/*
	 * A claim or renewal lost to a server crash costs nothing: the
	 * connection, and with it this host's run, ends in the crash.
	 */
	PQclear(q("SET synchronous_commit = off", 0, NULL, PGRES_COMMAND_OK));
	PQclear(q("LISTEN " CHANNEL, 0, NULL, PGRES_COMMAND_OK));
	if (opts.run_dir != NULL) {
		run_filed = filed_new(opts.run_dir, opts.retry_dead);
		read_filed();
		grp_open();
	}
	for (;;) {
		if (clk_mono() >= renew) {
			/* Also corrects held: a row taken over is not ours. */
			PGresult *r = pg_exec_named("renew", q_renew, 2, p,
			    PGRES_COMMAND_OK, err, sizeof(err));
			if (r == NULL)
				msg_die(1, "%s", err);
			held = affected(r);
			renew = clk_mono() + opts.lease / 3;
		}
		n = 0;
		if (held == 0 || opts.batch - held >= chunk) {
			snprintf(want, sizeof(want), "%ld", opts.batch - held);
			if ((swept = clk_mono() >= sweep))
				sweep = clk_mono() + opts.lease / 4;
			held += n = claim(p, swept);
		}
		if (n == 0 && held == 0 && q_long(q_left, 0, NULL) == 0)
			break;
		/*
		 * pull writes only when it claims, and it claims only when
		 * file says records were filed: with rfp-fetch gone (stopped
		 * by a signal, which the stages upstream of it ignore, or
		 * dead) nothing is filed, no write fails, and pull waited on,
		 * renewing its leases, so that neither the pipeline nor the
		 * records ended.  So the wait watches standard output too.
		 */
		if (pg_wait(opts.lease / 4, STDOUT_FILENO, &gone, filed, NULL,
		    err, sizeof(err)) == -1)
			msg_die(1, "%s", err);
		if (gone)
			msg_die(1, "pull: the reader of standard output has "
			    "gone (rfp-fetch ended); the %ld records claimed "
			    "and not filed go back to the queue when their "
			    "lease runs out", held);
	}
	if (run_filed != NULL)
		grp_close();
	filed_free(run_filed);
	run_filed = NULL;
}

/*
 * Group filing: the records of a group are filed by one statement, when
 * the input has nothing more ready (before loop_run's next read), or when
 * the group is full.  A row is closed only while this owner's claim on it
 * stands (or it was never claimed); the others are refused and named.
 */
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
    "c AS (UPDATE rfp_queue q SET status = f.fate, owner = $2, lease_until "
    "= NULL FROM f, o WHERE q.id = f.id AND o.id = f.id AND (o.status = "
    "'queued' OR (o.status = 'claimed' AND o.owner = $2)) RETURNING q.id), "
    "r AS (INSERT INTO rfp_results (id, fate, dead_reason, owner, rec) "
    "SELECT f.id, f.fate, f.dead_reason, $2, f.rec FROM f JOIN c USING "
    "(id) ON CONFLICT (id) DO UPDATE SET filings = rfp_results.filings + "
    "1), "
    /* Filed before by this owner: counted, as it was, in refiled. */
    "d AS (UPDATE rfp_results s SET filings = s.filings + 1 FROM o WHERE "
    "s.id = o.id AND o.owner = $2 AND o.status IN ('done', 'dead') "
    "RETURNING s.id) "
    "SELECT pg_notify('" CHANNEL "', (SELECT count(*) FROM c) || ' ' || $2), "
    "(SELECT coalesce(json_agg(json_build_array(line, id, EXISTS (SELECT "
    "FROM o WHERE o.id = f.id))), '[]')::text FROM f WHERE id NOT IN "
    "(SELECT id FROM c) AND id NOT IN (SELECT id FROM d))";

#define GROUP_MAX	256

static struct group {
	char		*text;	/* what q_file reads as f: a JSON array, open */
	size_t		 len, cap;
	long		 n;	/* records in it */
	json_t		*ids;	/* their ids: one filing of an id per group */
	struct rec_out	*out;	/* rfp-sink's side, passed to first */
} grp;

/* Add n bytes of s to the group's text. */
static void
grp_add(const char *s, size_t n)
{
	if (grp.len + n + 2 > grp.cap) {
		grp.cap = 2 * (grp.len + n + 2);
		grp.text = xrealloc(grp.text, grp.cap);
	}
	memcpy(grp.text + grp.len, s, n);
	grp.len += n;
}

/* Add s (NULL: null) to the group's text as a JSON string. */
static void
grp_str(const char *s)
{
	json_t *j = s != NULL ? json_string(s) : NULL;
	char *t = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	grp_add(t != NULL ? t : "null", t != NULL ? strlen(t) : 4);
	free(t);
	json_decref(j);
}

static void
grp_open(void)
{
	grp_add("[", 1);
	grp.ids = json_object();
}

static void
grp_close(void)
{
	free(grp.text);
	json_decref(grp.ids);
	memset(&grp, 0, sizeof(grp));
}

static int
file_flush(void *arg)
{
	const char *p[2], *why;
	json_t *refused, *v;
	json_int_t line;
	PGresult *r;
	size_t i;
	char err[512];

	(void)arg;
	if (grp.n == 0)
		return 0;
	/* rfp-sink has the records before the store says they are done. */
	if (grp.out != NULL && rec_out_flush(grp.out) == -1)
		return -1;
	grp_add("]", 2);	/* and its NUL */
	p[0] = grp.text;
	p[1] = opts.owner;
	if ((r = pg_exec_named("file", q_file, 2, p, PGRES_TUPLES_OK, err,
	    sizeof(err))) == NULL)
		msg_die(1, "%s", err);
	refused = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
	json_array_foreach(refused, i, v) {
		line = json_integer_value(json_array_get(v, 0));
		why = json_is_true(json_array_get(v, 2)) ?
		    "claimed by another host since" : "not in the queue";
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
	msg_debug("filed %ld records", grp.n);
	grp.len = 1;		/* "[" */
	grp.n = 0;
	json_object_clear(grp.ids);
	return 0;
}

/*
 * Add to the group the filing of id with its fate, dead_reason (or NULL)
 * and the text of its record (n bytes, no newline), from line lineno of
 * standard input.  The group is filed before when it holds id already,
 * and after when it is full.  0, or -1 when rfp-sink's side could not be
 * written.
 */
static int
grp_put(const char *id, const char *fate, const char *why, const char *t,
    size_t n, long lineno)
{
	char num[48];

	if (json_object_get(grp.ids, id) != NULL && file_flush(NULL) == -1)
		return -1;
	if (grp.n++ > 0)
		grp_add(",", 1);
	grp_add("{\"id\":", 6);
	grp_str(id);
	grp_add(",\"fate\":", 8);
	grp_str(fate);
	grp_add(",\"dead_reason\":", 15);
	grp_str(why);
	grp_add(",\"rec\":", 7);
	grp_add(t, n);
	grp_add(num, (size_t)snprintf(num, sizeof(num), ",\"line\":%ld}",
	    lineno));
	json_object_set_new(grp.ids, id, json_true());
	if (grp.n >= GROUP_MAX && file_flush(NULL) == -1)
		return -1;
	return 0;
}

/*
 * One record: filed in the group when it is done or dead, and passed on.
 * The group holds the record's text, not a tree of it: what goes on to
 * rfp-sink and into rfp_results is every byte as it came.
 */
static int
file1(struct view *v, long lineno, struct rec_out *out, void *arg)
{
	const char *fate = view_str(v, "fate"), *id = view_str(v, "id"), *t;
	size_t n;

	(void)arg;
	grp.out = out;
	if (id == NULL || (fate_of(fate) != FATE_DONE &&
	    fate_of(fate) != FATE_DEAD))
		return 0;
	if ((t = view_text(v, &n)) == NULL)
		return -1;
	/* Without its newline. */
	return grp_put(id, fate, view_str(v, "dead_reason"), t, n - 1, lineno);
}

static void
file(void)
{
	const struct loop_hooks h = { .drain = file_flush };
	int rc;

	/*
	 * The filings skip the wait for the WAL flush: one lost to a server
	 * crash leaves its row claimed, to be claimed and done again after
	 * the lease like a record in flight at the crash; a submission is
	 * not sent again, as the ledger's entries are committed durably.
	 */
	PQclear(q("SET synchronous_commit = off", 0, NULL, PGRES_COMMAND_OK));
	grp_open();
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = loop_run(PROG, STDIN_FILENO, STDOUT_FILENO, &h, file1,
	    NULL);
	grp.out = NULL;
	if (rc == -1 || file_flush(NULL) == -1)
		msg_die(1, "stopped: output is incomplete");
	grp_close();
}

/* sql returns (name, count) rows: an object of them. */
static json_t *
counts(const char *sql)
{
	PGresult *r = q(sql, 0, NULL, PGRES_TUPLES_OK);
	json_t *o = json_object();
	int i;

	for (i = 0; i < PQntuples(r); i++)
		json_object_set_new(o, PQgetvalue(r, i, 0), json_integer(
		    strtoll(PQgetvalue(r, i, 1), NULL, 10)));
	PQclear(r);
	return o;
}

static void
summary(void)
{
	json_t *st, *s;
	json_int_t total = 0, done, dead;
	const char *k;
	json_t *v;
	long refiled;

	st = counts("SELECT status, count(*) FROM rfp_queue GROUP BY 1");
	json_object_foreach(st, k, v)
		total += json_integer_value(v);
	done = json_integer_value(json_object_get(st, "done"));
	dead = json_integer_value(json_object_get(st, "dead"));
	refiled = q_long("SELECT count(*) FROM rfp_results WHERE filings > 1",
	    0, NULL);
	s = json_pack("{s:I,s:I,s:I,s:I,s:I,s:i,s:o,s:o,s:b}", "total", total,
	    "queued", json_integer_value(json_object_get(st, "queued")),
	    "claimed", json_integer_value(json_object_get(st, "claimed")),
	    "done", done, "dead", dead, "refiled", (int)refiled,
	    "dead_reasons", counts("SELECT coalesce(dead_reason, ''), "
	    "count(*) FROM rfp_results WHERE fate = 'dead' GROUP BY 1"),
	    "hosts", counts("SELECT coalesce(owner, ''), count(*) FROM "
	    "rfp_results GROUP BY 1"), "reconciled", total == done + dead &&
	    refiled == 0);
	if (json_dumpf(s, stdout, JSON_COMPACT) == -1 || putchar('\n') == EOF)
		msg_diesys(1, "write stdout");
	json_decref(s);
	json_decref(st);
}

/*
 * Standard input and error, closed, read and write /dev/null; standard
 * output closed is an error.  Left closed, the connection took the lowest
 * free descriptor, and records, or messages, went into its stream.
 */
static void
std_fds(void)
{
	int fd;

	if (fcntl(STDOUT_FILENO, F_GETFD) == -1)
		msg_die(1, "standard output is closed");
	for (fd = STDIN_FILENO; fd <= STDERR_FILENO; fd += 2)
		if (fcntl(fd, F_GETFD) == -1 &&
		    open("/dev/null", fd == STDIN_FILENO ? O_RDONLY :
		    O_WRONLY) != fd)
			msg_die(1, "/dev/null: cannot open");
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, 'b' },
		{ "config", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ "lease", required_argument, NULL, 'l' },
		{ "owner", required_argument, NULL, 'o' },
		{ "retry-dead", no_argument, NULL, 'R' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "state", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config = NULL, *state = NULL, *cmd, *owner = NULL;
	struct conf conf;
	char err[512], host[256];
	int c;

	msg_init(PROG);
	opt_check_env();
	opts.batch = 256;
	opts.lease = 60;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			opts.batch = opt_long("batch", optarg, 1, 100000);
			break;
		case 'C':
			config = optarg;
			break;
		case 'l':
			opts.lease = opt_duration("lease", optarg);
			break;
		case 'o':
			owner = optarg;
			break;
		case 'R':
			opts.retry_dead = 1;
			break;
		case 'r':
			opts.run_dir = optarg;
			break;
		case 'S':
			state = opt_state(optarg);
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	if (optind == argc) {
		msg_warn("expected a command");
		opt_usage(usage);
	}
	if (optind != argc - 1) {
		msg_warn("unexpected argument \"%s\"", argv[argc - 1]);
		opt_usage(usage);
	}
	if (opts.retry_dead && opts.run_dir == NULL)
		msg_die(2, "option --retry-dead: needs --run-dir");
	cmd = argv[optind];
	if (strcmp(cmd, "load") && strcmp(cmd, "pull") && strcmp(cmd,
	    "file") && strcmp(cmd, "count") && strcmp(cmd, "summary")) {
		msg_warn("unknown command \"%s\"", cmd);
		opt_usage(usage);
	}
	opt_conf(&conf, config);
	state = opt_state_pick(state, &conf, config);
	if (state == NULL)
		msg_die(2, "needs --state URL (or the config's state: key)");
	if (owner == NULL) {
		if (gethostname(host, sizeof(host) - 1) == -1)
			strcpy(host, "localhost");
		host[sizeof(host) - 1] = '\0';
		opts.owner = xasprintf("%s.%ld", host, (long)getpid());
	} else
		opts.owner = xstrdup(owner);
	opts.lease = clk_real(opts.lease);
	signal(SIGPIPE, SIG_IGN);
	std_fds();
	if (store_init(state, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	conf_free(&conf);
	if (strcmp(cmd, "load") == 0)
		load();
	else if (strcmp(cmd, "pull") == 0)
		pull();
	else if (strcmp(cmd, "file") == 0)
		file();
	else if (strcmp(cmd, "count") == 0)
		printf("%ld\n", q_long("SELECT count(*) FROM rfp_queue", 0,
		    NULL));
	else
		summary();
	store_close();
	free(opts.owner);
	opt_fshut();
	return 0;
}
