/*
 * Unit tests of lib/rec: the capped line reader, rec_parse, the bad_input
 * record and field getters.  TAP on stdout.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "tests/unit/tap.h"

struct got {
	int	 n;
	char	*line[64];
	size_t	 len[64];
	long	 lineno[64];
	int	 rc[64];
	int	 end;		/* the rc that ended the read */
};

/* Read everything from fd with cap; record each line. */
static void
read_all(int fd, size_t cap, struct got *g)
{
	struct rec_reader *r = rec_reader_new(fd, cap);
	enum rec_rc rc;
	char *line;
	size_t len;
	long lineno;

	memset(g, 0, sizeof(*g));
	while ((rc = rec_next(r, &line, &len, &lineno)) == REC_LINE ||
	    rc == REC_TOOLONG) {
		if (g->n < 64) {
			g->line[g->n] = strndup(line, len);
			g->len[g->n] = len;
			g->lineno[g->n] = lineno;
			g->rc[g->n] = rc;
		}
		g->n++;
	}
	g->end = rc;
	rec_reader_free(r);
	close(fd);
}

static void
got_free(struct got *g)
{
	int i;

	for (i = 0; i < g->n && i < 64; i++)
		free(g->line[i]);
}

static void
test_basic(void)
{
	struct got g;

	read_all(tap_fd_of("a\nbb\n\nccc\n", 10), 0, &g);
	is_long(g.n, 4, "four lines, the empty one included");
	is_str(g.line[0], "a", "first line");
	is_str(g.line[1], "bb", "second line");
	is_long((long)g.len[2], 0, "empty line has length 0");
	is_long(g.lineno[2], 3, "empty line is line 3");
	is_str(g.line[3], "ccc", "line after an empty line");
	is_long(g.lineno[3], 4, "line numbers count every line");
	is_long(g.end, REC_EOF, "ends with REC_EOF");
	got_free(&g);

	read_all(tap_fd_of("a\r\nb\r\n", 6), 0, &g);
	is_long(g.n, 2, "CRLF: two lines");
	is_str(g.line[0], "a", "CRLF: CR stripped from line 1");
	is_long((long)g.len[1], 1, "CRLF: length excludes CR");
	got_free(&g);

	read_all(tap_fd_of("x\nlast", 6), 0, &g);
	is_long(g.n, 2, "last line without newline is returned");
	is_str(g.line[1], "last", "last line's text");
	is_long(g.lineno[1], 2, "last line's number");
	is_long(g.rc[1], REC_LINE, "last line is REC_LINE");
	got_free(&g);

	read_all(tap_fd_of("", 0), 0, &g);
	is_long(g.n, 0, "empty input: no line");
	is_long(g.end, REC_EOF, "empty input: REC_EOF");
	got_free(&g);

	read_all(tap_fd_of("only\n", 5), 0, &g);
	is_long(g.n, 1, "a single newline-terminated line: no phantom line");
	got_free(&g);
}

/*
 * rec_reader_at: each line read again from the file at its offset is the
 * line, after CR LF, an oversized line, an empty line, with lines cut
 * across reads (a 64 KiB buffer) and a last line without a newline.
 */
static void
test_at(void)
{
	static char buf[200000];
	struct rec_reader *r;
	enum rec_rc rc;
	char *line, back[64];
	size_t len, n = 0;
	long lineno, good = 0, bad = 0;
	int fd, i;

	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "a\r\n\nbb\n");
	memset(buf + n, 'x', 40);
	n += 40;
	buf[n++] = '\n';
	for (i = 0; n < sizeof(buf) - 64; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%d\n", i);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "end");
	fd = tap_fd_of(buf, n);
	r = rec_reader_new(fd, 32);
	while ((rc = rec_next(r, &line, &len, &lineno)) != REC_EOF) {
		if (rc != REC_LINE)
			continue;
		if (len >= sizeof(back) || pread(fd, back, len,
		    rec_reader_at(r)) != (ssize_t)len || memcmp(back, line,
		    len) != 0)
			bad++;
		else
			good++;
	}
	rec_reader_free(r);
	close(fd);
	is_long(bad, 0, "at: no line read again differs");
	is_long(good, 4 + i, "at: every line but the oversized one read again");
}

