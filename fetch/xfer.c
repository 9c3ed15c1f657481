/* xfer: one HTTP attempt over libcurl, and the fields it adds. */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "lib/base/clk.h"
#include "lib/record/doc.h"
#include "lib/record/field.h"
#include "lib/record/hdr.h"
#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/base/x.h"
#include "fetch/fetch.h"

/*
 * libcurl's words for an answer whose header line is over its 100 KB
 * (CURL_MAX_HTTP_HEADER): "Out of memory" before 8.6, with nothing in its
 * error buffer to tell it from the rare true case; CURLE_TOO_LARGE since.
 */
#define OOM_DETAIL	"a response header over libcurl's 100 KB, or out of memory"

static const char *
curl_why(CURLcode cc)
{
	if (cc == CURLE_OUT_OF_MEMORY)
		return OOM_DETAIL;
#if LIBCURL_VERSION_NUM >= 0x080600
	if (cc == CURLE_TOO_LARGE)
		return "a response header over libcurl's 100 KB, or a value "
		    "too large for it";
#endif
	return curl_easy_strerror(cc);
}

static const char *attempt_fields[] = { "status", "error", "error_detail",
	"retry_after", "retry_after_s", "retry_after_clamped", "date",
	"ratelimit", "sent", "elapsed_ms", "response_at", "body_path",
	"bytes", "sha256", "content_type", "check", "class", "reason", "fate",
	"not_before", "delay_s", "dead_reason", "dead_detail", "replayed",
	"reply", "parsed", "parsed_bytes", "parsed_sha256", "parse_error",
	"parse_detail", "line", "stage", REC_LINE_KEY, NULL };

/*
 * Handles and digest contexts of finished transfers, kept for the next
 * (curl_easy_reset keeps a handle's caches; the digest is looked up once):
 * a fast run otherwise spends a tenth of its time making and freeing them.
 */
static CURL *easy_pool[XFER_POOL];
static EVP_MD_CTX *sha_pool[XFER_POOL];
static int neasy, nsha;
static const struct fopts *fo;	/* set by xfer_init */
static EVP_MD *sha256;

void
xfer_init(const struct fopts *o)
{
	fo = o;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The record's keys looked up among the attempt's (sorted once), not
 * each of those deleted from it: a record as admitted has four or five
 * keys, and 33 deletions a document, twice, were 2 % of a fast run.
 */
void
xfer_clear(json_t *rec)
{
	static const char *sorted[sizeof(attempt_fields) /
	    sizeof(attempt_fields[0]) - 1];
	static size_t n;
	const char *key;
	json_t *v;
	void *tmp;

	if (n == 0) {
		for (; attempt_fields[n] != NULL; n++)
			sorted[n] = attempt_fields[n];
		qsort(sorted, n, sizeof(sorted[0]), by_name);
	}
	json_object_foreach_safe(rec, tmp, key, v)
		if (bsearch(&key, sorted, n, sizeof(sorted[0]), by_name))
			json_object_del(rec, key);
}

static size_t
on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nmemb;

	if (x->confirm) {
		/* A status answer: small, held whole. */
		if (x->mlen + len > BODY_MEM) {
			x->too_large = 1;
			return 0;
		}
		x->mem = xrealloc(x->mem, x->mlen + len + 1);
		memcpy(x->mem + x->mlen, p, len);
		x->mlen += len;
		return len;
	}
	if (x->bytes + (long)len > fo->conf.max_body) {
		x->too_large = 1;
		return 0;	/* abort: CURLE_WRITE_ERROR */
	}
	x->bytes += (long)len;
	EVP_DigestUpdate(x->sha, p, len);
	if (x->bid == NULL || len == 0)
		return len;	/* no run directory: nothing kept */
	/* Small bodies are held, for the body thread to file. */
	if (x->mem != NULL || x->bytes == (long)len) {
		if (x->mlen + len <= BODY_MEM) {
			if (x->mlen + len > x->mcap) {
				x->mcap = x->mcap ? 2 * x->mcap : 4096;
				while (x->mcap < x->mlen + len)
					x->mcap *= 2;
				x->mem = xrealloc(x->mem, x->mcap);
			}
			memcpy(x->mem + x->mlen, p, len);
			x->mlen += len;
			return len;
		}
		/* Larger: to the partial file from here on, held part first. */
		if ((x->fd == -1 && (x->fd = bodies_open_part(x)) == -1) ||
		    rec_write_all(x->fd, x->mem, x->mlen) == -1) {
			x->wr_err = errno;	/* a local failure */
			return 0;	/* abort: CURLE_WRITE_ERROR */
		}
		free(x->mem);
		x->mem = NULL;
		x->mlen = x->mcap = 0;
	}
	/* Straight to the file: curl hands over its buffer, often all. */
	if (x->fd != -1 && rec_write_all(x->fd, p, len) == -1) {
		x->wr_err = errno;
		return 0;	/* abort: CURLE_WRITE_ERROR */
	}
	return len;
}

