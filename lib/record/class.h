/* class: the failure classification table of the record contract. */
#ifndef RFP_CLASS_H
#define RFP_CLASS_H

#include <stddef.h>

#include <jansson.h>

enum class_kind {
	CLASS_OK,
	CLASS_TRANSIENT,
	CLASS_PERMANENT
};

/* What classification reads of a record. */
struct class_in {
	const char	*error;		/* NULL when absent or not a string */
	int		 has_status;	/* status is an integer */
	long		 status;
	int		 bad_status;	/* status is there, not null, not an integer */
	int		 check_failed;	/* check is there, not null, not false */
	const char	*parse_error;	/* rfp-parse's outcome; NULL: none */
	int		 keyed_submit;	/* a submission, sent with Idempotency-Key */
	int		 over;		/* the class configured for this status, or -1 */
};

/* Classify from what was read; the reason is cut to fit len. */
enum class_kind class_decide(const struct class_in *in, char *reason,
	    size_t len);
struct view;
/* Read into in what classification reads of a record (in->over: -1). */
void	class_read(struct view *v, struct class_in *in);
/*
 * Classify a fetched record from its status, error and check fields, and
 * for a 2xx its parse_error.
 */
enum class_kind class_of(const json_t *rec, char *reason, size_t len);
/* The same, as the fetch alone made it: any parse_error aside. */
enum class_kind class_of_fetch(const json_t *rec, char *reason, size_t len);
/* "ok", "transient" or "permanent". */
const char *class_name(enum class_kind k);

#endif
