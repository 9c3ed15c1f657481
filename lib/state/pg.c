/* pg: one libpq connection, the versioned schema, and the statements. */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>
#include <jansson.h>

#include "lib/base/proc.h"
#include "lib/record/rec.h"
#include "lib/state/pg.h"
#include "lib/base/x.h"

static PGconn *conn;
static char *where;		/* the URL, redacted, for messages */
#define NSECRET	8
static char *secret[NSECRET];	/* its passwords as libpq reads them, hidden
				   in what libpq says too */
static json_t *prepared;	/* names prepared on conn */
static json_t *tells;		/* [channel, payload] for pg_update to send */
static int slot_ear = 1;	/* 0: listening for slots given back */

#define LIBPQ	"libpq.so.5"	/* Debian's libpq5 */
#define CONNECT_TIMEOUT	"10"	/* s a connection may take, unless told */

struct pg_lib pg_lib;

/* Fill pg_lib from libpq, once: 0, or -1 with err set. */
static int
load(char *err, size_t errlen)
{
	/* Each libpq function beside the slot it fills. */
#define SYM(f, m)	{ #f, (void **)&pg_lib.m }
	const struct {
		const char	*name;
		void		**slot;
	} sym[] = {
		SYM(PQconnectdb, connectdb), SYM(PQstatus, status),
		SYM(PQerrorMessage, errormessage), SYM(PQfinish, finish),
		SYM(PQexec, exec), SYM(PQexecParams, execparams),
		SYM(PQresultStatus, resultstatus),
		SYM(PQresultErrorMessage, resulterrormessage),
		SYM(PQclear, clear), SYM(PQntuples, ntuples),
		SYM(PQgetvalue, getvalue), SYM(PQgetisnull, getisnull),
		SYM(PQcmdTuples, cmdtuples), SYM(PQsocket, socket),
		SYM(PQconsumeInput, consumeinput),
		SYM(PQnotifies, notifies), SYM(PQfreemem, freemem),
		SYM(PQprepare, prepare), SYM(PQexecPrepared, execprepared),
		SYM(PQenterPipelineMode, enterpipelinemode),
		SYM(PQexitPipelineMode, exitpipelinemode),
		SYM(PQpipelineSync, pipelinesync),
		SYM(PQsendQueryParams, sendqueryparams),
		SYM(PQsendPrepare, sendprepare),
		SYM(PQsendQueryPrepared, sendqueryprepared),
		SYM(PQgetResult, getresult), SYM(PQbackendPID, backendpid),
		SYM(PQconninfoParse, conninfoparse),
		SYM(PQconninfoFree, conninfofree),
	};
#undef SYM
	static void *h;
	size_t i;

	if (h != NULL)
		return 0;
	if ((h = dlopen(LIBPQ, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		snprintf(err, errlen, "postgresql state needs %s (the Debian "
		    "package libpq5): %s", LIBPQ, dlerror());
		return -1;
	}
	for (i = 0; i < sizeof(sym) / sizeof(sym[0]); i++)
		if ((*sym[i].slot = dlsym(h, sym[i].name)) == NULL) {
			snprintf(err, errlen, "%s has no %s: %s", LIBPQ,
			    sym[i].name, dlerror());
			dlclose(h);
			h = NULL;
			return -1;
		}
	return 0;
}

/*
 * Migrations, applied in order; entry v-1 takes the schema from version
 * v-1 to v.  Never edit one that shipped: add the next.
 */
static const char *const migrations[] = {
	"CREATE TABLE rfp_state (kind text NOT NULL, key text NOT NULL, "
	"doc jsonb, PRIMARY KEY (kind, key));"
	"CREATE TABLE rfp_ledger (seq bigserial PRIMARY KEY, key text NOT NULL, "
	"id text, event text NOT NULL, t double precision, entry jsonb NOT NULL);"
	"CREATE INDEX rfp_ledger_key ON rfp_ledger (key, seq);"
	"CREATE TABLE rfp_queue (id text PRIMARY KEY, seq bigserial, "
	"rec jsonb NOT NULL, status text NOT NULL DEFAULT 'queued' CHECK "
	"(status IN ('queued', 'claimed', 'done', 'dead')), owner text, "
	"lease_until timestamptz, claims int NOT NULL DEFAULT 0, "
	"loaded_at timestamptz NOT NULL DEFAULT now());"
	"CREATE INDEX rfp_queue_todo ON rfp_queue (status, seq);"
	"CREATE TABLE rfp_results (id text PRIMARY KEY, fate text NOT NULL, "
	"dead_reason text, owner text, rec jsonb NOT NULL, "
	"filings int NOT NULL DEFAULT 1, "
	"filed_at timestamptz NOT NULL DEFAULT now());"
};
#define NMIG	((int)(sizeof(migrations) / sizeof(migrations[0])))

/* Each of the URL's passwords in err (of 4 bytes or more) made ***. */
static void
hide(char *err)
{
	char *at;
	size_t i, n;

	for (i = 0; i < NSECRET && secret[i] != NULL; i++) {
		n = strlen(secret[i]);
		while ((at = strstr(err, secret[i])) != NULL) {
			memcpy(at, "***", 3);
			memmove(at + 3, at + n, strlen(at + n) + 1);
		}
	}
}

/*
 * The first line of libpq's message.  One about connecting may quote a
 * part of the URL (a value libpq could not read, a host, a parameter):
 * what it quotes stays only when the URL as shown (where, the password
 * hidden) shows it already, or it is a connection option's name; else
 * it is "...".
 */
static void
pgerr(char *err, size_t errlen, const char *what, const char *msg)
{
	static const char *const names[] = { "host", "hostaddr", "port",
	    "dbname", "user", "password", "sslpassword", "options",
	    "application_name", "connect_timeout", "sslmode",
	    "target_session_attrs", "=" };
	size_t n = strcspn(msg, "\n"), i, j, len = 0;
	const char *q, *e;
	char *line = xmalloc(3 * n + 4), *tok;	/* "" becomes "..." */
	int keep;

	if (strcmp(what, "cannot connect") != 0) {
		memcpy(line, msg, n);
		len = n;
	} else {
		for (i = 0; i < n; i++) {
			line[len++] = msg[i];
			if (msg[i] != '"' || (q = memchr(msg + i + 1, '"',
			    n - i - 1)) == NULL)
				continue;
			e = msg + i + 1;
			tok = xasprintf("%.*s", (int)(q - e), e);
			keep = where != NULL && strstr(where, tok) != NULL;
			for (j = 0; !keep && j < sizeof(names) /
			    sizeof(names[0]); j++)
				keep = strcmp(tok, names[j]) == 0;
			if (keep) {
				memcpy(line + len, e, (size_t)(q - e));
				len += (size_t)(q - e);
			} else {
				memcpy(line + len, "...", 3);
				len += 3;
			}
			free(tok);
			line[len++] = '"';
			i = (size_t)(q - msg);
		}
	}
	line[len] = '\0';
	snprintf(err, errlen, "%s: %s%s%s", where ? where : "postgresql",
	    what, *what ? ": " : "", line);
	free(line);
	hide(err);
}

PGresult *
pg_exec(const char *sql, int n, const char *const *params,
    ExecStatusType want, char *err, size_t errlen)
{
	PGresult *r;

	r = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != want) {
		pgerr(err, errlen, "", r ? PQresultErrorMessage(r) :
		    PQerrorMessage(conn));
		PQclear(r);
		return NULL;
	}
	return r;
}

PGresult *
pg_exec_named(const char *name, const char *sql, int n,
    const char *const *params, ExecStatusType want, char *err, size_t errlen)
{
	PGresult *r;

	if (prepared == NULL)
		prepared = json_object();
	if (json_object_get(prepared, name) == NULL) {
		r = PQprepare(conn, name, sql, n, NULL);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			pgerr(err, errlen, "", r ? PQresultErrorMessage(r) :
			    PQerrorMessage(conn));
			PQclear(r);
			return NULL;
		}
		PQclear(r);
		json_object_set_new(prepared, name, json_true());
	}
	r = PQexecPrepared(conn, name, n, params, NULL, NULL, 0);
	if (PQresultStatus(r) != want) {
		pgerr(err, errlen, "", r ? PQresultErrorMessage(r) :
		    PQerrorMessage(conn));
		PQclear(r);
		return NULL;
	}
	return r;
}

