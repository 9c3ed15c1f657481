/*
 * owner: a pipeline's owner file, RUNDIR/state/owners/NAME.  Every stage
 * of the pipeline that is given the name holds the file locked shared for
 * its life, so the owner is alive while any stage of it runs; a reader
 * tells by a non-blocking exclusive lock (fetch/claims.c).  The last
 * stage out removes it.
 */
#ifndef RFP_OWNER_H
#define RFP_OWNER_H

#include <stddef.h>

/* 1 when name is an owner name: 1 to 40 of [A-Za-z0-9._-], no leading '.'. */
int	owner_name_ok(const char *name);
/*
 * Make the owners directory if need be, open name's file and lock it
 * shared, again when the file locked is no longer the one there (a reader
 * took it for a dead owner's and removed it meanwhile); write "WHO PID"
 * in it for an operator (who: the stage's name).  The fd, or -1 and err.
 */
int	owner_hold(const char *rundir, const char *name, const char *who,
	    char *err, size_t errlen);
/* Let it go: removed when no other stage holds it.  fd -1: nothing. */
void	owner_release(const char *rundir, const char *name, int fd);

#endif
