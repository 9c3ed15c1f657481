/*
 * valid: whether a state file's object is one a run could have written,
 * for files_check_state, which asks before a run sends anything.
 */
#ifndef RFP_VALID_H
#define RFP_VALID_H

#include <stddef.h>

#include <jansson.h>

/* A files_valid_fn: the kind's own check ("rate", "breaker"). */
int	control_valid(const char *kind, const json_t *doc, char *why,
	    size_t n);

#endif