static void
test_cap(void)
{
	char buf[256];
	struct got g;
	size_t n;

	/* Exactly at the cap (16), then one over, then a good line. */
	n = (size_t)snprintf(buf, sizeof(buf), "%s\n%s\n%s\n",
	    "0123456789abcdef", "0123456789abcdefg", "ok");
	read_all(tap_fd_of(buf, n), 16, &g);
	is_long(g.n, 3, "cap: three lines");
	is_long(g.rc[0], REC_LINE, "cap: a line of exactly cap bytes is a line");
	is_long((long)g.len[0], 16, "cap: its length is cap");
	is_long(g.rc[1], REC_TOOLONG, "cap: cap+1 bytes is REC_TOOLONG");
	is_long(g.lineno[1], 2, "cap: the long line keeps its number");
	is_long(g.rc[2], REC_LINE, "cap: the next line reads normally");
	is_str(g.line[2], "ok", "cap: the next line's text");
	is_long(g.lineno[2], 3, "cap: the next line's number");
	got_free(&g);

	/* CRLF is not counted against the cap. */
	n = (size_t)snprintf(buf, sizeof(buf), "%s\r\n", "0123456789abcdef");
	read_all(tap_fd_of(buf, n), 16, &g);
	is_long(g.rc[0], REC_LINE, "cap: cap bytes plus CRLF is a line");
	got_free(&g);

	/* Over the cap and without a newline at EOF. */
	n = (size_t)snprintf(buf, sizeof(buf), "ok\n%s", "0123456789abcdefXYZ");
	read_all(tap_fd_of(buf, n), 16, &g);
	is_long(g.n, 2, "cap: long unterminated last line is reported");
	is_long(g.rc[1], REC_TOOLONG, "cap: ... as REC_TOOLONG");
	is_long(g.lineno[1], 2, "cap: ... with its line number");
	is_long(g.end, REC_EOF, "cap: then REC_EOF");
	got_free(&g);
}

static void
test_huge(void)
{
	size_t big = 300000, n = 0, i;
	char *s = malloc(big + 64);
	struct got g;

	/* A line far over the cap and over the buffer: skipped whole. */
	n += (size_t)sprintf(s + n, "first\n");
	n += (size_t)sprintf(s + n, "{\"id\":\"big1\",");
	for (i = 0; i < big; i++)
		s[n++] = 'x';
	s[n++] = '\n';
	n += (size_t)sprintf(s + n, "after\n");
	read_all(tap_fd_of(s, n), 1000, &g);
	is_long(g.n, 3, "huge: three lines");
	is_long(g.rc[1], REC_TOOLONG, "huge: the 300 kB line is too long");
	ok(g.len[1] >= 12 && memcmp(g.line[1], "{\"id\":\"big1\",", 12) == 0,
	    "huge: what is kept of it is its start, where its id is (%.12s)",
	    g.line[1]);
	is_str(g.line[2], "after", "huge: the line after it is intact");
	is_long(g.lineno[2], 3, "huge: and numbered 3");
	got_free(&g);

	/* The same line is fine under the default cap (1 MiB). */
	read_all(tap_fd_of(s, n), 0, &g);
	is_long(g.rc[1], REC_LINE, "huge: 300 kB is under REC_LINE_MAX");
	is_long((long)g.len[1], (long)big + 13, "huge: read whole");
	got_free(&g);
	free(s);
}

