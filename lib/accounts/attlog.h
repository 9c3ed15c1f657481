/*
 * attlog: RUNDIR/logs/attempts.ndjson, the run's history.  One flat JSON
 * object a line, each with "t" (its type) and "at" (epoch seconds): every
 * request rfp-fetch made, every delay rfp-backoff chose, and the changes
 * of each endpoint's breaker and pace as rfp-fetch saw them.  Lines are
 * appended (O_APPEND) with one write(2) each, so the stages of any number
 * of pipelines share the file; it is never rewritten.  doc/design.md,
 * "The attempt log", lists the fields of each type.
 */
#ifndef RFP_ATTLOG_H
#define RFP_ATTLOG_H

#include <jansson.h>

enum attlog_type {
	ATTLOG_START,	/* a stage began writing: pid, prog, deadline, scale */
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
/* Close and free (NULL is fine). */
void	attlog_close(struct attlog *l);

#endif
