/* owner: a pipeline's owner file, held by each stage of it (owner.h). */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/x.h"
#include "lib/record/rec.h"
#include "lib/state/owner.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"

int
owner_name_ok(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n <= 40 && name[0] != '.' && strspn(name,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789._-") == n;
}

int
owner_hold(const char *rundir, const char *name, const char *who, char *err,
    size_t errlen)
{
	struct stat a, b;
	char *dir, *path, *line;
	int fd;

	dir = rundir_path(rundir, RUNDIR_OWNERS, NULL);
	if (files_mkdir(dir, err, errlen) == -1) {
		free(dir);
		return -1;
	}
	free(dir);
	path = rundir_path(rundir, RUNDIR_OWNERS, name);
	for (;;) {
		if ((fd = files_open(path, O_RDWR | O_APPEND | O_CREAT,
		    0600)) == -1 || flock(fd, LOCK_SH) == -1) {
			snprintf(err, errlen, "open %s: %s", path,
			    files_why(errno));
			if (fd != -1)
				close(fd);
			free(path);
			return -1;
		}
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			break;
		close(fd);
	}
	free(path);
	line = xasprintf("%s %ld\n", who, (long)getpid());
	(void)!rec_write_all(fd, line, strlen(line));
	free(line);
	return fd;
}

void
owner_release(const char *rundir, const char *name, int fd)
{
	char *path;

	if (fd == -1)
		return;
	path = rundir_path(rundir, RUNDIR_OWNERS, name);
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		unlink(path);
	free(path);
	close(fd);
}
