/*
 * Unit tests of lib/doc: safe ids, manifest record checks and their
 * messages, endpoint keys, file-safe names, submissions and idempotency keys.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/record/doc.h"
#include "tests/unit/tap.h"

static void
test_ids(void)
{
	static const char *good[] = { "NIH-R01-001", "a", "0", "doc.v2",
		"x:y@z+1_2", NULL };
	static const char *bad[] = { "", "../x", "../../x", "..", ".hidden",
		"a/b", "/etc/passwd", "a\\b", "a b", "a\tb", "-rf", "_x",
		"a..b", "A..", "x/..", "caf\xc3\xa9", "a\nb", "a%2fb", "~root",
		"a.parsed", "NSF-1.parsed", "s.parsed.4000000", "a.parsed.b",
		"a.parsed.", NULL };
	char id[300];
	int i;

	for (i = 0; good[i] != NULL; i++)
		ok(doc_id_check(good[i]) == NULL, "id \"%s\" is safe", good[i]);
	for (i = 0; bad[i] != NULL; i++)
		ok(doc_id_check(bad[i]) != NULL, "id #%d is refused: %s", i,
		    doc_id_check(bad[i]) ? doc_id_check(bad[i]) : "(accepted)");
	ok(doc_id_check(NULL) != NULL, "a NULL id is refused");

	memset(id, 'a', sizeof(id));
	id[DOC_ID_MAX] = '\0';
	ok(doc_id_check(id) == NULL, "an id of 200 bytes is safe");
	id[DOC_ID_MAX] = 'a';
	id[DOC_ID_MAX + 1] = '\0';
	is_str(doc_id_check(id), "longer than 200 bytes",
	    "an id of 201 bytes is refused");
	is_str(doc_id_check(".hidden"), "must start with a letter or digit",
	    "the reason for .hidden");
	is_str(doc_id_check("a.parsed"), "ends in \".parsed\"",
	    "the reason for a.parsed: the name of a's parse");
	is_str(doc_id_check("s.parsed.4000000"), "contains \".parsed.\"",
	    "the reason for s.parsed.4000000: the name of a parse being written");
	ok(doc_id_check("a.parsed2") == NULL && doc_id_check("parsed") == NULL &&
	    doc_id_check("parsed.1") == NULL && doc_id_check("a.parsedx.1") == NULL,
	    "\".parsed\" is refused only at the end or between dots");
	is_str(doc_id_check("a/b"),
	    "may hold only letters, digits and ._-:@+", "the reason for a/b");
}

/* doc_check on a JSON text; returns the message or "" when it passes. */
static const char *
check(const char *text)
{
	static char err[300];
	json_error_t je;
	json_t *r = json_loads(text, 0, &je);

	if (r == NULL) {
		printf("# bad test JSON: %s\n", text);
		return "(bad test)";
	}
	err[0] = '\0';
	if (doc_check(r, err, sizeof(err)) == 0)
		err[0] = '\0';
	else if (err[0] == '\0')
		snprintf(err, sizeof(err), "(failed with no message)");
	json_decref(r);
	return err;
}

