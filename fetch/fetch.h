/* rfp-fetch internals: the rooms of fetch/ and what they share. */
#ifndef RFP_FETCH_H
#define RFP_FETCH_H

#include <stdio.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "lib/config/conf.h"
#include "lib/record/fate.h"
#include "lib/record/hdr.h"

struct attlog;
struct ep;

struct job {
	json_t		*rec;
	struct ep	*ep;
	double		 not_before;	/* epoch; 0: now */
	long		 lineno;
	int		 held;		/* held back by an open breaker */
	int		 retry;		/* a retry told a Retry-After: ready
					   first */
	int		 confirmed;	/* status_url said: not committed */
	/* A submission's key in the ledger when it was last looked at. */
	int		 l_st;		/* enum ledger_state */
	json_t		*l_seen;	/* ... its latest entry, or NULL */
	long		 seq;		/* the pace's grant number; -1: none */
	double		 granted;	/* clk_now when the gate let it go */
	struct xfer	*hop;		/* a redirect's next hop to the same
					   authority, waiting for the gate */
	struct job	*next;		/* in the ready queue */
};

struct xfer {
	struct xfer	*prev, *next;	/* transfers on the wire */
	struct job	*job;
	CURL		*easy;
	struct curl_slist *hdrs;
	char		*url;		/* this hop's; the record's at first */
	long		 hops;		/* redirects followed */
	double		 until;		/* clk_mono the attempt times out */
	char		*body;		/* request body */
	size_t		 body_len;
	int		 body_fd;	/* ... or its body_file, or -1 */
	long		 body_off;	/* ... read so far */
	int		 fd;		/* response body, or -1 */
	char		*mem;		/* ... held in memory while small */
	size_t		 mlen, mcap;
	char		*bid;		/* its file name: the record's id */
	char		*part;		/* its temporary path */
	char		*final;		/* its path once complete */
	EVP_MD_CTX	*sha;
	long		 bytes;
	int		 too_large;
	int		 slot;		/* slot index held, -1: none */
	int		 probe;		/* the breaker's half-open probe */
	int		 confirm;	/* asks a status_url, sends nothing */
	long		 inflight;	/* on its endpoint's wire as it was
					   written, itself included */
	int		 on_wire;	/* written, its answer not yet begun */
	double		 t0;
	double		 t_sent;	/* this hop's send: t0, or when a
					   redirect's next hop went */
	double		 t_wrote;	/* when the request went out, 0: not yet */
	int		 writes;	/* ... how many times on this hop */
	int		 resent;	/* libcurl would have sent it again */
	double		 t1;		/* when the transfer ended */
	char		*retry_after;
	char		*date;
	char		*ctype;
	struct hdr_ratelimit rl;
	int		 rl_seen;
	int		 unheard;	/* counted in its ep's unheard */
	int		 awaiting;	/* ... in its ep's awaiting */
	long		 round;		/* ... of its round of this number */
	double		 capped_at;	/* deadline that capped the timeout */
	double		 pace_rate;	/* its endpoint's pace at its send */
	const char	*brk;		/* ... and breaker ("closed", ...) */
	CURLcode	 cc;		/* how the transfer ended */
	int		 wr_err;	/* the body thread's errno, or 0 */
	int		 renamed;	/* ... and the body is in docs/ */
	struct xfer	*bnext;		/* in the body thread's lists */
};

/* Bodies up to this size are held in memory and filed by the body thread. */
#define BODY_MEM	(64 * 1024)

struct fopts {
	struct conf	 conf;
	const char	*run_dir;
	int		 docs_fd;	/* RUNDIR/docs, with a run directory */
	int		 part_fd;	/* RUNDIR/docs/.part: bodies being fetched */
	double		 deadline;	/* epoch; 0: none */
	int		 insecure;
	int		 on_open_dead;
	int		 from_queue;	/* records from rfp-queue pull */
	struct attlog	*log;		/* RUNDIR/logs/attempts.ndjson, or NULL */
};

/*
 * Within this many real seconds of the deadline, it has come: a transfer
 * whose timeout was capped to the deadline ends up to a millisecond early
 * by the wall clock, and nothing new is started only to be cut at once.
 */
#define DEADLINE_SLACK	0.01

/* Whether the deadline (epoch; 0: none) has come at wall time now. */
static inline int
deadline_come(double deadline, double now)
{
	return deadline > 0 && now >= deadline - DEADLINE_SLACK;
}

