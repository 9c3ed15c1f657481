/*
 * rfp-queue: the work queue that several hosts share, in the PostgreSQL
 * database named by --state (or the config's state: key).
 *
 * load reads a manifest on stdin and adds each record under its "id" to
 * rfp_queue, once: loading the same manifest again adds nothing.  It
 * prints {"added":N,"present":N,"bad":N}: present, the lines whose id the
 * queue held already, an earlier line's among them; bad, the lines that
 * are not an object with a string "id", reported and not loaded.  A
 * duplicate id is reported too, and loaded once, from its first line.
 * pull claims records with FOR UPDATE SKIP LOCKED (queued ones, and those
 * whose claimant's lease ran out), at most --batch held at a time, and
 * writes them to stdout as a manifest for rfp-fetch; it claims again when
 * file notifies it that some were filed.  A record whose id --run-dir has
 * filed already it files itself, as file would, with the run directory's
 * record: rfp-fetch would skip it, and nothing would ever file it.  While
 * it runs it renews the lease of what it holds, so only a dead or stalled
 * host's records are claimed again.  It ends when nothing in the queue is
 * left to do.
 * file passes records through untouched; each one with fate done or dead
 * is recorded in rfp_results and its queue row closed, a group at a time,
 * while the claim of --owner on the row stands.
 * count prints how many records the queue holds; summary prints the
 * combined reconciliation of every host as one JSON object.
 *
 * It never fetches anything and never decides a fate.
 *
 * Exit: 0 done, 1 a fatal error (the server, stdout), 2 a usage or
 * configuration error.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/record/fate.h"
#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/state/store.h"
#include "lib/base/x.h"
#include "queue/queue.h"

#define PROG	"rfp-queue"

static const char usage[] =
    "usage: rfp-queue [-hv] [--batch N] [--config FILE] [--deadline WHEN]\n"
    "                 [--lease S] [--owner NAME] [--retry-dead]\n"
    "                 [--run-dir DIR] [--state URL] [--version]\n"
    "                 load|pull|file|count|summary\n"
    "       rfp-queue [-v] [--config FILE] [--state URL]\n"
    "                 redact|requeue [REASON ...]\n";

static struct qopts opts;
const char *q_cmd = "";

/*
 * Standard input and error, closed, read and write /dev/null; standard
 * output closed is an error.  Left closed, the connection took the lowest
 * free descriptor, and records, or messages, went into its stream.
 */
