/* dead: dead.ndjson without the letters a later filing superseded. */
#include <sys/file.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
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
		snprintf(err, errlen, "%s: %s", path, files_why(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	free(path);
	return fd;
}

/*
 * Call fn for each line of path with its id and its line_key (each NULL
 * when it has none, or the line is not a record), read through v, until
 * fn returns nonzero; an absent file has no lines.  0, or -1 with
 * errno.  With whole, a line over the cap is an error (EFBIG): the reader
 * keeps nothing of it, so a rewrite would lose it.
 */
static const char *unread;	/* the file each() last failed on */

static int
each(const char *path, struct view *v, int whole, int (*fn)(const char *,
    size_t, const char *, const char *, void *), void *arg)
{
	struct rec_reader *r;
	char *line;
	size_t len;
	long lineno;
	int fd, rc, e = 0;

	/* Never waiting on a FIFO planted where the file should be. */
	unread = path;
	if ((fd = files_open_read(path)) == -1)
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
		if (view_open(v, line, len, NULL, 0) == 0 ? fn(line, len,
		    view_str(v, "id"), view_str(v, REC_LINE_KEY), arg) :
		    fn(line, len, NULL, NULL, arg))
			break;
	}
	rec_reader_free(r);
	close(fd);
	errno = e;
	return e ? -1 : 0;
}

/*
 * What the compaction holds when the screen below says some letter may
 * go: an entry per dead id, none per line or per result (a million
 * results once took 120 MiB).  The letters are read once to count them,
 * and again, only when some go, to rewrite, under the exclusive lock.
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
static int
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
	return 0;
}

/*
 * A result's id, kept only when a letter has it: what is held grows with
 * the dead letters, not with the results (a million of them once took
 * 120 MiB).
 */
static int
note_done(const char *line, size_t len, const char *id, const char *key,
    void *arg)
{
	struct letters *l = arg;

	(void)line;
	(void)len;
	(void)key;
	if (id != NULL && json_object_get(l->last, id) != NULL)
		json_object_set_new(l->done, id, json_true());
	return 0;
}

/*
 * Letter number l->n, written to l->out when it stays: no later letter has
 * its line_key; without one, no result has its id and no later letter does.
 */
static int
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
	return 0;
}

/*
 * Before any of that, a screen that holds a few bits a letter, not an
 * entry an id: a Bloom filter of the letters' ids and keys.  A letter
 * whose id or key the filter has already seen, or a result whose id it
 * has, may make a letter go; with none, none goes, and the compaction
 * is done without holding the ids.  A false alarm (about 2e-9 a look)
 * only costs the exact passes.
 */
#define SCREEN_BITS	48	/* bits a letter */
#define SCREEN_K	16	/* bits a name */

struct screen {
	uint64_t *w;
	uint64_t  m;		/* bits */
	int	  maybe;	/* a letter may go */
};

/* Lines of path (the last perhaps unterminated), or -1 with errno. */
static long
count_lines(const char *path)
{
	char buf[65536], *p, *end;
	ssize_t k;
	long n = 0;
	int fd, last = '\n';

	/* Never waiting on a FIFO planted where the file should be. */
	unread = path;
	if ((fd = files_open_read(path)) == -1)
		return errno == ENOENT ? 0 : -1;
	while ((k = read(fd, buf, sizeof(buf))) > 0) {
		for (p = buf, end = buf + k; (p = memchr(p, '\n', end - p));
		    p++)
			n++;
		last = buf[k - 1];
	}
	if (k == -1) {
		k = errno;
		close(fd);
		errno = k;
		return -1;
	}
	close(fd);
	return n + (last != '\n');
}

/*
 * Set the bits of name, tagged (an id and a key are not one name), or
 * with set 0 only look: 1 when they were all set already.
 */
static int
screen_mark(struct screen *s, char tag, const char *name, int set)
{
	uint64_t h1 = 14695981039346656037ULL, h2, bit;
	const unsigned char *c = (const unsigned char *)name;
	int i, had = 1;

	h1 = (h1 ^ (unsigned char)tag) * 1099511628211ULL;
	for (; *c != '\0'; c++)
		h1 = (h1 ^ *c) * 1099511628211ULL;
	/* The second hash, a mix of the first (splitmix64's finaliser). */
	h2 = h1 ^ (h1 >> 30);
	h2 *= 0xbf58476d1ce4e5b9ULL;
	h2 ^= h2 >> 27;
	h2 *= 0x94d049bb133111ebULL;
	h2 ^= h2 >> 31;
	h2 |= 1;
	for (i = 0; i < SCREEN_K; i++) {
		bit = (h1 + (uint64_t)i * h2) % s->m;
		if (!(s->w[bit / 64] & (1ULL << (bit % 64)))) {
			had = 0;
			if (!set)
				break;
			s->w[bit / 64] |= 1ULL << (bit % 64);
		}
	}
	return had;
}

static int
screen_dead(const char *line, size_t len, const char *id, const char *key,
    void *arg)
{
	struct screen *s = arg;

	(void)line;
	(void)len;
	if (key != NULL)
		s->maybe |= screen_mark(s, 'k', key, 1);
	else if (id != NULL)
		s->maybe |= screen_mark(s, 'i', id, 1);
	return s->maybe;
}

static int
screen_done(const char *line, size_t len, const char *id, const char *key,
    void *arg)
{
	struct screen *s = arg;

	(void)line;
	(void)len;
	(void)key;
	if (id != NULL)
		s->maybe |= screen_mark(s, 'i', id, 0);
	return s->maybe;
}

/*
 * 1 when a letter of dead may go, 0 when none can, -1 with errno.  Its
 * memory is SCREEN_BITS / 8 bytes a letter.
 */
static int
screen(const char *dead, const char *done, struct view *v)
{
	struct screen s;
	long n;
	int rc = -1;

	if ((n = count_lines(dead)) == -1)
		return -1;
	if (n == 0)
		return 0;
	memset(&s, 0, sizeof(s));
	s.m = ((uint64_t)n * SCREEN_BITS + 63) / 64 * 64;
	s.w = xcalloc(s.m / 64, sizeof(*s.w));
	if (each(dead, v, 1, screen_dead, &s) == 0 && (s.maybe ||
	    each(done, v, 0, screen_done, &s) == 0))
		rc = s.maybe;
	free(s.w);
	return rc;
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
	switch (screen(dead, done, l.v)) {
	case -1:
		snprintf(err, errlen, "read %s: %s", unread,
		    files_why(errno));
		dropped = -1;
		goto out;
	case 0:
		goto out;
	}
	/* The letters first: only their ids are looked for in the results. */
	if (each(dead, l.v, 1, note_dead, &l) == -1 ||
	    each(done, l.v, 0, note_done, &l) == -1) {
		snprintf(err, errlen, "read %s: %s", unread,
		    files_why(errno));
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