/* Copy a header value without surrounding space and CR/LF. */
static char *
hval(const char *p, size_t n)
{
	while (n > 0 && (*p == ' ' || *p == '\t'))
		p++, n--;
	while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == '\n' ||
	    p[n - 1] == ' '))
		n--;
	if (n > 512)
		n = 512;
	return strndup(p, n);
}

static void
keep(char **slot, const char *p, size_t n)
{
	free(*slot);
	*slot = hval(p, n);
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n, k;
	char name[64], *v;

	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		xfer_off_wire(x);
		/* A new response (after a redirect): forget the last one's. */
		free(x->retry_after);
		free(x->date);
		free(x->ctype);
		x->retry_after = x->date = x->ctype = NULL;
		hdr_ratelimit_init(&x->rl);
		x->rl_seen = 0;
		return len;
	}
	k = 0;
	while (k < len && p[k] != ':')
		k++;
	if (k == len || k >= sizeof(name))
		return len;
	memcpy(name, p, k);
	name[k] = '\0';
	if (strcasecmp(name, "Retry-After") == 0)
		keep(&x->retry_after, p + k + 1, len - k - 1);
	else if (strcasecmp(name, "Date") == 0)
		keep(&x->date, p + k + 1, len - k - 1);
	else if (strcasecmp(name, "Content-Type") == 0)
		keep(&x->ctype, p + k + 1, len - k - 1);
	else if ((v = hval(p + k + 1, len - k - 1)) != NULL) {
		if (hdr_ratelimit_feed(&x->rl, name, v, clk_now()))
			x->rl_seen = 1;
		free(v);
	}
	return len;
}

/* Expand ${NAME} from the environment; NULL (and the name) when unset. */
static char *
expand(const char *v, char *missing, size_t mlen)
{
	size_t cap = strlen(v) + 1, n = 0, k;
	char *out = xmalloc(cap), name[128];
	const char *p = v, *e, *val;

	while (*p != '\0') {
		if (p[0] == '$' && p[1] == '{' && (e = strchr(p, '}')) != NULL &&
		    (k = (size_t)(e - p - 2)) < sizeof(name) && k > 0) {
			memcpy(name, p + 2, k);
			name[k] = '\0';
			if ((val = getenv(name)) == NULL) {
				snprintf(missing, mlen, "%s", name);
				free(out);
				return NULL;
			}
			cap += strlen(val);
			out = xrealloc(out, cap);
			memcpy(out + n, val, strlen(val));
			n += strlen(val);
			p = e + 1;
			continue;
		}
		out[n++] = *p++;
	}
	out[n] = '\0';
	return out;
}

/*
 * A secret: a credential header, or a value with ${NAME} in it (an API
 * key from the environment).  Secrets go only where hdr_may_carry says.
 */
static int
secret(const char *name, const char *value)
{
	return hdr_is_credential(name) || strstr(value, "${") != NULL;
}

/*
 * The record's headers to x->url, expanded; secrets only when the URL may
 * have them (the record's own URL always may).  *ctype: one is
 * Content-Type.
 */
/* Header k's value v, expanded and checked; NULL with err set. */
static char *
header_value(const char *k, const json_t *v, char *err, size_t errlen)
{
	const char *why;
	char missing[128], *val;

	if ((val = expand(json_string_value(v), missing,
	    sizeof(missing))) == NULL) {
		snprintf(err, errlen, "field \"headers\": \"%s\": "
		    "environment variable \"%s\" is not set", k, missing);
		return NULL;
	}
	if ((why = hdr_request_check(k, val, strlen(val))) != NULL) {
		free(val);
		snprintf(err, errlen, "field \"headers\": \"%s\": %s "
		    "after expansion", k, why);
		return NULL;
	}
	return val;
}

