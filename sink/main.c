/*
 * rfp-sink: file every record by its fate and reconcile the run.
 *
 * Reads records from rfp-backoff.  "done" records are appended to
 * RUNDIR/results.ndjson and "dead" ones to RUNDIR/dead.ndjson, each with one
 * write(2); "retry" records go to the retry FIFO (--retry-fifo), or to
 * stdout when there is none.  In loop mode every terminal record is also
 * acknowledged on the FIFO so rfp-fetch knows when the run is over.  At EOF
 * it writes RUNDIR/summary.json and a reconciliation table on stderr:
 * succeeded, dead-lettered by reason, cut, and the check that every
 * admitted record came out exactly once.  It adds no fields.
 *
 * With --progress it also keeps the operator informed on stderr while it
 * reads: one line redrawn with \r on a terminal, or a plain line every 30
 * logical seconds off one, as under cron.  The line counts what this sink
 * has filed; it cannot tell a record waiting to be retried from one in
 * flight, so with --total both are "pending".  It is redrawn on a timer, as records are filed and
 * while none arrive, so it moves while every record is held.
 *
 * SIGINT and SIGTERM do not stop it: rfp-fetch stops on them, and the sink
 * files what is still on its way, then reads EOF.  A run stopped so (here
 * or in the --admitted-from report) reconciles with the unfiled counted as
 * pending.
 *
 * With --owner it holds the pipeline's owner file (fetch/claims.c) until
 * it exits, so the ids rfp-fetch claimed stay the pipeline's while records
 * of theirs may still be on their way here.
 *
 * Exit: 0 at EOF with the counts reconciled, 1 on a write error or a
 * failed reconciliation, 2 on a usage error.  With --fate-status, 3 when
 * the run directory holds dead documents (a stray line's letter is none),
 * 4 when the deadline cut some, and 5 when documents are in neither file
 * yet: rfp-fetch left ids to another pipeline still running, or this run's
 * stray lines left some pending (5 wins, then 4).
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/base/clk.h"
#include "lib/accounts/dead.h"
#include "lib/record/fate.h"
#include "cmd/loop.h"
#include "cmd/msg.h"
#include "lib/base/num.h"
#include "cmd/opt.h"
#include "lib/record/rec.h"
#include "lib/state/owner.h"
#include "lib/state/rundir.h"
#include "lib/record/scan.h"
#include "lib/record/view.h"
#include "lib/state/files.h"
#include "lib/accounts/summ.h"
#include "lib/base/x.h"

#define PROG	"rfp-sink"

static const char usage[] =
    "usage: rfp-sink [-hqv] [--admitted-from FILE] [--fate-status]\n"
    "                [--fetch-ended FILE] [--owner NAME] [--progress MODE]\n"
    "                [--retry-fifo FIFO] --run-dir DIR [--total N]\n"
    "                [--version]\n";

enum progress_mode {
	PROGRESS_NONE,
	PROGRESS_TTY,		/* one line, redrawn in place */
	PROGRESS_PLAIN		/* a new line each time, for log files */
};

static struct opts {
	const char	*run_dir;
	const char	*fifo;
	const char	*admitted_from;
	const char	*fetch_ended;	/* there once rfp-fetch has ended */
	int		 fetch_failed;	/* ... with 1 to 127 (fetch_failed()) */
	const char	*owner;		/* see fetch/claims.c */
	int		 quiet;
	int		 fate_status;
	int		 fd_done, fd_dead, fd_fifo;
	int		 fd_lock;	/* state/sink.lock, held shared */
	int		 fd_owner;	/* state/owners/OWNER, held */
	struct rec_out	*done_out, *dead_out;	/* records, gathered */
	struct rec_out	*fifo_out;	/* acks and retries, gathered */
	double		 last_sync;
	struct summ	*run;		/* this run's records */
	enum progress_mode progress;
	long		 total;		/* documents admitted; -1: unknown */
	double		 p_every;	/* real seconds between lines */
	double		 p_start, p_last;
	size_t		 p_width;	/* columns the terminal line covers */
} opts;

static volatile sig_atomic_t stopped;	/* the signal received, or 0 */

static void
on_signal(int sig)
{
	stopped = sig;
}

