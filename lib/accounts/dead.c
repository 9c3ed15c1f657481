/* dead: dead.ndjson without the letters a later filing superseded. */
#include <sys/file.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/dead.h"
#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/record/view.h"
#include "lib/state/files.h"
#include "lib/base/x.h"

int
dead_hold(const char *rundir, char *err, size_t errlen)
{
	char *path = rundir_path(rundir, RUNDIR_SINK_LOCK, NULL);
	int fd;

	if ((fd = files_open(path, O_RDWR | O_CREAT, 0600)) == -1 ||
	    flock(fd, LOCK_SH) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	free(path);
	return fd;
}

/*
 * Call fn for each line of path with its id and its line_key (each NULL
 * when it has none, or the line is not a record), read through v; an
 * absent file has no lines.  0, or -1 with errno.  With whole, a line
 * over the cap is an error (EFBIG): the reader keeps nothing of it, so a
 * rewrite would lose it.
 */
static int
each(const char *path, struct view *v, int whole, void (*fn)(const char *,
    size_t, const char *, const char *, void *), void *arg)
{
	struct rec_reader *r;
	char *line;
	size_t len;
	long lineno;
	int fd, rc, e = 0;

	if ((fd = files_open(path, O_RDONLY, 0)) == -1)
		return errno == ENOENT ? 0 : -1;
	r = rec_reader_new(fd, REC_STREAM_MAX);
	while ((rc = rec_next(r, &line, &len, &lineno)) != REC_EOF) {
		if (rc == REC_ERR) {
			e = errno ? errno : EIO;
			break;
		}
		if (rc == REC_TOOLONG && whole) {
			e = EFBIG;
			break;
		}
		if (rc != REC_LINE || len == 0)
			continue;
		if (view_open(v, line, len, NULL, 0) == 0)
			fn(line, len, view_str(v, "id"), view_str(v,
			    REC_LINE_KEY), arg);
		else
			fn(line, len, NULL, NULL, arg);
	}
	rec_reader_free(r);
	close(fd);
	errno = e;
	return e ? -1 : 0;
}

/*
 * What the compaction holds: an entry per dead id, none per line or per
 * result (a million results once took 120 MiB).  The letters are read
 * once to count them, and again, only when some go, to rewrite, under
 * the exclusive lock.
 */
struct letters {
	json_t	*done;		/* ids of letters filed in results.ndjson */
	json_t	*last;		/* id -> the number of its last letter */
	json_t	*keyed;		/* line_key -> ... of its last letter */
	long	 n;		/* letters read in this pass */
	long	 anon;		/* ... of them without an id or a key */
	int	 out;		/* the rewrite */
	int	 err;		/* errno of a failed write, or 0 */
	struct view *v;
};

/*
 * A letter with a line_key is a manifest line's (fetch/admit.c): one
 * without an id of its own, or a duplicate whose id is another line's.
 * It is kept by its key alone: the last letter of a key stays, whatever
 * results.ndjson or the letters of its id say of the id's first line.
 */
static void
note_dead(const char *line, size_t len, const char *id, const char *key,
    void *arg)
{
	struct letters *l = arg;

	(void)line;
	(void)len;
	if (key != NULL)
		json_object_set_new(l->keyed, key, json_integer(l->n));
	else if (id != NULL)
		json_object_set_new(l->last, id, json_integer(l->n));
	else
		l->anon++;
	l->n++;
}

/*
 * A result's id, kept only when a letter has it: what is held grows with
 * the dead letters, not with the results (a million of them once took
 * 120 MiB).
 */
static void
note_done(const char *line, size_t len, const char *id, const char *key,
    void *arg)
{
	struct letters *l = arg;

	(void)line;
	(void)len;
	(void)key;
	if (id != NULL && json_object_get(l->last, id) != NULL)
		json_object_set_new(l->done, id, json_true());
}

/*
 * Letter number l->n, written to l->out when it stays: no later letter has
 * its line_key; without one, no result has its id and no later letter does.
 */
static void
sift(const char *line, size_t len, const char *id, const char *key,
    void *arg)
{
	struct letters *l = arg;
	int stays;

	if (key != NULL)
		stays = json_integer_value(json_object_get(l->keyed, key)) ==
		    l->n;
	else
		stays = id == NULL || (json_object_get(l->done, id) == NULL &&
		    json_integer_value(json_object_get(l->last, id)) == l->n);

	l->n++;
	if (stays && l->err == 0 && (rec_write_all(l->out, line, len) == -1 ||
	    rec_write_all(l->out, "\n", 1) == -1))
		l->err = errno;
}

long
dead_compact(const char *rundir, int fd, char *err, size_t errlen)
{
	struct letters l;
	char *done = rundir_path(rundir, RUNDIR_RESULTS, NULL);
	char *dead = rundir_path(rundir, RUNDIR_DEAD, NULL);
	char *tmp = xasprintf("%s.compact", dead);
	long dropped = 0;

	memset(&l, 0, sizeof(l));
	l.done = json_object();
	l.last = json_object();
	l.keyed = json_object();
	l.v = view_new();
	l.out = -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		/* Another sink is still filing: the last one to end will. */
		dropped = errno == EWOULDBLOCK ? 0 : -1;
		if (dropped == -1)
			snprintf(err, errlen, "lock: %s", strerror(errno));
		goto out;
	}
	/* The letters first: only their ids are looked for in the results. */
	if (each(dead, l.v, 1, note_dead, &l) == -1 ||
	    each(done, l.v, 0, note_done, &l) == -1) {
		snprintf(err, errlen, "read: %s", strerror(errno));
		dropped = -1;
		goto out;
	}
	/* What stays: the letters without an id, one a live id, one a key. */
	dropped = l.n - l.anon - ((long)json_object_size(l.last) -
	    (long)json_object_size(l.done)) - (long)json_object_size(l.keyed);
	if (dropped == 0)
		goto out;
	/*
	 * A new file, never what stands at the name: a FIFO there would
	 * block the open for good.
	 */
	if ((unlink(tmp) == -1 && errno != ENOENT) || (l.out = files_open(tmp,
	    O_WRONLY | O_CREAT | O_EXCL, 0600)) == -1)
		goto fail;
	l.n = 0;
	if (each(dead, l.v, 1, sift, &l) == -1)
		goto fail;
	if (l.err != 0) {
		errno = l.err;
		goto fail;
	}
	/* Whole on disk before it replaces the old, or not at all. */
	if (fsync(l.out) == -1 || close(l.out) == -1 || (l.out = -1,
	    rename(tmp, dead) == -1))
		goto fail;
	goto out;
fail:
	snprintf(err, errlen, "rewrite %s: %s", dead, strerror(errno));
	if (l.out != -1)
		close(l.out);
	unlink(tmp);
	dropped = -1;
out:
	json_decref(l.done);
	json_decref(l.last);
	json_decref(l.keyed);
	view_free(l.v);
	free(done);
	free(dead);
	free(tmp);
	return dropped;
}