static int
record_headers(struct xfer *x, const json_t *rec, int *ctype, char *err,
    size_t errlen)
{
	json_t *h = json_object_get(rec, "headers"), *v;
	const char *k;
	char *val, *line;
	int carry;

	carry = strcmp(x->url, rec_str(rec, "url")) == 0 ||
	    hdr_may_carry(rec_str(rec, "url"), x->url, fo->conf.trusted,
	    fo->conf.ntrusted);
	json_object_foreach(h, k, v) {
		if (!carry && secret(k, json_string_value(v)))
			continue;
		if ((val = header_value(k, v, err, errlen)) == NULL)
			return -1;
		if (strcasecmp(k, "Content-Type") == 0)
			*ctype = 1;
		line = xasprintf("%s: %s", k, val);
		x->hdrs = curl_slist_append(x->hdrs, line);
		free(line);
		free(val);
	}
	return 0;
}

int
xfer_admissible(const json_t *rec, char *err, size_t errlen)
{
	json_t *h = json_object_get(rec, "headers"), *v;
	const char *k, *bf = rec_str(rec, "body_file");
	char *val;
	long size;
	int fd;

	/* To the record's own URL every header goes: each is expanded. */
	json_object_foreach(h, k, v) {
		if ((val = header_value(k, v, err, errlen)) == NULL)
			return -1;
		free(val);
	}
	if (bf != NULL && doc_sends_body(rec_str(rec, "method"))) {
		if ((fd = bodies_open(bf, bodies_dir(rec), fo->conf.max_body,
		    &size, err, errlen)) == -1)
			return -1;
		close(fd);
	}
	return 0;
}

/* Request headers: the record's, plus attempt and idempotency. */
static int
headers(struct xfer *x, const json_t *rec, long attempt, char *err,
    size_t errlen)
{
	char *line, *key;
	int ctype = 0;

	if (record_headers(x, rec, &ctype, err, errlen) == -1)
		return -1;
	line = xasprintf("X-Rfp-Attempt: %ld", attempt);
	x->hdrs = curl_slist_append(x->hdrs, line);
	free(line);
	if (doc_is_submission(rec)) {
		key = doc_idem_key(rec);
		line = xasprintf("Idempotency-Key: %s", key);
		x->hdrs = curl_slist_append(x->hdrs, line);
		free(line);
		free(key);
	}
	if (!ctype && (x->body != NULL || x->body_fd != -1) &&
	    !json_is_string(json_object_get(rec, "body")))
		x->hdrs = curl_slist_append(x->hdrs,
		    "Content-Type: application/json");
	x->hdrs = curl_slist_append(x->hdrs, "Expect:");
	return 0;
}

static int
load_body(struct xfer *x, const json_t *rec, char *err, size_t errlen)
{
	json_t *b = json_object_get(rec, "body");
	const char *bf = rec_str(rec, "body_file");
	long size;

	/*
	 * doc_check refused it at admission; never a body on a GET, which
	 * libcurl would send as a POST with none of a submission's guards.
	 */
	if ((b != NULL || bf != NULL) &&
	    !doc_sends_body(rec_str(rec, "method"))) {
		snprintf(err, errlen, "field \"%s\": given for a method that "
		    "sends no body", b != NULL ? "body" : "body_file");
		return -1;
	}
	if (json_is_string(b)) {
		x->body_len = json_string_length(b);
		x->body = xmalloc(x->body_len + 1);
		memcpy(x->body, json_string_value(b), x->body_len);
	} else if (b != NULL) {
		x->body = json_dumps(b, JSON_COMPACT);
		x->body_len = strlen(x->body);
	} else if (bf != NULL) {
		/* Streamed by on_read, never held (fetch/bodies.c). */
		if ((x->body_fd = bodies_open(bf, bodies_dir(rec),
		    fo->conf.max_body, &size, err, errlen)) == -1)
			return -1;
		x->body_len = (size_t)size;
	}
	return 0;
}

static size_t
on_read(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	ssize_t n;

	while ((n = pread(x->body_fd, p, size * nmemb, x->body_off)) == -1)
		if (errno != EINTR)
			return CURL_READFUNC_ABORT;
	x->body_off += n;
	return (size_t)n;
}

/* libcurl rewinds a body it must send again (a redirect, say). */
static int
on_seek(void *arg, curl_off_t off, int origin)
{
	struct xfer *x = arg;

	if (origin != SEEK_SET)
		return CURL_SEEKFUNC_CANTSEEK;
	x->body_off = (long)off;
	return CURL_SEEKFUNC_OK;
}

/*
 * The request is about to be written, its connection made: its send.
 * Written a second time on one hop, it is libcurl sending it again, at
 * once and unpaced, on a fresh connection after a reused one closed with
 * no answer (lib/transfer.c, Curl_retry_request): stopped, it is the
 * reset it was, retried through the pace and the backoff.  A strict
 * limiter at a told rate refused 35 of 100 such resends.
 */
