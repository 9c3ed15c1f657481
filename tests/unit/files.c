/*
 * Unit tests of lib/state: run directory creation, flock'd updates, a
 * corrupt file that is reported and never reset, and the shared retry
 * budget spent by several processes at once.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/control/budget.h"
#include "lib/state/files.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/unit-state.XXXXXX";

static void
put(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");

	fputs(text, f);
	fclose(f);
}

/* The whole file as a string (static buffer). */
static const char *
get(const char *p)
{
	static char buf[4096];
	FILE *f = fopen(p, "r");
	size_t n = 0;

	buf[0] = '\0';
	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static int
mode_of(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static int
count_fn(json_t **doc, void *arg, char *err, size_t errlen)
{
	int *mode = arg;
	json_int_t n;

	(void)err;
	(void)errlen;
	if (*mode == 1)
		return 1;
	if (*mode == -1) {
		snprintf(err, errlen, "refused");
		return -1;
	}
	if (*doc == NULL)
		*doc = json_pack("{s:i, s:s}", "n", 0, "pad",
		    "a long value that makes the first version longer");
	n = json_integer_value(json_object_get(*doc, "n"));
	json_object_set_new(*doc, "n", json_integer(n + 1));
	if (n >= 1)
		json_object_del(*doc, "pad");	/* the file shrinks */
	return 0;
}

static void
test_mkdirs(void)
{
	char rd[300], p[400], err[512];
	const char *subs[] = { "state", "docs", "logs" };
	int i, good = 1;

	snprintf(rd, sizeof(rd), "%s/run", dir);
	ok(files_mkdirs(rd, err, sizeof(err)) == 0,
	    "mkdirs: makes the run directory");
	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", rd, subs[i]);
		if (mode_of(p) != 0700)
			good = 0;
	}
	ok(good && mode_of(rd) == 0700,
	    "mkdirs: run, state, docs and logs are mode 0700");
	ok(files_mkdirs(rd, err, sizeof(err)) == 0, "mkdirs: again is fine");
	snprintf(p, sizeof(p), "%s/file", dir);
	put(p, "x");
	snprintf(rd, sizeof(rd), "%s/file/run", dir);
	errno = 0;
	ok(files_mkdirs(rd, err, sizeof(err)) == -1 && errno == ENOTDIR,
	    "mkdirs: -1 with errno under a file");
}

/* Issue #24: the run directory is used only when it is ours. */
static void
test_trust(void)
{
	char rd[300], p[400], q[400], err[512];
	json_t *doc;
	int mode = 0;

	snprintf(rd, sizeof(rd), "%s/open", dir);
	mkdir(rd, 0777);
	chmod(rd, 0777);
	ok(files_mkdirs(rd, err, sizeof(err)) == -1 &&
	    strstr(err, "writable by others (mode 0777)") != NULL,
	    "mkdirs: a world-writable run directory is refused");
	chmod(rd, 0750);
	ok(files_mkdirs(rd, err, sizeof(err)) == 0,
	    "mkdirs: a run directory of ours, 0750, is accepted");
	snprintf(p, sizeof(p), "%s/docs", rd);
	chmod(p, 0770);
	ok(files_mkdirs(rd, err, sizeof(err)) == -1 &&
	    strstr(err, "/docs: writable by others") != NULL,
	    "mkdirs: so is a group-writable subdirectory");
	chmod(p, 0700);
	snprintf(rd, sizeof(rd), "%s/linked", dir);
	mkdir(rd, 0700);
	snprintf(p, sizeof(p), "%s/elsewhere", dir);
	mkdir(p, 0700);
	snprintf(q, sizeof(q), "%s/state", rd);
	symlink(p, q);
	ok(files_mkdirs(rd, err, sizeof(err)) == -1 &&
	    strstr(err, "/state: a symbolic link, never followed") != NULL,
	    "mkdirs: a symbolic link for state/ is refused as one");
	snprintf(p, sizeof(p), "%s/target", dir);
	put(p, "{}");
	snprintf(q, sizeof(q), "%s/run/state/planted.json", dir);
	symlink(p, q);
	ok(files_update(q, count_fn, &mode, err, sizeof(err)) == -1 &&
	    strcmp(get(p), "{}") == 0,
	    "update: a planted symbolic link is not written through");
	ok(files_read(q, &doc, err, sizeof(err)) == -1 && doc == NULL,
	    "read: nor read through");
	snprintf(q, sizeof(q), "%s/run/summary.json", dir);
	symlink(p, q);
	doc = json_pack("{s:i}", "n", 1);
	snprintf(p, sizeof(p), "%s/run/summary.json.1", dir);
	ok(files_dump(doc, q, p, JSON_COMPACT) == 0 &&
	    strcmp(get(q), "{\"n\":1}") == 0 && access(p, F_OK) == -1,
	    "dump: replaces a planted link with the file");
	snprintf(p, sizeof(p), "%s/target", dir);
	is_str(get(p), "{}", "dump: the link's target is as it was");
	json_decref(doc);
}

static void
test_update(void)
{
	char p[300], err[512];
	json_t *doc;
	int mode = 0, rc;

	snprintf(p, sizeof(p), "%s/run/state/x.json", dir);
	rc = files_update(p, count_fn, &mode, err, sizeof(err));
	ok(rc == 0 && strstr(get(p), "\"n\":1") != NULL,
	    "update: a new file gets the first content");
	ok(mode_of(p) == 0600, "update: a state file is mode 0600");
	rc = files_update(p, count_fn, &mode, err, sizeof(err));
	ok(rc == 0 && strcmp(get(p), "{\"n\":2}\n") == 0,
	    "update: a shorter rewrite leaves no stale tail");
	mode = 1;
	ok(files_update(p, count_fn, &mode, err, sizeof(err)) == 1 &&
	    strcmp(get(p), "{\"n\":2}\n") == 0, "update: 1 leaves the file");
	mode = -1;
	ok(files_update(p, count_fn, &mode, err, sizeof(err)) == -1 &&
	    strcmp(err, "refused") == 0 && strcmp(get(p), "{\"n\":2}\n") == 0,
	    "update: -1 passes the error on and leaves the file");

	ok(files_read(p, &doc, err, sizeof(err)) == 0 &&
	    json_integer_value(json_object_get(doc, "n")) == 2,
	    "read: the current object");
	json_decref(doc);
	snprintf(p, sizeof(p), "%s/run/state/absent.json", dir);
	doc = json_true();
	ok(files_read(p, &doc, err, sizeof(err)) == 0 && doc == NULL,
	    "read: an absent file is NULL, not an error");
	ok(access(p, F_OK) == -1, "read: does not create the file");

	snprintf(p, sizeof(p), "%s/run/state/empty.json", dir);
	put(p, "");
	mode = 0;
	ok(files_update(p, count_fn, &mode, err, sizeof(err)) == 0 &&
	    strstr(get(p), "\"n\":1") != NULL, "update: an empty file is new");
}

static void
test_corrupt(void)
{
	static const char *bad[] = { "garbage\n", "[1,2]\n", "{\"n\":\n",
		"\"str\"\n" };
	char p[300], err[512];
	json_t *doc;
	size_t i;
	int mode = 0;

	snprintf(p, sizeof(p), "%s/run/state/bad.json", dir);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(p, bad[i]);
		err[0] = '\0';
		ok(files_update(p, count_fn, &mode, err, sizeof(err)) == -1 &&
		    strstr(err, p) == err && strstr(err, "corrupt state file") &&
		    strchr(err, '\n') == NULL,
		    "corrupt: update refuses %zu and names the file: %s", i, err);
		ok(strcmp(get(p), bad[i]) == 0,
		    "corrupt: the file is left as it was");
		doc = NULL;
		ok(files_read(p, &doc, err, sizeof(err)) == -1 && doc == NULL,
		    "corrupt: read refuses it too");
	}
}

