/*
 * rfp-report: what happened in a run directory, for the morning after.
 *
 * Reads RUNDIR's results.ndjson and dead.ndjson (counted by
 * lib/accounts/summ, as rfp-sink counts them), summary.json,
 * logs/attempts.ndjson and state/claims.ndjson, and prints on stdout the
 * summary of the whole run directory, the pending ids (seen, not filed)
 * and each endpoint's top errors.  With --metrics it writes the counts in
 * the Prometheus text format, with --html one self-contained page; each
 * file is written as FILE.tmp and renamed, so a collector or a mailer
 * never reads half of one.
 *
 * It never writes, locks or makes anything in the run directory, and
 * never changes a file there: it can run while a pipeline does.
 *
 * Exit: 0 when the report is written, 1 when a file of the run directory
 * could not be read or an output could not be written, 2 on a usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/msg.h"
#include "lib/base/opt.h"
#include "lib/base/x.h"
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

/* Write path by way of path.tmp, renamed once whole; -1 said. */
static int
write_file(const char *path, const struct rep *r,
    void (*fn)(const struct rep *, FILE *))
{
	char *tmp = xasprintf("%s.tmp", path);
	FILE *f;
	int rc = 0;

	if ((f = fopen(tmp, "w")) == NULL) {
		msg_warnsys("open %s", tmp);
		free(tmp);
		return -1;
	}
	fn(r, f);
	if (fflush(f) == EOF || ferror(f) || fsync(fileno(f)) == -1) {
		msg_warnsys("write %s", tmp);
		rc = -1;
	}
	if (fclose(f) == EOF && rc == 0) {
		msg_warnsys("write %s", tmp);
		rc = -1;
	}
	if (rc == 0 && rename(tmp, path) == -1) {
		msg_warnsys("rename %s", tmp);
		rc = -1;
	}
	if (rc == -1)
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
		case 'h':
			opt_help(usage);
		case 'H':
			opts.html = optarg;
			break;
		case 'm':
			opts.metrics = optarg;
			break;
		case 'q':
			opts.quiet = 1;
			break;
		case 'V':
			opt_version();
		default:
			opt_bad(usage, argv, c);
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
	int rc = 0;

	msg_init(PROG);
	options(argc, argv);
	/* Not a run directory at all: nothing to report, not a report of 0. */
	if (access(argv[optind], R_OK | X_OK) == -1)
		msg_diesys(1, "open %s", argv[optind]);
	if (rep_load(&r, argv[optind]) == -1)
		rc = 1;
	if (!opts.quiet)
		rep_text(&r, stdout);
	if (opts.metrics != NULL && write_file(opts.metrics, &r,
	    rep_prom) == -1)
		rc = 1;
	if (opts.html != NULL && write_file(opts.html, &r, rep_html) == -1)
		rc = 1;
	rep_free(&r);
	opt_fshut();
	return rc;
}
