/*
 * pull: records claimed from rfp_queue, written for rfp-fetch, their
 * leases renewed while they are held; what --run-dir has filed already
 * is filed here (file.c's group), not handed on.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "lib/base/clk.h"
#include "lib/record/fate.h"
#include "lib/accounts/filed.h"
#include "cmd/msg.h"
#include "lib/state/pg.h"
#include "lib/record/rec.h"
#include "lib/base/x.h"
#include "queue/queue.h"

/*
 * What a claim returns of each row: its id, its rec, and whether the rec
 * is a record of that id (an object, its id the row's), which the server
 * knows from jsonb without pull parsing every record again.
 */
#define RETURNED	"id, rec::text, jsonb_typeof(rec) = 'object', " \
    "coalesce(rec->'id' = to_jsonb(id), false)"

/*
 * Claim up to $3 records for $1 in load order, none that $1 put back in
 * the queue (file.c: a row the deadline cut is queued again under its
 * cutter's name; written again to the same rfp-fetch it was a duplicate
 * id, dead bad_input): queued ones, an index scan
 * on (status, seq) that SKIP LOCKED lets hosts run side by side; with
 * q_sweep, first the expired claims of other owners (a dead host's; a
 * claim with no lease or no owner, a row edited by hand, is expired: it
 * was waited on for ever).
 * Those are looked for once a quarter lease, not at every claim: the scan
 * of status 'claimed' meets the dead row versions of every record done
 * since the last vacuum, and cost 3 ms a claim after 5,000 records.
 * The rows to update are named by an array of ids, so that they are
 * found through the primary key, not by a hash join over the queue.
 */
static const char q_claim[] =
    "WITH n AS (SELECT id, seq FROM rfp_queue WHERE status = 'queued' "
    "AND owner IS DISTINCT FROM $1 "
    "ORDER BY seq LIMIT $3::int FOR UPDATE SKIP LOCKED) "
    "UPDATE rfp_queue SET status = 'claimed', owner = $1, lease_until = "
    "now() + $2::float8 * interval '1 second', claims = claims + 1 WHERE "
    "id = ANY (ARRAY(SELECT id FROM n)) RETURNING " RETURNED;
static const char q_sweep[] =
    "WITH e AS (SELECT id, seq FROM rfp_queue WHERE status = 'claimed' AND "
    "(lease_until IS NULL OR lease_until < now()) AND owner IS DISTINCT "
    "FROM $1 ORDER BY seq LIMIT $3::int FOR UPDATE SKIP LOCKED), n AS "
    "(SELECT id, seq FROM rfp_queue WHERE status = 'queued' AND owner IS "
    "DISTINCT FROM $1 ORDER BY seq LIMIT $3::int FOR UPDATE SKIP LOCKED) "
    "UPDATE rfp_queue SET status = 'claimed', owner = $1, lease_until = "
    "now() + $2::float8 * interval '1 second', claims = claims + 1 WHERE id "
    "= ANY (ARRAY(SELECT id FROM (SELECT * FROM e UNION ALL SELECT * FROM "
    "n) x ORDER BY seq LIMIT $3::int)) RETURNING " RETURNED;
/*
 * Renew this owner's leases, and count its claims.  A row another
 * transaction has locked is passed over, not waited for: file locks its
 * group's rows in id order, and an UPDATE that waited locked this
 * owner's rows in the order it met them, so that the two, renewing and
 * closing the same rows, each held a row the other wanted (PostgreSQL
 * ended one: "deadlock detected", and the host's run with it).  A row
 * passed over is being closed by file, or refused by another host's
 * file, or taken by a sweep once its lease has run out; it is renewed,
 * if still ours, soon after (RENEW_SOON).  The first count is of the
 * claims as the statement began, those passed over too: file's
 * notification takes off what it closed, as it does for the rows it
 * closed before; the second, of those renewed; then the statement's
 * snapshot, which says whose filings the first count has seen.
 */
static const char q_renew[] =
    "WITH l AS (SELECT id FROM rfp_queue WHERE status = 'claimed' AND "
    "owner = $1 FOR UPDATE SKIP LOCKED), u AS (UPDATE rfp_queue SET "
    "lease_until = now() + $2::float8 * interval '1 second' WHERE id = "
    "ANY (ARRAY(SELECT id FROM l))) SELECT count(*), (SELECT count(*) "
    "FROM l), pg_current_snapshot()::text FROM rfp_queue WHERE status = "
    "'claimed' AND owner = $1";

