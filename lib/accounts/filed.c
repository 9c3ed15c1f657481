/* filed: the ids a run directory has filed, and where their records are. */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/filed.h"
#include "lib/base/x.h"
#include "lib/record/fate.h"
#include "lib/record/rec.h"
#include "lib/state/files.h"
#include "lib/state/rundir.h"

/* How an id stands, and the line of the record that says so. */
struct spot {
	enum filed_as	 as;
	int		 file;		/* its index in filed.file */
	off_t		 at;
	size_t		 len;
};

struct filed {
	struct ffile {
		enum rundir_file which;
		char	*path;
		int	 fd;		/* -1: none at the last read */
		dev_t	 dev;
		ino_t	 ino;
		off_t	 size;		/* as the last read saw it */
		off_t	 end;		/* read to: its whole lines */
		long	 lineno;	/* lines read */
	} file[2];
	int		 nfiles;
	json_t		*ids;		/* id -> index in spots */
	json_t		*keys;		/* line key -> true */
	struct spot	*spots;
	size_t		 nspots, cap;
};

struct filed *
filed_new(const char *rundir, int results_only)
{
	static const enum rundir_file which[] = { RUNDIR_RESULTS, RUNDIR_DEAD };
	struct filed *f = xcalloc(1, sizeof(*f));
	int i;

	f->nfiles = results_only ? 1 : 2;
	for (i = 0; i < f->nfiles; i++) {
		f->file[i].which = which[i];
		f->file[i].path = rundir_path(rundir, which[i], NULL);
		f->file[i].fd = -1;
	}
	f->ids = json_object();
	f->keys = json_object();
	return f;
}

static const struct spot *
spot_of(const struct filed *f, const char *id)
{
	json_t *v = id != NULL ? json_object_get(f->ids, id) : NULL;

	return v != NULL ? &f->spots[json_integer_value(v)] : NULL;
}

/* id's spot, made FILED_NOT when it has none. */
static struct spot *
spot_new(struct filed *f, const char *id)
{
	json_t *v = json_object_get(f->ids, id);

	if (v != NULL)
		return &f->spots[json_integer_value(v)];
	if (f->nspots == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 256;
		f->spots = xrealloc(f->spots, f->cap * sizeof(*f->spots));
	}
	json_object_set_new(f->ids, id, json_integer((json_int_t)f->nspots));
	memset(&f->spots[f->nspots], 0, sizeof(f->spots[0]));
	return &f->spots[f->nspots++];
}

enum filed_as
filed_weight(int result, const char *why)
{
	if (result)
		return FILED_DONE;
	return why != NULL && fate_reason_of(why) == FATE_DEADLINE_CUT ?
	    FILED_CUT : FILED_DEAD;
}

/*
 * One line of file i, at offset at; -1 when it is no record.  A letter
 * keyed by its line is that line's, never its id's.
 */
static int
note(struct filed *f, int i, const char *line, size_t len, off_t at)
{
	enum filed_as own;
	const char *why;
	struct spot *s;
	char err[64];
	json_t *rec;

	if ((rec = rec_parse(line, len, err, sizeof(err))) == NULL)
		return -1;
	why = rec_str(rec, "dead_reason");
	if (f->file[i].which == RUNDIR_DEAD && rec_str(rec, REC_LINE_KEY) !=
	    NULL)
		json_object_set_new(f->keys, rec_str(rec, REC_LINE_KEY),
		    json_true());
	else if (rec_str(rec, "id") != NULL) {
		s = spot_new(f, rec_str(rec, "id"));
		own = filed_weight(f->file[i].which == RUNDIR_RESULTS, why);
		/*
		 * The weightiest word on it stands, said last by the last
		 * line of that weight: its record.
		 */
		if (own >= s->as) {
			s->as = own;
			s->file = i;
			s->at = at;
			s->len = len;
		}
	}
	json_decref(rec);
	return 0;
}

/* Forget all that was read: a file was replaced. */
static void
forget(struct filed *f)
{
	int i;

	for (i = 0; i < f->nfiles; i++) {
		if (f->file[i].fd != -1)
			close(f->file[i].fd);
		f->file[i].fd = -1;
		f->file[i].size = f->file[i].end = 0;
		f->file[i].lineno = 0;
	}
	json_object_clear(f->ids);
	json_object_clear(f->keys);
	f->nspots = 0;
}

