/*
 * dead: keeping RUNDIR/dead.ndjson true to the whole run directory.  A
 * dead letter re-admitted (--retry-dead, a resume, a duplicate id) and
 * filed since in results.ndjson is no longer dead; one dead twice (each
 * resume files its record again) is dead once, as its last letter says.
 * A letter with a line_key (fetch/admit.c) is a manifest line's, not its
 * id's: the last letter of each key stays, whatever the id's are.  A
 * letter with neither is a stray line's (lib/accounts/summ.h): evidence,
 * which no filing supersedes, so it stays.
 *
 * The rewrite is a new file renamed into place, so it is done only while
 * no other sink appends to the old one: every rfp-sink holds a shared lock
 * on RUNDIR/state/sink.lock for its life (dead_hold), and the compaction
 * (dead_compact) runs only when an exclusive one is granted at once, that
 * is by the last sink of the run directory to finish.
 */
#ifndef RFP_DEAD_H
#define RFP_DEAD_H

#include <stddef.h>

/* Hold the shared lock for this process's life: its fd, or -1 and err. */
int	dead_hold(const char *rundir, char *err, size_t errlen);
/*
 * With the exclusive lock on fd (from dead_hold) granted at once, rewrite
 * dead.ndjson without the letters superseded: the number dropped; 0 when
 * another sink still holds the lock or nothing was; -1 and err on failure
 * (the old file is then left as it was).
 */
long	dead_compact(const char *rundir, int fd, char *err, size_t errlen);

#endif