/*
 * Write the gathered records to results.ndjson and dead.ndjson: whole
 * records, a few kilobytes a write(2) to a file opened O_APPEND, so
 * sinks sharing a run directory never interleave.  Called before any ack
 * or retry leaves for rfp-fetch, so an ack never outruns its record.
 */
static int
flush_files(void)
{
	if (rec_out_flush(opts.done_out) == -1) {
		msg_warnsys("write %s/%s", opts.run_dir,
		    rundir_name(RUNDIR_RESULTS));
		return -1;
	}
	if (rec_out_flush(opts.dead_out) == -1) {
		msg_warnsys("write %s/%s", opts.run_dir,
		    rundir_name(RUNDIR_DEAD));
		return -1;
	}
	return 0;
}

/*
 * rfp-fetch's exit status from the --fetch-ended file, once rfpipe has
 * written it: -1 while it is not there (or without the option), -2 when
 * it is there with no status in it.  When it is from 1 to 127, rfp-fetch
 * failed and said why (or stopped because a stage after it ended early,
 * which said why): what the sink would add about it is a follow-on, and
 * is not said.
 */
static int
fetch_status(void)
{
	FILE *f;
	int st, i;

	/*
	 * Found empty, it may be between its making and its writing (an
	 * older rfpipe wrote it in place, and a busy machine let the sink
	 * read it there: the run, stopped, was taken for one that had lost
	 * documents): read again for a second before taking it as empty.
	 */
	for (i = 0; i < 100; i++) {
		if (opts.fetch_ended == NULL || (f = fopen(opts.fetch_ended,
		    "r")) == NULL)
			return -1;
		if (fscanf(f, "%d", &st) != 1)
			st = -2;	/* there, no status (a full disk) */
		fclose(f);
		if (st != -2)
			return st;
		clk_sleep(0.01, NULL);
	}
	return st;
}

#define FETCH_FAILED(st)	((st) >= 1 && (st) <= 127)

/*
 * rfp-fetch is gone: keep filing; what it would have retried is re-admitted
 * by a re-run, since it is in neither results nor dead.  Said unless it
 * failed, or stopped for a stage that did, and said why (fetch_status):
 * rfpipe writes that as it reaps it, a moment after the write failed.
 */
static void
fifo_lost(void)
{
	int e = errno, st = -1, i;

	for (i = 0; i < 100 && opts.fetch_ended != NULL &&
	    (st = fetch_status()) == -1; i++)
		clk_sleep(0.01, NULL);
	errno = e;
	if (!FETCH_FAILED(st))
		msg_warnsys("write %s (rfp-fetch has gone; retries are left "
		    "for a re-run)", opts.fifo);
	rec_out_free(opts.fifo_out);
	opts.fifo_out = NULL;
	close(opts.fd_fifo);
	opts.fd_fifo = -1;
}

/*
 * Open the FIFO's write end once rfp-fetch holds the read end.  -1 when
 * rfp-fetch has already ended: a sink slow to start meets no reader after
 * a run stopped at once, or after an rfp-fetch killed.  The sink cannot
 * tell a slow rfp-fetch from a dead one by itself; whoever started it can.
 * It has ended when the --fetch-ended file is there (rfpipe writes it once
 * it has reaped rfp-fetch, however it ended: sure, and at once).  Without
 * one (by hand), when its --admitted-from report is there and no reader
 * came for a second (a report left by an earlier run is not taken for
 * this one's: its rfp-fetch opens the FIFO within milliseconds).  Else,
 * after 10 s, the sink gives up.
 */
static int
open_fifo(const char *path)
{
	static const char hello[] = "{\"ack\":\"hello\"}\n";
	double t0 = clk_mono();
	struct stat st;
	int fd, fl;

	while ((fd = files_open(path, O_WRONLY | O_NONBLOCK, 0)) == -1) {
		if (errno != ENXIO || clk_mono() - t0 > 10)
			msg_die(1, "open %s: %s", path, files_why(errno));
		if (opts.fetch_ended != NULL &&
		    access(opts.fetch_ended, F_OK) == 0) {
			if (!FETCH_FAILED(fetch_status()))
				msg_warn("%s: rfp-fetch has ended; retries "
				    "are left for a re-run", path);
			return -1;
		}
		if (clk_mono() - t0 > 1 && opts.admitted_from != NULL &&
		    access(opts.admitted_from, F_OK) == 0) {
			msg_warn("%s: rfp-fetch has finished; retries are "
			    "left for a re-run", path);
			return -1;
		}
		clk_sleep(0.005, NULL);
	}
	if (fstat(fd, &st) == -1 || !S_ISFIFO(st.st_mode))
		msg_die(1, "%s: not a FIFO (make it with mkfifo)", path);
	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1 ||
	    write(fd, hello, sizeof(hello) - 1) == -1)
		msg_diesys(1, "open %s", path);
	return fd;
}

