/* portal: answer requests as the scenario says, and log each one. */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "lib/base/clk.h"
#include "cmd/msg.h"
#include "lib/base/x.h"
#include "limit.h"
#include "portal.h"
#include "scen.h"
#include "tab.h"

#define CONN_MAX	4096		/* concurrent connections */
#define STACK_SIZE	(256 * 1024)	/* per connection thread */
#define NAP_SLICE	0.05		/* real s between stop checks */
#define HOLD_MAX	PORTAL_HOLD_MAX

struct portal {
	const struct scen *scen;
	uint64_t	 seed;
	int		 logfd;
	struct MHD_Daemon *d;
	pthread_mutex_t	 mu;
	/* Guarded by mu. */
	double		 t0;		/* scenario time 0, clk_mono() */
	int		 begun;		/* a request to a route has come */
	struct tab	 paths, keys;
	long		 ntrk;		/* last tracking number */
	long		 inflight;	/* all requests in flight */
	int		 port;		/* listening on */
	const char	*cert, *key;	/* PEM, for https; NULL: http */
	long		 hold_at[HOLD_MAX];	/* --hold-at, rising */
	size_t		 nhold;
	size_t		 hold_i;	/* the next to begin; guarded by mu */
	long		 nreq;		/* requests to routes; guarded by mu */
	int		 holding;	/* guarded by mu */
	atomic_long	 releases;	/* portal_release() calls */
	atomic_int	 listening;
	atomic_int	 stopping;
	atomic_int	 log_failed;
};

/* One request, from its request line to the completed callback. */
struct req {
	double		 t;		/* arrival, epoch seconds */
	double		 t_mono;	/* ... and by clk_mono(), what the
					   limiters judge it by */
	char		*query;		/* raw, or NULL */
	int		 started;	/* headers seen */
	int		 counted;	/* holds a limits: slot until completed */
	int		 open;		/* in the in-flight counts */
	int		 control;	/* /_health or /_status/ */
	const struct route *route;
	struct endpoint	*ep;
	long		 inflight, inflight_total;
	unsigned long long body_bytes;
	long		 conn_seq;	/* nth request on its connection */
	int		 held;		/* by --hold-at */
	int		 stalled;	/* read late, a busy portal's */
	struct lim_pass	 lp;		/* what the limits said; its slots */
};

/* What was decided for one request. */
struct ans {
	enum act	 act;
	const char	*action;	/* the log's "action" */
	const char	*limiter;	/* the log's "limiter": who refused */
	double		 queued_ms;	/* logical ms held by a limiter */
	int		 status;	/* 0: no reply */
	long		 seq, script_index;	/* 0: not applicable */
	int		 submission, committed, duplicate;
	long		 trk;		/* 0: none */
	char		*key;		/* key of the commit */
	char		 ra[256];	/* Retry-After sent */
	int		 has_ra;
	int		 rl;		/* send rate-limit headers */
	int		 refused_now;	/* by a limiter: no delay_ms */
	long		 rl_limit, rl_remaining, rl_reset;
	char		*lh[LHI_N];	/* the limits' headers */
	double		 sleep_s;	/* real s before replying */
	int		 kind_body;	/* 2xx body of the route's kind */
	const char	*allow;		/* for 405 */
	const char	*ctype;		/* control answers */
	char		*cbody;
};

/* Sleep s real seconds, in slices, so a stopping portal is never held up. */
static void
nap(struct portal *p, double s)
{
	double end = clk_mono() + s, left;

	while (!atomic_load(&p->stopping) && (left = end - clk_mono()) > 0)
		clk_sleep(left < NAP_SLICE ? left : NAP_SLICE, NULL);
}

/* The rate's GCRA: whether a slot is free at now (clk_mono). */
static int
gcra_ok(const struct endpoint *ep, double now)
{
	double t = clk_real(1.0 / ep->per_s), tau = (double)ep->burst * t;
	double tat = ep->tat > now ? ep->tat : now;

	return tat - now <= tau + 1e-9;
}

/* Take the slot gcra_ok found free. */
static void
gcra_take(struct endpoint *ep, double now)
{
	double tat = ep->tat > now ? ep->tat : now;

	ep->tat = tat + clk_real(1.0 / ep->per_s);
}

