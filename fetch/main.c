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
 * PostgreSQL advisory locks with --state; bodies go to RUNDIR/docs/ID,
 * and each request, once answered, is a line of RUNDIR/logs/attempts.ndjson
 * (lib/accounts/attlog), as are the breaker's and the pace's changes.
 *
 * This file is the loop: options, the run directory, and each turn's
 * work (read, start, finish, write); the rooms it calls are listed in
 * fetch/fetch.h.
 *
 * Exit: 0 when every admitted record has left (and, in loop mode, been
 * acknowledged), 1 on a fatal error or a signal, 2 on a usage error.
 */
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "lib/accounts/attlog.h"
#include "lib/accounts/ledger.h"
#include "lib/control/breaker.h"
#include "lib/control/pace.h"
#include "lib/control/valid.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/record/doc.h"
#include "lib/record/fate.h"
#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/record/rec.h"
#include "lib/state/owner.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/state/store.h"
#include "lib/base/x.h"
#include "fetch/fetch.h"

#define PROG	"rfp-fetch"
#define FILING_MAX 2		/* x concurrency: on the wire and filing */
#define FILES_FIXED 64		/* open files besides the transfers': up to 32
				   state files and 16 idle slot files more than
				   -j kept (lib/state/files.c, store.c), pipes,
				   libraries */
/*
 * rfp-sink opens the retry FIFO first thing, and gives up after 10 s
 * without a reader: one not heard from by then never will be (it failed
 * to start), and nothing else would end the run.  Logical seconds, but
 * never under SINK_WAIT_MIN real ones: a stage slow to start (a loaded
 * machine, a sanitizer build) is no failed one.
 */
#define SINK_WAIT	15
#define SINK_WAIT_MIN	2.0

static const char usage[] =
    "usage: rfp-fetch [-hv] [-j N] [--ca-file FILE] [--check]\n"
    "                 [--config FILE] [--connect-timeout S]\n"
    "                 [--deadline WHEN] [--from-queue] [--insecure]\n"
    "                 [--max-body BYTES] [--max-redirects N]\n"
    "                 [--on-open wait|dead] [--owner NAME]\n"
    "                 [--report FILE] [--resume] [--retry-dead]\n"
    "                 [--retry-fifo FIFO] [--run-dir DIR] [--state URL]\n"
    "                 [--timeout S] [--version]\n";


static struct fopts fo;

/* The loop's own: what is on the wire, filing, and whether to stop. */
static struct {
	const char	*report;
	long		 active;	/* transfers on the wire */
	long		 filing;	/* ... off it, with the body thread */
	long		 wr_failed;	/* bodies that could not be written */
	int		 fd_bodies;	/* the body thread's wake-ups, or -1 */
	int		 fifo_ready;	/* poll saw the FIFO readable */
	int		 out_lost;	/* standard output failed */
	int		 running;	/* in the loop: a death writes the report */
	pthread_t	 main;		/* the loop's thread */
	double		 t0;		/* clk_mono() at start */
	volatile sig_atomic_t stop;
	volatile sig_atomic_t done;	/* all read, sent and written out */
} S;