static int
on_prereq(void *arg, char *rip, char *lip, int rport, int lport)
{
	struct xfer *x = arg;

	(void)rip;
	(void)lip;
	(void)rport;
	(void)lport;
	if (x->writes++ > 0) {
		x->resent = 1;
		return CURL_PREREQFUNC_ABORT;
	}
	if (x->t_wrote == 0)
		x->t_wrote = clk_now();
	if (!x->on_wire) {
		x->inflight = gate_wire_on(x->job->ep, x->t_wrote,
		    x->job->granted);
		x->on_wire = 1;
	}
	return CURL_PREREQFUNC_OK;
}

/*
 * The portal has answered x (its status line is in), or x ended without
 * an answer: it is no longer on the portal's count of requests in flight.
 * That count is what a concurrency cap refuses on.  Counted from the
 * start of a transfer to the turn of the loop that reads its end, it was
 * one or two over the portal's whenever answers waited to be read: the
 * most in flight at a success went to 27 against a cap of 25, the cap's
 * refusals passed for the pace's, and the pace was cut 34 times.
 */
void
xfer_off_wire(struct xfer *x)
{
	if (x->on_wire) {
		gate_wire_off(x->job->ep);
		x->on_wire = 0;
	}
}

/* x's timeout from now: the configured one, or the deadline if sooner. */
static void
timeout_set(struct xfer *x)
{
	double tmo = fo->conf.timeout, left;

	if (fo->deadline > 0 && (left = fo->deadline - clk_now()) <
	    clk_real(tmo)) {
		x->capped_at = fo->deadline;
		tmo = left > 0.001 ? left : 0.001;
	} else
		tmo = clk_real(tmo);
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)(tmo * 1000) + 1);
	x->until = clk_mono() + tmo;
}

/*
 * A handle for x->url with what every request of rfp-fetch has: http and
 * https only, no redirect followed by libcurl, the timeouts (the deadline
 * caps the total), TLS settings, User-Agent, the callbacks.
 */
static void
easy_setup(struct xfer *x)
{
	if (sha256 == NULL && (sha256 = EVP_MD_fetch(NULL, "SHA256",
	    NULL)) == NULL)
		msg_die(1, "EVP_MD_fetch SHA256 failed");
	x->sha = nsha > 0 ? sha_pool[--nsha] : EVP_MD_CTX_new();
	x->easy = neasy > 0 ? easy_pool[--neasy] : curl_easy_init();
	if (x->easy == NULL || x->sha == NULL ||
	    !EVP_DigestInit_ex(x->sha, sha256, NULL))
		msg_die(1, "out of memory");
	curl_easy_setopt(x->easy, CURLOPT_URL, x->url);
	curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	/*
	 * Redirects are followed by xfer_redirect, not by libcurl, which
	 * would send every custom header (an API key from ${NAME}) to
	 * whatever host the Location names.
	 */
	curl_easy_setopt(x->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)(clk_real(fo->conf.connect_timeout) * 1000));
	timeout_set(x);
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_USERAGENT, "rfpipe/" RFP_VERSION);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	curl_easy_setopt(x->easy, CURLOPT_PREREQFUNCTION, on_prereq);
	curl_easy_setopt(x->easy, CURLOPT_PREREQDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYPEER,
	    fo->insecure ? 0L : 1L);
	curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYHOST,
	    fo->insecure ? 0L : 2L);
	if (fo->conf.ca_file != NULL)
		curl_easy_setopt(x->easy, CURLOPT_CAINFO, fo->conf.ca_file);
}

struct xfer *
xfer_confirm_start(struct job *job, const char *url)
{
	struct xfer *x = xcalloc(1, sizeof(*x));
	char err[300];
	int ctype = 0;

	x->job = job;
	x->slot = -1;
	x->fd = -1;
	x->body_fd = -1;
	x->confirm = 1;
	x->url = xstrdup(url);
	hdr_ratelimit_init(&x->rl);
	easy_setup(x);
	/*
	 * On a connection of its own: the submission it asks about may have
	 * been dropped with its connection, and a pooled one the portal has
	 * closed fails the question ("Failed sending data to the peer").
	 */
	curl_easy_setopt(x->easy, CURLOPT_FRESH_CONNECT, 1L);
	/*
	 * The record's own headers (a portal may want its API key), as to
	 * any other URL: secrets by origin.  No attempt, no key: nothing of
	 * the submission is sent.  They passed when the submission was sent.
	 */
	if (record_headers(x, job->rec, &ctype, err, sizeof(err)) == -1) {
		curl_slist_free_all(x->hdrs);
		x->hdrs = NULL;
	}
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->hdrs);
	x->t0 = x->t_sent = clk_now();
	return x;
}