/* Many lines of varying length: every buffer boundary falls mid-line. */
static void
test_boundaries(void)
{
	size_t cap = 400000, n = 0;
	char *s = malloc(cap), *line;
	struct rec_reader *r;
	long i, lines = 3000, bad = 0, lineno;
	size_t len;
	enum rec_rc rc;

	for (i = 0; i < lines; i++) {
		long k, w = 17 + (i * 37) % 101;

		n += (size_t)sprintf(s + n, "%ld:", i);
		for (k = 0; k < w; k++)
			s[n++] = (char)('a' + (i + k) % 26);
		s[n++] = i % 7 == 0 ? '\r' : 'z';
		s[n++] = '\n';
	}
	r = rec_reader_new(tap_fd_of(s, n), 0);
	for (i = 0; (rc = rec_next(r, &line, &len, &lineno)) == REC_LINE;
	    i++) {
		char want[16];
		int wl = snprintf(want, sizeof(want), "%ld:", i);
		long w = 17 + (i * 37) % 101;

		if (lineno != i + 1 || strncmp(line, want, (size_t)wl) != 0 ||
		    (long)len != wl + w + (i % 7 == 0 ? 0 : 1) ||
		    strlen(line) != len)
			bad++;
	}
	ok(rc == REC_EOF && i == lines && bad == 0,
	    "boundaries: %ld lines over %zu bytes read back intact", lines, n);
	if (bad || i != lines)
		printf("#   read %ld lines, %ld wrong\n", i, bad);
	rec_reader_free(r);
	free(s);
}

/* The same through a pipe written in odd-sized pieces by a child. */
static void
test_pipe_chunks(void)
{
	int p[2], status;
	pid_t pid;
	struct rec_reader *r;
	char *line;
	size_t len;
	long lineno, i = 0, bad = 0;
	enum rec_rc rc;

	if (pipe(p) == -1)
		exit(2);
	if ((pid = fork()) == 0) {
		char buf[200000];
		size_t n = 0, off = 0, step = 1;

		close(p[0]);
		for (i = 0; i < 5000; i++)
			n += (size_t)sprintf(buf + n, "{\"n\":%ld}\n", i);
		while (off < n) {
			size_t k = step < n - off ? step : n - off;

			if (write(p[1], buf + off, k) != (ssize_t)k)
				_exit(1);
			off += k;
			step = step * 7 % 4093 + 1;
		}
		_exit(0);
	}
	close(p[1]);
	r = rec_reader_new(p[0], 0);
	while ((rc = rec_next(r, &line, &len, &lineno)) == REC_LINE) {
		char want[32];

		snprintf(want, sizeof(want), "{\"n\":%ld}", i);
		if (strcmp(line, want) != 0 || lineno != i + 1)
			bad++;
		i++;
	}
	waitpid(pid, &status, 0);
	ok(rc == REC_EOF && i == 5000 && bad == 0,
	    "pipe: 5000 lines written in odd pieces read back in order");
	rec_reader_free(r);
	close(p[0]);
}

static void
test_nonblock(void)
{
	int p[2];
	struct rec_reader *r;
	char *line;
	size_t len;
	long lineno;
	enum rec_rc rc;

	if (pipe(p) == -1)
		exit(2);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	r = rec_reader_new(p[0], 0);
	(void)!write(p[1], "abc", 3);
	rc = rec_next(r, &line, &len, &lineno);
	is_long(rc, REC_AGAIN, "nonblock: a partial line is REC_AGAIN");
	(void)!write(p[1], "def\nxy", 6);
	rc = rec_next(r, &line, &len, &lineno);
	ok(rc == REC_LINE && strcmp(line, "abcdef") == 0 && lineno == 1,
	    "nonblock: the completed line is whole");
	rc = rec_next(r, &line, &len, &lineno);
	is_long(rc, REC_AGAIN, "nonblock: the next partial is REC_AGAIN");
	close(p[1]);
	rc = rec_next(r, &line, &len, &lineno);
	ok(rc == REC_LINE && strcmp(line, "xy") == 0 && lineno == 2,
	    "nonblock: the unterminated tail comes out at EOF");
	is_long(rec_next(r, &line, &len, &lineno), REC_EOF,
	    "nonblock: then REC_EOF");
	rec_reader_free(r);
	close(p[0]);
}