static void
std_fds(void)
{
	int fd;

	if (fcntl(STDOUT_FILENO, F_GETFD) == -1)
		msg_die(1, "standard output is closed");
	for (fd = STDIN_FILENO; fd <= STDERR_FILENO; fd += 2)
		if (fcntl(fd, F_GETFD) == -1 &&
		    open("/dev/null", fd == STDIN_FILENO ? O_RDONLY :
		    O_WRONLY) != fd)
			msg_die(1, "/dev/null: cannot open");
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, 'b' },
		{ "config", required_argument, NULL, 'C' },
		{ "deadline", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "lease", required_argument, NULL, 'l' },
		{ "owner", required_argument, NULL, 'o' },
		{ "retry-dead", no_argument, NULL, 'R' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "state", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config = NULL, *state = NULL, *cmd, *owner = NULL;
	const char *deadline = NULL;
	struct conf conf;
	char err[512], host[256], *redacted;
	const char *not_all = NULL;	/* an option some commands take */
	int c;

	msg_init(PROG);
	opt_check_env();
	opts.batch = 256;
	opts.lease = 60;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			not_all = "batch";
			opts.batch = opt_long("batch", optarg, 1, 100000);
			break;
		case 'C':
			config = optarg;
			break;
		case 'D':
			not_all = "deadline";
			deadline = optarg;
			break;
		case 'l':
			not_all = "lease";
			opts.lease = opt_duration("lease", optarg);
			/*
			 * A lease of 0 runs out as it is granted: two hosts
			 * took each other's records, and fetched 416 of 300.
			 */
			if (opts.lease < LEASE_LEAST)
				msg_die(2, "option --lease: at least %g s, not "
				    "\"%s\"", LEASE_LEAST, optarg);
			break;
		case 'o':
			not_all = "owner";
			owner = optarg;
			break;
		case 'R':
			not_all = "retry-dead";
			opts.retry_dead = 1;
			break;
		case 'r':
			not_all = "run-dir";
			opts.run_dir = optarg;
			break;
		case 'S':
			state = opt_state(optarg);
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	if (optind == argc) {
		msg_warn("expected a command");
		opt_usage(usage);
	}
	if (optind != argc - 1 && strcmp(argv[optind], "requeue") != 0) {
		msg_warn("unexpected argument \"%s\"", argv[argc - 1]);
		opt_usage(usage);
	}
	if (opts.retry_dead && opts.run_dir == NULL)
		msg_die(2, "option --retry-dead: needs --run-dir");
	cmd = q_cmd = argv[optind];
	/* Taken and dropped, an option would seem to have done something. */
	if (not_all != NULL && (strcmp(cmd, "requeue") == 0 ||
	    strcmp(cmd, "redact") == 0)) {
		msg_warn("option --%s: %s takes none", not_all, cmd);
		opt_usage(usage);
	}
	if (strcmp(cmd, "load") && strcmp(cmd, "pull") && strcmp(cmd,
	    "file") && strcmp(cmd, "count") && strcmp(cmd, "summary") &&
	    strcmp(cmd, "redact") && strcmp(cmd, "requeue")) {
		msg_warn("unknown command \"%s\"", cmd);
		opt_usage(usage);
	}
	for (c = optind + 1; strcmp(cmd, "requeue") == 0 && c < argc; c++)
		if (fate_reason_of(argv[c]) == -1)
			msg_die(2, "requeue: \"%s\" is no dead reason (see "
			    "rfpipe(7): permanent, exhausted, quota, ...)",
			    argv[c]);
	opt_conf(&conf, config);
	opts.deadline = opt_deadline_pick(deadline, &conf);
	state = opt_state_pick(state, &conf, config);
	if (state == NULL)
		msg_die(2, "needs --state URL (or the config's state: key)");
	/* The URL as every stage says it: rfpipe's resume line too. */
	if (strcmp(cmd, "redact") == 0) {
		puts(redacted = store_redact(state));
		free(redacted);
		conf_free(&conf);
		opt_fshut();
		return 0;
	}
	if (owner == NULL) {
		if (gethostname(host, sizeof(host) - 1) == -1)
			strcpy(host, "localhost");
		host[sizeof(host) - 1] = '\0';
		opts.owner = xasprintf("%s.%ld.%ld", host, (long)getpid(),
		    (long)clk_now());
	} else
		opts.owner = xstrdup(owner);
	opts.lease = clk_real(opts.lease);
	signal(SIGPIPE, SIG_IGN);
	std_fds();
	if (store_init(state, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	conf_free(&conf);
	/* pull and file name a filing's transaction (pg_current_xact_id). */
	if ((strcmp(cmd, "pull") == 0 || strcmp(cmd, "file") == 0) &&
	    q_long("SELECT current_setting('server_version_num')::int", 0,
	    NULL) < 130000)
		msg_die(1, "%s: PostgreSQL 13 or later is needed", cmd);
	if (strcmp(cmd, "load") == 0)
		load();
	else if (strcmp(cmd, "pull") == 0)
		pull(&opts);
	else if (strcmp(cmd, "file") == 0)
		file(opts.owner);
	else if (strcmp(cmd, "requeue") == 0)
		requeue(argv + optind + 1, argc - optind - 1);
	else if (strcmp(cmd, "count") == 0)
		printf("%ld\n", q_long("SELECT count(*) FROM rfp_queue", 0,
		    NULL));
	else
		summary();
	store_close();
	free(opts.owner);
	opt_fshut();
	return 0;
}