/* Limit, remaining and logical seconds until a slot frees, as of now. */
static void
gcra_state(const struct endpoint *ep, double now, struct ans *a)
{
	double t = clk_real(1.0 / ep->per_s), tau = (double)ep->burst * t;
	double tat = ep->tat > now ? ep->tat : now, wait, rem;

	a->rl = 1;
	a->rl_limit = ep->burst + 1;
	rem = floor((tau - (tat - now)) / t + 1e-9) + 1;
	a->rl_remaining = rem < 0 ? 0 : rem > a->rl_limit ? a->rl_limit :
	    (long)rem;
	wait = (tat - tau - now) / clk_real(1);
	a->rl_reset = wait > 1e-9 ? (long)ceil(wait - 1e-9) : 0;
}

static void
format_ra(const struct retry *r, struct ans *a)
{
	static const char *fmts[] = {
		[RA_IMF] = "%a, %d %b %Y %H:%M:%S GMT",
		[RA_RFC850] = "%A, %d-%b-%y %H:%M:%S GMT",
		[RA_ASCTIME] = "%a %b %e %H:%M:%S %Y"
	};
	struct tm tm;
	time_t t;

	switch (r->kind) {
	case RA_NONE:
		return;
	case RA_SECONDS:
		snprintf(a->ra, sizeof(a->ra), "%ld", r->n);
		break;
	case RA_VERBATIM:
		snprintf(a->ra, sizeof(a->ra), "%s", r->text);
		break;
	default:
		/* Rounded up, so the date is never less than n s away. */
		t = (time_t)ceil(clk_now()) + (time_t)r->n;
		gmtime_r(&t, &tm);
		strftime(a->ra, sizeof(a->ra), fmts[r->kind], &tm);
		break;
	}
	a->has_ra = 1;
}

static int
is_submission_method(const char *m)
{
	return strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 ||
	    strcmp(m, "PATCH") == 0 || strcmp(m, "DELETE") == 0;
}

static int
commits(const struct entry *e)
{
	return e->act == ACT_DROP || e->act == ACT_SLOW ||
	    (e->act == ACT_STATUS && e->status >= 200 && e->status <= 202);
}

static const struct script *
pick_script(const struct portal *p, const struct route *r, const char *path)
{
	uint64_t h;
	long w;
	size_t i;

	if (r->nmix == 0)
		return &r->script;
	h = clk_hash(p->seed, path, strlen(path));
	w = (long)(h % (uint64_t)r->mixtotal);
	for (i = 0; i + 1 < r->nmix; i++) {
		if (w < r->mix[i].weight)
			break;
		w -= r->mix[i].weight;
	}
	return &r->mix[i].script;
}

/* Commit a submission (or find it already committed); mu held. */
static void
submit(struct portal *p, const struct route *r, const char *hkey,
    struct ans *a)
{
	struct slot *s;

	s = hkey != NULL ? tab_get(&p->keys, hkey, 0) : NULL;
	a->duplicate = s != NULL;
	if (s != NULL && r->dedupe) {
		a->trk = s->a;
		a->key = xstrdup(hkey);
		if (a->act == ACT_STATUS)
			a->status = 200;
		return;
	}
	a->committed = 1;
	a->trk = ++p->ntrk;
	a->key = hkey != NULL ? xstrdup(hkey) :
	    xasprintf("auto-%06ld", a->trk);
	if (s == NULL) {
		s = tab_get(&p->keys, a->key, 1);
		s->a = a->trk;
	}
	s->b++;
}

/*
 * The endpoint's rate and limits: 1 with the refusal in a, or 0 with every
 * active limiter counting the request (and a told how long to hold it).
 */
static int
limited(struct req *rq, struct endpoint *ep, const char *path, double now,
    double lt, struct ans *a)
{
	int rate_ok = !ep->has_rate || gcra_ok(ep, now);

	lim_decide(ep, path, lt, !rate_ok, &rq->lp);
	if (rate_ok && rq->lp.by == NULL) {
		if (ep->has_rate)
			gcra_take(ep, now);
		a->queued_ms = rq->lp.hold * 1000;
		a->sleep_s = clk_real(rq->lp.hold);
		return 0;
	}
	a->action = "rate_limited";
	if (!rate_ok) {
		a->limiter = "rate";
		a->status = 429;
		format_ra(&ep->rate_ra, a);
	} else {
		/* Refused in front of the backend: at once, no delay_ms. */
		a->limiter = lim_kind_name(rq->lp.by->kind);
		a->status = rq->lp.by->status;
		format_ra(&rq->lp.by->ra, a);
		a->refused_now = 1;
	}
	return 1;
}

