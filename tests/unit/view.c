/*
 * Unit tests of lib/record/view: reads and sets through the text and
 * through the tree agree, the text keeps every byte not set, the tree is
 * taken only when it must be; and the stage loop.  TAP on stdout.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd/loop.h"
#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "lib/record/view.h"
#include "tests/unit/tap.h"

/* v's text, NUL-terminated without its newline, in a static buffer. */
static const char *
text(struct view *v)
{
	static char buf[4096];
	const char *t;
	size_t n;

	if ((t = view_text(v, &n)) == NULL || n == 0 || t[n - 1] != '\n' ||
	    n > sizeof(buf))
		return "(no text)";
	memcpy(buf, t, n - 1);
	buf[n - 1] = '\0';
	return buf;
}

/* Whether the text of v parses to a tree equal to want (JSON text). */
static int
same(struct view *v, const char *want)
{
	json_t *a = json_loads(text(v), 0, NULL), *b = json_loads(want, 0,
	    NULL);
	int eq = a != NULL && b != NULL && json_equal(a, b);

	json_decref(a);
	json_decref(b);
	return eq;
}

static void
test_text(void)
{
	static const char line[] = "{ \"id\" : \"a-1\",\"status\":429, "
	    "\"at\":1.5e3,\"body\":{\"x\":[1,2]},\"ok\":true,\"n\":null }";
	struct view *v = view_new();
	char err[128];

	ok(view_open(v, line, strlen(line), err, sizeof(err)) == 0,
	    "open: a record");
	is_str(view_str(v, "id"), "a-1", "text: a string");
	is_long(view_int(v, "status", -1), 429, "text: an integer");
	ok(view_num(v, "at", 0) == 1500, "text: a real");
	is_long(view_int(v, "at", -1), -1, "text: a real is not an integer");
	is_long(view_type(v, "body"), SCAN_OBJECT, "text: an object's type");
	is_long(view_type(v, "ok"), SCAN_TRUE, "text: true's type");
	is_long(view_type(v, "n"), SCAN_NULL, "text: null's type");
	is_long(view_type(v, "gone"), -1, "text: absent is -1");
	ok(view_str(v, "status") == NULL, "text: an integer is not a string");
	ok(view_str(v, "id") == view_str(v, "id"), "text: a string read "
	    "twice is read once");
	is_str(text(v), line, "text: untouched, every byte as it came");
	ok(view_is_text(v), "text: no tree was needed");

	view_set_str(v, "class", "transient");
	view_set_int(v, "status", 503);
	view_set_real(v, "delay_s", 0.25);
	view_set_null(v, "ok");
	view_set_true(v, "flag");
	is_str(text(v), "{ \"id\" : \"a-1\",\"status\":503, \"at\":1.5e3,"
	    "\"body\":{\"x\":[1,2]},\"ok\":null,\"n\":null ,"
	    "\"class\":\"transient\",\"delay_s\":0.25,\"flag\":true}",
	    "set: in place where the key is, added before the brace");
	ok(view_is_text(v), "set: still no tree");
	view_set_str(v, "class", "ok");
	ok(same(v, "{\"id\":\"a-1\",\"status\":503,\"at\":1500.0,\"body\":"
	    "{\"x\":[1,2]},\"ok\":null,\"n\":null,\"class\":\"ok\","
	    "\"delay_s\":0.25,\"flag\":true}"), "set: twice keeps the last");
	is_long(view_int(v, "status", -1), 503, "set: read back after set");
	ok(!view_is_text(v), "set: a member read after it was set takes "
	    "the tree");
	is_str(view_str(v, "class"), "ok", "set: and the tree has the sets");
	view_free(v);
}

