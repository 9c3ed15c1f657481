/* field: the contract's field types, checked before a stage reads them. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "lib/record/field.h"
#include "lib/record/scan.h"
#include "lib/record/view.h"

#define T(t)	(1u << (t))
#define STR	T(SCAN_STRING)
#define INT	T(SCAN_INTEGER)
#define NUM	(T(SCAN_INTEGER) | T(SCAN_REAL))
#define BOOL	(T(SCAN_TRUE) | T(SCAN_FALSE))
#define NUL	T(SCAN_NULL)

/* Integers with a range: lo to hi, when hi > lo; words says so. */
static const struct {
	const char	*key;
	unsigned	 types;		/* bits of enum scan_type */
	const char	*words;		/* what the message says it expected */
	long		 lo, hi;
} fields[] = {
	{ "id", STR | NUL, "a string", 0, 0 },
	{ "attempt", INT, "an integer from 1 to " FIELD_STR(FIELD_ATTEMPT_MAX),
	    1, FIELD_ATTEMPT_MAX },
	{ "status", INT | NUL, "an integer or null", 0, 0 },
	{ "error", STR | NUL, "a string or null", 0, 0 },
	{ "parse_error", STR | NUL, "a string or null", 0, 0 },
	{ "parse_detail", STR | NUL, "a string or null", 0, 0 },
	{ "retry_after", STR, "a string", 0, 0 },
	{ "date", STR, "a string", 0, 0 },
	{ "response_at", NUM, "a number", 0, 0 },
	{ "endpoint", STR, "a string", 0, 0 },
	{ "method", STR, "a string", 0, 0 },
	{ "idempotent", BOOL, "true or false", 0, 0 },
	{ "sent", BOOL, "true or false", 0, 0 },
	{ "status_url", STR, "a string", 0, 0 },
	{ "class", STR, "a string", 0, 0 },
	{ "reason", STR, "a string", 0, 0 },
	{ "retry_after_s", NUM | NUL, "a number or null", 0, 0 },
	{ "not_before", NUM, "a number", 0, 0 },
	{ "delay_s", NUM, "a number", 0, 0 },
	{ "line_key", STR, "a string", 0, 0 },
	{ NULL, 0, NULL, 0, 0 }
};

/* The table's entry for key, or -1. */
static int
entry(const char *key)
{
	int i;

	for (i = 0; fields[i].key != NULL; i++)
		if (strcmp(fields[i].key, key) == 0)
			return i;
	return -1;
}

/*
 * Whether a member key of type t (and, an integer, value n) is as the
 * table says; else -1 with err set.
 */
static int
judge(const char *key, int t, long long n, char *err, size_t errlen)
{
	int i = entry(key);

	if (i == -1 || ((fields[i].types & T(t)) && (t != SCAN_INTEGER ||
	    fields[i].hi <= fields[i].lo || (n >= fields[i].lo &&
	    n <= fields[i].hi))))
		return 0;
	snprintf(err, errlen, "field \"%s\": expected %s", key,
	    fields[i].words);
	return -1;
}

int
field_check(struct view *v, const char *const *keys, char *err,
    size_t errlen)
{
	int t;

	for (; *keys != NULL; keys++) {
		if ((t = view_type(v, *keys)) == -1)
			continue;
		/* A long holds any integer a scan or jansson reads. */
		if (judge(*keys, t, t == SCAN_INTEGER ? view_int(v, *keys, 0) :
		    0, err, errlen) == -1)
			return -1;
	}
	return 0;
}

int
field_check_json(const json_t *rec, char *err, size_t errlen)
{
	const json_t *j;
	int i;

	for (i = 0; fields[i].key != NULL; i++) {
		if ((j = json_object_get(rec, fields[i].key)) == NULL)
			continue;
		if (judge(fields[i].key, view_jtype(j), json_is_integer(j) ?
		    (long long)json_integer_value(j) : 0, err, errlen) == -1)
			return -1;
	}
	return 0;
}
