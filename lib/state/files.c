/* files: the store's file backend: flock'd JSON documents. */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/state/rundir.h"
#include "lib/record/rec.h"
#include "lib/state/files.h"
#include "lib/base/x.h"

#define STATE_MAX	(1024 * 1024)

int
files_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode);
}

const char *
files_why(int e)
{
	return e == ELOOP ? "a symbolic link (the run directory's files are "
	    "never followed: put the file itself there)" : e == EINVAL ?
	    "not a regular file" : strerror(e);
}

int
files_open_read(const char *path)
{
	struct stat st;
	int fd, fl;

	memset(&st, 0, sizeof(st));
	/* Not blocking on a FIFO planted where a file should be. */
	if ((fd = files_open(path, O_RDONLY | O_NONBLOCK, 0)) == -1)
		return -1;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
		fl = errno;
		close(fd);
		errno = S_ISREG(st.st_mode) ? fl : EINVAL;
		return -1;
	}
	return fd;
}

int
files_line_ended(int fd)
{
	struct stat st;
	char c;

	if (fstat(fd, &st) == -1)
		return -1;
	if (st.st_size == 0)
		return 1;
	if (pread(fd, &c, 1, st.st_size - 1) != 1)
		return -1;
	return c == '\n';
}

off_t
files_whole_end(int fd)
{
	struct stat st;
	char buf[4096];
	off_t at;
	ssize_t n, m, i;

	if (fstat(fd, &st) == -1)
		return -1;
	for (at = st.st_size; at > 0; at -= n) {
		n = at < (off_t)sizeof(buf) ? (ssize_t)at : (ssize_t)sizeof(buf);
		if ((m = pread(fd, buf, (size_t)n, at - n)) != n) {
			if (m >= 0)
				errno = EIO;	/* it shrank under us */
			return -1;
		}
		for (i = n; i > 0; i--)
			if (buf[i - 1] == '\n')
				return at - n + i;
	}
	return 0;
}

/*
 * Make path (mode 0700), or accept it as found when it is a directory of
 * ours that no one else may write to: the files made in it are then ours
 * alone.  follow: path itself may be a symbolic link (the run directory
 * named on the command line); its subdirectories may not.
 */
static int
mkdir_ours(const char *path, int follow, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(path, 0700) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", path, strerror(errno));
		return -1;
	}
	if ((follow ? stat(path, &st) : lstat(path, &st)) == -1) {
		snprintf(err, errlen, "stat %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "run directory %s: %s", path,
		    S_ISLNK(st.st_mode) ? "a symbolic link, never followed "
		    "(put the directory itself there)" : "not a directory");
		errno = ENOTDIR;
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "run directory %s: owned by uid %ld, "
		    "not by this user (uid %ld)", path, (long)st.st_uid,
		    (long)geteuid());
		errno = EPERM;
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen, "run directory %s: writable by others "
		    "(mode %04o); chmod go-w it", path,
		    (unsigned)(st.st_mode & 07777));
		errno = EPERM;
		return -1;
	}
	return 0;
}

int
files_vet(const char *what, const char *path, int fd, char *err,
    size_t errlen)
{
	struct stat st;
	const char *slash;
	char *dir;
	int rc;

	/* The file, when it is there: as mkdir_ours takes a directory. */
	if ((fd != -1 ? fstat(fd, &st) : lstat(path, &st)) == 0) {
		if (!S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "%s %s: not a regular file",
			    what, path);
			errno = EINVAL;
			return -1;
		}
		if (st.st_uid != geteuid()) {
			snprintf(err, errlen, "%s %s: owned by uid %ld, not "
			    "by this user (uid %ld)", what, path,
			    (long)st.st_uid, (long)geteuid());
			errno = EPERM;
			return -1;
		}
		if (st.st_mode & (S_IWGRP | S_IWOTH)) {
			snprintf(err, errlen, "%s %s: writable by others "
			    "(mode %04o); chmod go-w it", what, path,
			    (unsigned)(st.st_mode & 07777));
			errno = EPERM;
			return -1;
		}
	} else if (errno != ENOENT) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	/*
	 * Its directory: one who may write there may put a file of theirs in
	 * its place, unless the directory is sticky (/tmp), where no one but
	 * its owner (and the directory's) may remove or rename our file.
	 */
	slash = strrchr(path, '/');
	dir = slash == NULL ? xstrdup(".") : slash == path ? xstrdup("/") :
	    xasprintf("%.*s", (int)(slash - path), path);
	rc = -1;
	if (stat(dir, &st) == -1)
		snprintf(err, errlen, "%s %s: %s: %s", what, path, dir,
		    strerror(errno));
	else if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s %s: %s: not a directory", what,
		    path, dir);
		errno = ENOTDIR;
	} else if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errlen, "%s %s: directory %s owned by uid %ld, "
		    "not by this user (uid %ld) or root", what, path, dir,
		    (long)st.st_uid, (long)geteuid());
		errno = EPERM;
	} else if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
	    !(st.st_mode & S_ISVTX)) {
		snprintf(err, errlen, "%s %s: directory %s writable by others "
		    "(mode %04o); chmod go-w it", what, path, dir,
		    (unsigned)(st.st_mode & 07777));
		errno = EPERM;
	} else
		rc = 0;
	free(dir);
	return rc;
}