/*
 * Whether rfp-fetch failed (it, or a stage before the sink, said why):
 * asked once the FIFO is closed, when rfp-fetch ends at once if it has
 * not; rfpipe writes --fetch-ended as it reaps it (10 s at most).  The
 * run is then cut short, the unfiled pending for a re-run, as after a
 * stop; and a report it did not write is not missed aloud.
 */
static int
fetch_failed(void)
{
	double t0 = clk_mono();
	int st;

	while ((st = fetch_status()) == -1 && opts.fetch_ended != NULL &&
	    clk_mono() - t0 < 10)
		clk_sleep(0.005, NULL);
	opts.fetch_failed = FETCH_FAILED(st);
	return opts.fetch_failed;
}

static int
ack(const char *fate)
{
	static const char done[] = REC_ACK_DONE "\n";
	static const char dead[] = REC_ACK_DEAD "\n";
	const char *s = fate_of(fate) == FATE_DONE ? done : dead;

	if (opts.fd_fifo == -1)
		return 0;
	if (!rec_out_fits(opts.fifo_out, strlen(s)) && flush_files() == -1)
		return -1;
	if (rec_out_put(opts.fifo_out, s, strlen(s)) == -1)
		fifo_lost();
	return 0;
}

/*
 * Write the gathered records, then the acks and retries, before each read:
 * an ack leaves only once its record is in its file, and waits no longer
 * than the next read of rfp-backoff's output.
 */
static int
fifo_drain(void *arg)
{
	(void)arg;
	if (flush_files() == -1)
		return -1;
	if (opts.fifo_out != NULL && rec_out_flush(opts.fifo_out) == -1)
		fifo_lost();
	return 0;
}

static int
sync_files(void)
{
	if (flush_files() == -1)
		return -1;
	fdatasync(opts.fd_done);
	fdatasync(opts.fd_dead);
	opts.last_sync = clk_mono();
	return 0;
}

/* Write to the terminal: a status line, not a message, so not through msg. */
static void
put_err(const char *s, size_t n)
{
	(void)!write(STDERR_FILENO, s, n);
}

static size_t
term_width(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
		return ws.ws_col;
	return 80;
}

/* s seconds as "45s", "3m20s" or "1h02m". */
static void
fmt_eta(char *buf, size_t len, double s)
{
	long t = s < 1e12 ? (long)s : 999999999999L;

	if (t < s)
		t++;	/* round up: "0s" while work is left would be wrong */
	if (t >= 3600)
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else if (t >= 60)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%lds", t);
}

/* The progress text: filed of total, outcomes, pending, rate, ETA. */
static void
progress_text(char *buf, size_t len, double now)
{
	long ok = summ_count(opts.run, "succeeded");
	long dead = summ_count(opts.run, "dead");
	long filed = ok + dead, pending;
	long cut = summ_cut(opts.run);
	double el = now - opts.p_start;
	/* Over less than a second a rate means little: assume a second. */
	double rate = filed / (el > 1 ? el : 1);
	char eta[32], cuts[32];

	/* Cuts apart from the dead, as the table has them. */
	dead -= cut;
	if (cut > 0)
		snprintf(cuts, sizeof(cuts), ", cut %ld", cut);
	else
		cuts[0] = '\0';
	if (opts.total < 0) {
		snprintf(buf, len, "progress: %ld done, ok %ld, dead %ld%s, "
		    "%.1f/s", filed, ok, dead, cuts, rate);
		return;
	}
	/* A resumed run files fewer than it was told to expect. */
	pending = opts.total > filed ? opts.total - filed : 0;
	if (pending == 0)
		snprintf(eta, sizeof(eta), "0s");
	else if (filed > 0)
		fmt_eta(eta, sizeof(eta), pending / rate);
	else
		snprintf(eta, sizeof(eta), "unknown");
	snprintf(buf, len, "progress: %ld/%ld done, ok %ld, dead %ld%s, "
	    "pending %ld, %.1f/s, eta %s", filed, opts.total, ok, dead, cuts,
	    pending, rate, eta);
}