/*
 * A lease is renewed three times a lease, and a row passed over again at
 * this share of a lease: renewed only at the next third, a lease held by
 * another host's file that was refusing it, or by a session by hand,
 * had run out by the time it was (an idle pull woke a quarter lease
 * apart, and renewed every second wake: half a lease).
 */
#define RENEW_SOON	20
static const char q_mine[] =
    "SELECT id FROM rfp_queue WHERE status = 'claimed' AND owner = $1";
/*
 * Whether anything is left for $1: claimed by anyone, or queued and not
 * put back by $1 itself (it would wait on those for ever).
 */
static const char q_left[] =
    "SELECT count(*) FROM (SELECT 1 FROM rfp_queue WHERE status = "
    "'claimed' OR (status = 'queued' AND owner IS DISTINCT FROM $1) LIMIT "
    "1) x";

/* What pull holds as it runs. */
struct pull {
	const char	*owner;
	long		 held;		/* records claimed and not yet filed */
	struct filed	*run_filed;	/* what --run-dir has filed */
	struct group	 grp;		/* ... and is filed here */
	json_t		*seen;		/* ids held found filed there: when
					   first found (clk_mono) */
	char		*snap;		/* the last renewal's snapshot
					   (xmin:xmax:xip,...); NULL: none */
};

/*
 * Whether snapshot snap (pg_current_snapshot()'s text) sees what
 * transaction xid committed: xid finished before it began, under xmin,
 * or under xmax and not among those in progress then.
 */
static int
snap_sees(const char *snap, unsigned long long xid)
{
	unsigned long long xmin, xmax, x;
	const char *s = snap;
	char *end;

	if (snap == NULL)
		return 0;
	xmin = strtoull(s, &end, 10);
	if (*end != ':')
		return 0;
	xmax = strtoull(end + 1, &end, 10);
	if (*end != ':')
		return 0;
	if (xid < xmin)
		return 1;
	if (xid >= xmax)
		return 0;
	for (s = end + 1; *s != '\0'; s = *end == ',' ? end + 1 : end) {
		x = strtoull(s, &end, 10);
		if (end == s)
			return 0;
		if (x == xid)
			return 0;
	}
	return 1;
}

/*
 * A notification from file (or from pull, filing what the run directory
 * had filed), "N@XID OWNER": what it closed of ours is no longer held,
 * unless the last renewal's count has seen it already.  A filing that
 * committed while the renewal waited on a lock was counted there, and
 * its notification came after the renewal's result: taken off again,
 * pull claimed that many more and held more than --batch until the next
 * renewal.  Without @XID (a payload by hand), it is taken off.
 */
static void
filed(const char *channel, const char *payload, void *arg)
{
	struct pull *pl = arg;
	unsigned long long xid = 0;
	char *end;
	long n = strtol(payload, &end, 10);
	int seen = 0;

	(void)channel;
	if (*end == '@') {
		xid = strtoull(end + 1, &end, 10);
		seen = snap_sees(pl->snap, xid);
	}
	if (*end == ' ' && strcmp(end + 1, pl->owner) == 0 && !seen)
		pl->held = n < pl->held ? pl->held - n : 0;
}

/*
 * Read what the run directory has filed since the last read.  Nothing is
 * said of a line passed over: rfp-fetch, reading the same files, says it.
 */
static void
read_filed(struct filed *run_filed)
{
	char err[PATH_MAX + 128];

	if (filed_read(run_filed, NULL, NULL, err, sizeof(err)) == -1)
		msg_die(1, "%s: %s", q_cmd, err);
}

/*
 * Whether the record of id, claimed, is one the run directory has filed:
 * then it joins the group to be filed, with the run directory's record,
 * as file would file it, and is not written for rfp-fetch, which would
 * skip it as filed, so that nothing would ever file it in the queue and
 * pull would renew its lease for ever.
 */
static int
filed_here(struct pull *pl, const char *id)
{
	enum filed_as as = filed_as(pl->run_filed, id);
	char *text, err[64];
	json_t *rec;
	size_t len;

	if (as < FILED_DEAD || (text = filed_record(pl->run_filed, id, &len))
	    == NULL)
		return 0;
	rec = rec_parse(text, len, err, sizeof(err));
	/* Line 0: it comes from no line of standard input (grp_flush). */
	(void)grp_put(&pl->grp, id, fate_name(as == FILED_DONE ? FATE_DONE :
	    FATE_DEAD), as == FILED_DEAD ? rec_str(rec, "dead_reason") : NULL,
	    text, len, 0);
	json_decref(rec);
	free(text);
	return 1;
}

