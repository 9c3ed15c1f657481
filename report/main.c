/*
 * rfp-report: what happened in a run directory, for the morning after.
 *
 * Reads RUNDIR's results.ndjson and dead.ndjson (counted by
 * lib/accounts/summ, as rfp-sink counts them), summary.json,
 * logs/attempts.ndjson and state/claims.ndjson, and prints on stdout the
 * summary of the whole run directory, the pending ids (seen, not filed)
 * and each endpoint's top errors.  With --metrics it writes the counts in
 * the Prometheus text format, with --html one self-contained page; each
 * file is written beside itself under a new name and renamed, so a
 * collector or a mailer never reads half of one (a device or a FIFO is
 * written straight).
 *
 * It never writes, locks or makes anything in the run directory, and
 * never changes a file there: it can run while a pipeline does.
 *
 * Exit: 0 when the report is written, 1 when a file of the run directory
 * could not be read or an output could not be written, 2 on a usage error.
 */
#include <sys/stat.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/base/x.h"
#include "lib/state/rundir.h"
#include "report/report.h"

#define PROG	"rfp-report"

static const char usage[] =
    "usage: rfp-report [-hq] [--html FILE] [--metrics FILE] [--version]\n"
    "                  RUN_DIR\n";

static struct {
	const char	*html;
	const char	*metrics;
	int		 quiet;
} opts;

/* Whether dir holds what a pipeline leaves in its run directory. */
static int
is_run_dir(const char *dir)
{
	static const enum rundir_file names[] = {
		RUNDIR_RESULTS, RUNDIR_DEAD, RUNDIR_SUMMARY, RUNDIR_ATTEMPTS,
		RUNDIR_STATE
	};
	struct stat st;
	size_t i;
	char *p;
	int found = 0;

	if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode))
		return 0;
	for (i = 0; i < sizeof(names) / sizeof(names[0]) && !found; i++) {
		p = rundir_path(dir, names[i], NULL);
		found = access(p, F_OK) == 0;
		free(p);
	}
	return found;
}

/*
 * Whether the output path would land in the run directory run (its
 * folder, once resolved, is run or under it): 1, 0, or -1 said.
 */
static int
inside(const char *path, const char *run)
{
	char *dir = xstrdup(path), *slash, *rd = NULL, *rr = NULL;
	size_t n;
	int in = -1;

	if ((slash = strrchr(dir, '/')) != NULL)
		slash == dir ? (void)(slash[1] = '\0') : (void)(*slash = '\0');
	if ((rd = realpath(slash != NULL ? dir : ".", NULL)) == NULL)
		msg_warnsys("%s", path);
	else if ((rr = realpath(run, NULL)) == NULL)
		msg_warnsys("%s", run);
	else {
		n = strlen(rr);
		in = strncmp(rd, rr, n) == 0 && (rd[n] == '\0' ||
		    rd[n] == '/');
	}
	free(dir);
	free(rd);
	free(rr);
	return in;
}

/*
 * Write path: a regular file (or none yet) by way of a new temporary
 * file beside it, renamed over it once whole, so a collector or a mailer
 * never reads half of one; a device or a FIFO (/dev/stdout) straight,
 * never replaced.  A symbolic link is refused, as is a path in the run
 * directory, which the report never changes.  0, or -1 said.
 */
static int
write_file(const char *path, const char *run, const struct rep *r,
    void (*fn)(const struct rep *, FILE *))
{
	struct stat st;
	char *tmp = NULL;
	mode_t um;
	FILE *f = NULL;
	int fd, rc = 0, direct = 0;

	if (lstat(path, &st) == 0) {
		if (S_ISLNK(st.st_mode)) {
			msg_warn("%s: a symbolic link; name the file itself",
			    path);
			return -1;
		}
		if (S_ISDIR(st.st_mode)) {
			msg_warn("%s: a directory, not a file", path);
			return -1;
		}
		direct = S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode);
	} else if (errno != ENOENT) {
		msg_warnsys("%s", path);
		return -1;
	}
	if (!direct) {
		switch (inside(path, run)) {
		case -1:
			return -1;
		case 1:
			msg_warn("%s: in the run directory, which rfp-report "
			    "never changes", path);
			return -1;
		}
		tmp = xasprintf("%s.XXXXXX", path);
		if ((fd = mkstemp(tmp)) == -1) {
			msg_warnsys("create %s", tmp);
			free(tmp);
			return -1;
		}
		um = umask(0);
		umask(um);
		if (fchmod(fd, 0666 & ~um) == -1 ||
		    (f = fdopen(fd, "w")) == NULL) {
			msg_warnsys("%s", tmp);
			close(fd);
			rc = -1;
		}
	} else if ((f = fopen(path, "w")) == NULL) {
		msg_warnsys("open %s", path);
		return -1;
	}
	if (f != NULL) {
		fn(r, f);
		if (fflush(f) == EOF || ferror(f) ||
		    (!direct && fsync(fileno(f)) == -1)) {
			msg_warnsys("write %s", direct ? path : tmp);
			rc = -1;
		}
		if (fclose(f) == EOF && rc == 0) {
			msg_warnsys("write %s", direct ? path : tmp);
			rc = -1;
		}
	}
	if (!direct && rc == 0 && rename(tmp, path) == -1) {
		msg_warnsys("rename %s", tmp);
		rc = -1;
	}
	if (!direct && rc == -1)
		unlink(tmp);
	free(tmp);
	return rc;
}

static void
options(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "html", required_argument, NULL, 'H' },
		{ "metrics", required_argument, NULL, 'm' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	while ((c = getopt_long(argc, argv, ":hq", longopts, NULL)) != -1) {
		switch (c) {
		case 'H':
			opts.html = optarg;
			break;
		case 'm':
			opts.metrics = optarg;
			break;
		case 'q':
			opts.quiet = 1;
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	if (argc - optind != 1) {
		msg_warn(argc - optind == 0 ? "expected a RUN_DIR" :
		    "expected one RUN_DIR, got %d operands", argc - optind);
		opt_usage(usage);
	}
	if (argv[optind][0] == '\0') {
		msg_warn("RUN_DIR: an empty name");
		opt_usage(usage);
	}
}

int
main(int argc, char *argv[])
{
	struct rep r;
	struct stat st;
	int rc = 0;

	msg_init(PROG);
	options(argc, argv);
	/* Not a run directory at all: nothing to report, not a report of 0. */
	if (stat(argv[optind], &st) == 0 && !S_ISDIR(st.st_mode))
		msg_die(1, "%s: not a directory: give the run directory "
		    "(--run-dir), not a file in it", argv[optind]);
	if (access(argv[optind], R_OK | X_OK) == -1)
		msg_diesys(1, "open %s", argv[optind]);
	if (!is_run_dir(argv[optind]))
		msg_die(1, "%s: not a run directory (no results.ndjson, "
		    "dead.ndjson, summary.json, logs/ or state/)",
		    argv[optind]);
	if (rep_load(&r, argv[optind]) == -1)
		rc = 1;
	if (!opts.quiet)
		rep_text(&r, stdout);
	if (opts.metrics != NULL && write_file(opts.metrics, argv[optind],
	    &r, rep_prom) == -1)
		rc = 1;
	if (opts.html != NULL && write_file(opts.html, argv[optind], &r,
	    rep_html) == -1)
		rc = 1;
	rep_free(&r);
	opt_fshut();
	return rc;
}