/*
 * Seconds since the scenario's time 0, the start or its first request
 * (epoch: first_request); mu held.
 */
static double
elapsed(struct portal *p, double now)
{
	if (!p->begun && p->scen->epoch_first)
		p->t0 = now;
	p->begun = 1;
	return now > p->t0 ? now - p->t0 : 0;
}

/* Decide a scenario request's answer; mu held. */
static void
decide(struct portal *p, struct req *rq, const char *path,
    const char *method, const char *hkey, struct ans *a)
{
	const struct route *r = rq->route;
	struct endpoint *ep = r->ep;
	const struct script *sc;
	const struct entry *e;
	struct slot *ps;
	/*
	 * Judged as it arrived, as logged: the handler may run some
	 * milliseconds later (its thread, the lock), and a request the
	 * client spaced right was refused by the time it waited here.
	 */
	double now = rq->t_mono, el = elapsed(p, now), lt = el / clk_real(1);
	size_t i;

	ps = tab_get(&p->paths, path, 1);
	a->seq = ++ps->a;
	if (ep->has_outage && el >= clk_real(ep->start_s) &&
	    el < clk_real(ep->end_s)) {
		a->action = "outage";
		a->act = ep->outage.act;
		a->status = ep->outage.act == ACT_STATUS ?
		    ep->outage.status : 0;
		if (a->status != 0)
			format_ra(&ep->outage_ra, a);
	} else if (!limited(rq, ep, path, now, lt, a)) {
		sc = pick_script(p, r, path);
		i = (size_t)ps->b++;
		a->script_index = (long)i + 1;
		e = &sc->e[i < sc->n ? i : sc->n - 1];
		a->act = e->act;
		a->status = e->act == ACT_STATUS || e->act == ACT_SLOW ?
		    e->status : 0;
		a->kind_body = 1;
		a->submission = r->submit && is_submission_method(method);
		if (a->submission && commits(e))
			submit(p, r, hkey, a);
		else if (a->submission)
			a->duplicate = hkey != NULL &&
			    tab_get(&p->keys, hkey, 0) != NULL;
		if (e->act == ACT_STATUS && (a->status == 429 ||
		    a->status == 503))
			format_ra(&r->ra, a);
		a->sleep_s += e->act == ACT_HANG ? clk_real(r->hang_ms / 1000) :
		    e->act == ACT_SLOW ? clk_real(r->slow_ms / 1000) : 0;
		a->action = e->act == ACT_RESET ? "reset" :
		    e->act == ACT_HANG ? "hang" : e->act == ACT_DROP ? "drop" :
		    e->act == ACT_SLOW ? "slow" : "status";
	}
	if (!a->refused_now)
		a->sleep_s += clk_real(r->delay_ms / 1000);
	if (r->rl_headers)
		gcra_state(ep, now, a);
	if (ep->lim_headers)
		lim_headers(ep, path, lt, clk_now(), a->lh);
}

/* Answer /_health and /_status/<key>; mu not held. */
static void
control(struct portal *p, const char *path, const char *method,
    struct ans *a)
{
	struct slot *s;
	json_t *o;
	long trk = 0, commits_n = 0;

	a->action = "status";
	a->act = ACT_STATUS;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		a->status = 405;
		a->allow = "GET, HEAD";
		return;
	}
	a->status = 200;
	if (strcmp(path, "/_health") == 0) {
		a->ctype = "text/plain";
		a->cbody = xstrdup("ok");
		return;
	}
	pthread_mutex_lock(&p->mu);
	if ((s = tab_get(&p->keys, path + strlen("/_status/"), 0)) != NULL) {
		trk = s->a;
		commits_n = s->b;
	}
	pthread_mutex_unlock(&p->mu);
	if (trk == 0) {
		/* A well-formed "no": a 404 would say nothing of the key. */
		o = json_pack("{s:b}", "committed", 0);
	} else {
		a->trk = trk;
		o = json_pack("{s:b, s:o, s:i}", "committed", 1,
		    "tracking_number", json_sprintf("TRK-%06ld", trk),
		    "commits", (int)commits_n);
	}
	a->ctype = "application/json";
	a->cbody = json_dumps(o, JSON_COMPACT);
	json_decref(o);
}

