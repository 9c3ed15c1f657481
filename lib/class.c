/* class: transient, permanent, and unknown taken as permanent. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "lib/class.h"

static const char *transient_errors[] = { "timeout", "connect", "reset",
	"deadline", NULL };

const char *
class_name(enum class_kind k)
{
	switch (k) {
	case CLASS_OK:
		return "ok";
	case CLASS_TRANSIENT:
		return "transient";
	default:
		return "permanent";
	}
}

enum class_kind
class_of(const json_t *rec, char *reason, size_t len)
{
	const char *err = json_string_value(json_object_get(rec, "error"));
	json_t *st = json_object_get(rec, "status"), *chk;
	long s;
	int i;

	if (err != NULL) {
		snprintf(reason, len, "%s", err);
		for (i = 0; transient_errors[i] != NULL; i++)
			if (strcmp(err, transient_errors[i]) == 0)
				return CLASS_TRANSIENT;
		return CLASS_PERMANENT;
	}
	if (!json_is_integer(st)) {
		snprintf(reason, len, "%s", st == NULL || json_is_null(st) ?
		    "no_outcome" : "bad_status");
		return CLASS_PERMANENT;
	}
	s = (long)json_integer_value(st);
	if (s >= 200 && s <= 299) {
		chk = json_object_get(rec, "check");
		if (chk != NULL && !json_is_null(chk) && !json_is_false(chk)) {
			snprintf(reason, len, "invalid_body");
			return CLASS_PERMANENT;
		}
		snprintf(reason, len, "http_%ld", s);
		return CLASS_OK;
	}
	switch (s) {
	case 429: case 500: case 502: case 503: case 504:
		snprintf(reason, len, "http_%ld", s);
		return CLASS_TRANSIENT;
	case 400: case 401: case 403: case 404: case 422:
		snprintf(reason, len, "http_%ld", s);
		return CLASS_PERMANENT;
	default:
		snprintf(reason, len, "unknown_http_%ld", s);
		return CLASS_PERMANENT;
	}
}
