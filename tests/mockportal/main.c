/*
 * rfp-mockportal: the scripted HTTP portal that tests, the demo and the
 * benchmark run against.
 *
 * Reads a scenario (YAML: routes with per-document status scripts, rate
 * limits, outages, submissions; see rfp-mockportal(1)), listens on
 * 127.0.0.1 only, prints "port N" on stdout (and writes "N\n" to
 * --port-file, atomically, and to --ready-fd, which it then closes) once
 * it accepts connections, and appends one
 * NDJSON line per request to --log, written with a single write(2) when the
 * answer is decided.  Runs until SIGTERM or SIGINT, then stops every
 * connection thread and exits.  It never listens on another address and
 * never reads a clock but lib/clk's, so RFPIPE_TIME_SCALE shrinks every
 * delay it enforces (but not the Retry-After values it sends).  With
 * --hold-at N it holds every request to a route after the Nth until
 * SIGUSR1, so that a test can act on a run it knows has not ended.
 *
 * With --ideal N it starts no server: it prints the ideal makespan of N
 * documents on one endpoint under the scenario's limits, in logical seconds.
 *
 * Exit: 0 after SIGTERM/SIGINT, 1 on a runtime error (cannot listen, log,
 * port file or ready descriptor unusable, stdout failed), 2 on a usage or
 * scenario error.  Any exit closes --ready-fd, so a reader waiting on it
 * sees end of file rather than waiting for ever.
 */
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/base/x.h"
#include "limit.h"
#include "portal.h"
#include "scen.h"

#define PROG	"rfp-mockportal"
#define IDEAL_MAX	10000000L

static const char usage[] =
    "usage: rfp-mockportal --scenario file [--log file] [--port n] "
    "[--port-file file]\n"
    "                      [--ready-fd n] [--seed n] "
    "[--tls-cert file --tls-key file]\n"
    "                      [--hold-at n ...]\n"
    "       rfp-mockportal --ideal n --scenario file [--endpoint name] "
    "[--allowed]\n"
    "       rfp-mockportal -h | --help | --version\n";

static struct opts {
	const char	*scenario;
	const char	*log;
	const char	*port_file;
	long		 port;
	int		 ready_fd;	/* -1: none */
	long		 seed;
	int		 has_seed;
	long		 ideal;		/* -1: serve */
	const char	*endpoint;
	int		 allowed;
	const char	*tls_cert, *tls_key;
	long		 hold_at[PORTAL_HOLD_MAX];
	size_t		 nhold;
} opts = { .ideal = -1, .ready_fd = -1 };

