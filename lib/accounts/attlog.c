/* attlog: appending to RUNDIR/logs/attempts.ndjson, one write a line. */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/attlog.h"
#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/base/x.h"

/* Lines held by attlog_hold are written together past this many bytes. */
#define HOLD_MAX	65536

struct attlog {
	int	 fd;	/* -1 once a write failed */
	char	*path;
	int	 hold;	/* lines wait for attlog_flush */
	struct rec_buf buf;	/* whole lines not yet written, then the
				   one being written */
};

static const char *const names[ATTLOG_NTYPES] = {
	[ATTLOG_START] = "start",
	[ATTLOG_REQ] = "req",
	[ATTLOG_DELAY] = "delay",
	[ATTLOG_BREAKER] = "breaker",
	[ATTLOG_PACE] = "pace"
};

const char *
attlog_name(enum attlog_type t)
{
	return (unsigned)t < ATTLOG_NTYPES ? names[t] : NULL;
}

int
attlog_type(const char *name)
{
	int i;

	for (i = 0; name != NULL && i < ATTLOG_NTYPES; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

struct attlog *
attlog_open(const char *rundir)
{
	struct attlog *l;
	char *path = rundir_path(rundir, RUNDIR_ATTEMPTS, NULL);
	int fd, e;

	if ((fd = files_open(path, O_RDWR | O_APPEND | O_CREAT, 0600)) ==
	    -1) {
		e = errno;
		free(path);
		errno = e;
		return NULL;
	}
	/*
	 * A line torn by an earlier run (a full disk, a crash) is ended
	 * here, so this run's first line is not glued to it.
	 */
	if ((e = files_line_ended(fd)) == -1 || (e == 0 &&
	    write(fd, "\n", 1) != 1)) {
		e = errno;
		close(fd);
		free(path);
		errno = e;
		return NULL;
	}
	l = xcalloc(1, sizeof(*l));
	l->fd = fd;
	l->path = path;
	return l;
}

const char *
attlog_path(const struct attlog *l)
{
	return l->path;
}

/*
 * Write n bytes of whole lines with one write(2) (O_APPEND: never between
 * another writer's).  What a failed write wrote is taken back, so the file
 * ends in a whole line, and the log takes nothing more.
 */
static int
put(struct attlog *l, const char *s, size_t n)
{
	struct stat st;
	size_t off = 0;
	ssize_t w;

	while (off < n) {
		if ((w = write(l->fd, s + off, n - off)) == -1) {
			if (errno == EINTR)
				continue;
			w = errno;
			if (off > 0 && fstat(l->fd, &st) == 0 &&
			    st.st_size >= (off_t)off &&
			    ftruncate(l->fd, st.st_size - (off_t)off) == -1)
				off = 0;	/* the write's error is said */
			close(l->fd);
			l->fd = -1;
			errno = (int)w;
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}

void
attlog_hold(struct attlog *l)
{
	if (l != NULL)
		l->hold = 1;
}

int
attlog_flush(struct attlog *l)
{
	int rc;

	if (l == NULL || l->buf.len == 0)
		return 0;
	rc = l->fd == -1 ? 0 : put(l, l->buf.s, l->buf.len);
	l->buf.len = 0;
	return rc;
}

/* 13 digits: epoch seconds to the millisecond, and no noise. */
#define PREC	13

int
attlog_line(struct attlog *l, enum attlog_type t, double at,
    const char *fields, size_t n)
{
	struct rec_buf *b;
	size_t held;
	int rc;

	if (l == NULL || l->fd == -1)
		return 0;
	/* Written after the lines held (none, unless held). */
	b = &l->buf;
	held = b->len;
	/* "t" and "at" first: a line reads the same to a person and to jq. */
	rec_puts(b, "{\"t\":");
	rec_put_str(b, attlog_name(t));
	rec_puts(b, ",\"at\":");
	rec_put_real(b, at, PREC);
	if (n > 0) {
		rec_puts(b, ",");
		rec_put(b, fields, n);
	}
	rec_puts(b, "}\n");
	if (!l->hold) {
		rc = put(l, b->s, b->len);
		b->len = 0;
		return rc;
	}
	/* Past the hold: the lines held before go out first, by themselves. */
	if (b->len > HOLD_MAX && held > 0) {
		if (put(l, b->s, held) == -1) {
			b->len = 0;
			return -1;
		}
		memmove(b->s, b->s + held, b->len - held);
		b->len -= held;
	}
	return 0;
}

int
attlog_write(struct attlog *l, enum attlog_type t, double at, json_t *fields)
{
	char *s;
	size_t n;
	int rc;

	if (l == NULL || l->fd == -1) {
		json_decref(fields);
		return 0;
	}
	if (!json_is_object(fields)) {
		json_decref(fields);
		return attlog_line(l, t, at, NULL, 0);
	}
	/* Its own "t" and "at" are not this line's (a copy loses them: the
	 * caller may hold a reference to its object yet). */
	if (json_object_get(fields, "t") != NULL ||
	    json_object_get(fields, "at") != NULL) {
		json_t *c = json_copy(fields);

		json_decref(fields);
		if ((fields = c) == NULL) {
			errno = ENOMEM;
			return -1;
		}
		json_object_del(fields, "t");
		json_object_del(fields, "at");
	}
	s = json_dumps(fields, JSON_COMPACT | JSON_PRESERVE_ORDER |
	    JSON_REAL_PRECISION(PREC));
	json_decref(fields);
	if (s == NULL) {
		errno = ENOMEM;
		return -1;
	}
	/* Its members, without the braces. */
	n = strlen(s);
	rc = attlog_line(l, t, at, s + 1, n > 2 ? n - 2 : 0);
	free(s);
	return rc;
}

int
attlog_pace(struct attlog *l, struct attlog_watch *w, const char *ep,
    double rate, long window, double at)
{
	const char *ev;
	double was = w->rate;

	if (rate == was)
		return 0;
	w->rate = rate;
	ev = was == 0 ? "start" : rate == 0 ? "free" : rate < was ? "cut" :
	    NULL;
	if (ev == NULL)
		return 0;
	return attlog_write(l, ATTLOG_PACE, at, json_pack(
	    "{s:s,s:s,s:f,s:f,s:I}", "ep", ep, "ev", ev, "rate", rate, "was",
	    was, "window", (json_int_t)window));
}

int
attlog_breaker(struct attlog *l, struct attlog_watch *w, const char *ep,
    const json_t *breaker, double since)
{
	const json_t *tr;
	const char *to;
	size_t i;
	double t;
	int rc = 0;

	to = json_string_value(json_object_get(breaker, "state"));
	if (to != NULL)
		snprintf(w->brk, sizeof(w->brk), "%s", to);
	json_array_foreach(json_object_get(breaker, "transitions"), i, tr) {
		t = json_number_value(json_object_get(tr, "t"));
		to = json_string_value(json_object_get(tr, "to"));
		if (t <= w->brk_t || t < since || to == NULL)
			continue;
		w->brk_t = t;
		if (attlog_write(l, ATTLOG_BREAKER, t, json_pack("{s:s,s:s}",
		    "ep", ep, "to", to)) == -1)
			rc = -1;
	}
	return rc;
}

const char *
attlog_breaker_state(const struct attlog_watch *w)
{
	/* A constant: kept by a request as its state at its send. */
	return strcmp(w->brk, "open") == 0 ? "open" : strcmp(w->brk,
	    "half_open") == 0 ? "half_open" : "closed";
}

void
attlog_close(struct attlog *l)
{
	if (l == NULL)
		return;
	(void)attlog_flush(l);	/* a failure here was the caller's to see */
	if (l->fd != -1)
		close(l->fd);
	free(l->buf.s);
	free(l->path);
	free(l);
}
