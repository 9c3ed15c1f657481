/*
 * loop: the stage loop every filter stage's main runs, one record at a
 * time through a view (lib/record/view.h).
 */
#ifndef RFP_LOOP_H
#define RFP_LOOP_H

#include "lib/record/rec.h"
#include "lib/record/view.h"

/*
 * The stage loop: read fd_in to EOF and give fn each record through one
 * view, lines capped at REC_STREAM_MAX (it reads what an earlier stage
 * wrote).  A bad line (not a JSON object, too long) is said on stderr as
 * "STAGE: line N: why" and given to fn as a dead bad_input record, for it
 * to pass or file like any other.  fn returns 0 to have the record
 * written to fd_out, 1 when it wrote or consumed it itself (out gathers
 * whole records for fd_out, as rec_out), -1 on a fatal error.  Returns 0
 * at EOF, -1 on a read or write error or a fatal handler error.
 */
typedef int loop_fn(struct view *v, long lineno, struct rec_out *out,
	    void *arg);
/*
 * What a stage may add to the loop: drain is called before every read
 * (what the stage gathers elsewhere is written then; -1 stops the loop),
 * idle every idle_s real seconds while the loop waits for input.
 *
 * reads (NULL-terminated) names the contract's fields the stage reads of
 * a record without a fate (with fated, of one whose fate is not dead,
 * too: rfp-sink files those): a record with one of the wrong JSON type
 * (lib/record/field.h) is said on stderr as "STAGE: line N: field
 * "attempt": expected an integer from 1 to 1000000" and given to fn dead bad_input, with
 * its line and stage, every other member kept (its id above all).  A
 * dead letter is evidence, passed as it came.
 */
struct loop_hooks {
	int		(*drain)(void *arg);
	void		(*idle)(void *arg);
	double		 idle_s;
	const char *const *reads;
	int		 fated;
};
int	loop_run(const char *stage, int fd_in, int fd_out,
	    const struct loop_hooks *h, loop_fn *fn, void *arg);

#endif
