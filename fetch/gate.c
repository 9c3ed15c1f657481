/*
 * rfp-fetch's gate: endpoints, their slots (shared through lib/store),
 * their pace and breaker, and what answers tell those two.  Whether a
 * ready job may start now is decided here and nowhere else.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/accounts/attlog.h"
#include "lib/control/breaker.h"
#include "lib/record/class.h"
#include "lib/record/view.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/record/doc.h"
#include "lib/record/hdr.h"
#include "lib/record/fate.h"
#include "cmd/msg.h"
#include "lib/control/pace.h"
#include "lib/record/rec.h"
#include "lib/state/store.h"
#include "lib/base/x.h"
#include "fetch/fetch.h"

#define FB_DEFER 0.05	/* real seconds news may wait before it is told */
#define FREE_S	0.05	/* ... and a free pace or closed breaker is trusted */
#define FREE_RATE 2000.0	/* a pace this fast holds nothing back */
#define UP_S	10.0	/* logical s a success says an endpoint is up */
#define LAG_MAX	0.005	/* real s: a longer way to the wire counts as this */
#define YOUNG_N	64	/* answers before which sends go in rounds ... */
#define ROUND_X	2.0	/* ... a round waiting for its last answers this
			   many times as long as its first took ... */
#define ROUND_S	0.005	/* ... and this many real seconds more */
#define AGAIN_S	0.005	/* real s before a place not found is looked for again */
#define LEASE_S	0.025	/* real s of sends a shared pace grants ahead */
#define END_S	2.0	/* logical s of sends left: the work ends soon */
#define HANG_S	2.0	/* logical s unanswered that a request is hung, */
#define HANG_X	4.0	/* ... or this many times the slowest answer */
#define NSB	9	/* ... this process's sends over it: 8 buckets, and one
			   passing out of it */

struct ep {
	char		*name;
	int		 down;		/* said to be not answering */
	double		 open_said;	/* breaker opening warned of */
	char		*safe;
	const struct conf_ep *cf;
	long		 ceiling;
	long		 window;	/* the pace's in-flight limit; 0: none */
	long		 hung;		/* ... past which this many hung go */
	double		 hung_next;	/* when the next may be hung; 0: none */
	double		 slowest;	/* the longest an answer took */
	int		 throttled;	/* a 429 or 503 heard: no more */
	long		 inflight;
	long		 onwire;	/* requests written and not yet answered */
	double		 ok_at;		/* clk_now of its last success */
	double		 held_at;	/* when the first request was written
					   whose 503 was held, since the last
					   success; 0: none */
	struct breaker_ev *hbev;	/* ... those 503s, the breaker's
					   failures if no success comes */
	size_t		 nhbev, caphbev;
	double		 lag;		/* from the gate to the wire, low */
	struct pace_cfg	 pace;		/* in real seconds */
	double		 blocked_until;	/* no slot, pace or breaker until then */
	int		 paced;		/* ... and it was the pace */
	int		 slotless;	/* ... and it was the slots */
	long		 unheard;	/* 429s and 503s off the wire, their
					   news waiting for their bodies' filing */
	long		 answers;	/* answers heard (gate_heard) */
	int		 round;		/* young: this pass may send ... */
	int		 round_new;	/* ... its first send a new round's */
	long		 round_no;	/* the round's number, */
	long		 awaiting;	/* ... its answers not yet heard, */
	double		 round_at;	/* ... when it began, */
	double		 round_ans;	/* ... and its first answer; 0: none */
	char		*slot_held;
	long		*idle;		/* slots held with no transfer */
	long		 nidle;
	long		 nready;	/* its jobs in the ready queue */
	long		 nwait;		/* ... and held until a time */
	long		 recent;	/* its records among the last NRECENT
					   read from the manifest */
	double		 rate;		/* the pace last granted; 0: none */
	/* A told strict rate (told_strict), on the wire: */
	struct job	*first;		/* this process's first send, its
					   answer awaited */
	int		 first_done;	/* the first send was granted */
	double		 wrote_nb;	/* an interval after the last written:
					   no send reaches the wire before */
	int		 end_said;	/* its work's end told to the pace */
	long		 sb[NSB];	/* its sends in the last END_S, by bucket */
	long		 sb_at;		/* ... the newest bucket's number */
	/* The pace's lease: sends granted, not yet made, each with its time. */
	long		 credit;	/* how many are left ... */
	double		 due[PACE_LEASE_MAX];
	long		 idue;		/* ... from this one */
	long		 seq;		/* ... the next one's grant number */
	int		 free;		/* ... all of them e->seq: a free pace's */
	long		 free_seq;	/* the last grant before a free pace */
	double		 drift;		/* ... put off by as much as one went late */
	double		 due_end;	/* ... and none after the last one's time */
	double		 late;		/* how late one may go */
	int		 lease;		/* 1: a lease, kept from pass to pass;
				   0: sends for this pass only */
	/* Good for one pass of start_ready only. */
	double		 pace_wait;	/* the pace granted fewer than asked */
	int		 brk_closed;	/* the breaker let a request by */
	/* Outcomes not yet told to the shared pace and breaker. */
	struct pace_ev	*pev;
	struct breaker_ev	*bev;
	size_t		 npev, nbev, capev;
	int		 fb_now;	/* ... one of which may not wait */
	int		 voids;		/* ... grants dropped unsent among them */
	int		 rl_known;	/* an answer gave a RateLimit count */
	double		 fb_at;		/* clk_mono of the last telling */
	/* clk_mono until which the pace, the breaker, need not be asked. */
	double		 pace_free, brk_free;
	struct attlog_watch seen;	/* for the attempt log */
	struct ep	*next;
};

static struct ep *eps;
/*
 * The endpoints of the last NRECENT manifest records read, a ring: what an
 * endpoint's share of the lines not read yet is taken from.  Not the share
 * of all read: in a manifest grouped by endpoint, 60 lines for one and then
 * 2,000 for another, the first's 60 were a third of what was read ahead,
 * and it was credited with a third of the other's lines (a floor of 15.6
 * for 60 documents).
 */