int
xfer_confirmed(const struct xfer *x, json_t **reply, char *why, size_t len)
{
	json_t *doc, *c;
	long st = 0;

	*reply = NULL;
	if (x->cc != CURLE_OK) {
		snprintf(why, len, "status_url: %s", x->too_large ?
		    "answer too large" : curl_easy_strerror(x->cc));
		return -1;
	}
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &st);
	if (st != 200) {
		snprintf(why, len, "status_url answered %ld", st);
		return -1;
	}
	doc = json_loadb(x->mem ? x->mem : "", x->mlen, 0, NULL);
	c = json_object_get(doc, "committed");
	if (!json_is_boolean(c)) {
		snprintf(why, len, "status_url answered 200 without a boolean "
		    "\"committed\"");
		json_decref(doc);
		return -1;
	}
	if (json_is_false(c)) {
		json_decref(doc);
		return 0;
	}
	*reply = doc;
	return 1;
}

struct xfer *
xfer_start(struct job *job, char *err, size_t errlen)
{
	json_t *rec = job->rec;
	const char *method = rec_str(rec, "method");
	struct xfer *x = xcalloc(1, sizeof(*x));
	long attempt = rec_int(rec, "attempt", 0);
	const char *id = rec_str(rec, "id");

	/*
	 * Admission and the stages keep attempt within 1 to
	 * FIELD_ATTEMPT_MAX (lib/record/field.c); the next never passes it,
	 * so it is never refused, nor overflows.
	 */
	attempt = attempt < 0 ? 1 : attempt >= FIELD_ATTEMPT_MAX ?
	    FIELD_ATTEMPT_MAX : attempt + 1;

	xfer_clear(rec);
	json_object_set_new(rec, "attempt", json_integer(attempt));
	x->job = job;
	x->slot = -1;
	x->fd = -1;
	x->body_fd = -1;
	hdr_ratelimit_init(&x->rl);
	x->url = xstrdup(rec_str(rec, "url"));
	if (load_body(x, rec, err, errlen) == -1 ||
	    headers(x, rec, attempt, err, errlen) == -1) {
		xfer_free(x);
		return NULL;
	}
	if (fo->run_dir != NULL) {
		x->final = rundir_path(fo->run_dir, RUNDIR_DOCS, id);
		x->part = rundir_path(fo->run_dir, RUNDIR_PART, id);
		x->bid = xstrdup(id);
		/*
		 * A submission's partial file is opened before it is sent, so
		 * that a file that cannot be made never costs a submission.
		 * Any other is made once there is a body (by the body thread,
		 * when it is small).
		 */
		if (doc_is_submission(rec) &&
		    (x->fd = bodies_open_part(x)) == -1) {
			snprintf(err, errlen, "open %s: %s", x->part,
			    strerror(errno));
			xfer_free(x);
			return NULL;
		}
	}
	easy_setup(x);
	if (method != NULL && strcmp(method, "GET") != 0) {
		if (strcmp(method, "HEAD") == 0)
			curl_easy_setopt(x->easy, CURLOPT_NOBODY, 1L);
		else
			curl_easy_setopt(x->easy, CURLOPT_CUSTOMREQUEST, method);
	}
	if (x->body != NULL) {
		curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
		curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)x->body_len);
	} else if (x->body_fd != -1) {
		curl_easy_setopt(x->easy, CURLOPT_POST, 1L);
		curl_easy_setopt(x->easy, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(x->easy, CURLOPT_READDATA, x);
		curl_easy_setopt(x->easy, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(x->easy, CURLOPT_SEEKDATA, x);
		curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)x->body_len);
	}
	/*
	 * libcurl sends a request again, unasked, on a fresh connection when
	 * a reused one closes before any byte of the answer (lib/transfer.c,
	 * Curl_retry_request: conn->bits.reuse and nothing received).  A
	 * server may have committed a submission before closing: it is never
	 * sent on a reused connection, so that it is never sent twice.
	 */
	if (doc_is_submission(rec))
		curl_easy_setopt(x->easy, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->hdrs);
	x->t0 = x->t_sent = clk_now();
	return x;
}

