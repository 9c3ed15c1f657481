/*
 * Fuzz lib/doc: the input is one manifest line.  The raw bytes are tried as
 * an id (doc_id_check) and as an endpoint name (doc_safe_name); a line that
 * rec_parse accepts goes through doc_check and the names derived from the
 * record.  An id doc_id_check accepts, and anything doc_safe_name returns,
 * must be usable as one file name in the run dir: no '/', no leading '.',
 * printable ASCII, bounded length; an id also starts with a letter or digit
 * and holds no "..".  A rejection always says why.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "lib/record/doc.h"
#include "lib/record/rec.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* The file-name safety shared by accepted ids and safe names. */
static void
check_file_name(const char *s, size_t max, const char *what)
{
	const unsigned char *p;

	FUZZ_CHECK(*s != '\0' && *s != '.', what);
	FUZZ_CHECK(strlen(s) <= max, what);
	FUZZ_CHECK(strchr(s, '/') == NULL, what);
	for (p = (const unsigned char *)s; *p != '\0'; p++)
		FUZZ_CHECK(*p > 0x20 && *p < 0x7f, what);
}

static void
id(const char *s)
{
	const char *why = doc_id_check(s);

	if (why == NULL) {
		check_file_name(s, DOC_ID_MAX, "an accepted id is a safe "
		    "file name");
		FUZZ_CHECK(isalnum((unsigned char)*s), "an accepted id starts "
		    "with a letter or digit");
		FUZZ_CHECK(strstr(s, "..") == NULL, "an accepted id has no ..");
	} else
		FUZZ_CHECK(*why != '\0', "a rejected id says why");
}

static void
safe_name(const char *s)
{
	char *n = doc_safe_name(s);
	const char *p;

	check_file_name(n, 100 + 9, "doc_safe_name gives a safe file name");
	for (p = n; *p != '\0'; p++)
		FUZZ_CHECK(isalnum((unsigned char)*p) || strchr("._-", *p),
		    "doc_safe_name keeps to [A-Za-z0-9._-]");
	free(n);
}

static void
record(json_t *rec)
{
	const char *i, *u;
	char err[512], *ep, *key;
	int usable;

	err[0] = '\0';
	if ((usable = doc_check(rec, err, sizeof(err)) == 0)) {
		i = rec_str(rec, "id");
		u = rec_str(rec, "url");
		FUZZ_CHECK(i != NULL && doc_id_check(i) == NULL,
		    "a usable record has a safe id");
		FUZZ_CHECK(u != NULL && (strncasecmp(u, "http://", 7) == 0 ||
		    strncasecmp(u, "https://", 8) == 0),
		    "a usable record has an http(s) URL");
	} else
		FUZZ_CHECK(err[0] != '\0', "a rejected record says why");
	ep = doc_endpoint(rec);
	safe_name(ep);
	free(ep);
	(void)doc_is_submission(rec);
	key = doc_idem_key(rec);
	FUZZ_CHECK(key != NULL, "an idempotency key");
	FUZZ_CHECK(!usable || doc_id_check(key) == NULL,
	    "a usable record's idempotency key is a safe string");
	free(key);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size), err[256];
	json_t *rec;

	id(s);
	safe_name(s);
	if ((rec = rec_parse((const char *)data, size, err,
	    sizeof(err))) != NULL) {
		if (json_is_string(json_object_get(rec, "id"))) {
			id(rec_str(rec, "id"));
			safe_name(rec_str(rec, "id"));
		}
		record(rec);
		json_decref(rec);
	}
	free(s);
	return 0;
}
