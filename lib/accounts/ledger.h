/*
 * ledger: the idempotency ledger of submissions, RUNDIR/state/ledger.ndjson.
 * Append-only, one write(2) and one fdatasync(2) per entry, under flock(2):
 * an "intent" before a submission is sent and its outcome once known.  A
 * torn last line (a crash while writing) is reported and its key taken as
 * ambiguous, never as unsent.  With the state in PostgreSQL (lib/store)
 * each entry is one committed INSERT into rfp_ledger instead.
 */
#ifndef RFP_LEDGER_H
#define RFP_LEDGER_H

#include <stddef.h>

#include <jansson.h>

enum ledger_state {
	LEDGER_NONE,		/* never attempted */
	LEDGER_INTENT,		/* sent or about to be; outcome unknown */
	LEDGER_SUCCESS,		/* the server confirmed it */
	LEDGER_NOT_SENT,	/* the request never left */
	LEDGER_REJECTED,	/* the server refused it (4xx, 429) */
	LEDGER_AMBIGUOUS	/* it may have gone through (5xx, cut reply) */
};

struct ledger;

/*
 * Open (creating) the ledger at path, or rundir's when path is NULL; NULL
 * and err on failure, or when it is not to be trusted (ledger_vet).  With the state in PostgreSQL both are unused.
 */
struct ledger *ledger_open(const char *rundir, const char *path, char *err,
	    size_t errlen);
/*
 * Whether path may be used as a ledger, before anything is sent: as
 * files_vet has it, and an existing file's first line a ledger entry.
 * ledger_open checks the same on the file it opens.  0, or -1 and err.
 */
int	ledger_vet(const char *path, char *err, size_t errlen);
/*
 * The latest state of key, after reading what other processes appended.
 * *entry (borrowed, may be NULL) is the entry that set it.  -1 on error.
 */
int	ledger_lookup(struct ledger *l, const char *key, enum ledger_state *st,
	    json_t **entry, char *err, size_t errlen);
/* Append one entry {key, id, event, t, ...extra}; durable on return. */
int	ledger_append(struct ledger *l, const char *key, const char *id,
	    enum ledger_state st, json_t *extra, char *err, size_t errlen);
/*
 * Append as ledger_append, but only while key's state and latest entry are
 * still seen_st and seen (NULL: none), what a ledger_lookup returned: the look and the
 * append under one lock, so that of two processes that both saw a key
 * unsent only one sends it.  0 appended; 1 not, with the state and entry
 * (*now, a reference to drop) another process left; -1 on error.
 */
int	ledger_append_if(struct ledger *l, const char *key, const char *id,
	    enum ledger_state st, json_t *extra, enum ledger_state seen_st,
	    const json_t *seen, enum ledger_state *now_st, json_t **now,
	    char *err, size_t errlen);
/*
 * Have fn told of each torn or unreadable entry as it is read: the
 * ledger's path, the line, and the key it names (NULL: none).  Unset,
 * they are still folded in (a torn key is ambiguous), and nothing is said.
 */
void	ledger_on_torn(struct ledger *l, void (*fn)(const char *path,
	    long line, const char *key));
/* Close and free. */
void	ledger_close(struct ledger *l);
/*
 * Fold ledger text into keys (key -> {"state":..,"entry":..,"line":N});
 * a torn or unreadable line marks its key ambiguous and is reported by
 * torn(line, key) when torn is not NULL.  Exposed for tests and fuzzing.
 */
void	ledger_scan(json_t *keys, const char *buf, size_t len, long *lineno,
	    void (*torn)(long, const char *));
/* The name of a state ("success", ...). */
const char *ledger_name(enum ledger_state st);

#endif
