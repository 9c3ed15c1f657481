/* rfp-queue internals: the rooms of queue/ and what they share. */
#ifndef RFP_QUEUE_H
#define RFP_QUEUE_H

#include <stddef.h>

#include <jansson.h>

#include "lib/state/pg.h"
#include "lib/record/rec.h"

/*
 * file tells pull on this channel, in the statement that files a group,
 * how many of an owner's records it closed: "N OWNER"; load, that it
 * added some.
 */
#define CHANNEL	"rfp_queue_filed"

/*
 * SQL: a row of rfp_queue q put back in the queue keeps what its letter
 * (the jsonb letter) says of a submission sent, so that the host that
 * takes it up asks before it sends it again (fetch/submit.c).  cond: when.
 */
#define Q_KEEP_SENT(cond, letter)					\
	"rec = CASE WHEN " cond " AND " letter " -> 'sent' = 'true'::jsonb "	\
	"AND jsonb_typeof(q.rec) = 'object' THEN q.rec || "		\
	"'{\"sent\": true}'::jsonb ELSE q.rec END"

/* The options main.c reads, for the command it runs. */
struct qopts {
	long	 batch;
	double	 lease;		/* real seconds */
	char	*owner;
	const char *run_dir;	/* pull: what it filed is not handed on */
	int	 retry_dead;	/* ... but for its dead letters */
	double	 deadline;	/* pull: none claimed from then (epoch); 0 */
};

#define LEASE_LEAST	1.0	/* logical seconds a lease is at the least */

/* The command run (pull, file, ...): a database's error names it. */
extern const char *q_cmd;

/*
 * A group of filings, in one statement (file.c): the text q_file reads,
 * and the ids in it.  A struct group starts zeroed, for grp_open.
 */
struct group {
	char		*text;	/* what q_file reads as f: a JSON array, open */
	size_t		 len, cap;
	long		 n;	/* records in it */
	json_t		*ids;	/* their ids: one filing of an id per group */
	struct rec_out	*out;	/* rfp-sink's side, passed to first */
	const char	*owner;	/* whose claims it closes */
};

/*
 * The rooms of rfp-queue, each a file, calls running one way: main.c
 * (options, the command) -> load.c, pull.c, file.c, summary.c, and
 * pull.c -> file.c (pull files what its run directory has filed, as
 * file would); each of them -> db.c.  Each takes what it needs as
 * arguments; none reaches back up.
 */

/* db.c: the statements every command runs. */
/* Run sql or die 1 with the server's word. */
PGresult *q(const char *sql, int n, const char *const *p,
	    ExecStatusType want);
/* The first value of the first row sql returns, as a number. */
long	q_long(const char *sql, int n, const char *const *p);
/* The rows r (a command's result) changed; r is cleared. */
long	affected(PGresult *r);

/* load.c: the manifest on stdin into rfp_queue, once per id. */
void	load(void);
/* ... and the rows filed dead (of these reasons, or any) queued again. */
void	requeue(char *const *reasons, int n);

/* pull.c: claimed records out on stdout for rfp-fetch, until none is left. */
void	pull(const struct qopts *o);

/* file.c: done and dead records filed in rfp_results, a group at a time. */
/* Open g (zeroed) for the filings of owner. */
void	grp_open(struct group *g, const char *owner);
/* Add the filing of id to g, filed when full; 0, or -1 as grp_flush. */
int	grp_put(struct group *g, const char *id, const char *fate,
	    const char *why, const char *t, size_t n, long lineno);
/* File what g holds, in one statement: 0, or -1 when rfp-sink's side
   could not be written. */
int	grp_flush(struct group *g);
void	grp_close(struct group *g);
/* The records on stdin to stdout, filing each done or dead one for owner. */
void	file(const char *owner);

/* summary.c: the combined reconciliation of every host, on stdout. */
void	summary(void);

#endif