int
files_mkdirs(const char *rundir, char *err, size_t errlen)
{
	/*
	 * Every directory of a run directory that a stage writes in, made (or
	 * found wrong: a file there, not ours) by each stage as it starts,
	 * and by rfpipe's check before any: not by one stage mid-run.
	 */
	static const enum rundir_file subs[] = { RUNDIR_STATE, RUNDIR_DOCS,
	    RUNDIR_PART, RUNDIR_LOGS, RUNDIR_OWNERS, RUNDIR_SLOTS };
	static const char *const kinds[] = { "rate", "breaker" };
	char path[4096];
	size_t i;

	if (mkdir_ours(rundir, 1, err, errlen) == -1)
		return -1;
	for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", rundir,
		    rundir_name(subs[i]));
		if (mkdir_ours(path, 0, err, errlen) == -1)
			return -1;
	}
	/* The state kept in a file per endpoint (store.c). */
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s/%s", rundir,
		    rundir_name(RUNDIR_STATE), kinds[i]);
		if (mkdir_ours(path, 0, err, errlen) == -1)
			return -1;
	}
	/* Writable by us: a read-only run directory fails here, at once. */
	snprintf(path, sizeof(path), "%s/%s", rundir,
	    rundir_name(RUNDIR_STATE));
	if (access(rundir, W_OK) == -1) {
		snprintf(err, errlen, "run directory %s: %s", rundir,
		    strerror(errno));
		return -1;
	}
	if (access(path, W_OK) == -1) {
		snprintf(err, errlen, "run directory %s: %s: %s", rundir,
		    path, strerror(errno));
		return -1;
	}
	return 0;
}