static void
test_check(void)
{
	static const struct {
		const char *rec, *msg;
	} cases[] = {
		{ "{\"id\":\"a\",\"url\":\"http://h/x\"}", "" },
		{ "{\"id\":\"a\",\"url\":\"HTTPS://h:8443/x?q=1\"}", "" },
		{ "{\"url\":\"http://h/x\"}", "missing field \"id\"" },
		{ "{\"id\":5,\"url\":\"http://h/x\"}",
		    "field \"id\": not a string" },
		{ "{\"id\":null,\"url\":\"http://h/x\"}",
		    "field \"id\": not a string" },
		{ "{\"id\":\"../../x\",\"url\":\"http://h/x\"}",
		    "field \"id\": unsafe id: must start with a letter or digit" },
		{ "{\"id\":\"a/b\",\"url\":\"http://h/x\"}",
		    "field \"id\": unsafe id: may hold only letters, digits and "
		    "._-:@+" },
		{ "{\"id\":\"a\"}", "missing field \"url\"" },
		{ "{\"id\":\"a\",\"url\":[\"http://h/\"]}",
		    "field \"url\": not a string" },
		{ "{\"id\":\"a\",\"url\":\"ftp://h/x\"}",
		    "field \"url\": unsupported scheme \"ftp\"" },
		{ "{\"id\":\"a\",\"url\":\"file:///etc/passwd\"}",
		    "field \"url\": unsupported scheme \"file\"" },
		{ "{\"id\":\"a\",\"url\":\"gopher://h/\"}",
		    "field \"url\": unsupported scheme \"gopher\"" },
		{ "{\"id\":\"a\",\"url\":\"h/x\"}",
		    "field \"url\": not an absolute URL" },
		{ "{\"id\":\"a\",\"url\":\"http:/nohost\"}",
		    "field \"url\": no \"//\" after \"http:\"" },
		{ "{\"id\":\"a\",\"url\":\"HTTPS:h/x\"}",
		    "field \"url\": no \"//\" after \"HTTPS:\"" },
		{ "{\"id\":\"a\",\"url\":\"\"}",
		    "field \"url\": not an absolute URL" },
		{ "{\"id\":\"a\",\"url\":\"http:///x\"}",
		    "field \"url\": has no host" },
		{ "{\"id\":\"a\",\"url\":\"http://u:p@h/x\"}",
		    "field \"url\": embeds credentials (use headers with ${NAME})" },
		{ "{\"id\":\"a\",\"url\":\"http://h:99999/x\"}",
		    "field \"url\": port \"99999\" is not a number from 1 to "
		    "65535" },
		{ "{\"id\":\"a\",\"url\":\"http://h:0\"}",
		    "field \"url\": port \"0\" is not a number from 1 to 65535" },
		{ "{\"id\":\"a\",\"url\":\"https://h:8o/x\"}",
		    "field \"url\": port \"8o\" is not a number from 1 to 65535" },
		{ "{\"id\":\"a\",\"url\":\"http://h:99999999999999999999999/\"}",
		    "field \"url\": port \"99999999999999999999\" is not a number "
		    "from 1 to 65535" },
		{ "{\"id\":\"a\",\"url\":\"http://h:65535/x?a=b:c\"}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://h:/x\"}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://[::1]:8080/x\"}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://[::1]/x\"}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://[::1]:70000/x\"}",
		    "field \"url\": port \"70000\" is not a number from 1 to "
		    "65535" },
		{ "{\"id\":\"a\",\"url\":\"http://[::1/x\"}",
		    "field \"url\": has an unclosed \"[\" in its host" },
		{ "{\"id\":\"a\",\"url\":\"http://h/a b\"}",
		    "field \"url\": contains whitespace or control characters" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\\r\\nX: y\"}",
		    "field \"url\": contains whitespace or control characters" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":\"post\"}",
		    "field \"method\": unsupported method \"post\"" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":\"TRACE\"}",
		    "field \"method\": unsupported method \"TRACE\"" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":1}",
		    "field \"method\": not a string" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":\"DELETE\"}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"headers\":[]}",
		    "field \"headers\": not an object" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"headers\":{\"X\":1}}",
		    "field \"headers\": \"X\" is not a string" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"headers\":{\"X:Y\":\"1\"}}",
		    "field \"headers\": \"X:Y\": bad header name" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"headers\":{\"\":\"1\"}}",
		    "field \"headers\": \"\": empty header name" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"headers\":"
		    "{\"X\":\"a\\r\\nEvil: 1\"}}",
		    "field \"headers\": \"X\": CR or LF in the value" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"headers\":"
		    "{\"X\":\"a\\nb\"}}",
		    "field \"headers\": \"X\": CR or LF in the value" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"headers\":"
		    "{\"Authorization\":\"Bearer ${KEY}\"}}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"body\":5}",
		    "field \"body\": not a string or JSON value" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":\"POST\","
		    "\"body\":{\"k\":1}}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"body\":{\"k\":1}}",
		    "field \"body\": given for a GET (no \"method\"), which sends "
		    "no body: a body goes only with \"method\" POST, PUT, PATCH or "
		    "DELETE" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":\"GET\","
		    "\"body\":\"x\"}", "field \"body\": given for a GET, which "
		    "sends no body: a body goes only with \"method\" POST, PUT, "
		    "PATCH or DELETE" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":\"HEAD\","
		    "\"body_file\":\"b\"}", "field \"body_file\": given for a "
		    "HEAD, which sends no body: a body goes only with \"method\" "
		    "POST, PUT, PATCH or DELETE" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"method\":\"PUT\","
		    "\"idempotent\":true,\"body_file\":\"b\"}", "" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"body_file\":true}",
		    "field \"body_file\": not a string" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"endpoint\":\"\"}",
		    "field \"endpoint\": not a string of 1 to 100 bytes" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"endpoint\":7}",
		    "field \"endpoint\": not a string of 1 to 100 bytes" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"expect\":\"pdf\"}",
		    "field \"expect\": not an object" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"idempotency_key\":"
		    "\"../k\"}", "field \"idempotency_key\": not a safe string" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"idempotency_key\":1}",
		    "field \"idempotency_key\": not a safe string" },
		{ "{\"id\":\"a\",\"url\":\"http://h/\",\"unknown\":{\"x\":1}}", "" },
	};
	size_t i;
	const char *got;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		got = check(cases[i].rec);
		ok(strcmp(got, cases[i].msg) == 0, "doc_check %s: %s",
		    cases[i].rec, *cases[i].msg ? cases[i].msg : "passes");
		if (strcmp(got, cases[i].msg) != 0)
			printf("#   got: %s\n", *got ? got : "(passes)");
	}
}

