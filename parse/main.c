/*
 * rfp-parse: run the site's own parser over each fetched body.
 *
 * Reads records from rfp-fetch on stdin.  A record whose fetch succeeded
 * (a 2xx, no error, no failed check) with a body filed as docs/ID, on an
 * endpoint whose configuration has a parse command, has that command run
 * with the body on its standard input, and is written to stdout with
 * "parsed" (docs/ID.parsed, the parser's standard output, renamed into
 * place whole), "parsed_bytes" and "parsed_sha256"; or, when the parser
 * fails, with "parse_error" (failed, tempfail, timeout, signal,
 * too_large) and "parse_detail" (the last line of its standard error, the
 * signal, ...), for rfp-classify to classify.  A record already parsed
 * (its docs/ID.parsed has its parsed_sha256) passes, unless --reparse.
 * Every other record passes through untouched, as do unknown fields; a
 * record with a fate passes, except "done" (a results.ndjson re-run).
 *
 * It never runs a shell and never puts a word of a record on a command
 * line: the command is the configured list of words.  Parsers run at
 * most --jobs at once and an endpoint's concurrency at once for it, each
 * in a process group of its own that is killed at its timeout, when its
 * output passes output_max, when it exits, and when rfp-parse ends.
 * Records may leave in another order than they came.
 *
 * Exit: 0 at EOF, 1 when stdout or the run directory fails, 2 on a usage
 * or configuration error (a parse command that is not found included).
 */
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/record/class.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/record/doc.h"
#include "lib/record/fate.h"
#include "lib/record/field.h"
#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/record/rec.h"
#include "lib/record/view.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/base/x.h"
#include "parse/parse.h"

#define PROG		"rfp-parse"
#define WAIT_MAX	64	/* records read ahead while parsers are busy */

static const char usage[] =
    "usage: rfp-parse [-hv] [-j N] [--config FILE] [--list] [--reparse]\n"
    "                 [--run-dir DIR] [--version]\n";

static struct opts {
	struct conf	 conf;
	const char	*config;
	const char	*run_dir;
	long		 jobs;
	int		 list;
	int		 reparse;
} opts;

/* The loop's state: input, the parsers waiting and running, output. */
static struct {
	struct rec_reader *in;
	int		 in_eof;
	struct rec_out	*out;
	struct dirs	 dirs;
	struct job	*wait, **wait_tail;
	long		 nwait;
	struct job	*run;
	long		 nrun;
	int		 chld[2];	/* a byte per SIGCHLD */
	long		 nstopped;	/* records left unparsed by a stop */
	struct view	*view;		/* a record's fields, type-checked */
} L = { .chld = { -1, -1 } };

static void
on_chld(int sig)
{
	int e = errno;
	ssize_t n;

	(void)sig;
	n = write(L.chld[1], "", 1);	/* when full, the loop is awake */
	(void)n;
	errno = e;
}

/*
 * SIGINT, SIGTERM: stop parsing.  The records being parsed or waiting
 * are dropped, as rfp-fetch drops what it has in flight: the resumed run
 * fetches and parses them, and no attempt of theirs is spent.
 */
static volatile sig_atomic_t stopping;

static void
on_stop(int sig)
{
	int e = errno;
	ssize_t n;

	stopping = sig;
	job_kill_all();
	n = write(L.chld[1], "", 1);
	(void)n;
	errno = e;
}