/* A JSON string of request text, whose bytes need not be UTF-8. */
static json_t *
jstr(const char *s)
{
	json_t *v;
	char *t, *q;

	if (s == NULL)
		return json_null();
	if ((v = json_string(s)) != NULL)
		return v;
	t = xstrdup(s);
	for (q = t; *q != '\0'; q++)
		if ((unsigned char)*q >= 0x80)
			*q = '?';
	v = json_string(t);
	free(t);
	return v != NULL ? v : json_null();
}

static void
set_str(json_t *o, const char *k, const char *v)
{
	json_object_set_new(o, k, jstr(v));
}

static void
set_long(json_t *o, const char *k, long v)
{
	json_object_set_new(o, k, v > 0 ? json_integer(v) : json_null());
}

static enum MHD_Result
add_name(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	char *t, *q;

	(void)kind;
	(void)value;
	t = xstrdup(key);
	for (q = t; *q != '\0'; q++)
		*q = (char)tolower((unsigned char)*q);
	json_array_append_new(cls, jstr(t));
	free(t);
	return MHD_YES;
}

/* The names of the request's headers, lower case, in the order sent. */
static json_t *
header_names(struct MHD_Connection *conn)
{
	json_t *a = json_array();

	MHD_get_connection_values(conn, MHD_HEADER_KIND, add_name, a);
	return a;
}

static void	log_json(struct portal *, json_t *);

static void
log_write(struct portal *p, struct req *rq, struct MHD_Connection *conn,
    const char *path, const char *method, const char *hkey,
    const struct ans *a, double t_answer)
{
	static const char *hdrs[] = { "User-Agent", "X-Rfp-Attempt" };
	json_t *o, *h;
	const char *v;
	size_t i;

	if (p->logfd == -1)
		return;
	o = json_object();
	json_object_set_new(o, "t", json_real(round(rq->t * 1e6) / 1e6));
	json_object_set_new(o, "t_answer",
	    json_real(round(t_answer * 1e6) / 1e6));
	set_str(o, "kind", rq->control ? "control" : "request");
	set_str(o, "method", method);
	set_str(o, "path", path);
	set_str(o, "query", rq->query);
	set_str(o, "endpoint", rq->ep != NULL ? rq->ep->name : NULL);
	set_str(o, "key", hkey);
	set_long(o, "status", a->status);
	set_str(o, "action", a->action);
	set_str(o, "limiter", a->limiter);
	json_object_set_new(o, "queued_ms", a->queued_ms > 0 ?
	    json_real(round(a->queued_ms * 1000) / 1000) : json_null());
	set_long(o, "inflight", rq->ep != NULL ? rq->inflight : 0);
	json_object_set_new(o, "inflight_total",
	    json_integer(rq->inflight_total));
	set_long(o, "seq", a->seq);
	set_long(o, "script_index", a->script_index);
	json_object_set_new(o, "committed", json_boolean(a->committed));
	json_object_set_new(o, "duplicate", json_boolean(a->duplicate));
	json_object_set_new(o, "tracking_number", a->trk > 0 ?
	    json_sprintf("TRK-%06ld", a->trk) : json_null());
	set_str(o, "retry_after", a->has_ra ? a->ra : NULL);
	json_object_set_new(o, "body_bytes", json_integer(
	    (json_int_t)rq->body_bytes));
	h = json_object();
	for (i = 0; i < sizeof(hdrs) / sizeof(hdrs[0]); i++)
		if ((v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		    hdrs[i])) != NULL)
			json_object_set_new(h, hdrs[i], jstr(v));
	json_object_set_new(o, "headers", h);
	json_object_set_new(o, "header_names", header_names(conn));
	json_object_set_new(o, "conn_seq", json_integer(rq->conn_seq));
	json_object_set_new(o, "held", json_boolean(rq->held));
	json_object_set_new(o, "stalled", json_boolean(rq->stalled));
	log_json(p, o);
}

/* Write o (stolen) to the log as one line, with a single write(2). */
static void
log_json(struct portal *p, json_t *o)
{
	char *s;
	size_t len, off = 0;
	ssize_t n;

	/* Sixteen digits keep microseconds of an epoch time. */
	s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(16));
	json_decref(o);
	if (s == NULL) {
		errno = ENOMEM;
		goto fail;
	}
	len = strlen(s);
	s = xrealloc(s, len + 1);
	s[len++] = '\n';
	while (off < len) {
		if ((n = write(p->logfd, s + off, len - off)) == -1) {
			if (errno == EINTR)
				continue;
			free(s);
			goto fail;
		}
		off += (size_t)n;
	}
	free(s);
	return;
