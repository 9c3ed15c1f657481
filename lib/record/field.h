/*
 * field: the JSON type of each field of the record contract a stage reads
 * from an earlier one (doc/design.md, "What each stage reads and adds").
 *
 * The view's readers take a member of another type for an absent one
 * (view_int's default, view_str's NULL): "attempt":"3" would be attempt
 * 1 and "status":"200" no status at all, a meaning given silently.  A
 * stage names the fields it reads, and a record with one of the wrong
 * type is refused before it is read (cmd/loop.c: dead bad_input, its id
 * kept, one line on stderr).  Null stands for absent only where a stage
 * writes null itself (a status with an error, an unreadable
 * Retry-After, a letter's id).
 */
#ifndef RFP_FIELD_H
#define RFP_FIELD_H

#include <stddef.h>

struct view;

/*
 * 0 when every member of v named in keys (NULL-terminated) that is there
 * has its contract type; else -1 with the first that has not in err, as
 * `field "attempt": expected an integer`.  A key the table does not know
 * is taken as it is.
 */
int	field_check(struct view *v, const char *const *keys, char *err,
	    size_t errlen);

#endif
