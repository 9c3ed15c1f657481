/*
 * rfp-report --html: one self-contained page, inline CSS and SVG, no
 * script and nothing fetched (its Content-Security-Policy forbids both),
 * for an operator to open or mail.  Each figure a test may check stands
 * in the DOM with a stable id or a data- attribute: #n-succeeded and the
 * rest carry data-n, each endpoint's section data-requests and the rest,
 * each bar of a timeline data-n, each dead reason #dead-REASON data-n,
 * #reconciliation data-reconciled.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/accounts/summ.h"
#include "lib/base/clk.h"
#include "lib/record/fate.h"
#include "lib/base/x.h"
#include "report/report.h"

/* The plot of a timeline, in SVG user units. */
#define PL	56	/* left margin: the count axis */
#define PW	720	/* plot width */
#define PR	64	/* right margin: the pace axis */
#define PT	12	/* top margin */
#define PH	150	/* plot height */
#define RH	14	/* the retries strip under it */
#define PB	34	/* bottom margin: the time axis */
#define BINS	120	/* at most this many bars */
#define IDS_SHOWN 100	/* pending ids listed */

/* What the operator can do about each dead reason. */
static const char *const todo[FATE_NREASONS] = {
	[FATE_PERMANENT] = "The portal refused these for good (404, 403, "
	    "a bad request). Check their ids and URLs in the manifest, fix "
	    "them, and run the dead letters again with --retry-dead.",
	[FATE_PARSE_FAILED] = "The body came but the site's parser refused "
	    "it. Look at docs/ID and the parser's message; once the parser "
	    "is fixed, run again with --retry-dead.",
	[FATE_EXHAUSTED] = "Every attempt failed with a transient error. If "
	    "the endpoint was down, run again later with --retry-dead; if it "
	    "is only slow, raise the timeout or --max-attempts.",
	[FATE_BUDGET_SPENT] = "The run's retry budget ran out: many "
	    "documents failed at once. See the endpoint's errors above, then "
	    "run again with --retry-dead, or give a larger --budget.",
	[FATE_CIRCUIT_OPEN] = "The endpoint's breaker was open and these "
	    "could not wait for it (on_open: dead, max_open or the "
	    "deadline). Run again with --retry-dead once the portal answers.",
	[FATE_QUOTA] = "The portal's quota is spent: it said to come back "
	    "later than max_retry_after allows. Run again with --retry-dead "
	    "after the time it named (in the detail).",
	[FATE_DEADLINE_CUT] = "Not done by the deadline. Run the same "
	    "command again in the next window (what is filed is skipped), or "
	    "give a later --deadline.",
	[FATE_AMBIGUOUS_SUBMIT] = "A submission may have reached the "
	    "portal. Check at the portal before sending it again; declare "
	    "idempotency_keys: true only for an endpoint that honours "
	    "Idempotency-Key.",
	[FATE_BAD_INPUT] = "A manifest line could not be used (bad JSON, a "
	    "missing id or url, an unsupported scheme). Fix the line the "
	    "detail names."
};

static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;"
    "max-width:880px;color:#222;padding:0 1em}"
    "h1{font-size:1.5em;margin:0}h2{font-size:1.2em;margin-top:1.6em;"
    "border-bottom:1px solid #ccc}h3{font-size:1.05em;margin:1.2em 0 .3em}"
    ".sub{color:#666;margin:.2em 0 1em}"
    "table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;"
    "text-align:left;vertical-align:top}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}"
    ".ok{fill:#2e8b57}.refused{fill:#e69500}.failed{fill:#c0392b}"
    ".retry{fill:#6c5ce7}.brk-open{fill:#c0392b;fill-opacity:.13}"
    ".brk-half{fill:#e69500;fill-opacity:.13}"
    ".pace{fill:none;stroke:#1f6feb;stroke-width:1.5}"
    ".deadline{stroke:#000;stroke-dasharray:4 3}"
    ".axis{stroke:#888}svg text{font-size:11px;fill:#555}"
    ".key span{display:inline-block;margin-right:1em}"
    ".key i{display:inline-block;width:10px;height:10px;"
    "margin-right:4px;vertical-align:-1px}"
    ".bad{color:#c0392b;font-weight:bold}.good{color:#2e8b57}"
    ".todo{background:#f6f6f0;padding:.4em .6em;border-left:3px solid "
    "#e69500}code,.ids{font-family:ui-monospace,monospace;font-size:12px}";

