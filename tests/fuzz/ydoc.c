/*
 * Fuzz lib/config/ydoc: the input is a YAML document given to ydoc_parse.  A parse
 * must give a mapping and a line for every key path it recorded; a failure
 * must give a "fuzz.yaml:N: what" message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/config/ydoc.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ydoc *c;
	const char *key;
	json_t *v;
	char err[512], *dump;

	err[0] = '\0';
	c = ydoc_parse("fuzz.yaml", (const char *)data, size, err, sizeof(err));
	if (c == NULL) {
		FUZZ_CHECK(strncmp(err, "fuzz.yaml:", 10) == 0,
		    "a failed parse says \"file:line: what\"");
		return 0;
	}
	FUZZ_CHECK(json_is_object(c->root), "the top level is a mapping");
	FUZZ_CHECK(strcmp(c->path, "fuzz.yaml") == 0, "the name is kept");
	json_object_foreach(c->lines, key, v) {
		FUZZ_CHECK(json_is_integer(v) && json_integer_value(v) >= 1,
		    "a key's line is a positive integer");
		FUZZ_CHECK(ydoc_line(c, key) == json_integer_value(v),
		    "ydoc_line gives the recorded line");
	}
	FUZZ_CHECK(ydoc_line(c, "") == 0 || json_object_get(c->lines, ""),
	    "an unknown key path has line 0");
	dump = json_dumps(c->root, JSON_COMPACT);
	FUZZ_CHECK(dump != NULL, "the document dumps as JSON");
	free(dump);
	ydoc_free(c);
	return 0;
}
