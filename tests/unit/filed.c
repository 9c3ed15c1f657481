/*
 * Unit tests of lib/accounts/filed: how an id stands after results and
 * letters, the line keys, a torn or unreadable line passed over, a run
 * directory or files that are not there, reading on from where the last
 * read ended, and a file replaced.  TAP on stdout.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/accounts/filed.h"
#include "lib/base/x.h"
#include "lib/record/rec.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/unit-filed.XXXXXX";
static long torn, unreadable;

/* dir/name, in one of two buffers that take turns. */
static const char *
at(const char *name)
{
	static char path[2][256];
	static int i;

	i = !i;
	snprintf(path[i], sizeof(path[i]), "%s/%s", dir, name);
	return path[i];
}

static void
put(const char *name, const char *text, int append)
{
	const char *path = at(name);
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC),
	    0600);
	if (fd == -1 || write(fd, text, strlen(text)) !=
	    (ssize_t)strlen(text)) {
		perror(path);
		exit(2);
	}
	close(fd);
}

static void
skipped(const char *path, long lineno, int is_torn, void *arg)
{
	(void)path;
	(void)arg;
	*(is_torn ? &torn : &unreadable) += lineno;
}

/* The record of id, as filed_record reads it again, or "(none)". */
static void
record_is(struct filed *f, const char *id, const char *want,
    const char *name)
{
	size_t len = 0;
	char *got = filed_record(f, id, &len);

	is_str(got != NULL ? got : "(none)", want, name);
	if (got != NULL)
		ok(len == strlen(got), "%s: its length", name);
	free(got);
}

static int
read_ok(struct filed *f)
{
	char err[256];

	torn = unreadable = 0;
	if (filed_read(f, skipped, NULL, err, sizeof(err)) == -1) {
		printf("# %s\n", err);
		return 0;
	}
	return 1;
}

static void
test_standing(void)
{
	struct filed *f;

	put("results.ndjson", "{\"id\":\"a\",\"fate\":\"done\",\"n\":1}\n"
	    "not json\n"
	    "{\"id\":\"b\",\"fate\":\"done\"}\n", 0);
	put("dead.ndjson", "{\"id\":\"b\",\"fate\":\"dead\","
	    "\"dead_reason\":\"permanent\"}\n"
	    "{\"id\":\"c\",\"fate\":\"dead\",\"dead_reason\":\"quota\"}\n"
	    "{\"id\":\"c\",\"fate\":\"dead\",\"dead_reason\":\"permanent\"}\n"
	    "{\"id\":\"c\",\"fate\":\"dead\","
	    "\"dead_reason\":\"deadline_cut\"}\n"
	    "{\"id\":\"d\",\"fate\":\"dead\","
	    "\"dead_reason\":\"deadline_cut\"}\n"
	    "{\"id\":\"e\",\"fate\":\"dead\",\"dead_reason\":\"bad_input\","
	    "\"line_key\":\"k.1\"}\n"
	    "{\"id\":\"x\",\"fate\":\"done\"", 0);
	f = filed_new(dir, 0);
	ok(read_ok(f), "read");
	is_long(unreadable, 2, "the unreadable line, by its number");
	is_long(torn, 7, "the torn last line, by its number");
	is_long(filed_as(f, "a"), FILED_DONE, "a result is done");
	is_long(filed_as(f, "b"), FILED_DONE, "a letter after a result: done");
	is_long(filed_as(f, "c"), FILED_DEAD, "letters, the last a cut: dead");
	is_long(filed_as(f, "d"), FILED_CUT, "a cut alone is a cut");
	is_long(filed_as(f, "e"), FILED_NOT, "a keyed letter is not its id's");
	ok(filed_keyed(f, "k.1") && !filed_keyed(f, "k.2"), "its key is known");
	is_long(filed_as(f, "x"), FILED_NOT, "a torn last line files nothing");
	is_long(filed_as(f, NULL), FILED_NOT, "no id: not filed");
	record_is(f, "a", "{\"id\":\"a\",\"fate\":\"done\",\"n\":1}",
	    "a result's record");
	record_is(f, "b", "{\"id\":\"b\",\"fate\":\"done\"}",
	    "the result, not the letter");
	record_is(f, "c", "{\"id\":\"c\",\"fate\":\"dead\","
	    "\"dead_reason\":\"permanent\"}", "the last letter but the cut");
	record_is(f, "d", "{\"id\":\"d\",\"fate\":\"dead\","
	    "\"dead_reason\":\"deadline_cut\"}", "a cut's letter, its record");
	record_is(f, "zz", "(none)", "an id in neither file has none");
	ok(!filed_changed(f), "unchanged");

	/* The torn line ended, a line added: read on from there. */
	put("dead.ndjson", "}\n{\"id\":\"d\",\"fate\":\"done\"}\n", 1);
	put("results.ndjson", "{\"id\":\"d\",\"fate\":\"done\",\"n\":2}\n", 1);
	ok(filed_changed(f), "grown: changed");
	ok(read_ok(f), "read again");
	is_long(torn + unreadable, 0, "what was read is not read again");
	is_long(filed_as(f, "x"), FILED_DEAD, "the torn line, whole, files x");
	is_long(filed_as(f, "d"), FILED_DONE, "a result after a cut: done");
	record_is(f, "d", "{\"id\":\"d\",\"fate\":\"done\",\"n\":2}",
	    "its record read on");
	record_is(f, "a", "{\"id\":\"a\",\"fate\":\"done\",\"n\":1}",
	    "the first read's records stand");

	/* dead.ndjson compacted: a new file renamed into place. */
	put("dead.new", "{\"id\":\"c\",\"fate\":\"dead\","
	    "\"dead_reason\":\"quota\"}\n", 0);
	ok(rename(at("dead.new"), at("dead.ndjson")) == 0, "replaced");
	ok(filed_changed(f), "replaced: changed");
	ok(read_ok(f), "read the new file");
	is_long(filed_as(f, "x"), FILED_NOT, "what the old file said is gone");
	record_is(f, "c", "{\"id\":\"c\",\"fate\":\"dead\","
	    "\"dead_reason\":\"quota\"}", "the new file's record");
	is_long(filed_as(f, "a"), FILED_DONE, "results.ndjson read again");
	filed_free(f);

	f = filed_new(dir, 1);
	ok(read_ok(f), "results only");
	is_long(filed_as(f, "c"), FILED_NOT, "results only: no letter read");
	is_long(filed_as(f, "a"), FILED_DONE, "results only: a result is");
	filed_free(f);
}