/* A signal once all is done stops nothing: the run ends as it would. */
static void
on_signal(int sig)
{
	if (!S.done)
		S.stop = sig;
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

/*
 * One ready job: 1 when it left the ready queue (started, settled, handed
 * to a status check or dead), 0 when it waits there, -1 when it and every
 * job after it wait (no room, or the deadline has come).
 */
static int
start_one(struct job *j, void *arg)
{
	struct xfer *x;
	char err[300];
	int slot, probe = 0, g;

	(void)arg;
	if (room() <= 0 || deadline_come(fo.deadline, clk_now()))
		return -1;
	if (gate_blocked(j->ep, clk_now()))
		return 0;
	if (fo.run_dir != NULL && doc_is_submission(j->rec) &&
	    (g = submit_gate(j)) != 0) {
		if (g == 1)
			job_free(j);
		return 1;
	}
	if ((g = gate_try(j, room(), &slot, &probe)) == 0)
		return 0;
	if (g == -1) {
		job_free(j);
		return 1;
	}
	if ((x = j->hop) != NULL) {
		j->hop = NULL;
		xfer_hop_resume(x);
		x->inflight = gate_sent(x);
		S.active++;
		wire_add(x);
		return 1;
	}
	/*
	 * The intent first, the look and the write under one lock: of two
	 * runs sharing a ledger that both found the key unsent, one sends.
	 */
	if (fo.run_dir != NULL && doc_is_submission(j->rec) &&
	    submit_intent(j) == 1) {
		gate_give(j->ep, slot);
		return 0;	/* to submit_gate again, next turn */
	}
	if ((x = xfer_start(j, err, sizeof(err))) == NULL) {
		gate_give(j->ep, slot);
		if (fo.run_dir != NULL && doc_is_submission(j->rec))
			submit_unsent(j);
		msg_line(j->lineno, "%s", err);
		out_kill(j->rec, j->lineno, FATE_BAD_INPUT, err);
		job_free(j);
		return 1;
	}
	x->slot = slot;
	x->probe = probe;
	gate_state(j->ep, &x->pace_rate, &x->brk);
	if (probe)
		x->brk = "half_open";
	/* Ids and endpoints only: a URL may carry a key in its query. */
	msg_debug("%s: attempt %ld to %s%s", rec_str(j->rec, "id"),
	    rec_int(j->rec, "attempt", 0), gate_name(j->ep), probe ?
	    " (the breaker's probe)" : "");
	x->inflight = gate_sent(x);
	S.active++;
	wire_add(x);
	return 1;
}

/* Start what may start now. */
static void
start_ready(void)
{
	gate_pass();
	queue_scan(start_one, NULL);
	gate_pass_end();
}

static struct rec_buf reqline;	/* log_req's line, reused */

/*
 * The attempt log's line for request x, answered at x->t1 (or, with
 * dropped, not at all: stopping).  status and error as the record has
 * them; a status check's are its own (confirm).
 */
static void
log_req(const struct xfer *x, const char *dropped)
{
	struct rec_buf *b = &reqline;
	const json_t *rec = x->job->rec, *v;
	long st = 0;
	double at = x->t1 > 0 ? x->t1 : clk_now();

	if (fo.log == NULL)
		return;
	/* Written by hand: jansson's objects were a twentieth of a fast run. */
	b->len = 0;
	rec_puts(b, "\"id\":");
	if ((v = json_object_get(rec, "id")) == NULL ||
	    rec_put_val(b, v, 13) == -1)
		rec_puts(b, "null");
	rec_puts(b, ",\"ep\":");
	rec_put_str(b, gate_name(x->job->ep));
	rec_puts(b, ",\"attempt\":");
	rec_put_int(b, rec_int(rec, "attempt", 0));
	rec_puts(b, ",\"sent\":");
	rec_put_real(b, x->t0, 13);
	rec_puts(b, ",\"ms\":");
	rec_put_int(b, (long long)((at - x->t0) * 1000));
	rec_puts(b, ",\"status\":");
	if (x->confirm) {
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &st);
		if (st > 0)
			rec_put_int(b, st);
		else
			rec_puts(b, "null");
		rec_puts(b, ",\"error\":");
		if (x->cc == CURLE_OK)
			rec_puts(b, "null");
		else
			rec_put_str(b, "transfer");
		rec_puts(b, ",\"confirm\":true");
	} else if (dropped != NULL) {
		rec_puts(b, "null,\"error\":");
		rec_put_str(b, dropped);
	} else {
		if ((v = json_object_get(rec, "status")) == NULL ||
		    rec_put_val(b, v, 13) == -1)
			rec_puts(b, "null");
		rec_puts(b, ",\"error\":");
		if ((v = json_object_get(rec, "error")) == NULL ||
		    rec_put_val(b, v, 13) == -1)
			rec_puts(b, "null");
	}
	rec_puts(b, ",\"rate\":");
	rec_put_real(b, x->pace_rate, 13);
	rec_puts(b, ",\"breaker\":");
	rec_put_str(b, x->brk ? x->brk : "closed");
	if (x->hops > 0) {
		rec_puts(b, ",\"hops\":");
		rec_put_int(b, x->hops);
	}
	if (attlog_line(fo.log, ATTLOG_REQ, at, b->s, b->len) == -1)
		msg_warnsys("write %s", attlog_path(fo.log));
}

