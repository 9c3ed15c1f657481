/*
 * rfp-fetch's output: records leave on stdout, whole, in pieces a pipe
 * takes atomically, and are counted until rfp-sink acknowledges them.
 * The room every other one writes through; it calls none of them.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/base/clk.h"
#include "lib/record/fate.h"
#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "fetch/fetch.h"

#define OUT_PIECE (64 * 1024)	/* stdout is written in pieces this big */
#define OUT_DELAY 0.01	/* ... or once the oldest record waited this long */

static struct {
	struct rec_buf b;	/* pending output */
	size_t	 off;		/* ... of which written */
	double	 at;		/* clk_mono() the oldest was queued */
	long	 outstanding;	/* emitted, not yet acknowledged */
} O;

void
out_emit(json_t *rec)
{
	size_t at = O.b.len;

	if (O.b.len == 0)
		O.at = clk_mono();
	if (rec_dump_to(&O.b, rec) == -1)
		msg_die(1, "a record nested too deep to write");
	/*
	 * A ledger reply that would take the record past its share of
	 * REC_ADDED_MAX is not passed on (the ledger keeps it): a record
	 * later stages cannot read would lose its id.
	 */
	if (O.b.len - at > REC_LINE_MAX + REC_ADDED_MAX / 2 &&
	    json_object_get(rec, "reply") != NULL) {
		O.b.len = at;
		json_object_set_new(rec, "reply", json_null());
		if (rec_dump_to(&O.b, rec) == -1)
			msg_die(1, "a record nested too deep to write");
	}
	O.outstanding++;
}

void
out_kill(json_t *rec, long lineno, enum fate_reason reason,
    const char *detail)
{
	if (lineno > 0)
		json_object_set_new(rec, "line", json_integer(lineno));
	rec_kill(rec, reason, detail);
	out_emit(rec);
}

void
out_acked(void)
{
	O.outstanding--;
}

long
out_outstanding(void)
{
	return O.outstanding;
}

int
out_pending(void)
{
	return O.b.len > 0;
}

int
out_flush(void)
{
	ssize_t n;

	while (O.off < O.b.len) {
		n = write(STDOUT_FILENO, O.b.s + O.off, rec_piece(O.b.s +
		    O.off, O.b.len - O.off));
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -1;
		}
		O.off += (size_t)n;
	}
	O.off = O.b.len = 0;
	return 0;
}

/*
 * Each write wakes the three stages downstream, and written a turn at a
 * time (eight records, in a fast run) the waking cost them more than the
 * records.  So output waits for a full piece, or OUT_DELAY, but never
 * while nothing is on the wire (nothing would come soon to fill it) or
 * once a write is under way.
 */
int
out_due(int idle)
{
	return O.b.len > 0 && (O.off > 0 || O.b.len >= OUT_PIECE || idle ||
	    clk_mono() - O.at >= OUT_DELAY);
}

double
out_due_in(void)
{
	return O.at + OUT_DELAY - clk_mono();
}

void
out_free(void)
{
	free(O.b.s);
	O.b = (struct rec_buf){ NULL, 0, 0 };
	O.off = 0;
}