/* s with &, <, >, " and ' as entities: text and attribute values alike. */
static void
esc(FILE *f, const char *s)
{
	for (; s != NULL && *s != '\0'; s++)
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
}

static long
geti(const json_t *o, const char *k)
{
	return (long)json_integer_value(json_object_get(o, k));
}

/* One row of the summary: its cell has id n-KEY and data-n. */
static void
fig(FILE *f, const char *key, const char *what, long n)
{
	fprintf(f, "<tr><th>%s</th><td class=\"n\" id=\"n-%s\" data-n=\"%ld\">"
	    "%ld</td></tr>\n", what, key, n, n);
}

static void
summary(const struct rep *r, FILE *f)
{
	fprintf(f, "<section id=\"summary\">\n<h2>Summary</h2>\n"
	    "<table class=\"figs\">\n");
	fig(f, "succeeded", "succeeded", r->succeeded);
	/* Cuts apart from the dead, as rfp-sink's table has them. */
	fig(f, "dead", "dead-lettered", r->dead - summ_cut(r->all));
	fig(f, "cut", "cut by the deadline", summ_cut(r->all));
	fig(f, "pending", "pending", (long)json_array_size(r->pending));
	if (r->stray > 0)
		fig(f, "stray", "stray lines (no document's)", r->stray);
	fig(f, "requests", "requests", r->reqs);
	fig(f, "retries", "retries", r->retries);
	fig(f, "http429", "429 answers", r->http_429);
	fig(f, "openings", "breaker openings", r->openings);
	if (r->dropped > 0)
		fig(f, "dropped", "requests cut by a stop", r->dropped);
	fprintf(f, "</table>\n%s</section>\n", r->has_log ? "" :
	    "<p>No attempt log (logs/attempts.ndjson): a run directory of an "
	    "older rfpipe. Requests are not counted.</p>\n");
}

static void
reconciliation(const struct rep *r, FILE *f)
{
	const json_t *s = r->summary, *run = json_object_get(s, "run");
	const json_t *tot = json_object_get(s, "totals");
	const json_t *ok = json_object_get(s, "reconciled");
	const char *v = json_is_true(ok) ? "true" : json_is_false(ok) ?
	    "false" : "unknown";
	long cut = summ_tally_cut(run);

	fprintf(f, "<section id=\"reconciliation\" data-reconciled=\"%s\"", v);
	if (json_is_integer(json_object_get(s, "admitted")))
		fprintf(f, " data-admitted=\"%ld\" data-run-succeeded=\"%ld\" "
		    "data-run-dead=\"%ld\"", geti(s, "admitted"), geti(run,
		    "succeeded"), geti(run, "dead"));
	fprintf(f, ">\n<h2>Reconciliation</h2>\n");
	if (json_is_integer(json_object_get(s, "admitted"))) {
		fprintf(f, "<p>The last pipeline admitted %ld = succeeded %ld "
		    "+ dead %ld", geti(s, "admitted"), geti(run, "succeeded"),
		    geti(run, "dead") - cut);
		if (cut > 0)
			fprintf(f, " + cut %ld", cut);
		if (json_is_true(json_object_get(s, "interrupted")))
			fprintf(f, " + pending %ld (it was interrupted)",
			    geti(s, "pending"));
		else if (geti(s, "pending") > 0)
			fprintf(f, " + pending %ld (their records stray lines)",
			    geti(s, "pending"));
		fprintf(f, ": <span class=\"%s\">%s</span>.</p>\n",
		    json_is_true(ok) ? "good" : "bad", json_is_true(ok) ? "ok" :
		    json_is_false(ok) ? "MISMATCH" : "not checked");
	} else
		fprintf(f, "<p>No summary.json with an admitted count: the "
		    "last pipeline's check is unknown.</p>\n");
	fprintf(f, "<p>The run directory holds %ld in results.ndjson and %ld "
	    "in dead.ndjson; %zu ids seen are in neither (pending).",
	    r->succeeded, r->dead, json_array_size(r->pending));
	if (json_is_object(tot) && (geti(tot, "succeeded") != r->succeeded ||
	    geti(tot, "dead") != r->dead))
		fprintf(f, " summary.json counted %ld and %ld when it was "
		    "written: the files changed since.", geti(tot, "succeeded"),
		    geti(tot, "dead"));
	fprintf(f, "</p>\n</section>\n");
}