/* Blank the terminal line, so that what follows starts on a clean one. */
static void
progress_clear(void)
{
	char buf[520];

	if (opts.p_width == 0)
		return;
	buf[0] = '\r';
	memset(buf + 1, ' ', opts.p_width);
	buf[opts.p_width + 1] = '\r';
	put_err(buf, opts.p_width + 2);
	opts.p_width = 0;
}

/* Draw or print the progress line, if one is due. */
static void
progress(void)
{
	char text[256], line[520];
	size_t n, w;
	double now;
	int k;

	if (opts.progress == PROGRESS_NONE)
		return;
	now = clk_mono();
	if (now - opts.p_last < opts.p_every)
		return;
	opts.p_last = now;
	progress_text(text, sizeof(text), now);
	if (opts.progress == PROGRESS_PLAIN) {
		msg_warn("%s", text);
		return;
	}
	if ((k = snprintf(line, sizeof(line), "\r%s: %s", msg_prog(),
	    text)) < 1)
		return;
	n = (size_t)k - 1;	/* the columns it covers */
	/* Never wrap: a wrapped line cannot be redrawn in place. */
	if (n > (w = term_width() - 1))
		n = w;
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	/* Cover what is left of a longer line drawn before. */
	if (opts.p_width > n) {
		memset(line + 1 + n, ' ', opts.p_width - n);
		put_err(line, 1 + opts.p_width);
	} else
		put_err(line, 1 + n);
	opts.p_width = n;
}

/* While nothing comes in (work held by the breaker, a long Retry-After),
 * the line still moves: the rate falls and the elapsed time shows. */
static void
progress_idle(void *arg)
{
	(void)arg;
	progress();
}

/*
 * File a counted record by its fate: t is its text, len bytes with its
 * newline.  A retry goes back to rfp-fetch through the FIFO, or without
 * one to stdout; done and dead go to their files and are acknowledged.
 * 1 when filed, -1 on a fatal error.
 */
static int
file(const char *fate, const char *t, size_t len, struct rec_out *out)
{
	int done = fate_of(fate) == FATE_DONE;

	if (fate_of(fate) == FATE_RETRY) {
		/* With its rfp-fetch gone, left unfiled: pending, for a re-run. */
		if (opts.fd_fifo == -1 && opts.fifo != NULL)
			return 1;
		if (opts.fd_fifo == -1)
			return rec_out_put(out, t, len) == -1 ? -1 : 1;
		if (flush_files() == -1)
			return -1;
		if (rec_out_put(opts.fifo_out, t, len) == -1)
			fifo_lost();
		return 1;
	}
	if (rec_out_put(done ? opts.done_out : opts.dead_out, t, len) == -1) {
		msg_warnsys("write %s/%s", opts.run_dir, rundir_name(done ?
		    RUNDIR_RESULTS : RUNDIR_DEAD));
		return -1;
	}
	if (clk_mono() - opts.last_sync > 1 && sync_files() == -1)
		return -1;
	return ack(fate) == -1 ? -1 : 1;
}

/*
 * One record: counted and filed by its fate, every byte as it came unless
 * the fate is missing or unknown (then it is dead bad_input).
 */