static void
on_term(int sig)
{
	job_kill_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Parts a process left that is gone (killed mid-parse): ID.parsed.PID,
 * removed when no process PID is.  Only in docs/.parse, where nothing
 * but rfp-parse writes: docs/.part holds rfp-fetch's bodies in flight,
 * named by id, and no name there is ours to judge.
 */
static void
sweep_parts(void)
{
	struct dirent *e;
	const char *dot;
	char *end;
	DIR *d;
	long pid;
	int fd;

	if ((fd = dup(L.dirs.part)) == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if ((dot = strrchr(e->d_name, '.')) == NULL ||
		    dot - e->d_name < 7 || strncmp(dot - 7, ".parsed", 7) != 0)
			continue;
		pid = strtol(dot + 1, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		unlinkat(L.dirs.part, e->d_name, 0);
	}
	closedir(d);
}

/*
 * The run directory and docs/.parse made or accepted by the rule every
 * stage keeps (ours alone, no symbolic link below the run directory), or
 * exit status: 2 for --list --run-dir, which rfpipe asks before any stage
 * starts, 1 at a run's start.  docs/.parse's path, allocated.
 */
static char *
make_dirs(int status)
{
	char *p, err[512];

	if (files_mkdirs(opts.run_dir, err, sizeof(err)) == -1)
		msg_die(status, "%s", err);
	p = rundir_path(opts.run_dir, RUNDIR_PARSING, NULL);
	if (files_mkdir(p, err, sizeof(err)) == -1)
		msg_die(status, "%s", err);
	return p;
}

/* The directories made or accepted, and opened without following a link. */
static void
open_dirs(void)
{
	char *p;

	L.dirs.run_dir = opts.run_dir;
	p = make_dirs(1);
	if ((L.dirs.part = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		msg_diesys(1, "open %s", p);
	free(p);
	p = rundir_path(opts.run_dir, RUNDIR_DOCS, NULL);
	if ((L.dirs.docs = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		msg_diesys(1, "open %s", p);
	free(p);
	sweep_parts();
}

static void
put_json(const json_t *rec)
{
	if (rec_out_json(L.out, rec) == -1)
		msg_diesys(1, "write stdout");
}

static void
put_line(const char *line, size_t len)
{
	if (rec_out_line(L.out, line, len) == -1)
		msg_diesys(1, "write stdout");
}

/* A record this stage cannot use: dead bad_input, its line named. */
static void
put_bad(json_t *rec, long lineno, const char *detail)
{
	msg_line(lineno, "%s", detail);
	rec_kill(rec, FATE_BAD_INPUT, detail);
	json_object_set_new(rec, "line", json_integer(lineno));
	json_object_set_new(rec, "stage", json_string(PROG));
	put_json(rec);
}

/* Its docs/ID.parsed is there, and is what the record says it parsed. */
static int
already_parsed(const json_t *rec, const char *id)
{
	const char *p = rec_str(rec, "parsed"), *sum;
	char *want, *name, hex[65];
	int same;

	if (p == NULL || (sum = rec_str(rec, "parsed_sha256")) == NULL)
		return 0;
	name = xasprintf("%s.parsed", id);
	want = rundir_path(NULL, RUNDIR_DOCS, name);
	same = strcmp(p, want) == 0 && job_digest(L.dirs.docs, name, hex) ==
	    0 && strcmp(hex, sum) == 0;
	free(name);
	free(want);
	return same;
}

/* What take() reads, each of the contract's type, or -1 with err. */
static int
reads_check(json_t *rec, char *err, size_t errlen)
{
	static const char *const reads[] = { "id", "endpoint", "body_path",
		"status", "error", "check", "parsed", "parsed_sha256", NULL };

	view_open_tree(L.view, json_incref(rec));
	return field_check(L.view, reads, err, errlen);
}

/*
 * Sort one record: out as it came, out dead, or into the waiting list as
 * a job.  The record's words are read to find the body and the endpoint,
 * and never reach the command.
 */
static void
take(json_t *rec, const char *line, size_t len, long lineno)
{
	const struct conf_parse *cp;
	const char *fate = rec_str(rec, "fate"), *id, *bp;
	char reason[64], err[256], *ep, *want;
	struct job *j;

	if (json_object_get(rec, "fate") != NULL && fate_of(fate) !=
	    FATE_DONE) {
		put_line(line, len);
		return;
	}
	/*
	 * A field it reads of the wrong type ("status": "200"), refused as
	 * every stage refuses what it reads: passed on as a record that is
	 * no success, it went by unsaid.
	 */
	if (reads_check(rec, err, sizeof(err)) == -1) {
		put_bad(rec, lineno, err);
		return;
	}
	if (json_object_get(rec, "body_path") == NULL ||
	    class_of_fetch(rec, reason, sizeof(reason)) != CLASS_OK) {
		put_line(line, len);
		return;
	}
	ep = rec_str(rec, "endpoint") ? xstrdup(rec_str(rec, "endpoint")) :
	    doc_endpoint(rec);
	cp = ep ? &conf_endpoint(&opts.conf, ep)->parse : NULL;
	if (cp == NULL || cp->command == NULL) {
		free(ep);
		put_line(line, len);
		return;
	}
	id = rec_str(rec, "id");
	bp = rec_str(rec, "body_path");
	want = id ? rundir_path(NULL, RUNDIR_DOCS, id) : NULL;
	if (id == NULL || doc_id_check(id) != NULL)
		put_bad(rec, lineno, id == NULL ? "missing field \"id\"" :
		    "field \"id\": not a safe file name");
	else if (bp == NULL || strcmp(bp, want) != 0)
		put_bad(rec, lineno, "field \"body_path\": expected "
		    "\"docs/ID\"");
	else if (!opts.reparse && already_parsed(rec, id))
		put_line(line, len);
	else {
		j = xcalloc(1, sizeof(*j));
		j->rec = json_incref(rec);
		j->lineno = lineno;
		j->id = xstrdup(id);
		j->ep = ep;
		j->cp = cp;
		j->name = xasprintf("%s.parsed", id);
		/* Another rfp-parse on this run directory has its own. */
		j->pname = xasprintf("%s.%ld", j->name, (long)getpid());
		j->out = j->err = j->part = -1;
		*L.wait_tail = j;
		L.wait_tail = &j->next;
		L.nwait++;
		ep = NULL;
	}
	free(want);
	free(ep);
}

static void
read_lines(void)
{
	char *line, err[256];
	enum rec_rc rc;
	size_t len;
	long lineno;
	json_t *rec;

	while (!L.in_eof && L.nwait < WAIT_MAX) {
		rc = rec_next(L.in, &line, &len, &lineno);
		if (rc == REC_AGAIN)
			return;
		if (rc == REC_EOF || rc == REC_ERR) {
			if (rc == REC_ERR)
				msg_warnsys("read stdin");
			L.in_eof = 1;
			return;
		}
		if (rc == REC_TOOLONG) {
			msg_line(lineno, "line longer than %d bytes",
			    REC_STREAM_MAX);
			rec = rec_bad_input(PROG, lineno, "line too long",
			    line, len);
			put_json(rec);
			json_decref(rec);
			continue;
		}
		if (len == 0)
			continue;
		if ((rec = rec_parse(line, len, err, sizeof(err))) == NULL) {
			msg_line(lineno, "%s", err);
			rec = rec_bad_input(PROG, lineno, err, line, len);
			put_json(rec);
		} else
			take(rec, line, len, lineno);
		json_decref(rec);
	}
}

/* Room for j: under --jobs, its endpoint's concurrency, and its id free. */
static int
room(const struct job *j)
{
	const struct job *r;
	long n = 0;

	if (L.nrun >= opts.jobs)
		return 0;
	for (r = L.run; r != NULL; r = r->next) {
		if (strcmp(r->id, j->id) == 0)
			return 0;
		if (strcmp(r->ep, j->ep) == 0)
			n++;
	}
	return n < j->cp->concurrency;
}

static void
start_waiting(void)
{
	struct job **pp = &L.wait, *j;
	char err[512];

	while ((j = *pp) != NULL) {
		if (stopping) {
			/* Never started: left for the resumed run. */
			if ((*pp = j->next) == NULL)
				L.wait_tail = pp;
			L.nwait--;
			L.nstopped++;
			job_free(j);
			continue;
		}
		if (!room(j)) {
			pp = &j->next;
			continue;
		}
		if ((*pp = j->next) == NULL)
			L.wait_tail = pp;
		L.nwait--;
		j->t_end = clk_mono() + clk_real(j->cp->timeout);
		if (job_start(j, &L.dirs, err, sizeof(err)) == -1) {
			put_bad(j->rec, j->lineno, err);
			job_free(j);
			continue;
		}
		msg_debug("line %ld: %s: parsing with \"%s\"", j->lineno, j->id,
		    j->cp->command[0]);
		j->next = L.run;
		L.run = j;
		L.nrun++;
	}
}

/* Read every parser, reap and time out; put out what has finished. */
static void
tend(void)
{
	struct job **pp = &L.run, *j;
	char err[512];
	double now = clk_mono();

	while ((j = *pp) != NULL) {
		if (stopping && !j->exited && j->pid > 0 &&
		    j->why == WHY_NONE) {
			j->why = WHY_STOPPED;
			kill(-j->pid, SIGKILL);
		}
		if (job_read(j, &L.dirs, err, sizeof(err)) == -1)
			msg_die(1, "%s", err);
		job_reap(j);
		/* What left its group holds its pipes: not waited for. */
		job_expire(j, stopping && j->exited ? INFINITY : now);
		if (!job_done(j)) {
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		L.nrun--;
		if (job_finish(j, &L.dirs, err, sizeof(err)) == -1)
			msg_die(1, "%s", err);
		if (j->why == WHY_STOPPED) {
			/* As rfp-fetch's in flight: not filed, not spent. */
			L.nstopped++;
			job_free(j);
			continue;
		}
		msg_debug("line %ld: %s: %s", j->lineno, j->id,
		    rec_str(j->rec, "parse_error") ? rec_str(j->rec,
		    "parse_detail") : "parsed");
		put_json(j->rec);
		job_free(j);
	}
}

/* Wait for input, a parser's output or end, or the next timeout. */
static void
wait_any(void)
{
	struct pollfd *pfd;
	struct job *j;
	double now = clk_mono(), next = -1;
	nfds_t n = 0;
	int ms;
	char c[64];

	pfd = xcalloc((size_t)(2 * L.nrun + 2), sizeof(*pfd));
	pfd[n].fd = L.chld[0];
	pfd[n++].events = POLLIN;
	if (!L.in_eof && L.nwait < WAIT_MAX) {
		pfd[n].fd = STDIN_FILENO;
		pfd[n++].events = POLLIN;
	}
	for (j = L.run; j != NULL; j = j->next) {
		if (j->out != -1) {
			pfd[n].fd = j->out;
			pfd[n++].events = POLLIN;
		}
		if (j->err != -1) {
			pfd[n].fd = j->err;
			pfd[n++].events = POLLIN;
		}
		if ((j->why == WHY_NONE || j->exited) &&
		    (next < 0 || j->t_end < next))
			next = j->t_end;
	}
	ms = next < 0 ? -1 : next <= now ? 0 : (int)((next - now) * 1000) + 1;
	if (poll(pfd, n, ms) == -1 && errno != EINTR)
		msg_diesys(1, "poll");
	while (read(L.chld[0], c, sizeof(c)) > 0)
		;
	free(pfd);
}

static void
setup_signals(void)
{
	static const int stop[] = { SIGINT, SIGTERM };
	struct sigaction sa, old;
	int i;

	if (pipe(L.chld) == -1)
		msg_diesys(1, "pipe");
	for (i = 0; i < 2; i++)
		if (fcntl(L.chld[i], F_SETFL, O_NONBLOCK) == -1 ||
		    fcntl(L.chld[i], F_SETFD, FD_CLOEXEC) == -1)
			msg_diesys(1, "fcntl");
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	/*
	 * SIGINT and SIGTERM stop parsing even when ignored at the start (a
	 * stage of rfpipe after rfp-fetch ignores them): the parsers are
	 * killed, and every record passes on, to be parsed another time,
	 * until rfp-fetch's end brings EOF.
	 */
	sa.sa_handler = on_stop;
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < 2; i++)
		sigaction(stop[i], &sa, NULL);
	/* SIGHUP, unless ignored at the start (nohup(1)): parsers and all. */
	sa.sa_handler = on_term;
	sa.sa_flags = 0;
	if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
		sigaction(SIGHUP, &sa, NULL);
	/* A closed stdout is an error to report, with the parsers ended. */
	signal(SIGPIPE, SIG_IGN);
	atexit(job_kill_all);
}

static void
loop(void)
{
	int fl;

	fl = fcntl(STDIN_FILENO, F_GETFL);
	if (fl == -1 || fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK) == -1)
		msg_diesys(1, "fcntl stdin");
	L.in = rec_reader_new(STDIN_FILENO, REC_STREAM_MAX);
	L.out = rec_out_new(STDOUT_FILENO);
	L.view = view_new();
	L.wait_tail = &L.wait;
	for (;;) {
		read_lines();
		start_waiting();
		tend();
		start_waiting();
		if (L.in_eof && L.nwait == 0 && L.nrun == 0)
			break;
		if (rec_out_flush(L.out) == -1)
			msg_diesys(1, "write stdout");
		wait_any();
	}
	if (rec_out_flush(L.out) == -1)
		msg_diesys(1, "write stdout");
	if (stopping)
		msg_warn("stopped by signal %d with %ld records unparsed",
		    (int)stopping, L.nstopped);
	/* Leave stdin as it was found: a terminal shares it. */
	fcntl(STDIN_FILENO, F_SETFL, fl);
	rec_out_free(L.out);
	rec_reader_free(L.in);
	view_free(L.view);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "list", no_argument, NULL, 'l' },
		{ "reparse", no_argument, NULL, 'r' },
		{ "run-dir", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	msg_init(PROG);
	opts.jobs = 4;
	while ((c = getopt_long(argc, argv, ":hj:v", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			opts.config = optarg;
			break;
		case 'd':
			opts.run_dir = optarg;
			break;
		case 'j':
			opts.jobs = opt_long("jobs", optarg, 1, 4096);
			break;
		case 'l':
			opts.list = 1;
			break;
		case 'r':
			opts.reparse = 1;
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	opt_no_operands(argc, argv, usage);
	opt_check_env();
	opt_conf(&opts.conf, opts.config);
	cmds_check(&opts.conf, opts.config, opts.list);
	if (opts.list) {
		/* With the run directory, its room for the parsers too. */
		if (opts.run_dir != NULL) {
			umask(077);
			free(make_dirs(2));
		}
		conf_free(&opts.conf);
		opt_fshut();
		return 0;
	}
	if (opts.run_dir == NULL) {
		msg_warn("option --run-dir: needed to find the bodies");
		opt_usage(usage);
	}
	umask(077);
	open_dirs();
	job_init(opts.jobs);
	setup_signals();
	loop();
	job_fini();
	close(L.dirs.docs);
	close(L.dirs.part);
	conf_free(&opts.conf);
	opt_fshut();
	return 0;
}
