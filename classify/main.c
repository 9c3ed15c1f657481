/*
 * rfp-classify: decide what a fetched record's outcome means.
 *
 * Reads records from rfp-fetch (or rfp-parse) on stdin and writes each to
 * stdout with "class" (ok, transient or permanent) and "reason" (http_503,
 * timeout, invalid_body, parse_failed, unknown_http_418, ...) added, and
 * "retry_after_s" derived from the raw "retry_after" header (delta-seconds
 * or an HTTP-date, taken relative to the response's "date" or
 * "response_at").  A 2xx that rfp-parse marked with "parse_error" is
 * classified by that.  A pure function of
 * the record: it reads no clock, no file and no network.  Records that
 * already carry a "fate" pass through untouched; unknown fields always do.
 * The statuses an endpoint's "transient:" and "permanent:" lists name (in
 * --config), and those of --transient and --permanent for every endpoint,
 * come before the table.
 *
 * Exit: 0 at EOF, 1 when stdout fails, 2 on a usage error.
 */
#include <ctype.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/record/class.h"
#include "lib/config/conf.h"
#include "lib/record/hdr.h"
#include "cmd/loop.h"
#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/record/rec.h"
#include "lib/record/scan.h"
#include "lib/record/view.h"

#define PROG	"rfp-classify"
#define RA_MAX	86400.0		/* a Retry-After past a day is absurd */

enum ra_kind {
	RA_NONE,		/* no Retry-After: retry_after_s untouched */
	RA_BAD,			/* unreadable: retry_after_s null */
	RA_OK,
	RA_CLAMPED		/* read, then clamped into range */
};

static const char usage[] =
    "usage: rfp-classify [-hv] [--config FILE] [--permanent STATUSES]\n"
    "                    [--transient STATUSES] [--version]\n";

static struct opts {
	struct conf	 conf;	/* the status lists, per endpoint */
} opts;

/* What classify() and class_read() read: of the wrong type, refused. */
static const char *const reads[] = { "error", "status", "parse_error",
	"retry_after", "date", "response_at", "endpoint", "method",
	"idempotent", NULL };
static const struct loop_hooks hooks = { .reads = reads };

/* The class configured for status at endpoint ep (NULL: none), or -1. */
static int
over(const char *ep, int has_status, long status)
{
	const struct conf_ep *e = conf_endpoint(&opts.conf, ep ? ep : "");

	if (!has_status || status < 0 || status > CONF_STATUS_MAX)
		return -1;
	switch (e->status_class[status]) {
	case CONF_TRANSIENT:
		return CLASS_TRANSIENT;
	case CONF_PERMANENT:
		return CLASS_PERMANENT;
	default:
		return -1;
	}
}

/*
 * Read the raw Retry-After against the response's date (or response_at),
 * clamping and saying so.
 */
static enum ra_kind
ra_derive(const char *raw, const char *date, double response_at,
    long lineno, const char *id, double *d)
{
	/*
	 * Named by the document too: inside rfpipe, this stage's line
	 * number is no line of the manifest.
	 */
	char who[96];
	double now;
	int rc;

	if (raw == NULL)
		return RA_NONE;
	if (id != NULL)
		snprintf(who, sizeof(who), "\"%.80s\": ", id);
	else
		who[0] = '\0';
	if (date == NULL || hdr_date(date, &now) == -1)
		now = response_at;
	rc = hdr_retry_after(raw, now, d);
	/* A date, and no time to take it from. */
	if (rc == -1 || (now == 0 && isalpha((unsigned char)raw[strspn(raw,
	    " ")]))) {
		msg_line(lineno, "warning: %sbad Retry-After \"%.40s\", using "
		    "backoff", who, raw);
		return RA_BAD;
	}
	if (*d < 0) {
		msg_line(lineno, "warning: %sRetry-After \"%.40s\" is in the "
		    "past, clamped to 0", who, raw);
		*d = 0;
		return RA_CLAMPED;
	}
	if (*d > RA_MAX) {
		msg_line(lineno, "warning: %sRetry-After \"%.40s\" is over a "
		    "day, clamped to %.0f s", who, raw, RA_MAX);
		*d = RA_MAX;
		return RA_CLAMPED;
	}
	return RA_OK;
}

/*
 * One record: a pure function of its members.  Records that carry a fate
 * pass untouched; the view keeps every byte this stage does not set.
 */
static int
classify(struct view *v, long lineno, struct rec_out *out, void *arg)
{
	struct class_in in;
	enum class_kind k;
	enum ra_kind ra;
	char reason[64];
	double d = 0;

	(void)out;
	(void)arg;
	if (view_type(v, "fate") != -1)
		return 0;
	class_read(v, &in);
	in.over = over(view_str(v, "endpoint"), in.has_status, in.status);
	k = class_decide(&in, reason, sizeof(reason));
	view_set_str(v, "class", class_name(k));
	view_set_str(v, "reason", reason);
	ra = ra_derive(view_str(v, "retry_after"), view_str(v, "date"),
	    view_num(v, "response_at", 0), lineno, view_str(v, "id"), &d);
	if (ra == RA_BAD)
		view_set_null(v, "retry_after_s");
	else if (ra != RA_NONE)
		view_set_real(v, "retry_after_s", d);
	if (ra == RA_CLAMPED)
		view_set_true(v, "retry_after_clamped");
	return 0;
}

/* Whether the two status lists share a status. */
static int
both(const char *a, const char *b)
{
	struct conf x, y;
	int i, rc = 0;

	conf_init(&x);
	conf_init(&y);
	if (conf_statuses(&x, a, CONF_PERMANENT) == 0 &&
	    conf_statuses(&y, b, CONF_TRANSIENT) == 0)
		for (i = 0; i <= CONF_STATUS_MAX; i++)
			if (x.defaults.status_class[i] &&
			    y.defaults.status_class[i])
				rc = 1;
	conf_free(&x);
	conf_free(&y);
	return rc;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ "permanent", required_argument, NULL, 'P' },
		{ "transient", required_argument, NULL, 'T' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config = NULL, *perm = NULL, *trans = NULL;
	int c;

	msg_init(PROG);
	/*
	 * A standard error whose reader is gone (rfpipe -v | head) fails its
	 * writes; it does not end the stage.  A standard output gone is
	 * the write's error, named.
	 */
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			config = optarg;
			break;
		case 'P':
			perm = optarg;
			break;
		case 'T':
			trans = optarg;
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	opt_no_operands(argc, argv, usage);
	opt_conf(&opts.conf, config);
	/* Flags win over the file; a status in both flags is a mistake. */
	if (perm != NULL && conf_statuses(&opts.conf, perm,
	    CONF_PERMANENT) == -1)
		msg_die(2, "option --permanent: expected statuses such as "
		    "\"400,520-524\" (100 to 599, not 2xx), got \"%s\"", perm);
	if (trans != NULL && conf_statuses(&opts.conf, trans,
	    CONF_TRANSIENT) == -1)
		msg_die(2, "option --transient: expected statuses such as "
		    "\"400,520-524\" (100 to 599, not 2xx), got \"%s\"",
		    trans);
	if (perm != NULL && trans != NULL && both(perm, trans))
		msg_die(2, "option --transient: a status also in "
		    "--permanent");
	if (loop_run(PROG, STDIN_FILENO, STDOUT_FILENO, &hooks, classify,
	    NULL) == -1) {
		msg_output_gone();
		msg_diesys(1, "stdio");
	}
	conf_free(&opts.conf);
	opt_fshut();
	return 0;
}