#define NRECENT	64
static struct ep *recent[NRECENT];
static long admitted_all;	/* manifest records read, every endpoint's */
static const struct fopts *fo;	/* set by gate_init */
static double t_start;		/* older transitions are not this run's */
static struct view *answer;	/* an answer, as rfp-classify reads it */

void
gate_init(const struct fopts *o)
{
	fo = o;
	t_start = clk_now();
	answer = view_new();
}

/* Read the breaker's transitions for the attempt log; write nothing. */
static int
brk_read(json_t **doc, void *arg, char *err, size_t errlen)
{
	struct ep *e = arg;

	(void)err;
	(void)errlen;
	if (*doc != NULL && attlog_breaker(fo->log, &e->seen, e->name, *doc,
	    t_start) == -1)
		msg_warnsys("write %s", attlog_path(fo->log));
	return 1;
}

/* What the breaker of e did since it was last looked at. */
static void
brk_seen(struct ep *e)
{
	char err[512];

	if (fo->log != NULL && store_update(fo->run_dir, "breaker", e->name,
	    brk_read, e, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
}

struct ep *
gate_endpoint(const char *name)
{
	struct ep *e;

	for (e = eps; e != NULL; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	e = xcalloc(1, sizeof(*e));
	e->name = xstrdup(name);
	e->safe = doc_safe_name(name);
	e->cf = conf_endpoint(&fo->conf, name);
	e->ceiling = e->cf->concurrency > 0 ? e->cf->concurrency :
	    fo->conf.concurrency;
	e->pace.rate = e->cf->rate / clk_scale();
	e->pace.burst = e->cf->burst;
	e->pace.quota_after = clk_real(fo->conf.max_retry_after);
	e->pace.deadline = fo->deadline;
	e->pace.conc = e->cf->concurrency;
	/*
	 * A lease saves a transaction a send, where one costs: a pace shared
	 * through PostgreSQL (files take 10 to 20 us).
	 */
	e->pace.lease = store_shared() ? LEASE_S : 0;
	e->slot_held = xcalloc((size_t)e->ceiling, 1);
	e->idle = xcalloc((size_t)e->ceiling, sizeof(*e->idle));
	e->next = eps;
	eps = e;
	return e;
}

/*
 * The window counts no request that hangs: two hung first, before any
 * answer had grown a window of 2, kept the endpoint's other documents
 * unsent for their whole timeout (2 minutes by default).  Hung is
 * unanswered for HANG_S, or HANG_X times the slowest answer (a slow
 * portal's answers are not hung).  Until the portal pushes back: once it
 * has refused (a 429 or 503), the window is the limit's, and the portal
 * counts what it holds.  Nor while another endpoint has documents ready
 * that its own limit lets go (gate_pass): the places of -j freed for an
 * endpoint whose every request hung were taken from the others, whose
 * documents then waited out the hangs' timeout.
 */
static double
hang_after(const struct ep *e)
{
	return fmax(clk_real(HANG_S), HANG_X * e->slowest);
}

/*
 * Whether e is young: its rate not told, never throttled, and fewer than
 * YOUNG_N answers heard.  A young endpoint's sends go in rounds: a pass
 * sends only once every answer of the round before is heard (its body
 * filed, its news the pace's), as many as the window lets go (round_open),
 * the window the round's successes grew.  A burst allowance answered at once
 * ends with a round's sends refused, not with one more for each of the
 * burst's answers: sent as places freed, a strict 1 r/s had two refused
 * on the first success's heels, a burst of 10 five.  An unlimited portal
 * loses a few round trips.  Once throttled, the pace spaces the sends,
 * and rounds would let one go a round trip: a cap of 5 answering in
 * 250 ms took 1.75 x as long.
 */
static int
young(const struct ep *e)
{
	return e->pace.rate == 0 && e->answers < YOUNG_N && !e->throttled;
}

/*
 * Whether a young e may start a round: every answer of the last is heard,
 * or the last has waited ROUND_X times as long as its first answer took
 * (and ROUND_S more), or none came and its requests hang (hang_after).  A
 * refusal comes as fast as the successes beside it; an answer much slower
 * than the first is no limiter's, and a round held for it held every other
 * document: a request that hung cost 2 s, one in four answering in 400 ms
 * made 200 documents take 1.8 x as long, one body stalled 8 s held 40
 * documents as long.
 */
static int
round_open(const struct ep *e, double now)
{
	return e->awaiting == 0 || (e->round_ans > 0 && now - e->round_at >
	    ROUND_X * (e->round_ans - e->round_at) + ROUND_S) ||
	    now - e->round_at > hang_after(e);
}

/* What e may have in flight: its window, under its ceiling ... */
static long
ep_base(const struct ep *e)
{
	return e->window > 0 && e->window < e->ceiling ? e->window :
	    e->ceiling;
}

/* ... and past the window, as many more as hang. */
static long
ep_limit(const struct ep *e)
{
	long w = e->window > 0 ? e->window + e->hung : 0;

	return w > 0 && w < e->ceiling ? w : e->ceiling;
}

/* Whether e has documents ready that its window lets go now. */
static int
ep_wants(const struct ep *e)
{
	return e->nready > 0 && e->inflight < ep_base(e);
}

/*
 * Take a free slot of e shared through lib/store; its index or -1.  Slots
 * past the pace's window are not taken, so the window holds across every
 * process on the run directory.  A slot
 * whose transfer ended in this turn of the loop is still held: it passes
 * to the next transfer without a lock round trip.
 */
static int
slot_take(struct ep *e)
{
	char err[512];
	long i;
	int rc;

	if (e->inflight >= ep_limit(e))
		return -1;
	/*
	 * A slot of this turn passes on only under the limit: one past a
	 * window cut since is given back, else another process, taking the
	 * slots under it, would have more in flight than the window.
	 */
	for (i = e->nidle - 1; i >= 0; i--)
		if (e->idle[i] < ep_limit(e)) {
			rc = (int)e->idle[i];
			e->idle[i] = e->idle[--e->nidle];
			return rc;
		}
	if (fo->run_dir == NULL && !store_shared()) {
		for (i = 0; i < ep_limit(e) && e->slot_held[i]; i++)
			;
		rc = i < ep_limit(e);
	} else if ((rc = store_slot_take(fo->run_dir, e->name, ep_limit(e),
	    e->slot_held, &i, err, sizeof(err))) == -1)
		msg_die(1, "%s", err);
	if (rc == 0)
		return -1;
	e->slot_held[i] = 1;
	return (int)i;
}

/* Done with slot i of e: held until gate_release, at the end of the turn. */
void
gate_give(struct ep *e, int i)
{
	if (i >= 0)
		e->idle[e->nidle++] = i;
}

/*
 * Give back the slots held with no transfer.  Called before the loop
 * waits, so a slot is held while nothing of it is on the wire only for
 * a send of the pace's lease (as many as it has left, for LEASE_S at
 * most): the lease is a share of the endpoint's slots as of its pace,
 * and its sends do not ask the store for a slot each.
 */
void
gate_release(void)
{
	struct ep *e;
	long keep, n;

	for (e = eps; e != NULL; e = e->next) {
		keep = e->credit < e->nidle ? e->credit : e->nidle;
		if ((n = e->nidle - keep) <= 0)
			continue;
		if (fo->run_dir != NULL || store_shared())
			store_slot_give(e->name, e->idle + keep, n);
		while (e->nidle > keep)
			e->slot_held[e->idle[--e->nidle]] = 0;
	}
}

static void
state_fail(const char *err)
{
	msg_die(1, "%s", err);
}

/*
 * The pace holds e until until: j leaves dead, unsent, saying when the
 * portal said to come back.  A wait past max_retry_after (lng) is a
 * quota; a shorter one holds only because the deadline comes first (a
 * RateLimit window of a second that resets just past it), and j is cut,
 * for the next run to take up, as rfp-backoff cuts a retry due past it.
 * Filed quota, 194 of 200 documents behind a 1 s window were left for
 * --retry-dead alone.
 */
static void
quota_kill(struct job *j, double until, int lng)
{
	const struct ep *e = j->ep;
	char when[64], why[200];

	clk_iso(until, when, sizeof(when));
	if (!lng) {
		snprintf(why, sizeof(why), "\"%s\" is held until %s, when "
		    "the portal's window resets: past the deadline", e->name,
		    when);
		out_kill(j->rec, 0, FATE_DEADLINE_CUT, why);
		return;
	}
	snprintf(why, sizeof(why), "the portal's quota for \"%s\" is spent; "
	    "it said to come back at %s", e->name, when);
	out_kill(j->rec, 0, FATE_QUOTA, why);
}

/*
 * The next send of the grant in hand, taken: its number (under a free
 * pace, every send carries the grant's).  grant_back puts it back.
 */
static long
grant_take(struct ep *e)
{
	e->credit--;
	e->idue++;
	return e->free ? e->seq : e->seq++;
}

/* Room for one more outcome, and the held 503s one may tell. */
static void
ev_room(struct ep *e)
{
	while (e->npev == e->capev || e->nbev + e->nhbev >= e->capev) {
		e->capev = e->capev ? 2 * e->capev : 16;
		e->pev = xrealloc(e->pev, e->capev * sizeof(*e->pev));
		e->bev = xrealloc(e->bev, e->capev * sizeof(*e->bev));
	}
}

/*
 * n grants from seq on dropped unsent, or answered with no count, told to
 * the pace of an endpoint that gives RateLimit counts (pace.h,
 * PACE_UNUSED), in order with its answers: told before them, an answer
 * that turned the window started the count again without them.
 */
static void
grant_void(struct ep *e, long seq, long n)
{
	struct pace_ev *pe;

	if (n <= 0 || seq < 0 || e->free || !e->rl_known)
		return;
	e->voids = 1;
	pe = e->npev > 0 ? &e->pev[e->npev - 1] : NULL;
	if (pe != NULL && pe->ev == PACE_UNUSED && pe->seq + pe->unused == seq) {
		pe->unused += n;
		return;
	}
	ev_room(e);
	pe = &e->pev[e->npev++];
	memset(pe, 0, sizeof(*pe));
	pe->ev = PACE_UNUSED;
	pe->now = clk_now();
	pe->seq = seq;
	pe->unused = n;
	pe->retry_after = -1;
}

/* The grants in hand, dropped. */
static void
grant_drop(struct ep *e)
{
	grant_void(e, e->seq, e->credit);
	e->credit = 0;
}

static void
grant_back(struct ep *e)
{
	e->credit++;
	e->idue--;
	if (!e->free)
		e->seq--;
}

/*
 * Drop the lease's sends that can no longer go in their time, wire being
 * when a send made now would reach it.  A send that goes late puts the
 * rest off as much (e->drift; sent on time, the next would crowd it), and
 * none goes after the lease's last time and the lateness the pace allows:
 * the next lease, maybe another process's, begins an interval after that.
 * (Dropping each send that went more than that late instead lost more
 * sends than were made: a loop turn at 700 requests a second is often
 * later than a quarter interval.)
 */
static void
lease_trim(struct ep *e, double wire)
{
	while (e->credit > 0 && fmax(e->due[e->idue] + e->drift, wire) >
	    e->due_end + e->late)
		grant_void(e, grant_take(e), 1);
}

/*
 * A rate told with no burst: a strict limit, whose sends must reach the
 * wire spaced (a pace too fast for that is a free one).
 */
static int
told_strict(const struct ep *e)
{
	return e->pace.rate > 0 && e->pace.rate < FREE_RATE &&
	    e->pace.burst <= 1;
}

static void	ep_tell(struct ep *);

/*
 * Slot, pace, breaker, in that order; before them, a lease whose next send
 * is not due yet holds the endpoint without asking anything.  Returns 1
 * (go; *slot, *probe set), 0 (not yet: the endpoint is blocked until
 * ep->blocked_until) or -1 (the job was dead-lettered circuit_open).
 */
int
gate_try(struct job *j, long room, int *slot, int *probe)
{
	struct ep *e = j->ep;
	const struct conf_breaker *bc = &e->cf->breaker;
	double now = clk_now(), until, opened;
	struct pace_grant g;
	enum breaker_verdict v;
	char err[512];
	long want;

	*probe = 0;
	/*
	 * A refusal is off the wire, its news not yet told (the body thread
	 * files its body first): no grant until it is.  Granted at once, a
	 * strict 1 r/s had a round more refused on the first one's heels.
	 * Nor, young, until the round is answered.
	 */
	if (e->unheard > 0 || (young(e) && !e->round)) {
		e->blocked_until = now + AGAIN_S;
		e->paced = 0;
		e->slotless = 1;
		return 0;
	}

	if (e->wrote_nb > now + e->lag) {
		e->blocked_until = e->wrote_nb - e->lag;
		e->paced = 1;
		e->slotless = 0;
		return 0;
	}
	if (e->lease)
		lease_trim(e, now + e->lag);
	if (e->lease && e->credit > 0 && e->due[e->idue] + e->drift > now +
	    e->lag) {
		e->blocked_until = e->due[e->idue] + e->drift - e->lag;
		e->paced = 1;
		e->slotless = 0;
		return 0;
	}
	/* A redirect's next hop holds its attempt's slot already. */
	if (j->hop != NULL)
		*slot = -1;
	else if ((*slot = slot_take(e)) == -1) {
		e->blocked_until = now + AGAIN_S;
		e->paced = 0;
		e->slotless = 1;
		return 0;
	}
	if (e->credit == 0 && e->pace_wait > 0) {
		gate_give(e, *slot);
		e->blocked_until = now + e->pace_wait;
		e->paced = 1;
		e->slotless = 0;
		return 0;
	}
	if (e->credit == 0) {
		/* As many sends as could start now, in one reservation. */
		want = e->nready;
		if (want > ep_limit(e) - e->inflight)
			want = ep_limit(e) - e->inflight;
		if (want > room)
			want = room;
		if (want < 1)
			want = 1;
		if (want > PACE_LEASE_MAX)
			want = PACE_LEASE_MAX;
		/*
		 * A pace so fast that it granted all a moment ago holds
		 * nothing back: not asked again for FREE_S (unless an answer
		 * since had news for it), a locked update saved per turn.
		 */
		e->idue = 0;
		e->drift = 0;
		if (clk_mono() < e->pace_free) {
			/*
			 * Not numbered by the pace: each carries the number
			 * of its last grant, so that a pace started since, by
			 * another process perhaps, does not take them for
			 * sends it made (one refused would cut it while it
			 * starts: a pace cut to a crawl at 4/s).
			 */
			e->credit = want;
			e->seq = e->free_seq;
			e->free = 1;
			e->lease = 0;
		} else {
			/*
			 * Asked for when the sends will reach the wire, not
			 * for now: the pace spaces what the portal sees.
			 */
			/*
			 * Grants dropped unsent are told first: the pace
			 * would count them against a remaining it is asked
			 * to spend.
			 */
			if (e->voids)
				ep_tell(e);
			/*
			 * This process's first send at a told strict rate
			 * opens a connection, and the portal may read it
			 * milliseconds after it was written: the pace grants
			 * it alone, and no process's next send until it is
			 * answered (pace_cfg.first).
			 */
			e->pace.first = !e->first_done && told_strict(e);
			if (pace_take_n(fo->run_dir, e->name, &e->pace,
			    now + e->lag, want, &g, err, sizeof(err)) == -1)
				state_fail(err);
			e->pace.first = 0;
			if (g.quota_until > 0) {
				gate_give(e, *slot);
				quota_kill(j, g.quota_until, g.quota_long);
				return -1;
			}
			if (attlog_pace(fo->log, &e->seen, e->name, g.rate,
			    g.window, now) == -1)
				msg_warnsys("write %s", attlog_path(fo->log));
			e->credit = g.granted;
			e->rate = g.rate;
			memcpy(e->due, g.due, sizeof(e->due));
			e->seq = g.seq;
			e->free = 0;
			e->window = g.window;
			e->due_end = g.granted > 0 ? g.due[g.granted - 1] : 0;
			e->late = g.late;
			e->lease = g.late > 0;
			/*
			 * Not while a RateLimit remaining is counted down:
			 * sends not granted are not counted, and a fixed
			 * window of 100 drew 16 to 23 refusals at each turn.
			 */
			/*
			 * All of it due now: a lease of all that was asked is
			 * spread over LEASE_S, and trusted free it let the
			 * gate send 32 at a time for FREE_S (a strict limit
			 * told 2,500/s refused 588 to 1,026 of 2,000).
			 */
			if (g.granted == want && !g.counted && (g.rate == 0 ||
			    g.rate >= FREE_RATE) && g.due[g.granted - 1] <=
			    now + e->lag) {
				e->pace_free = clk_mono() + FREE_S;
				e->free_seq = g.seq + g.granted - 1;
			}
			if (g.granted < want)
				e->pace_wait = g.wait;
		}
		if (e->credit == 0 || (e->lease && e->due[0] > now + e->lag)) {
			gate_give(e, *slot);
			e->blocked_until = e->credit == 0 ? now + e->pace_wait :
			    e->due[0] - e->lag;
			e->paced = 1;
			e->slotless = 0;
			return 0;
		}
	}
	/*
	 * A send that goes late holds the rest of the lease back as much:
	 * spaced by the pace, not bunched behind it (as long as e->late).
	 */
	if (e->lease)
		e->drift = fmax(e->drift, now + e->lag - e->due[e->idue]);
	j->seq = grant_take(e);
	j->granted = now;
	if (!e->first_done && told_strict(e)) {
		e->first_done = 1;
		e->first = j;
	}
	/* A redirect's next hop: its attempt got by the breaker. */
	if (j->hop != NULL)
		return 1;
	/*
	 * Closed a moment ago (in this pass, or within FREE_S with no failure
	 * or probe since): closed still, for this process.
	 */
	if (e->brk_closed || clk_mono() < e->brk_free)
		return 1;
	if (breaker_allow(fo->run_dir, e->name, bc, now, clk_real(
	    fo->conf.timeout + fo->conf.connect_timeout) + 1, !j->held,
	    rec_int(j->rec, "attempt", 0) == 0, &v,
	    &until, &opened, err, sizeof(err)) == -1)
		state_fail(err);
	if (v != BREAKER_ALLOW || e->seen.brk[0] != '\0')
		brk_seen(e);
	*probe = v == BREAKER_PROBE;
	e->brk_closed = v == BREAKER_ALLOW;
	if (v == BREAKER_ALLOW)
		e->brk_free = clk_mono() + FREE_S;
	if (v == BREAKER_ALLOW || v == BREAKER_PROBE)
		return 1;
	gate_give(e, *slot);
	if (v == BREAKER_DENY && opened > 0 && opened != e->open_said) {
		e->open_said = opened;
		msg_warn("endpoint \"%s\": the breaker is open; its documents "
		    "wait %.0f s for a probe", e->name, until > now ?
		    until - now : 0);
	}
	if (v == BREAKER_FRESH_FIRST) {
		/*
		 * Not sent: its grant goes to the fresh record behind it.
		 * Kept, the retries ahead of the fresh records (the ready
		 * queue puts them first) spent the grants, and a retry was
		 * the probe that this rule is there to keep it from being.
		 */
		grant_back(e);
		j->held = 1;
		return 0;	/* and a fresh record behind it may go */
	}
	if (fo->on_open_dead || (bc->max_open > 0 && now - opened >
	    clk_real(bc->max_open)) || (fo->deadline > 0 &&
	    until >= fo->deadline)) {
		snprintf(err, sizeof(err), "the breaker of \"%s\" is open%s",
		    e->name, fo->on_open_dead ? " (on_open dead)" :
		    fo->deadline > 0 && until >= fo->deadline ?
		    " past the deadline" : " longer than max_open");
		out_kill(j->rec, 0, FATE_CIRCUIT_OPEN, err);
		return -1;
	}
	j->held = 1;
	e->blocked_until = until;
	e->paced = 0;
	e->slotless = 0;
	return 0;
}

/*
 * The endpoint served at now: up, and the 503s held from its breaker were
 * a cap's after all.
 */
static void
ep_served(struct ep *e, double now)
{
	e->ok_at = now;
	e->held_at = 0;
	e->nhbev = 0;
}

/*
 * j, answered at t, was this process's first send at a told strict rate:
 * the next may go an interval after it.  Told at once: the pace holds
 * every process until then.
 */
static void
first_answered(struct ep *e, const struct job *j, double t)
{
	if (e->first != j)
		return;
	e->first = NULL;
	e->fb_now = 1;
	e->blocked_until = fmin(e->blocked_until, t + 1 / e->pace.rate);
}

/*
 * x is answered, its body yet to be filed: a 2xx says the endpoint serves
 * now.  Filing waits on the body thread (the longer on a loaded machine),
 * and a 503 to another request, told before it, was taken for an outage
 * while the same portal's successes sat in the queue.  Not a 2xx that
 * fails its expect, or may (a body check): a sign-in page served with 200
 * between 503s is no endpoint up, and counted as one, the breaker never
 * opened.
 */
void
gate_answered(struct xfer *x)
{
	struct ep *e = x->job->ep;
	long st = 0;
	int ok = xfer_looks_ok(x);

	if (xfer_files_body(x) && curl_easy_getinfo(x->easy,
	    CURLINFO_RESPONSE_CODE, &st) == CURLE_OK && (st == 429 ||
	    st == 503)) {
		x->unheard = 1;
		e->unheard++;
	}
	first_answered(e, x->job, x->t1);
	if (x->cc == CURLE_OK && x->t_wrote > 0 && x->t1 > x->t_wrote)
		e->slowest = fmax(e->slowest, x->t1 - x->t_wrote);
	if (ok)
		ep_served(e, clk_now());
}

/* Bring e's send buckets to now: those older than END_S emptied. */
static void
sb_roll(struct ep *e, double now)
{
	long b = (long)(now / (clk_real(END_S) / (NSB - 1))), i;

	for (i = e->sb_at + 1; i <= b && i <= e->sb_at + NSB; i++)
		e->sb[i % NSB] = 0;
	if (b > e->sb_at)
		e->sb_at = b;
}

/*
 * The sends this process made to e in the last END_S: the buckets since
 * then, the oldest in the share of it that is within END_S.
 */
static double
sb_count(struct ep *e, double now)
{
	double w = clk_real(END_S) / (NSB - 1), n = 0;
	long i;

	sb_roll(e, now);
	for (i = 0; i < NSB; i++)
		n += e->sb[i];
	/* The oldest, (sb_at + 1) % NSB, only for its share within END_S. */
	return n - e->sb[(e->sb_at + 1) % NSB] * (now / w - (double)e->sb_at);
}

/*
 * The documents e has yet to send, as far as this process can tell: its
 * jobs ready and held, and its share, as in the last records read, of the
 * manifest lines not read yet (admission reads a few hundred ahead).  A
 * pace starts faster for many (lib/control/pace.h, queued).
 */
static long
ep_queued(const struct ep *e)
{
	double unread = (double)admit_unread();
	long n = admitted_all < NRECENT ? admitted_all : NRECENT;

	return e->nready + e->nwait + (n > 0 ? (long)(unread *
	    (double)e->recent / (double)n) : 0);
}

/*
 * 1 when e's work ends soon: the input is all read, and what is queued for
 * e (ready, or held for a retry's time) goes out within END_S at the pace
 * last granted and at the pace this process went at.  Retries on their
 * way back through rfp-backoff are not counted: the end looks a little
 * nearer than it is.  (rfp-queue pull ends its output only when all it
 * held is filed: with --queue the input ends too late for this.)
 */
static int
ep_ending(struct ep *e)
{
	long left = e->nready + e->nwait;

	/*
	 * Nor more than this process sent in the last END_S: the pace is
	 * every process's (four pipelines on a run directory each send a
	 * quarter of it), and a window, a slow portal or -j may hold the
	 * sends under it (a cap of 4 answering in 0.5 s let 8 a second
	 * through a pace of 32), or the pace may be doubling from its start.
	 */
	return admit_eof() && e->rate > 0 && (double)left < e->rate *
	    clk_real(END_S) && (double)left < sb_count(e, clk_now());
}

/*
 * A pace event of kind ev for x's answer at now, its send's times, grant
 * and RateLimit fields filled in; the caller adds the rest.
 */
static struct pace_ev *
pev_push(struct ep *e, const struct xfer *x, enum pace_event ev, double now)
{
	struct pace_ev *pe;

	ev_room(e);
	pe = &e->pev[e->npev++];
	memset(pe, 0, sizeof(*pe));
	pe->ev = ev;
	pe->sent_at = x->t_sent;
	pe->wrote_at = x->t_wrote;
	pe->now = now;
	pe->inflight = x->inflight;
	pe->seq = x->job->seq;
	pe->retry_after = -1;
	pe->rl = x->rl;
	pe->rl_seen = x->rl_seen;
	return pe;
}

/*
 * x's answer gave a RateLimit count, or none (a reset, a timeout, a
 * proxy's 502 or 200): the portal counted the send or never saw it.  Told
 * as one dropped, it is no longer on its way: a count at 0 waiting for
 * its answer would wait RL_SETTLE for nothing.
 */
static void
rl_counted(struct ep *e, const struct xfer *x)
{
	if (x->rl_seen)
		e->rl_known = 1;
	else
		grant_void(e, x->job->seq, 1);
}

/* Note what this answer says of the endpoint for its pace and breaker. */
void
gate_feedback(const struct xfer *x)
{
	const json_t *rec = x->job->rec;
	struct ep *e = x->job->ep;
	long st = rec_int(rec, "status", 0);
	/*
	 * The pace learns of an answer now, not when it came: what was sent
	 * in between went at the old pace, and must not count as sent after
	 * a cut (one cut per round).
	 */
	double now = clk_now();
	const struct conf_ep *ce = conf_endpoint(&fo->conf, e->name);
	struct class_in in;
	enum class_kind k;
	struct pace_ev *pe;
	struct breaker_ev hb;
	struct breaker_ev *be;
	char reason[64];
	double ra, lag, before;
	int slow, up, held;

	/* As rfp-classify will, the endpoint's own status lists first. */
	view_open_tree(answer, json_incref((json_t *)rec));
	class_read(answer, &in);
	if (in.has_status && in.status >= 0 && in.status <= CONF_STATUS_MAX &&
	    ce->status_class[in.status] != 0)
		in.over = ce->status_class[in.status] == CONF_TRANSIENT ?
		    CLASS_TRANSIENT : CLASS_PERMANENT;
	k = class_decide(&in, reason, sizeof(reason));
	if (strcmp(reason, "deadline") == 0)
		return;
	if (st == 429 || st == 503)
		e->throttled = 1;
	ev_room(e);
	/*
	 * Throttling slows the pace: a 429, or a 503 with a Retry-After or
	 * from an endpoint that had a success a moment ago (nginx's limit_req
	 * answers 503 by default).  A 429, and a 503 from an endpoint that is
	 * answering, say it is up: only a 503 from one that serves nothing
	 * is an outage, the breaker's business.  A 503 while a request
	 * written before it, less than UP_S ago, is still unanswered (held:
	 * the portal is working on it) is no outage yet, nor known to be up:
	 * a concurrency cap's refusals, before the first answers it let in
	 * are out.  It slows the pace and the breaker does not hear of it.
	 * A request held longer is no cap's (a portal half down, hanging
	 * some and refusing the rest: held all along, the breaker never
	 * opened).  Nor is one written after the first 503 so held, until a
	 * success: a cap holds what it let in before it refused, and a
	 * portal that hung every fifth request started the 10 s again with
	 * each (the breaker first opened after 15 to 30 s).
	 */
	/* Said once, the moment it happens: cron mails it. */
	if (!e->down && (strcmp(reason, "connect") == 0 ||
	    strcmp(reason, "dns") == 0)) {
		e->down = 1;
		msg_warn("endpoint \"%s\" is not answering: %s (%s)", e->name,
		    reason, rec_str(rec, "error_detail") ? rec_str(rec,
		    "error_detail") : "?");
	} else if (e->down && k == CLASS_OK) {
		e->down = 0;
		msg_warn("endpoint \"%s\" answers again", e->name);
	}
	/*
	 * The time from the gate to the wire (a lock, a loop turn, a new
	 * connection), tracked low: from 0, quickly down and slowly up
	 * (1/16th of the way), so that a send asked for that much ahead is
	 * seldom early.
	 */
	if (x->t_wrote > 0 && x->job->granted > 0 && x->t_wrote >=
	    x->job->granted) {
		lag = x->t_wrote - x->job->granted;
		e->lag = lag < e->lag ? lag : e->lag + (fmin(lag, LAG_MAX) -
		    e->lag) / 16;
	}
	up = e->ok_at > 0 && now - e->ok_at < clk_real(UP_S);
	before = e->held_at > 0 ? fmin(e->held_at, x->t_wrote) : x->t_wrote;
	held = st == 503 && !up && x->retry_after == NULL && wire_older(x,
	    now - clk_real(UP_S), before);
	if (held)
		e->held_at = before;
	slow = st == 429 || (st == 503 && (x->retry_after != NULL || up ||
	    held));
	if (k == CLASS_OK)
		ep_served(e, now);
	/*
	 * Any other answer says only what its RateLimit fields say: the
	 * portal counted it, and a window's count waits for every answer.
	 */
	if (slow || k == CLASS_OK || x->rl_seen) {
		pe = pev_push(e, x, slow ? PACE_SLOW : k == CLASS_OK ?
		    PACE_OK : PACE_INFO, now);
		if (x->retry_after != NULL && hdr_retry_after(x->retry_after,
		    now, &ra) == 0)
			pe->retry_after = clk_real(ra);
		pe->busy = st == 503;
		if ((pe->ending = ep_ending(e)) && !e->end_said &&
		    e->nready + e->nwait > 0) {
			e->end_said = 1;
			msg_debug("endpoint \"%s\": %ld documents left, under "
			    "%.0f s at %.1f/s: no faster pace is probed for",
			    e->name, e->nready + e->nwait, END_S,
			    fmin(e->rate * clk_real(END_S),
			    sb_count(e, clk_now())) / END_S);
		}
	}
	rl_counted(e, x);
	be = &hb;
	be->out = k == CLASS_TRANSIENT && st != 429 && !(st == 503 && up) ?
	    BREAKER_FAILURE : BREAKER_SUCCESS;
	be->probe = x->probe;
	be->fresh = rec_int(rec, "attempt", 1) == 1;
	be->now = now;
	be->sent_at = x->t0;
	if (held) {
		/*
		 * Kept from the breaker until the endpoint is known to be
		 * up (a success drops them) or down: the next 503 not held
		 * tells them first.  Dropped, a portal down that answered
		 * three requests sent together out of order was heard of
		 * once, and the breaker stayed closed.
		 */
		if (e->nhbev == e->caphbev) {
			e->caphbev = e->caphbev ? 2 * e->caphbev : 16;
			e->hbev = xrealloc(e->hbev, e->caphbev *
			    sizeof(*e->hbev));
		}
		e->hbev[e->nhbev++] = hb;
		e->fb_now = 1;
		e->pace_free = 0;
		if (e->lease)
			grant_drop(e);
		return;
	}
	if (be->out == BREAKER_FAILURE && e->nhbev > 0) {
		memcpy(e->bev + e->nbev, e->hbev, e->nhbev * sizeof(*e->hbev));
		e->nbev += e->nhbev;
		e->nhbev = 0;
	}
	be = &e->bev[e->nbev++];
	*be = hb;
	if (slow || be->out == BREAKER_FAILURE || be->probe || x->rl_seen) {
		e->fb_now = 1;
		e->pace_free = e->brk_free = 0;
	}
	/* Refused: what the lease holds was granted at a pace now too fast. */
	if (slow && e->lease)
		grant_drop(e);
}

/*
 * x's 3xx, a redirect to the same portal: the portal let the request
 * through, a success for the pace.  Its next hop takes a grant; untold,
 * half the grants brought no news, and a strict 20/s not told settled at
 * 11.9/s (1.7 x the ideal for 120 documents and their hops).  Not for the
 * breaker: the attempt goes on, and its end says how it went.
 */
void
gate_hop_ok(struct xfer *x)
{
	struct ep *e = x->job->ep;
	double now = clk_now();

	pev_push(e, x, PACE_OK, now)->ending = ep_ending(e);
	rl_counted(e, x);
	first_answered(e, x->job, now);
}

/* Tell the shared pace and breaker e's news now, in one locked update each. */
static void
ep_tell(struct ep *e)
{
	char err[512];
	size_t i;
	int news;

	e->fb_now = 0;
	e->fb_at = clk_mono();
	/*
	 * The window as the news leaves it: an endpoint held by its
	 * window asks the pace for no grant to learn it from.  Read
	 * from the grant before, it grew by a round trip's lag: 2 s
	 * to reach a cap of 25 answering in 250 ms, now 1.25 s.
	 */
	e->pace.queued = ep_queued(e);
	if (pace_feedback_n(fo->run_dir, e->name, &e->pace, e->pev,
	    e->npev, &e->window, err, sizeof(err)) == -1 ||
	    breaker_record_n(fo->run_dir, e->name, &e->cf->breaker,
	    e->bev, e->nbev, err, sizeof(err)) == -1)
		state_fail(err);
	/* Only a failure or a probe's answer moves a closed breaker. */
	news = e->seen.brk[0] != '\0';
	for (i = 0; i < e->nbev && !news; i++)
		news = e->bev[i].out == BREAKER_FAILURE || e->bev[i].probe;
	if (news)
		brk_seen(e);
	/* What the pace said before this news, it may now say otherwise. */
	if (e->npev > 0 && e->paced)
		e->blocked_until = 0;
	e->npev = e->nbev = 0;
	e->voids = 0;
}

/*
 * Tell the shared pace and breaker, one locked update each per endpoint,
 * what the answers since the last telling said, in the order they came.
 * News that changes nothing at once may wait up to FB_DEFER: successes
 * while the endpoint waits on its slots, not on its pace.  A 429, a
 * failure, a probe's answer, an endpoint the pace holds back, and force
 * (the end of the run) are told at once.
 */
void
gate_flush(int force)
{
	struct ep *e;
	double now = clk_mono();

	for (e = eps; e != NULL; e = e->next) {
		if (e->npev == 0 && e->nbev == 0)
			continue;
		/* Held by the pace, it may let more go: held by a lease, no. */
		if (!force && !e->fb_now && now - e->fb_at < FB_DEFER &&
		    ((e->credit > 0 && e->paced && !e->slotless) ||
		    (e->pace_wait == 0 && !(e->paced &&
		    e->blocked_until > clk_now()))))
			continue;
		ep_tell(e);
	}
}

const char *
gate_name(const struct ep *e)
{
	return e->name;
}

void
gate_state(const struct ep *e, double *rate, const char **breaker)
{
	*rate = e->seen.rate;
	*breaker = attlog_breaker_state(&e->seen);
}

int
gate_idempotent(const struct ep *e)
{
	return e->cf->idempotency_keys;
}

void
gate_ready(struct ep *e, long n)
{
	e->nready += n;
}

void
gate_waiting(struct ep *e, long n)
{
	e->nwait += n;
}

void
gate_admitted(struct ep *e)
{
	struct ep **slot = &recent[admitted_all++ % NRECENT];

	if (*slot != NULL)
		(*slot)->recent--;
	*slot = e;
	e->recent++;
}


int
gate_blocked(const struct ep *e, double now)
{
	return e->blocked_until > now;
}

long
gate_sent(struct xfer *x)
{
	struct ep *e = x->job->ep;
	double now = clk_now();

	sb_roll(e, now);
	e->sb[e->sb_at % NSB]++;
	if (e->round_new) {
		e->round_new = 0;
		e->round_no++;
		e->awaiting = 0;
		e->round_at = now;
		e->round_ans = 0;
	}
	x->awaiting = 1;
	x->round = e->round_no;
	e->awaiting++;
	return ++e->inflight;
}

/*
 * An endpoint that found no place, or waits for a refusal's news or its
 * round, tries again now if none of that holds it any longer.
 */
static void
ep_unhold(struct ep *e)
{
	if (e->slotless && e->unheard == 0 && (!young(e) || e->awaiting == 0))
		e->blocked_until = 0;
}

/*
 * A transfer of e ended: its place in the window is free, and an endpoint
 * that found none waits for it no longer, unless young with more of its
 * round to come, or a refusal's news is on its way.  (It waited 5 ms, as
 * for another process's slot: at a window of 2 answered in 0.1 ms, that
 * was 400 sends a second while the window grew, and 10,000 documents from
 * an unlimited portal took 1.5 s where curl --parallel took 1.0.)
 */
void
gate_done(struct ep *e)
{
	e->inflight--;
	ep_unhold(e);
}

/*
 * x is answered, or ended, and its body filed: its news is about to be had.
 * gate_answered's hold ends, and x is no longer awaited by its round.
 */
void
gate_heard(struct xfer *x)
{
	struct ep *e = x->job->ep;

	if (x->unheard) {
		x->unheard = 0;
		e->unheard--;
	}
	if (x->awaiting) {
		x->awaiting = 0;
		e->answers++;
		if (x->round == e->round_no) {
			e->awaiting--;
			if (e->round_ans == 0)
				e->round_ans = clk_now();
		}
	}
	ep_unhold(e);
}

long
gate_wire_on(struct ep *e, double t, double granted)
{
	/*
	 * Written later after the gate let it by than the way to the wire
	 * takes (curl's turn, a busy loop), by more than the pace leaves
	 * between sends, the next, on time, would reach a strict limit
	 * early: 8 ms late at 20 r/s told, the next came 49 ms after it and
	 * was refused.  The pace learns of the write with the answer's
	 * news, up to FB_DEFER later, after the next was granted.  (Every
	 * write held the next, each went the lateness of a loop's wake
	 * later than the last: 1.12 x the ideal at 100 r/s told.)
	 */
	if (told_strict(e) && e->rate > 0 && t - granted - e->lag >
	    fmax(0, 1 / e->rate - 1 / e->pace.rate))
		e->wrote_nb = fmax(e->wrote_nb, t + 1 / e->pace.rate);
	return ++e->onwire;
}

void
gate_wire_off(struct ep *e)
{
	e->onwire--;
}

/*
 * News from another host about the endpoint named payload: its breaker
 * opened (what this process trusted of it is void, and its next request
 * asks the breaker), or it gave back slots (an endpoint waiting for one
 * tries again now).
 */
void
gate_news(const char *channel, const char *payload, void *arg)
{
	struct ep *e;
	long seq;

	(void)arg;
	for (e = eps; e != NULL; e = e->next) {
		/*
		 * The pace started, or was cut or held: what this lease holds
		 * was granted before, and a pace free a moment ago is not.
		 */
		if (strcmp(channel, PACE_CHANNEL) == 0) {
			if ((seq = pace_news_seq(payload, e->name)) < 0)
				continue;
			if (e->lease && !e->free && e->seq < seq)
				grant_drop(e);
			e->pace_free = 0;
			continue;
		}
		if (strcmp(e->name, payload) != 0)
			continue;
		if (strcmp(channel, BREAKER_CHANNEL) == 0) {
			e->brk_closed = 0;
			e->brk_free = 0;
			msg_debug("endpoint \"%s\": its breaker opened on "
			    "another host", e->name);
		} else if (strcmp(channel, STORE_SLOT_CHANNEL) == 0 &&
		    e->slotless)
			e->blocked_until = 0;
	}
}

/* A new pass over the ready queue: a lease is all that is carried in. */
void
gate_pass(void)
{
	struct ep *e;
	double now = clk_now();
	long wanting = 0;

	for (e = eps; e != NULL; e = e->next)
		wanting += ep_wants(e);
	for (e = eps; e != NULL; e = e->next) {
		e->round = !young(e) || round_open(e, now);
		e->round_new = young(e) && e->round;
		e->hung = 0;
		e->hung_next = 0;
		/* No other endpoint wants a place: wanting is e's own, or 0. */
		if (e->window > 0 && !e->throttled && e->onwire > 0 &&
		    wanting == ep_wants(e))
			e->hung = wire_hung(e, now - hang_after(e),
			    &e->hung_next);
		if (!e->lease)
			grant_drop(e);
		e->pace_wait = 0;
		e->brk_closed = 0;
	}
}

/*
 * The pass is over: a reservation not used now is dropped (it could
 * burst), and so is a send of a lease whose time has come and gone.
 */
void
gate_pass_end(void)
{
	struct ep *e;
	double now = clk_now();

	for (e = eps; e != NULL; e = e->next) {
		if (e->lease)
			lease_trim(e, now + e->lag);
		else
			grant_drop(e);
	}
}

/*
 * Real seconds from now to the soonest the gate may let a ready job by
 * (when work waits on it) or news is to be told, or t if later.
 */
double
gate_wake(double now, double t, int ready)
{
	struct ep *e;
	double soon = now + t;

	if (ready) {
		for (e = eps; e != NULL; e = e->next)
			if (e->nready > 0 && e->inflight < ep_limit(e) &&
			    e->blocked_until < soon)
				soon = e->blocked_until;
			else if (e->nready > 0 && e->hung_next > 0 &&
			    e->hung_next + hang_after(e) < soon)
				soon = e->hung_next + hang_after(e);
		t = soon - now < 0.001 ? 0.001 : soon - now;
	}
	for (e = eps; e != NULL; e = e->next)
		if ((e->npev > 0 || e->nbev > 0) && e->fb_at + FB_DEFER -
		    clk_mono() < t)
			t = e->fb_at + FB_DEFER - clk_mono();
	return t;
}

void
gate_free(void)
{
	struct ep *e, *en;

	for (e = eps; e != NULL; e = en) {
		en = e->next;
		free(e->slot_held);
		free(e->idle);
		free(e->pev);
		free(e->bev);
		free(e->hbev);
		free(e->name);
		free(e->safe);
		free(e);
	}
	eps = NULL;
	view_free(answer);
	answer = NULL;
}
