/*
 * bodies: response bodies filed into RUNDIR/docs by a thread of their own.
 *
 * Creating a file, writing it and renaming it into docs/ costs a fast run
 * more than a third of rfp-fetch's time, all of it in system calls that
 * need nothing from the loop.  A finished transfer whose body is held in
 * memory (or already spilled to docs/.part) is handed over here; this
 * thread opens the partial file when it is not open yet, writes what is
 * held, closes it and renames it into docs/, and hands the transfer back.
 * The loop files the record only then, so a record never names a body
 * that is not in place, as before.
 *
 * The thread touches only the transfer's fd, mem, mlen, bid, wr_err and
 * renamed fields, and only between bodies_put and bodies_take: the loop
 * leaves a transfer alone while it is here.
 */
#include <sys/stat.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "lib/base/x.h"
#include "fetch/fetch.h"

static struct {
	pthread_t	 th;
	int		 running;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	struct xfer	*todo, **todo_tail;	/* handed over, in order */
	struct xfer	*done, **done_tail;	/* filed, for the loop */
	int		 stop;
	int		 wake[2];	/* a byte when done turns non-empty */
} B = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.wake = { -1, -1 },
};

static const struct fopts *fo;	/* set by bodies_init */

int
bodies_open_part(const struct xfer *x)
{
	return openat(fo->part_fd, x->bid, O_WRONLY | O_CREAT | O_TRUNC |
	    O_CLOEXEC | O_NOFOLLOW, 0600);
}

static void
file_one(struct xfer *x)
{
	x->wr_err = 0;
	if (x->fd == -1 && (x->fd = bodies_open_part(x)) == -1) {
		x->wr_err = errno;
		return;
	}
	if (rec_write_all(x->fd, x->mem, x->mlen) == -1)
		x->wr_err = errno;
	if (close(x->fd) == -1 && x->wr_err == 0)
		x->wr_err = errno;
	x->fd = -1;
	if (x->wr_err == 0 && renameat(fo->part_fd, x->bid, fo->docs_fd,
	    x->bid) == 0)
		x->renamed = 1;
}

static void *
loop(void *arg)
{
	struct xfer *x;
	char c = 1;

	(void)arg;
	pthread_mutex_lock(&B.mu);
	for (;;) {
		while (B.todo == NULL && !B.stop)
			pthread_cond_wait(&B.cv, &B.mu);
		if ((x = B.todo) == NULL)
			break;		/* stopping, and nothing left */
		if ((B.todo = x->bnext) == NULL)
			B.todo_tail = &B.todo;
		pthread_mutex_unlock(&B.mu);
		file_one(x);
		pthread_mutex_lock(&B.mu);
		x->bnext = NULL;
		if (B.done == NULL && write(B.wake[1], &c, 1) == -1 &&
		    errno != EAGAIN)
			msg_warnsys("write to the loop's wake-up pipe");
		*B.done_tail = x;
		B.done_tail = &x->bnext;
	}
	pthread_mutex_unlock(&B.mu);
	return NULL;
}

void
bodies_init(const struct fopts *o)
{
	fo = o;
}