/*
 * One statement of a pipeline: prepared once per connection under name,
 * or with name NULL sent as it is.
 */
struct step {
	const char	*name;
	const char	*sql;
	int		 n;
	const char *const *p;
	ExecStatusType	 want;
};

#define PIPE_MAX	4

/*
 * Send the n steps at once in libpq's pipeline mode, one round trip for
 * all, and read every result: 0 with the last step's result in *last
 * (the caller PQclears it), or -1 with err set by the first step that
 * failed (the server skips the steps after it).
 */
static int
pipe_run(const struct step *s, int n, PGresult **last, char *err,
    size_t errlen)
{
	PGresult *r;
	ExecStatusType want;
	int i, k, ok = 1, prep[PIPE_MAX];

	*last = NULL;
	if (prepared == NULL)
		prepared = json_object();
	if (PQenterPipelineMode(conn) == 0)
		goto broken;
	for (i = 0; i < n; i++) {
		prep[i] = s[i].name != NULL && json_object_get(prepared,
		    s[i].name) == NULL;
		if (prep[i] && PQsendPrepare(conn, s[i].name, s[i].sql,
		    s[i].n, NULL) == 0)
			goto broken;
		if (s[i].name != NULL ? PQsendQueryPrepared(conn, s[i].name,
		    s[i].n, s[i].p, NULL, NULL, 0) == 0 : PQsendQueryParams(
		    conn, s[i].sql, s[i].n, NULL, s[i].p, NULL, NULL, 0) == 0)
			goto broken;
	}
	if (PQpipelineSync(conn) == 0)
		goto broken;
	/* Each command's results end with a NULL; the sync's does not. */
	for (i = 0; i < n; i++)
		for (k = prep[i]; k >= 0; k--) {
			if ((r = PQgetResult(conn)) == NULL)
				goto broken;
			want = k == 1 ? PGRES_COMMAND_OK : s[i].want;
			if (ok && PQresultStatus(r) != want) {
				ok = 0;
				pgerr(err, errlen, "", PQresultErrorMessage(r));
			}
			if (k == 1 && PQresultStatus(r) == PGRES_COMMAND_OK)
				json_object_set_new(prepared, s[i].name,
				    json_true());
			if (ok && k == 0 && i == n - 1)
				*last = r;
			else
				PQclear(r);
			while ((r = PQgetResult(conn)) != NULL)
				PQclear(r);
		}
	if ((r = PQgetResult(conn)) == NULL ||
	    PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
		PQclear(r);
		goto broken;
	}
	PQclear(r);
	if (PQexitPipelineMode(conn) == 0)
		goto broken;
	return ok ? 0 : -1;
broken:
	PQclear(*last);
	*last = NULL;
	pgerr(err, errlen, "", PQerrorMessage(conn));
	return -1;
}