fail:
	if (atomic_exchange(&p->log_failed, 1) == 0)
		msg_warnsys("write log");
}

static char *
html_page(int status, size_t *len)
{
	char *s;

	if (status >= 200 && status <= 299)
		s = xstrdup("<!DOCTYPE html>\n<html><head><title>Sign in"
		    "</title></head><body><h1>Sign in</h1><p>Your session has "
		    "expired. Please sign in to continue.</p><form "
		    "method=\"post\" action=\"/login\"><input name=\"user\">"
		    "<input name=\"password\" type=\"password\"><button>Sign "
		    "in</button></form></body></html>\n");
	else
		s = xasprintf("<!DOCTYPE html>\n<html><head><title>%d %s"
		    "</title></head><body><h1>%d %s</h1><p>The portal could "
		    "not handle your request.</p></body></html>\n", status,
		    MHD_get_reason_phrase_for((unsigned)status), status,
		    MHD_get_reason_phrase_for((unsigned)status));
	*len = strlen(s);
	return s;
}

static char *
dump(json_t *o, size_t *len)
{
	char *s = json_dumps(o, JSON_COMPACT);

	json_decref(o);
	if (s == NULL)
		msg_die(1, "out of memory");
	*len = strlen(s);
	return s;
}

static struct MHD_Response *
make_response(const struct route *r, const struct ans *a, const char *path)
{
	struct MHD_Response *resp;
	const char *ctype = "application/json", *last;
	char *body;
	size_t len;
	int st = a->status;

	if (a->cbody != NULL) {
		ctype = a->ctype;
		len = strlen(a->cbody);
		body = xstrdup(a->cbody);
	} else if (a->submission && a->trk > 0) {
		body = dump(json_pack("{s:o, s:o}", "tracking_number",
		    json_sprintf("TRK-%06ld", a->trk), "idempotency_key",
		    jstr(a->key)), &len);
	} else if (r != NULL && r->body == BODY_HTML) {
		ctype = "text/html; charset=utf-8";
		body = html_page(st, &len);
	} else if (r != NULL && a->kind_body && st >= 200 && st <= 299) {
		switch (r->blob != NULL ? BODY_PDF : r->body) {
		case BODY_PDF:
		case BODY_TEXT:
			resp = MHD_create_response_from_buffer(r->bloblen,
			    r->blob, MHD_RESPMEM_PERSISTENT);
			if (resp != NULL)
				MHD_add_response_header(resp, "Content-Type",
				    r->body == BODY_PDF ? "application/pdf" :
				    r->body == BODY_JSON ? "application/json" :
				    "text/plain; charset=utf-8");
			return resp;
		case BODY_ENVELOPE:
			body = xstrdup("{\"error\":{\"code\":\"RATE\","
			    "\"message\":\"try later\"}}");
			len = strlen(body);
			break;
		default:
			last = strrchr(path, '/');
			body = dump(json_pack("{s:o, s:b, s:o}", "id",
			    jstr(last != NULL ? last + 1 : path), "ok", 1,
			    "path", jstr(path)), &len);
			break;
		}
	} else {
		body = dump(json_pack("{s:i, s:s}", "status", st, "error",
		    MHD_get_reason_phrase_for((unsigned)st)), &len);
	}
	resp = MHD_create_response_from_buffer(len, body,
	    MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(body);
		return NULL;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	return resp;
}

/* A route's Location, with "{port}" replaced by the port listened on. */
static char *
location(const char *loc, int port)
{
	const char *at = strstr(loc, "{port}");

	if (at == NULL)
		return xstrdup(loc);
	return xasprintf("%.*s%d%s", (int)(at - loc), loc, port, at + 6);
}

static enum MHD_Result
reply(struct MHD_Connection *conn, const struct route *r, const struct ans *a,
    const char *path, int port)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	char buf[64], *loc;
	size_t i;

	if ((resp = make_response(r, a, path)) == NULL)
		return MHD_NO;
	/* MHD drops a "Connection: keep-alive" we add; it sends its own. */
	MHD_set_response_options(resp, MHD_RF_SEND_KEEP_ALIVE_HEADER,
	    MHD_RO_END);
	if (a->has_ra)
		MHD_add_response_header(resp, "Retry-After", a->ra);
	if (a->allow != NULL)
		MHD_add_response_header(resp, "Allow", a->allow);
	if (r != NULL && r->location != NULL && a->status >= 300 &&
	    a->status <= 399) {
		loc = location(r->location, port);
		MHD_add_response_header(resp, "Location", loc);
		free(loc);
	}
	if (a->rl) {
		snprintf(buf, sizeof(buf), "%ld", a->rl_limit);
		MHD_add_response_header(resp, "X-RateLimit-Limit", buf);
		snprintf(buf, sizeof(buf), "%ld", a->rl_remaining);
		MHD_add_response_header(resp, "X-RateLimit-Remaining", buf);
		snprintf(buf, sizeof(buf), "%ld", a->rl_reset);
		MHD_add_response_header(resp, "X-RateLimit-Reset", buf);
		snprintf(buf, sizeof(buf), "limit=%ld, remaining=%ld, "
		    "reset=%ld", a->rl_limit, a->rl_remaining, a->rl_reset);
		MHD_add_response_header(resp, "RateLimit", buf);
	}
	for (i = 0; i < LHI_N; i++)
		if (a->lh[i] != NULL)
			MHD_add_response_header(resp, lim_hdr_names[i],
			    a->lh[i]);
	rc = MHD_queue_response(conn, (unsigned)a->status, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* The headers are in: find the route and count the request in flight. */
static void
arrive(struct portal *p, struct req *rq, const char *path)
{
	const struct scen *s = p->scen;
	size_t i;

	rq->started = 1;
	if (strcmp(path, "/_health") == 0 ||
	    strncmp(path, "/_status/", strlen("/_status/")) == 0)
		rq->control = 1;
	else
		for (i = 0; i < s->nroutes; i++)
			if (fnmatch(s->routes[i].match, path, 0) == 0) {
				rq->route = &s->routes[i];
				rq->ep = rq->route->ep;
				break;
			}
	pthread_mutex_lock(&p->mu);
	if (rq->ep != NULL) {
		rq->inflight = ++rq->ep->inflight;
		rq->ep->arrivals++;
		rq->stalled = rq->route->stall_every > 0 &&
		    rq->route->stall_ms > 0 &&
		    rq->ep->arrivals % rq->route->stall_every == 0;
	}
	rq->inflight_total = ++p->inflight;
	rq->counted = rq->open = 1;
	pthread_mutex_unlock(&p->mu);
	/*
	 * A busy portal (its event loop on another request, the machine's
	 * other work) reads this one late, and its limits judge it by when
	 * it was read: the arrival is stamped again after the stall.
	 */
	if (rq->stalled) {
		nap(p, clk_real(rq->route->stall_ms / 1000));
		rq->t = clk_now();
		rq->t_mono = clk_mono();
	}
}

static int
method_allowed(const struct route *r, const char *method)
{
	size_t i;

	if (r->methods == NULL)
		return 1;
	for (i = 0; i < r->nmethods; i++)
		if (strcmp(r->methods[i], method) == 0)
			return 1;
	return 0;
}

static char *
allow_list(const struct route *r)
{
	size_t i, len = 1;
	char *s;

	for (i = 0; i < r->nmethods; i++)
		len += strlen(r->methods[i]) + 2;
	s = xcalloc(1, len);
	for (i = 0; i < r->nmethods; i++) {
		if (i > 0)
			strcat(s, ", ");
		strcat(s, r->methods[i]);
	}
	return s;
}

/*
 * A request leaves the in-flight counts once its answer is decided and
 * its delay slept, before a byte of it is sent: a client that has had its
 * answer can never find the request still counted.  (A limits: slot is
 * held until the completed callback, as a server's connection limit is.)
 */
static void
close_inflight(struct portal *p, struct req *rq)
{
	pthread_mutex_lock(&p->mu);
	if (rq->open) {
		if (rq->ep != NULL)
			rq->ep->inflight--;
		p->inflight--;
		rq->open = 0;
	}
	pthread_mutex_unlock(&p->mu);
}

/*
 * --hold-at: once hold_at[i] requests to routes have come, every one after
 * waits, unanswered and undecided, until portal_release(); then requests
 * flow until the next hold_at.  A test holds a run at a known point to act
 * on it (kill a stage), sure that it has not ended meanwhile.
 */
static void
hold(struct portal *p, struct req *rq)
{
	long gen;
	json_t *o;

	pthread_mutex_lock(&p->mu);
	p->nreq++;
	if (!p->holding && p->hold_i < p->nhold &&
	    p->nreq > p->hold_at[p->hold_i]) {
		p->holding = 1;
		o = json_pack("{s:f, s:s, s:i}", "t", round(clk_now() * 1e6) /
		    1e6, "kind", "hold", "after", (json_int_t)
		    p->hold_at[p->hold_i++]);
		if (p->logfd != -1)
			log_json(p, o);
		else
			json_decref(o);
	}
	if (!p->holding) {
		pthread_mutex_unlock(&p->mu);
		return;
	}
	gen = atomic_load(&p->releases);
	pthread_mutex_unlock(&p->mu);
	rq->held = 1;
	while (!atomic_load(&p->stopping) && atomic_load(&p->releases) == gen)
		clk_sleep(NAP_SLICE, NULL);
}

static enum MHD_Result
answer(struct portal *p, struct req *rq, struct MHD_Connection *conn,
    const char *path, const char *method)
{
	const struct route *r = rq->route;
	struct ans a;
	const char *hkey;
	char *allow = NULL;
	double t_answer, now, el;
	size_t i;
	enum MHD_Result rc = MHD_NO;

	memset(&a, 0, sizeof(a));
	hkey = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    "Idempotency-Key");
	if (rq->control) {
		control(p, path, method, &a);
	} else if (r == NULL) {
		a.action = "status";
		a.status = 404;
	} else if (!method_allowed(r, method)) {
		a.action = "status";
		a.status = 405;
		a.allow = allow = allow_list(r);
		/* A request to a route: it starts the clock, headers or not. */
		pthread_mutex_lock(&p->mu);
		now = clk_mono();
		el = elapsed(p, now);
		if (r->rl_headers)
			gcra_state(r->ep, now, &a);
		if (r->ep->lim_headers)
			lim_headers(r->ep, path, el / clk_real(1), clk_now(),
			    a.lh);
		pthread_mutex_unlock(&p->mu);
	} else {
		if (p->nhold > 0)
			hold(p, rq);
		pthread_mutex_lock(&p->mu);
		decide(p, rq, path, method, hkey, &a);
		pthread_mutex_unlock(&p->mu);
	}
	t_answer = clk_now();
	log_write(p, rq, conn, path, method, hkey, &a, t_answer);
	if (a.sleep_s > 0)
		nap(p, a.sleep_s);
	close_inflight(p, rq);
	if (!atomic_load(&p->stopping) && a.status != 0 &&
	    (a.act == ACT_STATUS || a.act == ACT_SLOW))
		rc = reply(conn, r, &a, path, p->port);
	free(a.key);
	free(a.cbody);
	for (i = 0; i < LHI_N; i++)
		free(a.lh[i]);
	free(allow);
	return rc;
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	struct portal *p = cls;
	struct req *rq = *con_cls;

	(void)version;
	(void)upload_data;
	if (rq == NULL)
		return MHD_NO;
	if (!rq->started) {
		arrive(p, rq, url);
		return MHD_YES;
	}
	if (*upload_data_size != 0) {
		rq->body_bytes += *upload_data_size;
		*upload_data_size = 0;
		return MHD_YES;
	}
	return answer(p, rq, conn, url, method);
}

/* The request line is in: note the arrival time and the raw query. */
static void *
uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;
	struct req *rq;
	const char *q;
	long *n;

	(void)cls;
	rq = xcalloc(1, sizeof(*rq));
	rq->t = clk_now();
	rq->t_mono = clk_mono();
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci != NULL && (n = ci->socket_context) != NULL)
		rq->conn_seq = ++*n;
	if (uri != NULL && (q = strchr(uri, '?')) != NULL)
		rq->query = xstrdup(q + 1);
	return rq;
}