static void
test_budget(void)
{
	char rd[300], p[400], err[512];
	long left = -1, lefts[5];
	int rc[5], i;

	snprintf(rd, sizeof(rd), "%s/budget-run", dir);
	files_mkdirs(rd, NULL, 0);
	for (i = 0; i < 5; i++)
		rc[i] = budget_spend(rd, 3, &lefts[i], err, sizeof(err));
	ok(rc[0] == 1 && rc[1] == 1 && rc[2] == 1 && rc[3] == 0 && rc[4] == 0,
	    "budget: 3 granted, then none");
	ok(lefts[0] == 2 && lefts[1] == 1 && lefts[2] == 0 && lefts[3] == 0,
	    "budget: left counts down to 0");
	snprintf(p, sizeof(p), "%s/state/budget.json", rd);
	{
		json_error_t je;
		json_t *d = json_load_file(p, 0, &je);

		ok(json_integer_value(json_object_get(d, "total")) == 3 &&
		    json_integer_value(json_object_get(d, "left")) == 0,
		    "budget: the file says total 3, left 0");
		json_decref(d);
	}
	ok(budget_spend(rd, 100, &left, err, sizeof(err)) == 0,
	    "budget: a later process's total does not refill it");

	put(p, "garbage");
	ok(budget_spend(rd, 3, &left, err, sizeof(err)) == -1 &&
	    strstr(err, "budget.json") != NULL,
	    "budget: a corrupt file is an error naming it: %s", err);
	ok(strcmp(get(p), "garbage") == 0, "budget: and is never reset");
	put(p, "{\"total\":3,\"left\":5}\n");
	ok(budget_spend(rd, 3, &left, err, sizeof(err)) == -1 &&
	    strstr(err, "budget.json") != NULL,
	    "budget: left > total is corrupt");
	put(p, "{\"total\":3,\"left\":-1}\n");
	ok(budget_spend(rd, 3, &left, err, sizeof(err)) == -1,
	    "budget: a negative left is corrupt");
	put(p, "{\"total\":\"3\",\"left\":1}\n");
	ok(budget_spend(rd, 3, &left, err, sizeof(err)) == -1,
	    "budget: a string total is corrupt");
	ok(strcmp(get(p), "{\"total\":\"3\",\"left\":1}\n") == 0,
	    "budget: a corrupt file is left as it was");

	snprintf(rd, sizeof(rd), "%s/no-such-run", dir);
	ok(budget_spend(rd, 3, &left, err, sizeof(err)) == -1 &&
	    strstr(err, "open ") == err,
	    "budget: a missing run directory is an error: %s", err);
}

