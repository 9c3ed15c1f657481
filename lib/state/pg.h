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

#include "lib/state/files.h"

/*
 * libpq, loaded by pg_open with dlopen(3): only a postgresql:// state needs
 * it, and linking it cost every stage 3 to 4 ms of start-up and 5 MiB of
 * memory for the two dozen libraries it brings.  The PQ* names below call
 * through this table, so code reads as plain libpq.
 */
struct pg_lib {
	PGconn	*(*connectdb)(const char *);
	ConnStatusType (*status)(const PGconn *);
	char	*(*errormessage)(const PGconn *);
	void	 (*finish)(PGconn *);
	PGresult *(*exec)(PGconn *, const char *);
	PGresult *(*execparams)(PGconn *, const char *, int, const Oid *,
		    const char *const *, const int *, const int *, int);
	ExecStatusType (*resultstatus)(const PGresult *);
	char	*(*resulterrormessage)(const PGresult *);
	void	 (*clear)(PGresult *);
	int	 (*ntuples)(const PGresult *);
	char	*(*getvalue)(const PGresult *, int, int);
	int	 (*getisnull)(const PGresult *, int, int);
	char	*(*cmdtuples)(PGresult *);
	int	 (*socket)(const PGconn *);
	int	 (*consumeinput)(PGconn *);
	PGnotify *(*notifies)(PGconn *);
	void	 (*freemem)(void *);
	PGresult *(*prepare)(PGconn *, const char *, const char *, int,
		    const Oid *);
	PGresult *(*execprepared)(PGconn *, const char *, int,
		    const char *const *, const int *, const int *, int);
	int	 (*enterpipelinemode)(PGconn *);
	int	 (*exitpipelinemode)(PGconn *);
	int	 (*pipelinesync)(PGconn *);
	int	 (*sendqueryparams)(PGconn *, const char *, int, const Oid *,
		    const char *const *, const int *, const int *, int);
	int	 (*sendprepare)(PGconn *, const char *, const char *, int,
		    const Oid *);
	int	 (*sendqueryprepared)(PGconn *, const char *, int,
		    const char *const *, const int *, const int *, int);
	PGresult *(*getresult)(PGconn *);
	int	 (*backendpid)(const PGconn *);
	PQconninfoOption *(*conninfoparse)(const char *, char **);
	void	 (*conninfofree)(PQconninfoOption *);
};
extern struct pg_lib pg_lib;

#define PQconnectdb		(*pg_lib.connectdb)
#define PQstatus		(*pg_lib.status)
#define PQerrorMessage		(*pg_lib.errormessage)
#define PQfinish		(*pg_lib.finish)
#define PQexec			(*pg_lib.exec)
#define PQexecParams		(*pg_lib.execparams)
#define PQresultStatus		(*pg_lib.resultstatus)
#define PQresultErrorMessage	(*pg_lib.resulterrormessage)
#define PQclear			(*pg_lib.clear)
#define PQntuples		(*pg_lib.ntuples)
#define PQgetvalue		(*pg_lib.getvalue)
#define PQgetisnull		(*pg_lib.getisnull)
#define PQcmdTuples		(*pg_lib.cmdtuples)
#define PQsocket		(*pg_lib.socket)
#define PQconsumeInput		(*pg_lib.consumeinput)
#define PQnotifies		(*pg_lib.notifies)
#define PQfreemem		(*pg_lib.freemem)
#define PQprepare		(*pg_lib.prepare)
#define PQexecPrepared		(*pg_lib.execprepared)
#define PQenterPipelineMode	(*pg_lib.enterpipelinemode)
#define PQexitPipelineMode	(*pg_lib.exitpipelinemode)
#define PQpipelineSync		(*pg_lib.pipelinesync)
#define PQsendQueryParams	(*pg_lib.sendqueryparams)
#define PQsendPrepare		(*pg_lib.sendprepare)
#define PQsendQueryPrepared	(*pg_lib.sendqueryprepared)
#define PQgetResult		(*pg_lib.getresult)
#define PQbackendPID		(*pg_lib.backendpid)
#define PQconninfoParse		(*pg_lib.conninfoparse)
#define PQconninfoFree		(*pg_lib.conninfofree)

/*
 * Whether libpq reads url (PQconninfoParse): 0, or -1 with err saying so
 * without quoting it (libpq's own words quote the part it could not
 * read, a password's perhaps).  0 too when libpq cannot be loaded: the
 * connection says why.
 */