int
files_dump(const json_t *doc, const char *path, const char *tmp,
    size_t flags)
{
	int fd, e;

	if ((fd = files_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		return -1;
	if (json_dumpfd(doc, fd, flags) == -1) {
		e = errno ? errno : ENOMEM;
		close(fd);
		unlink(tmp);
		errno = e;
		return -1;
	}
	if (close(fd) == -1 || rename(tmp, path) == -1) {
		e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

json_t *
files_load(const char *path, size_t flags, json_error_t *je)
{
	json_t *doc;
	int fd;

	if ((fd = files_open_read(path)) == -1) {
		if (je != NULL) {
			memset(je, 0, sizeof(*je));
			snprintf(je->text, sizeof(je->text), "%s",
			    files_why(errno));
		}
		return NULL;
	}
	doc = json_loadfd(fd, flags, je);
	close(fd);
	return doc;
}

int
files_mkdir(const char *path, char *err, size_t errlen)
{
	return mkdir_ours(path, 0, err, errlen);
}

/* Read the whole of fd from offset 0; NULL on error (errno set). */
static char *
slurp(int fd, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = xmalloc(cap);
	ssize_t r;

	for (;;) {
		if (n == cap) {
			if (cap >= STATE_MAX) {
				free(buf);
				errno = EFBIG;
				return NULL;
			}
			buf = xrealloc(buf, cap *= 2);
		}
		r = pread(fd, buf + n, cap - n, (off_t)n);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			free(buf);
			return NULL;
		}
		n += (size_t)r;
		/* A regular file reads short only at its end. */
		if (r == 0 || n < cap)
			break;
	}
	*len = n;
	return buf;
}

void
files_corrupt(const char *path, const char *why, char *err, size_t errlen)
{
	char *w = xstrdup(why);

	snprintf(err, errlen, "%s: corrupt state file (%s); move it aside to "
	    "start afresh", path, w);
	free(w);
}

static int
parse(const char *path, int fd, json_t **doc, size_t *len, char *err,
    size_t errlen)
{
	json_error_t je;
	char *buf;

	*doc = NULL;
	if ((buf = slurp(fd, len)) == NULL) {
		/* No state a run writes is that long: junk, said as such. */
		if (errno == EFBIG)
			files_corrupt(path, "over 1 MiB", err, errlen);
		else
			snprintf(err, errlen, "read %s: %s", path,
			    strerror(errno));
		return -1;
	}
	if (*len > 0) {
		*doc = json_loadb(buf, *len, 0, &je);
		if (*doc == NULL || !json_is_object(*doc)) {
			files_corrupt(path, *doc ? "not an object" : rec_json_why(&je), err,
			    errlen);
			json_decref(*doc);
			*doc = NULL;
			free(buf);
			return -1;
		}
	}
	free(buf);
	return 0;
}

/*
 * State files are opened once and kept: an open(2) costs more than the
 * whole locked read-modify-write.  Files are rewritten in place, never
 * replaced, so a kept descriptor stays the file's.  No more than HELD_MAX
 * are kept (none is locked between updates): a batch over 400 hosts, an
 * endpoint and two state files each, ran out of descriptors under the
 * usual limit of 1,024 a third of the way through.  Past it, or when
 * open(2) finds the process out of descriptors, those kept are closed.
 */
#define HELD_MAX	32
static json_t *held;	/* path -> descriptor */

static int
held_open(const char *path)
{
	json_t *v;
	int fd;

	/* jansson takes a NULL object as an empty one. */
	if ((v = json_object_get(held, path)) != NULL)
		return (int)json_integer_value(v);
	if (json_object_size(held) >= HELD_MAX)
		files_close_all();
	if ((fd = files_open(path, O_RDWR | O_CREAT, 0600)) == -1 &&
	    (errno == EMFILE || errno == ENFILE) && json_object_size(held) > 0) {
		files_close_all();
		fd = files_open(path, O_RDWR | O_CREAT, 0600);
	}
	if (fd == -1)
		return -1;
	if (held == NULL)
		held = json_object();
	json_object_set_new(held, path, json_integer(fd));
	return fd;
}

/* Close path's kept descriptor, if any. */
static void
held_forget(const char *path)
{
	json_t *v;

	if ((v = json_object_get(held, path)) == NULL)
		return;
	close((int)json_integer_value(v));
	json_object_del(held, path);
}

void
files_close_all(void)
{
	const char *k;
	json_t *v;

	json_object_foreach(held, k, v)
		close((int)json_integer_value(v));
	json_decref(held);
	held = NULL;
}

/*
 * Write *s (len bytes) over a state file of old bytes, never torn: the
 * room is taken before a byte is written (a full disk emptied a new state
 * file, and the run after refused it), and a shorter state is padded with
 * blanks over the old one's end before the file is cut there, so that a
 * kill between the two leaves it whole.  -1 with errno set.
 */
static int
put(int fd, char **s, size_t len, size_t old)
{
	size_t n = len > old ? len : old;
	int e;

	if (len > old && (e = posix_fallocate(fd, 0, (off_t)len)) != 0 &&
	    e != EOPNOTSUPP && e != EINVAL) {
		errno = e;
		return -1;
	}
	if (len < old) {
		*s = xrealloc(*s, old);
		memset(*s + len, ' ', old - len);
	}
	errno = 0;
	if (pwrite(fd, *s, n, 0) != (ssize_t)n) {
		if (errno == 0)
			errno = ENOSPC;
		return -1;
	}
	return len < old ? ftruncate(fd, (off_t)len) : 0;
}

int
files_update(const char *path, files_fn *fn, void *arg, char *err,
    size_t errlen)
{
	struct stat st;
	json_t *doc;
	char *s;
	size_t len, old;
	int fd, rc, unlinked = 0;

again:
	if ((fd = held_open(path)) == -1) {
		snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return -1;
	}
	while (flock(fd, LOCK_EX) == -1) {
		if (errno == EINTR)
			continue;
		snprintf(err, errlen, "lock %s: %s", path, strerror(errno));
		return -1;
	}
	/* Unlinked while we waited (below): the file is a new one now. */
	if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
		flock(fd, LOCK_UN);
		held_forget(path);
		goto again;
	}
	if (parse(path, fd, &doc, &old, err, errlen) == -1) {
		flock(fd, LOCK_UN);
		return -1;
	}
	rc = fn(&doc, arg, err, errlen);
	if (rc == FILES_CORRUPT) {
		files_corrupt(path, err, err, errlen);
		rc = -1;
	}
	if (rc == 0) {
		/*
		 * One write of the object and its newline; a truncate only
		 * when the file shrinks (it costs more than the write).
		 */
		errno = 0;
		len = (s = json_dumps(doc, JSON_COMPACT)) ? strlen(s) : 0;
		if (s != NULL)
			s[len++] = '\n';	/* over the NUL; s is not a string */
		if (s == NULL || put(fd, &s, len, old) == -1) {
			snprintf(err, errlen, "write %s: %s", path,
			    strerror(errno ? errno : ENOMEM));
			rc = -1;
			/*
			 * Made for this write and never written (a full
			 * disk): gone again, not left empty, which the run
			 * after would refuse as corrupt.
			 */
			if (old == 0)
				unlinked = unlink(path) == 0;
		}
		free(s);
	}
	json_decref(doc);
	flock(fd, LOCK_UN);
	if (unlinked)
		held_forget(path);
	return rc;
}

int
files_read(const char *path, json_t **doc, char *err, size_t errlen)
{
	size_t len;
	int fd, rc;

	*doc = NULL;
	if ((fd = files_open(path, O_RDONLY, 0)) == -1) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return -1;
	}
	while (flock(fd, LOCK_SH) == -1) {
		if (errno == EINTR)
			continue;
		snprintf(err, errlen, "lock %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	rc = parse(path, fd, doc, &len, err, errlen);
	close(fd);
	return rc;
}

/*
 * One state file, read under a shared lock: absent is fine, empty is not
 * (a file an update made and could not write is unlinked again: empty,
 * it was cut by hand or by a crash, and read as absent it would start a
 * spent budget afresh).
 */
static int
check_one(const char *path, const char *kind, files_valid_fn *valid,
    char *err, size_t errlen)
{
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	json_t *doc = NULL;
	size_t len;
	int fd, rc, tries;

	if ((fd = files_open_read(path)) == -1) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s; move it aside to start afresh",
		    path, errno == EINVAL ? "not a regular file" : errno ==
		    ELOOP ? "a symbolic link (state files are never followed)" :
		    strerror(errno));
		return -1;
	}
	/*
	 * Empty is made and never written, unless another pipeline on the
	 * run directory is making it this instant (held_open creates it,
	 * then locks and writes it): looked at again after a pause.
	 */
	for (tries = 0; tries < 2; tries++) {
		if (tries > 0)
			nanosleep(&pause, NULL);
		while ((rc = flock(fd, LOCK_SH)) == -1 && errno == EINTR)
			;
		if (rc == -1) {
			snprintf(err, errlen, "lock %s: %s", path,
			    strerror(errno));
			break;
		}
		rc = parse(path, fd, &doc, &len, err, errlen);
		flock(fd, LOCK_UN);
		if (rc == -1 || doc != NULL)
			break;
	}
	close(fd);
	if (rc == 0 && doc == NULL) {
		files_corrupt(path, "empty", err, errlen);
		rc = -1;
	} else if (rc == 0 && valid != NULL && valid(kind, doc, err,
	    errlen) == -1) {
		files_corrupt(path, err, err, errlen);
		rc = -1;
	}
	json_decref(doc);
	return rc;
}

/*
 * The files every run appends to: regular files, or not there yet, never
 * followed (a link there stopped rfp-fetch and rfp-sink each, mid-start,
 * exit 1).  summary.json, which rfp-sink renames into place at the end,
 * replacing whatever is there, may be anything but a directory: one there
 * failed the run, exit 1, once every document was sent.
 */
static int
check_filed(const char *rundir, char *err, size_t errlen)
{
	static const enum rundir_file filed[] = { RUNDIR_RESULTS, RUNDIR_DEAD,
	    RUNDIR_CLAIMS, RUNDIR_ATTEMPTS };
	struct stat st;
	char *path;
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < sizeof(filed) / sizeof(filed[0]); i++) {
		path = rundir_path(rundir, filed[i], NULL);
		if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "%s: %s", path, S_ISLNK(st.st_mode) ?
			    files_why(ELOOP) : "not a regular file");
			rc = -1;
		}
		free(path);
	}
	path = rundir_path(rundir, RUNDIR_SUMMARY, NULL);
	if (rc == 0 && lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: a directory, where the run puts its "
		    "summary", path);
		rc = -1;
	}
	free(path);
	return rc;
}

