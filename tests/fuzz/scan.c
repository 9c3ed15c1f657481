/*
 * Fuzz lib/scan against jansson.  The input is one record line.
 *
 * Whatever scan_record takes, rec_parse must take too, and the two must
 * read it alike: as many members, the same keys in the same order, the same
 * type for each value, the same text for an escape-free string, the same
 * number for an integer or a real.  What the scan leaves is not checked:
 * leaving a line to jansson is always allowed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/record/rec.h"
#include "lib/record/scan.h"
#include "tests/fuzz/fuzz.h"

static struct scan_rec s;

static int
same_type(enum scan_type t, const json_t *v)
{
	switch (t) {
	case SCAN_STRING:
		return json_is_string(v);
	case SCAN_INTEGER:
		return json_is_integer(v);
	case SCAN_REAL:
		return json_is_real(v);
	case SCAN_TRUE:
		return json_is_true(v);
	case SCAN_FALSE:
		return json_is_false(v);
	case SCAN_NULL:
		return json_is_null(v);
	case SCAN_OBJECT:
		return json_is_object(v);
	default:
		return json_is_array(v);
	}
}

/* One member read alike; its key as a C string is in k. */
static void
check_member(const struct scan_member *m, const char *k, json_t *v)
{
	const struct scan_member *g;
	char *buf;

	FUZZ_CHECK(v != NULL, "a scanned key is a key for jansson");
	FUZZ_CHECK(same_type(m->type, v), "the same type");
	g = scan_get(&s, k);
	FUZZ_CHECK(g == m, "scan_get finds each key's own member");
	if (m->type == SCAN_STRING) {
		FUZZ_CHECK(m->vlen >= 2 && m->val[0] == '"' &&
		    m->val[m->vlen - 1] == '"', "a string keeps its quotes");
		if (!m->escaped) {
			buf = xmalloc(m->vlen);
			FUZZ_CHECK(scan_str(m, buf, m->vlen) ==
			    (int)m->vlen - 2, "scan_str copies it whole");
			FUZZ_CHECK(strcmp(buf, json_string_value(v)) == 0,
			    "the same string");
			free(buf);
		}
	} else if (m->type == SCAN_INTEGER)
		FUZZ_CHECK(strtoll(m->val, NULL, 10) == json_integer_value(v),
		    "the same integer");
	else if (m->type == SCAN_REAL)
		FUZZ_CHECK(strtod(m->val, NULL) == json_real_value(v),
		    "the same real");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *line = (const char *)data, *key;
	char err[256], *k;
	json_t *rec, *v;
	void *it;
	int i;

	if (scan_record(line, size, &s) == -1)
		return 0;
	rec = rec_parse(line, size, err, sizeof(err));
	FUZZ_CHECK(rec != NULL, "jansson takes what the scan takes");
	FUZZ_CHECK((size_t)s.n == json_object_size(rec), "as many members");
	FUZZ_CHECK(s.close >= line && s.close < line + size &&
	    *s.close == '}', "close is a closing brace of the line");
	it = json_object_iter(rec);
	for (i = 0; i < s.n; i++) {
		k = xmalloc(s.m[i].klen + 1);
		memcpy(k, s.m[i].key, s.m[i].klen);
		k[s.m[i].klen] = '\0';
		FUZZ_CHECK(it != NULL, "jansson has as many keys");
		key = json_object_iter_key(it);
		FUZZ_CHECK(strcmp(key, k) == 0, "the same keys in order");
		v = json_object_iter_value(it);
		check_member(&s.m[i], k, v);
		FUZZ_CHECK(s.m[i].val + s.m[i].vlen <= s.close,
		    "a value ends before the close");
		free(k);
		it = json_object_iter_next(rec, it);
	}
	json_decref(rec);
	return 0;
}