int	pg_url_check(const char *url, char *err, size_t errlen);
/*
 * Connect to url and create or migrate the schema to version want.  url
 * has passed store_url_check (lib/state/store.h), which reads it as libpq
 * does, once, and keeps its passwords to hide in messages.
 */
int	pg_open(const char *url, int want, char *err, size_t errlen);
/* The open connection, or NULL. */
PGconn	*pg_conn(void);
/* Disconnect. */
void	pg_close(void);
/*
 * Whether the process id holds its session lock, taken by pg_open: 1, 0,
 * or -1 on an error or when this role may not read pg_locks.
 */
int	pg_alive(const char *id);
/*
 * How many other rfpipe processes are connected to the database now (each
 * holds its session lock), or -1 on an error or when this role may not
 * read pg_locks.
 */
long	pg_others(void);
/*
 * In a transaction: 1 when no other rfpipe process is connected, and then
 * none connects (pg_open waits) until the transaction ends; 0 when one is;
 * -1 on an error, said in err.  Needs no read of pg_locks.
 */
int	pg_alone(char *err, size_t errlen);
/*
 * Run one statement with text parameters; the result when it returned
 * want (PGRES_COMMAND_OK or PGRES_TUPLES_OK), else NULL with err set.
 * The caller PQclears the result.
 */
PGresult *pg_exec(const char *sql, int n, const char *const *params,
	    ExecStatusType want, char *err, size_t errlen);
/*
 * pg_exec for a statement prepared once per connection under name: the
 * first call prepares sql, the next ones send only the parameters.
 */
PGresult *pg_exec_named(const char *name, const char *sql, int n,
	    const char *const *params, ExecStatusType want, char *err,
	    size_t errlen);
/* What pg_wait gives each notification: its channel and payload. */
typedef void pg_note_fn(const char *channel, const char *payload,
	    void *arg);
/*
 * Give fn the notifications in hand on the channels this connection
 * listens to or, when there are none, wait at most secs real seconds for
 * some, or for the other end of watch (a descriptor; -1: none) to close,
 * which sets *gone; how many (0: none came), or -1 with err set.
 */
int	pg_wait(double secs, int watch, int *gone, pg_note_fn *fn,
	    void *arg, char *err, size_t errlen);
/* LISTEN on channel: 0, or -1 with err set. */
int	pg_listen(const char *channel, char *err, size_t errlen);
/* The connection's socket. */
int	pg_news_fd(void);
/*
 * Give fn the notifications in hand that other sessions sent, reading
 * the socket first when readable; how many, or -1 with err set.
 */
int	pg_news(int readable, pg_note_fn *fn, void *arg, char *err,
	    size_t errlen);
/* NOTIFY channel, payload in the transaction of the pg_update running. */
void	pg_tell(const char *channel, const char *payload);
/*
 * Run fn on the jsonb of rfp_state (kind, key) in one transaction, with
 * the notifications fn asked for by pg_tell.
 */
int	pg_update(const char *kind, const char *key, files_fn *fn, void *arg,
	    char *err, size_t errlen);
/*
 * Take the lowest session advisory lock (ep, i), i below n and held[i]
 * 0, in one statement: 1 taken (*slot), 0 none free, -1 error.  None
 * free, listen on chan (a plain identifier) until one is taken.
 */
int	pg_slot_take(const char *ep, long n, const char *held, long *slot,
	    const char *chan, char *err, size_t errlen);
/* Release the n locks (ep, idx[k]) in one statement, telling chan ep. */
void	pg_slot_give(const char *ep, const long *idx, long n,
	    const char *chan);
/* url with any password replaced by "***" (caller frees). */
char	*pg_redact(const char *url);
/* Append a ledger entry (an object with key, id, event, t). */
int	pg_ledger_append(const json_t *entry, char *err, size_t errlen);
/*
 * Append entry only while key's latest entry is seen (NULL: none), under a
 * lock on the key: 0 appended, 1 not (*now: the latest, to free), -1.
 */
int	pg_ledger_append_if(const json_t *entry, const json_t *seen,
	    json_t **now, char *err, size_t errlen);
/* The latest entry for key (new reference, NULL when none). */
int	pg_ledger_lookup(const char *key, json_t **entry, char *err,
	    size_t errlen);

#endif