static void
test_parse(void)
{
	static const struct {
		const char *in, *err;
	} bad[] = {
		{ "", "malformed JSON" },
		{ "{", "malformed JSON" },
		{ "{\"a\":}", "malformed JSON" },
		{ "[1,2]", "record is not a JSON object" },
		{ "1", "" },
		{ "\"s\"", "" },
		{ "null", "" },
		{ "{\"a\":1,\"a\":2}", "malformed JSON" },
		{ "{\"a\":1} {\"b\":2}", "malformed JSON" },
		{ "{\"a\":\"\\u0000\"}", "malformed JSON" },
		{ "{\"a\":\"\xff\"}", "malformed JSON" },
	};
	char err[256];
	json_t *v;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		v = rec_parse(bad[i].in, strlen(bad[i].in), err, sizeof(err));
		ok(v == NULL && err[0] != '\0' &&
		    strstr(err, bad[i].err) != NULL && strchr(err, '\n') ==
		    NULL, "rec_parse rejects '%s' (%s)", bad[i].in, err);
		json_decref(v);
	}
	v = rec_parse("{\"id\":\"a\",\"n\":2}", 16, err, sizeof(err));
	ok(json_is_object(v) && json_object_size(v) == 2,
	    "rec_parse accepts an object");
	json_decref(v);
	/* The length bounds the parse: trailing bytes are not read. */
	v = rec_parse("{\"a\":1}garbage", 7, err, sizeof(err));
	ok(json_is_object(v), "rec_parse honours len");
	ok(rec_parse("{\"id\":\"\xc3\xa9\xc3\xa9\xc3\xa9\0\"}", 17, err,
	    sizeof(err)) == NULL && strstr(err, "column 11: a NUL byte") != NULL,
	    "rec_parse: a NUL's column in characters, as jansson counts");
	json_decref(v);
	ok(strstr((rec_parse("{\"a\":", 5, err, sizeof(err)), err),
	    "column") != NULL, "rec_parse error names the column");
}

static void
test_bad_input(void)
{
	char line[300];
	json_t *r;

	r = rec_bad_input("rfp-x", 12, "missing field \"url\"", "{\"id\":1}",
	    8);
	is_str(rec_str(r, "fate"), "dead", "bad_input: fate dead");
	is_str(rec_str(r, "dead_reason"), "bad_input", "bad_input: reason");
	is_long(rec_int(r, "line", 0), 12, "bad_input: line number");
	is_str(rec_str(r, "stage"), "rfp-x", "bad_input: stage");
	is_str(rec_str(r, "raw"), "{\"id\":1}", "bad_input: raw line kept");
	is_str(rec_str(r, "dead_detail"), "missing field \"url\"",
	    "bad_input: detail");
	ok(json_is_null(json_object_get(r, "id")), "bad_input: id null");
	json_decref(r);

	memset(line, 'a', sizeof(line));
	r = rec_bad_input("s", 1, "x", line, sizeof(line));
	is_long((long)strlen(rec_str(r, "raw")), 200,
	    "bad_input: raw cut to 200 bytes");
	json_decref(r);

	r = rec_bad_input("s", 1, "x", "a\xff\xfe" "b", 4);
	is_str(rec_str(r, "raw"), "a??b", "bad_input: invalid UTF-8 made ASCII");
	json_decref(r);

	/* A cut inside a two-byte character must not lose the record. */
	memset(line, 'a', 199);
	memcpy(line + 199, "\xc3\xa9", 2);
	r = rec_bad_input("s", 1, "x", line, 201);
	ok(json_is_string(json_object_get(r, "raw")),
	    "bad_input: a cut character still gives a raw string");
	json_decref(r);
}

