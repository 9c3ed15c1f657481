/* field: the contract's field types, checked before a stage reads them. */
#include <stdio.h>
#include <string.h>

#include "lib/record/field.h"
#include "lib/record/scan.h"
#include "lib/record/view.h"

#define T(t)	(1u << (t))
#define STR	T(SCAN_STRING)
#define INT	T(SCAN_INTEGER)
#define NUM	(T(SCAN_INTEGER) | T(SCAN_REAL))
#define BOOL	(T(SCAN_TRUE) | T(SCAN_FALSE))
#define NUL	T(SCAN_NULL)

static const struct {
	const char	*key;
	unsigned	 types;		/* bits of enum scan_type */
	const char	*words;		/* what the message says it expected */
} fields[] = {
	{ "id", STR | NUL, "a string" },
	{ "attempt", INT, "an integer" },
	{ "status", INT | NUL, "an integer or null" },
	{ "error", STR | NUL, "a string or null" },
	{ "parse_error", STR | NUL, "a string or null" },
	{ "parse_detail", STR | NUL, "a string or null" },
	{ "retry_after", STR, "a string" },
	{ "date", STR, "a string" },
	{ "response_at", NUM, "a number" },
	{ "endpoint", STR, "a string" },
	{ "method", STR, "a string" },
	{ "idempotent", BOOL, "true or false" },
	{ "sent", BOOL, "true or false" },
	{ "status_url", STR, "a string" },
	{ "class", STR, "a string" },
	{ "reason", STR, "a string" },
	{ "retry_after_s", NUM | NUL, "a number or null" },
	{ "not_before", NUM, "a number" },
	{ "delay_s", NUM, "a number" },
	{ "line_key", STR, "a string" },
	{ NULL, 0, NULL }
};

int
field_check(struct view *v, const char *const *keys, char *err,
    size_t errlen)
{
	int i, t;

	for (; *keys != NULL; keys++) {
		if ((t = view_type(v, *keys)) == -1)
			continue;
		for (i = 0; fields[i].key != NULL; i++)
			if (strcmp(fields[i].key, *keys) == 0)
				break;
		if (fields[i].key == NULL || (fields[i].types & T(t)))
			continue;
		snprintf(err, errlen, "field \"%s\": expected %s", *keys,
		    fields[i].words);
		return -1;
	}
	return 0;
}
