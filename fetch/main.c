/*
 * rfp-fetch: make each record's request, at most -j at once.
 *
 * Reads manifest records on stdin (and, with --retry-fifo, retry records
 * and acknowledgements that rfp-sink writes back) and writes each record
 * once per attempt to stdout with the fetch fields added: attempt, status,
 * error, error_detail, retry_after (raw), date, ratelimit, sent,
 * elapsed_ms, response_at, bytes, sha256, content_type, body_path, check.
 * A record with "fate":"retry" keeps its attempt count and is held until
 * its "not_before" without holding a concurrency slot; any other earlier
 * fate is cleared, so dead.ndjson can be fed back as a manifest.  Bad lines
 * and unusable records leave at once as dead bad_input records.
 *
 * It decides no fate from an answer, and never retries on its own; it
 * dead-letters only what it does not send: bad input, a record an open
 * breaker may not hold (circuit_open), what the deadline leaves
 * (deadline_cut) and a submission the ledger cannot clear
 * (ambiguous_submit).  Concurrency per endpoint is shared with every
 * process on the run directory through
 * flock'd slot files in RUNDIR/state/slots/, or with every host through
 * PostgreSQL advisory locks with --state; bodies go to RUNDIR/docs/ID.
 *
 * Exit: 0 when every admitted record has left (and, in loop mode, been
 * acknowledged), 1 on a fatal error or a signal, 2 on a usage error.
 */
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "lib/breaker.h"
#include "lib/class.h"
#include "lib/clk.h"
#include "lib/conf.h"
#include "lib/doc.h"
#include "lib/fate.h"
#include "lib/ledger.h"
#include "lib/msg.h"
#include "lib/opt.h"
#include "lib/pace.h"
#include "lib/rec.h"
#include "lib/rundir.h"
#include "lib/state.h"
#include "lib/store.h"
#include "lib/x.h"
#include "fetch/fetch.h"

#define PROG	"rfp-fetch"
#define FB_DEFER 0.05	/* real seconds news may wait before it is told */
#define FREE_S	0.05	/* ... and a free pace or closed breaker is trusted */
#define FREE_RATE 2000.0	/* a pace this fast holds nothing back */
#define UP_S	10.0	/* logical s a success says an endpoint is up */
#define FILING_MAX 2		/* x concurrency: on the wire and filing */
#define FILES_FIXED 64		/* open files besides the transfers' */
#define OUT_PIECE (64 * 1024)	/* stdout is written in pieces this big */
#define OUT_DELAY 0.01	/* ... or once the oldest record waited this long */
#define CONFIRM_MAX 4	/* status_url questions at once, beyond -j */

static const char usage[] =
    "usage: rfp-fetch [-hv] [-j N] [--ca-file FILE] [--check]\n"
    "                 [--config FILE] [--connect-timeout S]\n"
    "                 [--deadline WHEN] [--insecure]\n"
    "                 [--max-body BYTES] [--max-redirects N]\n"
    "                 [--on-open wait|dead] [--report FILE]\n"
    "                 [--resume] [--retry-dead] [--retry-fifo FIFO]\n"
    "                 [--run-dir DIR] [--state URL] [--timeout S]\n"
    "                 [--version]\n";

struct fopts fo;

struct ep {
	char		*name;
	int		 down;		/* said to be not answering */
	double		 open_said;	/* breaker opening warned of */
	char		*safe;
	const struct conf_ep *cf;
	long		 ceiling;
	long		 window;	/* the pace's in-flight limit; 0: none */
	long		 inflight;
	double		 ok_at;		/* clk_now of its last success */
	struct pace_cfg	 pace;		/* in real seconds */
	double		 blocked_until;	/* no slot, pace or breaker until then */
	int		 paced;		/* ... and it was the pace */
	char		*slot_held;
	long		*idle;		/* slots held with no transfer */
	long		 nidle;
	long		 nready;	/* its jobs in the ready queue */
	/* Good for one pass of start_ready only. */
	long		 credit;	/* pace sends reserved, not yet used */
	long		 seq;		/* ... the next one's grant number */
	double		 pace_wait;	/* the pace granted fewer than asked */
	int		 brk_closed;	/* the breaker let a request by */
	/* Outcomes not yet told to the shared pace and breaker. */
	struct pace_ev	*pev;
	struct brk_ev	*bev;
	size_t		 npev, nbev, capev;
	int		 fb_now;	/* ... one of which may not wait */
	double		 fb_at;		/* clk_mono of the last telling */
	/* clk_mono until which the pace, the breaker, need not be asked. */
	double		 pace_free, brk_free;
	struct ep	*next;
};

static struct {
	const char	*fifo;
	const char	*report;
	int		 resume, retry_dead;
	CURLM		*multi;
	struct ep	*eps;
	struct job	*ready, *ready_tail;
	long		 nready;
	struct job	**wait;		/* min-heap on not_before */
	long		 nwait, capwait;
	long		 active;	/* transfers on the wire */
	long		 filing;	/* ... off it, with the body thread */
	struct xfer	*wire;		/* the active transfers */
	struct rec_reader *in, *back;
	int		 in_eof;
	int		 fd_fifo;
	int		 fd_bodies;	/* the body thread's wake-ups, or -1 */
	int		 fifo_ready;	/* poll saw the FIFO readable */
	int		 sink_seen;	/* rfp-sink said hello */
	int		 sink_gone;	/* ... and later closed the FIFO */
	char		*out;		/* pending output */
	size_t		 outlen, outcap, outoff;
	double		 out_at;	/* clk_mono() the oldest was queued */
	long		 outstanding;	/* emitted, not yet acknowledged */
	struct ledger	*ledger;	/* submissions, with a run directory */
	struct job	*confirm_q, **confirm_tail;	/* to ask status_url */
	long		 nconfirm;	/* ... how many */
	long		 confirming;	/* status_url asked, on the wire */
	json_t		*seen;		/* ids admitted from the manifest */
	json_t		*done;		/* ids already filed (resume) */
	long		 admitted, skipped, lines;
	long		 held;		/* ids another live pipeline holds */
	double		 t0;		/* clk_mono() at start */
	volatile sig_atomic_t stop;
} S;

static void
on_signal(int sig)
{
	S.stop = sig;
}

/* Queue a record for stdout. */
static void
emit(json_t *rec)
{
	size_t at = S.outlen;

	if (S.outlen == 0)
		S.out_at = clk_mono();
	if (rec_dump_to(rec, &S.out, &S.outlen, &S.outcap) == -1)
		msg_die(1, "a record nested too deep to write");
	/*
	 * A ledger reply that would take the record past its share of
	 * REC_ADDED_MAX is not passed on (the ledger keeps it): a record
	 * later stages cannot read would lose its id.
	 */
	if (S.outlen - at > REC_LINE_MAX + REC_ADDED_MAX / 2 &&
	    json_object_get(rec, "reply") != NULL) {
		S.outlen = at;
		json_object_set_new(rec, "reply", json_null());
		if (rec_dump_to(rec, &S.out, &S.outlen, &S.outcap) == -1)
			msg_die(1, "a record nested too deep to write");
	}
	S.outstanding++;
}

/*
 * Write what stdout takes without blocking, whole records at most PIPE_BUF
 * bytes a write (atomic on a pipe: fetchers sharing one never interleave);
 * -1 when it is gone.
 */
static int
flush_out(void)
{
	ssize_t n;

	while (S.outoff < S.outlen) {
		n = write(STDOUT_FILENO, S.out + S.outoff, rec_piece(S.out +
		    S.outoff, S.outlen - S.outoff));
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -1;
		}
		S.outoff += (size_t)n;
	}
	S.outoff = S.outlen = 0;
	return 0;
}

