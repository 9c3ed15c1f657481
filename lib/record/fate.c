/* fate: the fates of a record and the reasons a record is dead. */
#include <stddef.h>
#include <string.h>

#include "lib/record/fate.h"

static const char *const kinds[FATE_NKINDS] = {
	[FATE_DONE] = "done",
	[FATE_RETRY] = "retry",
	[FATE_DEAD] = "dead"
};

/* Who gives each: doc/design.md, "Dead reasons, and who gives them". */
static const struct {
	const char	*name;
	const char	*meaning;
} reasons[FATE_NREASONS] = {
	[FATE_PERMANENT] = { "permanent",
	    "the outcome was classed permanent" },
	[FATE_PARSE_FAILED] = { "parse_failed",
	    "the body came, and its parser refused it" },
	[FATE_EXHAUSTED] = { "exhausted",
	    "out of attempts" },
	[FATE_BUDGET_SPENT] = { "budget_spent",
	    "the run-wide retry budget is gone" },
	[FATE_CIRCUIT_OPEN] = { "circuit_open",
	    "the endpoint's breaker was open and the record could not wait" },
	[FATE_QUOTA] = { "quota",
	    "the portal said to come back past max_retry_after or the "
	    "deadline" },
	[FATE_DEADLINE_CUT] = { "deadline_cut",
	    "not done by the deadline" },
	[FATE_AMBIGUOUS_SUBMIT] = { "ambiguous_submit",
	    "a submission that may have been committed, not re-sent" },
	[FATE_BAD_INPUT] = { "bad_input",
	    "a line or record that could not be used" }
};

const char *
fate_name(enum fate_kind k)
{
	return (unsigned)k < FATE_NKINDS ? kinds[k] : NULL;
}

int
fate_of(const char *name)
{
	int i;

	for (i = 0; name != NULL && i < FATE_NKINDS; i++)
		if (strcmp(name, kinds[i]) == 0)
			return i;
	return -1;
}

const char *
fate_reason(enum fate_reason r)
{
	return (unsigned)r < FATE_NREASONS ? reasons[r].name : NULL;
}

const char *
fate_meaning(enum fate_reason r)
{
	return (unsigned)r < FATE_NREASONS ? reasons[r].meaning : NULL;
}

int
fate_reason_of(const char *name)
{
	int i;

	for (i = 0; name != NULL && i < FATE_NREASONS; i++)
		if (reasons[i].name != NULL &&
		    strcmp(name, reasons[i].name) == 0)
			return i;
	return -1;
}