int
xfer_redirect(struct xfer *x)
{
	json_t *rec = x->job->rec;
	const char *method = rec_str(rec, "method");
	char *loc = NULL, err[300];
	long status = 0, attempt = rec_int(rec, "attempt", 1);
	double left;

	if (x->cc != CURLE_OK || x->too_large || x->wr_err != 0)
		return 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status != 301 && status != 302 && status != 303 &&
	    status != 307 && status != 308)
		return 0;
	/* A submission is never sent again, even where a 3xx points. */
	if (curl_easy_getinfo(x->easy, CURLINFO_REDIRECT_URL, &loc) !=
	    CURLE_OK || loc == NULL || doc_is_submission(rec))
		return 0;
	if (x->hops >= fo->conf.max_redirects) {
		x->cc = CURLE_TOO_MANY_REDIRECTS;
		return 0;
	}
	if (strncasecmp(loc, "http://", 7) != 0 &&
	    strncasecmp(loc, "https://", 8) != 0) {
		x->cc = CURLE_UNSUPPORTED_PROTOCOL;
		return 0;
	}
	if ((left = x->until - clk_mono()) <= 0) {
		x->cc = CURLE_OPERATION_TIMEDOUT;
		return 0;
	}
	free(x->url);
	x->url = xstrdup(loc);
	x->hops++;
	x->writes = 0;
	/* The next hop's answer replaces this one's body. */
	x->bytes = 0;
	x->mlen = 0;
	if (x->fd != -1 && (ftruncate(x->fd, 0) == -1 ||
	    lseek(x->fd, 0, SEEK_SET) == -1)) {
		x->wr_err = errno;
		return 0;
	}
	EVP_DigestInit_ex(x->sha, sha256, NULL);
	/*
	 * 303 is a GET; so is a 301 or 302 of a POST, as browsers and
	 * libcurl do.  307 and 308 keep the method and body.
	 */
	if ((status == 303 && (method == NULL || strcmp(method, "HEAD") != 0))
	    || ((status == 301 || status == 302) && method != NULL &&
	    strcmp(method, "POST") == 0)) {
		/* No pointer to the body is left behind: then a GET. */
		curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, NULL);
		curl_easy_setopt(x->easy, CURLOPT_CUSTOMREQUEST, NULL);
		curl_easy_setopt(x->easy, CURLOPT_NOBODY, 0L);
		curl_easy_setopt(x->easy, CURLOPT_HTTPGET, 1L);
		free(x->body);
		x->body = NULL;
		x->body_len = 0;
	}
	/* A 307 or 308 sends a streamed body_file again, from its start. */
	x->body_off = 0;
	/* Headers again: secrets only to where they may go. */
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	if (headers(x, rec, attempt, err, sizeof(err)) == -1) {
		x->cc = CURLE_ABORTED_BY_CALLBACK;
		return 0;
	}
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(x->easy, CURLOPT_URL, x->url);
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)(left * 1000) + 1);
	return 1;
}

/*
 * x's next hop, held for the gate since xfer_redirect, goes now, with a
 * timeout of its own: the wait was this process's, not the portal's.
 * Left with what remained of the attempt's, a hop held longer than that
 * (a told 1 every 200 s, a RateLimit window of 300 s) was sent with a
 * millisecond to go, answered, and its answer thrown away as a timeout,
 * again at each retry.
 */
void
xfer_hop_resume(struct xfer *x)
{
	timeout_set(x);
	x->t_sent = clk_now();
	x->t_wrote = 0;
}

static const char *
error_of(CURLcode cc, const struct xfer *x)
{
	long st = 0;

	switch (cc) {
	case CURLE_OK:
		return NULL;
	case CURLE_OPERATION_TIMEDOUT:
		return x->capped_at > 0 && deadline_come(fo->deadline,
		    clk_now()) ? "deadline" : "timeout";
	case CURLE_COULDNT_CONNECT:
		return "connect";
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return "dns";
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
		return "reset";
	case CURLE_ABORTED_BY_CALLBACK:
		return x->resent ? "reset" : "protocol";
	case CURLE_WRITE_ERROR:
		return x->too_large ? "too_large" : "write";
	case CURLE_UNSUPPORTED_PROTOCOL:
		/* With no status read, the reply itself was not HTTP. */
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &st);
		return st > 0 ? "scheme" : "protocol";
	case CURLE_TOO_MANY_REDIRECTS:
		return "redirects";
	case CURLE_SSL_CONNECT_ERROR:
		/* Cut short (a reset mid-handshake), unlike a bad certificate. */
		return "tls_handshake";
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
		return "tls";
	default:
		return "protocol";
	}
}