static int
sink(struct view *v, long lineno, struct rec_out *out, void *arg)
{
	struct summ_in in;
	const char *t, *why;
	size_t len;

	(void)arg;
	in.fate = view_str(v, "fate");
	if (fate_of(in.fate) == -1) {
		why = in.fate != NULL ? "unknown fate" : view_type(v, "fate") ==
		    -1 ? "missing field \"fate\"" : "field \"fate\": not a string";
		progress_clear();
		if (in.fate != NULL)
			msg_line(lineno, "field \"fate\": unknown fate \"%.20s\"",
			    in.fate);
		else
			msg_line(lineno, "%s", why);
		view_kill(v, FATE_BAD_INPUT, why);
		view_set_int(v, "line", lineno);
		in.fate = fate_name(FATE_DEAD);
	}
	/*
	 * A result or a retry is a document's: without an id it is none,
	 * and filed as done it would stand for a document that may still
	 * be pending.  Dead, with no id, it is a stray line's letter.
	 */
	if (fate_of(in.fate) != FATE_DEAD && view_str(v, "id") == NULL) {
		progress_clear();
		msg_line(lineno, "missing field \"id\"");
		view_kill(v, FATE_BAD_INPUT, "missing field \"id\"");
		view_set_int(v, "line", lineno);
		in.fate = fate_name(FATE_DEAD);
	}
	/* Counted apart, and acknowledged: it may have been one in flight. */
	in.stray = summ_stray(in.fate, view_str(v, "id"), view_str(v,
	    REC_LINE_KEY));
	in.endpoint = view_str(v, "endpoint");
	in.dead_reason = view_str(v, "dead_reason");
	in.reason = view_str(v, "reason");
	in.attempted = view_type(v, "status") != -1 ||
	    view_type(v, "error") != -1;
	in.http_429 = view_int(v, "status", 0) == 429;
	summ_add_in(opts.run, &in);
	progress();
	if ((t = view_text(v, &len)) == NULL)
		return -1;
	return file(in.fate, t, len, out);
}

/*
 * Real seconds between plain lines: 30 logical ones (a cron mail stays
 * short, and RFPIPE_TIME_SCALE lets a test see them), or
 * RFPIPE_PROGRESS_INTERVAL.
 */
static double
plain_every(void)
{
	const char *s = getenv("RFPIPE_PROGRESS_INTERVAL");
	double v;

	if (s == NULL || *s == '\0')
		return clk_real(30);
	if (num_double(s, 0.001, 86400, &v) == -1)
		msg_die(2, "environment RFPIPE_PROGRESS_INTERVAL: expected a "
		    "number of seconds from 0.001 to 86400, got \"%s\"", s);
	return v;
}

static int
open_out(enum rundir_file f)
{
	char *path = rundir_path(opts.run_dir, f, NULL);
	int fd, e;

	fd = files_open(path, O_RDWR | O_APPEND | O_CREAT, 0600);
	if (fd == -1)
		msg_die(1, "open %s: %s", path, files_why(errno));
	/*
	 * A line torn by an earlier run (a crash, a full disk) that
	 * cut_torn could not cut is ended here, so this run's first record
	 * is not glued to it.
	 */
	if ((e = files_line_ended(fd)) == -1 || (e == 0 &&
	    write(fd, "\n", 1) != 1))
		msg_diesys(1, "write %s", path);
	free(path);
	return fd;
}

/*
 * Cut a torn last line (a crash or a full disk mid-write) off results.ndjson
 * and dead.ndjson: it is never a whole record (a record is one write(2)
 * with its newline), it breaks jq over the file for good, and rfp-fetch
 * fetches its document again.  Only while no other sink of the run
 * directory is filing (the exclusive lock, granted at once), since one
 * may be mid-write; else open_out only ends the line.  Then the shared
 * lock again, before the files are opened for the run, so that a
 * compaction let in meanwhile is over before they are.
 */
static void
cut_torn(void)
{
	static const enum rundir_file f[] = { RUNDIR_RESULTS, RUNDIR_DEAD };
	struct stat st;
	char *path;
	off_t end;
	size_t i;
	int fd;

	if (flock(opts.fd_lock, LOCK_EX | LOCK_NB) == 0) {
		for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
			path = rundir_path(opts.run_dir, f[i], NULL);
			if ((fd = files_open(path, O_RDWR, 0)) == -1) {
				if (errno != ENOENT)
					msg_die(1, "open %s: %s", path,
					    files_why(errno));
				free(path);
				continue;
			}
			if (fstat(fd, &st) == -1 ||
			    (end = files_whole_end(fd)) == -1)
				msg_diesys(1, "read %s", path);
			if (end < st.st_size) {
				if (ftruncate(fd, end) == -1)
					msg_diesys(1, "truncate %s", path);
				msg_warn("%s: cut a torn last line of %lld "
				    "bytes (a write an earlier run did not "
				    "end; never a whole record)", path,
				    (long long)(st.st_size - end));
			}
			close(fd);
			free(path);
		}
	}
	/* A failed conversion may have dropped the shared lock too. */
	if (flock(opts.fd_lock, LOCK_SH) == -1)
		msg_diesys(1, "lock %s", opts.run_dir);
}

