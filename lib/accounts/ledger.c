/* ledger: append-only, flock'd, fdatasync'd record of submissions. */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/base/clk.h"
#include "lib/accounts/ledger.h"
#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/state/store.h"
#include "lib/base/x.h"

static const char *names[] = { "none", "intent", "success", "not_sent",
	"rejected", "ambiguous" };

struct ledger {
	char	*path;
	int	 fd;
	off_t	 off;		/* bytes folded into keys so far */
	int	 partial;	/* the last fold ended inside a line */
	long	 lineno;
	json_t	*keys;
	int	 shared;	/* in PostgreSQL's rfp_ledger, not the file */
	void	(*on_torn)(const char *, long, const char *);
};

const char *
ledger_name(enum ledger_state st)
{
	return names[st];
}

static enum ledger_state
state_of(const char *s)
{
	int i;

	for (i = 1; i < 6; i++)
		if (s != NULL && strcmp(s, names[i]) == 0)
			return (enum ledger_state)i;
	return LEDGER_AMBIGUOUS;	/* unknown is never "unsent" */
}

static void
set(json_t *keys, const char *key, enum ledger_state st, json_t *entry,
    long line)
{
	json_object_set_new(keys, key, json_pack("{s:s,s:O,s:i}", "state",
	    names[st], "entry", entry ? entry : json_null(), "line",
	    (int)line));
}

/* Recover the key of a torn line: the writer puts "key" first. */
static char *
torn_key(const char *p, size_t n)
{
	const char *k = "\"key\":\"", *s, *e;
	char *line = strndup(p, n);

	if (line == NULL)
		return NULL;
	s = strstr(line, k);
	if (s == NULL || (e = strchr(s + strlen(k), '"')) == NULL) {
		free(line);
		return NULL;
	}
	s += strlen(k);
	memmove(line, s, (size_t)(e - s));
	line[e - s] = '\0';
	return line;
}

void
ledger_scan(json_t *keys, const char *buf, size_t len, long *lineno,
    void (*torn)(long, const char *))
{
	const char *p = buf, *nl, *end = buf + len;
	json_t *e;
	char *k;
	size_t n;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		(*lineno)++;
		if (n > 0) {
			e = json_loadb(p, n, 0, NULL);
			if (json_is_object(e) &&
			    json_is_string(json_object_get(e, "key"))) {
				set(keys, json_string_value(json_object_get(e,
				    "key")), state_of(json_string_value(
				    json_object_get(e, "event"))), e, *lineno);
			} else {
				k = torn_key(p, n);
				if (k != NULL)
					set(keys, k, LEDGER_AMBIGUOUS, NULL,
					    *lineno);
				if (torn != NULL)
					torn(*lineno, k);
				free(k);
			}
			json_decref(e);
		}
		p += n + (nl != NULL);
	}
}

static const struct ledger *reporting;	/* for torn() */

static void
torn(long line, const char *key)
{
	if (reporting->on_torn != NULL)
		reporting->on_torn(reporting->path, line, key);
}

/* Fold in what was appended since the last call; the caller holds a lock. */
static int
refresh(struct ledger *l, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	ssize_t n;
	size_t len, got = 0;

	if (fstat(l->fd, &st) == -1) {
		snprintf(err, errlen, "stat %s: %s", l->path, strerror(errno));
		return -1;
	}
	if (st.st_size <= l->off)
		return 0;
	len = (size_t)(st.st_size - l->off);
	buf = xmalloc(len);
	while (got < len) {
		n = pread(l->fd, buf + got, len - got, l->off + (off_t)got);
		if (n <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			snprintf(err, errlen, "read %s: %s", l->path,
			    n == 0 ? "short read" : strerror(errno));
			free(buf);
			return -1;
		}
		got += (size_t)n;
	}
	reporting = l;
	/* The newline a writer put after a torn line ends that line. */
	ledger_scan(l->keys, buf + (l->partial && buf[0] == '\n'), len -
	    (l->partial && buf[0] == '\n'), &l->lineno, torn);
	l->partial = buf[len - 1] != '\n';
	l->off = st.st_size;
	free(buf);
	return 0;
}