/* Texts made UTF-8 for a JSON string: cut on a character, bad bytes '?'. */
static void
test_utf8(void)
{
	char s[32];
	json_t *v, *r;

	/* "a" then e-acute (2 bytes), euro (3), G clef (4). */
	is_long((long)rec_utf8_prefix("a\xc3\xa9", 2), 1,
	    "utf8_prefix: never half a 2-byte character");
	is_long((long)rec_utf8_prefix("a\xc3\xa9", 3), 3,
	    "utf8_prefix: a whole one fits");
	is_long((long)rec_utf8_prefix("\xe2\x82\xac\xf0\x9d\x84\x9e", 6), 3,
	    "utf8_prefix: never part of a 4-byte character");
	is_long((long)rec_utf8_prefix("ab\xff" "cd", 4), 4,
	    "utf8_prefix: a byte that is not UTF-8 counts as one");
	is_long((long)rec_utf8_prefix("abc", 60), 3,
	    "utf8_prefix: a short text whole");

	snprintf(s, sizeof(s), "%s", "x\xff\xc3\xa9\xc3\xed\xa0\x80\xc0\xaf");
	rec_utf8_fix(s);
	is_str(s, "x?\xc3\xa9??????", "utf8_fix: stray, cut, surrogate and "
	    "overlong bytes made '?', a whole character kept");

	v = rec_jstring("text/html; charset=\xff");
	is_str(json_string_value(v), "text/html; charset=?",
	    "jstring: a portal's 0xff byte gives a string, not NULL");
	json_decref(v);
	v = rec_jstring("caf\xc3\xa9");
	is_str(json_string_value(v), "caf\xc3\xa9", "jstring: UTF-8 as it is");
	json_decref(v);
	ok(rec_jstring(NULL) == NULL, "jstring: NULL for NULL");

	r = json_object();
	rec_kill(r, FATE_BAD_INPUT, "field \"x\": \"\xc3\"");
	is_str(rec_str(r, "dead_detail"), "field \"x\": \"?\"",
	    "rec_kill: a detail cut inside a character is kept");
	json_decref(r);
}

static void
test_getters_and_write(void)
{
	json_t *r = json_pack("{s:s, s:i, s:f, s:s, s:n}", "s", "str", "i", 7,
	    "f", 1.5, "is", "8", "nul");
	struct rec_out *o;
	char *s;
	size_t len;
	FILE *f;
	char buf[256];
	ssize_t n;
	int fd;

	is_str(rec_str(r, "s"), "str", "rec_str: a string");
	ok(rec_str(r, "i") == NULL, "rec_str: NULL for a number");
	ok(rec_str(r, "none") == NULL, "rec_str: NULL when absent");
	is_long(rec_int(r, "i", -1), 7, "rec_int: an integer");
	is_long(rec_int(r, "is", -1), -1, "rec_int: default for a string");
	is_long(rec_int(r, "f", -1), -1, "rec_int: default for a real");
	ok(rec_num(r, "f", -1) == 1.5, "rec_num: a real");
	ok(rec_num(r, "i", -1) == 7, "rec_num: an integer");
	ok(rec_num(r, "nul", -1) == -1, "rec_num: default for null");

	s = rec_dump(r, &len);
	ok(s != NULL && len == strlen(s) && s[len - 1] == '\n' &&
	    strchr(s, '\n') == s + len - 1, "rec_dump: one line ending in \\n");
	free(s);

	f = tmpfile();
	fd = fileno(f);
	o = rec_out_new(fd);
	is_long(rec_out_json(o, r), 0, "rec_out_json: returns 0");
	is_long(rec_out_flush(o), 0, "rec_out_flush: returns 0");
	rec_out_free(o);
	lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	ok(n > 0 && buf[n - 1] == '\n' && strchr(buf, '\n') == buf + n - 1,
	    "rec_out_json: wrote one whole line");
	fclose(f);
	o = rec_out_new(-1);
	ok(rec_out_json(o, r) == 0 && rec_out_flush(o) == -1 &&
	    errno == EBADF, "rec_out_flush: -1 with errno on a bad fd");
	rec_out_free(o);

	rec_kill(r, FATE_PERMANENT, NULL);
	ok(json_object_get(r, "dead_detail") == NULL &&
	    strcmp(rec_str(r, "dead_reason"), "permanent") == 0,
	    "rec_kill: NULL detail adds no dead_detail");
	json_decref(r);
}

/* What the drain hook saw. */
struct drained {
	int	 calls;
	int	 lines_then;	/* lines read when it was first called */
	int	*lines;
	int	 fail_at;	/* return -1 on this call; 0: never */
};

static int
drain_count(void *arg)
{
	struct drained *d = arg;

	if (++d->calls == 1)
		d->lines_then = *d->lines;
	return d->calls == d->fail_at ? -1 : 0;
}

