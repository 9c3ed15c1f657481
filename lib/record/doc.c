/* doc: manifest record validation and derived names. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "lib/base/clk.h"
#include "lib/record/doc.h"
#include "lib/record/hdr.h"
#include "lib/base/x.h"

const char *
doc_id_check(const char *id)
{
	const unsigned char *p;
	size_t n;

	if (id == NULL || *id == '\0')
		return "empty";
	n = strlen(id);
	if (n > DOC_ID_MAX)
		return "longer than 200 bytes";
	if (!isalnum((unsigned char)id[0]))
		return "must start with a letter or digit";
	if (strstr(id, "..") != NULL)
		return "contains \"..\"";
	/*
	 * docs/ID.parsed is the parse of ID (rfp-parse(1)), never a body;
	 * and no id may name what a stage derives from another id in the
	 * run directory (ID.parsed.PID, a parse being written), whichever
	 * directory holds it today.
	 */
	if (n > 7 && strcmp(id + n - 7, ".parsed") == 0)
		return "ends in \".parsed\"";
	if (strstr(id, ".parsed.") != NULL)
		return "contains \".parsed.\"";
	for (p = (const unsigned char *)id; *p != '\0'; p++)
		if (!isalnum(*p) && strchr("._-:@+", *p) == NULL)
			return "may hold only letters, digits and ._-:@+";
	return NULL;
}

/*
 * The port of the authority p..end, if any: digits from 1 to 65535 (an
 * empty one is the scheme's).  Else libcurl would send nothing and the
 * record would end a "permanent" protocol error, not a bad field.
 */
static const char *
port_check(const char *p, const char *end)
{
	static char why[64];
	const char *c, *q;
	long port = 0;

	if (*p == '[') {
		if ((q = memchr(p, ']', (size_t)(end - p))) == NULL)
			return "has an unclosed \"[\" in its host";
		c = q + 1 < end ? q + 1 : NULL;
		if (c != NULL && *c != ':')
			return "has text after its \"]\"";
	} else
		c = memchr(p, ':', (size_t)(end - p));
	if (c == NULL || c + 1 == end)
		return "";
	for (q = c + 1; q < end; q++) {
		if (!isdigit((unsigned char)*q) || port > 65535)
			break;
		port = port * 10 + (*q - '0');
	}
	if (q == end && port >= 1 && port <= 65535)
		return "";
	snprintf(why, sizeof(why), "port \"%.*s\" is not a number from 1 to "
	    "65535", (int)(end - c - 1 > 20 ? 20 : end - c - 1), c + 1);
	return why;
}

/* URL scheme and authority checks; host must be non-empty, no credentials. */
static const char *
url_check(const char *url)
{
	const char *p, *end;
	size_t i;

	for (i = 0; url[i] != '\0'; i++)
		if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
			return "contains whitespace or control characters";
	if (strncasecmp(url, "http://", 7) == 0)
		p = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		p = url + 8;
	else
		return NULL;	/* caller words the scheme error */
	end = p + strcspn(p, "/?#");
	if (end == p)
		return "has no host";
	if (memchr(p, '@', (size_t)(end - p)) != NULL)
		return "embeds credentials (use headers with ${NAME})";
	return port_check(p, end);
}

static int
fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
	snprintf(err, errlen, fmt, a, b);
	return -1;
}

/*
 * A status_url's one placeholder is {key}, once: any other brace is a
 * typo ("{kye}" went out as it stood, the portal was asked about no
 * submission, said it had none, and the submission was sent again).
 */
static int
status_tmpl_check(const char *u, char *err, size_t errlen)
{
	const char *k = strstr(u, "{key}"), *b;
	int n;

	for (b = u; (b = strpbrk(b, "{}")) != NULL; b++) {
		if (b == k) {
			b += 4;
			continue;
		}
		if (strncmp(b, "{key}", 5) == 0) {
			snprintf(err, errlen, "field \"status_url\": {key} more "
			    "than once; it is replaced once");
			return -1;
		}
		n = (int)strcspn(b + 1, "{}") + 1;
		if (b[n] == '}')
			n++;
		snprintf(err, errlen, "field \"status_url\": \"%.*s\" is not "
		    "{key}, its one placeholder (once); a brace is no part of "
		    "a URL", n > 40 ? 40 : n, b);
		return -1;
	}
	return 0;
}

