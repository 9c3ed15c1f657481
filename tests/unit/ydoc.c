/*
 * Unit tests of lib/config/ydoc: YAML to JSON types, key lines, and the errors
 * (duplicate keys, aliases, syntax, shape) worded "file:line: what".
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/config/ydoc.h"
#include "tests/unit/tap.h"

static struct ydoc *
parse(const char *text, char *err, size_t errlen)
{
	err[0] = '\0';
	return ydoc_parse("t.yaml", text, strlen(text), err, errlen);
}

static void
test_types(void)
{
	static const char y[] =
	    "int: 42\n"			/* 1 */
	    "neg: -7\n"			/* 2 */
	    "real: 1.5\n"		/* 3 */
	    "yes_: true\n"		/* 4 */
	    "no_: no\n"			/* 5 */
	    "nul: ~\n"			/* 6 */
	    "empty:\n"			/* 7 */
	    "quoted: \"42\"\n"		/* 8 */
	    "squoted: 'true'\n"		/* 9 */
	    "word: hello world\n"	/* 10 */
	    "dur: 1m30s\n"		/* 11 */
	    "list: [1, two, 3.5]\n"	/* 12 */
	    "map:\n"			/* 13 */
	    "  inner:\n"		/* 14 */
	    "    deep: 1\n"		/* 15 */
	    "  other: x\n"		/* 16 */
	    "hex: 0x10\n";		/* 17 */
	char err[256];
	struct ydoc *c = parse(y, err, sizeof(err));
	json_t *r, *l;

	ok(c != NULL, "types: the document loads (%s)", err);
	if (c == NULL)
		return;
	r = c->root;
	ok(json_is_integer(json_object_get(r, "int")) &&
	    json_integer_value(json_object_get(r, "int")) == 42,
	    "types: 42 is an integer");
	ok(json_integer_value(json_object_get(r, "neg")) == -7,
	    "types: -7 is an integer");
	ok(json_is_real(json_object_get(r, "real")) &&
	    json_real_value(json_object_get(r, "real")) == 1.5,
	    "types: 1.5 is a real");
	ok(json_is_true(json_object_get(r, "yes_")), "types: true");
	ok(json_is_false(json_object_get(r, "no_")), "types: no is false");
	ok(json_is_null(json_object_get(r, "nul")), "types: ~ is null");
	ok(json_is_null(json_object_get(r, "empty")), "types: empty is null");
	is_str(json_string_value(json_object_get(r, "quoted")), "42",
	    "types: a quoted number stays a string");
	is_str(json_string_value(json_object_get(r, "squoted")), "true",
	    "types: a quoted boolean stays a string");
	is_str(json_string_value(json_object_get(r, "word")), "hello world",
	    "types: plain text is a string");
	is_str(json_string_value(json_object_get(r, "dur")), "1m30s",
	    "types: a duration is left as a string");
	is_str(json_string_value(json_object_get(r, "hex")), "0x10",
	    "types: 0x10 is not read as a number");
	l = json_object_get(r, "list");
	ok(json_is_array(l) && json_array_size(l) == 3 &&
	    json_is_integer(json_array_get(l, 0)) &&
	    json_is_string(json_array_get(l, 1)) &&
	    json_is_real(json_array_get(l, 2)), "types: a flow sequence");
	ok(json_integer_value(json_object_get(json_object_get(
	    json_object_get(r, "map"), "inner"), "deep")) == 1,
	    "types: nested mappings");

	is_long(ydoc_line(c, "int"), 1, "ydoc_line: first key on line 1");
	is_long(ydoc_line(c, "word"), 10, "ydoc_line: word on line 10");
	is_long(ydoc_line(c, "map"), 13, "ydoc_line: map on line 13");
	is_long(ydoc_line(c, "map.inner.deep"), 15,
	    "ydoc_line: a nested key path");
	is_long(ydoc_line(c, "map.other"), 16, "ydoc_line: a sibling key");
	is_long(ydoc_line(c, "nope"), 0, "ydoc_line: 0 for an unknown key");
	is_long(ydoc_line(NULL, "int"), 0, "ydoc_line: 0 for no config");
	is_str(c->path, "t.yaml", "ydoc: path is the name given");
	ydoc_free(c);
}