/*
 * The rooms of rfp-fetch, each a file, calls running one way: main.c (the
 * loop) -> admit.c -> submit.c -> queue.c -> gate.c -> out.c, and
 * submit.c -> wire.c, xfer.c -> bodies.c (claims.c stands alone; check.c
 * asks only xfer_admissible, as admission does).  Each takes the options
 * it needs from main.c's fopts, handed over once by its init call; none
 * reaches back up.
 */

/* out.c: records leaving on stdout. */
/* Queue rec for stdout (it stays the caller's); counted until acked. */
void	out_emit(json_t *rec);
/* rec leaves now without a request: dead with reason and detail. */
void	out_kill(json_t *rec, long lineno, enum fate_reason reason,
	    const char *detail);
/* Write what stdout takes without blocking, whole records at most
   PIPE_BUF bytes a write (atomic on a pipe); -1 when it is gone. */
int	out_flush(void);
/* Whether pending output is to be written now; idle: nothing will come
   soon to fill a piece (nothing on the wire, or stopping). */
int	out_due(int idle);
/* Real seconds until pending output falls due by age. */
double	out_due_in(void);
int	out_pending(void);
void	out_acked(void);	/* rfp-sink acknowledged one */
long	out_outstanding(void);
void	out_free(void);

/* gate.c: endpoints, slots, pace and breaker. */
void	gate_init(const struct fopts *o);
/* The endpoint named name, made on first use. */
struct ep *gate_endpoint(const char *name);
/*
 * Slot, pace, breaker, in that order, for j with room more transfers
 * allowed at all.  1: go (*slot, *probe set); 0: not yet (the endpoint is
 * blocked a while); -1: j was dead-lettered (circuit_open, quota).
 */
int	gate_try(struct job *j, long room, int *slot, int *probe);
/* Done with slot i of e: held until gate_release, at the end of the turn. */
void	gate_give(struct ep *e, int i);
/* Give back every slot held with no transfer (before the loop waits). */
void	gate_release(void);
/* What x's answer says of its endpoint, for its pace and breaker. */
void	gate_answered(struct xfer *x);
void	gate_feedback(const struct xfer *x);
/* Tell the shared pace and breaker the news; force: all of it now. */
void	gate_flush(int force);
/* store_news_fn: another host opened the breaker of, or gave back slots
   of, the endpoint. */
void	gate_news(const char *channel, const char *payload, void *arg);
void	gate_pass(void);	/* a pass over the ready jobs begins */
void	gate_pass_end(void);	/* ... and ends */
double	gate_wake(double now, double t, int ready);
const char *gate_name(const struct ep *e);
/* The pace (requests a real second, 0: none) and breaker of e, as last seen. */
void	gate_state(const struct ep *e, double *rate, const char **breaker);
int	gate_idempotent(const struct ep *e);
void	gate_ready(struct ep *e, long n);	/* its ready jobs, +n */
void	gate_waiting(struct ep *e, long n);	/* its jobs held for a time, +n */
void	gate_admitted(struct ep *e);	/* one of its records read */
int	gate_blocked(const struct ep *e, double now);
long	gate_sent(struct xfer *x);	/* one more in flight: how many now */
void	gate_done(struct ep *e);	/* ... one less */
void	gate_heard(struct xfer *x);	/* its news about to be told */
long	gate_wire_on(struct ep *e, double t, double granted);
				/* a request written at t, let by at granted:
				   how many now */
void	gate_wire_off(struct ep *e);	/* ... answered, or ended unanswered */
void	gate_hop_ok(struct xfer *x);	/* its 3xx, a redirect to the same
					   portal: a success for the pace */
void	gate_free(void);

/* wire.c: what is in flight, on one libcurl multi handle. */
void	wire_init(long max_connections);
void	wire_add(struct xfer *x);
int	wire_older(const struct xfer *x, double since, double before);
/*
 * How many requests to e are on the wire, written before before (epoch);
 * *next, when the first written since was (0: none).
 */
long	wire_hung(const struct ep *e, double before, double *next);
void	wire_perform(void);
/* The next transfer that ended (x->cc set), off the wire; NULL: none. */
struct xfer *wire_done(void);
/* Any transfer still on the wire, taken off it; NULL: none (stopping). */
struct xfer *wire_pop(void);
#define WIRE_FDS	5	/* the most descriptors wire_poll waits on */
void	wire_poll(struct curl_waitfd *w, unsigned int nw, double t);
void	wire_free(void);

/* queue.c: jobs held until their not_before, and jobs ready. */
void	job_free(struct job *j);
/*
 * Make rec (owned from now on) a job of its endpoint, held or ready;
 * fresh: a manifest record, not a retry.
 */
