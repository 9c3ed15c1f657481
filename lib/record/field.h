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

#include <jansson.h>

struct view;

/*
 * The highest attempt a record may carry.  A count of tries, it is far
 * below max_attempts' own bound; outside 1 to this an attempt would
 * overflow the next (attempt + 1) or a backoff's exponent, or, negative,
 * slip under max_attempts.
 */
#define FIELD_ATTEMPT_MAX	1000000
#define FIELD_STR_(x)	#x
#define FIELD_STR(x)	FIELD_STR_(x)

/*
 * 0 when every member of v named in keys (NULL-terminated) that is there
 * has its contract type; else -1 with the first that has not in err, as
 * `field "attempt": expected an integer from 1 to 1000000` (an attempt
 * is also range-checked: FIELD_ATTEMPT_MAX).  A key the table does not
 * know is taken as it is.
 */
int	field_check(struct view *v, const char *const *keys, char *err,
	    size_t errlen);
/*
 * The same for every member of rec the table knows: a manifest line as
 * rfp-fetch admits it (and --check), so that a field a later stage would
 * refuse is refused before anything is sent.
 */
int	field_check_json(const json_t *rec, char *err, size_t errlen);

#endif
