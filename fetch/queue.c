/*
 * rfp-fetch's queue: jobs held until their not_before (a min-heap), and
 * jobs ready to start, in the order they came, but for retries the portal
 * gave a time (a Retry-After): those go first.  The portal is up and
 * pacing, and such a retry has waited out its appointment once; it must
 * not wait again behind the manifest read ahead of it (up to 4 x -j + 64
 * records): a refusal late in a paced batch had made the last documents
 * retries sent two seconds after everything else.  Other retries
 * (timeouts, resets, errors: an outage, perhaps) keep their place, so
 * that an outage's failed attempts are spread over the documents, not
 * spent on a few: put first, retries that timed out under a hang used up
 * their attempts in seconds, dead "exhausted", while fresh documents
 * waited.  The gate decides which ready job starts; the queue only keeps
 * them.
 */
#include <stdlib.h>

#include <jansson.h>

#include "lib/base/clk.h"
#include "lib/record/doc.h"
#include "lib/record/rec.h"
#include "lib/base/x.h"
#include "fetch/fetch.h"

static struct {
	struct job	*ready, *ready_tail;
	struct job	*retry_tail;	/* the last retry: retries come first */
	long		 nready;
	struct job	**wait;		/* min-heap on not_before */
	long		 nwait, capwait;
} Q;

static void
heap_push(struct job *j)
{
	long i = Q.nwait++, p;

	gate_waiting(j->ep, 1);
	if (Q.nwait > Q.capwait) {
		Q.capwait = Q.capwait ? Q.capwait * 2 : 64;
		Q.wait = xrealloc(Q.wait, (size_t)Q.capwait * sizeof(*Q.wait));
	}
	while (i > 0 && Q.wait[p = (i - 1) / 2]->not_before > j->not_before) {
		Q.wait[i] = Q.wait[p];
		i = p;
	}
	Q.wait[i] = j;
}

static struct job *
heap_pop(void)
{
	struct job *top = Q.wait[0], *last = Q.wait[--Q.nwait];
	long i = 0, c;

	gate_waiting(top->ep, -1);
	while ((c = 2 * i + 1) < Q.nwait) {
		if (c + 1 < Q.nwait &&
		    Q.wait[c + 1]->not_before < Q.wait[c]->not_before)
			c++;
		if (last->not_before <= Q.wait[c]->not_before)
			break;
		Q.wait[i] = Q.wait[c];
		i = c;
	}
	if (Q.nwait > 0)
		Q.wait[i] = last;
	return top;
}

static void
ready_push(struct job *j)
{
	struct job **at;

	gate_ready(j->ep, 1);
	if (j->retry)
		at = Q.retry_tail != NULL ? &Q.retry_tail->next : &Q.ready;
	else
		at = Q.ready_tail != NULL ? &Q.ready_tail->next : &Q.ready;
	j->next = *at;
	*at = j;
	if (j->next == NULL)
		Q.ready_tail = j;
	if (j->retry)
		Q.retry_tail = j;
	Q.nready++;
}

void
job_free(struct job *j)
{
	/* A redirect's next hop never sent: its slot goes back. */
	if (j->hop != NULL) {
		gate_give(j->ep, j->hop->slot);
		xfer_free(j->hop);
	}
	json_decref(j->rec);
	json_decref(j->l_seen);
	free(j);
}

void
queue_put(struct job *j)
{
	if (j->not_before > clk_now())
		heap_push(j);
	else
		ready_push(j);
}

void
queue_add(json_t *rec, long lineno, int fresh)
{
	struct job *j = xcalloc(1, sizeof(*j));
	char *ep = doc_endpoint(rec);

	if (json_object_get(rec, "endpoint") == NULL)
		json_object_set_new(rec, "endpoint", json_string(ep));
	j->rec = rec;
	j->ep = gate_endpoint(ep);
	if (fresh)
		gate_admitted(j->ep);
	j->lineno = lineno;
	j->not_before = rec_num(rec, "not_before", 0);
	j->retry = rec_int(rec, "attempt", 0) > 0 &&
	    rec_num(rec, "retry_after_s", -1) >= 0;
	free(ep);
	queue_put(j);
}

void
queue_due(double now)
{
	while (Q.nwait > 0 && Q.wait[0]->not_before <= now)
		ready_push(heap_pop());
}

void
queue_scan(int (*visit)(struct job *, void *), void *arg)
{
	struct job *j, *next, **pp = &Q.ready;
	struct ep *ep;
	int taken = 0, v;

	while ((j = *pp) != NULL) {
		/* A visit that takes the job may free it, or queue it anew. */
		next = j->next;
		ep = j->ep;
		if ((v = visit(j, arg)) == -1)
			break;
		if (v == 0) {
			pp = &j->next;
			continue;
		}
		*pp = next;
		Q.nready--;
		gate_ready(ep, -1);
		taken = 1;
	}
	/*
	 * Re-find the tails after unlinking.  A turn of the loop with no room
	 * takes nothing: walking the jobs read ahead (up to 4 x -j + 64) each
	 * turn, twice, was 5 % of rfp-fetch's time on a fast portal.
	 */
	if (!taken)
		return;
	Q.ready_tail = Q.retry_tail = NULL;
	for (j = Q.ready; j != NULL; j = j->next) {
		Q.ready_tail = j;
		if (j->retry)
			Q.retry_tail = j;
	}
}

long
queue_ready(void)
{
	return Q.nready;
}

long
queue_held(void)
{
	return Q.nwait;
}

double
queue_next(void)
{
	return Q.nwait > 0 ? Q.wait[0]->not_before : 0;
}

void
queue_cut(void)
{
	struct job *j;

	while (Q.nwait > 0) {
		j = heap_pop();
		out_kill(j->rec, 0, FATE_DEADLINE_CUT, "held for a retry at "
		    "the deadline");
		job_free(j);
	}
	while ((j = Q.ready) != NULL) {
		Q.ready = j->next;
		gate_ready(j->ep, -1);
		out_kill(j->rec, 0, FATE_DEADLINE_CUT, j->hop != NULL ?
		    "its redirect not followed by the deadline" :
		    rec_int(j->rec, "attempt", 0) > 0 ? "its retry not "
		    "started by the deadline" : "not started by the deadline");
		job_free(j);
	}
	Q.ready_tail = Q.retry_tail = NULL;
	Q.nready = 0;
}

void
queue_drop(void)
{
	struct job *j;

	while (Q.nwait > 0)
		job_free(heap_pop());
	while ((j = Q.ready) != NULL) {
		Q.ready = j->next;
		gate_ready(j->ep, -1);
		job_free(j);
	}
	Q.ready_tail = Q.retry_tail = NULL;
	Q.nready = 0;
	free(Q.wait);
	Q.wait = NULL;
	Q.capwait = 0;
}