static void
test_fallback(void)
{
	static const char esc[] = "{\"id\":\"a\\tb\\\"c\",\"status\":200}";
	static const char dup[] = "{\"id\":\"a\",\"id\":\"b\"}";
	static const char big5[] = "{\"n\":1e308}";
	static const char *keys[] = { "s0", "s1", "s2", "s3", "s4", "s5",
	    "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13" };
	struct view *v = view_new();
	char err[128], big[300];
	int i;

	view_open(v, esc, strlen(esc), err, sizeof(err));
	is_long(view_int(v, "status", 0), 200, "escape: a plain member from "
	    "the text");
	ok(view_is_text(v), "escape: the text, until the escape is read");
	is_str(view_str(v, "id"), "a\tb\"c", "escape: read by jansson");
	ok(!view_is_text(v), "escape: then the tree");
	view_set_str(v, "reason", "r");
	ok(same(v, "{\"id\":\"a\\tb\\\"c\",\"status\":200,\"reason\":"
	    "\"r\"}"), "escape: the tree put out with its set");

	ok(view_open(v, dup, strlen(dup), err, sizeof(err)) == -1 &&
	    strstr(err, "duplicate") != NULL, "duplicate key: refused, as "
	    "jansson refuses it (%s)", err);
	ok(view_open(v, big5, strlen(big5), err, sizeof(err)) == 0 &&
	    !view_is_text(v), "a number scan does not take: a tree at once");
	ok(view_num(v, "n", 0) > 1e300, "... read by jansson");

	ok(view_open(v, "[1]", 3, err, sizeof(err)) == -1 &&
	    strstr(err, "not a JSON object") != NULL,
	    "not an object: -1 and why (%s)", err);
	ok(view_open(v, "{\"a\":", 5, err, sizeof(err)) == -1,
	    "malformed: -1");
	ok(view_text(v, &(size_t){ 0 }) == NULL && view_str(v, "a") == NULL,
	    "malformed: the view is empty");

	/* More sets than an edit holds: the tree takes them all. */
	view_open(v, "{\"k\":0}", 7, err, sizeof(err));
	for (i = 0; i < SCAN_SETS + 3; i++)
		view_set_int(v, keys[i], i);
	ok(!view_is_text(v), "many sets: the tree");
	ok(json_object_size(view_tree(v)) == (size_t)SCAN_SETS + 4 &&
	    json_integer_value(json_object_get(view_tree(v), "s0")) == 0 &&
	    json_integer_value(json_object_get(view_tree(v), "s10")) == 10,
	    "many sets: every one applied, the first %d included", SCAN_SETS);

	/* Strings that need escaping, long ones, and ones not UTF-8. */
	view_open(v, "{}", 2, err, sizeof(err));
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	view_set_str(v, "long", big);
	view_set_str(v, "quote", "a\"b\\c\n");
	view_set_str(v, "bad", "\xff\xfe");
	view_set_str(v, "none", NULL);
	ok(view_is_text(v), "escaped sets: still the text");
	{
		json_t *t = json_loads(text(v), 0, NULL);

		ok(t != NULL && strlen(json_string_value(json_object_get(t,
		    "long"))) == sizeof(big) - 1, "escaped sets: a long "
		    "string whole");
		is_str(json_string_value(json_object_get(t, "quote")),
		    "a\"b\\c\n", "escaped sets: quote, backslash, newline");
		ok(json_is_null(json_object_get(t, "bad")) &&
		    json_is_null(json_object_get(t, "none")),
		    "escaped sets: not UTF-8, and NULL, are null");
		json_decref(t);
	}
	view_kill(v, FATE_PERMANENT, "why");
	is_str(view_str(v, "dead_reason"), "permanent", "kill: the reason");
	is_str(view_str(v, "fate"), "dead", "kill: the fate");
	is_str(view_str(v, "dead_detail"), "why", "kill: the detail");
	view_free(v);
}

/* Text and tree read every member of a record alike. */
static void
test_agree(void)
{
	static const char *lines[] = {
		"{\"a\":1,\"b\":-2.5e-3,\"c\":\"x y\",\"d\":null,\"e\":false,"
		    "\"f\":[],\"g\":{},\"h\":true,\"i\":9007199254740993}",
		"{\"a\":\"1\",\"b\":0,\"c\":0.0,\"d\":\"\",\"e\":-0,\"f\":1E2}",
	};
	static const char *keys[] = { "a", "b", "c", "d", "e", "f", "g",
	    "h", "i", "z" };
	struct view *t = view_new(), *j = view_new();
	char err[128];
	size_t i, k;
	int bad = 0;

	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		view_open(t, lines[i], strlen(lines[i]), err, sizeof(err));
		view_open_tree(j, rec_parse(lines[i], strlen(lines[i]), err,
		    sizeof(err)));
		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			const char *a = view_str(t, keys[k]);
			const char *b = view_str(j, keys[k]);

			if (view_type(t, keys[k]) != view_type(j, keys[k]) ||
			    view_int(t, keys[k], 7) != view_int(j, keys[k], 7) ||
			    view_num(t, keys[k], 7) != view_num(j, keys[k], 7) ||
			    (a == NULL) != (b == NULL) ||
			    (a != NULL && strcmp(a, b) != 0)) {
				fprintf(stderr, "# line %zu key %s differs\n",
				    i, keys[k]);
				bad++;
			}
		}
		ok(view_is_text(t), "agree: line %zu read from its text", i);
	}
	is_long(bad, 0, "agree: text and tree read every member alike");
	view_free(t);
	view_free(j);
}
struct seen {
	long	 lines[16];
	int	 n;
	int	 mode;		/* 0: write, 1: consume id "drop", -1 fail at 3 */
};

