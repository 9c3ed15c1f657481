/*
 * claims: which live pipeline holds which id of a run directory, so that
 * two pipelines on one run directory (overlapping cron jobs, a re-run
 * started while the last one still runs) never fetch one id twice.
 *
 * An owner is a pipeline: rfpipe names it and hands the name to rfp-fetch
 * and rfp-sink (--owner), and each of them holds a shared flock on
 * state/owners/OWNER for its life, so the owner lives while any stage of
 * it does (a sink still filing what a dead rfp-fetch fetched) and the
 * kernel releases it when the last one dies.  An rfp-fetch given no name
 * is an owner of its own.  Each holder appends "STAGE PID" to the file,
 * to name itself to an operator.  Before it admits an id rfp-fetch
 * appends {"id","owner"} to state/claims.ndjson, a whole line an id,
 * under an exclusive flock on that file, unless the id is already claimed
 * by an owner whose file is locked: then the id is another pipeline's,
 * and skipped.  The ids of one read of the manifest are claimed under one
 * lock, their lines appended in one write(2), before any of them is sent.
 * The file is emptied when its first reader finds no owner alive.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fetch/fetch.h"
#include "cmd/msg.h"
#include "lib/base/proc.h"
#include "lib/record/rec.h"
#include "lib/state/owner.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/base/x.h"

static struct {
	char	*rundir;
	char	*dir;		/* RUNDIR/state/owners */
	char	*me;		/* this pipeline's owner name */
	int	 own_fd;	/* its file, locked shared */
	int	 fd;		/* claims.ndjson, O_APPEND */
	off_t	 off;		/* read up to here */
	int	 torn;		/* the last line read has no newline */
	json_t	*by;		/* id -> owner, of what was read */
	json_t	*alive;		/* owner -> true/false, as last checked */
	json_t	*held;		/* owner -> ids left to it */
	int	 batch;		/* between claims_begin and claims_end */
	int	 locked;	/* claims.ndjson locked by this process */
	struct rec_buf pend;	/* the batch's lines, not yet written */
} C = { .own_fd = -1, .fd = -1 };

/* 1 when owner's file is locked (by a live stage of it), else 0. */
static int
alive(const char *owner)
{
	char *path;
	int fd, held;

	if (strcmp(owner, C.me) == 0)
		return 1;
	if (json_object_get(C.alive, owner) != NULL)
		return json_is_true(json_object_get(C.alive, owner));
	path = xasprintf("%s/%s", C.dir, owner);
	held = 0;
	if ((fd = files_open(path, O_RDONLY, 0)) != -1) {
		held = flock(fd, LOCK_EX | LOCK_NB) == -1 &&
		    errno == EWOULDBLOCK;
		/* Locked so, a stage of it that comes late makes another. */
		if (!held)
			unlink(path);	/* every stage of it is gone */
		close(fd);
	}
	free(path);
	json_object_set_new(C.alive, owner, json_boolean(held));
	return held;
}

/* Read the claims appended since the last read (the file locked). */
static void
catch_up(void)
{
	struct stat st;
	char *buf, *p, *nl;
	json_t *rec;
	ssize_t n;

	if (fstat(C.fd, &st) == -1)
		msg_diesys(1, "claims: fstat");
	if (st.st_size < C.off)		/* emptied by another */
		C.off = 0, C.torn = 0, json_object_clear(C.by);
	if (st.st_size == C.off)
		return;
	buf = xmalloc((size_t)(st.st_size - C.off) + 1);
	if ((n = pread(C.fd, buf, (size_t)(st.st_size - C.off), C.off)) < 0)
		msg_diesys(1, "claims: read");
	buf[n] = '\0';
	for (p = buf; (nl = memchr(p, '\n', (size_t)(buf + n - p))) != NULL;
	    p = nl + 1) {
		rec = rec_parse(p, (size_t)(nl - p), NULL, 0);
		if (rec_str(rec, "id") != NULL && rec_str(rec, "owner") != NULL)
			json_object_set_new(C.by, rec_str(rec, "id"),
			    json_string(rec_str(rec, "owner")));
		json_decref(rec);
	}
	/*
	 * A torn last line (its writer died mid-write) is read again; the
	 * next claim ends it first, not to be glued to it.
	 */
	C.torn = p < buf + n;
	C.off += p - buf;
	free(buf);
}

/*
 * Lock claims.ndjson (a signal while another holds it is not a failure:
 * its handler has run, and the lock is waited for again) and read what
 * others appended since.
 */
static void
lock(void)
{
	while (flock(C.fd, LOCK_EX) == -1)
		if (errno != EINTR)
			msg_diesys(1, "claims: flock");
	C.locked = 1;
	catch_up();
}

/* Append the lines held, in one write(2), and unlock. */
static void
unlock(void)
{
	if (C.pend.len > 0 && rec_write_all(C.fd, C.pend.s, C.pend.len) == -1)
		msg_diesys(1, "claims: write");
	C.off += (off_t)C.pend.len;
	C.pend.len = 0;
	C.locked = 0;
	flock(C.fd, LOCK_UN);
}

