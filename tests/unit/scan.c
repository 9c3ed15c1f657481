/*
 * Unit tests of lib/scan: what it reads of a line, what it leaves to
 * jansson, and that it never takes a line jansson (rec_parse) refuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/record/rec.h"
#include "lib/record/scan.h"
#include "tests/unit/tap.h"

static struct scan_rec s;

static int
scan(const char *line)
{
	return scan_record(line, strlen(line), &s);
}

/* Taken by the scan: jansson takes it too, with as many members. */
static void
takes(const char *line)
{
	char err[256];
	json_t *v = rec_parse(line, strlen(line), err, sizeof(err));
	int rc = scan(line);

	ok(rc == 0 && v != NULL && (size_t)s.n == json_object_size(v),
	    "taken: %s", line);
	json_decref(v);
}

/* Left to jansson; why says whether jansson takes it or not. */
static void
leaves(const char *line, int jansson_takes, const char *why)
{
	char err[256];
	json_t *v = rec_parse(line, strlen(line), err, sizeof(err));

	ok(scan(line) == -1 && (v != NULL) == jansson_takes,
	    "left to jansson (%s): %s", why, line);
	json_decref(v);
}

static void
member(const char *key, enum scan_type t, const char *text)
{
	const struct scan_member *m = scan_get(&s, key);

	ok(m != NULL && m->type == t && m->vlen == strlen(text) &&
	    memcmp(m->val, text, m->vlen) == 0, "member %s is %s", key, text);
}

int
main(void)
{
	char deep[300], big[4200], buf[16];
	int i, n;

	takes("{}");
	takes(" { } \t");
	takes("{\"a\":1}");
	takes("{ \"a\" : [ 1 , 2 , {\"b\":[]} ] , \"c\" : { } }");
	takes("{\"n\":-0,\"r\":-0.5e+10,\"e\":1E-99,\"z\":0.0}");
	takes("{\"s\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"}");
	takes("{\"t\":true,\"f\":false,\"u\":null}");
	takes("{\"a\":{\"k\":1},\"b\":{\"k\":1}}");
	takes("{\"\":0}");

	ok(scan("{\"id\":\"x\",\"status\":503,\"at\":1.5,\"ok\":true,"
	    "\"no\":false,\"nil\":null,\"o\":{\"a\":[1]},\"l\":[],"
	    "\"esc\":\"a\\nb\"}") == 0 && s.n == 9, "nine members read");
	member("id", SCAN_STRING, "\"x\"");
	member("status", SCAN_INTEGER, "503");
	member("at", SCAN_REAL, "1.5");
	member("ok", SCAN_TRUE, "true");
	member("no", SCAN_FALSE, "false");
	member("nil", SCAN_NULL, "null");
	member("o", SCAN_OBJECT, "{\"a\":[1]}");
	member("l", SCAN_ARRAY, "[]");
	ok(scan_get(&s, "esc")->escaped && !scan_get(&s, "id")->escaped,
	    "an escape in a string value is flagged");
	ok(scan_get(&s, "i") == NULL && scan_get(&s, "idx") == NULL,
	    "scan_get matches whole keys only");
	ok(*s.close == '}' && s.close[1] == '\0', "close is the last brace");
	n = scan_str(scan_get(&s, "id"), buf, sizeof(buf));
	ok(n == 1 && strcmp(buf, "x") == 0, "scan_str copies a string");
	ok(scan_str(scan_get(&s, "esc"), buf, sizeof(buf)) == -1 &&
	    scan_str(scan_get(&s, "status"), buf, sizeof(buf)) == -1 &&
	    scan_str(NULL, buf, sizeof(buf)) == -1,
	    "scan_str refuses escapes, non-strings and absent members");
	ok(scan("{\"s\":\"0123456789abcdef\"}") == 0 &&
	    scan_str(scan_get(&s, "s"), buf, sizeof(buf)) == -1,
	    "scan_str refuses what does not fit");

	/* Not JSON: jansson says so, in its words. */
	leaves("", 0, "empty");
	leaves("[1]", 0, "not an object");
	leaves("\"a\"", 0, "not an object");
	leaves("{", 0, "cut short");
	leaves("{\"a\":1", 0, "cut short");
	leaves("{\"a\":}", 0, "no value");
	leaves("{\"a\" 1}", 0, "no colon");
	leaves("{\"a\":1,}", 0, "trailing comma");
	leaves("{\"a\":[1,]}", 0, "trailing comma in an array");
	leaves("{a:1}", 0, "bare key");
	leaves("{\"a\":1} x", 0, "text after the object");
	leaves("{\"a\":1}{}", 0, "two objects");
	leaves("{\"a\":01}", 0, "leading zero");
	leaves("{\"a\":-}", 0, "lone minus");
	leaves("{\"a\":1.}", 0, "no fraction digits");
	leaves("{\"a\":.5}", 0, "no integer digits");
	leaves("{\"a\":1e}", 0, "no exponent digits");
	leaves("{\"a\":+1}", 0, "plus sign");
	leaves("{\"a\":tru}", 0, "cut literal");
	leaves("{\"a\":truex}", 0, "literal run on");
	leaves("{\"a\":NaN}", 0, "NaN");
	leaves("{\"a\":\"x\ty\"}", 0, "control byte in a string");
	leaves("{\"a\":\"\\x\"}", 0, "unknown escape");
	leaves("{\"a\":\"x}", 0, "unterminated string");
	leaves("{\"a\":1,\"a\":2}", 0, "duplicate key");
	leaves("{\"o\":{\"k\":1,\"k\":2}}", 0, "duplicate nested key");
	leaves("{\"a\":\"\\u0000\"}", 0, "escaped NUL");
	leaves("{\"a\":\"\\ud800\"}", 0, "lone surrogate");

	/* JSON outside the subset: jansson reads it. */
	leaves("{\"a\":\"\\u00e9\"}", 1, "\\u escape");
	leaves("{\"a\":\"\xc3\xa9\"}", 1, "UTF-8");
	leaves("{\"a\\n\":1}", 1, "escape in a key");
	leaves("{\"a\":1234567890123456789}", 1, "19-digit integer");
	leaves("{\"a\":1e100}", 1, "3-digit exponent");
	leaves("{\"a\":\"\x7f\"}", 1, "DEL");
	for (i = 0, n = 0; i < 40; i++)
		n += snprintf(deep + n, sizeof(deep) - (size_t)n, "{\"a\":");
	n += snprintf(deep + n, sizeof(deep) - (size_t)n, "1");
	for (i = 0; i < 40; i++)
		deep[n++] = '}';
	deep[n] = '\0';
	leaves(deep, 1, "nested past SCAN_DEPTH");
	for (i = 0, n = 0; i < SCAN_MEMBERS + 1; i++)
		n += snprintf(big + n, sizeof(big) - (size_t)n, "%s\"k%d\":%d",
		    i ? "," : "{", i, i);
	snprintf(big + n, sizeof(big) - (size_t)n, "}");
	leaves(big, 1, "more than SCAN_MEMBERS members");
	return tap_done();
}