/* A connection opens or closes: its count of requests. */
static void
conn_notify(void *cls, struct MHD_Connection *conn, void **sctx,
    enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	(void)conn;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		*sctx = xcalloc(1, sizeof(long));
	else {
		free(*sctx);
		*sctx = NULL;
	}
}

static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct portal *p = cls;
	struct req *rq = *con_cls;

	(void)conn;
	(void)toe;
	if (rq == NULL)
		return;
	close_inflight(p, rq);
	if (rq->counted) {
		pthread_mutex_lock(&p->mu);
		lim_release(&rq->lp);
		pthread_mutex_unlock(&p->mu);
	}
	free(rq->query);
	free(rq);
	*con_cls = NULL;
}

/*
 * microhttpd's own diagnostics, in our message format.  Once listening, only
 * those about the mock's resources: clients that reset, time out or send
 * garbage are what a mock portal is for, and scripted resets would say
 * "Application reported internal error" each time.
 */
static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	static const char *keep[] = {
		"thread", "memory", "limit", "accept", "resource"
	};
	struct portal *p = cls;
	char buf[512], low[512];
	size_t n, i;

	msg_vfmt(buf, sizeof(buf), fmt, ap);
	if (atomic_load(&p->listening)) {
		for (i = 0; buf[i] != '\0'; i++)
			low[i] = (char)tolower((unsigned char)buf[i]);
		low[i] = '\0';
		for (i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			if (strstr(low, keep[i]) != NULL)
				break;
		if (i == sizeof(keep) / sizeof(keep[0]))
			return;
	}
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '.'))
		buf[--n] = '\0';
	msg_warn("microhttpd: %s", buf);
}

