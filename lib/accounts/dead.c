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
#include "lib/record/scan.h"
#include "lib/state/state.h"
#include "lib/base/x.h"

int
dead_hold(const char *rundir, char *err, size_t errlen)
{
	char *path = rundir_path(rundir, RUNDIR_SINK_LOCK, NULL);
	int fd;

	if ((fd = state_open(path, O_RDWR | O_CREAT, 0600)) == -1 ||
	    flock(fd, LOCK_SH) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	free(path);
	return fd;
}

/* A line's id, copied to buf: buf, or NULL when it has none. */
static const char *
line_id(const char *line, size_t len, struct scan_rec *s, char *buf,
    size_t size)
{
	const char *id = NULL;
	json_t *rec;

	if (scan_record(line, len, s) == 0 &&
	    scan_field(s, "id", buf, size, &id) == 0)
		return id;
	/* An escape in the id, or a line the scanner leaves to jansson. */
	if ((rec = rec_parse(line, len, NULL, 0)) == NULL)
		return NULL;
	if (json_is_string(json_object_get(rec, "id")))
		id = strncpy(buf, json_string_value(json_object_get(rec, "id")),
		    size - 1);
	buf[size - 1] = '\0';
	json_decref(rec);
	return id;
}

/*
 * Call fn for each line of path with its id (NULL when it has none); an
 * absent file has no lines.  0, or -1 with errno.
 */
static int
each(const char *path, void (*fn)(const char *, size_t, const char *,
    void *), void *arg)
{
	struct rec_reader *r;
	struct scan_rec *s;
	char *line, buf[1024];
	size_t len;
	long lineno;
	int fd, rc, e = 0;

	if ((fd = state_open(path, O_RDONLY, 0)) == -1)
		return errno == ENOENT ? 0 : -1;
	r = rec_reader_new(fd, REC_STREAM_MAX);
	s = xmalloc(sizeof(*s));
	while ((rc = rec_next(r, &line, &len, &lineno)) != REC_EOF) {
		if (rc == REC_ERR) {
			e = errno ? errno : EIO;
			break;
		}
		if (rc == REC_LINE && len > 0)
			fn(line, len, line_id(line, len, s, buf, sizeof(buf)),
			    arg);
	}
	free(s);
	rec_reader_free(r);
	close(fd);
	errno = e;
	return e ? -1 : 0;
}

static void
note_done(const char *line, size_t len, const char *id, void *arg)
{
	(void)line;
	(void)len;
	if (id != NULL)
		json_object_set_new(arg, id, json_true());
}

struct letters {
	json_t	*done;		/* ids in results.ndjson */
	json_t	*last;		/* id -> the number of its last letter */
	char	**line;		/* every letter, as read ... */
	size_t	*len;		/* ... and its length */
	long	 n, cap;
};

static void
note_dead(const char *line, size_t len, const char *id, void *arg)
{
	struct letters *l = arg;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->line = xrealloc(l->line, (size_t)l->cap * sizeof(*l->line));
		l->len = xrealloc(l->len, (size_t)l->cap * sizeof(*l->len));
	}
	l->line[l->n] = xmalloc(len);
	memcpy(l->line[l->n], line, len);
	l->len[l->n] = len;
	if (id != NULL)
		json_object_set_new(l->last, id, json_integer(l->n));
	l->n++;
}

/* 1 when letter i stays: no result for its id, and no later letter. */
static int
stays(const struct letters *l, const char *line, size_t len, long i)
{
	struct scan_rec s;
	char buf[1024];
	const char *id = line_id(line, len, &s, buf, sizeof(buf));

	if (id == NULL)
		return 1;
	return json_object_get(l->done, id) == NULL &&
	    json_integer_value(json_object_get(l->last, id)) == i;
}

long
dead_compact(const char *rundir, int fd, char *err, size_t errlen)
{
	struct letters l;
	char *done = rundir_path(rundir, RUNDIR_RESULTS, NULL);
	char *dead = rundir_path(rundir, RUNDIR_DEAD, NULL);
	char *tmp = xasprintf("%s.compact", dead);
	long dropped = 0, i;
	int out = -1;

	memset(&l, 0, sizeof(l));
	l.done = json_object();
	l.last = json_object();
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		/* Another sink is still filing: the last one to end will. */
		dropped = errno == EWOULDBLOCK ? 0 : -1;
		if (dropped == -1)
			snprintf(err, errlen, "lock: %s", strerror(errno));
		goto out;
	}
	if (each(done, note_done, l.done) == -1 ||
	    each(dead, note_dead, &l) == -1) {
		snprintf(err, errlen, "read: %s", strerror(errno));
		dropped = -1;
		goto out;
	}
	for (i = 0; i < l.n; i++)
		if (!stays(&l, l.line[i], l.len[i], i))
			dropped++;
	if (dropped == 0)
		goto out;
	if ((out = state_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		goto fail;
	for (i = 0; i < l.n; i++)
		if (stays(&l, l.line[i], l.len[i], i) && (rec_write_all(out,
		    l.line[i], l.len[i]) == -1 || rec_write_all(out, "\n",
		    1) == -1))
			goto fail;
	/* Whole on disk before it replaces the old, or not at all. */
	if (fsync(out) == -1 || close(out) == -1 || (out = -1,
	    rename(tmp, dead) == -1))
		goto fail;
	goto out;
fail:
	snprintf(err, errlen, "rewrite %s: %s", dead, strerror(errno));
	if (out != -1)
		close(out);
	unlink(tmp);
	dropped = -1;
out:
	json_decref(l.done);
	json_decref(l.last);
	for (i = 0; i < l.n; i++)
		free(l.line[i]);
	free(l.line);
	free(l.len);
	free(done);
	free(dead);
	free(tmp);
	return dropped;
}
