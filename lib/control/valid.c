/*
 * valid: a state file's object checked as its kind's code loads it, so
 * that one a run could not have written (by hand, or by a disk that lost
 * part of it) is named before the first request, not at the first use.
 */
#include <string.h>

#include <jansson.h>

#include "lib/control/breaker.h"
#include "lib/control/pace.h"
#include "lib/control/valid.h"

int
control_valid(const char *kind, const json_t *doc, char *why, size_t n)
{
	if (strcmp(kind, "rate") == 0)
		return pace_valid(doc, why, n);
	if (strcmp(kind, "breaker") == 0)
		return breaker_valid(doc, why, n);
	return 0;
}