int
bodies_start(void)
{
	sigset_t all, old;
	int rc, i;

	B.todo_tail = &B.todo;
	B.done_tail = &B.done;
	if (pipe(B.wake) == -1)
		msg_diesys(1, "pipe");
	for (i = 0; i < 2; i++)
		if (fcntl(B.wake[i], F_SETFL, O_NONBLOCK) == -1 ||
		    fcntl(B.wake[i], F_SETFD, FD_CLOEXEC) == -1)
			msg_diesys(1, "fcntl");
	/* Signals are the loop's to handle. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&B.th, NULL, loop, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		errno = rc;
		msg_diesys(1, "pthread_create");
	}
	B.running = 1;
	return B.wake[0];
}

/* Hand over a list linked by bnext, in order: one wake-up for all. */
void
bodies_put(struct xfer *list)
{
	struct xfer *x;

	if (list == NULL)
		return;
	for (x = list; x->bnext != NULL; x = x->bnext)
		;
	pthread_mutex_lock(&B.mu);
	*B.todo_tail = list;
	B.todo_tail = &x->bnext;
	pthread_cond_signal(&B.cv);
	pthread_mutex_unlock(&B.mu);
}

struct xfer *
bodies_take(void)
{
	struct xfer *list;
	char buf[64];

	while (read(B.wake[0], buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&B.mu);
	list = B.done;
	B.done = NULL;
	B.done_tail = &B.done;
	pthread_mutex_unlock(&B.mu);
	return list;
}

void
bodies_stop(void)
{
	if (!B.running)
		return;
	pthread_mutex_lock(&B.mu);
	B.stop = 1;
	pthread_cond_signal(&B.cv);
	pthread_mutex_unlock(&B.mu);
	pthread_join(B.th, NULL);
	B.running = 0;
	close(B.wake[0]);
	close(B.wake[1]);
	B.wake[0] = B.wake[1] = -1;
}

/*
 * Request bodies from files.  A body_file is read only under the body
 * root (body_root, or the manifest's directory: standard input's, when it
 * is a file, else the current directory; with --from-queue, the one
 * rfp-queue load recorded in the record's manifest_dir), reached one
 * component at a time with O_NOFOLLOW, so no symbolic link is followed
 * below the root and ".." never leaves it; it must be a regular file (a
 * FIFO or a device is opened without blocking, then refused), not of /proc
 * or /sys, and no larger than max_body.  The transfer reads it as it goes,
 * never whole.
 */
struct root {
	int	 fd;		/* the root, opened once; -1: not yet */
	char	*path;		/* its real path */
	char	*named;		/* an absolute body_root as configured */
	char	*dir;		/* a queue record's manifest_dir */
	char	 err[300];	/* why it cannot be used */
};
static struct root R = { .fd = -1 };	/* body_root, or standard input's */
static struct root Q = { .fd = -1 };	/* the last queue record's */

static void
root_close(struct root *rt)
{
	if (rt->fd != -1)
		close(rt->fd);
	free(rt->path);
	free(rt->named);
	free(rt->dir);
	memset(rt, 0, sizeof(*rt));
	rt->fd = -1;
}

const char *
bodies_dir(const json_t *rec)
{
	/* body_root, configured, is every host's and wins, as in a run. */
	if (!fo->from_queue || fo->conf.body_root != NULL)
		return NULL;
	return rec_str(rec, REC_MANIFEST_DIR);
}

/*
 * The root of a queue record loaded from a manifest in dir, an absolute
 * path (rfp-queue load): kept open while records of one manifest follow.
 */
static struct root *
root_dir(const char *dir)
{
	if (Q.dir != NULL && strcmp(Q.dir, dir) == 0)
		return &Q;
	root_close(&Q);
	Q.dir = xstrdup(dir);
	if (dir[0] != '/')
		snprintf(Q.err, sizeof(Q.err), "%s \"%.200s\": not an "
		    "absolute path", REC_MANIFEST_DIR, dir);
	else if ((Q.path = realpath(dir, NULL)) == NULL ||
	    (Q.fd = open(Q.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		snprintf(Q.err, sizeof(Q.err), "the manifest's directory "
		    "\"%.200s\": %s", dir, strerror(errno));
	return &Q;
}

static int
root_open(void)
{
	char buf[PATH_MAX], *dir = NULL;
	struct stat st;
	ssize_t n;

	if (R.fd != -1 || R.err[0] != '\0')
		return R.fd;
	if (fo->conf.body_root != NULL) {
		dir = xstrdup(fo->conf.body_root);
		/* Reached through a symbolic link, it has two names. */
		if (dir[0] == '/') {
			R.named = xstrdup(dir);
			for (n = (ssize_t)strlen(R.named); n > 1 &&
			    R.named[n - 1] == '/'; n--)
				R.named[n - 1] = '\0';
		}
	}
	else if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
	    (n = readlink("/proc/self/fd/0", buf, sizeof(buf) - 1)) > 0 &&
	    buf[0] == '/') {
		/* The manifest is a file: its directory. */
		buf[n] = '\0';
		*strrchr(buf, '/') = '\0';
		dir = xstrdup(buf[0] != '\0' ? buf : "/");
	}
	if (dir == NULL)
		dir = xstrdup(".");
	if ((R.path = realpath(dir, NULL)) == NULL ||
	    (R.fd = open(R.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		snprintf(R.err, sizeof(R.err), "body_root \"%.200s\": %s", dir,
		    strerror(errno));
	free(dir);
	return R.fd;
}

/* Whether fd is on a pseudo file system (/proc, /sys): never a body. */
static int
pseudo_fs(int fd)
{
#ifdef __linux__
	struct statfs sf;

	/* proc, sysfs, debugfs */
	if (fstatfs(fd, &sf) == 0 && (sf.f_type == 0x9fa0 ||
	    sf.f_type == 0x62656572 || sf.f_type == 0x64626720))
		return 1;
#else
	(void)fd;
#endif
	return 0;
}

/* One line for a body_file that cannot be sent. */
static int
body_fail(const char *path, const char *why, int e, char *err,
    size_t errlen)
{
	snprintf(err, errlen, "field \"body_file\": cannot read \"%.200s\": "
	    "%s", path, why ? why : strerror(e));
	return -1;
}

/*
 * Open p (relative to the root) one component at a time, never through a
 * symbolic link nor up: the fd, or -1 with *why set or errno.
 */
static int
walk(const struct root *rt, const char *p, const char **why)
{
	char name[NAME_MAX + 1];
	int dir = rt->fd, fd = -1, last, e;
	size_t n;

	for (;;) {
		p += strspn(p, "/");
		if ((n = strcspn(p, "/")) == 0) {
			*why = "not a file name";
			break;
		}
		if (n >= sizeof(name)) {
			errno = ENAMETOOLONG;
			break;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		last = p[strspn(p, "/")] == '\0';
		if (strcmp(name, "..") == 0) {
			*why = "outside body_root";
			break;
		}
		if (strcmp(name, ".") == 0 && !last)
			continue;
		if (last) {
			/* A FIFO or a device must not block the batch. */
			fd = openat(dir, name, O_RDONLY | O_NOFOLLOW |
			    O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
			if (fd == -1 && errno == ELOOP)
				*why = "a symbolic link";
			break;
		}
		fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (fd == -1) {
			if (errno == ELOOP || errno == ENOTDIR)
				*why = "a symbolic link or a file on its way";
			break;
		}
		if (dir != rt->fd)
			close(dir);
		dir = fd;
		fd = -1;
	}
	e = errno;
	if (dir != rt->fd)
		close(dir);
	errno = e;
	return fd;
}

/* The length of root when p is root or under it, else 0. */
static size_t
under(const char *p, const char *root)
{
	size_t rl = strlen(root);

	return strncmp(p, root, rl) == 0 && (p[rl] == '/' || p[rl] == '\0') ?
	    rl : 0;
}

int
bodies_open(const char *path, const char *dir, long max, long *size,
    char *err, size_t errlen)
{
	const char *p = path, *why = NULL;
	struct root *rt = &R;
	struct stat st;
	size_t rl;
	int fd;

	if (dir != NULL)
		rt = root_dir(dir);
	else
		root_open();
	if (rt->fd == -1) {
		snprintf(err, errlen, "field \"body_file\": %s", rt->err);
		return -1;
	}
	if (*p == '/' && strcmp(rt->path, "/") != 0 && (rt->named == NULL ||
	    strcmp(rt->named, "/") != 0)) {
		/* Absolute: only under the root's real or configured path. */
		if ((rl = under(p, rt->path)) == 0 && (rt->named == NULL ||
		    (rl = under(p, rt->named)) == 0))
			return body_fail(path, "outside body_root", 0, err,
			    errlen);
		p += rl;
	}
	if ((fd = walk(rt, p, &why)) == -1)
		return body_fail(path, why, errno, err, errlen);
	if (fstat(fd, &st) == -1) {
		why = strerror(errno);
	} else if (!S_ISREG(st.st_mode) || pseudo_fs(fd)) {
		why = "not a regular file";
	} else if (st.st_size > max) {
		snprintf(err, errlen, "field \"body_file\": \"%.200s\" is too "
		    "large: %lld bytes, over max_body %ld", path,
		    (long long)st.st_size, max);
		close(fd);
		return -1;
	} else {
		*size = (long)st.st_size;
		return fd;
	}
	close(fd);
	return body_fail(path, why, 0, err, errlen);
}

void
bodies_close_root(void)
{
	root_close(&R);
	root_close(&Q);
}
