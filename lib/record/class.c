/* class: transient, permanent, and unknown taken as permanent. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "lib/record/class.h"
#include "lib/record/view.h"
#include "lib/record/doc.h"
#include "lib/record/rec.h"

/*
 * A resolver that fails at 2 a.m. and a handshake cut short are the network,
 * not the manifest: a name that never resolves runs out of attempts.
 */
static const char *transient_errors[] = { "timeout", "connect", "reset",
	"deadline", "dns", "tls_handshake", NULL };
/* A parser that said "later" (exit 75) or ran out of time may do better. */
static const char *transient_parses[] = { "tempfail", "timeout", NULL };

const char *
class_name(enum class_kind k)
{
	switch (k) {
	case CLASS_OK:
		return "ok";
	case CLASS_TRANSIENT:
		return "transient";
	default:
		return "permanent";
	}
}

enum class_kind
class_decide(const struct class_in *in, char *reason, size_t len)
{
	long s = in->status;
	int i;

	if (in->error != NULL) {
		/* Cut on a whole character: a reason must stay UTF-8. */
		snprintf(reason, len, "%s", in->error);
		rec_utf8_cut(reason);
		for (i = 0; transient_errors[i] != NULL; i++)
			if (strcmp(in->error, transient_errors[i]) == 0)
				return CLASS_TRANSIENT;
		return CLASS_PERMANENT;
	}
	if (!in->has_status) {
		snprintf(reason, len, "%s", in->bad_status ? "bad_status" :
		    "no_outcome");
		return CLASS_PERMANENT;
	}
	if (s >= 200 && s <= 299) {
		if (in->check_failed) {
			snprintf(reason, len, "invalid_body");
			return CLASS_PERMANENT;
		}
		if (in->parse_error != NULL) {
			snprintf(reason, len, "parse_%s", in->parse_error);
			rec_utf8_cut(reason);
			for (i = 0; transient_parses[i] != NULL; i++)
				if (strcmp(in->parse_error,
				    transient_parses[i]) == 0)
					return CLASS_TRANSIENT;
			return CLASS_PERMANENT;
		}
		snprintf(reason, len, "http_%ld", s);
		return CLASS_OK;
	}
	/* The portal's own word (rfpipe.yaml, flags) comes before the RFCs. */
	if (in->over == CLASS_TRANSIENT || in->over == CLASS_PERMANENT) {
		snprintf(reason, len, "http_%ld", s);
		return in->over;
	}
	switch (s) {
	/* 408 and 425 say the request may be repeated (RFC 9110, 8470). */
	case 408: case 425:
	case 429: case 500: case 502: case 503: case 504:
		snprintf(reason, len, "http_%ld", s);
		return CLASS_TRANSIENT;
	case 409:
		/* With Idempotency-Key: "a request with this key is still in
		 * progress" (draft-ietf-httpapi-idempotency-key-header). */
		snprintf(reason, len, "%shttp_409", in->keyed_submit ? "" :
		    "unknown_");
		return in->keyed_submit ? CLASS_TRANSIENT : CLASS_PERMANENT;
	case 400: case 401: case 403: case 404: case 422:
		snprintf(reason, len, "http_%ld", s);
		return CLASS_PERMANENT;
	default:
		snprintf(reason, len, "unknown_http_%ld", s);
		return CLASS_PERMANENT;
	}
}

void
class_read(struct view *v, struct class_in *in)
{
	int st = view_type(v, "status"), chk = view_type(v, "check");

	in->error = view_str(v, "error");
	in->has_status = st == SCAN_INTEGER;
	in->status = view_int(v, "status", 0);
	in->bad_status = st != -1 && st != SCAN_NULL && !in->has_status;
	in->check_failed = chk != -1 && chk != SCAN_NULL && chk != SCAN_FALSE;
	in->parse_error = view_str(v, "parse_error");
	/* rfp-fetch sends every submission with an Idempotency-Key. */
	in->keyed_submit = doc_submits(view_str(v, "method"),
	    view_type(v, "idempotent") == SCAN_TRUE);
	in->over = -1;
}

/* Classify rec, a tree, reading it through a view; fetch: as fetched. */
static enum class_kind
of(const json_t *rec, int fetch, char *reason, size_t len)
{
	struct view *v = view_new();
	struct class_in in;
	enum class_kind k;

	view_open_tree(v, json_incref((json_t *)rec));
	class_read(v, &in);
	if (fetch)
		in.parse_error = NULL;
	k = class_decide(&in, reason, len);
	view_free(v);
	return k;
}

enum class_kind
class_of(const json_t *rec, char *reason, size_t len)
{
	return of(rec, 0, reason, len);
}

enum class_kind
class_of_fetch(const json_t *rec, char *reason, size_t len)
{
	return of(rec, 1, reason, len);
}