/* Whether file i is another than the one read, or shorter. */
static int
replaced(const struct ffile *ff)
{
	struct stat st;

	if (ff->fd == -1)
		return 0;
	return stat(ff->path, &st) == -1 || st.st_dev != ff->dev ||
	    st.st_ino != ff->ino || st.st_size < ff->end;
}

/* Read file i's whole lines from where the last read ended; 0 or -1. */
static int
read_file(struct filed *f, int i, filed_skip_fn *skip, void *arg)
{
	struct ffile *ff = &f->file[i];
	struct rec_reader *r;
	struct stat st;
	enum rec_rc rc;
	char *line;
	size_t len;
	long lineno = 0;
	off_t end;

	if (ff->fd == -1 && (ff->fd = files_open_read(ff->path)) == -1)
		return errno == ENOENT ? 0 : -1;
	if (fstat(ff->fd, &st) == -1 || (end = files_whole_end(ff->fd)) == -1 ||
	    lseek(ff->fd, ff->end, SEEK_SET) == -1)
		return -1;
	ff->dev = st.st_dev;
	ff->ino = st.st_ino;
	ff->size = st.st_size;
	r = rec_reader_new(ff->fd, REC_STREAM_MAX);
	rec_reader_limit(r, end - ff->end);
	while ((rc = rec_next(r, &line, &len, &lineno)) == REC_LINE ||
	    rc == REC_TOOLONG) {
		/*
		 * Unreadable: torn, and ended by an older rfp-sink; or too
		 * long to be a record (by hand: rfp-sink writes none).
		 */
		if ((rc == REC_TOOLONG || note(f, i, line, len, ff->end +
		    rec_reader_at(r)) == -1) && skip != NULL)
			skip(ff->path, ff->lineno + lineno, 0, arg);
	}
	rec_reader_free(r);
	if (rc == REC_ERR)
		return -1;
	ff->lineno += lineno;
	ff->end = end;
	if (end < st.st_size && skip != NULL)
		skip(ff->path, ff->lineno + 1, 1, arg);
	return 0;
}

int
filed_read(struct filed *f, filed_skip_fn *skip, void *arg, char *err,
    size_t errlen)
{
	int i;

	for (i = 0; i < f->nfiles; i++)
		if (replaced(&f->file[i])) {
			forget(f);
			break;
		}
	for (i = 0; i < f->nfiles; i++)
		if (read_file(f, i, skip, arg) == -1) {
			snprintf(err, errlen, "%s %s: %s", f->file[i].fd == -1 ?
			    "open" : "read", f->file[i].path,
			    files_why(errno));
			return -1;
		}
	return 0;
}

int
filed_changed(const struct filed *f)
{
	const struct ffile *ff;
	struct stat st;
	int i;

	/* Gone, come, replaced or grown. */
	for (i = 0; i < f->nfiles; i++) {
		ff = &f->file[i];
		if (stat(ff->path, &st) == -1 ? ff->fd != -1 : (ff->fd == -1 ||
		    st.st_dev != ff->dev || st.st_ino != ff->ino ||
		    st.st_size != ff->size))
			return 1;
	}
	return 0;
}

enum filed_as
filed_as(const struct filed *f, const char *id)
{
	const struct spot *s = spot_of(f, id);

	return s != NULL ? s->as : FILED_NOT;
}

int
filed_keyed(const struct filed *f, const char *key)
{
	return json_object_get(f->keys, key) != NULL;
}

char *
filed_record(const struct filed *f, const char *id, size_t *len)
{
	const struct spot *s = spot_of(f, id);
	json_t *rec = NULL;
	char *buf, err[64];
	int ok;

	if (s == NULL || s->as < FILED_CUT)
		return NULL;
	buf = xmalloc(s->len + 1);
	ok = pread(f->file[s->file].fd, buf, s->len, s->at) ==
	    (ssize_t)s->len;
	buf[s->len] = '\0';
	/* The same line, unless the file changed under a stale read. */
	ok = ok && (rec = rec_parse(buf, s->len, err, sizeof(err))) != NULL &&
	    rec_str(rec, "id") != NULL && strcmp(rec_str(rec, "id"), id) == 0;
	json_decref(rec);
	if (!ok) {
		free(buf);
		return NULL;
	}
	*len = s->len;
	return buf;
}

void
filed_free(struct filed *f)
{
	int i;

	if (f == NULL)
		return;
	for (i = 0; i < f->nfiles; i++) {
		if (f->file[i].fd != -1)
			close(f->file[i].fd);
		free(f->file[i].path);
	}
	json_decref(f->ids);
	json_decref(f->keys);
	free(f->spots);
	free(f);
}