void	queue_add(json_t *rec, long lineno, int fresh);
/* Hold or queue j by its not_before. */
void	queue_put(struct job *j);
/* Held jobs whose time has come (at epoch now) become ready. */
void	queue_due(double now);
/*
 * Visit the ready jobs in order; a visit that returns 1 took the job, and
 * one that returns -1 ends the scan (nothing more can start).
 */
void	queue_scan(int (*visit)(struct job *, void *), void *arg);
long	queue_ready(void);
long	queue_held(void);
double	queue_next(void);	/* the soonest not_before held, or 0 */
/* The deadline: every job held or ready leaves dead deadline_cut. */
void	queue_cut(void);
void	queue_drop(void);	/* stopping: every job freed */

/* submit.c: the ledger and status checks. */
#define CONFIRM_MAX 4	/* status checks at once, beyond -j */
void	submit_init(const struct fopts *o);
/*
 * Before a submission is sent: 0 to send it, 1 when the ledger settled it
 * (replayed, or dead ambiguous_submit; the caller frees j), 2 when its
 * status_url is to be asked first (j is submit.c's now).
 */
int	submit_gate(struct job *j);
/*
 * j's submission is about to be sent: its intent goes to the ledger, unless
 * another process wrote for its key since submit_gate looked (it may have
 * sent it): then 1, nothing written, and j goes back to submit_gate.
 */
int	submit_intent(struct job *j);
/* ... and was not sent after all (a local error): the ledger says so. */
void	submit_unsent(const struct job *j);
void	submit_outcome(const struct xfer *x);
/* Start the status checks that may start (at most a few at once). */
void	submit_confirm_start(void);
/* A status check x ended: its submission is settled, sent or dead. */
void	submit_confirmed(struct xfer *x);
long	submit_busy(void);	/* checks waiting or on the wire */
long	submit_waiting(void);	/* ... waiting */
void	submit_cut(void);	/* the deadline: those waiting dead */
void	submit_close(void);

/* admit.c: the manifest and rfp-sink's FIFO. */
struct admit_counts {
	long	admitted, skipped, held;
	long	resumed_cut;	/* admitted again: cut by an earlier deadline */
	long	retried_dead;	/* ... dead before (--retry-dead) */
	long	orphaned;	/* left to a pipeline that ended without
				   filing them */
};
void	admit_open(const struct fopts *o, const char *fifo, int resume,
	    int retry_dead);
int	admit_wants(void);	/* the manifest is to be read */
void	admit_manifest(void);	/* read what stdin has */
void	admit_back(void);	/* read what the FIFO has */
int	admit_fifo_fd(void);	/* -1: none */
const char *admit_fifo(void);
int	admit_eof(void);
long	admit_unread(void);	/* manifest lines not yet read, if known */
int	admit_sink_seen(void);
int	admit_sink_gone(void);
void	admit_counts(struct admit_counts *n);
void	admit_settle(void);	/* held ids filed since: filed (the end) */
void	admit_close(void);
/*
 * --check's count of what a resume skips as filed: admit_check_open reads
 * run_dir's files as --resume (or --retry-dead) does; admit_check_filed
 * says whether admission skips a manifest line, by its id (NULL when it
 * has none of its own: no record, no id, an earlier line's) or else by
 * its text's key.  admit_close frees them.  admit_check_open: 0, or -1
 * said on stderr when the files cannot be read (a link, a FIFO) or, the
 * state not shared (in PostgreSQL), a state file is corrupt, as the run
 * would stop at them; nothing is filed then.
 */
int	admit_check_open(const char *run_dir, int retry_dead, int shared);
int	admit_check_filed(const char *id, const char *line, size_t len);
/*
 * A manifest line's record as admission takes it: what only a stage sets
 * removed (line_key, line, stage; and but for a retry, every attempt
 * field).  --check reads a line the same way.
 */
void	admit_clean(json_t *rec);
/*
 * 0 when rec, read from a line of len bytes, fits REC_LINE_MAX as it will
 * be written (its numbers as jansson writes them, its endpoint added);
 * else -1 with err set.  --check refuses what admission does.
 */
int	admit_size(const json_t *rec, size_t len, char *err, size_t errlen);
/*
 * 0 when rec's not_before (a retry's, fed back by hand) is within the one
 * bound on waits, max_retry_after, or past the deadline, which cuts the
 * wait; else -1 with err set.  --check refuses what admission does.
 */
int	admit_wait(const json_t *rec, const struct conf *c, double deadline,
	    char *err, size_t errlen);