static void
test_drain(void)
{
	struct rec_reader *r;
	struct drained d;
	enum rec_rc rc;
	char *line;
	size_t len;
	long lineno;
	int n = 0;

	memset(&d, 0, sizeof(d));
	d.lines = &n;
	r = rec_reader_new(tap_fd_of("a\nb\nc\n", 6), 0);
	rec_reader_drain(r, drain_count, &d);
	while ((rc = rec_next(r, &line, &len, &lineno)) == REC_LINE)
		n++;
	ok(rc == REC_EOF && n == 3, "drain: the lines still come (%d)", n);
	ok(d.calls >= 2 && d.lines_then == 0,
	    "drain: called before the first read and before the read that "
	    "finds EOF (%d calls)", d.calls);
	rec_reader_free(r);

	memset(&d, 0, sizeof(d));
	d.lines = &n;
	d.fail_at = 1;
	n = 0;
	r = rec_reader_new(tap_fd_of("a\nb\n", 4), 0);
	rec_reader_drain(r, drain_count, &d);
	ok(rec_next(r, &line, &len, &lineno) == REC_ERR,
	    "drain: its failure stops the reader before it reads");
	rec_reader_free(r);
}
/* Records text of n records of len bytes each (the newline included). */
static char *
records(int n, size_t len)
{
	char *s = malloc((size_t)n * len + 1);
	int i;

	for (i = 0; i < n; i++) {
		memset(s + (size_t)i * len, 'x', len - 1);
		s[(size_t)(i + 1) * len - 1] = '\n';
	}
	s[(size_t)n * len] = '\0';
	return s;
}

/* rec_piece: whole records, at most PIPE_BUF, or one record alone. */
static void
test_piece(void)
{
	char *s = records(40, 500), *big = records(2, 3 * PIPE_BUF);
	struct rec_out *o;

	ok(rec_piece(s, 300) == 300, "piece: under PIPE_BUF, all of it");
	ok(rec_piece(s, 40 * 500) == (PIPE_BUF / 500) * 500,
	    "piece: the whole records that fit in PIPE_BUF (%zu)",
	    rec_piece(s, 40 * 500));
	ok(rec_piece(s, PIPE_BUF) == PIPE_BUF,
	    "piece: exactly PIPE_BUF, all of it");
	ok(rec_piece(big, 6 * PIPE_BUF) == 3 * PIPE_BUF,
	    "piece: a record longer than PIPE_BUF goes alone, whole");
	ok(rec_piece(s + 100, 40 * 500 - 100) == (PIPE_BUF / 500) * 500 - 100,
	    "piece: from mid-record, its end and the records that fit");
	memset(big, 'y', 2 * PIPE_BUF);
	ok(rec_piece(big, 2 * PIPE_BUF) == 2 * PIPE_BUF,
	    "piece: no newline at all, everything");
	o = rec_out_new(-1);
	ok(rec_out_fits(o, PIPE_BUF) && !rec_out_fits(o, PIPE_BUF + 1),
	    "out_fits: an empty buffer takes PIPE_BUF bytes, not one more");
	ok(rec_out_put(o, s, 500) == 0 && rec_out_fits(o, PIPE_BUF - 500) &&
	    !rec_out_fits(o, PIPE_BUF - 499),
	    "out_fits: counts what is gathered");
	rec_out_free(o);
	free(s);
	free(big);
}

