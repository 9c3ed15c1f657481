/*
 * pg: the PostgreSQL side of lib/store, lib/ledger and rfp-queue.  One
 * connection per process, opened by pg_open; every call reports failure
 * as -1 with "URL: what" in err.
 */
#ifndef RFP_PG_H
#define RFP_PG_H

#include <stddef.h>

#include <libpq-fe.h>
#include <jansson.h>

#include "lib/state.h"

/* Connect to url and create or migrate the schema to version want. */
int	pg_open(const char *url, int want, char *err, size_t errlen);
/* The open connection, or NULL. */
PGconn	*pg_conn(void);
/* Disconnect. */
void	pg_close(void);
/*
 * Run one statement with text parameters; the result when it returned
 * want (PGRES_COMMAND_OK or PGRES_TUPLES_OK), else NULL with err set.
 * The caller PQclears the result.
 */
PGresult *pg_exec(const char *sql, int n, const char *const *params,
	    ExecStatusType want, char *err, size_t errlen);
/* Run fn on the jsonb of rfp_state (kind, key) in one transaction. */
int	pg_update(const char *kind, const char *key, state_fn *fn, void *arg,
	    char *err, size_t errlen);
/* Session advisory lock (ep, i): 1 taken, 0 busy, -1 error. */
int	pg_slot_take(const char *ep, long i, char *err, size_t errlen);
/* Release it. */
void	pg_slot_give(const char *ep, long i);
/* Append a ledger entry (an object with key, id, event, t). */
int	pg_ledger_append(const json_t *entry, char *err, size_t errlen);
/* The latest entry for key (new reference, NULL when none). */
int	pg_ledger_lookup(const char *key, json_t **entry, char *err,
	    size_t errlen);

#endif