static void
test_missing(void)
{
	char err[256];
	struct filed *f;

	f = filed_new("/nonexistent/run", 0);
	ok(filed_read(f, skipped, NULL, err, sizeof(err)) == 0,
	    "no run directory: read, nothing filed");
	is_long(filed_as(f, "a"), FILED_NOT, "no run directory: a not filed");
	ok(!filed_changed(f), "no run directory: unchanged");
	filed_free(f);

	unlink(at("results.ndjson"));
	unlink(at("dead.ndjson"));
	f = filed_new(dir, 0);
	ok(read_ok(f), "no files: read");
	is_long(filed_as(f, "a"), FILED_NOT, "no files: nothing filed");
	put("results.ndjson", "{\"id\":\"a\"}\n", 0);
	ok(filed_changed(f), "a file made since: changed");
	ok(read_ok(f) && filed_as(f, "a") == FILED_DONE, "and read");
	filed_free(f);

	if (mkfifo(at("dead.ndjson"), 0600) == -1) {
		perror("mkfifo");
		exit(2);
	}
	f = filed_new(dir, 0);
	ok(filed_read(f, skipped, NULL, err, sizeof(err)) == -1,
	    "a FIFO: an error, never waited on");
	ok(strstr(err, "open ") == err && strstr(err, ": not a regular file"),
	    "a FIFO: the error says so");
	filed_free(f);
	unlink(at("dead.ndjson"));
	unlink(at("results.ndjson"));
}

/* A line too long to be a record is passed over, said, and the rest read. */
static void
test_toolong(void)
{
	struct filed *f;
	size_t n = REC_STREAM_MAX + 16;
	char *big = xmalloc(n + 2);

	memset(big, 'x', n);
	memcpy(big, "{\"id\":\"big\",\"pad\":\"", 19);
	big[n] = '\n';
	big[n + 1] = '\0';
	put("results.ndjson", "{\"id\":\"a\",\"fate\":\"done\"}\n", 0);
	put("results.ndjson", big, 1);
	put("results.ndjson", "{\"id\":\"b\",\"fate\":\"done\"}\n", 1);
	free(big);
	unlink(at("dead.ndjson"));
	f = filed_new(dir, 0);
	ok(read_ok(f), "a line too long: read");
	is_long(unreadable, 2, "the line too long is passed over, by number");
	is_long(filed_as(f, "big"), FILED_NOT, "it files nothing");
	is_long(filed_as(f, "b"), FILED_DONE, "the line after it is read");
	filed_free(f);
	unlink(at("results.ndjson"));
}

int
main(void)
{
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	test_standing();
	test_missing();
	test_toolong();
	rmdir(dir);
	return tap_done();
}