/* rec_dump against json_dumps(JSON_COMPACT), on what is hard to write. */
static void
test_dump_same(void)
{
	static const double reals[] = { 0.0, -0.0, 1.5, -2.25, 100.0, 1e21,
	    1e22, 1e300, -1e-300, 5e-324, 1.7976931348623157e308, 0.1,
	    1795990507.000002, 1795990507.6903129, 123456789012345678.0,
	    1e-5, 1e5, 1e-7, 3.0e15, 2.5e-10 };
	static const json_int_t ints[] = { 0, -1, 1, 9223372036854775807LL,
	    -9223372036854775807LL - 1, 1000000 };
	json_t *r = json_object(), *a = json_array(), *o = json_object();
	char ctl[40], key[8], *j, *s;
	size_t i, len;
	int same = 1;

	for (i = 0; i < 32; i++)
		ctl[i] = (char)i;
	memcpy(ctl + 32, "\"\\/\x7f\xc3\xa9\xe2\x80", 8);
	json_object_set_new(r, "ctl", json_stringn(ctl, 32));
	json_object_set_new(r, "mix", json_string("a\"b\\c/d\x7f e\xc3\xa9 "
	    "\xe2\x80\xa8 \xf0\x9f\x98\x80"));
	json_object_setn_new(r, "k\0ey\n\"", 7, json_string(""));
	for (i = 0; i < sizeof(reals) / sizeof(reals[0]); i++)
		json_array_append_new(a, json_real(reals[i]));
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		json_array_append_new(a, json_integer(ints[i]));
	json_array_append_new(a, json_true());
	json_array_append_new(a, json_false());
	json_array_append_new(a, json_null());
	json_array_append_new(a, json_array());
	json_array_append_new(a, json_object());
	json_object_set_new(o, "nested", json_pack("{s:[i,{s:f}]}", "x", 1,
	    "y", 0.5));
	json_object_set_new(r, "arr", a);
	json_object_set_new(r, "obj", o);
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%zu", i);
		json_object_set_new(r, key, json_integer((json_int_t)i));
	}
	j = json_dumps(r, JSON_COMPACT);
	s = rec_dump(r, &len);
	if (j == NULL || s == NULL || strlen(j) + 1 != len ||
	    memcmp(j, s, len - 1) != 0)
		same = 0;
	ok(same, "rec_dump: byte for byte json_dumps's text");
	if (!same && j != NULL && s != NULL)
		fprintf(stderr, "# jansson: %s\n# rec_dump: %s", j, s);
	for (i = 0; same && i < sizeof(reals) / sizeof(reals[0]); i++) {
		json_t *v = json_real(reals[i]);
		char *jv = json_dumps(v, JSON_ENCODE_ANY), *sv;
		json_t *w = json_pack("{s:o}", "v", v);

		sv = rec_dump(w, &len);
		if (jv == NULL || sv == NULL || strncmp(sv + 5, jv,
		    strlen(jv)) != 0)
			same = 0;
		free(jv);
		free(sv);
		json_decref(w);
	}
	ok(same, "rec_dump: every real as jansson writes it");
	free(j);
	free(s);
	json_decref(r);
}

/*
 * rec_put and its kin against json_dumps(JSON_COMPACT | REAL_PRECISION):
 * the same values written by hand, the same bytes, at 13 digits (the
 * attempt log's) and at jansson's 17.
 */