/* The whole of a small file, NUL-terminated (caller frees); dies if not. */
static char *
slurp(const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		msg_diesys(2, "open %s", path);
	for (;;) {
		buf = xrealloc(buf, len + 4097);
		if ((n = read(fd, buf + len, 4096)) == -1 && errno == EINTR)
			continue;
		if (n == -1)
			msg_diesys(2, "read %s", path);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

/* Write "port\n" to path.tmp, then rename it, so a poller never sees half. */
static int
write_port_file(const char *path, int port)
{
	char *tmp, buf[32];
	int fd, n, rc = -1;

	tmp = xasprintf("%s.tmp", path);
	n = snprintf(buf, sizeof(buf), "%d\n", port);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1) {
		msg_warnsys("open %s", tmp);
		goto out;
	}
	if (write(fd, buf, (size_t)n) != n) {
		msg_warnsys("write %s", tmp);
		close(fd);
		goto out;
	}
	if (close(fd) == -1) {
		msg_warnsys("close %s", tmp);
		goto out;
	}
	if (rename(tmp, path) == -1) {
		msg_warnsys("rename %s to %s", tmp, path);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	return rc;
}

/*
 * Write "port\n" to the --ready-fd and close it: the listener is up, and
 * the reader sees the line and then end of file (s6's notification-fd).
 */
static int
notify_ready(int fd, int port)
{
	char buf[32];
	int n, rc = 0;

	n = snprintf(buf, sizeof(buf), "%d\n", port);
	if (write(fd, buf, (size_t)n) != n) {
		msg_warnsys("write --ready-fd %d", fd);
		rc = -1;
	}
	if (close(fd) == -1 && rc == 0) {
		msg_warnsys("close --ready-fd %d", fd);
		rc = -1;
	}
	return rc;
}

/*
 * --ideal: the makespan of opts.ideal documents on the endpoint (of the first
 * route, or --endpoint), with the delay_ms of its first route as latency.
 */
static int
ideal(const struct scen *s)
{
	const struct route *r = NULL;
	double span;
	long allowed;
	size_t i;

	for (i = 0; i < s->nroutes && r == NULL; i++)
		if (opts.endpoint == NULL ||
		    strcmp(s->routes[i].ep->name, opts.endpoint) == 0)
			r = &s->routes[i];
	if (r == NULL) {
		if (opts.endpoint != NULL)
			msg_warn("%s: no route has endpoint \"%s\"",
			    opts.scenario, opts.endpoint);
		else
			msg_warn("%s: no routes", opts.scenario);
		return 2;
	}
	lim_ideal(r->ep, r->delay_ms / 1000, opts.ideal, &span, &allowed);
	printf("%.3f\n", span);
	if (opts.allowed)
		printf("allowed %ld\n", allowed);
	opt_fshut();
	return 0;
}

/* Every connection has a thread and a socket: allow as many files as we may. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "allowed", no_argument, NULL, 'a' },
		{ "endpoint", required_argument, NULL, 'e' },
		{ "help", no_argument, NULL, 'h' },
		{ "hold-at", required_argument, NULL, 'H' },
		{ "ideal", required_argument, NULL, 'i' },
		{ "log", required_argument, NULL, 'l' },
		{ "port", required_argument, NULL, 'p' },
		{ "port-file", required_argument, NULL, 'P' },
		{ "ready-fd", required_argument, NULL, 'r' },
		{ "scenario", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'S' },
		{ "tls-cert", required_argument, NULL, 'c' },
		{ "tls-key", required_argument, NULL, 'k' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct portal *p;
	struct scen *s;
	char *cert = NULL, *key = NULL;
	sigset_t sigs;
	char err[1024];
	int c, sig, port, logfd = -1, rc = 0;

	msg_init(PROG);
	opterr = 0;	/* getopt's own messages carry argv[0] */
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			opts.allowed = 1;
			break;
		case 'c':
			opts.tls_cert = optarg;
			break;
		case 'e':
			opts.endpoint = optarg;
			break;
		case 'h':
			opt_help(usage);
		case 'H':
			if (opts.nhold == PORTAL_HOLD_MAX) {
				msg_warn("option --hold-at: at most %d",
				    PORTAL_HOLD_MAX);
				opt_usage(usage);
			}
			opts.hold_at[opts.nhold] = opt_long("hold-at", optarg,
			    opts.nhold > 0 ? opts.hold_at[opts.nhold - 1] + 1 :
			    0, LONG_MAX - 1);
			opts.nhold++;
			break;
		case 'i':
			opts.ideal = opt_long("ideal", optarg, 0, IDEAL_MAX);
			break;
		case 'k':
			opts.tls_key = optarg;
			break;
		case 'l':
			opts.log = optarg;
			break;
		case 'p':
			opts.port = opt_long("port", optarg, 0, 65535);
			break;
		case 'P':
			opts.port_file = optarg;
			break;
		case 'r':
			opts.ready_fd = (int)opt_long("ready-fd", optarg, 3,
			    INT_MAX);
			break;
		case 's':
			opts.scenario = optarg;
			break;
		case 'S':
			opts.seed = opt_long("seed", optarg, 0, INT64_MAX);
			opts.has_seed = 1;
			break;
		case 'V':
			opt_version();
		case ':':
			msg_warn("option %s: missing argument",
			    argv[optind - 1]);
			opt_usage(usage);
		default:
			if (strncmp(argv[optind - 1], "--", 2) == 0)
				msg_warn("unknown option \"%s\"",
				    argv[optind - 1]);
			else
				msg_warn("unknown option \"-%c\"", optopt);
			opt_usage(usage);
		}
	}
	if (optind != argc) {
		msg_warn("unexpected argument \"%s\"", argv[optind]);
		opt_usage(usage);
	}
	if (opts.scenario == NULL) {
		msg_warn("option --scenario is required");
		opt_usage(usage);
	}
	if (opts.ideal == -1 && (opts.endpoint != NULL || opts.allowed)) {
		msg_warn("option --%s needs --ideal", opts.endpoint != NULL ?
		    "endpoint" : "allowed");
		opt_usage(usage);
	}
	if (opts.ideal != -1 && (opts.log != NULL || opts.port_file != NULL ||
	    opts.port != 0 || opts.ready_fd != -1 || opts.has_seed ||
	    opts.tls_cert != NULL || opts.tls_key != NULL || opts.nhold > 0)) {
		msg_warn("option --ideal starts no server: no --log, --port, "
		    "--port-file, --ready-fd, --seed, --tls-* or --hold-at");
		opt_usage(usage);
	}
	if ((opts.tls_cert == NULL) != (opts.tls_key == NULL)) {
		msg_warn("options --tls-cert and --tls-key go together");
		opt_usage(usage);
	}
	if (opts.ready_fd != -1 && fcntl(opts.ready_fd, F_GETFD) == -1) {
		msg_warn("option --ready-fd: %d is not an open file descriptor",
		    opts.ready_fd);
		opt_usage(usage);
	}
	opt_check_env();
	if ((s = scen_load(opts.scenario, err, sizeof(err))) == NULL)
		msg_die(2, "%s", err);
	if (opts.ideal != -1) {
		rc = ideal(s);
		scen_free(s);
		return rc;
	}
	if (opts.log != NULL && (logfd = open(opts.log, O_WRONLY | O_CREAT |
	    O_APPEND | O_CLOEXEC, 0644)) == -1)
		msg_diesys(1, "open %s", opts.log);

	/*
	 * Threads inherit the mask: only sigwait() below sees TERM and INT,
	 * and USR1, which ends a --hold-at hold.
	 */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	p = portal_new(s, opts.has_seed ? (uint64_t)opts.seed : s->seed, logfd);
	portal_hold(p, opts.hold_at, opts.nhold);
	if (opts.tls_cert != NULL) {
		cert = slurp(opts.tls_cert);
		key = slurp(opts.tls_key);
		portal_tls(p, cert, key);
	}
	if ((port = portal_start(p, (int)opts.port, err, sizeof(err))) == -1) {
		msg_warn("%s", err);
		rc = 1;
		goto stop;
	}
	if (opts.port_file != NULL && write_port_file(opts.port_file,
	    port) == -1) {
		rc = 1;
		goto stop;
	}
	printf("port %d\n", port);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		msg_warnsys("write stdout");
		rc = 1;
		goto stop;
	}
	if (opts.ready_fd != -1 && notify_ready(opts.ready_fd, port) == -1) {
		rc = 1;
		goto stop;
	}
	for (;;) {
		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig != SIGUSR1)
			break;
		portal_release(p);
	}
stop:
	portal_stop(p);
	if (portal_log_failed(p))
		rc = 1;
	portal_free(p);
	free(cert);
	free(key);
	scen_free(s);
	if (logfd != -1 && close(logfd) == -1) {
		msg_warnsys("close %s", opts.log);
		rc = 1;
	}
	if (rc != 0)
		return rc;
	opt_fshut();
	return 0;
}
