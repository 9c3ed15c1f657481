/*
 * Unit tests of short and failing writes (issue #24): rec_write_all goes
 * on through a write(2) that takes a few bytes at a time, and the ledger
 * reports the errno of the write that failed (ENOSPC), not a stale one.
 * write(2) is replaced here; "real" is the system call.
 */
#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/attlog.h"
#include "lib/accounts/ledger.h"
#include "lib/record/rec.h"
#include "lib/state/files.h"
#include "tests/unit/tap.h"

static size_t chunk;	/* > 0: write at most this much a call */
static long budget = -1;	/* >= 0: bytes left before ENOSPC */

ssize_t
write(int fd, const void *buf, size_t n)
{
	if (chunk > 0 && n > chunk)
		n = chunk;
	if (budget >= 0) {
		if (budget == 0) {
			errno = ENOSPC;
			return -1;
		}
		if ((long)n > budget)
			n = (size_t)budget;
		budget -= (long)n;
	}
	return syscall(SYS_write, fd, buf, n);
}

static const char *
slurp(const char *path)
{
	static char buf[8192];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd == -1 ? 0 : read(fd, buf, sizeof(buf) - 1);

	if (fd != -1)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

int
main(void)
{
	char dir[] = "/tmp/unit-write.XXXXXX", path[300], err[512];
	static const char text[] = "{\"id\":\"a\",\"pad\":\"0123456789\"}\n";
	struct ledger *l;
	struct attlog *a;
	json_t *o;
	size_t len;
	off_t st_held, st_all;
	int fd, rc, i;

	if (mkdtemp(dir) == NULL)
		return 2;
	snprintf(path, sizeof(path), "%s/out", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	chunk = 3;
	rc = rec_write_all(fd, text, strlen(text));
	chunk = 0;
	close(fd);
	ok(rc == 0, "write_all: 0 through writes of 3 bytes");
	is_str(slurp(path), text, "write_all: every byte, in order");

	ok(files_mkdirs(dir, err, sizeof(err)) == 0, "ledger: a run dir");
	l = ledger_open(dir, NULL, err, sizeof(err));
	ok(l != NULL, "ledger: opened");
	budget = 10;		/* a short write, then a full disk */
	errno = EAGAIN;		/* stale, as a read left it */
	rc = ledger_append(l, "k1", "a", LEDGER_INTENT, NULL, err,
	    sizeof(err));
	budget = -1;
	ok(rc == -1 && strstr(err, strerror(ENOSPC)) != NULL,
	    "ledger: a full disk reads ENOSPC's message");
	if (strstr(err, strerror(ENOSPC)) == NULL)
		printf("#   got: \"%s\"\n", err);
	ledger_close(l);

	/*
	 * The attempt log: an object's own "t" and "at" give way to the
	 * line's, and the caller's object is left as it was; lines held are
	 * written together, whole; a write that fails is taken back.
	 */
	a = attlog_open(dir);
	ok(a != NULL, "attlog: opened");
	o = json_pack("{s:s,s:f,s:i}", "t", "mine", "at", 9.0, "n", 1);
	rc = attlog_write(a, ATTLOG_DELAY, 1.5, json_incref(o));
	ok(rc == 0 && json_object_size(o) == 3 && json_object_get(o, "t"),
	    "attlog_write: the caller's object keeps its \"t\" and \"at\"");
	json_decref(o);
	attlog_hold(a);
	rc = attlog_line(a, ATTLOG_REQ, 1796433834.7276, "\"id\":\"d\"", 8);
	rc |= attlog_line(a, ATTLOG_PACE, 2, NULL, 0);
	snprintf(path, sizeof(path), "%s/logs/attempts.ndjson", dir);
	is_str(slurp(path), "{\"t\":\"delay\",\"at\":1.5,\"n\":1}\n",
	    "attlog: a line not held is written at once, \"t\" and \"at\" "
	    "first");
	rc |= attlog_flush(a);
	ok(rc == 0, "attlog: held lines flushed");
	is_str(slurp(path), "{\"t\":\"delay\",\"at\":1.5,\"n\":1}\n"
	    "{\"t\":\"req\",\"at\":1796433834.728,\"id\":\"d\"}\n"
	    "{\"t\":\"pace\",\"at\":2.0}\n", "attlog: held lines, whole, "
	    "at 13 digits");
	/* Past 64 KiB held, what was held goes out by itself, whole. */
	len = strlen(slurp(path));	/* lines of 79 bytes after these */
	for (i = 0; i < 1000; i++)
		rc |= attlog_line(a, ATTLOG_REQ, 3, "\"id\":\"0123456789"
		    "0123456789012345678901234567890123456789\"", 57);
	fd = open(path, O_RDONLY);
	st_held = lseek(fd, 0, SEEK_END);
	close(fd);
	rc |= attlog_flush(a);
	fd = open(path, O_RDONLY);
	st_all = lseek(fd, 0, SEEK_END);
	close(fd);
	ok(rc == 0 && st_held > 65536 - 79 && st_held <= (off_t)len + 65536 &&
	    (st_held - (off_t)len) % 79 == 0 && st_all == (off_t)len + 79 *
	    1000,
	    "attlog: lines held past 64 KiB go out whole, the rest at the "
	    "flush (%ld, then %ld bytes)", (long)st_held, (long)st_all);
	snprintf(path, sizeof(path), "rm -f %s/logs/attempts.ndjson", dir);
	if (system(path) != 0)
		return 2;
	attlog_close(a);
	a = attlog_open(dir);
	snprintf(path, sizeof(path), "%s/logs/attempts.ndjson", dir);
	len = strlen(slurp(path));
	budget = 20;		/* half a line, then a full disk */
	rc = attlog_line(a, ATTLOG_REQ, 3, "\"id\":\"e\"", 8);
	rc |= attlog_flush(a);
	budget = -1;
	ok(rc == -1, "attlog: a full disk is an error");
	ok(strlen(slurp(path)) == len,
	    "attlog: the half-written line is taken back");
	attlog_close(a);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path) != 0)
		return 2;
	return tap_done();
}