/* Write the attempt lines held (a failure is said once: the log stops). */
static void
log_flush(void)
{
	if (attlog_flush(fo.log) == -1)
		msg_warnsys("write %s", attlog_path(fo.log));
}

/* Whether errno e, writing a body, is the disk's failing, not the body's. */
static int
disk_failed(int e)
{
	switch (e) {
	case ENOSPC:
	case EDQUOT:
	case EIO:
	case EROFS:
	case EFBIG:
	case ENFILE:
	case EMFILE:
	case ENOMEM:
		return 1;
	}
	return 0;
}

/* A transfer is over and its body, if any, filed: its record goes out. */
static void
complete(struct xfer *x)
{
	gate_heard(x);
	xfer_finish(x, x->cc);
	log_req(x, NULL);
	msg_debug("%s: %s after %ld ms", rec_str(x->job->rec, "id"),
	    rec_str(x->job->rec, "error") ? rec_str(x->job->rec, "error") :
	    "answered", rec_int(x->job->rec, "elapsed_ms", 0));
	if (fo.run_dir != NULL && doc_is_submission(x->job->rec))
		submit_outcome(x);
	/*
	 * Its body could not be written here for want of room or a working
	 * disk (a full disk, a quota, an I/O error, a read-only remount):
	 * not the document's fault, nor the portal's, and no dead letter.
	 * The run stops, this record and the rest unfiled: pending, so a
	 * re-run fetches them once that is put right.  (A submission's
	 * ledger entry says ambiguous: a re-run asks, never sends blind.)
	 * What is this document's own (a link planted at its partial file)
	 * is still its dead letter, "write".
	 */
	if (fo.run_dir != NULL && disk_failed(x->wr_err)) {
		if (S.wr_failed++ == 0)
			msg_warn("write %s: %s; stopping: a re-run on this run "
			    "directory fetches what was not filed", x->part ?
			    x->part : fo.run_dir, strerror(x->wr_err));
		if (S.stop == 0)
			S.stop = -1;
		job_free(x->job);
		xfer_free(x);
		return;
	}
	gate_feedback(x);
	out_emit(x->job->rec);
	job_free(x->job);
	xfer_free(x);
}

/* Complete what the body thread has filed since. */
static void
complete_filed(void)
{
	struct xfer *x, *next;

	if (fo.run_dir == NULL)
		return;
	for (x = bodies_take(); x != NULL; x = next) {
		next = x->bnext;
		S.filing--;
		complete(x);
	}
}

/*
 * A redirect's next hop.  To the authority the record named, it is one
 * more request to the same portal and its limit, and asks the gate as a
 * send does for the pace (the ready queue, ahead of fresh records):
 * followed at once, every hop reached a strict 20 r/s on its 302's heels
 * and was refused, and a batch of 30 saved none (told; not told, the pace
 * held itself 32 s a send for want of a success).  It keeps its attempt's
 * slot, and the breaker is not asked again: the attempt got by both.
 * Elsewhere (a download host), it goes at once.
 */
static void
hop_next(struct xfer *x)
{
	struct job *j = x->job;
	const char *url = rec_str(j->rec, "url");
	char *a, *b;
	int same;

	a = doc_authority(x->url);
	b = doc_authority(url != NULL ? url : "");
	same = strcmp(a, b) == 0;
	free(a);
	free(b);
	if (!same) {
		j->granted = x->t_sent = clk_now();
		x->t_wrote = 0;
		wire_add(x);
		return;
	}
	gate_hop_ok(x);
	gate_heard(x);
	gate_done(j->ep);
	S.active--;
	j->hop = x;
	j->not_before = 0;
	j->retry = 1;
	queue_put(j);
}