static void
test_put_same(void)
{
	static const double reals[] = { 0.0, -0.0, 1.5, 100.0, 1e21, 1e22,
	    -1e-300, 5e-324, 0.1, 1795990507.000002, 1795990507.6903129,
	    1796433834.7275, 123456789012345678.0, 1e-5, 1e5, 1e-7, 2.5e-10,
	    20.000000000001, 0.95 * 50 };
	static const int precs[] = { 13, 17, 0, 1, 18, 31 };
	static const char *const strs[] = { "", "doc-1", "a\"b\\c/d\x7f",
	    "\x01\x1f\n\t\r\b\f", "\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80" };
	struct rec_buf b = { 0 };
	json_t *o, *v;
	char *j, key[16];
	size_t i, k;
	int same = 1, ok1;

	for (k = 0; k < sizeof(precs) / sizeof(precs[0]); k++) {
		ok1 = 1;
		o = json_object();
		b.len = 0;
		rec_puts(&b, "{");
		for (i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
			snprintf(key, sizeof(key), "r%zu", i);
			json_object_set_new(o, key, json_real(reals[i]));
			rec_put(&b, i ? ",\"" : "\"", i ? 2 : 1);
			rec_put(&b, key, strlen(key));
			rec_puts(&b, "\":");
			rec_put_real(&b, reals[i], precs[k]);
		}
		for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
			snprintf(key, sizeof(key), "s%zu", i);
			json_object_set_new(o, key, json_string(strs[i]));
			rec_puts(&b, ",");
			rec_put_str(&b, key);
			rec_puts(&b, ":");
			rec_put_str(&b, strs[i]);
		}
		json_object_set_new(o, "i", json_integer(-9223372036854775807LL
		    - 1));
		rec_puts(&b, ",\"i\":");
		rec_put_int(&b, -9223372036854775807LL - 1);
		v = json_pack("{s:[f,i,n,b],s:{}}", "a", 0.1, 7, 1, "e");
		json_object_set(o, "v", v);
		rec_puts(&b, ",\"v\":");
		if (rec_put_val(&b, v, precs[k]) == -1)
			ok1 = 0;
		json_decref(v);
		rec_puts(&b, "}");
		j = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER |
		    JSON_REAL_PRECISION(precs[k]));
		if (j == NULL || strlen(j) != b.len || memcmp(j, b.s, b.len))
			ok1 = 0;
		/* Only the precision that differs, said once. */
		if (!ok1 && j != NULL)
			fprintf(stderr, "# prec %d\n# jansson: %s\n# rec_put: "
			    "%.*s\n", precs[k], j, (int)b.len, b.s);
		same &= ok1;
		free(j);
		json_decref(o);
	}
	ok(same, "rec_put: byte for byte json_dumps's text, at 1 to 31 "
	    "digits");
	/* Deeper than jansson parses (2,048 levels): nothing added. */
	v = json_array();
	for (o = v, i = 0; i < 2100; i++) {
		json_t *in = json_array();

		json_array_append_new(o, in);
		o = in;
	}
	b.len = 3;
	ok(rec_put_val(&b, v, 13) == -1 && b.len == 3, "rec_put_val: a "
	    "value nested past jansson's limit adds nothing");
	json_decref(v);
	free(b.s);
}

/* What would move a terminal is one '?' each; the rest is kept. */
static void
test_tty(void)
{
	char s[64];

	ok(rec_tty_bad("\x1b[31m") == 1 && rec_tty_bad("\x7f") == 1 &&
	    rec_tty_bad("\n") == 1, "tty: C0 and DEL, one byte");
	ok(rec_tty_bad("\xc2\x9b") == 2 && rec_tty_bad("\xc2\x80") == 2 &&
	    rec_tty_bad("\xc2\x9f") == 2, "tty: C1 (a CSI among them), two");
	ok(rec_tty_bad("\xe2\x80\xae") == 3 && rec_tty_bad("\xe2\x80\xaa") ==
	    3 && rec_tty_bad("\xe2\x81\xa6") == 3 &&
	    rec_tty_bad("\xe2\x81\xa9") == 3, "tty: bidi overrides, isolates");
	ok(rec_tty_bad("") == 0 && rec_tty_bad("a") == 0 &&
	    rec_tty_bad("\xc2\xa0") == 0 && rec_tty_bad("\xc3\xa9") == 0 &&
	    rec_tty_bad("\xe2\x80\xa9") == 0 && rec_tty_bad("\xe2\x80\xaf") ==
	    0 && rec_tty_bad("\xe2\x81\xa5") == 0 && rec_tty_bad("\xe2\x81\xaa")
	    == 0 && rec_tty_bad("\xc2") == 0 && rec_tty_bad("\xe2\x80") == 0,
	    "tty: text, its neighbours and a cut sequence are not");
	snprintf(s, sizeof(s), "a\xe2\x80\xae" "b\x1b" "c\xc2\x85" "d\xc3\xa9");
	is_str(rec_shown(s), "a?b?c?d\xc3\xa9", "tty: rec_shown, one ? each");
}

int
main(void)
{
	test_tty();
	msg_init("unit-rec");
	test_dump_same();
	test_put_same();
	test_basic();
	test_cap();
	test_at();
	test_huge();
	test_boundaries();
	test_pipe_chunks();
	test_nonblock();
	test_parse();
	test_bad_input();
	test_utf8();
	test_getters_and_write();
	test_drain();
	test_piece();
	return tap_done();
}