/* A round bin width, logical seconds, for span over at most BINS bars. */
static double
bin_width(double span)
{
	static const double w[] = { 1, 2, 5, 10, 15, 30, 60, 120, 300, 600,
	    900, 1800, 3600, 7200, 14400, 43200, 86400 };
	size_t i;

	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		if (span / w[i] <= BINS)
			return w[i];
	return ceil(span / BINS / 86400) * 86400;
}

/* A chart's time scale: logical seconds since the log's first line. */
struct axis {
	double	 t0, scale, span, bw;
	long	 nb;
};

static double
lsec(const struct axis *a, double at)
{
	return (at - a->t0) / a->scale;
}

static double
xpos(const struct axis *a, double at)
{
	double s = lsec(a, at);

	return PL + PW * (s < 0 ? 0 : s > a->span ? 1 : s / a->span);
}

/* The shaded spans of an open or half-open breaker. */
static void
breaker_spans(const struct rep_ep *e, const struct axis *a, double end,
    FILE *f)
{
	size_t i, j;
	double x0, x1, to;

	for (i = 0; i < e->nev; i++) {
		if (e->ev[i].kind != 'b' || e->ev[i].out == 0)
			continue;
		for (j = i + 1; j < e->nev && e->ev[j].kind != 'b'; j++)
			;
		to = j < e->nev ? e->ev[j].at : end;
		x0 = xpos(a, e->ev[i].at);
		x1 = xpos(a, to);
		fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"%d\" "
		    "width=\"%.1f\" height=\"%d\" data-from=\"%.3f\" "
		    "data-to=\"%.3f\"><title>breaker %s from %.1f s to %.1f "
		    "s</title></rect>\n", e->ev[i].out == 1 ? "brk-open" :
		    "brk-half", x0, PT, x1 - x0 < 1 ? 1 : x1 - x0, PH,
		    lsec(a, e->ev[i].at), lsec(a, to), e->ev[i].out == 1 ?
		    "open" : "half-open", lsec(a, e->ev[i].at), lsec(a, to));
	}
}

/* The pace's rate as steps, in logical requests a second, on its axis. */
static void
pace_path(const struct rep_ep *e, const struct axis *a, FILE *f)
{
	double max = 0, r, x, y;
	size_t i;
	int pen = 0;

	for (i = 0; i < e->nev; i++)
		if (e->ev[i].kind == 'p' && e->ev[i].rate * a->scale > max)
			max = e->ev[i].rate * a->scale;
	if (max == 0)
		return;
	fprintf(f, "<path class=\"pace\" data-max=\"%.3f\" d=\"", max);
	for (i = 0; i < e->nev; i++) {
		if (e->ev[i].kind != 'p')
			continue;
		r = e->ev[i].rate * a->scale;
		x = xpos(a, e->ev[i].at);
		y = PT + PH - PH * r / max;
		if (r == 0) {	/* let go: no pace until the next start */
			if (pen)
				fprintf(f, "H%.1f", x);
			pen = 0;
		} else if (!pen) {
			fprintf(f, "M%.1f %.1f", x, y);
			pen = 1;
		} else
			fprintf(f, "H%.1fV%.1f", x, y);
	}
	if (pen)
		fprintf(f, "H%d", PL + PW);
	fprintf(f, "\"><title>the pace: at most %.2f requests/s</title>"
	    "</path>\n<text x=\"%d\" y=\"%d\" text-anchor=\"end\">pace "
	    "%.3g/s</text>\n", max, PL + PW + PR - 2, PT + 10, max);
}

