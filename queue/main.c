/*
 * rfp-queue: the work queue that several hosts share, in the PostgreSQL
 * database named by --state (or the config's state: key).
 *
 * load reads a manifest on stdin and adds each record under its "id" to
 * rfp_queue, once: loading the same manifest again adds nothing.  It
 * prints {"added":N,"present":N,"bad":N}; a line that is not an object
 * with a string "id" is reported and not loaded.
 * pull claims records with FOR UPDATE SKIP LOCKED (queued ones, and those
 * whose claimant's lease ran out), at most --batch held at a time, and
 * writes them to stdout as a manifest for rfp-fetch.  While it runs it
 * renews the lease of what it holds, so only a dead host's records are
 * claimed again.  It ends when nothing in the queue is left to do.
 * file passes records through untouched; each one with fate done or dead
 * is recorded in rfp_results and its queue row closed.
 * count prints how many records the queue holds; summary prints the
 * combined reconciliation of every host as one JSON object.
 *
 * It never fetches anything and never decides a fate.
 *
 * Exit: 0 done, 1 a fatal error (the server, stdout), 2 a usage or
 * configuration error.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "lib/clk.h"
#include "lib/conf.h"
#include "lib/msg.h"
#include "lib/opt.h"
#include "lib/pg.h"
#include "lib/rec.h"
#include "lib/store.h"
#include "lib/x.h"

#define PROG	"rfp-queue"

static const char usage[] =
    "usage: rfp-queue [-hv] [--batch N] [--config FILE] [--lease S]\n"
    "                 [--owner NAME] [--state URL] [--version]\n"
    "                 load|pull|file|count|summary\n";

static struct opts {
	long	 batch;
	double	 lease;		/* real seconds */
	char	*owner;
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

static void
load(void)
{
	struct rec_reader *rd = rec_reader_new(STDIN_FILENO, 0);
	long added = 0, present = 0, bad = 0, lineno;
	const char *p[2];
	enum rec_rc rc;
	char *line, err[256], *s;
	size_t len;
	json_t *rec;

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
		s = json_dumps(rec, JSON_COMPACT);
		p[0] = rec_str(rec, "id");
		p[1] = s;
		if (affected(q("INSERT INTO rfp_queue (id, rec) VALUES ($1, "
		    "$2::jsonb) ON CONFLICT (id) DO NOTHING", 2, p,
		    PGRES_COMMAND_OK)) == 1)
			added++;
		else
			present++;
		free(s);
		json_decref(rec);
	}
	rec_reader_free(rd);
	PQclear(q("COMMIT", 0, NULL, PGRES_COMMAND_OK));
	printf("{\"added\":%ld,\"present\":%ld,\"bad\":%ld}\n", added,
	    present, bad);
}

static void
pull(void)
{
	char lease[32], want[32];
	const char *p[3] = { opts.owner, lease, want };
	PGresult *r;
	long held, i, n;
	size_t len;
	char *s;

	snprintf(lease, sizeof(lease), "%.3f", opts.lease);
	for (;;) {
		/* Renew what this host holds: it is alive. */
		held = affected(q("UPDATE rfp_queue SET lease_until = now() + "
		    "$2::float8 * interval '1 second' WHERE owner = $1 AND "
		    "status = 'claimed'", 2, p, PGRES_COMMAND_OK));
		n = 0;
		if (held < opts.batch) {
			snprintf(want, sizeof(want), "%ld", opts.batch - held);
			r = q("UPDATE rfp_queue SET status = 'claimed', "
			    "owner = $1, lease_until = now() + $2::float8 * "
			    "interval '1 second', claims = claims + 1 WHERE id "
			    "IN (SELECT id FROM rfp_queue WHERE status = "
			    "'queued' OR (status = 'claimed' AND lease_until < "
			    "now() AND owner <> $1) ORDER BY seq LIMIT "
			    "$3::int FOR UPDATE SKIP LOCKED) RETURNING rec::text",
			    3, p, PGRES_TUPLES_OK);
			n = PQntuples(r);
			for (i = 0; i < n; i++) {
				s = xasprintf("%s\n", PQgetvalue(r, (int)i, 0));
				len = strlen(s);
				if (write(STDOUT_FILENO, s, len) !=
				    (ssize_t)len)
					msg_diesys(1, "write stdout");
				free(s);
			}
			PQclear(r);
			if (n > 0)
				msg_debug("claimed %ld records", n);
		}
		if (n == 0 && held == 0 && q_long("SELECT count(*) FROM "
		    "rfp_queue WHERE status IN ('queued', 'claimed')", 0,
		    NULL) == 0)
			return;
		if (n == 0)
			clk_sleep(fmin(0.1, opts.lease / 4), NULL);
	}
}

static int
file1(json_t *rec, long lineno, void *arg)
{
	const char *fate = rec_str(rec, "fate"), *p[5];
	char *s;

	(void)lineno;
	(void)arg;
	if (fate == NULL || rec_str(rec, "id") == NULL ||
	    (strcmp(fate, "done") != 0 && strcmp(fate, "dead") != 0))
		return 0;
	s = json_dumps(rec, JSON_COMPACT);
	p[0] = rec_str(rec, "id");
	p[1] = fate;
	p[2] = rec_str(rec, "dead_reason");
	p[3] = opts.owner;
	p[4] = s;
	/* One statement: the row closes and the result lands together. */
	PQclear(q("WITH c AS (UPDATE rfp_queue SET status = $2, lease_until "
	    "= NULL WHERE id = $1 AND status IN ('queued', 'claimed')) "
	    "INSERT INTO rfp_results (id, fate, dead_reason, owner, rec) "
	    "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (id) DO UPDATE "
	    "SET filings = rfp_results.filings + 1", 5, p, PGRES_COMMAND_OK));
	free(s);
	return 0;
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

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, 'b' },
		{ "config", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ "lease", required_argument, NULL, 'l' },
		{ "owner", required_argument, NULL, 'o' },
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
	opts.batch = 16;
	opts.lease = 60;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			opts.batch = opt_long("batch", optarg, 1, 100000);
			break;
		case 'C':
			config = optarg;
			break;
		case 'h':
			opt_help(usage);
		case 'l':
			opts.lease = opt_duration("lease", optarg);
			break;
		case 'o':
			owner = optarg;
			break;
		case 'S':
			state = opt_state(optarg);
			break;
		case 'v':
			msg_verbose = 1;
			break;
		case 'V':
			opt_version();
		default:
			opt_bad(usage, argv, c);
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
	if (store_init(state, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	conf_free(&conf);
	if (strcmp(cmd, "load") == 0)
		load();
	else if (strcmp(cmd, "pull") == 0)
		pull();
	else if (strcmp(cmd, "file") == 0) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		if (rec_loop(PROG, STDIN_FILENO, STDOUT_FILENO, file1,
		    NULL) == -1)
			msg_die(1, "stopped: output is incomplete");
	} else if (strcmp(cmd, "count") == 0)
		printf("%ld\n", q_long("SELECT count(*) FROM rfp_queue", 0,
		    NULL));
	else
		summary();
	store_close();
	free(opts.owner);
	opt_fshut();
	return 0;
}