/* The endpoint of a record with only url: want, as what says. */
static void
endpoint_is(const char *url, const char *want, const char *what)
{
	json_t *r = json_pack("{s:s}", "url", url);
	char *s = doc_endpoint(r);

	is_str(s, want, what);
	free(s);
	json_decref(r);
}

static void
test_names(void)
{
	json_t *r;
	char *s, *t;
	const char *p;
	int bad;

	r = json_pack("{s:s}", "url", "HTTP://Portal.EXAMPLE.org:8080/a/b?c");
	s = doc_endpoint(r);
	is_str(s, "portal.example.org:8080", "endpoint: host:port, lowercased");
	free(s);
	json_object_set_new(r, "endpoint", json_string("NIH"));
	s = doc_endpoint(r);
	is_str(s, "NIH", "endpoint: the endpoint field wins");
	free(s);
	json_decref(r);
	endpoint_is("https://h.org?x=1", "h.org", "endpoint: stops at ?");
	/* One server, one key: its limits are not doubled by a spelling. */
	endpoint_is("http://H.org:80/a", "h.org",
	    "endpoint: http's default port is dropped");
	endpoint_is("HTTPS://h.org.:443/a", "h.org",
	    "endpoint: https's default port and a root dot");
	endpoint_is("http://h.org.:8080/a", "h.org:8080",
	    "endpoint: a root dot before a port");
	endpoint_is("http://h.org.:/a", "h.org",
	    "endpoint: an empty port is the default, and the root dot "
	    "before it goes");
	endpoint_is("http://[::1]:/a", "[::1]",
	    "endpoint: an empty port after an IPv6 literal");
	endpoint_is("http://[::1.]:8080/a", "[::1.]:8080",
	    "endpoint: no dot dropped inside brackets");
	endpoint_is("https://[::1]:80/a", "[::1]:80",
	    "endpoint: another scheme's default is a port");

	s = doc_safe_name("nih");
	is_str(s, "nih", "safe_name: a plain name is kept");
	free(s);
	s = doc_safe_name("127.0.0.1:8080");
	t = doc_safe_name("127.0.0.1_8080");
	ok(strchr(s, ':') == NULL && strncmp(s, "127.0.0.1_8080-", 15) == 0,
	    "safe_name: ':' replaced, a hash appended (%s)", s);
	ok(strcmp(s, t) != 0, "safe_name: names that sanitise alike differ");
	free(s);
	free(t);
	s = doc_safe_name("../../etc");
	ok(strchr(s, '/') == NULL && s[0] != '.',
	    "safe_name: no '/' and no leading '.' (%s)", s);
	free(s);
	s = doc_safe_name("");
	ok(s[0] != '\0', "safe_name: empty becomes a hash (%s)", s);
	free(s);
	{
		char longname[300];

		memset(longname, 'e', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		s = doc_safe_name(longname);
		ok(strlen(s) <= 110, "safe_name: long names are cut (%zu)",
		    strlen(s));
		free(s);
	}

	r = json_object();
	ok(!doc_is_submission(r), "submission: no method is a GET");
	json_object_set_new(r, "method", json_string("GET"));
	ok(!doc_is_submission(r), "submission: GET is not");
	json_object_set_new(r, "method", json_string("HEAD"));
	ok(!doc_is_submission(r), "submission: HEAD is not");
	json_object_set_new(r, "method", json_string("POST"));
	ok(doc_is_submission(r), "submission: POST is");
	json_object_set_new(r, "method", json_string("DELETE"));
	ok(doc_is_submission(r), "submission: DELETE is");
	json_object_set_new(r, "idempotent", json_true());
	ok(!doc_is_submission(r), "submission: not when idempotent is true");
	json_decref(r);

	r = json_pack("{s:s, s:s}", "id", "G-1", "cycle", "2026-A");
	s = doc_idem_key(r);
	t = doc_idem_key(r);
	is_str(s, t, "idem_key: stable for the same id and cycle");
	bad = strncmp(s, "rfp-", 4) != 0 || strlen(s) != 36;
	for (p = s + 4; *p && !bad; p++)
		bad = !isxdigit((unsigned char)*p);
	ok(!bad && doc_id_check(s) == NULL,
	    "idem_key: rfp- and 32 hex digits, a safe string (%s)", s);
	free(t);
	json_object_set_new(r, "cycle", json_string("2026-B"));
	t = doc_idem_key(r);
	ok(strcmp(s, t) != 0, "idem_key: another cycle, another key");
	free(t);
	json_object_set_new(r, "id", json_string("G-2"));
	json_object_set_new(r, "cycle", json_string("2026-A"));
	t = doc_idem_key(r);
	ok(strcmp(s, t) != 0, "idem_key: another id, another key");
	free(t);
	json_object_set_new(r, "idempotency_key", json_string("given-1"));
	t = doc_idem_key(r);
	is_str(t, "given-1", "idem_key: a given key is used as is");
	free(t);
	free(s);
	json_decref(r);
}

int
main(void)
{
	test_ids();
	test_check();
	test_names();
	return tap_done();
}
