/*
 * summary: the combined reconciliation of every host, from rfp_queue and
 * rfp_results, as one JSON object on stdout.
 */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "cmd/msg.h"
#include "lib/state/pg.h"
#include "queue/queue.h"

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

void
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
