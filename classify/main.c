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
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/record/class.h"
#include "lib/config/conf.h"
#include "lib/record/hdr.h"
#include "lib/base/msg.h"
#include "lib/base/opt.h"
#include "lib/record/rec.h"
#include "lib/record/scan.h"

#define PROG	"rfp-classify"
#define RA_MAX	86400.0		/* a Retry-After past a day is absurd */
#define FIELD_MAX	256		/* longest error, Retry-After, date read */
#define ADDED_MAX	4		/* fields this stage sets */

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

/* Whether raw is delta-seconds, only too long a number to read. */
static int
toolong(const char *raw)
{
	size_t n;

	raw += strspn(raw, " ");
	n = strspn(raw, "0123456789");
	return n > 9 && raw[n + strspn(raw + n, " ")] == '\0';
}

/*
 * Read the raw Retry-After against the response's date (or response_at),
 * clamping and saying so.
 */
static enum ra_kind
ra_derive(const char *raw, const char *date, double response_at,
    long lineno, double *d)
{
	double now;
	int rc;

	if (raw == NULL)
		return RA_NONE;
	if (date == NULL || hdr_date(date, &now) == -1)
		now = response_at;
	rc = hdr_retry_after(raw, now, d);
	if (rc == -1 && toolong(raw)) {
		rc = 0;
		*d = RA_MAX + 1;	/* valid, and past any bound */
	}
	if (rc == -1 || (now == 0 && *d > 1e6)) {
		msg_line(lineno, "warning: bad Retry-After \"%.40s\", using "
		    "backoff", raw);
		return RA_BAD;
	}
	if (*d < 0) {
		msg_line(lineno, "warning: Retry-After \"%.40s\" is in the "
		    "past, clamped to 0", raw);
		*d = 0;
		return RA_CLAMPED;
	}
	if (*d > RA_MAX) {
		msg_line(lineno, "warning: Retry-After \"%.40s\" is over a "
		    "day, clamped to %.0f s", raw, RA_MAX);
		*d = RA_MAX;
		return RA_CLAMPED;
	}
	return RA_OK;
}

static int
classify(json_t *rec, long lineno, void *arg)
{
	struct class_in in;
	enum class_kind k;
	enum ra_kind ra;
	char reason[64];
	double d = 0;

	(void)arg;
	if (json_object_get(rec, "fate") != NULL)
		return 0;
	class_read(rec, &in);
	in.over = over(rec_str(rec, "endpoint"), in.has_status, in.status);
	k = class_decide(&in, reason, sizeof(reason));
	json_object_set_new(rec, "class", json_string(class_name(k)));
	json_object_set_new(rec, "reason", json_string(reason));
	ra = ra_derive(rec_str(rec, "retry_after"), rec_str(rec, "date"),
	    rec_num(rec, "response_at", 0), lineno, &d);
	if (ra == RA_NONE)
		return 0;
	json_object_set_new(rec, "retry_after_s",
	    ra == RA_BAD ? json_null() : json_real(d));
	if (ra == RA_CLAMPED)
		json_object_set_new(rec, "retry_after_clamped", json_true());
	return 0;
}

/*
 * The fast path: a record within lib/scan's subset is classified from its
 * text and put out with only this stage's fields changed; anything else
 * (an escape in a field it reads, say) goes the jansson way.  Both ways
 * decide with class_decide and ra_derive, so they agree.
 */
static int
classify_line(const char *line, size_t len, long lineno,
    struct rec_out *out, void *arg)
{
	static struct scan_rec s;
	char ebuf[FIELD_MAX], rbuf[FIELD_MAX], dbuf[FIELD_MAX];
	char pbuf[FIELD_MAX], nbuf[FIELD_MAX], mbuf[16];
	static char *buf;
	static size_t size;
	size_t olen;
	char reason[64];
	const struct scan_member *m;
	const char *raw, *date, *ep, *meth;
	struct class_in in;
	struct scan_set e[ADDED_MAX];
	enum class_kind k;
	enum ra_kind ra;
	double d = 0, at = 0;
	int n = 0;

	(void)arg;
	if (scan_record(line, len, &s) == -1)
		return 0;
	if (scan_get(&s, "fate") != NULL) {
		return rec_out_line(out, line, (size_t)(s.close + 1 - line)) ==
		    -1 ? -1 : 1;
	}
	if (scan_field(&s, "error", ebuf, sizeof(ebuf), &in.error) == -1 ||
	    scan_field(&s, "retry_after", rbuf, sizeof(rbuf), &raw) == -1 ||
	    scan_field(&s, "date", dbuf, sizeof(dbuf), &date) == -1 ||
	    scan_field(&s, "parse_error", nbuf, sizeof(nbuf),
	    &in.parse_error) == -1 ||
	    scan_field(&s, "endpoint", pbuf, sizeof(pbuf), &ep) == -1 ||
	    scan_field(&s, "method", mbuf, sizeof(mbuf), &meth) == -1)
		return 0;
	m = scan_get(&s, "status");
	in.has_status = m != NULL && m->type == SCAN_INTEGER;
	in.status = in.has_status ? strtol(m->val, NULL, 10) : 0;
	in.bad_status = m != NULL && m->type != SCAN_NULL && !in.has_status;
	m = scan_get(&s, "check");
	in.check_failed = m != NULL && m->type != SCAN_NULL &&
	    m->type != SCAN_FALSE;
	/* As doc_is_submission: what rfp-fetch sends with a key. */
	m = scan_get(&s, "idempotent");
	in.keyed_submit = meth != NULL && strcmp(meth, "GET") &&
	    strcmp(meth, "HEAD") && (m == NULL || m->type != SCAN_TRUE);
	in.over = over(ep, in.has_status, in.status);
	m = scan_get(&s, "response_at");
	if (m != NULL && (m->type == SCAN_INTEGER || m->type == SCAN_REAL))
		at = strtod(m->val, NULL);

	k = class_decide(&in, reason, sizeof(reason));
	e[n].key = "class";
	snprintf(e[n++].text, sizeof(e[0].text), "\"%s\"", class_name(k));
	e[n].key = "reason";
	snprintf(e[n++].text, sizeof(e[0].text), "\"%s\"", reason);
	ra = ra_derive(raw, date, at, lineno, &d);
	if (ra != RA_NONE) {
		e[n].key = "retry_after_s";
		if (ra == RA_BAD)
			snprintf(e[n].text, sizeof(e[n].text), "null");
		else if (rec_real(d, e[n].text, sizeof(e[n].text)) == -1)
			return -1;	/* out of memory: its warning is out */
		n++;
	}
	if (ra == RA_CLAMPED) {
		e[n].key = "retry_after_clamped";
		snprintf(e[n++].text, sizeof(e[0].text), "true");
	}
	olen = scan_edit(line, &s, e, n, &buf, &size);
	return rec_out_put(out, buf, olen) == -1 ? -1 : 1;
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
	static const struct rec_hooks hooks = { .line = classify_line };
	const char *config = NULL, *perm = NULL, *trans = NULL;
	int c;

	msg_init(PROG);
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			config = optarg;
			break;
		case 'h':
			opt_help(usage);
		case 'P':
			perm = optarg;
			break;
		case 'T':
			trans = optarg;
			break;
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
	if (rec_loop_with(PROG, STDIN_FILENO, STDOUT_FILENO, &hooks, classify,
	    NULL) == -1)
		msg_diesys(1, "stdio");
	conf_free(&opts.conf);
	opt_fshut();
	return 0;
}