/* "expect": each check of the type it is read as, or an error. */
static int
expect_check(const json_t *e, char *err, size_t errlen)
{
	static const char *keys[] = { "min_bytes", "json", "magic",
	    "content_type" };
	const char *k;
	json_t *v;
	size_t i;

	if (!json_is_object(e))
		return fail(err, errlen, "field \"expect\": not an object%s%s",
		    "", "");
	/* A misspelt check ("min_byte") checked nothing, and a body failed. */
	json_object_foreach((json_t *)e, k, v) {
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strcmp(k, keys[i]) == 0)
				break;
		if (i == sizeof(keys) / sizeof(keys[0]))
			return fail(err, errlen, "field \"expect.%.40s\": not "
			    "a check (min_bytes, json, magic, content_type)%s",
			    k, "");
	}
	if ((v = json_object_get(e, "min_bytes")) != NULL &&
	    (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (1LL << 40)))
		return fail(err, errlen, "field \"expect.min_bytes\": not an "
		    "integer from 0 to 2^40%s%s", "", "");
	if ((v = json_object_get(e, "json")) != NULL && !json_is_boolean(v))
		return fail(err, errlen, "field \"expect.json\": not true or "
		    "false%s%s", "", "");
	if ((v = json_object_get(e, "magic")) != NULL && (!json_is_string(v) ||
	    json_string_length(v) > 64))
		return fail(err, errlen, "field \"expect.magic\": not a string "
		    "of at most 64 bytes%s%s", "", "");
	if ((v = json_object_get(e, "content_type")) != NULL &&
	    !json_is_string(v))
		return fail(err, errlen, "field \"expect.content_type\": not a "
		    "string%s%s", "", "");
	return 0;
}

int
doc_check(const json_t *rec, char *err, size_t errlen)
{
	const char *id, *url, *why, *m, *k;
	json_t *v, *h;
	char scheme[16];
	size_t n;

	v = json_object_get(rec, "id");
	if (v == NULL)
		return fail(err, errlen, "missing field \"id\"%s%s", "", "");
	if (!json_is_string(v))
		return fail(err, errlen, "field \"id\": not a string%s%s", "",
		    "");
	id = json_string_value(v);
	if ((why = doc_id_check(id)) != NULL)
		return fail(err, errlen, "field \"id\": unsafe id: %s%s", why,
		    "");
	v = json_object_get(rec, "url");
	if (v == NULL)
		return fail(err, errlen, "missing field \"url\"%s%s", "", "");
	if (!json_is_string(v))
		return fail(err, errlen, "field \"url\": not a string%s%s", "",
		    "");
	url = json_string_value(v);
	why = url_check(url);
	if (why == NULL) {
		n = strcspn(url, ":");
		if (url[n] != ':' || n >= sizeof(scheme))
			return fail(err, errlen,
			    "field \"url\": not an absolute URL%s%s", "", "");
		memcpy(scheme, url, n);
		scheme[n] = '\0';
		/* http:/host, https:host: a slash short, not another scheme. */
		if (strcasecmp(scheme, "http") == 0 ||
		    strcasecmp(scheme, "https") == 0)
			return fail(err, errlen, "field \"url\": no \"//\" "
			    "after \"%s:\"%s", scheme, "");
		return fail(err, errlen,
		    "field \"url\": unsupported scheme \"%.15s\"%s", scheme,
		    "");
	}
	if (*why != '\0')
		return fail(err, errlen, "field \"url\": %s%s", why, "");
	if ((v = json_object_get(rec, "method")) != NULL) {
		if (!json_is_string(v))
			return fail(err, errlen,
			    "field \"method\": not a string%s%s", "", "");
		m = json_string_value(v);
		if (strcmp(m, "GET") && strcmp(m, "HEAD") && strcmp(m, "POST") &&
		    strcmp(m, "PUT") && strcmp(m, "PATCH") &&
		    strcmp(m, "DELETE"))
			return fail(err, errlen,
			    "field \"method\": unsupported method \"%.20s\"%s",
			    m, "");
	}
	if ((h = json_object_get(rec, "headers")) != NULL) {
		if (!json_is_object(h))
			return fail(err, errlen,
			    "field \"headers\": not an object%s%s", "", "");
		json_object_foreach(h, k, v) {
			if (!json_is_string(v))
				return fail(err, errlen,
				    "field \"headers\": \"%.60s\" is not a string%s",
				    k, "");
			if ((why = hdr_request_check(k, json_string_value(v),
			    json_string_length(v))) != NULL)
				return fail(err, errlen,
				    "field \"headers\": \"%.60s\": %s", k, why);
		}
	}
	if ((v = json_object_get(rec, "body")) != NULL && !json_is_string(v) &&
	    !json_is_object(v) && !json_is_array(v))
		return fail(err, errlen,
		    "field \"body\": not a string or JSON value%s%s", "", "");
	if ((v = json_object_get(rec, "body_file")) != NULL &&
	    !json_is_string(v))
		return fail(err, errlen, "field \"body_file\": not a string%s%s",
		    "", "");
	/*
	 * A body goes only with a method that sends one.  Sent with a GET it
	 * would go out as a POST (libcurl's POSTFIELDS) that is no
	 * submission: no Idempotency-Key, no ledger entry, retried blindly,
	 * committed twice.  The record is refused, never guessed at.
	 */
	m = json_string_value(json_object_get(rec, "method"));
	if (!doc_sends_body(m) && (json_object_get(rec, "body") != NULL ||
	    json_object_get(rec, "body_file") != NULL))
		return fail(err, errlen, "field \"%s\": given for a %s, which "
		    "sends no body: a body goes only with \"method\" POST, "
		    "PUT, PATCH or DELETE", json_object_get(rec, "body") !=
		    NULL ? "body" : "body_file", m != NULL ? m :
		    "GET (no \"method\")");
	if ((v = json_object_get(rec, "endpoint")) != NULL &&
	    (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > 100))
		return fail(err, errlen,
		    "field \"endpoint\": not a string of 1 to 100 bytes%s%s", "",
		    "");
	if ((v = json_object_get(rec, "expect")) != NULL &&
	    expect_check(v, err, errlen) == -1)
		return -1;
	if ((v = json_object_get(rec, "status_url")) != NULL &&
	    (!json_is_string(v) || (why = url_check(json_string_value(v))) ==
	    NULL || *why != '\0'))
		return fail(err, errlen, "field \"status_url\": not an http or "
		    "https URL%s%s", "", "");
	if (v != NULL && status_tmpl_check(json_string_value(v), err,
	    errlen) == -1)
		return -1;
	if ((v = json_object_get(rec, "idempotency_key")) != NULL &&
	    (!json_is_string(v) || doc_id_check(json_string_value(v))))
		return fail(err, errlen,
		    "field \"idempotency_key\": not a safe string%s%s", "", "");
	return 0;
}