/* Body checks of "expect"; NULL when all pass, else what failed. */
static char *
check(const json_t *expect, const struct xfer *x)
{
	const char *ct = rec_str(expect, "content_type");
	const char *magic = rec_str(expect, "magic");
	long min = rec_int(expect, "min_bytes", -1);
	const char *path = NULL, *got;
	char buf[64];
	int bad = 0, fd = -1;
	json_error_t je;
	json_t *doc;
	size_t n;
	FILE *f;

	if (expect == NULL)
		return NULL;
	/*
	 * The texts quoted are cut on a character, never inside one; the
	 * portal's may still hold bytes that are not UTF-8 (xfer_finish).
	 */
	if (ct != NULL && (x->ctype == NULL || strncasecmp(x->ctype, ct,
	    strlen(ct)) != 0)) {
		got = x->ctype ? x->ctype : "";
		return xasprintf("content_type: expected \"%.*s\", got "
		    "\"%.*s\"", (int)rec_utf8_prefix(ct, 60), ct,
		    (int)rec_utf8_prefix(got, 60), got);
	}
	if (min >= 0 && x->bytes < min)
		return xasprintf("min_bytes: expected at least %ld, got %ld",
		    min, x->bytes);
	if ((magic != NULL || json_is_true(json_object_get(expect, "json"))) &&
	    x->final == NULL)
		return NULL;	/* no body kept to look at */
	/* Held in memory, or spilled to its file (renamed or not). */
	if (x->mem == NULL && x->bytes > 0)
		path = x->renamed ? x->final : x->part;
	if (magic != NULL) {
		n = strlen(magic) < sizeof(buf) ? strlen(magic) : sizeof(buf);
		if (path == NULL) {
			if (x->mlen < n)
				bad = 1;
			else if (n > 0)
				bad = memcmp(x->mem, magic, n) != 0;
		} else if ((fd = files_open(path, O_RDONLY, 0)) == -1 ||
		    (f = fdopen(fd, "rb")) == NULL) {
			if (fd != -1)
				close(fd);
			bad = 1;
		}
		else {
			bad = fread(buf, 1, n, f) != n ||
			    memcmp(buf, magic, n) != 0;
			fclose(f);
		}
		if (bad)
			return xasprintf("magic: body does not start with "
			    "\"%.*s\"", (int)rec_utf8_prefix(magic, 20), magic);
	}
	if (json_is_true(json_object_get(expect, "json"))) {
		if ((doc = path == NULL ? json_loadb(x->mem ? x->mem : "",
		    x->mlen, JSON_DECODE_ANY, &je) : files_load(path,
		    JSON_DECODE_ANY, &je)) == NULL)
			return je.column > 0 ? xasprintf("json: body is not "
			    "JSON (%s at column %d)", rec_json_why(&je),
			    je.column) : xasprintf("json: body is not JSON "
			    "(%s)", rec_json_why(&je));
		json_decref(doc);
	}
	return NULL;
}

