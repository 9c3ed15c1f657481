/* db: the statements every command runs, each run or die 1. */
#include <stdlib.h>

#include <libpq-fe.h>

#include "cmd/msg.h"
#include "lib/state/pg.h"
#include "queue/queue.h"

/* Run sql or die 1 with the server's word. */
PGresult *
q(const char *sql, int n, const char *const *p, ExecStatusType want)
{
	char err[512];
	PGresult *r;

	if ((r = pg_exec(sql, n, p, want, err, sizeof(err))) == NULL)
		msg_die(1, "%s: %s", q_cmd, err);
	return r;
}

long
q_long(const char *sql, int n, const char *const *p)
{
	PGresult *r = q(sql, n, p, PGRES_TUPLES_OK);
	long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);

	PQclear(r);
	return v;
}

long
affected(PGresult *r)
{
	long n = strtol(PQcmdTuples(r), NULL, 10);

	PQclear(r);
	return n;
}
