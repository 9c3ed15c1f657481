/*
 * files: the run directory's shared state files.  Every read-modify-write
 * happens under flock(2) on the file itself, so separate processes share
 * one budget, one pace and one breaker per endpoint; a lock dies with its
 * holder.  A file that exists but does not parse is an error, never reset.
 */
#ifndef RFP_FILES_H
#define RFP_FILES_H

#include <sys/types.h>

#include <stddef.h>

#include <jansson.h>

/*
 * Called with the file's current object (NULL when the file is new or
 * empty).  Set *doc to the new content (ownership passes), return 0 to
 * write it, 1 to leave the file as it was, -1 to fail with err set, or
 * FILES_CORRUPT when the object is none it could have written, with why
 * (the field) in err: the caller says where it is and how to start
 * afresh, and fails.
 */
typedef int files_fn(json_t **doc, void *arg, char *err, size_t errlen);
#define FILES_CORRUPT	(-2)
/*
 * Whether doc, a state file's object of kind ("rate", "breaker"), could
 * have been written by a run: 0, or -1 with why (the field) in why.
 */
typedef int files_valid_fn(const char *kind, const json_t *doc, char *why,
	    size_t n);

/*
 * Make DIR, DIR/state, DIR/docs and DIR/logs (mode 0700), or accept each
 * when it is a directory owned by this user and not writable by group or
 * others (DIR may be a symbolic link, its subdirectories may not); 0, or
 * -1 with errno and the reason in err.
 */
int	files_mkdirs(const char *rundir, char *err, size_t errlen);
/*
 * Whether a file kept outside the run directory (what: "ledger", the
 * config's) may be trusted as the run directory is: when it exists (fd
 * open on it, or -1 to look path up), a regular file owned by this user
 * and not writable by group or others; and its directory owned by this
 * user or root and not writable by group or others, or sticky.  0, or -1
 * with errno and "WHAT PATH: why" in err.
 */
int	files_vet(const char *what, const char *path, int fd, char *err,
	    size_t errlen);
/* Make or accept one more directory of the run directory, by that rule. */
int	files_mkdir(const char *path, char *err, size_t errlen);
/*
 * open(2) for every file of the run directory: O_NOFOLLOW and O_CLOEXEC
 * are added, so a symbolic link planted there is never written through.
 */
int	files_open(const char *path, int flags, mode_t mode);
/*
 * What errno e says of a run directory's file files_open (or
 * files_open_read) failed on: ELOOP is a symbolic link there, never
 * followed, not "Too many levels of symbolic links"; EINVAL, from
 * files_open_read, not a regular file.
 */
const char *files_why(int e);
/*
 * Open path to read, as files_open: a regular file only (a FIFO or a
 * device is -1 with errno EINVAL, never waited on).
 */
int	files_open_read(const char *path);
/*
 * Whether the file open on fd ends a line: 1 when it is empty or its last
 * byte is a newline, 0 when its last line is torn (its writer stopped
 * mid-write: a full disk, a crash), -1 with errno when it cannot be read.
 * An appender that finds 0 ends the torn line before its own.
 */
int	files_line_ended(int fd);
/*
 * The offset just past the last newline of the file open on fd (0 when
 * it has none): where its whole lines end, before a torn last line.  -1
 * with errno when it cannot be read.
 */
off_t	files_whole_end(int fd);
/* json_load_file through files_open; NULL with je->text set. */
json_t	*files_load(const char *path, size_t flags, json_error_t *je);
/*
 * Write doc to tmp (by files_open) and rename it to path, so path is
 * whole or as it was; 0, or -1 with errno (tmp removed).
 */
int	files_dump(const json_t *doc, const char *path, const char *tmp,
	    size_t flags);
/* Run fn on path's content under an exclusive lock; 0, 1 (no write) or -1. */
int	files_update(const char *path, files_fn *fn, void *arg, char *err,
	    size_t errlen);
/* Close the state files files_update keeps open. */
void	files_close_all(void);
/*
 * Whether the run directory's files can be used, before a run sends
 * anything: the files every run appends to (results.ndjson, dead.ndjson,
 * state/claims.ndjson, logs/attempts.ndjson) regular files or not there
 * yet, never a link, and summary.json no directory ("PATH: why" in err);
 * and unless shared (the state in PostgreSQL, so that those are all there
 * is to check),
 * state/budget.json and each file of state/rate/ and
 * state/breaker/ a JSON object (an empty one is not: it was made and
 * never written), and one valid says could have been written (valid may
 * be NULL).  0, or -1 with "PATH: corrupt state file (why); move it aside
 * to start afresh" in err.
 */
int	files_check_state(const char *rundir, int shared,
	    files_valid_fn *valid, char *err, size_t errlen);
/*
 * Say in err that the state file path is corrupt, for why (which may be
 * err itself), and how to start afresh.
 */
void	files_corrupt(const char *path, const char *why, char *err,
	    size_t errlen);
/* Read path's object under a shared lock (NULL when absent); -1 on error. */
int	files_read(const char *path, json_t **doc, char *err, size_t errlen);

#endif