void
xfer_finish(struct xfer *x, CURLcode cc)
{
	json_t *rec = x->job->rec, *rl, *chk;
	const char *e = error_of(cc, x);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	char hex[2 * EVP_MAX_MD_SIZE + 1], *bad;
	curl_off_t up = 0;
	long status = 0, reqsz = 0;
	double now = x->t1;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(x->easy, CURLINFO_SIZE_UPLOAD_T, &up);
	if (x->fd != -1) {
		if (close(x->fd) == -1 && e == NULL) {
			e = "write";
			x->wr_err = errno;
		}
		x->fd = -1;
	}
	if (x->wr_err != 0 && e == NULL)
		e = "write";
	json_object_set_new(rec, "status", status > 0 && e == NULL ?
	    json_integer(status) : json_null());
	json_object_set_new(rec, "error", e ? json_string(e) : json_null());
	if (e != NULL)
		json_object_set_new(rec, "error_detail", json_string(cc ==
		    CURLE_OK && x->wr_err != 0 ? strerror(x->wr_err) :
		    x->resent ? "connection closed with no answer" :
		    curl_why(cc)));
	json_object_set_new(rec, "elapsed_ms", json_integer((long)((now -
	    x->t0) * 1000)));
	json_object_set_new(rec, "response_at", json_real(now));
	/*
	 * Sent: answered, or out whole: its body, or, with none, its header
	 * (a DELETE, a POST without a body, is whole once that has left).
	 */
	if (doc_is_submission(rec)) {
		curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &reqsz);
		json_object_set_new(rec, "sent", json_boolean(status > 0 ||
		    (x->body_len > 0 ? (size_t)up >= x->body_len :
		    reqsz > 0)));
	}
	/* The portal's header bytes, as UTF-8 (rec_jstring): never lost. */
	if (x->retry_after != NULL)
		json_object_set_new(rec, "retry_after",
		    rec_jstring(x->retry_after));
	if (x->date != NULL)
		json_object_set_new(rec, "date", rec_jstring(x->date));
	if (x->rl_seen) {
		rl = json_object();
		if (x->rl.limit >= 0)
			json_object_set_new(rl, "limit",
			    json_integer(x->rl.limit));
		if (x->rl.remaining >= 0)
			json_object_set_new(rl, "remaining",
			    json_integer(x->rl.remaining));
		if (x->rl.reset_s >= 0)
			json_object_set_new(rl, "reset_s",
			    json_real(x->rl.reset_s));
		json_object_set_new(rec, "ratelimit", rl);
	}
	if (e != NULL)
		return;
	EVP_DigestFinal_ex(x->sha, md, &mdlen);
	for (i = 0; i < mdlen; i++) {
		hex[2 * i] = "0123456789abcdef"[md[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[md[i] & 15];
	}
	hex[2 * mdlen] = '\0';
	json_object_set_new(rec, "bytes", json_integer(x->bytes));
	json_object_set_new(rec, "sha256", json_string(hex));
	json_object_set_new(rec, "content_type", x->ctype ?
	    rec_jstring(x->ctype) : json_null());
	if (status >= 200 && status <= 299) {
		/*
		 * A failed check is never lost with its message: its text
		 * is made UTF-8, and one that still cannot be kept is true
		 * (rfp-classify takes any check but null or false).
		 */
		bad = check(json_object_get(rec, "expect"), x);
		if (bad == NULL)
			chk = json_null();
		else if ((chk = rec_jstring(bad)) == NULL)
			chk = json_true();
		json_object_set_new(rec, "check", chk);
		free(bad);
	}
	if (x->renamed) {
		free(x->part);
		x->part = NULL;
		json_object_set_new(rec, "body_path", json_string(x->final +
		    strlen(fo->run_dir) + 1));
	}
}

/*
 * 1 when x, answered and its body not yet checked, will be a success as
 * far as can be told now: a 2xx that passes the checks of "expect" that
 * need no body, and has none that need it.
 */
int
xfer_looks_ok(const struct xfer *x)
{
	const json_t *expect = json_object_get(x->job->rec, "expect");
	long st = 0;
	char *bad;
	int ok;

	if (x->cc != CURLE_OK || curl_easy_getinfo(x->easy,
	    CURLINFO_RESPONSE_CODE, &st) != CURLE_OK || st < 200 || st > 299)
		return 0;
	if (expect == NULL)
		return 1;
	if (rec_str(expect, "magic") != NULL ||
	    json_is_true(json_object_get(expect, "json")))
		return 0;
	/* Without a body check, check() looks at the head alone. */
	bad = check(expect, x);
	ok = bad == NULL;
	free(bad);
	return ok;
}

int
xfer_files_body(const struct xfer *x)
{
	return x->bid != NULL && x->cc == CURLE_OK;
}

void
xfer_free(struct xfer *x)
{
	if (x == NULL)
		return;
	if (x->easy != NULL && neasy < XFER_POOL) {
		curl_easy_reset(x->easy);
		easy_pool[neasy++] = x->easy;
	} else if (x->easy != NULL)
		curl_easy_cleanup(x->easy);
	curl_slist_free_all(x->hdrs);
	free(x->url);
	if (x->fd != -1)
		close(x->fd);
	if (x->body_fd != -1)
		close(x->body_fd);
	if (x->part != NULL && !x->renamed)
		unlink(x->part);
	free(x->part);
	free(x->mem);
	free(x->bid);
	free(x->final);
	free(x->body);
	free(x->retry_after);
	free(x->date);
	free(x->ctype);
	if (x->sha != NULL && nsha < XFER_POOL && EVP_MD_CTX_reset(x->sha))
		sha_pool[nsha++] = x->sha;
	else if (x->sha != NULL)
		EVP_MD_CTX_free(x->sha);
	free(x);
}

/* Free what the pools keep (before curl_global_cleanup). */
void
xfer_pool_free(void)
{
	while (neasy > 0)
		curl_easy_cleanup(easy_pool[--neasy]);
	while (nsha > 0)
		EVP_MD_CTX_free(sha_pool[--nsha]);
	EVP_MD_free(sha256);
	sha256 = NULL;
}