/* xfer.c: one transfer. */
void	xfer_init(const struct fopts *o);
/*
 * What xfer_start would refuse of rec before sending anything, asked at
 * admission (and by --check): a ${NAME} in a header not set, a header
 * that expands to a bad value, a body_file that cannot be sent.  0, or -1
 * with 'field "...": ...' in err.
 */
int	xfer_admissible(const json_t *rec, char *err, size_t errlen);
/* Set up a transfer for job's next attempt; NULL and *err on a local error. */
struct xfer *xfer_start(struct job *job, char *err, size_t errlen);
/*
 * After one hop of x: when its answer is a redirect to follow, set x up for
 * the next hop and return 1 (the caller adds x->easy to the multi again);
 * else 0, x->cc possibly changed to say why the redirect was refused.
 */
int	xfer_redirect(struct xfer *x);
/* x is answered, or ended unanswered: off its endpoint's wire count. */
void	xfer_off_wire(struct xfer *x);
/*
 * Set up a GET of url, the status_url of job's submission (its answer held
 * in memory): over the same path as every request, TLS settings, timeout
 * and headers included, but sending nothing of the submission.
 */
struct xfer *xfer_confirm_start(struct job *job, const char *url);
/*
 * What a finished confirmation says: 1 committed (*reply set: the answer),
 * 0 not committed, -1 cannot tell (why says so).  Only a 200 with a JSON
 * object whose "committed" is true or false says either.
 */
int	xfer_confirmed(const struct xfer *x, json_t **reply, char *why,
	    size_t len);
/* Fill the record from a finished transfer; the caller frees with xfer_free. */
void	xfer_finish(struct xfer *x, CURLcode cc);
/* Release everything of x (not the job). */
void	xfer_free(struct xfer *x);
/* Its next hop, held for the gate, goes now. */
void	xfer_hop_resume(struct xfer *x);
/* Handles kept for reuse: at most this many, freed by xfer_pool_free. */
#define XFER_POOL	64
void	xfer_pool_free(void);
/* 1 when the finished x has a body for the body thread to file. */
int	xfer_files_body(const struct xfer *x);
int	xfer_looks_ok(const struct xfer *x);

/* bodies.c: the body thread.  bodies_start returns the fd to poll. */
void	bodies_init(const struct fopts *o);
/* Create (truncate) x's partial body file: the fd, or -1 with errno. */
int	bodies_open_part(const struct xfer *x);
/* The directory rec's body_file is under, as bodies_open takes it. */
const char *bodies_dir(const json_t *rec);
int	bodies_start(void);
void	bodies_put(struct xfer *list);
struct xfer *bodies_take(void);
void	bodies_stop(void);
/*
 * Open a request's body_file: a regular file under the body root, reached
 * without a symbolic link, at most max bytes.  The root is body_root, or
 * the manifest's directory: dir, the one rfp-queue load recorded, when
 * the record comes from the queue (bodies_dir), else standard input's.
 * The fd (*size set), or -1 with "field \"body_file\": ..." in err.
 */
int	bodies_open(const char *path, const char *dir, long max, long *size,
	    char *err,
	    size_t errlen);
/* Close the body root (at exit). */
void	bodies_close_root(void);
/* Fields of a previous attempt, removed before the next. */
void	xfer_clear(json_t *rec);

/*
 * --check (check.c): read the manifest on fd and print, per endpoint, its
 * documents and the limits of c; 0, 3 when lines are bad, 2 when config
 * names an endpoint no record has or the deadline is past.
 */
int	check_manifest(int fd, const struct conf *c, const char *config,
	    double deadline, const char *deadline_text, const char *run_dir);

/*
 * Claims (claims.c): which live pipeline on the run directory holds an id.
 * claims_open: this pipeline is owner (NULL: a name of this process's own).
 * claims_take: 1 when it is now this pipeline's (or was), 2 the same but
 * taken from a pipeline that died (it may have filed it), 0 when a live
 * one holds it (its name in holder).  claims_held: {owner: ids left to
 * it}, until claims_close, which says so on stderr.  Fatal errors exit 1.
 */
void	claims_open(const char *rundir, const char *owner);
int	claims_take(const char *id, char *holder, size_t len);
/*
 * claims_begin ... claims_end: the claims taken between are taken under
 * one lock, and their lines written together at claims_end (nothing may
 * be sent for them before).  Without, each claims_take locks and writes.
 */
void	claims_begin(void);
void	claims_end(void);
json_t	*claims_held(void);
void	claims_settle(const char *owner);	/* one less left to owner */
void	claims_ask_again(void);	/* who is alive: asked afresh from now */
int	claims_alive(const char *owner);	/* a stage of it runs */
void	claims_close(void);

#endif
