/*
 * filed: what a run directory has filed, as results.ndjson and
 * dead.ndjson say: how each id stands, and the line keys of the letters
 * of manifest lines (fetch/admit.c, line_key).  rfp-fetch skips what is
 * filed when it resumes; rfp-queue pull closes it in the queue instead of
 * handing it on.  Only whole lines are read: a torn last line (a crash
 * mid-write) was never a record, and its document is not filed.  Each
 * id's record stays in its file, and is read again when it is asked for.
 */
#ifndef RFP_FILED_H
#define RFP_FILED_H

#include <stddef.h>

/* In the order one word on an id outweighs another. */
enum filed_as {
	FILED_NOT,		/* in neither file */
	FILED_CUT,		/* deadline_cut letters alone: the deadline
				   cut it, it never failed, and the next
				   start on the run directory takes it up */
	FILED_DEAD,		/* a letter but a cut: its last one */
	FILED_DONE		/* a result, its last one: a dead letter of
				   an id filed since in results.ndjson is no
				   longer dead (lib/accounts/dead.h) */
};

struct filed;

/*
 * How a line files its id: a line of results.ndjson (result) or a letter
 * of dead.ndjson with its dead_reason (why, NULL: none).  Of an id's
 * lines the weightiest stands, and of those the last.
 */
enum filed_as filed_weight(int result, const char *why);

/*
 * What RUNDIR has filed; with results_only (--retry-dead: the dead are to
 * be fetched again), results.ndjson alone.  Nothing is read yet.
 */
struct filed *filed_new(const char *rundir, int results_only);
/* A line filed_read passed over: unreadable, or torn (its file's last). */
typedef void filed_skip_fn(const char *path, long lineno, int torn,
	    void *arg);
/*
 * Read what the files hold that was not read before (all of it again when
 * one was replaced or shrank, as rfp-sink's compaction replaces
 * dead.ndjson); a file that does not exist is empty.  skip, which may be
 * NULL, is told of each line passed over.  0, or -1 with "open PATH:
 * why" or "read PATH: why" in err.
 */
int	filed_read(struct filed *f, filed_skip_fn *skip, void *arg,
	    char *err, size_t errlen);
/* Whether a file is not as filed_read left it (a stat each). */
int	filed_changed(const struct filed *f);
/* How id stands (NULL: FILED_NOT). */
enum filed_as filed_as(const struct filed *f, const char *id);
/* Whether a letter of dead.ndjson holds the line key key. */
int	filed_keyed(const struct filed *f, const char *key);
/*
 * The record that files id (FILED_CUT, FILED_DEAD or FILED_DONE), read
 * again from its file: allocated, NUL-terminated, without its newline,
 * its length in *len.  NULL when id is not filed, or what is read there now is not a
 * record of id.
 */
char	*filed_record(const struct filed *f, const char *id, size_t *len);
/* Close the files and free f (NULL: nothing). */
void	filed_free(struct filed *f);

#endif