static void
timeline(const struct rep *r, const struct rep_ep *e, const struct axis *a,
    FILE *f)
{
	static const char *const cls[OUT_N] = { "ok", "refused", "failed" };
	long (*n)[OUT_N + 1], max = 1, maxr = 1, b, h;
	double x, bwpx, y;
	size_t i;
	int o;

	n = xcalloc((size_t)a->nb, sizeof(*n));
	for (i = 0; i < e->nev; i++) {
		if (e->ev[i].kind != 'q' && e->ev[i].kind != 'y')
			continue;
		b = (long)(lsec(a, e->ev[i].at) / a->bw);
		b = b < 0 ? 0 : b >= a->nb ? a->nb - 1 : b;
		n[b][e->ev[i].kind == 'q' ? e->ev[i].out : OUT_N]++;
	}
	for (b = 0; b < a->nb; b++) {
		if (n[b][0] + n[b][1] + n[b][2] > max)
			max = n[b][0] + n[b][1] + n[b][2];
		if (n[b][OUT_N] > maxr)
			maxr = n[b][OUT_N];
	}
	fprintf(f, "<svg class=\"timeline\" "
	    "xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" "
	    "width=\"100%%\" role=\"img\" data-bin-s=\"%g\" "
	    "data-bins=\"%ld\" aria-label=\"requests a second\">\n",
	    PL + PW + PR, PT + PH + RH + PB, a->bw, a->nb);
	breaker_spans(e, a, r->t1, f);
	bwpx = (double)PW / (double)a->nb;
	for (b = 0; b < a->nb; b++) {
		x = PL + bwpx * (double)b;
		y = PT + PH;
		for (o = 0; o < OUT_N; o++) {
			if (n[b][o] == 0)
				continue;
			h = n[b][o];
			y -= (double)PH * (double)h / (double)max;
			fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" "
			    "width=\"%.1f\" height=\"%.1f\" data-n=\"%ld\">"
			    "<title>%g-%g s: %ld %s</title></rect>\n", cls[o],
			    x, y, bwpx > 2 ? bwpx - 1 : bwpx, (double)PH *
			    (double)h / (double)max, h, a->bw * (double)b,
			    a->bw * (double)(b + 1), h, cls[o]);
		}
		if (n[b][OUT_N] > 0)
			fprintf(f, "<rect class=\"retry\" x=\"%.1f\" "
			    "y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			    "data-n=\"%ld\"><title>%g-%g s: %ld retries "
			    "scheduled</title></rect>\n", x,
			    (double)(PT + PH + 2), bwpx > 2 ? bwpx - 1 : bwpx,
			    (double)(RH - 4) * (double)n[b][OUT_N] /
			    (double)maxr, n[b][OUT_N], a->bw * (double)b,
			    a->bw * (double)(b + 1), n[b][OUT_N]);
	}
	pace_path(e, a, f);
	if (r->deadline > 0 && lsec(a, r->deadline) <= a->span) {
		x = xpos(a, r->deadline);
		fprintf(f, "<line class=\"deadline\" x1=\"%.1f\" y1=\"%d\" "
		    "x2=\"%.1f\" y2=\"%d\" data-at=\"%.3f\"/><text x=\"%.1f\" "
		    "y=\"%d\">deadline</text>\n", x, PT - 2, x, PT + PH + RH,
		    r->deadline, x + 3, PT + 8);
	}
	/* Axes: requests a second on the left, time below. */
	fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" "
	    "y2=\"%d\"/><line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" "
	    "y2=\"%d\"/>\n", PL, PT, PL, PT + PH, PL, PT + PH, PL + PW,
	    PT + PH);
	fprintf(f, "<text x=\"4\" y=\"%d\">%.3g/s</text><text x=\"4\" "
	    "y=\"%d\">0</text>\n", PT + 10, (double)max / a->bw, PT + PH);
	for (i = 0; i <= 4; i++)
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">"
		    "%.4g s</text>\n", PL + PW * (double)i / 4, PT + PH + RH +
		    14, a->span * (double)i / 4);
	fprintf(f, "<text x=\"4\" y=\"%d\">retries</text>\n", PT + PH +
	    RH + 2);
	fprintf(f, "</svg>\n");
	free(n);
}

