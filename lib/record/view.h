/*
 * view: one record as a stage reads and edits it.
 *
 * A stage reads a record's top-level members and sets some through the
 * view, and never needs to know how the record is held.  The view keeps
 * the line's text (lib/record/scan) and edits it in place: every byte the
 * stage did not set is put out as it came.  It turns the line into a
 * jansson tree only when it must: a line outside scan's subset, a string
 * read that holds an escape, a member read after it was set, more members
 * set than an edit holds.  What the stage reads and what goes out are the
 * same either way; only the cost differs.
 *
 * Strings a view returns stay valid until the view is opened on the next
 * record (or freed).
 */
#ifndef RFP_VIEW_H
#define RFP_VIEW_H

#include <stddef.h>

#include <jansson.h>

#include "lib/record/fate.h"
#include "lib/record/rec.h"
#include "lib/record/scan.h"

struct view;

/* A view to open records in; free it with view_free. */
struct view *view_new(void);
void	view_free(struct view *v);
/*
 * Open v on the record text line (len bytes, NUL-terminated, kept by the
 * caller until the next open): 0, or -1 with a message in err when the
 * line is not a JSON object (the view is then empty).
 */
int	view_open(struct view *v, const char *line, size_t len, char *err,
	    size_t errlen);
/* Open v on a tree, which it takes (and frees). */
void	view_open_tree(struct view *v, json_t *rec);

/* The member's type (enum scan_type), or -1 when it is absent. */
int	view_type(struct view *v, const char *key);
/* The scan type of a jansson value, as view_type gives a member's. */
int	view_jtype(const json_t *j);
/* A string member, or NULL when absent or not a string. */
const char *view_str(struct view *v, const char *key);
/* An integer member, or def when absent or not an integer. */
long	view_int(struct view *v, const char *key, long def);
/* A number member (integer or real), or def. */
double	view_num(struct view *v, const char *key, double def);

/* Set a member: to a string (NULL: null), an integer, a real, true. */
void	view_set_str(struct view *v, const char *key, const char *s);
void	view_set_int(struct view *v, const char *key, long n);
void	view_set_real(struct view *v, const char *key, double d);
void	view_set_null(struct view *v, const char *key);
void	view_set_true(struct view *v, const char *key);
/* Mark the record dead with reason and detail (NULL: none), as rec_kill. */
void	view_kill(struct view *v, enum fate_reason reason,
	    const char *detail);

/* The record as a tree (the view holds it: do not free it). */
json_t	*view_tree(struct view *v);
/* The record's text with its newline; NULL when out of memory. */
const char *view_text(struct view *v, size_t *len);
/* Whether the view still holds the line's text (no tree was needed). */
int	view_is_text(const struct view *v);

#endif