/* Run a statement whose result does not matter; 0 or -1. */
static int
run1(const char *sql, char *err, size_t errlen)
{
	PGresult *r = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		pgerr(err, errlen, "", r ? PQresultErrorMessage(r) :
		    PQerrorMessage(conn));
		PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
}

/* Give fn each notification in hand (with own 0, not this session's). */
static int
notes(pg_note_fn *fn, void *arg, int own)
{
	PGnotify *nf;
	int n = 0;

	while ((nf = PQnotifies(conn)) != NULL) {
		if (own || nf->be_pid != PQbackendPID(conn)) {
			fn(nf->relname, nf->extra, arg);
			n++;
		}
		PQfreemem(nf);
	}
	return n;
}

int
pg_listen(const char *channel, char *err, size_t errlen)
{
	char *sql = xasprintf("LISTEN %s", channel);
	int rc = run1(sql, err, errlen);

	free(sql);
	return rc;
}

int
pg_news_fd(void)
{
	return PQsocket(conn);
}

int
pg_news(int readable, pg_note_fn *fn, void *arg, char *err, size_t errlen)
{
	if (readable && PQconsumeInput(conn) == 0) {
		pgerr(err, errlen, "", PQerrorMessage(conn));
		return -1;
	}
	return notes(fn, arg, 0);
}

void
pg_tell(const char *channel, const char *payload)
{
	if (tells == NULL)
		tells = json_array();
	json_array_append_new(tells, json_pack("[s,s]", channel, payload));
}