static void
finish_done(void)
{
	struct xfer *x, *filing = NULL, **tail = &filing;

	while ((x = wire_done()) != NULL) {
		xfer_off_wire(x);
		if (x->confirm) {
			x->t1 = clk_now();
			log_req(x, NULL);
			submit_confirmed(x);
			continue;
		}
		if (xfer_redirect(x)) {
			hop_next(x);
			continue;
		}
		x->t1 = clk_now();
		/* Off the wire: its slot is free, whatever filing is left. */
		gate_give(x->job->ep, x->slot);
		x->slot = -1;
		gate_answered(x);
		gate_done(x->job->ep);
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
	complete_filed();
	gate_flush(0);
}

/*
 * Stopping early, what the body thread holds was answered: once filed, it
 * completes as any answer does, and before the last news goes to the pace
 * and the breaker.  Dropped, a submission's answer never reached the
 * ledger, and the re-run could only file it ambiguous_submit.
 */
static void
finish_filed(void)
{
	if (fo.run_dir == NULL)
		return;
	bodies_stop();
	complete_filed();
}

/*
 * A redirect's next hop waiting for the gate, dropped (why: "stopped" or
 * "deadline"): its 3xx was sent, and the attempt log says so.
 */
static int
log_parked(struct job *j, void *why)
{
	if (j->hop != NULL)
		log_req(j->hop, why);
	return 0;
}

/* Count a redirect's next hop waiting for the gate. */
static int
count_parked(struct job *j, void *n)
{
	if (j->hop != NULL)
		(*(long *)n)++;
	return 0;
}

/*
 * Stopping early: drop what is on the wire or waiting.  Nothing is lost:
 * what was not filed is fetched again by a re-run.
 */
static void
drop_all(void)
{
	struct xfer *x;

	while ((x = wire_pop()) != NULL) {
		log_req(x, "stopped");
		job_free(x->job);
		xfer_free(x);
	}
	queue_scan(log_parked, "stopped");
	queue_drop();
}

/* Write --report; a failure is fatal, unless dying already. */
static void
write_report(int dying)
{
	struct admit_counts n;
	json_t *r;
	char *tmp;
	int e;

	S.running = 0;
	if (S.report == NULL)
		return;
	admit_counts(&n);
	r = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "admitted",
	    (json_int_t)n.admitted, "skipped", (json_int_t)n.skipped, "held",
	    (json_int_t)n.held, "orphaned", (json_int_t)n.orphaned,
	    "resumed_cut", (json_int_t)n.resumed_cut, "retried_dead",
	    (json_int_t)n.retried_dead, "pid", (json_int_t)getpid());
	if (fo.run_dir != NULL)
		json_object_set(r, "held_by", claims_held());
	/* rfp-sink reads it: the records not filed are left, not lost. */
	if (S.stop > 0)
		json_object_set_new(r, "stopped", json_integer(S.stop));
	tmp = xasprintf("%s.tmp", S.report);
	e = files_dump(r, S.report, tmp, JSON_COMPACT) == -1 ? errno : 0;
	free(tmp);
	json_decref(r);
	if (e != 0 && !dying) {
		errno = e;
		msg_diesys(1, "write %s", S.report);
	}
}

/*
 * A fatal error met in the loop or a room below it (a state file found
 * corrupt mid-run: msg_die) still leaves the report, so that what was
 * admitted and not filed is pending, not lost: rfp-sink reconciles
 * against it.  Before, the summary said admitted null.
 */
static void
report_at_exit(void)
{
	if (S.running && pthread_equal(pthread_self(), S.main)) {
		(void)attlog_flush(fo.log);	/* the error that ends it is said */
		write_report(1);
	}
}

