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
 * Exit: 0 at EOF with the counts reconciled, 1 on a write error or a
 * failed reconciliation, 2 on a usage error.  With --fate-status, 3 when
 * records were dead-lettered and 4 when the deadline cut some.
 */
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

#include "lib/clk.h"
#include "lib/msg.h"
#include "lib/opt.h"
#include "lib/rec.h"
#include "lib/state.h"
#include "lib/summ.h"
#include "lib/x.h"

#define PROG	"rfp-sink"

static const char usage[] =
    "usage: rfp-sink [-hqv] [--admitted-from FILE] [--fate-status]\n"
    "                [--retry-fifo FIFO] --run-dir DIR [--version]\n";

static struct opts {
	const char	*run_dir;
	const char	*fifo;
	const char	*admitted_from;
	int		 quiet;
	int		 fate_status;
	int		 fd_done, fd_dead, fd_fifo;
	double		 last_sync;
	struct summ	*run;		/* this run's records */
} opts;

static int
file(int fd, const char *what, json_t *rec)
{
	if (rec_write(fd, rec) == -1) {
		msg_warnsys("write %s/%s", opts.run_dir, what);
		return -1;
	}
	return 0;
}

/* rfp-fetch is gone: keep filing; what it would have retried is re-admitted
 * by a re-run, since it is in neither results nor dead. */
static void
fifo_lost(void)
{
	msg_warnsys("write %s (rfp-fetch has gone; retries are left for a "
	    "re-run)", opts.fifo);
	close(opts.fd_fifo);
	opts.fd_fifo = -1;
}

/* Open the FIFO's write end once rfp-fetch holds the read end. */
static int
open_fifo(const char *path)
{
	static const char hello[] = "{\"ack\":\"hello\"}\n";
	double t0 = clk_mono();
	int fd, fl;

	while ((fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) == -1) {
		if (errno != ENXIO || clk_mono() - t0 > 10)
			msg_diesys(1, "open %s", path);
		clk_sleep(0.005, NULL);
	}
	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1 ||
	    write(fd, hello, sizeof(hello) - 1) == -1)
		msg_diesys(1, "open %s", path);
	return fd;
}

static int
ack(const char *fate)
{
	static const char done[] = "{\"ack\":true,\"fate\":\"done\"}\n";
	static const char dead[] = "{\"ack\":true,\"fate\":\"dead\"}\n";
	const char *s = strcmp(fate, "done") == 0 ? done : dead;

	if (opts.fd_fifo == -1)
		return 0;
	if (write(opts.fd_fifo, s, strlen(s)) == -1)
		fifo_lost();
	return 0;
}

static void
sync_files(void)
{
	fdatasync(opts.fd_done);
	fdatasync(opts.fd_dead);
	opts.last_sync = clk_mono();
}

static int
sink(json_t *rec, long lineno, void *arg)
{
	const char *fate = rec_str(rec, "fate");

	(void)arg;
	if (fate == NULL || (strcmp(fate, "done") && strcmp(fate, "dead") &&
	    strcmp(fate, "retry"))) {
		msg_line(lineno, fate ? "field \"fate\": unknown fate "
		    "\"%.20s\"" : "missing field \"fate\"%.0s", fate ? fate :
		    "");
		rec_kill(rec, "bad_input", fate ? "unknown fate" :
		    "missing field \"fate\"");
		json_object_set_new(rec, "line", json_integer(lineno));
		fate = "dead";
	}
	summ_add(opts.run, rec);
	if (strcmp(fate, "retry") == 0) {
		if (opts.fd_fifo == -1)
			return 0;	/* to stdout */
		if (rec_write(opts.fd_fifo, rec) == -1)
			fifo_lost();
		return 1;
	}
	if (file(strcmp(fate, "done") == 0 ? opts.fd_done : opts.fd_dead,
	    strcmp(fate, "done") == 0 ? "results.ndjson" : "dead.ndjson",
	    rec) == -1)
		return -1;
	if (clk_mono() - opts.last_sync > 1)
		sync_files();
	return ack(fate) == -1 ? -1 : 1;
}

static int
open_out(const char *name)
{
	char *path = xasprintf("%s/%s", opts.run_dir, name);
	int fd;

	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1)
		msg_diesys(1, "open %s", path);
	free(path);
	return fd;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "admitted-from", required_argument, NULL, 'a' },
		{ "fate-status", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "retry-fifo", required_argument, NULL, 'f' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	double t0 = clk_now();
	int c, rc;

	msg_init(PROG);
	opt_check_env();
	while ((c = getopt_long(argc, argv, "hqv", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			opts.admitted_from = optarg;
			break;
		case 'f':
			opts.fifo = optarg;
			break;
		case 'h':
			opt_help(usage);
		case 's':
			opts.fate_status = 1;
			break;
		case 'q':
			opts.quiet = 1;
			break;
		case 'r':
			opts.run_dir = optarg;
			break;
		case 'v':
			msg_verbose = 1;
			break;
		case 'V':
			opt_version();
		default:
			opt_usage(usage);
		}
	}
	if (optind != argc) {
		msg_warn("unexpected argument \"%s\"", argv[optind]);
		opt_usage(usage);
	}
	if (opts.run_dir == NULL) {
		msg_warn("option --run-dir is required");
		opt_usage(usage);
	}
	signal(SIGPIPE, SIG_IGN);
	umask(077);
	if (state_mkdirs(opts.run_dir) == -1)
		msg_diesys(1, "mkdir %s", opts.run_dir);
	opts.fd_done = open_out("results.ndjson");
	opts.fd_dead = open_out("dead.ndjson");
	opts.fd_fifo = -1;
	if (opts.fifo != NULL)
		opts.fd_fifo = open_fifo(opts.fifo);
	opts.run = summ_new();
	rc = rec_loop(PROG, STDIN_FILENO, STDOUT_FILENO, sink, NULL);
	sync_files();
	if (rc == -1)
		msg_die(1, "stopped: output is incomplete");
	if (opts.fd_fifo != -1)
		close(opts.fd_fifo);
	close(opts.fd_done);
	close(opts.fd_dead);
	rc = summ_finish(opts.run, opts.run_dir, opts.admitted_from, t0,
	    opts.quiet);
	opt_fshut();
	if (rc != 0)
		return 1;
	if (opts.fate_status && summ_count(opts.run, "deadline_cut") > 0)
		rc = 4;
	else if (opts.fate_status && summ_count(opts.run, "dead") > 0)
		rc = 3;
	summ_free(opts.run);
	return rc;
}