static void
endpoints(const struct rep *r, FILE *f)
{
	const struct rep_ep *e;
	struct axis a;
	json_t *top, *p;
	size_t i;
	int k = 0;

	a.t0 = r->t0;
	a.scale = r->scale > 0 ? r->scale : 1;
	a.span = (r->t1 - r->t0) / a.scale;
	/* The deadline in view when it falls near the run's end. */
	if (r->deadline > r->t0 && (r->deadline - r->t0) / a.scale <
	    a.span * 1.5 + 1)
		a.span = fmax(a.span, (r->deadline - r->t0) / a.scale);
	a.bw = bin_width(a.span);
	a.nb = (long)ceil(a.span / a.bw);
	if (a.nb < 1)
		a.nb = 1;
	a.span = a.bw * (double)a.nb;
	fprintf(f, "<section id=\"endpoints\">\n<h2>Endpoints</h2>\n");
	if (r->has_log)
		fprintf(f, "<p class=\"key\"><span><i class=\"ok\" style=\""
		    "background:#2e8b57\"></i>answered</span><span><i style=\""
		    "background:#e69500\"></i>refused (429, 503)</span><span>"
		    "<i style=\"background:#c0392b\"></i>failed</span><span>"
		    "<i style=\"background:#6c5ce7\"></i>retries scheduled"
		    "</span><span><i style=\"background:#1f6feb\"></i>the pace"
		    "</span><span><i style=\"background:#f3d4d0\"></i>breaker "
		    "open</span><br>Bars: requests each %g s%s.</p>\n", a.bw,
		    a.scale != 1 ? " (logical seconds: the run's time scale "
		    "was below 1)" : "");
	for (e = r->eps; e != NULL; e = e->next, k++) {
		fprintf(f, "<section class=\"endpoint\" id=\"ep-%d\" "
		    "data-endpoint=\"", k);
		esc(f, e->name);
		fprintf(f, "\" data-requests=\"%ld\" data-ok=\"%ld\" "
		    "data-refused=\"%ld\" data-failed=\"%ld\" "
		    "data-http429=\"%ld\" data-retries=\"%ld\" "
		    "data-openings=\"%ld\" data-succeeded=\"%ld\" "
		    "data-dead=\"%ld\">\n<h3>", e->reqs,
		    e->n[OUT_OK], e->n[OUT_REFUSED], e->n[OUT_FAILED],
		    e->http_429, e->retries, e->openings, summ_count(e->summ,
		    "succeeded"), summ_count(e->summ, "dead"));
		esc(f, e->name);
		fprintf(f, "</h3>\n<p>%ld succeeded, %ld dead; %ld requests "
		    "(%ld answered, %ld refused, %ld failed), %ld retries, "
		    "breaker openings %ld.", summ_count(e->summ,
		    "succeeded"), summ_count(e->summ, "dead"), e->reqs,
		    e->n[OUT_OK], e->n[OUT_REFUSED], e->n[OUT_FAILED],
		    e->retries, e->openings);
		top = rep_top_errors(e);
		json_array_foreach(top, i, p) {
			fprintf(f, "%s<code>", i == 0 ? " Errors: " : ", ");
			esc(f, json_string_value(json_array_get(p, 0)));
			fprintf(f, "</code> %ld", (long)json_integer_value(
			    json_array_get(p, 1)));
		}
		json_decref(top);
		fprintf(f, "</p>\n");
		if (r->has_log)
			timeline(r, e, &a, f);
		fprintf(f, "</section>\n");
	}
	fprintf(f, "</section>\n");
}