int
files_check_state(const char *rundir, int shared, files_valid_fn *valid,
    char *err, size_t errlen)
{
	static const char *kinds[] = { "rate", "breaker" };
	struct dirent *de;
	char *path, *dir;
	size_t i, n;
	DIR *d;
	int rc;

	if ((rc = check_filed(rundir, err, errlen)) != 0 || shared)
		return rc;
	path = rundir_state(rundir, "budget", NULL);
	rc = check_one(path, "budget", NULL, err, errlen);
	free(path);
	for (i = 0; rc == 0 && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		dir = rundir_path(rundir, RUNDIR_STATE, kinds[i]);
		if ((d = opendir(dir)) == NULL) {
			if (errno != ENOENT) {
				snprintf(err, errlen, "open %s: %s", dir,
				    strerror(errno));
				rc = -1;
			}
			free(dir);
			continue;
		}
		while (rc == 0 && (de = readdir(d)) != NULL) {
			n = strlen(de->d_name);
			/* Not the ".tmp" of a rewrite, nor "." and "..". */
			if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
				continue;
			path = xasprintf("%s/%s", dir, de->d_name);
			rc = check_one(path, kinds[i], valid, err, errlen);
			free(path);
		}
		closedir(d);
		free(dir);
	}
	return rc;
}
