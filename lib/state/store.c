/* store: the run directory's flock'd files, or one PostgreSQL database. */
#include <sys/file.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/record/doc.h"
#include "lib/state/files.h"
#include "lib/state/pg.h"
#include "lib/state/rundir.h"
#include "lib/state/store.h"
#include "lib/base/x.h"

static int shared;	/* 1: PostgreSQL */
static json_t *slots;	/* "EP.I" -> open slot file descriptor */
/*
 * Slot files given back are kept open for the next take, as long as no
 * more than slots_keep are open (rfp-fetch says -j; those in use are no
 * more): a batch over 300 hosts kept one or more for each, and ran out of
 * descriptors.  Closed on each give past it, a -j of 32 would open a file
 * a request.
 */
#define SLOTS_KEEP	16
static long slots_keep = SLOTS_KEEP;
static json_t *mem;	/* "KIND/KEY" -> document, with no run directory */

void
store_slots_keep(long n)
{
	slots_keep = n > SLOTS_KEEP ? n : SLOTS_KEEP;
}

int
store_is_url(const char *url)
{
	return strncmp(url, "postgresql://", 13) == 0 ||
	    strncmp(url, "postgres://", 11) == 0;
}

int
store_url_check(const char *url, char *err, size_t errlen)
{
	const char *a = strstr(url, "://"), *c, *h, *e, *n, *q;
	size_t f;
	int in;

#define NO(...)	do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
	for (c = url; *c != '\0'; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			NO("a control character in the URL: write it "
			    "percent-encoded");
		else if (*c == '"')
			NO("a \" in the URL: write it as %%22");
		else if (*c == '%' && (!isxdigit((unsigned char)c[1]) ||
		    !isxdigit((unsigned char)c[2])))
			NO("a %% in the URL not followed by two hex digits: "
			    "write a %% in a password as %%25");
	if (a == NULL)
		return 0;
	a += 3;
	/* libpq's userinfo: up to the first @ before any /. */
	f = strcspn(a, "@/");
	/*
	 * postgresql://h?user=a@b&password=x: libpq takes h?user=a for the
	 * user name and the rest for a host, its password too.
	 */
	if (a[f] == '@' && (c = memchr(a, '?', f)) != NULL &&
	    memchr(c, '=', (size_t)(a + f - c)) != NULL)
		NO("a ? and an = before the first @, which libpq reads as the "
		    "user name: write an @ in the query, or a ? or = in a user "
		    "name or password, as %%40, %%3F, %%3D");
	h = a[f] == '@' ? a + f + 1 : a;
	/* The hosts: to the first / or ? outside [ ], an address in them. */
	for (e = h, in = 0; *e != '\0'; e++)
		if (*e == '[' && !in)
			in = 1;
		else if (*e == ']' && in)
			in = 0;
		else if (in && !isalnum((unsigned char)*e) &&
		    strchr(":.%-_~", *e) == NULL)
			NO("a character no address has inside [ ]: write a [ "
			    "in a user name or password as %%5B");
		else if (!in && (*e == '/' || *e == '?'))
			break;
	if (in)
		NO("a [ with no ]: write a [ in a user name or password as "
		    "%%5B");
	/*
	 * An @ after the user name and password, in a host or the database
	 * name: a raw one in a password, libpq's userinfo ended at the first.
	 */
	q = e + strcspn(e, "?");
	if (memchr(h, '@', (size_t)(q - h)) != NULL)
		NO(a[f] == '@' ? "an @ after the user name and password: write "
		    "an @ in a password or database name as %%40" : "an @ "
		    "after a /, where libpq reads no user name: write a / in "
		    "a password as %%2F, an @ in a database name as %%40");
	/* Hosts, a comma between them, each with a port of digits or none. */
	for (; h < e; h = n + 1) {
		n = memchr(h, ',', (size_t)(e - h));
		if (n == NULL)
			n = e;
		if (*h != '[' || (c = memchr(h, ']', (size_t)(n - h))) == NULL)
			c = h;
		if ((c = memchr(c, ':', (size_t)(n - c))) != NULL &&
		    strspn(c + 1, "0123456789") < (size_t)(n - c - 1))
			NO("a port that is not a number: write a / in a "
			    "password as %%2F");
	}
	/* Each parameter NAME=VALUE: a ? or & in a password split it. */
	for (c = *q == '?' ? q + 1 : q; *c != '\0'; c = n + (*n != '\0')) {
		n = c + strcspn(c, "&");
		if (n > c && memchr(c, '=', (size_t)(n - c)) == NULL)
			NO("a parameter with no = in the query: write a ? or & "
			    "in a password as %%3F, %%26");
	}
#undef NO
	return pg_url_check(url, err, errlen);
}

char *
store_redact(const char *url)
{
	return pg_redact(url);
}

int
store_init(const char *url, char *err, size_t errlen)
{
	char *r;

	if (!store_is_url(url)) {
		r = store_redact(url);
		snprintf(err, errlen, "%s: not a postgresql:// URL", r);
		free(r);
		return -1;
	}
	if (store_url_check(url, err, errlen) == -1) {
		r = xstrdup(err);
		snprintf(err, errlen, "postgresql:// URL: %s", r);
		free(r);
		return -1;
	}
	if (pg_open(url, STORE_SCHEMA, err, errlen) == -1)
		return -1;
	shared = 1;
	return 0;
}

int
store_shared(void)
{
	return shared;
}

int
store_alive(const char *id)
{
	return shared ? pg_alive(id) : -1;
}

void
store_close(void)
{
	const char *k;
	json_t *v;

	json_object_foreach(slots, k, v)
		close((int)json_integer_value(v));
	json_decref(slots);
	slots = NULL;
	json_decref(mem);
	mem = NULL;
	pg_close();
	shared = 0;
}

/*
 * No run directory: the state is this process's alone, kept in memory
 * with the same semantics as a file (a failed or declined update leaves
 * the document as it was).
 */
static int
mem_update(const char *kind, const char *key, files_fn *fn, void *arg,
    char *err, size_t errlen)
{
	char *name = key ? xasprintf("%s/%s", kind, key) : xstrdup(kind), *why;
	json_t *doc;
	int rc;

	if (mem == NULL)
		mem = json_object();
	doc = json_deep_copy(json_object_get(mem, name));
	rc = fn(&doc, arg, err, errlen);
	if (rc == FILES_CORRUPT) {
		why = xstrdup(err);
		snprintf(err, errlen, "%s: corrupt state (%s)", name, why);
		free(why);
		rc = -1;
	}
	if (rc == 0)
		json_object_set_new(mem, name, doc);
	else
		json_decref(doc);
	free(name);
	return rc;
}

int
store_update(const char *rundir, const char *kind, const char *key,
    files_fn *fn, void *arg, char *err, size_t errlen)
{
	char *safe, *path;
	int rc;

	if (shared)
		return pg_update(kind, key, fn, arg, err, errlen);
	if (rundir == NULL)
		return mem_update(kind, key, fn, arg, err, errlen);
	if (key == NULL) {
		path = rundir_state(rundir, kind, NULL);
	} else {
		safe = doc_safe_name(key);
		path = rundir_state(rundir, kind, safe);
		free(safe);
	}
	rc = files_update(path, fn, arg, err, errlen);
	free(path);
	return rc;
}

int
store_listen(const char *channel, char *err, size_t errlen)
{
	return shared ? pg_listen(channel, err, errlen) : 0;
}

int
store_news_fd(void)
{
	return shared ? pg_news_fd() : -1;
}

int
store_news(int readable, store_news_fn *fn, void *arg, char *err,
    size_t errlen)
{
	return shared ? pg_news(readable, fn, arg, err, errlen) : 0;
}

void
store_tell(const char *channel, const char *payload)
{
	/*
	 * PostgreSQL refuses a payload of STORE_TELL_MAX bytes, and the
	 * update it goes with: rfp-fetch died when a breaker opened for an
	 * endpoint named from a long URL authority.  Untold, such news is
	 * only late (a breaker is read at the next ask, a lease ends).
	 */
	if (shared && strlen(payload) < STORE_TELL_MAX)
		pg_tell(channel, payload);
}

/* Try to take slot i of ep in the run directory: 1, 0 busy, -1. */
static int
file_slot_take(const char *rundir, const char *ep, long i, char *err,
    size_t errlen)
{
	char *safe, *name, *path;
	json_t *v;
	int fd;

	if (slots == NULL)
		slots = json_object();
	safe = doc_safe_name(ep);
	name = xasprintf("%s.%ld", safe, i);
	free(safe);
	if ((v = json_object_get(slots, name)) != NULL) {
		fd = (int)json_integer_value(v);
	} else {
		path = rundir_path(rundir, RUNDIR_SLOTS, name);
		fd = files_open(path, O_RDWR | O_CREAT, 0600);
		if (fd == -1) {
			snprintf(err, errlen, "open %s: %s", path,
			    files_why(errno));
			free(path);
			free(name);
			return -1;
		}
		free(path);
		json_object_set_new(slots, name, json_integer(fd));
	}
	free(name);
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 1;
	if (errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	snprintf(err, errlen, "lock slot %ld of %s: %s", i, ep,
	    strerror(errno));
	return -1;
}

int
store_slot_take(const char *rundir, const char *ep, long n, const char *held,
    long *slot, char *err, size_t errlen)
{
	long i;
	int rc;

	if (shared)
		return pg_slot_take(ep, n, held, slot, STORE_SLOT_CHANNEL, err,
		    errlen);
	for (i = 0; i < n; i++) {
		if (held[i])
			continue;
		if ((rc = file_slot_take(rundir, ep, i, err, errlen)) != 0) {
			*slot = i;
			return rc;
		}
	}
	return 0;
}

void
store_slot_give(const char *ep, const long *idx, long n)
{
	char *safe, *name;
	json_t *v;
	long k;

	if (shared) {
		pg_slot_give(ep, idx, n, STORE_SLOT_CHANNEL);
		return;
	}
	safe = doc_safe_name(ep);
	for (k = 0; k < n; k++) {
		name = xasprintf("%s.%ld", safe, idx[k]);
		if ((v = json_object_get(slots, name)) != NULL &&
		    (long)json_object_size(slots) > slots_keep) {
			/* Closed, it is given back too. */
			close((int)json_integer_value(v));
			json_object_del(slots, name);
		} else if (v != NULL)
			flock((int)json_integer_value(v), LOCK_UN);
		free(name);
	}
	free(safe);
}

int
store_ledger_append(const json_t *entry, char *err, size_t errlen)
{
	return pg_ledger_append(entry, err, errlen);
}

int
store_ledger_append_if(const json_t *entry, const json_t *seen,
    json_t **now, char *err, size_t errlen)
{
	return pg_ledger_append_if(entry, seen, now, err, errlen);
}

int
store_ledger_lookup(const char *key, json_t **entry, char *err,
    size_t errlen)
{
	return pg_ledger_lookup(key, entry, err, errlen);
}