static void
dead_letters(const struct rep *r, FILE *f)
{
	const json_t *list, *l;
	long n;
	size_t i;
	int k;

	fprintf(f, "<section id=\"dead\" data-n=\"%ld\">\n<h2>Dead letters"
	    "</h2>\n", r->dead);
	if (r->dead == 0)
		fprintf(f, "<p>None.</p>\n");
	for (k = 0; k < FATE_NREASONS; k++) {
		if ((n = summ_count(r->all, fate_reason(k))) == 0)
			continue;
		fprintf(f, "<div class=\"reason\" id=\"dead-%s\" "
		    "data-n=\"%ld\">\n<h3><code>%s</code>: %ld</h3>\n"
		    "<p>%s.</p>\n<p class=\"todo\">%s</p>\n<table>\n"
		    "<tr><th>id</th><th>endpoint</th><th>detail</th></tr>\n",
		    fate_reason(k), n, fate_reason(k), n, fate_meaning(k),
		    todo[k]);
		list = json_object_get(r->dead_by, fate_reason(k));
		json_array_foreach(list, i, l) {
			fprintf(f, "<tr><td class=\"ids\">");
			esc(f, json_string_value(json_object_get(l, "id")));
			fprintf(f, "</td><td>");
			esc(f, json_string_value(json_object_get(l, "ep")));
			fprintf(f, "</td><td>");
			esc(f, json_string_value(json_object_get(l, "detail")));
			fprintf(f, "</td></tr>\n");
		}
		fprintf(f, "</table>\n");
		if (n > (long)json_array_size(list))
			fprintf(f, "<p>and %ld more: <code>jq -c 'select("
			    ".dead_reason == \"%s\")' dead.ndjson</code></p>\n",
			    n - (long)json_array_size(list), fate_reason(k));
		fprintf(f, "</div>\n");
	}
	fprintf(f, "</section>\n");
}

static void
pending(const struct rep *r, FILE *f)
{
	const json_t *p;
	size_t i, n = json_array_size(r->pending);

	fprintf(f, "<section id=\"pending\" data-n=\"%zu\">\n<h2>Pending</h2>\n"
	    "<p>%s</p>\n", n, n == 0 ? "None: every id seen is filed." :
	    "Seen (in the attempt log or claimed), in neither results.ndjson "
	    "nor dead.ndjson. Running the same command again takes them up.");
	if (n > 0)
		fprintf(f, "<p class=\"ids\">");
	json_array_foreach(r->pending, i, p) {
		if (i == IDS_SHOWN) {
			fprintf(f, " and %zu more", n - i);
			break;
		}
		if (i > 0)
			fprintf(f, " ");
		esc(f, json_string_value(p));
	}
	if (n > 0)
		fprintf(f, "</p>\n");
	fprintf(f, "</section>\n");
}

void
rep_html(const struct rep *r, FILE *f)
{
	char when[64], from[64];

	clk_iso(clk_now(), when, sizeof(when));
	clk_iso(r->t0, from, sizeof(from));
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
	    "<meta charset=\"utf-8\">\n"
	    "<meta http-equiv=\"Content-Security-Policy\" content=\""
	    "default-src 'none'; style-src 'unsafe-inline'\">\n"
	    "<meta name=\"viewport\" content=\"width=device-width, "
	    "initial-scale=1\">\n<title>rfpipe report: ");
	esc(f, r->dir);
	fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n"
	    "<h1>rfpipe report</h1>\n<p class=\"sub\"><code>", css);
	esc(f, r->dir);
	fprintf(f, "</code>, written %s", when);
	if (r->has_log)
		fprintf(f, "; the log begins %s", from);
	if (r->deadline > 0) {
		clk_iso(r->deadline, from, sizeof(from));
		fprintf(f, "; the deadline %s", from);
	}
	if (r->scale != 1)
		fprintf(f, "; time scale %g", r->scale);
	fprintf(f, "</p>\n");
	summary(r, f);
	reconciliation(r, f);
	endpoints(r, f);
	dead_letters(r, f);
	pending(r, f);
	fprintf(f, "</body>\n</html>\n");
}