int
pg_wait(double secs, int watch, int *gone, pg_note_fn *fn, void *arg,
    char *err, size_t errlen)
{
	struct pollfd pfd[2];
	int n;

	*gone = 0;
	/* libpq keeps what came in with a result: look there first. */
	if (PQconsumeInput(conn) == 0)
		goto fail;
	if ((n = notes(fn, arg, 1)) > 0)
		return n;
	pfd[0].fd = PQsocket(conn);
	pfd[0].events = POLLIN;
	pfd[1].fd = watch;
	pfd[1].events = 0;	/* POLLERR, POLLHUP: its other end closed */
	pfd[0].revents = pfd[1].revents = 0;
	if (poll(pfd, watch >= 0 ? 2 : 1, secs > 0 ? (int)(secs * 1000 +
	    0.5) : 0) == -1 && errno != EINTR) {
		snprintf(err, errlen, "%s: poll: %s", where, strerror(errno));
		return -1;
	}
	*gone = (pfd[1].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0;
	if (PQconsumeInput(conn) == 0)
		goto fail;
	return notes(fn, arg, 1);
fail:
	pgerr(err, errlen, "", PQerrorMessage(conn));
	return -1;
}

static void
rollback(void)
{
	PQclear(PQexec(conn, "ROLLBACK"));
}

/* Create or migrate the schema, serialised by a transaction lock. */
static int
migrate(int want, char *err, size_t errlen)
{
	PGresult *r;
	char buf[64];
	const char *p[1];
	int have, v;

	if (run1("BEGIN", err, errlen) == -1)
		return -1;
	if (run1("SELECT pg_advisory_xact_lock(7270001)", err, errlen) == -1 ||
	    run1("CREATE TABLE IF NOT EXISTS rfp_schema (version int NOT NULL)",
	    err, errlen) == -1)
		goto fail;
	if ((r = pg_exec("SELECT coalesce(max(version), 0) FROM rfp_schema",
	    0, NULL, PGRES_TUPLES_OK, err, errlen)) == NULL)
		goto fail;
	have = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	if (have > want) {
		snprintf(err, errlen, "%s: schema version %d is newer than this "
		    "rfpipe (%d)", where, have, want);
		goto fail;
	}
	/*
	 * No version, and rfpipe's tables there: rfp_schema was dropped or
	 * emptied by hand.  Made again from version 0, the first migration
	 * failed on "relation rfp_state already exists".
	 */
	if (have == 0) {
		if ((r = pg_exec("SELECT to_regclass('rfp_state') IS NOT NULL",
		    0, NULL, PGRES_TUPLES_OK, err, errlen)) == NULL)
			goto fail;
		v = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
		PQclear(r);
		if (v) {
			snprintf(err, errlen, "%s: rfpipe's tables are there "
			    "but rfp_schema holds no version: put the row back "
			    "(INSERT INTO rfp_schema VALUES (%d), if the tables "
			    "are this rfpipe's), or drop the rfp_ tables to "
			    "start afresh", where, want);
			goto fail;
		}
	}
	for (v = have; v < want && v < NMIG; v++)
		if (run1(migrations[v], err, errlen) == -1)
			goto fail;
	if (have < want) {
		snprintf(buf, sizeof(buf), "%d", want);
		p[0] = buf;
		if ((r = pg_exec("DELETE FROM rfp_schema", 0, NULL,
		    PGRES_COMMAND_OK, err, errlen)) == NULL)
			goto fail;
		PQclear(r);
		if ((r = pg_exec("INSERT INTO rfp_schema VALUES ($1::int)", 1,
		    p, PGRES_COMMAND_OK, err, errlen)) == NULL)
			goto fail;
		PQclear(r);
	}
	return run1("COMMIT", err, errlen);
fail:
	rollback();
	return -1;
}

/*
 * Whether the parameter name k (klen bytes, percent-encoded) is one whose
 * value is a secret, as libpq reads it: password, or sslpassword (the
 * client key's passphrase).
 */
static int
secret_key(const char *k, size_t klen)
{
	char key[16];
	size_t i, n = 0;
	unsigned x;

	for (i = 0; i < klen; i++) {
		x = (unsigned char)k[i];
		if (k[i] == '%' && i + 2 < klen &&
		    isxdigit((unsigned char)k[i + 1]) &&
		    isxdigit((unsigned char)k[i + 2]) &&
		    sscanf(k + i + 1, "%2x", &x) == 1)
			i += 2;
		if (n == sizeof(key) - 1)
			return 0;
		key[n++] = (char)x;
	}
	key[n] = '\0';
	return strcmp(key, "password") == 0 || strcmp(key, "sslpassword") == 0;
}

char *
pg_redact(const char *url)
{
	const char *s = strstr(url, "://"), *a, *at, *e, *colon, *k;
	size_t f, klen, i, off, q, x;
	char *r, *t;

	r = xstrdup(url);
	if (s == NULL)
		return r;
	/*
	 * scheme://user:password@host...: libpq's userinfo ends at the first
	 * @ before any / (a raw ? in a user or password is theirs).  A raw @
	 * in a password, which libpq would read as the host's start (and
	 * store_url_check refuses), is hidden with it: the userinfo is taken
	 * to end at the last @ before the host part ends, at a / or a ?.
	 */
	a = s + 3;
	f = strcspn(a, "@/");
	at = NULL;
	if (a[f] == '@') {
		e = a + f + 1;
		e += strcspn(e, "/?");
		for (at = a + f; (k = memchr(at + 1, '@', (size_t)(e - at -
		    1))) != NULL; at = k)
			;
	} else if ((x = a[0] == '[' ? strcspn(a, "]") : 0) <= f &&
	    (colon = memchr(a + x, ':', f - x)) != NULL &&
	    strspn(colon + 1, "0123456789") < (size_t)(a + f - colon - 1) &&
	    (k = strchr(a, '@')) != NULL && k < a + strcspn(a, "?"))
		/*
		 * user:pass/word@host: a port that is no number, then an @
		 * before the query: a raw / in a password (refused too).
		 */
		at = k;
	q = at != NULL ? (size_t)(at - url) + 1 : (size_t)(a - url);
	if (at != NULL && (colon = memchr(a, ':', (size_t)(at - a))) != NULL) {
		free(r);
		r = xasprintf("%.*s:***%s", (int)(colon - url), url, at);
		q = (size_t)(colon - url) + 5;
	}
	/*
	 * ...?password=secret&...: the query starts at the first ? after the
	 * userinfo, with or without a path before it (postgresql://?host=...
	 * and postgresql://h?password=... are libpq's too), but not at one in
	 * a host's [ ] (libpq's: [x?y] is a host; a [ in the path opens
	 * nothing; x: 1 in [ ], 2 past the hosts).  Each parameter's name is
	 * read as libpq reads it, percent-decoded (pass%77ord is password).
	 */
	for (k = r + q, x = 0; *k != '\0' && (*k != '?' || x == 1); k++)
		if (x == 0 && *k == '[')
			x = 1;
		else if (x == 1 && *k == ']')
			x = 0;
		else if (x == 0 && *k == '/')
			x = 2;
	if (*k == '\0')
		return r;
	for (k++;; k += klen + 1) {
		klen = strcspn(k, "&");
		i = strcspn(k, "=");
		if (i < klen && secret_key(k, i)) {
			off = (size_t)(k - r) + i + 1;
			t = xasprintf("%.*s***%s", (int)off, r, k + klen);
			free(r);
			r = t;
			k = r + off;
			klen = 3;
		}
		if (k[klen] == '\0')
			break;
	}
	return r;
}

/*
 * Every process holds a session advisory lock named by its id, (ID_LOCK,
 * hashtext(id)), for as long as it is connected: whether another process
 * is alive is then whether its lock is held, which the database knows of
 * every host.  Two ids that hash alike only make a process that has gone
 * seem alive, as a host's silence did before.  The lock is shared: two
 * processes of one id (PID namespaces on one host name, as containers on
 * the host's network) or of ids that hash alike both take it at once, and
 * it is held while either is connected; an exclusive one would keep the
 * second waiting in pg_open for as long as the first runs.
 */
#define ID_LOCK	"7270002"
/*
 * ... and every process holds RUN_LOCK shared, one key for all, for as
 * long as it is connected: a process that takes it alone, in a
 * transaction (pg_alone), knows no other is connected, whatever the role
 * may read, and none connects until that transaction ends.
 */
#define RUN_LOCK	"7270004"

static const char q_alive[] =
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
    "AND database = (SELECT oid FROM pg_database WHERE datname = "
    "current_database()) AND classid = " ID_LOCK " AND objid = "
    "(hashtext($1)::bigint & 4294967295)::text::oid AND objsubid = 2 "
    "AND granted)";

/*
 * 1 when this role may read pg_locks.  A server may have revoked it; the
 * question, asked in a transaction, would then abort it, so it is not
 * asked and liveness is not known.
 */
static int sees_locks;

static int
hold_id(char *err, size_t errlen)
{
	char id[300];
	const char *p[1] = { id };
	PGresult *r;

	proc_id(id, sizeof(id));
	if ((r = pg_exec("SELECT pg_advisory_lock_shared(" ID_LOCK
	    ", hashtext($1)), has_table_privilege('pg_catalog.pg_locks', "
	    "'SELECT'), pg_advisory_lock_shared(" RUN_LOCK ")", 1, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	sees_locks = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 1),
	    "t") == 0;
	PQclear(r);
	return 0;
}

int
pg_url_check(const char *url, char *err, size_t errlen)
{
	PQconninfoOption *o, *p;
	char *why = NULL;
	size_t i = 0;

	if (load(err, errlen) == -1)
		return 0;
	if ((o = PQconninfoParse(url, &why)) == NULL) {
		if (why != NULL)
			PQfreemem(why);
		snprintf(err, errlen, "libpq cannot read the URL: write an @, "
		    "/, ?, &, =, %%, \" or [ in a user name, password or "
		    "database name as %%40, %%2F, %%3F, %%26, %%3D, %%25, %%22, "
		    "%%5B");
		return -1;
	}
	/* Kept, to be hidden wherever libpq would say them. */
	for (p = o; p->keyword != NULL && i < NSECRET; p++)
		if (p->val != NULL && strlen(p->val) >= 4 &&
		    secret_key(p->keyword, strlen(p->keyword))) {
			free(secret[i]);
			secret[i++] = xstrdup(p->val);
		}
	PQconninfoFree(o);
	return 0;
}

int
pg_open(const char *url, int want, char *err, size_t errlen)
{
	if (load(err, errlen) == -1)
		return -1;
	free(where);
	where = pg_redact(url);
	/*
	 * A server that accepts and never answers held every stage, and the
	 * run past its deadline, for as long as it stayed silent.  The URL's
	 * connect_timeout, or the environment's, still rules.
	 */
	setenv("PGCONNECT_TIMEOUT", CONNECT_TIMEOUT, 0);
	conn = PQconnectdb(url);
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
		pgerr(err, errlen, "cannot connect", conn ? PQerrorMessage(
		    conn) : "out of memory");
		pg_close();
		return -1;
	}
	/*
	 * No lock_timeout of its own: a host's load waits on another's, for
	 * as long as a large manifest takes, on an advisory lock that it
	 * would cut.  A lock held by hand (LOCK TABLE) is ended by the URL's
	 * options=-c lock_timeout=... or PGOPTIONS.
	 */
	if (run1("SET client_min_messages = warning", err, errlen) == -1 ||
	    migrate(want, err, errlen) == -1 || hold_id(err, errlen) == -1) {
		pg_close();
		return -1;
	}
	return 0;
}

int
pg_alive(const char *id)
{
	const char *p[1] = { id };
	char err[256];
	PGresult *r;
	int a;

	if (!sees_locks)
		return -1;
	if ((r = pg_exec_named("alive", q_alive, 1, p, PGRES_TUPLES_OK, err,
	    sizeof(err))) == NULL)
		return -1;
	a = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	return a;
}

long
pg_others(void)
{
	char err[256];
	PGresult *r;
	long n;

	if (!sees_locks)
		return -1;
	if ((r = pg_exec("SELECT count(DISTINCT pid) FROM pg_locks WHERE "
	    "locktype = 'advisory' AND database = (SELECT oid FROM "
	    "pg_database WHERE datname = current_database()) AND classid = "
	    ID_LOCK " AND objsubid = 2 AND granted AND pid <> "
	    "pg_backend_pid()", 0, NULL, PGRES_TUPLES_OK, err,
	    sizeof(err))) == NULL)
		return -1;
	n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return n;
}

int
pg_alone(char *err, size_t errlen)
{
	PGresult *r;
	int a;

	if ((r = pg_exec("SELECT pg_try_advisory_xact_lock(" RUN_LOCK ")",
	    0, NULL, PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	a = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	return a;
}

PGconn *
pg_conn(void)
{
	return conn;
}

void
pg_close(void)
{
	size_t i;

	if (conn != NULL)
		PQfinish(conn);
	conn = NULL;
	json_decref(prepared);
	prepared = NULL;
	json_decref(tells);
	tells = NULL;
	slot_ear = 1;
	for (i = 0; i < NSECRET; i++) {
		free(secret[i]);
		secret[i] = NULL;
	}
	free(where);
	where = NULL;
}

static const char q_lock[] =
    "SELECT doc::text FROM rfp_state WHERE kind = $1 AND key = $2 "
    "FOR UPDATE";

/*
 * Two round trips: the transaction opened and the row locked and read in
 * one pipeline, the row written and the transaction committed in another
 * (a third, once, for a row not yet there), so the row is held locked
 * for one round trip of the client's.
 */
int
pg_update(const char *kind, const char *key, files_fn *fn, void *arg,
    char *err, size_t errlen)
{
	const char *p[3] = { kind, key ? key : "", NULL }, *tp[1] = { NULL };
	/*
	 * Pace and breaker are advice: a server crash may lose their last
	 * moments, so they skip the WAL flush.  The budget is not advice.
	 */
	const struct step open[] = {
		{ NULL, "BEGIN", 0, NULL, PGRES_COMMAND_OK },
		{ NULL, strcmp(kind, "budget") == 0 ? "SET LOCAL "
		    "synchronous_commit = on" : "SET LOCAL synchronous_commit "
		    "= off", 0, NULL, PGRES_COMMAND_OK },
		{ "state_lock", q_lock, 2, p, PGRES_TUPLES_OK },
	}, add[] = {
		{ "state_add", "INSERT INTO rfp_state (kind, key) VALUES "
		    "($1, $2) ON CONFLICT DO NOTHING", 2, p,
		    PGRES_COMMAND_OK },
		{ "state_lock", q_lock, 2, p, PGRES_TUPLES_OK },
	}, put[] = {
		{ "state_put", "UPDATE rfp_state SET doc = $3::jsonb WHERE "
		    "kind = $1 AND key = $2", 3, p, PGRES_COMMAND_OK },
		{ NULL, "COMMIT", 0, NULL, PGRES_COMMAND_OK },
		/* Delivered at the commit, to the listeners in it. */
		{ "state_tell", "SELECT pg_notify(t->>0, t->>1) FROM "
		    "jsonb_array_elements($1::jsonb) AS t", 1, tp,
		    PGRES_TUPLES_OK },
	};
	const struct step put_tell[] = { put[0], put[2], put[1] };
	json_error_t je;
	PGresult *r, *c;
	json_t *doc = NULL;
	char *s;
	int rc;

	if (pipe_run(open, 3, &r, err, errlen) == -1)
		goto fail;
	if (PQntuples(r) == 0) {
		PQclear(r);
		if (pipe_run(add, 2, &r, err, errlen) == -1)
			goto fail;
	}
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
		doc = json_loads(PQgetvalue(r, 0, 0), 0, &je);
		if (!json_is_object(doc)) {
			/*
			 * Unreadable is not "not an object": a number past
			 * what jansson reads ({"tat":1e19}, which jsonb
			 * prints as a 20-digit integer) was said to be one.
			 */
			snprintf(err, errlen, "%s: rfp_state %s/%s: %s; "
			    "delete the row to start afresh", where, kind,
			    p[1], doc == NULL ? rec_json_why(&je) :
			    "not an object");
			json_decref(doc);
			PQclear(r);
			goto fail;
		}
	}
	PQclear(r);
	json_array_clear(tells);
	rc = fn(&doc, arg, err, errlen);
	if (rc == FILES_CORRUPT) {
		s = xstrdup(err);
		snprintf(err, errlen, "%s: rfp_state %s/%s: corrupt (%s); "
		    "delete the row to start afresh", where, kind, p[1], s);
		free(s);
		rc = -1;
	}
	if (rc == 0) {
		s = json_dumps(doc, JSON_COMPACT);
		p[2] = s;
		if (json_array_size(tells) > 0) {
			tp[0] = json_dumps(tells, JSON_COMPACT);
			rc = pipe_run(put_tell, 3, &c, err, errlen);
			free((char *)tp[0]);
		} else
			rc = pipe_run(put, 2, &c, err, errlen);
		free(s);
		PQclear(c);
		json_decref(doc);
		json_array_clear(tells);
		if (rc == -1)
			goto fail;
		return 0;
	}
	json_decref(doc);
	json_array_clear(tells);
	if (rc == -1)
		goto fail;
	if (run1("COMMIT", err, errlen) == -1)
		return -1;
	return rc;
fail:
	rollback();
	return -1;
}

/*
 * A PostgreSQL int[] literal (to free): the k below n with flags[k] set,
 * or with flags NULL the n values idx[].
 */
static char *
int_array(const char *flags, const long *idx, long n)
{
	size_t len = 1, cap = 64;
	char *s = xmalloc(cap);
	long k;

	s[0] = '{';
	for (k = 0; k < n; k++) {
		if (flags != NULL && !flags[k])
			continue;
		if (len + 24 > cap)
			s = xrealloc(s, cap *= 2);
		len += (size_t)snprintf(s + len, cap - len, "%s%ld",
		    len > 1 ? "," : "", flags != NULL ? k : idx[k]);
	}
	s[len++] = '}';
	s[len] = '\0';
	return s;
}

/*
 * The CASE keeps a slot this session holds from being locked again (a
 * session lock is counted, and one give would not free it): the planner
 * may reorder the conditions of an AND, not the branches of a CASE.
 * LIMIT 1 stops the scan at the first lock taken.
 */
static const char q_slot_take[] =
    "SELECT i FROM generate_series(0, $2::int - 1) AS i WHERE CASE WHEN "
    "i = ANY ($3::int[]) THEN false ELSE pg_try_advisory_lock(hashtext($1), "
    "i) END LIMIT 1";

int
pg_slot_take(const char *ep, long n, const char *held, long *slot,
    const char *chan, char *err, size_t errlen)
{
	char nb[32], *h = int_array(held, NULL, n), *q;
	const char *p[3] = { ep, nb, h };
	PGresult *r;
	int rc, e;

	snprintf(nb, sizeof(nb), "%ld", n);
	r = pg_exec_named("slot_take", q_slot_take, 3, p, PGRES_TUPLES_OK, err,
	    errlen);
	free(h);
	if (r == NULL)
		return -1;
	if ((rc = PQntuples(r) == 1))
		*slot = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	/*
	 * Waiting for a slot, hear when another host gives some back; not
	 * waiting, be woken by none.
	 */
	if (rc != slot_ear) {
		q = xasprintf("%sLISTEN %s", rc ? "UN" : "", chan);
		e = run1(q, err, errlen);
		free(q);
		if (e == -1)
			return -1;
	}
	slot_ear = rc;
	return rc;
}

void
pg_slot_give(const char *ep, const long *idx, long n, const char *chan)
{
	char err[256], *a;
	const char *p[3];

	if (n == 0)
		return;
	a = int_array(NULL, idx, n);
	p[0] = ep;
	p[1] = a;
	p[2] = chan;
	PQclear(pg_exec_named("slot_give", "SELECT pg_notify($3, $1) FROM "
	    "(SELECT count(pg_advisory_unlock(hashtext($1), i)) FROM "
	    "unnest($2::int[]) AS i) AS g", 3, p, PGRES_TUPLES_OK, err,
	    sizeof(err)));
	free(a);
}

static const char q_ledger_add[] =
    "INSERT INTO rfp_ledger (key, id, event, t, entry) VALUES ($1, $2, $3, "
    "$4::float8, $5::jsonb)";
static const char q_ledger_latest[] =
    "SELECT entry::text FROM rfp_ledger WHERE key = $1 ORDER BY seq DESC "
    "LIMIT 1";

/*
 * The latest entry of r (one row of q_ledger_latest), or NULL when there
 * is none; -1 with err when the row cannot be read as an entry: taken for
 * none, a row edited by hand to null (or a number jsonb prints past what
 * jansson reads) let the submission be sent again.
 */
static int
ledger_row(PGresult *r, const char *key, json_t **entry, char *err,
    size_t errlen)
{
	json_error_t je;

	*entry = NULL;
	if (PQntuples(r) != 1)
		return 0;
	*entry = json_loads(PQgetvalue(r, 0, 0), 0, &je);
	if (json_is_object(*entry) && json_is_string(json_object_get(*entry,
	    "event")))
		return 0;
	snprintf(err, errlen, "rfp_ledger key \"%.80s\": an entry that "
	    "cannot be read (%s); no submission of it is sent until the row "
	    "is put right", key, *entry == NULL ? rec_json_why(&je) :
	    "not an entry");
	json_decref(*entry);
	*entry = NULL;
	return -1;
}

/* q_ledger_add's parameters for entry (t and *s, to free, hold two). */
static void
ledger_params(const json_t *entry, const char **p, char *t, size_t tlen,
    char **s)
{
	*s = json_dumps(entry, JSON_COMPACT);
	snprintf(t, tlen, "%.6f", json_number_value(json_object_get(entry,
	    "t")));
	p[0] = json_string_value(json_object_get(entry, "key"));
	p[1] = json_string_value(json_object_get(entry, "id"));
	p[2] = json_string_value(json_object_get(entry, "event"));
	p[3] = t;
	p[4] = *s;
}

int
pg_ledger_append(const json_t *entry, char *err, size_t errlen)
{
	char *s, t[64];
	const char *p[5];
	PGresult *r;

	ledger_params(entry, p, t, sizeof(t), &s);
	/* Autocommit: on return the entry is durable, like fdatasync. */
	r = pg_exec_named("ledger_add", q_ledger_add, 5, p, PGRES_COMMAND_OK,
	    err, errlen);
	free(s);
	if (r == NULL)
		return -1;
	PQclear(r);
	return 0;
}

/*
 * Append entry only when key's latest entry is still seen (NULL: none),
 * in one transaction under a lock on the key: 0 appended, 1 not (*now set
 * to the latest, the caller's to free), -1 on error.  Two round trips:
 * the lock and the look, then the entry and the commit.
 */
int
pg_ledger_append_if(const json_t *entry, const json_t *seen, json_t **now,
    char *err, size_t errlen)
{
	const char *p[5];
	const struct step look[] = {
		{ NULL, "BEGIN", 0, NULL, PGRES_COMMAND_OK },
		{ "ledger_lock", "SELECT pg_advisory_xact_lock("
		    "hashtextextended($1, 7270002))", 1, p, PGRES_TUPLES_OK },
		{ "ledger_latest", q_ledger_latest, 1, p, PGRES_TUPLES_OK },
	}, add[] = {
		{ "ledger_add", q_ledger_add, 5, p, PGRES_COMMAND_OK },
		{ NULL, "COMMIT", 0, NULL, PGRES_COMMAND_OK },
	};
	PGresult *r;
	json_t *cur = NULL;
	char *s, t[64];
	int rc;

	*now = NULL;
	ledger_params(entry, p, t, sizeof(t), &s);
	if (pipe_run(look, 3, &r, err, errlen) == -1)
		goto fail;
	rc = ledger_row(r, p[0], &cur, err, errlen);
	PQclear(r);
	if (rc == -1)
		goto fail;
	if (!(cur == NULL ? seen == NULL : seen != NULL &&
	    json_equal(cur, seen))) {
		rollback();
		free(s);
		*now = cur;
		return 1;
	}
	json_decref(cur);
	rc = pipe_run(add, 2, &r, err, errlen);
	PQclear(r);
	free(s);
	if (rc == -1)
		rollback();
	return rc;
fail:
	free(s);
	rollback();
	return -1;
}

int
pg_ledger_lookup(const char *key, json_t **entry, char *err, size_t errlen)
{
	const char *p[1] = { key };
	PGresult *r;
	int rc;

	*entry = NULL;
	if ((r = pg_exec_named("ledger_latest", q_ledger_latest, 1, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	rc = ledger_row(r, key, entry, err, errlen);
	PQclear(r);
	return rc;
}