struct portal *
portal_new(const struct scen *s, uint64_t seed, int logfd)
{
	struct portal *p;

	p = xcalloc(1, sizeof(*p));
	p->scen = s;
	p->seed = seed;
	p->logfd = logfd;
	pthread_mutex_init(&p->mu, NULL);
	atomic_init(&p->listening, 0);
	atomic_init(&p->stopping, 0);
	atomic_init(&p->log_failed, 0);
	atomic_init(&p->releases, 0);
	return p;
}

void
portal_tls(struct portal *p, const char *cert, const char *key)
{
	p->cert = cert;
	p->key = key;
}

int
portal_start(struct portal *p, int port, char *err, size_t errlen)
{
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sin;
	struct MHD_OptionItem tls[] = {
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)p->key },
		{ MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)p->cert },
		{ MHD_OPTION_END, 0, NULL }
	};

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p->t0 = clk_mono();
	p->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL | MHD_USE_ERROR_LOG |
	    (p->cert != NULL ? MHD_USE_TLS : 0),
	    (uint16_t)port, NULL, NULL, handle, p,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, p,
	    MHD_OPTION_ARRAY, p->cert != NULL ? tls : tls + 2,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_seen, p,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, p,
	    MHD_OPTION_NOTIFY_CONNECTION, conn_notify, p,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_MAX,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)1024,
	    MHD_OPTION_THREAD_STACK_SIZE, (size_t)STACK_SIZE,
	    MHD_OPTION_END);
	if (p->d == NULL) {
		snprintf(err, errlen, "listen 127.0.0.1:%d: cannot start the "
		    "server", port);
		return -1;
	}
	info = MHD_get_daemon_info(p->d, MHD_DAEMON_INFO_BIND_PORT);
	if (info == NULL || info->port == 0) {
		snprintf(err, errlen, "listen 127.0.0.1:%d: no bound port",
		    port);
		return -1;
	}
	p->port = info->port;
	atomic_store(&p->listening, 1);
	return info->port;
}

void
portal_hold(struct portal *p, const long *at, size_t n)
{
	memcpy(p->hold_at, at, n * sizeof(*at));
	p->nhold = n;
}

void
portal_release(struct portal *p)
{
	json_t *o;

	pthread_mutex_lock(&p->mu);
	if (p->holding) {
		p->holding = 0;
		atomic_fetch_add(&p->releases, 1);
		o = json_pack("{s:f, s:s}", "t", round(clk_now() * 1e6) / 1e6,
		    "kind", "release");
		if (p->logfd != -1)
			log_json(p, o);
		else
			json_decref(o);
	}
	pthread_mutex_unlock(&p->mu);
}

void
portal_stop(struct portal *p)
{
	atomic_store(&p->stopping, 1);
	if (p->d != NULL)
		MHD_stop_daemon(p->d);
	p->d = NULL;
}

int
portal_log_failed(struct portal *p)
{
	return atomic_load(&p->log_failed);
}

void
portal_free(struct portal *p)
{
	if (p == NULL)
		return;
	tab_free(&p->paths, NULL);
	tab_free(&p->keys, NULL);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
