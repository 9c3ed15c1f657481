/*
 * rfp-report --metrics: the counts in the Prometheus text exposition
 * format (version 0.0.4), for node_exporter's textfile collector.  Every
 * sample carries the run directory as a label, so one collector
 * directory may hold the files of several.
 */
#include <stdio.h>

#include <jansson.h>

#include "lib/accounts/summ.h"
#include "lib/record/fate.h"
#include "report/report.h"

/* name="v", after a comma unless first, v escaped: \\, \" and \n. */
static void
label(FILE *f, int first, const char *name, const char *v)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	for (; *v != '\0'; v++)
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	fputc('"', f);
}

static void
head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{run_dir="...",k="v",k2="v2"} n; k, k2 NULL: fewer labels. */
static void
sample(FILE *f, const struct rep *r, const char *name, const char *k,
    const char *v, const char *k2, const char *v2, double n)
{
	fprintf(f, "%s{", name);
	label(f, 1, "run_dir", r->dir);
	if (k != NULL)
		label(f, 0, k, v);
	if (k2 != NULL)
		label(f, 0, k2, v2);
	fprintf(f, "} %.15g\n", n);
}

void
rep_prom(const struct rep *r, FILE *f)
{
	static const char *const outs[OUT_N] = { "ok", "refused", "failed" };
	const struct rep_ep *e;
	const json_t *ok;
	int i;

	head(f, "rfpipe_documents", "gauge", "Documents in the run "
	    "directory: succeeded, dead, or pending (admitted, not filed).");
	sample(f, r, "rfpipe_documents", "state", "succeeded", NULL, NULL,
	    (double)r->succeeded);
	sample(f, r, "rfpipe_documents", "state", "dead", NULL, NULL,
	    (double)r->dead);
	sample(f, r, "rfpipe_documents", "state", "pending", NULL, NULL,
	    (double)json_array_size(r->pending));
	head(f, "rfpipe_stray_lines", "gauge", "Letters of lines between the "
	    "stages with no id: evidence, no document's fate.");
	sample(f, r, "rfpipe_stray_lines", NULL, NULL, NULL, NULL,
	    (double)r->stray);
	head(f, "rfpipe_dead_letters", "gauge", "Dead letters by reason.");
	for (i = 0; i < FATE_NREASONS; i++)
		sample(f, r, "rfpipe_dead_letters", "reason", fate_reason(i),
		    NULL, NULL, (double)summ_count(r->all, fate_reason(i)));
	head(f, "rfpipe_endpoint_documents", "gauge", "Documents by "
	    "endpoint and fate.");
	for (e = r->eps; e != NULL; e = e->next) {
		sample(f, r, "rfpipe_endpoint_documents", "endpoint", e->name,
		    "state", "succeeded", (double)summ_count(e->summ,
		    "succeeded"));
		sample(f, r, "rfpipe_endpoint_documents", "endpoint", e->name,
		    "state", "dead", (double)summ_count(e->summ, "dead"));
	}
	if (!r->has_log)
		goto check;
	head(f, "rfpipe_requests_total", "counter", "Requests by endpoint "
	    "and outcome: ok (1xx-3xx), refused (429, 503), failed.");
	for (e = r->eps; e != NULL; e = e->next)
		for (i = 0; i < OUT_N; i++)
			sample(f, r, "rfpipe_requests_total", "endpoint",
			    e->name, "outcome", outs[i], (double)e->n[i]);
	head(f, "rfpipe_http_429_total", "counter", "429 answers by "
	    "endpoint.");
	for (e = r->eps; e != NULL; e = e->next)
		sample(f, r, "rfpipe_http_429_total", "endpoint", e->name, NULL,
		    NULL, (double)e->http_429);
	head(f, "rfpipe_retries_total", "counter", "Retries scheduled by "
	    "endpoint.");
	for (e = r->eps; e != NULL; e = e->next)
		sample(f, r, "rfpipe_retries_total", "endpoint", e->name, NULL,
		    NULL, (double)e->retries);
	head(f, "rfpipe_breaker_openings_total", "counter", "Times each "
	    "endpoint's breaker opened.");
	for (e = r->eps; e != NULL; e = e->next)
		sample(f, r, "rfpipe_breaker_openings_total", "endpoint",
		    e->name, NULL, NULL, (double)e->openings);
	head(f, "rfpipe_last_request_timestamp_seconds", "gauge", "When the "
	    "attempt log's last line was written.");
	sample(f, r, "rfpipe_last_request_timestamp_seconds", NULL, NULL, NULL,
	    NULL, r->t1);
check:
	ok = json_object_get(r->summary, "reconciled");
	if (!json_is_boolean(ok))
		return;
	head(f, "rfpipe_reconciled", "gauge", "1 when the last pipeline's "
	    "counts reconciled with what it admitted.");
	sample(f, r, "rfpipe_reconciled", NULL, NULL, NULL, NULL,
	    json_is_true(ok));
}
