/*
 * rfp-report's text: the run directory's summary, its pending ids and
 * each endpoint's top errors, for a terminal or a mail.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "lib/accounts/summ.h"
#include "lib/record/fate.h"
#include "lib/record/rec.h"
#include "report/report.h"

#define PENDING_SHOWN	50	/* ids listed; the rest are counted */
#define TOP_SHOWN	3	/* errors listed an endpoint */

/*
 * s with each byte of a control character (rec_tty_bad) written \xNN: an
 * id or an endpoint name from a manifest reaches a terminal or a mail,
 * and must not forge a line of the report or drive the terminal.  Into
 * buf, len bytes, cut to fit.
 */
static const char *
shown(const char *s, char *buf, size_t len)
{
	size_t n = 0, k = 0;

	for (; s != NULL && *s != '\0' && n + 5 < len; s++) {
		if (k > 0 || (k = rec_tty_bad(s)) > 0) {
			n += (size_t)snprintf(buf + n, len - n, "\\x%02x",
			    (unsigned char)*s);
			k--;
		} else
			buf[n++] = *s;
	}
	buf[n] = '\0';
	return buf;
}

static long
geti(const json_t *o, const char *k)
{
	return (long)json_integer_value(json_object_get(o, k));
}

/* The last pipeline's check, as rfp-sink wrote it in summary.json. */
static void
last_check(const json_t *s, FILE *f)
{
	const json_t *run = json_object_get(s, "run");
	const json_t *ok = json_object_get(s, "reconciled");
	long cut = summ_tally_cut(run);

	if (!json_is_integer(json_object_get(s, "admitted")))
		return;
	/* Cuts apart from the dead, as rfp-sink's table has them. */
	fprintf(f, "  last run: admitted %ld = succeeded %ld + dead %ld",
	    geti(s, "admitted"), geti(run, "succeeded"), geti(run, "dead") -
	    cut);
	if (cut > 0)
		fprintf(f, " + cut %ld", cut);
	if (json_is_true(json_object_get(s, "interrupted")) ||
	    geti(s, "pending") > 0)
		fprintf(f, " + pending %ld", geti(s, "pending"));
	fprintf(f, ": %s\n", json_is_true(ok) ? "ok" : json_is_false(ok) ?
	    "MISMATCH" : "not checked");
}

void
rep_text(const struct rep *r, FILE *f)
{
	const struct rep_ep *e;
	json_t *top, *p;
	char b[1024];
	size_t i;
	int k;

	fprintf(f, "rfp-report: %s\n", shown(r->dir, b, sizeof(b)));
	fprintf(f, "  succeeded       %7ld\n", r->succeeded);
	fprintf(f, "  dead-lettered   %7ld\n", r->dead - summ_cut(r->all));
	for (k = 0; k < FATE_NREASONS; k++)
		if (k != FATE_DEADLINE_CUT && summ_count(r->all,
		    fate_reason(k)) > 0)
			fprintf(f, "    %-16s%5ld\n", fate_reason(k),
			    summ_count(r->all, fate_reason(k)));
	fprintf(f, "  cut (deadline)  %7ld\n", summ_cut(r->all));
	fprintf(f, "  pending         %7zu\n", json_array_size(r->pending));
	if (r->stray > 0)
		fprintf(f, "  stray lines     %7ld  lines between the stages with "
		    "no id, in dead.ndjson: no document's fate\n", r->stray);
	if (r->has_log)
		fprintf(f, "  requests %ld, retries %ld, 429s %ld, breaker "
		    "openings %ld\n", r->reqs, r->retries, r->http_429,
		    r->openings);
	else
		fprintf(f, "  no attempt log\n");
	last_check(r->summary, f);
	if (r->eps != NULL)
		fprintf(f, "  %-24s %6s %6s %6s %8s %6s  %s\n", "endpoint",
		    "ok", "dead", "cut", "requests", "429s", "top errors");
	for (e = r->eps; e != NULL; e = e->next) {
		fprintf(f, "  %-24.24s %6ld %6ld %6ld %8ld %6ld ",
		    shown(e->name, b, sizeof(b)),
		    summ_count(e->summ, "succeeded"), summ_count(e->summ,
		    "dead") - summ_cut(e->summ), summ_cut(e->summ), e->reqs,
		    e->http_429);
		top = rep_top_errors(e);
		json_array_foreach(top, i, p) {
			if (i == TOP_SHOWN)
				break;
			fprintf(f, "%s%s %ld", i ? ", " : " ",
			    shown(json_string_value(json_array_get(p, 0)), b,
			    sizeof(b)), (long)
			    json_integer_value(json_array_get(p, 1)));
		}
		fprintf(f, "%s\n", json_array_size(top) == 0 ? " -" : "");
		json_decref(top);
	}
	if (json_array_size(r->pending) == 0)
		return;
	fprintf(f, "pending ids:\n");
	json_array_foreach(r->pending, i, p) {
		if (i == PENDING_SHOWN) {
			fprintf(f, "  ... and %zu more\n",
			    json_array_size(r->pending) - i);
			break;
		}
		fprintf(f, "  %s\n", shown(json_string_value(p), b,
		    sizeof(b)));
	}
}