static int
finished(void)
{
	if (!admit_eof() || queue_ready() > 0 || queue_held() > 0 ||
	    S.active > 0 || S.filing > 0 || out_pending() || submit_busy() > 0)
		return 0;
	if (admit_fifo() == NULL)
		return 1;
	/* Wait for rfp-sink's hello (briefly) so its open finds a reader. */
	return out_outstanding() <= 0 && (admit_sink_seen() ||
	    clk_mono() - S.t0 > 10);
}

/*
 * Whether requests may go: with a retry FIFO, once rfp-sink has said hello
 * on it.  Before, a request's record might have no stage to file it: an
 * rfp-sink that refused its environment at its start (a bad
 * RFPIPE_PROGRESS_INTERVAL) let a batch's submissions out, committed at
 * the portal and filed nowhere.
 */
static int
sink_up(void)
{
	return admit_fifo() == NULL || admit_sink_seen();
}

static int
idle(void)
{
	return S.active + S.filing == 0 || S.stop;
}

static double
poll_timeout(void)
{
	double now = clk_now(), t = 0.25;

	if (queue_held() > 0 && queue_next() - now < t)
		t = queue_next() - now;
	/* Work that waits for a transfer to end waits for its socket. */
	t = gate_wake(now, t, queue_ready() > 0 && room() > 0 && sink_up());
	/* Awake when the deadline comes; once it has, nothing waits on it. */
	if (fo.deadline > 0 && !deadline_come(fo.deadline, now) &&
	    fo.deadline - DEADLINE_SLACK - now < t)
		t = fo.deadline - DEADLINE_SLACK - now;
	/* Output not due yet is due by then; due output waits on POLLOUT. */
	if (out_pending() && !out_due(idle()) && out_due_in() < t)
		t = out_due_in();
	return t <= 0 ? 0 : t;
}

