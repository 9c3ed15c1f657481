/*
 * fate: the one table of what becomes of a record.  A record decided has a
 * fate, done, retry or dead; a dead one has a dead_reason, one of the
 * table's, which says why.  Stages name them by these constants, never by
 * their spelling, and the summary's dead_by_reason has one key per reason,
 * in the table's order.
 */
#ifndef RFP_FATE_H
#define RFP_FATE_H

enum fate_kind {
	FATE_DONE,
	FATE_RETRY,
	FATE_DEAD,
	FATE_NKINDS
};

/* In the order rfpipe(7) gives them. */
enum fate_reason {
	FATE_PERMANENT,
	FATE_PARSE_FAILED,
	FATE_EXHAUSTED,
	FATE_BUDGET_SPENT,
	FATE_CIRCUIT_OPEN,
	FATE_QUOTA,
	FATE_DEADLINE_CUT,
	FATE_AMBIGUOUS_SUBMIT,
	FATE_BAD_INPUT,
	FATE_NREASONS
};

/* "done", "retry" or "dead"; NULL for anything else. */
const char *fate_name(enum fate_kind k);
/* The fate spelt name: FATE_DONE, FATE_RETRY, FATE_DEAD, or -1 (NULL too). */
int	fate_of(const char *name);
/* A dead reason's name, as dead_reason carries it; NULL when out of range. */
const char *fate_reason(enum fate_reason r);
/* Its meaning in one line, as rfpipe(7) gives it; NULL when out of range. */
const char *fate_meaning(enum fate_reason r);
/* The reason spelt name, or -1 (NULL too). */
int	fate_reason_of(const char *name);

#endif
