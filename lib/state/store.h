/*
 * store: where the shared state lives, chosen once per process.  By
 * default the flock'd files of the run directory (lib/state); with
 * store_init("postgresql://...") one PostgreSQL database shared by every
 * host.  The callers' logic is the same either way: each state change is
 * a files_fn run on one JSON document, here under an exclusive lock.
 */
#ifndef RFP_STORE_H
#define RFP_STORE_H

#include <stddef.h>

#include <jansson.h>

#include "lib/state/files.h"

/* The tool's schema version; a database with a newer one is refused. */
#define STORE_SCHEMA	1

/*
 * Use the PostgreSQL database at url (connect, then create or migrate the
 * schema).  0, or -1 with "URL: what" in err (password redacted).
 */
int	store_init(const char *url, char *err, size_t errlen);
/* 1 when the state is in PostgreSQL, 0 when in the run directory. */
int	store_shared(void);
/* Disconnect (at exit). */
void	store_close(void);
/* url with any password replaced by "***" (caller frees). */
char	*store_redact(const char *url);
/* 1 when url names a PostgreSQL database (postgresql:// or postgres://). */
int	store_is_url(const char *url);
/*
 * Whether url, a postgresql:// URL, reads as libpq reads a URI, without
 * a part libpq would misread and then quote back in its error (a raw @,
 * / or % in a password, a space): 0, or -1 with err saying what to
 * write instead, the URL not quoted.
 */
int	store_url_check(const char *url, char *err, size_t errlen);

/*
 * Run fn on the document kind/key under an exclusive lock: the file
 * RUNDIR/state/KIND/KEY.json (KIND.json when key is NULL), or the row
 * (kind, key) of rfp_state; with no rundir and no database, a document in
 * this process's memory.  0, 1 (no write) or -1 with err set.
 */
int	store_update(const char *rundir, const char *kind, const char *key,
	    files_fn *fn, void *arg, char *err, size_t errlen);

/*
 * News between hosts: PostgreSQL's LISTEN and NOTIFY.  With the run
 * directory's files there is none to send or wait for, as every process
 * reads the same files.
 */
/* What store_news gives each piece of news: its channel and payload. */
typedef void store_news_fn(const char *channel, const char *payload,
	    void *arg);
/* Hear what other processes tell on channel: 0, or -1 with err set. */
int	store_listen(const char *channel, char *err, size_t errlen);
/* The descriptor to poll for news coming in, or -1 when none can. */
int	store_news_fd(void);
/*
 * Give fn the news in hand from other processes, reading what came in
 * first when readable is 1 (store_news_fd was readable); how many, or -1
 * with err set.
 */
int	store_news(int readable, store_news_fn *fn, void *arg, char *err,
	    size_t errlen);
/*
 * From the files_fn of a store_update: tell the listeners of channel
 * payload when the update commits, not when it does not.  A payload of
 * STORE_TELL_MAX bytes or more, which PostgreSQL refuses, is not told.
 */
#define STORE_TELL_MAX	8000
void	store_tell(const char *channel, const char *payload);

/*
 * Whether the process id ("PID@HOST", as proc_id makes it) is connected to
 * the shared database still: 1 yes, 0 no (it ended, was killed, or its
 * host is gone: the database let go of its session), -1 when the store
 * cannot tell (the run directory's files, or an error).
 */
int	store_alive(const char *id);

/*
 * Take the lowest free concurrency slot below n of endpoint ep that held
 * (n flags) does not mark, without waiting: a flock'd file
 * RUNDIR/state/slots/EP.I, or a session advisory lock taken by one
 * statement whatever n; both die with their holder.  1 taken (*slot set),
 * 0 all busy, -1 with err set.  In PostgreSQL a process that found them
 * all busy listens on STORE_SLOT_CHANNEL, told the endpoint whenever
 * another process gives slots back, until it takes one.
 */
#define STORE_SLOT_CHANNEL	"rfp_slot"

int	store_slot_take(const char *rundir, const char *ep, long n,
	    const char *held, long *slot, char *err, size_t errlen);
/* Give back the n slots idx[] of ep taken by store_slot_take, at once. */
void	store_slot_give(const char *ep, const long *idx, long n);
/*
 * Slot files given back stay open for the next take while no more than n
 * (at least 16) are open: the caller counts a descriptor a transfer.
 */
void	store_slots_keep(long n);
/*
 * The submission ledger when the state is shared (store_shared()): the
 * table rfp_ledger, every host's.  With files, lib/accounts/ledger keeps
 * RUNDIR/state/ledger.ndjson itself.  Entries are objects with key, id,
 * event and t.
 */
/* Append entry: 0 or -1 with err set. */
int	store_ledger_append(const json_t *entry, char *err, size_t errlen);
/*
 * Append entry only while its key's latest entry is seen (NULL: none),
 * under a lock on the key: 0 appended, 1 not (*now: the latest, to free),
 * -1 with err set.
 */
int	store_ledger_append_if(const json_t *entry, const json_t *seen,
	    json_t **now, char *err, size_t errlen);
/* The latest entry for key (a new reference, NULL when none): 0 or -1. */
int	store_ledger_lookup(const char *key, json_t **entry, char *err,
	    size_t errlen);

#endif