void
claims_open(const char *rundir, const char *owner)
{
	char *path, err[256];
	const char *id;
	json_t *o;
	int any = 0;

	C.by = json_object();
	C.alive = json_object();
	C.held = json_object();
	C.rundir = xstrdup(rundir);
	C.dir = rundir_path(rundir, RUNDIR_OWNERS, NULL);
	C.me = owner != NULL ? xstrdup(owner) : xasprintf("%ld.%ld",
	    (long)getpid(), (long)time(NULL));
	if ((C.own_fd = owner_hold(rundir, C.me, msg_prog(), err,
	    sizeof(err))) == -1)
		msg_die(1, "%s", err);
	path = rundir_path(rundir, RUNDIR_CLAIMS, NULL);
	if ((C.fd = files_open(path, O_RDWR | O_APPEND | O_CREAT, 0600)) ==
	    -1)
		msg_die(1, "open %s: %s", path, files_why(errno));
	free(path);
	lock();
	json_object_foreach(C.by, id, o)
		if (strcmp(json_string_value(o), C.me) != 0 &&
		    alive(json_string_value(o))) {
			any = 1;
			break;
		}
	/* Nobody else alive: what they claimed is nobody's. */
	if (!any && (C.off > 0 || C.torn)) {
		if (ftruncate(C.fd, 0) == -1)
			msg_diesys(1, "claims: truncate");
		C.off = 0;
		C.torn = 0;
		json_object_clear(C.by);
	}
	unlock();
}

void
claims_begin(void)
{
	if (C.fd != -1)
		C.batch = 1;
}

void
claims_end(void)
{
	C.batch = 0;
	if (C.locked)
		unlock();
}

int
claims_take(const char *id, char *holder, size_t len)
{
	const char *o;
	int rc = 1;

	/* Locked at the batch's first claim: a turn with none takes none. */
	if (!C.locked)
		lock();
	o = json_string_value(json_object_get(C.by, id));
	if (o != NULL && strcmp(o, C.me) != 0) {
		/* Checked afresh: the holder may have died since. */
		json_object_del(C.alive, o);
		if (alive(o)) {
			snprintf(holder, len, "%s", o);
			json_object_set_new(C.held, o, json_integer(
			    json_integer_value(json_object_get(C.held, o)) +
			    1));
			rc = 0;
		} else
			rc = 2;	/* a dead pipeline's: it may have filed it */
	}
	if (rc != 0 && (o == NULL || strcmp(o, C.me) != 0)) {
		/*
		 * Whole lines, the first on a line of its own: a torn line
		 * is found only on locking, before this batch held any.
		 */
		if (C.torn) {
			rec_puts(&C.pend, "\n");
			C.torn = 0;
		}
		rec_puts(&C.pend, "{\"id\":");
		rec_put_str(&C.pend, id);
		rec_puts(&C.pend, ",\"owner\":");
		rec_put_str(&C.pend, C.me);
		rec_puts(&C.pend, "}\n");
		json_object_set_new(C.by, id, json_string(C.me));
	}
	if (!C.batch)
		unlock();
	return rc;
}

json_t *
claims_held(void)
{
	return C.held;
}

void
claims_ask_again(void)
{
	json_object_clear(C.alive);
}

int
claims_alive(const char *owner)
{
	return alive(owner);
}

void
claims_settle(const char *owner)
{
	json_int_t n = json_integer_value(json_object_get(C.held, owner));

	if (n > 1)
		json_object_set_new(C.held, owner, json_integer(n - 1));
	else
		json_object_del(C.held, owner);
}

/* "rfp-sink 1234, rfp-fetch 1233": the stages of owner still running. */
static char *
stages_of(const char *owner)
{
	char *path, *buf, *p, *out, *t, *sp, stage[32];
	long pid;
	int fd;
	ssize_t n;

	path = xasprintf("%s/%s", C.dir, owner);
	out = xstrdup("");
	buf = xmalloc(4096);
	fd = files_open(path, O_RDONLY, 0);
	n = fd == -1 ? 0 : read(fd, buf, 4095);
	buf[n > 0 ? n : 0] = '\0';
	for (p = strtok_r(buf, "\n", &sp); p != NULL;
	    p = strtok_r(NULL, "\n", &sp))
		if (sscanf(p, "%31s %ld", stage, &pid) == 2 &&
		    proc_alive(pid)) {
			t = xasprintf("%s%s%s %ld", out, *out ? ", " : "",
			    stage, pid);
			free(out);
			out = t;
		}
	if (fd != -1)
		close(fd);
	free(buf);
	free(path);
	return out;
}

void
claims_close(void)
{
	const char *o;
	json_t *v;
	char *who;

	if (C.me == NULL)
		return;
	json_object_foreach(C.held, o, v) {
		who = stages_of(o);
		msg_warn("%ld ids left to pipeline %s, still running%s%s%s: "
		    "they stay its while any stage of it runs; one stopped "
		    "for good holds them until it is ended",
		    (long)json_integer_value(v), o, *who ? " (" : "", who,
		    *who ? ")" : "");
		free(who);
	}
	claims_end();
	/* The last stage of this owner out removes its file. */
	owner_release(C.rundir, C.me, C.own_fd);
	close(C.fd);
	free(C.pend.s);
	json_decref(C.by);
	json_decref(C.alive);
	json_decref(C.held);
	free(C.rundir);
	free(C.dir);
	free(C.me);
	C.me = NULL;
	C.held = NULL;
}
