/*
 * attlog: RUNDIR/logs/attempts.ndjson, the run's history.  One flat JSON
 * object a line, each with "t" (its type) and "at" (epoch seconds): every
 * request rfp-fetch made, every delay rfp-backoff chose, and the changes
 * of each endpoint's breaker and pace as rfp-fetch saw them.  Lines are
 * appended (O_APPEND), whole lines a write(2), so the stages of any number
 * of pipelines share the file; it is never rewritten.  doc/design.md,
 * "The attempt log", lists the fields of each type.
 */
#ifndef RFP_ATTLOG_H
#define RFP_ATTLOG_H

#include <jansson.h>

enum attlog_type {
	ATTLOG_START,	/* a stage began: pid, prog, deadline, scale */
	ATTLOG_REQ,	/* a request and its answer (or error) */
	ATTLOG_DELAY,	/* a retry's delay and why */
	ATTLOG_BREAKER,	/* an endpoint's breaker went to "to" */
	ATTLOG_PACE,	/* an endpoint's pace started, was cut or let go */
	ATTLOG_NTYPES
};

struct attlog;

/* The type's name ("req"), or NULL. */
const char *attlog_name(enum attlog_type t);
/* The type named name, or -1. */
int	attlog_type(const char *name);
/* Open (create) RUNDIR/logs/attempts.ndjson to append; NULL with errno. */
struct attlog *attlog_open(const char *rundir);
/* Its path, for a message. */
const char *attlog_path(const struct attlog *l);
/*
 * Append one line of type t at epoch at: fields (an object, taken over,
 * may be NULL) with "t" and "at" put first.  A NULL log takes nothing and
 * returns 0; -1 with errno when the write failed, after which the log
 * takes nothing more (one failure, one message).
 */
int	attlog_write(struct attlog *l, enum attlog_type t, double at,
	    json_t *fields);
/*
 * The same with the fields written already: n bytes of an object's
 * members, comma-separated, without its braces (NULL and 0: none), as
 * json_dumps(JSON_COMPACT | JSON_REAL_PRECISION(13)) writes them (see
 * rec_put in lib/record/rec.h).  A busy stage's lines are written so.
 */
int	attlog_line(struct attlog *l, enum attlog_type t, double at,
	    const char *fields, size_t n);
/*
 * From now on lines wait in memory until attlog_flush (or 64 KiB of them)
 * and go out together in one write(2): a loop that flushes before each
 * wait writes a turn's lines at once, not one system call a request.
 */
void	attlog_hold(struct attlog *l);
/* Write the lines held; 0, or -1 as attlog_write.  NULL is fine. */
int	attlog_flush(struct attlog *l);
/*
 * What a stage saw last of an endpoint's pace and breaker, so that only
 * their changes are logged.  Zeroed, it has seen nothing (closed, unpaced).
 */
struct attlog_watch {
	double	 rate;		/* the pace's rate; 0: not paced */
	double	 brk_t;		/* the last transition logged */
	char	 brk[16];	/* its state: "" (closed), "open", ... */
};

/*
 * The pace granted rate (window) at epoch at: a pace line when it starts
 * (from 0), is cut (lower) or is let go (to 0); its growth is not a line.
 * 0, or -1 as attlog_write.
 */
int	attlog_pace(struct attlog *l, struct attlog_watch *w, const char *ep,
	    double rate, long window, double at);
/*
 * breaker is the endpoint's breaker document (lib/control/breaker.c):
 * a breaker line for each of its "transitions" after since and after the
 * last one logged, at the breaker's own time.  0, or -1 as attlog_write.
 */
int	attlog_breaker(struct attlog *l, struct attlog_watch *w,
	    const char *ep, const json_t *breaker, double since);
/* The breaker's state last seen: "closed", "open" or "half_open" (a
   string constant). */
const char *attlog_breaker_state(const struct attlog_watch *w);
/* Write what is held, close and free (NULL is fine). */
void	attlog_close(struct attlog *l);

#endif
