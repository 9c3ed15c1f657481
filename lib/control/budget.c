/* budget: the run-wide retry budget, one document in the store. */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/control/budget.h"
#include "lib/state/files.h"
#include "lib/state/rundir.h"
#include "lib/state/store.h"

struct budget_arg {
	long	init;
	long	left;
	int	granted;
	int	grow;		/* init is a count that rises */
	int	existing;	/* spend only from a budget already made */
	int	absent;		/* ... and there was none */
};

/*
 * Whether doc is a budget, integers 0 <= left <= total <= 2^53: 0 or
 * FILES_CORRUPT.  No run spends more (a --budget is 10^9 at most, a
 * multiple 1,000 times the documents), and a total of 2^63 - 1, renewed,
 * overflowed to a negative one the next run refused.
 */
static int
valid(const json_t *doc, long *total, long *left, char *err, size_t errlen)
{
	json_t *t = json_object_get(doc, "total");
	json_t *l = json_object_get(doc, "left");

	if (!json_is_integer(t) || !json_is_integer(l) ||
	    (*total = (long)json_integer_value(t)) < 0 ||
	    (*left = (long)json_integer_value(l)) < 0 || *left > *total ||
	    *total > (1L << 53)) {
		snprintf(err, errlen, "needs integers 0 <= left <= total <= "
		    "2^53");
		return FILES_CORRUPT;
	}
	return 0;
}

static int
budget_fn(json_t **doc, void *arg, char *err, size_t errlen)
{
	struct budget_arg *b = arg;
	long total, left;

	if (*doc == NULL && b->existing) {
		b->absent = 1;
		return 1;
	}
	if (*doc == NULL) {
		*doc = json_object();
		json_object_set_new(*doc, "total", json_integer(b->init));
		json_object_set_new(*doc, "left", json_integer(b->init));
	}
	if (valid(*doc, &total, &left, err, errlen) == FILES_CORRUPT)
		return FILES_CORRUPT;
	if (b->grow && b->init > total) {
		left += b->init - total;
		total = b->init;
		json_object_set_new(*doc, "total", json_integer(total));
	}
	b->granted = left > 0;
	if (b->granted)
		left--;
	b->left = left;
	json_object_set_new(*doc, "left", json_integer(left));
	return 0;
}

static int
spend(const char *rundir, struct budget_arg *bp, long *left, char *err,
    size_t errlen)
{
	struct budget_arg b = *bp;
	int rc;

	rc = store_update(rundir, "budget", NULL, budget_fn, &b, err, errlen);
	if (rc == -1)
		return -1;
	*left = b.left;
	if (b.absent)
		return 2;
	return b.granted;
}

int
budget_spend(const char *rundir, long init_total, long *left,
    char *err, size_t errlen)
{
	struct budget_arg b = { init_total, 0, 0, 0, 0, 0 };

	return spend(rundir, &b, left, err, errlen);
}

int
budget_spend_grown(const char *rundir, long total, long *left,
    char *err, size_t errlen)
{
	struct budget_arg b = { total, 0, 0, 1, 0, 0 };

	return spend(rundir, &b, left, err, errlen);
}

int
budget_spend_existing(const char *rundir, long total, long *left,
    char *err, size_t errlen)
{
	struct budget_arg b = { total, 0, 0, 1, 1, 0 };
	struct stat st;
	char *path;
	int rc;

	/* Asked of the file itself: opening it to update would make it. */
	if (rundir != NULL && !store_shared()) {
		path = rundir_state(rundir, "budget", NULL);
		if ((rc = lstat(path, &st)) == -1 && errno != ENOENT)
			snprintf(err, errlen, "stat %s: %s", path,
			    strerror(errno));
		rc = rc == -1 ? (errno == ENOENT ? 2 : -1) : 0;
		free(path);
		if (rc != 0) {
			*left = 0;
			return rc;
		}
	}
	return spend(rundir, &b, left, err, errlen);
}

int
budget_check(const char *rundir, char *err, size_t errlen)
{
	long total, left;

	return budget_peek(rundir, &total, &left, err, errlen) == -1 ? -1 : 0;
}

/* What is left becomes b->init; what was spent stays counted in total. */
static int
renew_fn(json_t **doc, void *arg, char *err, size_t errlen)
{
	struct budget_arg *b = arg;
	long total = 0, left = 0;

	if (*doc != NULL && valid(*doc, &total, &left, err, errlen) ==
	    FILES_CORRUPT)
		return FILES_CORRUPT;
	if (*doc == NULL)
		*doc = json_object();
	b->left = left;		/* what was left before */
	b->granted = (int)(total - left > 0);
	json_object_set_new(*doc, "total", json_integer(total - left +
	    b->init));
	json_object_set_new(*doc, "left", json_integer(b->init));
	return 0;
}

int
budget_renew(const char *rundir, long total, long *was_left, char *err,
    size_t errlen)
{
	struct budget_arg b = { total, 0, 0, 0, 0, 0 };

	if (store_update(rundir, "budget", NULL, renew_fn, &b, err,
	    errlen) == -1)
		return -1;
	*was_left = b.left;
	return 0;
}

int
budget_peek(const char *rundir, long *total, long *left, char *err,
    size_t errlen)
{
	json_t *doc;
	char *path;
	int rc;

	if (rundir == NULL || store_shared())
		return 0;
	path = rundir_state(rundir, "budget", NULL);
	rc = files_read(path, &doc, err, errlen);
	if (rc == 0 && doc != NULL && valid(doc, total, left, err, errlen) ==
	    FILES_CORRUPT) {
		files_corrupt(path, err, err, errlen);
		rc = -1;
	} else if (rc == 0 && doc != NULL)
		rc = 1;
	free(path);
	json_decref(doc);
	return rc;
}