char *
doc_endpoint(const json_t *rec)
{
	const char *ep = json_string_value(json_object_get(rec, "endpoint"));
	const char *url;

	if (ep != NULL)
		return xstrdup(ep);
	url = json_string_value(json_object_get(rec, "url"));
	if (url == NULL)
		return xstrdup("none");
	return doc_authority(url);
}

char *
doc_authority(const char *url)
{
	const char *p;
	size_t n;
	char *s, *c;

	p = strstr(url, "://");
	p = p ? p + 3 : url;
	n = strcspn(p, "/?#");
	s = xmalloc(n + 1);
	memcpy(s, p, n);
	s[n] = '\0';
	for (p = s; *p; p++)
		s[p - s] = (char)tolower((unsigned char)*p);
	/*
	 * An empty port is the default (RFC 3986, 6.2.3); the scheme's
	 * default port and a root dot name no other server.
	 */
	if (n > 1 && s[n - 1] == ':')
		s[--n] = '\0';
	if (strncasecmp(url, "http://", 7) == 0 && n > 3 &&
	    strcmp(s + n - 3, ":80") == 0)
		s[n -= 3] = '\0';
	else if (strncasecmp(url, "https://", 8) == 0 && n > 4 &&
	    strcmp(s + n - 4, ":443") == 0)
		s[n -= 4] = '\0';
	/* The root dot before a port too: h.:8080 is h:8080. */
	c = strrchr(s, ':');
	if (c != NULL && c > s + 1 && c[-1] == '.' && c[1] != '\0' &&
	    strspn(c + 1, "0123456789") == strlen(c + 1))
		memmove(c - 1, c, strlen(c) + 1);
	else if (n > 1 && s[n - 1] == '.')
		s[--n] = '\0';
	return s;
}

char *
doc_safe_name(const char *s)
{
	size_t n = strlen(s), i;
	char *out;
	int changed = 0;

	if (n > 100)
		n = 100, changed = 1;
	out = xmalloc(n + 20);
	for (i = 0; i < n; i++) {
		out[i] = s[i];
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' &&
		    !(s[i] == '.' && i > 0)) {
			out[i] = '_';
			changed = 1;
		}
	}
	out[n] = '\0';
	if (changed || n == 0)
		snprintf(out + n, 20, "-%08llx", (unsigned long long)
		    (clk_hash(0, s, strlen(s)) & 0xffffffffULL));
	return out;
}

int
doc_is_submission(const json_t *rec)
{
	return doc_submits(json_string_value(json_object_get(rec, "method")),
	    json_is_true(json_object_get(rec, "idempotent")));
}

int
doc_sends_body(const char *method)
{
	return method != NULL && strcmp(method, "GET") != 0 &&
	    strcmp(method, "HEAD") != 0;
}

int
doc_submits(const char *method, int idempotent)
{
	return method != NULL && strcmp(method, "GET") != 0 &&
	    strcmp(method, "HEAD") != 0 && !idempotent;
}

char *
doc_idem_key(const json_t *rec)
{
	const char *k = json_string_value(json_object_get(rec,
	    "idempotency_key"));
	json_t *cycle;
	char *seed, *cyc;
	uint64_t h1, h2;

	if (k != NULL)
		return xstrdup(k);
	cycle = json_object_get(rec, "cycle");
	cyc = cycle ? json_dumps(cycle, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	seed = xasprintf("%s\n%s", json_string_value(json_object_get(rec,
	    "id")) ?: "", cyc ? cyc : "");
	free(cyc);
	h1 = clk_hash(1, seed, strlen(seed));
	h2 = clk_hash(2, seed, strlen(seed));
	free(seed);
	return xasprintf("rfp-%016llx%016llx", (unsigned long long)h1,
	    (unsigned long long)h2);
}