static int
lock(struct ledger *l, int how, char *err, size_t errlen)
{
	while (flock(l->fd, how) == -1) {
		if (errno == EINTR)
			continue;
		snprintf(err, errlen, "lock %s: %s", l->path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Whether fd's first line is a ledger entry (an empty file is a new
 * ledger): an object with a "key", or, torn, a line that starts as the
 * writer starts each entry.  Any other file named by mistake (a manifest,
 * a system file) is never appended to.
 */
static int
first_entry(int fd, const char *path, char *err, size_t errlen)
{
	static const char start[] = "{\"key\":\"";
	char buf[4096];
	const char *p, *nl;
	size_t len;
	ssize_t n;
	json_t *e;
	int ok;

	while ((n = pread(fd, buf, sizeof(buf), 0)) == -1 && errno == EINTR)
		;
	if (n == -1) {
		snprintf(err, errlen, "read %s: %s", path, strerror(errno));
		return -1;
	}
	for (p = buf; p < buf + n && *p == '\n'; p++)
		;
	if (p == buf + n)
		return 0;
	nl = memchr(p, '\n', (size_t)(buf + n - p));
	len = nl != NULL ? (size_t)(nl - p) : (size_t)(buf + n - p);
	e = nl != NULL ? json_loadb(p, len, 0, NULL) : NULL;
	ok = json_is_object(e) && json_is_string(json_object_get(e, "key"));
	json_decref(e);
	/*
	 * Torn (a crash, a full disk), cut short anywhere past its first
	 * two bytes: as the writer starts each entry.  (A lone "{" is the
	 * first line of any JSON document written out.)
	 */
	if (!ok && len >= 2)
		ok = memcmp(p, start, len < sizeof(start) - 1 ? len :
		    sizeof(start) - 1) == 0;
	if (!ok) {
		snprintf(err, errlen, "ledger %s: not a ledger (its first line "
		    "is not an entry); name a new file or an existing ledger",
		    path);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int
ledger_vet(const char *path, char *err, size_t errlen)
{
	int fd, rc;

	if (files_vet("ledger", path, -1, err, errlen) == -1)
		return -1;
	if ((fd = files_open_read(path)) == -1) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "ledger %s: %s", path,
		    files_why(errno));
		return -1;
	}
	rc = first_entry(fd, path, err, errlen);
	close(fd);
	return rc;
}

struct ledger *
ledger_open(const char *rundir, const char *path, char *err, size_t errlen)
{
	struct ledger *l = xcalloc(1, sizeof(*l));

	l->keys = json_object();
	if (store_shared()) {
		l->shared = 1;
		l->fd = -1;
		return l;
	}
	l->path = path != NULL ? xstrdup(path) :
	    rundir_path(rundir, RUNDIR_LEDGER, NULL);
	l->fd = files_open(l->path, O_RDWR | O_APPEND | O_CREAT, 0600);
	if (l->fd == -1)
		snprintf(err, errlen, "open %s: %s", l->path, files_why(errno));
	/* Vetted again as opened: what rfp-fetch checked may have moved. */
	else if (files_vet("ledger", l->path, l->fd, err, errlen) == -1 ||
	    first_entry(l->fd, l->path, err, errlen) == -1) {
		close(l->fd);
		l->fd = -1;
	}
	if (l->fd == -1) {
		json_decref(l->keys);
		free(l->path);
		free(l);
		return NULL;
	}
	return l;
}

int
ledger_lookup(struct ledger *l, const char *key, enum ledger_state *st,
    json_t **entry, char *err, size_t errlen)
{
	json_t *k, *e;
	int rc;

	if (l->shared) {
		if (store_ledger_lookup(key, &e, err, errlen) == -1)
			return -1;
		if (e != NULL)
			set(l->keys, key, state_of(json_string_value(
			    json_object_get(e, "event"))), e, 0);
		else
			json_object_del(l->keys, key);
		json_decref(e);
	} else {
		if (lock(l, LOCK_SH, err, errlen) == -1)
			return -1;
		rc = refresh(l, err, errlen);
		flock(l->fd, LOCK_UN);
		if (rc == -1)
			return -1;
	}
	k = json_object_get(l->keys, key);
	*st = k ? state_of(json_string_value(json_object_get(k, "state"))) :
	    LEDGER_NONE;
	*entry = k ? json_object_get(k, "entry") : NULL;
	if (*entry != NULL && json_is_null(*entry))
		*entry = NULL;
	return 0;
}

/* One entry {key, id, event, t, pid, ...extra}: "key" first, so a torn
   line still names it. */
static json_t *
entry_new(const char *key, const char *id, enum ledger_state st,
    json_t *extra)
{
	json_t *e = json_pack("{s:s,s:s,s:s,s:f,s:i}", "key", key, "id", id,
	    "event", names[st], "t", clk_now(), "pid", (int)getpid());

	if (extra != NULL)
		json_object_update_missing(e, extra);
	return e;
}

int
ledger_append(struct ledger *l, const char *key, const char *id,
    enum ledger_state st, json_t *extra, char *err, size_t errlen)
{
	json_t *e;
	char *s, *line;
	size_t len;
	int rc = 0;

	e = entry_new(key, id, st, extra);
	if (l->shared) {
		rc = store_ledger_append(e, err, errlen);
		json_decref(e);
		return rc;
	}
	s = json_dumps(e, JSON_COMPACT);
	if (lock(l, LOCK_EX, err, errlen) == -1) {
		free(s);
		json_decref(e);
		return -1;
	}
	if (refresh(l, err, errlen) == -1)
		rc = -1;
	/* After a torn line, start on a line of our own. */
	line = xasprintf("%s%s\n", files_line_ended(l->fd) == 0 ? "\n" : "",
	    s);
	len = strlen(line);
	/*
	 * Through short writes: a full disk then fails the next write(2),
	 * and its errno (ENOSPC) is the one reported.
	 */
	if (rc == 0 && (rec_write_all(l->fd, line, len) == -1 ||
	    fdatasync(l->fd) == -1)) {
		snprintf(err, errlen, "write %s: %s", l->path, strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		refresh(l, err, errlen);
	flock(l->fd, LOCK_UN);
	free(line);
	free(s);
	json_decref(e);
	return rc;
}

int
ledger_append_if(struct ledger *l, const char *key, const char *id,
    enum ledger_state st, json_t *extra, enum ledger_state seen_st,
    const json_t *seen, enum ledger_state *now_st, json_t **now, char *err,
    size_t errlen)
{
	enum ledger_state cst;
	json_t *e, *k, *cur;
	int rc;

	*now = NULL;
	if (l->shared) {
		e = entry_new(key, id, st, extra);
		rc = store_ledger_append_if(e, seen, now, err, errlen);
		json_decref(e);
		if (rc == 1)
			*now_st = *now ? state_of(json_string_value(
			    json_object_get(*now, "event"))) : LEDGER_NONE;
		return rc;
	}
	/*
	 * Held across the look and the append (flock is per open file: the
	 * append's own LOCK_EX on the same descriptor converts this one), so
	 * no other process appends for the key in between.
	 */
	if (lock(l, LOCK_EX, err, errlen) == -1)
		return -1;
	if (refresh(l, err, errlen) == -1) {
		flock(l->fd, LOCK_UN);
		return -1;
	}
	k = json_object_get(l->keys, key);
	cur = k ? json_object_get(k, "entry") : NULL;
	if (cur != NULL && json_is_null(cur))
		cur = NULL;
	cst = k ? state_of(json_string_value(json_object_get(k, "state"))) :
	    LEDGER_NONE;
	if (cst != seen_st || !(cur == NULL ? seen == NULL : seen != NULL &&
	    json_equal(cur, seen))) {
		*now_st = cst;
		*now = cur ? json_incref(cur) : NULL;
		flock(l->fd, LOCK_UN);
		return 1;
	}
	rc = ledger_append(l, key, id, st, extra, err, errlen);
	flock(l->fd, LOCK_UN);
	return rc;
}

void
ledger_on_torn(struct ledger *l, void (*fn)(const char *, long,
    const char *))
{
	l->on_torn = fn;
}

void
ledger_close(struct ledger *l)
{
	if (l == NULL)
		return;
	if (l->fd != -1)
		close(l->fd);
	json_decref(l->keys);
	free(l->path);
	free(l);
}
