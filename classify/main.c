/*
 * rfp-classify: decide what a fetched record's outcome means.
 *
 * Reads records from rfp-fetch on stdin and writes each to stdout with
 * "class" (ok, transient or permanent) and "reason" (http_503, timeout,
 * invalid_body, unknown_http_418, ...) added, and "retry_after_s" derived
 * from the raw "retry_after" header (delta-seconds or an HTTP-date, taken
 * relative to the response's "date" or "response_at").  A pure function of
 * the record: it reads no clock, no file and no network.  Records that
 * already carry a "fate" pass through untouched; unknown fields always do.
 *
 * Exit: 0 at EOF, 1 when stdout fails, 2 on a usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/class.h"
#include "lib/hdr.h"
#include "lib/msg.h"
#include "lib/opt.h"
#include "lib/rec.h"

#define PROG	"rfp-classify"
#define RA_MAX	86400.0		/* a Retry-After past a day is absurd */

static const char usage[] =
    "usage: rfp-classify [-hv] [--version]\n";

/* Derive retry_after_s from the raw header, clamping and saying so. */
static void
retry_after(json_t *rec, long lineno)
{
	const char *raw = rec_str(rec, "retry_after");
	const char *date = rec_str(rec, "date");
	double now, d;

	if (raw == NULL)
		return;
	if (date == NULL || hdr_date(date, &now) == -1)
		now = rec_num(rec, "response_at", 0);
	if (hdr_retry_after(raw, now, &d) == -1 ||
	    (now == 0 && d > 1e6)) {
		msg_line(lineno, "warning: bad Retry-After \"%.40s\", using "
		    "backoff", raw);
		json_object_set_new(rec, "retry_after_s", json_null());
		return;
	}
	if (d < 0) {
		msg_line(lineno, "warning: Retry-After \"%.40s\" is in the "
		    "past, clamped to 0", raw);
		d = 0;
		json_object_set_new(rec, "retry_after_clamped", json_true());
	} else if (d > RA_MAX) {
		msg_line(lineno, "warning: Retry-After \"%.40s\" is over a "
		    "day, clamped to %.0f s", raw, RA_MAX);
		d = RA_MAX;
		json_object_set_new(rec, "retry_after_clamped", json_true());
	}
	json_object_set_new(rec, "retry_after_s", json_real(d));
}

static int
classify(json_t *rec, long lineno, void *arg)
{
	enum class_kind k;
	char reason[64];

	(void)arg;
	if (json_object_get(rec, "fate") != NULL)
		return 0;
	k = class_of(rec, reason, sizeof(reason));
	json_object_set_new(rec, "class", json_string(class_name(k)));
	json_object_set_new(rec, "reason", json_string(reason));
	retry_after(rec, lineno);
	return 0;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	msg_init(PROG);
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			opt_help(usage);
		case 'v':
			msg_verbose = 1;
			break;
		case 'V':
			opt_version();
		default:
			opt_bad(usage, argv, c);
		}
	}
	opt_no_operands(argc, argv, usage);
	if (rec_loop(PROG, STDIN_FILENO, STDOUT_FILENO, classify, NULL) == -1)
		msg_diesys(1, "stdio");
	opt_fshut();
	return 0;
}