static void
test_errors(void)
{
	static const struct {
		const char *yaml, *want;
	} bad[] = {
		{ "a: 1\nb: 2\na: 3\n", "t.yaml:3: duplicate key \"a\"" },
		{ "m:\n  x: 1\n  x: 2\n", "t.yaml:3: duplicate key \"x\"" },
		{ "a: &k 1\nb: *k\n", "t.yaml:2: aliases are not supported" },
		{ "base: &b {x: 1}\nother:\n  <<: *b\n",
		    "t.yaml:3: aliases are not supported" },
		{ "- 1\n- 2\n", "t.yaml:1: top level is not a mapping" },
		{ "just a string\n", "t.yaml:1: top level is not a mapping" },
		{ "a: 1\n---\nb: 2\n", "t.yaml:2: more than one document" },
		{ "? [1, 2]\n: x\n", "t.yaml:1: mapping key is not a scalar" },
		{ "a: [1, 2\nb: 3\n", "t.yaml:" },
		{ "a: 'open\n", "t.yaml:" },
		{ "a:\n\tb: 1\n", "t.yaml:" },
	};
	char err[256];
	struct ydoc *c;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c = parse(bad[i].yaml, err, sizeof(err));
		ok(c == NULL && strncmp(err, bad[i].want, strlen(bad[i].want))
		    == 0 && strchr(err, '\n') == NULL,
		    "errors: bad YAML %zu is refused: %s", i + 1, err);
		if (c != NULL || strncmp(err, bad[i].want,
		    strlen(bad[i].want)) != 0)
			printf("#   want prefix: %s\n", bad[i].want);
		ydoc_free(c);
	}
}

static void
test_shapes(void)
{
	char err[256], deep[2000];
	struct ydoc *c;
	size_t n = 0;
	int i;

	c = parse("", err, sizeof(err));
	ok(c != NULL && json_is_object(c->root) &&
	    json_object_size(c->root) == 0, "shapes: empty text is {}");
	ydoc_free(c);
	c = parse("# only a comment\n", err, sizeof(err));
	ok(c != NULL && json_object_size(c->root) == 0,
	    "shapes: a comment-only file is {}");
	ydoc_free(c);
	c = parse("---\na: 1\n...\n", err, sizeof(err));
	ok(c != NULL && json_object_size(c->root) == 1,
	    "shapes: explicit document markers are fine");
	ydoc_free(c);

	for (i = 0; i < 100; i++)
		n += (size_t)sprintf(deep + n, "[");
	for (i = 0; i < 100; i++)
		n += (size_t)sprintf(deep + n, "]");
	{
		char *y = malloc(n + 8);

		sprintf(y, "a: %s\n", deep);
		c = parse(y, err, sizeof(err));
		ok(c == NULL && strstr(err, "nesting too deep") != NULL,
		    "shapes: 100 levels of nesting are refused: %s", err);
		ydoc_free(c);
		free(y);
	}
}

static void
test_load(void)
{
	char dir[] = "/tmp/unit-ydoc.XXXXXX", path[256], err[512];
	struct ydoc *c;
	FILE *f;

	if (mkdtemp(dir) == NULL)
		exit(2);
	snprintf(path, sizeof(path), "%s/rfpipe.yaml", dir);
	f = fopen(path, "w");
	fputs("# comment\nconcurrency: 4\nendpoints:\n  nih:\n    rate: 2\n",
	    f);
	fclose(f);
	c = ydoc_load(path, err, sizeof(err));
	ok(c != NULL && json_integer_value(json_object_get(c->root,
	    "concurrency")) == 4, "load: reads a file");
	is_long(ydoc_line(c, "endpoints.nih.rate"), 5,
	    "load: key lines from a file");
	is_str(c ? c->path : NULL, path, "load: path kept");
	ydoc_free(c);

	f = fopen(path, "w");
	fputs("a: 1\n\n\na: 2\n", f);
	fclose(f);
	c = ydoc_load(path, err, sizeof(err));
	{
		char want[300];

		snprintf(want, sizeof(want), "%s:4: duplicate key \"a\"", path);
		is_str(c == NULL ? err : NULL, want,
		    "load: errors name the file and line");
	}
	ydoc_free(c);
	unlink(path);

	c = ydoc_load(path, err, sizeof(err));
	ok(c == NULL && strstr(err, "open ") == err &&
	    strstr(err, "No such file or directory") != NULL,
	    "load: a missing file: %s", err);
	rmdir(dir);
}

int
main(void)
{
	test_types();
	test_errors();
	test_shapes();
	test_load();
	return tap_done();
}
