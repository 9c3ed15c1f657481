/*
 * Fuzz the request-side rules of lib/hdr (rfpipe(7) SECURITY).  The input
 * is four lines: a header name (to its first NUL), its value (an inner
 * NUL kept), and two
 * URLs, a record's and a redirect's.  A header hdr_request_check lets
 * through has a token name that is none of the refused ones and a value
 * without CR, LF or NUL; an origin is "http(s)://host:port" and reads back
 * the same; secrets go with a request to the same origin, not to another
 * untrusted one, and never from https to http, trusted or not.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/record/hdr.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* The next line of [*p, end): its start (NUL-terminated in place), length. */
static char *
line(char **p, char *end, size_t *len)
{
	char *s = *p, *nl;

	if (s >= end) {
		*len = 0;
		return end;
	}
	nl = memchr(s, '\n', (size_t)(end - s));
	*len = (size_t)((nl ? nl : end) - s);
	s[*len] = '\0';
	*p = nl ? nl + 1 : end;
	return s;
}

static void
request_header(const char *name, size_t nlen, const char *value, size_t vlen)
{
	static const char *refused[] = { "Connection", "Content-Length",
		"Expect", "Host", "HTTP2-Settings", "Keep-Alive", "TE",
		"Trailer", "Transfer-Encoding", "Upgrade", "Idempotency-Key",
		"X-Rfp-Attempt" };
	size_t i;

	if (hdr_request_check(name, value, vlen) != NULL)
		return;
	/* A name is a C string (a JSON key: jansson refuses \u0000). */
	nlen = strlen(name);
	FUZZ_CHECK(nlen > 0, "a name is not empty");
	FUZZ_CHECK(strpbrk(name, ":\r\n \t()<>@,;\\\"/[]?={}") == NULL,
	    "a name is a token");
	for (i = 0; i < nlen; i++)
		FUZZ_CHECK((unsigned char)name[i] > 0x20 &&
		    (unsigned char)name[i] < 0x7f, "a name is visible ASCII");
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		FUZZ_CHECK(strcasecmp(name, refused[i]) != 0,
		    "a refused header is refused");
	FUZZ_CHECK(strncasecmp(name, "Proxy-", 6) != 0,
	    "a proxy header is refused");
	FUZZ_CHECK(memchr(value, '\r', vlen) == NULL && memchr(value, '\n',
	    vlen) == NULL && memchr(value, '\0', vlen) == NULL,
	    "a value has no CR, LF or NUL");
}

/* The origin of u into o, checked; 0 or -1 as hdr_origin. */
static int
origin(const char *u, char *o, size_t len)
{
	char *again = xmalloc(len);

	if (hdr_origin(u, o, len) == -1) {
		free(again);
		return -1;
	}
	FUZZ_CHECK(strncmp(o, "http://", 7) == 0 || strncmp(o, "https://",
	    8) == 0, "an origin is http or https");
	FUZZ_CHECK(strpbrk(strstr(o, "://") + 3, "/?#@") == NULL,
	    "an origin has no path, query, fragment or user");
	FUZZ_CHECK(strspn(strrchr(o, ':') + 1, "0123456789") ==
	    strlen(strrchr(o, ':') + 1) && strrchr(o, ':')[1] != '\0',
	    "an origin ends with its port");
	FUZZ_CHECK(hdr_origin(o, again, len) == 0 && strcmp(o, again) == 0,
	    "an origin is its own origin");
	free(again);
	return 0;
}

static void
redirect(const char *a, const char *b)
{
	/* An origin is at most the URL, the default port and a numeric
	   host written out ("http://1" is http://0.0.0.1:80). */
	size_t la = strlen(a) + 64, lb = strlen(b) + 64;
	char *oa = xmalloc(la), *ob = xmalloc(lb), *trusted[1];
	int ha = origin(a, oa, la) == 0;
	int hb = origin(b, ob, lb) == 0;

	FUZZ_CHECK(hdr_may_carry(a, a, NULL, 0) == ha,
	    "a request's secrets go to its own origin");
	if (!ha || !hb) {
		FUZZ_CHECK(!hdr_may_carry(a, b, NULL, 0),
		    "nothing goes to or from a URL without an origin");
		goto out;
	}
	FUZZ_CHECK(hdr_may_carry(a, b, NULL, 0) == (strcmp(oa, ob) == 0),
	    "untrusted, secrets go to the same origin only");
	trusted[0] = (char *)b;
	if (strncmp(oa, "https:", 6) == 0 && strncmp(ob, "http:", 5) == 0)
		FUZZ_CHECK(!hdr_may_carry(a, b, trusted, 1),
		    "never from https to http, trusted or not");
	else
		FUZZ_CHECK(hdr_may_carry(a, b, trusted, 1),
		    "a trusted origin has them");
out:
	free(oa);
	free(ob);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = xmalloc(size + 1), *p = buf, *end = buf + size;
	char *name, *value, *a, *b;
	size_t nlen, vlen, alen, blen;

	memcpy(buf, data, size);
	buf[size] = '\0';
	name = line(&p, end, &nlen);
	value = line(&p, end, &vlen);
	a = line(&p, end, &alen);
	b = line(&p, end, &blen);
	request_header(name, nlen, value, vlen);
	if (strlen(a) == alen && strlen(b) == blen)
		redirect(a, b);
	free(buf);
	return 0;
}
