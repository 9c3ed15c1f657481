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
	int fd, rc;

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
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path) != 0)
		return 2;
	return tap_done();
}