/*
 * Whether the pending output is to be written now.  Each write wakes the
 * three stages downstream, and written a turn at a time (eight records,
 * in a fast run) the waking cost them more than the records.  So output
 * waits for a full piece, or OUT_DELAY, but never while nothing is on the
 * wire (nothing would come soon to fill it) or once a write is under way.
 */
static int
out_due(void)
{
	return S.outlen > 0 && (S.outoff > 0 || S.outlen >= OUT_PIECE ||
	    S.active + S.filing == 0 || S.stop ||
	    clk_mono() - S.out_at >= OUT_DELAY);
}

/*
 * How many more transfers may start.  A transfer gives its slot back as
 * it leaves the wire, and its body waits for the body thread; at most
 * FILING_MAX * concurrency are on the wire or waiting so, not to pile up
 * bodies when filing is slower than the network.
 */
static long
room(void)
{
	long n = fo.conf.concurrency - S.active;

	if (n > FILING_MAX * fo.conf.concurrency - S.active - S.filing)
		n = FILING_MAX * fo.conf.concurrency - S.active - S.filing;
	return n;
}

int
deadline_come(double now)
{
	return fo.deadline > 0 && now >= fo.deadline - DEADLINE_SLACK;
}

static struct ep *
endpoint(const char *name)
{
	struct ep *e;

	for (e = S.eps; e != NULL; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	e = xcalloc(1, sizeof(*e));
	e->name = xstrdup(name);
	e->safe = doc_safe_name(name);
	e->cf = conf_endpoint(&fo.conf, name);
	e->ceiling = e->cf->concurrency > 0 ? e->cf->concurrency :
	    fo.conf.concurrency;
	e->pace.rate = e->cf->rate / clk_scale();
	e->pace.burst = e->cf->burst;
	e->pace.quota_after = clk_real(fo.conf.max_retry_after);
	e->pace.deadline = fo.deadline;
	e->pace.conc_told = e->cf->concurrency > 0;
	e->slot_held = xcalloc((size_t)e->ceiling, 1);
	e->idle = xcalloc((size_t)e->ceiling, sizeof(*e->idle));
	e->next = S.eps;
	S.eps = e;
	return e;
}

/* Requests e may have in flight: its ceiling, or the pace's window. */
static long
ep_limit(const struct ep *e)
{
	return e->window > 0 && e->window < e->ceiling ? e->window :
	    e->ceiling;
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
	if (e->nidle > 0)
		return (int)e->idle[--e->nidle];
	for (i = 0; i < ep_limit(e); i++) {
		if (e->slot_held[i])
			continue;
		if (fo.run_dir == NULL && !store_shared())
			rc = 1;
		else if ((rc = store_slot_take(fo.run_dir, e->name, i, err,
		    sizeof(err))) == -1)
			msg_die(1, "%s", err);
		if (rc == 1) {
			e->slot_held[i] = 1;
			return (int)i;
		}
	}
	return -1;
}

/* Done with slot i of e: held until slots_release, at the end of the turn. */
static void
slot_give(struct ep *e, int i)
{
	if (i >= 0)
		e->idle[e->nidle++] = i;
}

/*
 * Give back every slot held with no transfer.  Called before the loop
 * waits, so a slot is never held while nothing of it is on the wire.
 */
static void
slots_release(void)
{
	struct ep *e;
	long i;

	for (e = S.eps; e != NULL; e = e->next) {
		while (e->nidle > 0) {
			i = e->idle[--e->nidle];
			if (fo.run_dir != NULL || store_shared())
				store_slot_give(e->name, i);
			e->slot_held[i] = 0;
		}
	}
}

static void
heap_push(struct job *j)
{
	long i = S.nwait++, p;

	if (S.nwait > S.capwait) {
		S.capwait = S.capwait ? S.capwait * 2 : 64;
		S.wait = xrealloc(S.wait, (size_t)S.capwait * sizeof(*S.wait));
	}
	while (i > 0 && S.wait[p = (i - 1) / 2]->not_before > j->not_before) {
		S.wait[i] = S.wait[p];
		i = p;
	}
	S.wait[i] = j;
}

static struct job *
heap_pop(void)
{
	struct job *top = S.wait[0], *last = S.wait[--S.nwait];
	long i = 0, c;

	while ((c = 2 * i + 1) < S.nwait) {
		if (c + 1 < S.nwait &&
		    S.wait[c + 1]->not_before < S.wait[c]->not_before)
			c++;
		if (last->not_before <= S.wait[c]->not_before)
			break;
		S.wait[i] = S.wait[c];
		i = c;
	}
	if (S.nwait > 0)
		S.wait[i] = last;
	return top;
}

static void
ready_push(struct job *j)
{
	j->ep->nready++;
	j->next = NULL;
	if (S.ready_tail != NULL)
		S.ready_tail->next = j;
	else
		S.ready = j;
	S.ready_tail = j;
	S.nready++;
}

static void
job_free(struct job *j)
{
	json_decref(j->rec);
	free(j);
}

/* Hold or queue a job by its not_before. */
static void
schedule(struct job *j)
{
	if (j->not_before > clk_now())
		heap_push(j);
	else
		ready_push(j);
}

/* A record leaves now without a request: dead with reason and detail. */
static void
kill_now(json_t *rec, long lineno, enum fate_reason reason,
    const char *detail)
{
	if (lineno > 0)
		json_object_set_new(rec, "line", json_integer(lineno));
	rec_kill(rec, reason, detail);
	emit(rec);
}

/* Make rec (owned from now on) a job of its endpoint, held or ready. */
static void
enqueue(json_t *rec, long lineno)
{
	struct job *j = xcalloc(1, sizeof(*j));
	char *ep = doc_endpoint(rec);

	if (json_object_get(rec, "endpoint") == NULL)
		json_object_set_new(rec, "endpoint", json_string(ep));
	j->rec = rec;
	j->ep = endpoint(ep);
	j->lineno = lineno;
	j->not_before = rec_num(rec, "not_before", 0);
	free(ep);
	schedule(j);
}

/*
 * Whether rec, written as it will be (numbers as jansson writes them, with
 * its endpoint), fits REC_LINE_MAX, so that it leaves whole whatever the
 * stages add (lib/rec.h).  0, or -1 with err set.
 */
static int
admit_size(const json_t *rec, size_t len, char *err, size_t errlen)
{
	char *ep, *s;
	size_t n;

	/* A number takes at most 25 bytes written, at least 3 read. */
	if (len <= REC_LINE_MAX / 9)
		return 0;
	ep = json_object_get(rec, "endpoint") ? NULL : doc_endpoint(rec);
	n = (s = json_dumps(rec, JSON_COMPACT)) ? strlen(s) : 0;
	n += ep ? strlen(ep) + sizeof(",\"endpoint\":\"\"") : 0;
	free(s);
	free(ep);
	if (n <= REC_LINE_MAX)
		return 0;
	snprintf(err, errlen, "record \"%.200s\" is %zu bytes as written, "
	    "over %d", rec_str(rec, "id") ? rec_str(rec, "id") : "", n,
	    REC_LINE_MAX);
	return -1;
}

/*
 * A not_before within the one bound on waits (conf_wait_past), or past
 * the deadline, which cuts the wait; 0 or -1.
 */
static int
admit_wait(const json_t *rec, char *err, size_t errlen)
{
	json_t *nb = json_object_get(rec, "not_before");

	if (nb == NULL || (json_is_number(nb) && ((fo.deadline > 0 &&
	    json_number_value(nb) >= fo.deadline) || !conf_wait_past(
	    json_number_value(nb) - clk_now(),
	    clk_real(fo.conf.max_retry_after)))))
		return 0;
	snprintf(err, errlen, "field \"not_before\": not a time within "
	    "max_retry_after (%.0f s) of now", fo.conf.max_retry_after);
	return -1;
}

/* Admit one manifest line. */
static int held(const char *, long);
static void load_done(void);

static void
admit(char *line, size_t len, long lineno, enum rec_rc rrc)
{
	char err[300];
	const char *fate, *id;
	json_t *rec, *big;
	int sent;

	if (rrc == REC_TOOLONG) {
		msg_line(lineno, "line longer than %d bytes", REC_LINE_MAX);
		rec = rec_bad_input(PROG, lineno, "line too long", line, len);
		emit(rec);
		json_decref(rec);
		S.admitted++;
		return;
	}
	if ((rec = rec_parse(line, len, err, sizeof(err))) == NULL) {
		msg_line(lineno, "%s", err);
		rec = rec_bad_input(PROG, lineno, err, line, len);
		emit(rec);
		json_decref(rec);
		S.admitted++;
		return;
	}
	fate = rec_str(rec, "fate");
	if (fate == NULL || strcmp(fate, "retry") != 0) {
		/*
		 * A submission an earlier run sent (a dead letter run again)
		 * keeps saying so: the ledger gate asks before it is resent.
		 */
		sent = doc_is_submission(rec) &&
		    json_is_true(json_object_get(rec, "sent"));
		xfer_clear(rec);
		json_object_del(rec, "attempt");
		json_object_del(rec, "line");
		json_object_del(rec, "stage");
		if (sent)
			json_object_set_new(rec, "sent", json_true());
	}
	id = rec_str(rec, "id");
	if (admit_size(rec, len, err, sizeof(err)) == -1) {
		/* Too long to pass on whole: its id and its start. */
		if (id != NULL && S.done != NULL &&
		    json_object_get(S.done, id) != NULL) {
			S.skipped++;
			json_decref(rec);
			return;
		}
		msg_line(lineno, "%s", err);
		big = rec;
		rec = rec_bad_input(PROG, lineno, err, line, len);
		if (json_is_string(json_object_get(big, "id")))
			json_object_set(rec, "id", json_object_get(big, "id"));
		json_decref(big);
		emit(rec);
		json_decref(rec);
		S.admitted++;
		return;
	}
	if (doc_check(rec, err, sizeof(err)) == -1) {
		msg_line(lineno, "%s", err);
		kill_now(rec, lineno, FATE_BAD_INPUT, err);
		json_decref(rec);
		S.admitted++;
		return;
	}
	if (S.done != NULL && json_object_get(S.done, id) != NULL) {
		S.skipped++;
		json_decref(rec);
		return;
	}
	if (fo.run_dir != NULL && held(id, lineno)) {
		S.held++;
		json_decref(rec);
		return;
	}
	S.admitted++;
	if (admit_wait(rec, err, sizeof(err)) == -1) {
		msg_line(lineno, "%s", err);
		kill_now(rec, lineno, FATE_BAD_INPUT, err);
		json_decref(rec);
		return;
	}
	if (json_object_get(S.seen, id) != NULL) {
		snprintf(err, sizeof(err), "field \"id\": duplicate id \"%s\" "
		    "(first on line %ld)", id, (long)json_integer_value(
		    json_object_get(S.seen, id)));
		msg_line(lineno, "%s", err);
		kill_now(rec, lineno, FATE_BAD_INPUT, err);
		json_decref(rec);
		return;
	}
	json_object_set_new(S.seen, id, json_integer(lineno));
	enqueue(rec, lineno);
}

/* A retry or an acknowledgement from rfp-sink. */
static void
take_back(char *line, size_t len, long lineno)
{
	static const char done[] = REC_ACK_DONE;
	static const char dead[] = REC_ACK_DEAD;
	char err[300];
	json_t *rec;

	/* rfp-sink's acks, word for word: no need to parse them. */
	if (len == sizeof(done) - 1 && (memcmp(line, done, len) == 0 ||
	    memcmp(line, dead, len) == 0)) {
		S.outstanding--;
		return;
	}
	if ((rec = rec_parse(line, len, err, sizeof(err))) == NULL) {
		msg_warn("%s:%ld: %s", S.fifo, lineno, err);
		return;
	}
	if (json_is_string(json_object_get(rec, "ack"))) {
		S.sink_seen = 1;	/* "hello": rfp-sink holds the FIFO */
		json_decref(rec);
		return;
	}
	S.outstanding--;
	if (json_is_true(json_object_get(rec, "ack"))) {
		json_decref(rec);
		return;
	}
	enqueue(rec, lineno);
}

static void
read_lines(struct rec_reader *r, int manifest)
{
	enum rec_rc rc;
	size_t len;
	long lineno;
	char *line;

	for (;;) {
		if (manifest && S.nready + S.nwait > 4 * fo.conf.concurrency +
		    64)
			return;	/* back-pressure: enough work queued */
		rc = rec_next(r, &line, &len, &lineno);
		if (rc == REC_AGAIN)
			return;
		if (rc == REC_EOF || rc == REC_ERR) {
			if (rc == REC_ERR)
				msg_warnsys("read %s", manifest ? "stdin" :
				    S.fifo);
			if (manifest)
				S.in_eof = 1;
			else if (S.sink_seen)
				S.sink_gone = 1;
			return;
		}
		if (rc == REC_LINE && len == 0)
			continue;
		if (manifest)
			admit(line, len, lineno, rc);
		else if (rc == REC_LINE)
			take_back(line, len, lineno);
	}
}

static void
state_fail(const char *err)
{
	msg_die(1, "%s", err);
}

/*
 * The pace holds e past its quota: j leaves dead, unsent, saying when the
 * portal said to come back.
 */
static void
quota_kill(struct job *j, double until)
{
	char when[64], why[200];

	clk_iso(until, when, sizeof(when));
	snprintf(why, sizeof(why), "the portal's quota for \"%s\" is spent; "
	    "it said to come back at %s", j->ep->name, when);
	kill_now(j->rec, 0, FATE_QUOTA, why);
}

/*
 * Slot, pace, breaker, in that order.  Returns 1 (go; *slot, *probe set),
 * 0 (not yet: the endpoint is blocked until ep->blocked_until) or -1 (the
 * job was dead-lettered circuit_open).
 */
static int
gate(struct job *j, int *slot, int *probe)
{
	struct ep *e = j->ep;
	const struct conf_breaker *bc = &e->cf->breaker;
	double now = clk_now(), until, opened;
	struct pace_grant g;
	enum brk_verdict v;
	char err[512];
	long want;

	*probe = 0;
	if ((*slot = slot_take(e)) == -1) {
		e->blocked_until = now + 0.005;
		e->paced = 0;
		return 0;
	}
	if (e->credit == 0 && e->pace_wait > 0) {
		slot_give(e, *slot);
		e->blocked_until = now + e->pace_wait;
		e->paced = 1;
		return 0;
	}
	if (e->credit == 0) {
		/* As many sends as could start now, in one reservation. */
		want = e->nready;
		if (want > ep_limit(e) - e->inflight)
			want = ep_limit(e) - e->inflight;
		if (want > room())
			want = room();
		if (want < 1)
			want = 1;
		/*
		 * A pace so fast that it granted all a moment ago holds
		 * nothing back: not asked again for FREE_S (unless an answer
		 * since had news for it), a locked update saved per turn.
		 */
		if (clk_mono() < e->pace_free) {
			e->credit = want;
			e->seq = -1;	/* not numbered by the pace */
		} else {
			if (pace_take_n(fo.run_dir, e->name, &e->pace, now,
			    want, &g, err, sizeof(err)) == -1)
				state_fail(err);
			if (g.quota_until > 0) {
				slot_give(e, *slot);
				quota_kill(j, g.quota_until);
				return -1;
			}
			e->credit = g.granted;
			e->seq = g.seq;
			e->window = g.window;
			if (g.granted == want && (g.rate == 0 ||
			    g.rate >= FREE_RATE))
				e->pace_free = clk_mono() + FREE_S;
			if (g.granted < want)
				e->pace_wait = g.wait;
		}
		if (e->credit == 0) {
			slot_give(e, *slot);
			e->blocked_until = now + e->pace_wait;
			e->paced = 1;
			return 0;
		}
	}
	e->credit--;
	j->seq = e->seq < 0 ? -1 : e->seq++;
	/*
	 * Closed a moment ago (in this pass, or within FREE_S with no failure
	 * or probe since): closed still, for this process.
	 */
	if (e->brk_closed || clk_mono() < e->brk_free)
		return 1;
	if (brk_allow(fo.run_dir, e->name, bc, now, clk_real(
	    fo.conf.timeout + fo.conf.connect_timeout) + 1, !j->held,
	    rec_int(j->rec, "attempt", 0) == 0, &v,
	    &until, &opened, err, sizeof(err)) == -1)
		state_fail(err);
	*probe = v == BRK_PROBE;
	e->brk_closed = v == BRK_ALLOW;
	if (v == BRK_ALLOW)
		e->brk_free = clk_mono() + FREE_S;
	if (v == BRK_ALLOW || v == BRK_PROBE)
		return 1;
	slot_give(e, *slot);
	if (v == BRK_DENY && opened > 0 && opened != e->open_said) {
		e->open_said = opened;
		msg_warn("endpoint \"%s\": the breaker is open; its documents "
		    "wait %.0f s for a probe", e->name, until > now ?
		    until - now : 0);
	}
	if (v == BRK_FRESH_FIRST) {
		j->held = 1;
		return 0;	/* and a fresh record behind it may go */
	}
	if (fo.on_open_dead || (bc->max_open > 0 && now - opened >
	    clk_real(bc->max_open)) || (fo.deadline > 0 &&
	    until >= fo.deadline)) {
		snprintf(err, sizeof(err), "the breaker of \"%s\" is open%s",
		    e->name, fo.on_open_dead ? " (on_open dead)" :
		    fo.deadline > 0 && until >= fo.deadline ?
		    " past the deadline" : " longer than max_open");
		kill_now(j->rec, 0, FATE_CIRCUIT_OPEN, err);
		return -1;
	}
	j->held = 1;
	e->blocked_until = until;
	e->paced = 0;
	return 0;
}

static struct ledger *
ledger(void)
{
	char err[512];

	if (S.ledger == NULL && (S.ledger = ledger_open(fo.run_dir,
	    fo.conf.ledger, err, sizeof(err))) == NULL)
		state_fail(err);
	return S.ledger;
}

/* A submission the server already has: out with the prior outcome. */
static void
replay(struct job *j, const json_t *entry)
{
	json_t *rec = j->rec;
	char *path;

	xfer_clear(rec);
	json_object_set_new(rec, "status", json_integer(rec_int(entry,
	    "status", 200)));
	json_object_set_new(rec, "error", json_null());
	json_object_set_new(rec, "sent", json_true());
	json_object_set_new(rec, "replayed", json_true());
	json_object_set(rec, "reply", json_object_get(entry, "reply") ?
	    json_object_get(entry, "reply") : json_null());
	path = rundir_path(fo.run_dir, RUNDIR_DOCS, rec_str(rec, "id"));
	if (access(path, F_OK) == 0)
		json_object_set_new(rec, "body_path", json_string(path +
		    strlen(fo.run_dir) + 1));
	free(path);
	emit(rec);
}

/* The record's status_url for key: "{key}" in it replaced. */
static char *
status_url(const json_t *rec, const char *key)
{
	const char *tmpl = rec_str(rec, "status_url"), *at;

	at = strstr(tmpl, "{key}");
	return at ? xasprintf("%.*s%s%s", (int)(at - tmpl), tmpl, key, at + 5) :
	    xstrdup(tmpl);
}

/* Put x on the wire: a transfer, or a confirmation. */
static void
wire(struct xfer *x)
{
	x->next = S.wire;
	if (S.wire != NULL)
		S.wire->prev = x;
	S.wire = x;
	curl_multi_add_handle(S.multi, x->easy);
}

/* j's status_url is to be asked before anything else is done with it. */
static void
confirm_queue(struct job *j)
{
	j->next = NULL;
	*S.confirm_tail = j;
	S.confirm_tail = &j->next;
	S.nconfirm++;
}

/*
 * Start the confirmations that may start: at most CONFIRM_MAX at once, on
 * connections of their own beyond -j, so that none waits for a transfer
 * and no transfer waits for one.
 */
static void
confirm_start(void)
{
	struct job *j;
	char *key, *url;

	while (S.confirming < CONFIRM_MAX && !deadline_come(clk_now()) &&
	    (j = S.confirm_q) != NULL) {
		if ((S.confirm_q = j->next) == NULL)
			S.confirm_tail = &S.confirm_q;
		S.nconfirm--;
		key = doc_idem_key(j->rec);
		url = status_url(j->rec, key);
		/* Ids and endpoints only: a URL may carry a key in its query. */
		msg_debug("%s: asking its status_url", rec_str(j->rec, "id"));
		wire(xfer_confirm_start(j, url));
		S.confirming++;
		free(url);
		free(key);
	}
}

/*
 * A confirmation is over: a commit is filed with the answer, a "not
 * committed" sends the submission, and anything else leaves it dead
 * ambiguous_submit, never sent again.
 */
static void
confirm_done(struct xfer *x)
{
	struct job *j = x->job;
	json_t *reply, *extra;
	char err[512], why[256], *key;
	int c, cut;

	S.confirming--;
	c = xfer_confirmed(x, &reply, why, sizeof(why));
	cut = c == -1 && x->cc == CURLE_OPERATION_TIMEDOUT &&
	    x->capped_at > 0 && deadline_come(clk_now());
	x->job = NULL;
	xfer_free(x);
	if (cut) {
		/* Not "cannot tell": not asked in time; a resume asks again. */
		kill_now(j->rec, 0, FATE_DEADLINE_CUT, "its status_url did not "
		    "answer by the deadline");
		job_free(j);
		return;
	}
	if (c == 0) {
		j->confirmed = 1;
		schedule(j);
		return;
	}
	key = doc_idem_key(j->rec);
	if (c == 1) {
		extra = json_pack("{s:i,s:o}", "status", 200, "reply", reply);
		if (ledger_append(ledger(), key, rec_str(j->rec, "id"),
		    LEDGER_SUCCESS, extra, err, sizeof(err)) == -1)
			state_fail(err);
		replay(j, extra);
		json_decref(extra);
	} else {
		snprintf(err, sizeof(err), "an earlier attempt may have reached "
		    "the server, and its status_url cannot tell: %s", why);
		kill_now(j->rec, 0, FATE_AMBIGUOUS_SUBMIT, err);
	}
	free(key);
	job_free(j);
}

/*
 * Before a submission is sent: 0 to send it, 1 when the ledger settled it
 * (replayed, or dead ambiguous_submit), 2 when its status_url is to be
 * asked first.
 */
static int
ledger_gate(struct job *j)
{
	json_t *entry;
	enum ledger_state st;
	char err[512], *key;
	int rc = 0;

	if (j->confirmed) {
		/* Its status_url said "not committed" a moment ago. */
		j->confirmed = 0;
		return 0;
	}
	key = doc_idem_key(j->rec);
	if (ledger_lookup(ledger(), key, &st, &entry, err, sizeof(err)) == -1)
		state_fail(err);
	/*
	 * Sent by an earlier run this ledger did not see (a dead letter fed
	 * to a new run directory): it may have been committed.
	 */
	if (st == LEDGER_NONE && json_is_true(json_object_get(j->rec, "sent")))
		st = LEDGER_AMBIGUOUS;
	if (st == LEDGER_SUCCESS) {
		replay(j, entry);
		rc = 1;
	} else if ((st == LEDGER_INTENT || st == LEDGER_AMBIGUOUS) &&
	    !j->ep->cf->idempotency_keys) {
		if (rec_str(j->rec, "status_url") != NULL)
			rc = 2;
		else {
			snprintf(err, sizeof(err), "an earlier attempt may "
			    "have reached the server (ledger: %s)",
			    ledger_name(st));
			kill_now(j->rec, 0, FATE_AMBIGUOUS_SUBMIT, err);
			rc = 1;
		}
	}
	free(key);
	return rc;
}

/* Write the submission's outcome to the ledger. */
static void
ledger_outcome(const struct xfer *x)
{
	const json_t *rec = x->job->rec;
	long st = rec_int(rec, "status", 0);
	enum ledger_state s;
	json_t *extra, *reply = NULL;
	char err[512], *key, *path;

	if (st >= 200 && st <= 299)
		s = LEDGER_SUCCESS;
	else if (!json_is_true(json_object_get(rec, "sent")))
		s = LEDGER_NOT_SENT;
	else if (st >= 400 && st <= 499)
		s = LEDGER_REJECTED;
	else
		s = LEDGER_AMBIGUOUS;
	if (s == LEDGER_SUCCESS && rec_str(rec, "body_path") != NULL &&
	    rec_int(rec, "bytes", 0) <= 65536) {
		path = xasprintf("%s/%s", fo.run_dir, rec_str(rec, "body_path"));
		reply = state_load(path, JSON_DECODE_ANY, NULL);
		free(path);
	}
	extra = json_pack("{s:I,s:o,s:o}", "attempt", (json_int_t)rec_int(rec,
	    "attempt", 0), "status", st ? json_integer(st) : json_null(),
	    "reply", reply ? reply : json_null());
	key = doc_idem_key(rec);
	if (ledger_append(ledger(), key, rec_str(rec, "id"), s, extra, err,
	    sizeof(err)) == -1)
		state_fail(err);
	free(key);
	json_decref(extra);
}

/* Start what may start now. */
static void
start_ready(void)
{
	struct job *j, **pp = &S.ready;
	struct xfer *x;
	struct ep *e;
	char err[300];
	int slot, probe = 0, g;

	for (e = S.eps; e != NULL; e = e->next) {
		e->credit = 0;
		e->pace_wait = 0;
		e->brk_closed = 0;
	}
	S.ready_tail = NULL;
	while ((j = *pp) != NULL) {
		if (room() <= 0 || deadline_come(clk_now()) ||
		    j->ep->blocked_until > clk_now()) {
			S.ready_tail = j;
			pp = &j->next;
			continue;
		}
		if (fo.run_dir != NULL && doc_is_submission(j->rec) &&
		    (g = ledger_gate(j)) != 0) {
			*pp = j->next;
			S.nready--;
			j->ep->nready--;
			if (g == 1)
				job_free(j);
			else
				confirm_queue(j);
			continue;
		}
		if ((g = gate(j, &slot, &probe)) == 0) {
			S.ready_tail = j;
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		S.nready--;
		j->ep->nready--;
		if (g == -1) {
			job_free(j);
			continue;
		}
		if ((x = xfer_start(j, err, sizeof(err))) == NULL) {
			slot_give(j->ep, slot);
			msg_line(j->lineno, "%s", err);
			kill_now(j->rec, j->lineno, FATE_BAD_INPUT, err);
			job_free(j);
			continue;
		}
		x->slot = slot;
		x->probe = probe;
		/* Ids and endpoints only: a URL may carry a key in its query. */
		msg_debug("%s: attempt %ld to %s%s", rec_str(j->rec, "id"),
		    rec_int(j->rec, "attempt", 0), j->ep->name, probe ?
		    " (the breaker's probe)" : "");
		if (fo.run_dir != NULL && doc_is_submission(j->rec)) {
			char *key = doc_idem_key(j->rec);
			json_t *extra = json_pack("{s:I}", "attempt",
			    (json_int_t)rec_int(j->rec, "attempt", 0));

			if (ledger_append(ledger(), key, rec_str(j->rec, "id"),
			    LEDGER_INTENT, extra, err, sizeof(err)) == -1)
				state_fail(err);
			json_decref(extra);
			free(key);
		}
		j->ep->inflight++;
		x->inflight = j->ep->inflight;
		S.active++;
		wire(x);
	}
	/* Re-find the tail after unlinking. */
	S.ready_tail = NULL;
	for (j = S.ready; j != NULL; j = j->next)
		S.ready_tail = j;
	/* A reservation not used now is dropped: held, it could burst. */
	for (e = S.eps; e != NULL; e = e->next)
		e->credit = 0;
}

static void
unwire(struct xfer *x)
{
	if (x->prev != NULL)
		x->prev->next = x->next;
	else
		S.wire = x->next;
	if (x->next != NULL)
		x->next->prev = x->prev;
}

/*
 * Stopping early: drop what is on the wire or waiting.  Nothing is lost:
 * what was not filed is fetched again by a re-run.
 */
static void
drop_all(void)
{
	struct xfer *x, *next;
	struct job *j;

	/* What the body thread holds is filed, then dropped like the rest. */
	if (fo.run_dir != NULL) {
		bodies_stop();
		for (x = bodies_take(); x != NULL; x = next) {
			next = x->bnext;
			job_free(x->job);
			xfer_free(x);
		}
	}
	while ((x = S.wire) != NULL) {
		curl_multi_remove_handle(S.multi, x->easy);
		unwire(x);
		job_free(x->job);
		xfer_free(x);
	}
	while (S.nwait > 0)
		job_free(heap_pop());
	while ((j = S.ready) != NULL) {
		S.ready = j->next;
		job_free(j);
	}
	while ((j = S.confirm_q) != NULL) {
		S.confirm_q = j->next;
		job_free(j);
	}
}

/* Note what this answer says of the endpoint for its pace and breaker. */
static void
feedback(const struct xfer *x)
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
	const struct conf_ep *ce = conf_endpoint(&fo.conf, e->name);
	struct class_in in;
	enum class_kind k;
	struct pace_ev *pe;
	struct brk_ev *be;
	char reason[64];
	double ra;
	int slow, up;

	/* As rfp-classify will, the endpoint's own status lists first. */
	class_read(rec, &in);
	if (in.has_status && in.status >= 0 && in.status <= CONF_STATUS_MAX &&
	    ce->status_class[in.status] != 0)
		in.over = ce->status_class[in.status] == CONF_TRANSIENT ?
		    CLASS_TRANSIENT : CLASS_PERMANENT;
	k = class_decide(&in, reason, sizeof(reason));
	if (strcmp(reason, "deadline") == 0)
		return;
	if (e->npev == e->capev || e->nbev == e->capev) {
		e->capev = e->capev ? 2 * e->capev : 16;
		e->pev = xrealloc(e->pev, e->capev * sizeof(*e->pev));
		e->bev = xrealloc(e->bev, e->capev * sizeof(*e->bev));
	}
	/*
	 * Throttling slows the pace: a 429, or a 503 with a Retry-After or
	 * from an endpoint that had a success a moment ago (nginx's limit_req
	 * answers 503 by default).  A 429, and a 503 from an endpoint that is
	 * answering, say it is up: only a 503 from one that serves nothing
	 * is an outage, the breaker's business.
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
	up = e->ok_at > 0 && now - e->ok_at < clk_real(UP_S);
	slow = st == 429 || (st == 503 && (x->retry_after != NULL || up));
	if (k == CLASS_OK)
		e->ok_at = now;
	if (slow || k == CLASS_OK) {
		pe = &e->pev[e->npev++];
		pe->ev = slow ? PACE_SLOW : PACE_OK;
		pe->sent_at = x->t0;
		pe->now = now;
		pe->inflight = x->inflight;
		pe->seq = x->job->seq;
		pe->retry_after = -1;
		if (x->retry_after != NULL && hdr_retry_after(x->retry_after,
		    now, &ra) == 0)
			pe->retry_after = clk_real(ra);
		pe->rl = x->rl;
		pe->rl_seen = x->rl_seen;
	}
	be = &e->bev[e->nbev++];
	be->out = k == CLASS_TRANSIENT && st != 429 && !(st == 503 && up) ?
	    BRK_FAILURE : BRK_SUCCESS;
	be->probe = x->probe;
	be->fresh = rec_int(rec, "attempt", 1) == 1;
	be->now = now;
	be->sent_at = x->t0;
	if (slow || be->out == BRK_FAILURE || be->probe || x->rl_seen) {
		e->fb_now = 1;
		e->pace_free = e->brk_free = 0;
	}
}

/*
 * Tell the shared pace and breaker, one locked update each per endpoint,
 * what the answers since the last telling said, in the order they came.
 * News that changes nothing at once may wait up to FB_DEFER: successes
 * while the endpoint waits on its slots, not on its pace.  A 429, a
 * failure, a probe's answer, an endpoint the pace holds back, and force
 * (the end of the run) are told at once.
 */
static void
feedback_flush(int force)
{
	struct ep *e;
	char err[512];
	double now = clk_mono();

	for (e = S.eps; e != NULL; e = e->next) {
		if (e->npev == 0 && e->nbev == 0)
			continue;
		if (!force && !e->fb_now && now - e->fb_at < FB_DEFER &&
		    e->pace_wait == 0 && !(e->paced && e->blocked_until >
		    clk_now()))
			continue;
		e->fb_now = 0;
		e->fb_at = now;
		if (pace_feedback_n(fo.run_dir, e->name, &e->pace, e->pev,
		    e->npev, err, sizeof(err)) == -1 ||
		    brk_record_n(fo.run_dir, e->name, &e->cf->breaker, e->bev,
		    e->nbev, err, sizeof(err)) == -1)
			state_fail(err);
		/* What the pace said before this news, it may now say otherwise. */
		if (e->npev > 0 && e->paced)
			e->blocked_until = 0;
		e->npev = e->nbev = 0;
	}
}

/* A transfer is over and its body, if any, filed: its record goes out. */
static void
complete(struct xfer *x)
{
	xfer_finish(x, x->cc);
	msg_debug("%s: %s after %ld ms", rec_str(x->job->rec, "id"),
	    rec_str(x->job->rec, "error") ? rec_str(x->job->rec, "error") :
	    "answered", rec_int(x->job->rec, "elapsed_ms", 0));
	if (fo.run_dir != NULL && doc_is_submission(x->job->rec))
		ledger_outcome(x);
	feedback(x);
	emit(x->job->rec);
	job_free(x->job);
	xfer_free(x);
}

static void
finish_done(void)
{
	struct xfer *x, *next, *filing = NULL, **tail = &filing;
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(S.multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		curl_multi_remove_handle(S.multi, m->easy_handle);
		x->cc = m->data.result;
		if (x->confirm) {
			unwire(x);
			confirm_done(x);
			continue;
		}
		if (xfer_redirect(x)) {
			/* The next hop, on the same slot. */
			curl_multi_add_handle(S.multi, x->easy);
			continue;
		}
		unwire(x);
		x->t1 = clk_now();
		/* Off the wire: its slot is free, whatever filing is left. */
		slot_give(x->job->ep, x->slot);
		x->slot = -1;
		x->job->ep->inflight--;
		S.active--;
		if (xfer_files_body(x)) {
			x->bnext = NULL;
			*tail = x;
			tail = &x->bnext;
			S.filing++;
		} else
			complete(x);
	}
	bodies_put(filing);
	if (fo.run_dir != NULL)
		for (x = bodies_take(); x != NULL; x = next) {
			next = x->bnext;
			S.filing--;
			complete(x);
		}
	feedback_flush(0);
}

/* Past the deadline: everything still held leaves dead deadline_cut. */
static void
cut_waiting(void)
{
	struct job *j;

	while (S.nwait > 0) {
		j = heap_pop();
		kill_now(j->rec, 0, FATE_DEADLINE_CUT, "held for a retry at "
		    "the deadline");
		job_free(j);
	}
	while ((j = S.ready) != NULL) {
		S.ready = j->next;
		j->ep->nready--;
		kill_now(j->rec, 0, FATE_DEADLINE_CUT, "not started by the "
		    "deadline");
		job_free(j);
	}
	S.ready_tail = NULL;
	S.nready = 0;
	while ((j = S.confirm_q) != NULL) {
		S.confirm_q = j->next;
		kill_now(j->rec, 0, FATE_DEADLINE_CUT, "its status_url not "
		    "asked by the deadline");
		job_free(j);
	}
	S.confirm_tail = &S.confirm_q;
	S.nconfirm = 0;
}

/*
 * 1 when another live pipeline on the run directory holds id (it is named
 * on stderr), or when a dead one held it and has filed it since.
 */
static int
held(const char *id, long lineno)
{
	static double reread;
	char who[64];
	int rc = claims_take(id, who, sizeof(who));

	if (rc == 0) {
		/* The first by its line; the count at the end. */
		if (S.held == 0)
			msg_line(lineno, "id \"%s\" is being processed by "
			    "another pipeline on this run directory (%s); "
			    "skipped, as any other it holds", id, who);
		return 1;
	}
	/* Filed by a pipeline that ended after this one read the files? */
	if (rc == 2 && S.done != NULL && clk_mono() - reread > 1) {
		json_decref(S.done);
		load_done();
		reread = clk_mono();
		return json_object_get(S.done, id) != NULL;
	}
	return 0;
}

/* Ids already in results.ndjson (and dead.ndjson unless --retry-dead). */
static void
load_done(void)
{
	const enum rundir_file files[] = { RUNDIR_RESULTS, RUNDIR_DEAD };
	struct rec_reader *r;
	char *path, *line, err[64];
	size_t len;
	long lineno;
	json_t *rec;
	int i, fd, rc;

	S.done = json_object();
	for (i = 0; i < (S.retry_dead ? 1 : 2); i++) {
		path = rundir_path(fo.run_dir, files[i], NULL);
		if ((fd = state_open(path, O_RDONLY, 0)) == -1) {
			if (errno != ENOENT)
				msg_diesys(1, "open %s", path);
			free(path);
			continue;
		}
		r = rec_reader_new(fd, REC_STREAM_MAX);
		while ((rc = rec_next(r, &line, &len, &lineno)) != REC_EOF &&
		    rc != REC_ERR) {
			if (rc != REC_LINE)
				continue;
			if ((rec = rec_parse(line, len, err, sizeof(err))) ==
			    NULL) {
				/* A torn last line from a crash: refetch it. */
				msg_warn("%s:%ld: unreadable record, its "
				    "document will be fetched again", path,
				    lineno);
				continue;
			}
			if (rec_str(rec, "id") != NULL)
				json_object_set_new(S.done, rec_str(rec, "id"),
				    json_true());
			json_decref(rec);
		}
		rec_reader_free(r);
		close(fd);
		free(path);
	}
}

static void
write_report(void)
{
	json_t *r;
	char *tmp;

	if (S.report == NULL)
		return;
	r = json_pack("{s:I,s:I,s:I,s:I}", "admitted", (json_int_t)S.admitted,
	    "skipped", (json_int_t)S.skipped, "held", (json_int_t)S.held,
	    "pid", (json_int_t)getpid());
	/* rfp-sink reads it: the records not filed are left, not lost. */
	if (S.stop > 0)
		json_object_set_new(r, "stopped", json_integer(S.stop));
	tmp = xasprintf("%s.tmp", S.report);
	if (state_dump(r, S.report, tmp, JSON_COMPACT) == -1)
		msg_diesys(1, "write %s", S.report);
	free(tmp);
	json_decref(r);
}

static int
finished(void)
{
	if (!S.in_eof || S.nready > 0 || S.nwait > 0 || S.active > 0 ||
	    S.filing > 0 || S.outlen > 0 || S.nconfirm > 0 || S.confirming > 0)
		return 0;
	if (S.fifo == NULL)
		return 1;
	/* Wait for rfp-sink's hello (briefly) so its open finds a reader. */
	return S.outstanding <= 0 && (S.sink_seen || clk_mono() - S.t0 > 10);
}

static long
poll_timeout(void)
{
	double now = clk_now(), t = 0.25;
	struct ep *e;

	if (S.nwait > 0 && S.wait[0]->not_before - now < t)
		t = S.wait[0]->not_before - now;
	/* Work that waits for a transfer to end waits for its socket. */
	if (S.nready > 0 && room() > 0) {
		double soon = now + t;

		for (e = S.eps; e != NULL; e = e->next)
			if (e->nready > 0 && e->inflight < ep_limit(e) &&
			    e->blocked_until < soon)
				soon = e->blocked_until;
		t = soon - now < 0.001 ? 0.001 : soon - now;
	}
	/* Awake when the deadline comes; once it has, nothing waits on it. */
	if (fo.deadline > 0 && !deadline_come(now) &&
	    fo.deadline - DEADLINE_SLACK - now < t)
		t = fo.deadline - DEADLINE_SLACK - now;
	/* Output not due yet is due by then; due output waits on POLLOUT. */
	if (S.outlen > 0 && !out_due() &&
	    S.out_at + OUT_DELAY - clk_mono() < t)
		t = S.out_at + OUT_DELAY - clk_mono();
	for (e = S.eps; e != NULL; e = e->next)
		if ((e->npev > 0 || e->nbev > 0) && e->fb_at + FB_DEFER -
		    clk_mono() < t)
			t = e->fb_at + FB_DEFER - clk_mono();
	return t <= 0 ? 0 : (long)(t * 1000) + 1;
}

static void
run(void)
{
	struct curl_waitfd w[4];
	unsigned int nw, i;
	int running, cut = 0;

	while (!finished() && !S.stop) {
		if (!S.in_eof)
			read_lines(S.in, 1);
		if (S.back != NULL && S.fifo_ready) {
			S.fifo_ready = 0;
			read_lines(S.back, 0);
		}
		if (S.sink_gone) {
			msg_warn("rfp-sink closed %s with %ld records not "
			    "acknowledged; a re-run on this run directory "
			    "fetches them again", S.fifo, S.outstanding);
			S.stop = -1;
			break;
		}
		while (S.nwait > 0 && S.wait[0]->not_before <= clk_now())
			ready_push(heap_pop());
		if (deadline_come(clk_now()) && !cut) {
			cut_waiting();
			cut = 1;
		}
		if (cut && (S.nwait > 0 || S.nready > 0 || S.nconfirm > 0))
			cut_waiting();
		curl_multi_perform(S.multi, &running);
		finish_done();
		/* What just finished hands its slot on; nothing held idle. */
		start_ready();
		confirm_start();
		slots_release();
		if (out_due() && flush_out() == -1)
			msg_diesys(1, "write stdout");
		if (finished())
			break;
		nw = 0;
		if (!S.in_eof && S.nready + S.nwait <= 4 * fo.conf.concurrency +
		    64) {
			w[nw].fd = STDIN_FILENO;
			w[nw].events = CURL_WAIT_POLLIN;
			w[nw++].revents = 0;
		}
		if (S.back != NULL) {
			w[nw].fd = S.fd_fifo;
			w[nw].events = CURL_WAIT_POLLIN;
			w[nw++].revents = 0;
		}
		if (out_due()) {
			w[nw].fd = STDOUT_FILENO;
			w[nw].events = CURL_WAIT_POLLOUT;
			w[nw++].revents = 0;
		}
		if (S.fd_bodies != -1) {
			w[nw].fd = S.fd_bodies;
			w[nw].events = CURL_WAIT_POLLIN;
			w[nw++].revents = 0;
		}
		curl_multi_poll(S.multi, w, nw, (int)poll_timeout(), NULL);
		for (i = 0; i < nw; i++)
			if (w[i].fd == S.fd_fifo && w[i].revents != 0)
				S.fifo_ready = 1;
	}
}

/*
 * Open files at -j N: a socket and a slot file for each transfer on the
 * wire, a partial file for each of up to FILING_MAX * N bodies, and the
 * FILES_FIXED others (state files, pipes, libraries).  The soft limit is
 * often 1024: it is raised to cover them, as far as the hard limit lets,
 * and -j is lowered to fit where it cannot be, rather than fail halfway
 * through the batch with EMFILE.
 */
static void
files_limit(void)
{
	const rlim_t per = FILING_MAX + 2;
	rlim_t need = per * (rlim_t)fo.conf.concurrency + FILES_FIXED;
	struct rlimit rl;
	long n;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 ||
	    rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need ?
	    rl.rlim_max : need;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1 &&
	    getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (rl.rlim_cur >= need)
		return;
	n = rl.rlim_cur > per + FILES_FIXED ?
	    (long)((rl.rlim_cur - FILES_FIXED) / per) : 1;
	msg_warn("-j %ld needs up to %lu open files, and the limit is %lu: "
	    "running with -j %ld (raise it with ulimit -n)",
	    fo.conf.concurrency, (unsigned long)need,
	    (unsigned long)rl.rlim_cur, n);
	fo.conf.concurrency = n;
}

static void
nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		msg_diesys(1, "fcntl");
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "ca-file", required_argument, NULL, 'a' },
		{ "check", no_argument, NULL, 'K' },
		{ "config", required_argument, NULL, 'C' },
		{ "connect-timeout", required_argument, NULL, 'c' },
		{ "deadline", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "insecure", no_argument, NULL, 'k' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "max-body", required_argument, NULL, 'B' },
		{ "max-redirects", required_argument, NULL, 'R' },
		{ "on-open", required_argument, NULL, 'o' },
		{ "report", required_argument, NULL, 'p' },
		{ "resume", no_argument, NULL, 'u' },
		{ "retry-dead", no_argument, NULL, 'd' },
		{ "retry-fifo", required_argument, NULL, 'f' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "state", required_argument, NULL, 'S' },
		{ "timeout", required_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config = NULL, *deadline = NULL, *ca = NULL;
	const char *on_open = NULL, *state = NULL;
	double ctmo = -1, tmo = -1;
	long jobs = -1, maxbody = -1, maxredir = -1;
	int check = 0;
	struct sigaction sa;
	struct stat st;
	char err[512], *path;
	struct ep *e, *en;
	long i;
	int c;

	msg_init(PROG);
	opt_check_env();
	while ((c = getopt_long(argc, argv, ":hj:v", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			ca = optarg;
			break;
		case 'B':
			maxbody = opt_long("max-body", optarg, 1, 1L << 40);
			break;
		case 'c':
			ctmo = opt_duration("connect-timeout", optarg);
			break;
		case 'C':
			config = optarg;
			break;
		case 'K':
			check = 1;
			break;
		case 'd':
			S.retry_dead = 1;
			break;
		case 'D':
			deadline = optarg;
			break;
		case 'f':
			S.fifo = optarg;
			break;
		case 'h':
			opt_help(usage);
		case 'j':
			jobs = opt_long("jobs", optarg, 1, 4096);
			break;
		case 'k':
			fo.insecure = 1;
			break;
		case 'o':
			if (strcmp(optarg, "wait") && strcmp(optarg, "dead"))
				msg_die(2, "option --on-open: expected \"wait\" "
				    "or \"dead\", got \"%s\"", optarg);
			on_open = optarg;
			break;
		case 'p':
			S.report = optarg;
			break;
		case 'r':
			fo.run_dir = optarg;
			break;
		case 'R':
			maxredir = opt_long("max-redirects", optarg, 0, 50);
			break;
		case 'S':
			state = opt_state(optarg);
			break;
		case 't':
			tmo = opt_duration("timeout", optarg);
			break;
		case 'u':
			S.resume = 1;
			break;
		case 'v':
			msg_verbose = 1;
			break;
		case 'V':
			opt_version();
		default:
			opt_bad(usage, argv, c);
		}
	}
	opt_no_operands(argc, argv, usage);
	opt_conf(&fo.conf, config);
	if (jobs > 0)
		fo.conf.concurrency = jobs;
	if (ctmo > 0)
		fo.conf.connect_timeout = ctmo;
	if (tmo > 0)
		fo.conf.timeout = tmo;
	if (maxbody > 0)
		fo.conf.max_body = maxbody;
	if (maxredir >= 0)
		fo.conf.max_redirects = maxredir;
	if (ca != NULL) {
		free(fo.conf.ca_file);
		fo.conf.ca_file = xstrdup(ca);
	}
	fo.on_open_dead = on_open ? strcmp(on_open, "dead") == 0 :
	    fo.conf.on_open_dead;
	if (deadline == NULL)
		deadline = fo.conf.deadline;
	if (deadline != NULL && clk_deadline(deadline, clk_now(),
	    &fo.deadline) == -1)
		msg_die(2, "option --deadline: cannot read \"%s\" as a time",
		    deadline);
	if (check) {
		c = check_manifest(STDIN_FILENO, &fo.conf, config,
		    fo.deadline, deadline);
		conf_free(&fo.conf);
		opt_fshut();
		return c;
	}
	state = opt_state_pick(state, &fo.conf, config);
	if (state != NULL && store_init(state, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	if ((S.resume || S.retry_dead) && fo.run_dir == NULL)
		msg_die(2, "option --%s: needs --run-dir", S.resume ?
		    "resume" : "retry-dead");
	if (fo.insecure)
		msg_warn("WARNING: --insecure: TLS certificates are NOT "
		    "verified; a man in the middle can read and change every "
		    "request");
	umask(077);
	if (fo.run_dir != NULL) {
		if (state_mkdirs(fo.run_dir, err, sizeof(err)) == -1)
			msg_die(1, "%s", err);
		for (i = 0; i < 3; i++) {
			static const char *sub[] = { "slots", "rate",
			    "breaker" };

			path = rundir_path(fo.run_dir, RUNDIR_STATE, sub[i]);
			if (state_mkdir(path, err, sizeof(err)) == -1)
				msg_die(1, "%s", err);
			free(path);
		}
		/*
		 * A body is written in docs/.part and renamed into docs/ once
		 * whole: docs/ID is never a partial body, and the large
		 * directory sees one entry made per document, not three.
		 */
		path = rundir_path(fo.run_dir, RUNDIR_PART, NULL);
		if (state_mkdir(path, err, sizeof(err)) == -1)
			msg_die(1, "%s", err);
		if ((fo.part_fd = open(path, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1)
			msg_diesys(1, "open %s", path);
		free(path);
		path = rundir_path(fo.run_dir, RUNDIR_DOCS, NULL);
		if ((fo.docs_fd = open(path, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1)
			msg_diesys(1, "open %s", path);
		free(path);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		msg_die(1, "curl_global_init failed");
	files_limit();
	S.multi = curl_multi_init();
	curl_multi_setopt(S.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
	    fo.conf.concurrency + CONFIRM_MAX);
	S.seen = json_object();
	S.confirm_tail = &S.confirm_q;
	if (fo.run_dir != NULL)
		claims_open(fo.run_dir);
	if (S.resume || S.retry_dead)
		load_done();
	nonblock(STDIN_FILENO);
	nonblock(STDOUT_FILENO);
	S.in = rec_reader_new(STDIN_FILENO, 0);
	S.fd_fifo = -1;
	S.fd_bodies = fo.run_dir != NULL ? bodies_start() : -1;
	S.t0 = clk_mono();
	if (S.fifo != NULL) {
		if ((S.fd_fifo = open(S.fifo, O_RDONLY | O_NONBLOCK |
		    O_CLOEXEC)) == -1)
			msg_diesys(1, "open %s", S.fifo);
		/* A file there reads as rfp-sink gone: nothing sent. */
		if (fstat(S.fd_fifo, &st) == -1 || !S_ISFIFO(st.st_mode))
			msg_die(1, "%s: not a FIFO (make it with mkfifo)",
			    S.fifo);
		S.back = rec_reader_new(S.fd_fifo, REC_STREAM_MAX);
	}
	run();
	feedback_flush(1);
	if (S.stop && flush_out() == -1)	/* what stdout takes now */
		msg_warnsys("write stdout");
	if (S.stop > 0)
		msg_warn("stopped by signal %d with %ld transfers in flight",
		    (int)S.stop, S.active);
	write_report();
	drop_all();
	/* Tidy up: nothing below may lose a record that was emitted. */
	rec_reader_free(S.in);
	rec_reader_free(S.back);
	if (S.fd_fifo != -1)
		close(S.fd_fifo);
	for (e = S.eps; e != NULL; e = en) {
		en = e->next;
		free(e->slot_held);
		free(e->idle);
		free(e->pev);
		free(e->bev);
		free(e->name);
		free(e->safe);
		free(e);
	}
	ledger_close(S.ledger);
	if (fo.run_dir != NULL) {
		close(fo.part_fd);
		close(fo.docs_fd);
	}
	store_close();
	claims_close();
	if (S.held > 0)
		msg_warn("%ld ids held by other pipelines on this run "
		    "directory were left to them", S.held);
	json_decref(S.seen);
	json_decref(S.done);
	free(S.out);
	free(S.wait);
	curl_multi_cleanup(S.multi);
	xfer_pool_free();
	bodies_close_root();
	curl_global_cleanup();
	state_close_all();
	conf_free(&fo.conf);
	if (S.stop)
		return 1;
	opt_fshut();
	return 0;
}