/*
 * The records held, looked for again in the run directory at each
 * renewal: one another pipeline on it files (rfp-fetch left it to that
 * one, which held it in the run directory: the queue's lease had run out
 * under it and this host claimed it since) is filed here.  Before, it was
 * filed by nobody under this host's claim, and pull renewed it for ever.
 * Only one found there a quarter lease ago or more (at the renewal
 * before, when renewals are a third of a lease apart), and still held,
 * is: this host's own records are in the run directory a moment before
 * file closes them in the queue (rfp-sink has them first), and taken
 * then they would be filed twice.  Two renewals in a row were not
 * enough: a renewal that passes over a row file is closing comes again
 * a twentieth of a lease later (RENEW_SOON), and on a busy machine
 * file's transaction outlasted two of them.
 */
static void
held_filed(struct pull *pl, const char *const *p, double lease)
{
	PGresult *r;
	json_t *seen, *at;
	const char *id;
	long i, n, here = 0;
	double now = clk_mono();
	char err[512];
	int changed;

	if (pl->run_filed == NULL || pl->held == 0)
		return;
	changed = filed_changed(pl->run_filed);
	if (json_object_size(pl->seen) == 0 && !changed)
		return;
	if (changed)
		read_filed(pl->run_filed);
	if ((r = pg_exec_named("mine", q_mine, 1, p, PGRES_TUPLES_OK, err,
	    sizeof(err))) == NULL)
		msg_die(1, "%s: %s", q_cmd, err);
	seen = json_object();
	n = PQntuples(r);
	for (i = 0; i < n; i++) {
		id = PQgetvalue(r, (int)i, 0);
		if (filed_as(pl->run_filed, id) < FILED_DEAD)
			continue;
		if ((at = json_object_get(pl->seen, id)) == NULL)
			json_object_set_new(seen, id, json_real(now));
		else if (now - json_real_value(at) < lease / 4)
			json_object_set(seen, id, at);
		else if (filed_here(pl, id))
			here++;
	}
	PQclear(r);
	json_decref(pl->seen);
	pl->seen = seen;
	if (here > 0) {
		msg_debug("%ld records held were filed in the run directory "
		    "since they were claimed", here);
		(void)grp_flush(&pl->grp);
	}
}

/*
 * Whether row id's rec (text) cannot be handed on: not an object, its id
 * not the row's, or longer than a line rfp-fetch reads.  Handed on, such
 * a record was dead bad_input with no id (or another row's), which file
 * cannot close: the row stayed claimed, and pull, and the run, waited on
 * it for ever.  It is filed dead bad_input here, its first 200 bytes kept
 * as rfp-fetch keeps a bad line's.
 */
static int
unusable(struct pull *pl, PGresult *r, int i)
{
	const char *id = PQgetvalue(r, i, 0), *text = PQgetvalue(r, i, 1);
	json_t *letter;
	char *t, why[160];

	if (strlen(text) >= REC_LINE_MAX)
		snprintf(why, sizeof(why), "longer than %d bytes",
		    REC_LINE_MAX);
	else if (strcmp(PQgetvalue(r, i, 2), "t") != 0)
		snprintf(why, sizeof(why), "not a JSON object");
	else if (strcmp(PQgetvalue(r, i, 3), "t") != 0)
		snprintf(why, sizeof(why), "its field \"id\" is not the row's");
	else
		return 0;
	msg_warn("pull: row \"%.80s\": its rec is %s; filed dead bad_input, "
	    "not handed on", id, why);
	letter = json_pack("{s:s,s:s,s:s,s:s,s:s%}", "id", id, "fate",
	    "dead", "dead_reason", "bad_input", "dead_detail", why, "raw",
	    text, (size_t)rec_utf8_prefix(text, 200));
	t = json_dumps(letter, JSON_COMPACT);
	(void)grp_put(&pl->grp, id, "dead", "bad_input", t, strlen(t), 0);
	free(t);
	json_decref(letter);
	return 1;
}

/*
 * Claim, write what was claimed for rfp-fetch and file what the run
 * directory has filed already; how many were claimed.  Those filed here
 * are held, as any, until file's notification (this one's own, in the
 * same session) says they are closed.
 */