static void
run(void)
{
	struct curl_waitfd w[WIRE_FDS];
	unsigned int nw, i;
	int cut = 0, news = 0;
	char err[512];
	double wait;

	while (!finished() && !S.stop) {
		admit_manifest();
		if (S.fifo_ready) {
			S.fifo_ready = 0;
			admit_back();
		}
		if (admit_fifo() != NULL && !admit_sink_seen() &&
		    clk_mono() - S.t0 > (wait = fmax(clk_real(SINK_WAIT),
		    SINK_WAIT_MIN))) {
			msg_warn("rfp-sink has not opened %s in %.0f s; "
			    "stopping: a re-run on this run directory fetches "
			    "what was not filed", admit_fifo(),
			    wait / clk_scale());
			S.stop = -1;
			break;
		}
		if (admit_sink_gone()) {
			msg_warn("rfp-sink closed %s with %ld records not "
			    "acknowledged; a re-run on this run directory "
			    "fetches what was not filed", admit_fifo(),
			    out_outstanding());
			S.stop = -1;
			break;
		}
		queue_due(clk_now());
		if (deadline_come(fo.deadline, clk_now()) && !cut)
			cut = 1;
		if (cut && (queue_held() > 0 || queue_ready() > 0 ||
		    submit_waiting() > 0)) {
			queue_scan(log_parked, "deadline");
			queue_cut();
			submit_cut();
		}
		wire_perform();
		finish_done();
		/* What just finished hands its slot on; nothing held idle. */
		if (sink_up()) {
			start_ready();
			submit_confirm_start();
		}
		gate_release();
		/*
		 * The turn's attempt lines, in one write: before its records
		 * (a record downstream has its line), and before the wait.
		 */
		log_flush();
		if (out_due(idle()) && out_flush() == -1) {
			/*
			 * The reader is gone (a stage after this one failed:
			 * it says why) or its file failed.  Stop as at a
			 * signal, and still write the report: what was
			 * admitted and not written is pending, not lost.
			 */
			if (errno != EPIPE)
				msg_warnsys("write stdout");
			S.out_lost = 1;
			S.stop = -1;
			break;
		}
		if (finished())
			break;
		nw = 0;
		if (admit_wants()) {
			w[nw].fd = STDIN_FILENO;
			w[nw].events = CURL_WAIT_POLLIN;
			w[nw++].revents = 0;
		}
		if (admit_fifo_fd() != -1) {
			w[nw].fd = admit_fifo_fd();
			w[nw].events = CURL_WAIT_POLLIN;
			w[nw++].revents = 0;
		}
		if (out_due(idle())) {
			w[nw].fd = STDOUT_FILENO;
			w[nw].events = CURL_WAIT_POLLOUT;
			w[nw++].revents = 0;
		}
		if (S.fd_bodies != -1) {
			w[nw].fd = S.fd_bodies;
			w[nw].events = CURL_WAIT_POLLIN;
			w[nw++].revents = 0;
		}
		/* Other hosts' news wakes the loop (breaker openings, pace cuts). */
		if (store_news_fd() != -1) {
			w[nw].fd = store_news_fd();
			w[nw].events = CURL_WAIT_POLLIN;
			w[nw++].revents = 0;
		}
		wire_poll(w, nw, poll_timeout());
		news = 0;
		for (i = 0; i < nw; i++) {
			if (w[i].fd == admit_fifo_fd() && w[i].revents != 0)
				S.fifo_ready = 1;
			if (w[i].fd == store_news_fd() && w[i].revents != 0)
				news = 1;
		}
		if (store_news(news, gate_news, NULL, err, sizeof(err)) == -1)
			msg_die(1, "%s", err);
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


/* What the command line says beyond fo. */
struct cli {
	const char	*config, *deadline, *state, *fifo, *owner;
	int		 resume, retry_dead, check;
};

/* Read the options into fo and cli; a usage error exits 2. */
static void
options(int argc, char *argv[], struct cli *cli)
{
	static const struct option longopts[] = {
		{ "ca-file", required_argument, NULL, 'a' },
		{ "check", no_argument, NULL, 'K' },
		{ "config", required_argument, NULL, 'C' },
		{ "connect-timeout", required_argument, NULL, 'c' },
		{ "deadline", required_argument, NULL, 'D' },
		{ "from-queue", no_argument, NULL, 'Q' },
		{ "help", no_argument, NULL, 'h' },
		{ "insecure", no_argument, NULL, 'k' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "max-body", required_argument, NULL, 'B' },
		{ "max-redirects", required_argument, NULL, 'R' },
		{ "on-open", required_argument, NULL, 'o' },
		{ "owner", required_argument, NULL, 'O' },
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
	const char *ca = NULL, *on_open = NULL;
	double ctmo = -1, tmo = -1;
	long jobs = -1, maxbody = -1, maxredir = -1;
	int c;

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
			cli->config = optarg;
			break;
		case 'K':
			cli->check = 1;
			break;
		case 'd':
			cli->retry_dead = 1;
			break;
		case 'D':
			cli->deadline = optarg;
			break;
		case 'f':
			cli->fifo = optarg;
			break;
		case 'j':
			jobs = opt_long("jobs", optarg, 1, 4096);
			break;
		case 'k':
			fo.insecure = 1;
			break;
		case 'Q':
			fo.from_queue = 1;
			break;
		case 'o':
			if (strcmp(optarg, "wait") && strcmp(optarg, "dead"))
				msg_die(2, "option --on-open: expected \"wait\" "
				    "or \"dead\", got \"%s\"", optarg);
			on_open = optarg;
			break;
		case 'O':
			if (!owner_name_ok(optarg))
				msg_die(2, "option --owner: expected at most "
				    "40 letters, digits, '.', '_' and '-', "
				    "got \"%s\"", optarg);
			cli->owner = optarg;
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
			cli->state = opt_state(optarg);
			break;
		case 't':
			tmo = opt_duration("timeout", optarg);
			break;
		case 'u':
			cli->resume = 1;
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	opt_no_operands(argc, argv, usage);
	opt_conf(&fo.conf, cli->config);
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
	if (cli->deadline == NULL)
		cli->deadline = fo.conf.deadline;
	fo.deadline = opt_deadline_pick(cli->deadline, &fo.conf);
}

/*
 * Make the run directory's parts rfp-fetch writes, and open docs/ and
 * docs/.part.  A body is written in docs/.part and renamed into docs/ once
 * whole: docs/ID is never a partial body, and the large directory sees one
 * entry made per document, not three.
 */
static void
run_dir_open(void)
{
	char err[512], *path;

	if (files_mkdirs(fo.run_dir, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	/* Found now, before a request, not at the first retry (rfpipe asks
	   rfp-backoff the same before it starts the stages). */
	if (files_check_state(fo.run_dir, store_shared(), control_valid, err,
	    sizeof(err)) == -1)
		msg_die(1, "%s", err);
	path = rundir_path(fo.run_dir, RUNDIR_PART, NULL);
	if (files_mkdir(path, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	if ((fo.part_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		msg_diesys(1, "open %s", path);
	free(path);
	path = rundir_path(fo.run_dir, RUNDIR_DOCS, NULL);
	if ((fo.docs_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		msg_diesys(1, "open %s", path);
	free(path);
	if ((fo.log = attlog_open(fo.run_dir)) == NULL)
		msg_die(1, "open %s/%s: %s", fo.run_dir,
		    rundir_name(RUNDIR_ATTEMPTS), files_why(errno));
	/* The deadline and time scale, for a report to draw the run by. */
	if (attlog_write(fo.log, ATTLOG_START, clk_now(), json_pack(
	    "{s:s,s:I,s:f,s:f}", "prog", PROG, "pid", (json_int_t)getpid(),
	    "deadline", fo.deadline, "scale", clk_scale())) == -1)
		msg_diesys(1, "write %s", attlog_path(fo.log));
	attlog_hold(fo.log);	/* the loop writes each turn's at once */
}

/* Release everything (nothing below may lose a record that was emitted). */
static void
tidy(void)
{
	struct admit_counts n;
	char err[512];

	admit_counts(&n);
	admit_close();
	gate_free();
	/* Whoever paces these endpoints next finds no one still at it. */
	if (pace_leave(fo.run_dir, err, sizeof(err)) == -1)
		msg_warn("%s", err);
	submit_close();
	if (fo.run_dir != NULL) {
		close(fo.part_fd);
		close(fo.docs_fd);
	}
	log_flush();
	attlog_close(fo.log);
	free(reqline.s);
	store_close();
	claims_close();
	if (n.held > 0)
		msg_warn("%ld ids held by other pipelines on this run "
		    "directory were left to them", n.held);
	if (n.orphaned > 0)
		msg_warn("%ld ids left to other pipelines were not finished "
		    "by them before they ended: a re-run takes them up",
		    n.orphaned);
	if (n.resumed_cut > 0)
		msg_warn("%ld documents the deadline cut in an earlier run "
		    "were taken up again", n.resumed_cut);
	if (n.retried_dead > 0)
		msg_warn("%ld documents dead in an earlier run were taken up "
		    "again (--retry-dead)", n.retried_dead);
	out_free();
	wire_free();
	xfer_pool_free();
	bodies_close_root();
	curl_global_cleanup();
	files_close_all();
	conf_free(&fo.conf);
}

int
main(int argc, char *argv[])
{
	struct cli cli = { NULL };
	struct sigaction sa;
	struct stat st;
	char err[512];
	long parked;
	const char *filed_in;
	int c, bad_dir;

	msg_init(PROG);
	opt_check_env();
	options(argc, argv, &cli);
	/*
	 * A queue's records come from rfp-queue pull, on a pipe, with the
	 * manifest_dir rfp-queue load set (a line's own dropped).  A file on
	 * standard input is a manifest, whose lines never choose their own
	 * body root: refused, not read with the roots its lines name.
	 */
	if (fo.from_queue && fstat(STDIN_FILENO, &st) == 0 &&
	    S_ISREG(st.st_mode))
		msg_die(2, "option --from-queue: standard input is a file; "
		    "the records come from rfp-queue pull, on a pipe (a "
		    "manifest is read without --from-queue)");
	/*
	 * The config's ledger is kept outside the run directory and vetted
	 * as it is, by --check too: before anything is sent.  (With the state
	 * in PostgreSQL it is unused.)
	 */
	if (fo.conf.ledger != NULL && cli.state == NULL &&
	    fo.conf.state == NULL &&
	    ledger_vet(fo.conf.ledger, err, sizeof(err)) == -1)
		msg_die(2, "%s: key \"ledger\": %s", cli.config, err);
	if (cli.check) {
		/* Headers and body files are checked as admission does. */
		xfer_init(&fo);
		bodies_init(&fo);
		/* With --resume, what the run directory has filed. */
		filed_in = cli.resume || cli.retry_dead ? fo.run_dir : NULL;
		bad_dir = filed_in != NULL && admit_check_open(filed_in,
		    cli.retry_dead, cli.state != NULL || fo.conf.state !=
		    NULL) == -1;
		c = check_manifest(STDIN_FILENO, &fo.conf, cli.config,
		    fo.deadline, cli.deadline, bad_dir ? NULL : filed_in);
		admit_close();
		if (bad_dir)
			c = 2;
		bodies_close_root();
		conf_free(&fo.conf);
		opt_fshut();
		return c;
	}
	cli.state = opt_state_pick(cli.state, &fo.conf, cli.config);
	if (cli.state != NULL && (store_init(cli.state, err, sizeof(err)) ==
	    -1 || store_listen(BREAKER_CHANNEL, err, sizeof(err)) == -1 ||
	    store_listen(PACE_CHANNEL, err, sizeof(err)) == -1))
		msg_die(1, "%s", err);
	if ((cli.resume || cli.retry_dead) && fo.run_dir == NULL)
		msg_die(2, "option --%s: needs --run-dir", cli.resume ?
		    "resume" : "retry-dead");
	if (fo.insecure)
		msg_warn("WARNING: --insecure: TLS certificates are NOT "
		    "verified; a man in the middle can read and change every "
		    "request");
	umask(077);
	if (fo.run_dir != NULL)
		run_dir_open();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		msg_die(1, "curl_global_init failed");
	files_limit();
	store_slots_keep(fo.conf.concurrency + CONFIRM_MAX);
	wire_init(fo.conf.concurrency + CONFIRM_MAX);
	xfer_init(&fo);
	bodies_init(&fo);
	gate_init(&fo);
	submit_init(&fo);
	if (fo.run_dir != NULL)
		claims_open(fo.run_dir, cli.owner);
	nonblock(STDIN_FILENO);
	nonblock(STDOUT_FILENO);
	admit_open(&fo, cli.fifo, cli.resume, cli.retry_dead);
	S.fd_bodies = fo.run_dir != NULL ? bodies_start() : -1;
	S.t0 = clk_mono();
	S.main = pthread_self();
	S.running = 1;
	atexit(report_at_exit);
	run();
	/*
	 * A signal that came as the loop found all done (read, sent, written
	 * out and acknowledged) stopped nothing: said "stopped", rfpipe
	 * printed a resume line for a run with nothing left to resume.  Not
	 * one that came with a failure: a body the disk refused keeps the
	 * signal's number (complete), its record dropped, pending.
	 */
	if (S.stop >= 0 && S.wr_failed == 0 && finished()) {
		S.done = 1;
		S.stop = 0;
	}
	finish_filed();
	gate_flush(1);
	log_flush();
	/* What it takes now; a reader gone is said by the stage that went. */
	if (S.stop && !S.out_lost && out_flush() == -1 && errno != EPIPE)
		msg_warnsys("write stdout");
	/*
	 * In flight: on the wire, and the redirects whose next hop waits
	 * for the gate (their 3xx was sent).
	 */
	if (S.stop > 0) {
		parked = 0;
		queue_scan(count_parked, &parked);
		msg_warn("stopped by signal %d with %ld transfers in flight",
		    (int)S.stop, S.active + parked);
	}
	admit_settle();
	write_report(0);
	drop_all();
	tidy();
	if (S.stop)
		return 1;
	opt_fshut();
	return 0;
}