/* Read the options into opts; a usage error exits 2. */
static void
options(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "admitted-from", required_argument, NULL, 'a' },
		{ "fate-status", no_argument, NULL, 's' },
		{ "fetch-ended", required_argument, NULL, 'e' },
		{ "help", no_argument, NULL, 'h' },
		{ "owner", required_argument, NULL, 'o' },
		{ "progress", required_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "retry-fifo", required_argument, NULL, 'f' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "total", required_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *progress = "auto";
	int c;

	opts.total = -1;
	while ((c = getopt_long(argc, argv, ":hqv", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			opts.admitted_from = optarg;
			break;
		case 'e':
			opts.fetch_ended = optarg;
			break;
		case 'f':
			opts.fifo = optarg;
			break;
		case 'o':
			if (!owner_name_ok(optarg))
				msg_die(2, "option --owner: expected at most "
				    "40 letters, digits, '.', '_' and '-', "
				    "got \"%s\"", optarg);
			opts.owner = optarg;
			break;
		case 'p':
			if (strcmp(optarg, "auto") && strcmp(optarg, "plain") &&
			    strcmp(optarg, "none"))
				msg_die(2, "option --progress: expected "
				    "\"auto\", \"plain\" or \"none\", got "
				    "\"%s\"", optarg);
			progress = optarg;
			break;
		case 's':
			opts.fate_status = 1;
			break;
		case 'q':
			opts.quiet = 1;
			break;
		case 'r':
			opts.run_dir = optarg;
			break;
		case 't':
			opts.total = opt_long("total", optarg, 0, 1000000000L);
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	opt_no_operands(argc, argv, usage);
	if (opts.run_dir == NULL) {
		msg_warn("option --run-dir is required");
		opt_usage(usage);
	}
	/* Off a terminal (cron), auto is plain: a down portal is not silent. */
	if (strcmp(progress, "plain") == 0)
		opts.progress = PROGRESS_PLAIN;
	else if (strcmp(progress, "auto") == 0)
		opts.progress = isatty(STDERR_FILENO) ? PROGRESS_TTY :
		    PROGRESS_PLAIN;
	if (opts.quiet)
		opts.progress = PROGRESS_NONE;
	opts.p_every = opts.progress == PROGRESS_TTY ? 0.25 : plain_every();
}

/*
 * Hold the pipeline's owner file until exit: while this sink has records
 * to file, the ids rfp-fetch claimed for them stay this pipeline's, though
 * rfp-fetch be dead (fetch/claims.c).
 */
static void
owner_take(void)
{
	char err[512];

	opts.fd_owner = -1;
	if (opts.owner != NULL && (opts.fd_owner = owner_hold(opts.run_dir,
	    opts.owner, PROG, err, sizeof(err))) == -1)
		msg_die(1, "%s", err);
}

/* Open the FIFO, the run directory's lock and its two files. */
static void
open_files(void)
{
	char err[512];

	umask(077);
	/*
	 * The FIFO first: rfp-fetch waits for its writer, and sees EOF once
	 * this process is gone, whatever fails after.
	 */
	opts.fd_fifo = -1;
	if (opts.fifo != NULL)
		opts.fd_fifo = open_fifo(opts.fifo);
	if (files_mkdirs(opts.run_dir, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	owner_take();
	/* Before dead.ndjson is opened: see lib/accounts/dead.h. */
	if ((opts.fd_lock = dead_hold(opts.run_dir, err, sizeof(err))) == -1)
		msg_die(1, "%s", err);
	cut_torn();
	opts.fd_done = open_out(RUNDIR_RESULTS);
	opts.fd_dead = open_out(RUNDIR_DEAD);
	opts.done_out = rec_out_new(opts.fd_done);
	opts.dead_out = rec_out_new(opts.fd_dead);
	if (opts.fd_fifo != -1)
		opts.fifo_out = rec_out_new(opts.fd_fifo);
}

/* What the summary met, one warning a line; then, unless -q, its table. */
static void
tell(const struct summ *s)
{
	const char *p = summ_problems(s), *nl;
	char *t;
	size_t off, len;
	ssize_t w;

	for (; (nl = strchr(p, '\n')) != NULL; p = nl + 1)
		msg_warn("%.*s", (int)(nl - p), p);
	if (!opts.quiet && (t = summ_table(s)) != NULL) {
		/* Many endpoints make a table longer than one write takes. */
		len = strlen(t);
		for (off = 0; off < len; off += (size_t)w) {
			while ((w = write(STDERR_FILENO, t + off, len - off)) ==
			    -1 && errno == EINTR)
				;
			if (w <= 0)
				break;
		}
		free(t);
	}
}

int
main(int argc, char *argv[])
{
	double t0 = clk_now();
	/*
	 * What it counts by, and what rfp-fetch reads of a retry sent back:
	 * of the wrong type, refused (cmd/loop.h).  A letter is filed as
	 * it came.
	 */
	static const char *const reads[] = { "id", REC_LINE_KEY, "endpoint",
		"status", "error", "reason", "attempt", "not_before", NULL };
	struct loop_hooks hooks = { .drain = fifo_drain,
	    .idle = progress_idle, .reads = reads, .fated = 1 };
	char err[512];
	int rc;

	msg_init(PROG);
	opt_check_env();
	options(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	/* Typed at a terminal, ^C still ends it; in a pipe it reads on. */
	if (!isatty(STDIN_FILENO)) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	open_files();
	opts.run = summ_new();
	opts.p_start = clk_mono();
	/* A terminal shows the line from the first record; a log waits. */
	opts.p_last = opts.p_start - (opts.progress == PROGRESS_TTY ?
	    opts.p_every : 0);
	if (opts.progress == PROGRESS_NONE)
		hooks.idle = NULL;
	hooks.idle_s = opts.p_every;
	rc = loop_run(PROG, STDIN_FILENO, STDOUT_FILENO,
	    &hooks, sink, NULL);
	if (fifo_drain(NULL) == -1)
		rc = -1;
	progress_clear();
	if (sync_files() == -1)
		rc = -1;
	if (rc == -1)
		msg_die(1, "stopped: output is incomplete");
	rec_out_free(opts.done_out);
	rec_out_free(opts.dead_out);
	rec_out_free(opts.fifo_out);
	if (opts.fd_fifo != -1)
		close(opts.fd_fifo);
	close(opts.fd_done);
	close(opts.fd_dead);
	if (stopped)
		summ_stopped(opts.run, stopped);
	else if (fetch_failed())
		summ_stopped(opts.run, -1);
	/*
	 * Each id in one of the two files: a dead letter filed since in
	 * results.ndjson, or dead again later, goes.
	 */
	if (dead_compact(opts.run_dir, opts.fd_lock, err, sizeof(err)) == -1)
		msg_warn("%s/%s: %s; left as it was", opts.run_dir,
		    rundir_name(RUNDIR_DEAD), err);
	rc = summ_finish(opts.run, opts.run_dir, opts.fetch_failed &&
	    opts.admitted_from != NULL && access(opts.admitted_from,
	    F_OK) == -1 ? NULL : opts.admitted_from, t0);
	tell(opts.run);
	close(opts.fd_lock);
	owner_release(opts.run_dir, opts.owner, opts.fd_owner);
	opt_fshut();
	if (rc != 0)
		return 1;
	/*
	 * Ids left to a pipeline still running, or to one that ended without
	 * filing them (orphaned), or documents whose records were stray
	 * lines, are not done, whatever the files say, and a re-run takes
	 * them up.  Else the whole run
	 * directory's: dead documents only, never a stray line's letter,
	 * which is no document's and stays for good.
	 */
	if (opts.fate_status && (summ_count(opts.run, "held") > 0 ||
	    summ_count(opts.run, "orphaned") > 0 ||
	    summ_unfiled(opts.run) > 0))
		rc = 5;
	else if (opts.fate_status && summ_total(opts.run,
	    fate_reason(FATE_DEADLINE_CUT)) > 0)
		rc = 4;
	else if (opts.fate_status && summ_total(opts.run, "dead") > 0)
		rc = 3;
	summ_free(opts.run);
	return rc;
}