static long
claim(struct pull *pl, const char *const *p, int sweep)
{
	PGresult *r;
	long i, n, here = 0;
	char *buf = NULL, err[512];
	size_t len = 0, cap = 0, l;

	r = pg_exec_named(sweep ? "sweep" : "claim", sweep ? q_sweep :
	    q_claim, 3, p, PGRES_TUPLES_OK, err, sizeof(err));
	if (r == NULL)
		msg_die(1, "%s: %s", q_cmd, err);
	n = PQntuples(r);
	if (n > 0 && pl->run_filed != NULL && filed_changed(pl->run_filed))
		read_filed(pl->run_filed);
	for (i = 0; i < n; i++) {
		if ((pl->run_filed != NULL &&
		    filed_here(pl, PQgetvalue(r, (int)i, 0))) ||
		    unusable(pl, r, (int)i)) {
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
		(void)grp_flush(&pl->grp);
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
void
pull(const struct qopts *o)
{
	struct pull pl;
	char lease[32], want[32], err[512];
	const char *p[3] = { o->owner, lease, want };
	long chunk = o->batch >= 4 ? o->batch / 4 : 1, n;
	double renew = 0, sweep = 0;
	int swept, gone, late;

	memset(&pl, 0, sizeof(pl));
	pl.owner = o->owner;
	pl.seen = json_object();
	snprintf(lease, sizeof(lease), "%.3f", o->lease);
	/*
	 * A claim or renewal lost to a server crash costs nothing: the
	 * connection, and with it this host's run, ends in the crash.
	 */
	PQclear(q("SET synchronous_commit = off", 0, NULL, PGRES_COMMAND_OK));
	PQclear(q("LISTEN " CHANNEL, 0, NULL, PGRES_COMMAND_OK));
	grp_open(&pl.grp, o->owner);
	if (o->run_dir != NULL) {
		pl.run_filed = filed_new(o->run_dir, o->retry_dead);
		read_filed(pl.run_filed);
	}
	for (;;) {
		if (clk_mono() >= renew) {
			/* Also corrects held: a row taken over is not ours. */
			PGresult *r = pg_exec_named("renew", q_renew, 2, p,
			    PGRES_TUPLES_OK, err, sizeof(err));
			if (r == NULL)
				msg_die(1, "%s: %s", q_cmd, err);
			pl.held = strtol(PQgetvalue(r, 0, 0), NULL, 10);
			free(pl.snap);
			pl.snap = xstrdup(PQgetvalue(r, 0, 2));
			renew = clk_mono() + o->lease / (strtol(PQgetvalue(r, 0,
			    1), NULL, 10) < pl.held ? RENEW_SOON : 3);
			PQclear(r);
			held_filed(&pl, p, o->lease);
		}
		n = 0;
		/*
		 * Past the deadline nothing is claimed, and once nothing is
		 * held pull ends: what rfp-fetch cut goes back to the queue
		 * (file.c), for the next run or another host, and claimed
		 * again here it was a duplicate id to rfp-fetch.
		 */
		late = o->deadline > 0 && clk_now() >= o->deadline;
		if (late && pl.held == 0)
			break;
		if (!late && (pl.held == 0 || o->batch - pl.held >= chunk)) {
			snprintf(want, sizeof(want), "%ld", o->batch - pl.held);
			if ((swept = clk_mono() >= sweep))
				sweep = clk_mono() + o->lease / 4;
			pl.held += n = claim(&pl, p, swept);
		}
		if (n == 0 && pl.held == 0 && q_long(q_left, 1, p) == 0)
			break;
		/*
		 * pull writes only when it claims, and it claims only when
		 * file says records were filed: with rfp-fetch gone (stopped
		 * by a signal, which the stages upstream of it ignore, or
		 * dead) nothing is filed, no write fails, and pull waited on,
		 * renewing its leases, so that neither the pipeline nor the
		 * records ended.  So the wait watches standard output too.
		 */
		if (pg_wait(fmax(0, fmin(o->lease / 4, renew - clk_mono())),
		    STDOUT_FILENO, &gone, filed, &pl, err, sizeof(err)) == -1)
			msg_die(1, "%s: %s", q_cmd, err);
		if (gone)
			msg_die(1, "pull: the reader of standard output has "
			    "gone (rfp-fetch ended); the %ld records claimed "
			    "and not filed go back to the queue when their "
			    "lease runs out", pl.held);
	}
	grp_close(&pl.grp);
	filed_free(pl.run_filed);
	json_decref(pl.seen);
	free(pl.snap);
}