/* Four processes spend 100 each from one budget of 250. */
static void
test_concurrent(void)
{
	char rd[300], p[400], err[512];
	int fds[4][2], i, status, errors = 0;
	long total = 0, got, left;
	pid_t pid[4];

	snprintf(rd, sizeof(rd), "%s/race", dir);
	files_mkdirs(rd, NULL, 0);
	for (i = 0; i < 4; i++) {
		if (pipe(fds[i]) == -1)
			exit(2);
		if ((pid[i] = fork()) == 0) {
			long granted = 0, k;
			int rc;

			close(fds[i][0]);
			for (k = 0; k < 100; k++) {
				rc = budget_spend(rd, 250, &left, err,
				    sizeof(err));
				if (rc == -1)
					_exit(1);
				granted += rc;
			}
			(void)!write(fds[i][1], &granted, sizeof(granted));
			_exit(0);
		}
		close(fds[i][1]);
	}
	for (i = 0; i < 4; i++) {
		got = 0;
		if (read(fds[i][0], &got, sizeof(got)) != sizeof(got))
			errors++;
		close(fds[i][0]);
		waitpid(pid[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			errors++;
		total += got;
	}
	ok(errors == 0, "race: four processes ran without an error");
	ok(total == 250, "race: exactly 250 of 400 requests granted (%ld)",
	    total);
	snprintf(p, sizeof(p), "%s/state/budget.json", rd);
	ok(strcmp(get(p), "{\"total\":250,\"left\":0}\n") == 0,
	    "race: the file ends at left 0");
}

static void
rmtree(const char *p)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
	(void)!system(cmd);
}

/* files_whole_end: where the whole lines end, across its 4 KiB reads too. */
static void
test_whole_end(void)
{
	char p[64], big[9000];
	int fd;

	snprintf(p, sizeof(p), "%s/ends", dir);
	put(p, "");
	fd = open(p, O_RDONLY);
	ok(files_whole_end(fd) == 0, "whole_end: empty file");
	close(fd);
	put(p, "{\"a\":1}\n{\"b\"");
	fd = open(p, O_RDONLY);
	ok(files_whole_end(fd) == 8, "whole_end: before a torn last line");
	close(fd);
	put(p, "{\"a\":1}\n");
	fd = open(p, O_RDONLY);
	ok(files_whole_end(fd) == 8, "whole_end: a file that ends a line");
	close(fd);
	put(p, "torn, no newline at all");
	fd = open(p, O_RDONLY);
	ok(files_whole_end(fd) == 0, "whole_end: no newline at all");
	close(fd);
	/* The last newline 8000 bytes before the end: two reads back. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[998] = '\n';
	put(p, big);
	fd = open(p, O_RDONLY);
	ok(files_whole_end(fd) == 999, "whole_end: a torn line over 4 KiB");
	close(fd);
}

int
main(void)
{
	umask(022);
	if (mkdtemp(dir) == NULL)
		return 2;
	test_mkdirs();
	test_update();
	test_trust();
	test_corrupt();
	test_budget();
	test_concurrent();
	test_whole_end();
	rmtree(dir);
	return tap_done();
}
