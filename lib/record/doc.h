/* doc: what a manifest record must be before anything is done with it. */
#ifndef RFP_DOC_H
#define RFP_DOC_H

#include <stddef.h>

#include <jansson.h>

#define DOC_ID_MAX	200

/* NULL when id is safe as a file name, else why not. */
const char *doc_id_check(const char *id);
/*
 * Check the manifest fields of rec (id, url, method, headers, body, ...);
 * 0 when usable, else -1 with the message ('field "url": ...') in err.
 */
int	doc_check(const json_t *rec, char *err, size_t errlen);
/* The endpoint key: the "endpoint" field, else the URL's host[:port]. */
char	*doc_endpoint(const json_t *rec);
/* url's authority, lower case, the scheme's default port dropped. */
char	*doc_authority(const char *url);
/* A file-name-safe form of an endpoint key (caller frees). */
char	*doc_safe_name(const char *s);
/* 1 when the record is a submission (non-idempotent method). */
int	doc_is_submission(const json_t *rec);
/*
 * The rule itself: a method (NULL: GET) other than GET and HEAD, on a
 * record whose "idempotent" is not true.
 */
int	doc_submits(const char *method, int idempotent);
/*
 * 1 when a request of method (NULL: GET) may carry a body: any but GET and
 * HEAD.  doc_check refuses a body on any other.
 */
int	doc_sends_body(const char *method);
/* The record's idempotency key (caller frees): given, or hash of id+cycle. */
char	*doc_idem_key(const json_t *rec);

#endif