static int
handler(struct view *v, long lineno, struct rec_out *out, void *arg)
{
	struct seen *s = arg;
	const char *id = view_str(v, "id");

	(void)out;
	if (s->n < 16)
		s->lines[s->n] = lineno;
	s->n++;
	if (s->mode == -1 && lineno == 3)
		return -1;
	if (s->mode == 1 && id != NULL && strcmp(id, "drop") == 0)
		return 1;
	view_set_int(v, "seen", lineno);
	return 0;
}

/* Run loop_run on input; the output lines into out (NULL-terminated). */
static int
loop(const char *in, struct seen *s, json_t **out, int nout, char *errbuf,
    size_t errlen)
{
	FILE *fo = tmpfile(), *fe = tmpfile();
	int fdin = tap_fd_of(in, strlen(in)), saved, rc, i = 0;
	struct rec_reader *r;
	char err[64], *line;
	size_t len;
	long lineno;
	ssize_t n;

	saved = dup(2);
	dup2(fileno(fe), 2);
	rc = loop_run("unit", fdin, fileno(fo), NULL, handler, s);
	dup2(saved, 2);
	close(saved);
	close(fdin);
	lseek(fileno(fe), 0, SEEK_SET);
	n = read(fileno(fe), errbuf, errlen - 1);
	errbuf[n > 0 ? n : 0] = '\0';
	fclose(fe);
	lseek(fileno(fo), 0, SEEK_SET);
	r = rec_reader_new(fileno(fo), 0);
	while (i < nout - 1 && rec_next(r, &line, &len, &lineno) == REC_LINE)
		out[i++] = rec_parse(line, len, err, sizeof(err));
	out[i] = NULL;
	rec_reader_free(r);
	fclose(fo);
	return rc;
}

static void
outs_free(json_t **o)
{
	for (; *o != NULL; o++)
		json_decref(*o);
}

static void
test_loop(void)
{
	struct seen s;
	json_t *out[16];
	char err[1024];
	int rc;

	memset(&s, 0, sizeof(s));
	rc = loop("{\"id\":\"a\"}\nnot json\n\n[1]\n{\"id\":\"b\"}\n", &s,
	    out, 16, err, sizeof(err));
	is_long(rc, 0, "loop: returns 0 at EOF");
	is_long(s.n, 4, "loop: handler saw every non-empty line, bad ones dead");
	ok(s.lines[0] == 1 && s.lines[1] == 2 && s.lines[2] == 4 &&
	    s.lines[3] == 5, "loop: handler got line numbers 1, 2, 4 and 5");
	ok(out[0] && out[1] && out[2] && out[3] && !out[4],
	    "loop: one record out per non-empty line (4)");
	if (out[0] && out[1] && out[2] && out[3]) {
		is_long(rec_int(out[0], "seen", 0), 1, "loop: record 1 handled");
		is_str(rec_str(out[1], "dead_reason"), "bad_input",
		    "loop: bad JSON is dead bad_input");
		is_long(rec_int(out[1], "line", 0), 2,
		    "loop: bad JSON carries line 2");
		is_long(rec_int(out[2], "line", 0), 4,
		    "loop: a non-object carries line 4");
		is_long(rec_int(out[3], "seen", 0), 5, "loop: record 5 handled");
	}
	ok(strstr(err, "unit-view: line 2: malformed JSON") != NULL &&
	    strstr(err, "unit-view: line 4: record is not a JSON object") !=
	    NULL, "loop: one message per bad line, with its number");
	outs_free(out);

	memset(&s, 0, sizeof(s));
	s.mode = 1;
	loop("{\"id\":\"drop\"}\n{\"id\":\"keep\"}\n", &s, out, 16, err,
	    sizeof(err));
	ok(out[0] != NULL && out[1] == NULL &&
	    strcmp(rec_str(out[0], "id"), "keep") == 0,
	    "loop: a handler returning 1 writes nothing");
	outs_free(out);

	memset(&s, 0, sizeof(s));
	s.mode = -1;
	rc = loop("{}\n{}\n{}\n{}\n", &s, out, 16, err, sizeof(err));
	is_long(rc, -1, "loop: a fatal handler error returns -1");
	is_long(s.n, 3, "loop: and stops reading");
	outs_free(out);
}



int
main(void)
{
	msg_init("unit-view");
	test_text();
	test_fallback();
	test_agree();
	test_loop();
	return tap_done();
}
