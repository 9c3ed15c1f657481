/*
 * Unit tests of lib/class: every row of the classification table, and
 * anything unrecognised taken as permanent.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/record/class.h"
#include "tests/unit/tap.h"

static void
row(const char *json, enum class_kind want, const char *reason)
{
	json_error_t je;
	json_t *r = json_loads(json, 0, &je);
	char got[64];
	enum class_kind k;

	if (r == NULL) {
		ok(0, "bad test JSON %s", json);
		return;
	}
	memset(got, 'Z', sizeof(got));
	got[sizeof(got) - 1] = '\0';
	k = class_of(r, got, sizeof(got));
	ok(k == want && strcmp(got, reason) == 0, "%s is %s %s", json,
	    class_name(want), reason);
	if (k != want || strcmp(got, reason) != 0)
		printf("#   got %s %s\n", class_name(k), got);
	json_decref(r);
}

int
main(void)
{
	static const int transient[] = { 408, 425, 429, 500, 502, 503, 504 };
	static const int permanent[] = { 400, 401, 403, 404, 422 };
	static const int unknown[] = { 100, 101, 301, 302, 304, 405, 409, 410,
		418, 451, 501, 505, 520, 599, 999, 0, -1 };
	static const char *terr[] = { "timeout", "connect", "reset", "dns",
		"tls_handshake" };
	static const char *perr[] = { "tls", "too_large", "protocol",
		"scheme", "redirects", "local", "something_new" };
	char json[128], reason[64];
	json_t *r;
	size_t i;

	for (i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
		snprintf(json, sizeof(json), "{\"status\":%d,\"error\":null}",
		    transient[i]);
		snprintf(reason, sizeof(reason), "http_%d", transient[i]);
		row(json, CLASS_TRANSIENT, reason);
	}
	for (i = 0; i < sizeof(permanent) / sizeof(permanent[0]); i++) {
		snprintf(json, sizeof(json), "{\"status\":%d}", permanent[i]);
		snprintf(reason, sizeof(reason), "http_%d", permanent[i]);
		row(json, CLASS_PERMANENT, reason);
	}
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		snprintf(json, sizeof(json), "{\"status\":%d}", unknown[i]);
		snprintf(reason, sizeof(reason), "unknown_http_%d", unknown[i]);
		row(json, CLASS_PERMANENT, reason);
	}
	for (i = 0; i < sizeof(terr) / sizeof(terr[0]); i++) {
		snprintf(json, sizeof(json), "{\"status\":null,\"error\":\"%s\"}",
		    terr[i]);
		row(json, CLASS_TRANSIENT, terr[i]);
	}
	for (i = 0; i < sizeof(perr) / sizeof(perr[0]); i++) {
		snprintf(json, sizeof(json), "{\"status\":null,\"error\":\"%s\"}",
		    perr[i]);
		row(json, CLASS_PERMANENT, perr[i]);
	}

	row("{\"status\":200}", CLASS_OK, "http_200");
	row("{\"status\":200,\"check\":null}", CLASS_OK, "http_200");
	row("{\"status\":200,\"check\":false}", CLASS_OK, "http_200");
	row("{\"status\":201}", CLASS_OK, "http_201");
	row("{\"status\":204}", CLASS_OK, "http_204");
	row("{\"status\":299}", CLASS_OK, "http_299");
	row("{\"status\":200,\"check\":\"magic: body does not start with "
	    "\\\"%PDF-\\\"\"}", CLASS_PERMANENT, "invalid_body");
	row("{\"status\":200,\"check\":true}", CLASS_PERMANENT, "invalid_body");
	/* A check on a non-2xx answer does not hide its status. */
	row("{\"status\":503,\"check\":\"x\"}", CLASS_TRANSIENT, "http_503");
	/* rfp-parse's outcome of a 2xx body. */
	row("{\"status\":200,\"parse_error\":\"failed\"}", CLASS_PERMANENT,
	    "parse_failed");
	row("{\"status\":200,\"parse_error\":\"signal\"}", CLASS_PERMANENT,
	    "parse_signal");
	row("{\"status\":200,\"parse_error\":\"too_large\"}",
	    CLASS_PERMANENT, "parse_too_large");
	row("{\"status\":200,\"parse_error\":\"tempfail\"}",
	    CLASS_TRANSIENT, "parse_tempfail");
	row("{\"status\":200,\"parse_error\":\"timeout\"}", CLASS_TRANSIENT,
	    "parse_timeout");
	row("{\"status\":200,\"parse_error\":null}", CLASS_OK, "http_200");
	/* A failed check, a non-2xx or an error comes before any parse. */
	row("{\"status\":200,\"check\":\"x\",\"parse_error\":\"timeout\"}",
	    CLASS_PERMANENT, "invalid_body");
	row("{\"status\":404,\"parse_error\":\"timeout\"}", CLASS_PERMANENT,
	    "http_404");
	row("{}", CLASS_PERMANENT, "no_outcome");
	row("{\"status\":null,\"error\":null}", CLASS_PERMANENT, "no_outcome");
	row("{\"status\":\"200\"}", CLASS_PERMANENT, "bad_status");
	row("{\"status\":200.0}", CLASS_PERMANENT, "bad_status");
	/* An error wins over any status. */
	row("{\"status\":200,\"error\":\"reset\"}", CLASS_TRANSIENT, "reset");
	row("{\"status\":200,\"error\":\"tls\"}", CLASS_PERMANENT, "tls");

	/* 409 to a submission (sent with Idempotency-Key): still in progress. */
	row("{\"status\":409,\"method\":\"POST\"}", CLASS_TRANSIENT,
	    "http_409");
	row("{\"status\":409,\"method\":\"PUT\",\"idempotent\":true}",
	    CLASS_PERMANENT, "unknown_http_409");
	row("{\"status\":409,\"method\":\"GET\"}", CLASS_PERMANENT,
	    "unknown_http_409");

	ok(strcmp(class_name(CLASS_OK), "ok") == 0 &&
	    strcmp(class_name(CLASS_TRANSIENT), "transient") == 0 &&
	    strcmp(class_name(CLASS_PERMANENT), "permanent") == 0,
	    "class_name: ok, transient, permanent");

	/* A short reason buffer is cut, never overrun. */
	r = json_pack("{s:i}", "status", 418);
	memset(reason, 'Z', sizeof(reason));
	class_of(r, reason, 6);
	ok(strcmp(reason, "unkno") == 0 && reason[6] == 'Z',
	    "class_of: the reason fits the buffer given");
	json_decref(r);

	return tap_done();
}
