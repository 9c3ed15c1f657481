/*
 * Unit tests of lib/conf: defaults, the rfpipe.yaml schema, endpoints
 * inheriting the top-level settings, budgets, and errors as "file:line".
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/config/conf.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/unit-conf.XXXXXX";
static char path[256];

/* Write yaml to rfpipe.yaml and load it over fresh defaults. */
static int
load(struct conf *c, const char *yaml, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");

	fputs(yaml, f);
	fclose(f);
	conf_init(c);
	err[0] = '\0';
	return conf_load(c, path, err, errlen);
}

static void
test_defaults(void)
{
	struct conf c;

	conf_init(&c);
	ok(c.concurrency == 8 && c.max_attempts == 5 && c.base == 0.5 &&
	    c.cap == 30 && c.max_retry_after == 3600 && c.max_redirects == 5,
	    "defaults: concurrency 8, 5 attempts, base 0.5, cap 30");
	ok(c.budget == -1 && c.budget_x == 3, "defaults: budget is 3x");
	ok(conf_budget_total(&c, 10) == 30, "defaults: 10 admitted -> 30");
	ok(c.neps == 0 && conf_endpoint(&c, "any") == &c.defaults,
	    "defaults: an unlisted endpoint gets the defaults");
	conf_free(&c);
}

static void
test_good(void)
{
	struct conf c;
	const struct conf_ep *e;
	char err[512];
	int rc;

	rc = load(&c,
	    "concurrency: 16\n"
	    "max_attempts: 7\n"
	    "base: 250ms\n"
	    "cap: 1m30s\n"
	    "budget: 3x\n"
	    "max_retry_after: 600\n"
	    "seed: 1234\n"
	    "timeout: 2m\n"
	    "deadline: \"06:00\"\n"
	    "burst: 4\n"
	    "rate: 2.5\n"
	    "on_open: dead\n"
	    "body_root: /srv/bodies\n"
	    "breaker:\n"
	    "  failures: 3\n"
	    "  cooldown: 10s\n"
	    "endpoints:\n"
	    "  nih:\n"
	    "    concurrency: 2\n"
	    "    idempotency_keys: true\n"
	    "  grants:\n"
	    "    breaker:\n"
	    "      failures: 9\n"
	    "  nsf:\n",
	    err, sizeof(err));
	ok(rc == 0, "good: loads (%s)", err);
	ok(c.concurrency == 16 && c.max_attempts == 7,
	    "good: integers");
	ok(fabs(c.base - 0.25) < 1e-9 && c.cap == 90 && c.timeout == 120,
	    "good: durations with units");
	ok(c.budget == -1 && c.budget_x == 3, "good: budget 3x");
	ok(c.seed == 1234 && c.max_retry_after == 600, "good: seed");
	ok(c.deadline != NULL && strcmp(c.deadline, "06:00") == 0,
	    "good: deadline kept as written");
	ok(c.on_open_dead == 1, "good: on_open dead");
	ok(c.body_root != NULL && strcmp(c.body_root, "/srv/bodies") == 0,
	    "good: body_root");
	ok(c.defaults.burst == 4 && c.defaults.rate == 2.5 &&
	    c.defaults.breaker.failures == 3 && c.defaults.breaker.cooldown ==
	    10, "good: top-level endpoint defaults");
	ok(c.neps == 3, "good: three endpoints");
	e = conf_endpoint(&c, "nih");
	ok(e->concurrency == 2 && e->idempotency_keys == 1 && e->burst == 4 &&
	    e->rate == 2.5 && e->breaker.failures == 3,
	    "good: nih has its own settings and inherits the rest");
	e = conf_endpoint(&c, "grants");
	ok(e->breaker.failures == 9 && e->breaker.cooldown == 10,
	    "good: a nested breaker key overrides one field only");
	e = conf_endpoint(&c, "nsf");
	ok(e != &c.defaults && e->burst == 4,
	    "good: an empty endpoint entry takes the defaults");
	ok(conf_endpoint(&c, "other") == &c.defaults,
	    "good: an unlisted endpoint gets the defaults");
	conf_free(&c);
	ok(c.neps == 0 && c.eps == NULL && c.deadline == NULL,
	    "conf_free: clears what it freed");

	rc = load(&c, "budget: 900\n", err, sizeof(err));
	ok(rc == 0 && c.budget == 900 && conf_budget_total(&c, 5) == 900,
	    "good: an absolute budget");
	conf_free(&c);
	rc = load(&c, "", err, sizeof(err));
	ok(rc == 0 && c.max_attempts == 5, "good: an empty file is defaults");
	conf_free(&c);
}

static void
test_errors(void)
{
	static const struct {
		const char *yaml, *want;
	} bad[] = {
		{ "base: 1\n# comment\nmax_atempts: 3\n",
		    ":3: unknown key \"max_atempts\"" },
		{ "max_attempts: x\n",
		    ":1: key \"max_attempts\": expected an integer from 1 to "
		    "1000" },
		{ "max_attempts: 0\n",
		    ":1: key \"max_attempts\": expected an integer from 1 to "
		    "1000" },
		{ "max_attempts: 2.5\n",
		    ":1: key \"max_attempts\": expected an integer" },
		{ "\n\nbase: soon\n",
		    ":3: key \"base\": expected a duration such as 30 or "
		    "\"1m30s\"" },
		{ "base: -1\n", ":1: key \"base\": out of range" },
		{ "cap: 2d\n", ":1: key \"cap\": out of range" },
		{ "rate: fast\n", ":1: key \"rate\": expected a number" },
		{ "budget: lots\n",
		    ":1: key \"budget\": expected a count or a multiple such as "
		    "\"3x\"" },
		{ "budget: -5\n", ":1: key \"budget\": expected a count" },
		{ "on_open: maybe\n",
		    ":1: key \"on_open\": expected \"wait\" or \"dead\"" },
		{ "seed: -1\n",
		    ":1: key \"seed\": expected a non-negative integer" },
		{ "ca_file: 5\n", ":1: key \"ca_file\": expected a string" },
		{ "breaker: 5\n", ":1: key \"breaker\": expected a mapping" },
		{ "breaker:\n  failurez: 3\n", ":2: unknown key \"failurez\"" },
		{ "endpoints: [nih]\n",
		    ":1: key \"endpoints\": expected a mapping of endpoint "
		    "names" },
		{ "endpoints:\n  nih: 5\n",
		    ":2: key \"nih\": expected a mapping" },
		{ "endpoints:\n  nih:\n    concurency: 2\n",
		    ":3: unknown key \"concurency\"" },
		{ "endpoints:\n  nih:\n    idempotency_keys: 1\n",
		    ":3: key \"idempotency_keys\": expected true or false" },
		{ "endpoints:\n  nih:\n    breaker:\n      window: 0\n",
		    ":4: key \"window\": expected an integer from 1 to 100000" },
		{ "parse: pdftotext\n",
		    ":1: key \"parse\": expected a mapping or null" },
		{ "parse:\n  timeout: 5\n",
		    ":1: key \"parse\": missing key \"command\"" },
		{ "parse:\n  command: \"jq -e .\"\n",
		    ":2: key \"command\": expected a list of 1 to 256 strings" },
		{ "parse:\n  command: []\n",
		    ":2: key \"command\": expected a list of 1 to 256 strings" },
		{ "parse:\n  command: [\"\", x]\n",
		    ":2: key \"command\": expected the program's name first" },
		{ "parse:\n  command: [jq, 5]\n",
		    ":2: key \"command\": expected a list of strings" },
		{ "endpoints:\n  nsf:\n    parse: {command: [x], timeot: 1}\n",
		    ":3: unknown key \"timeot\"" },
		{ "parse: {command: [x], concurrency: 0}\n",
		    ":1: key \"concurrency\": expected an integer from 1 to "
		    "4096" },
		{ "base: 1\nbase: 2\n", ":2: duplicate key \"base\"" },
		{ "base: [1\n", ":" },
	};
	struct conf c;
	char err[512], want[600];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = load(&c, bad[i].yaml, err, sizeof(err));
		snprintf(want, sizeof(want), "%s%s", path, bad[i].want);
		ok(rc == -1 && strncmp(err, want, strlen(want)) == 0,
		    "errors: %s", err);
		if (rc != -1 || strncmp(err, want, strlen(want)) != 0)
			printf("#   want prefix: %s\n", want);
		conf_free(&c);
	}
	conf_init(&c);
	rc = conf_load(&c, "/nonexistent/rfpipe.yaml", err, sizeof(err));
	ok(rc == -1 && strcmp(err, "open /nonexistent/rfpipe.yaml: No such "
	    "file or directory") == 0, "errors: a missing file: %s", err);
	conf_free(&c);
}

/* Issue #24: the one bound on waits. */
static void
test_wait(void)
{
	ok(!conf_wait_past(3600, 3600) && !conf_wait_past(0, 3600) &&
	    !conf_wait_past(-5, 3600), "wait: up to the bound is waited");
	ok(conf_wait_past(3600.001, 3600) && conf_wait_past(1e300, 3600),
	    "wait: past it is not");
	ok(conf_wait_past(INFINITY, 3600) && conf_wait_past(NAN, 3600),
	    "wait: nor infinity, nor NaN");
}

static void
test_parse(void)
{
	struct conf c;
	const struct conf_ep *e;
	char err[512];
	int rc;

	conf_init(&c);
	ok(!conf_has_parse(&c) && c.defaults.parse.timeout == 30 &&
	    c.defaults.parse.concurrency == 2,
	    "parse: none by default; timeout 30, concurrency 2");
	conf_free(&c);
	rc = load(&c,
	    "parse: {command: [jq, -e, .id], timeout: 5s}\n"
	    "endpoints:\n"
	    "  nsf:\n"
	    "    parse:\n"
	    "      command: [pdftotext, -layout, \"-\", \"-\"]\n"
	    "      concurrency: 3\n"
	    "      output_max: 1000\n"
	    "  nih:\n"
	    "    parse: {timeout: 1m}\n"
	    "  grants:\n"
	    "    parse: null\n", err, sizeof(err));
	ok(rc == 0, "parse: loads (%s)", err);
	ok(conf_has_parse(&c), "parse: conf_has_parse");
	e = conf_endpoint(&c, "nsf");
	ok(e->parse.command != NULL &&
	    strcmp(e->parse.command[0], "pdftotext") == 0 &&
	    strcmp(e->parse.command[3], "-") == 0 &&
	    e->parse.command[4] == NULL && e->parse.concurrency == 3 &&
	    e->parse.output_max == 1000 && e->parse.timeout == 5,
	    "parse: an endpoint's own command, over the inherited timeout");
	e = conf_endpoint(&c, "nih");
	ok(e->parse.command != NULL && strcmp(e->parse.command[0], "jq") ==
	    0 && e->parse.timeout == 60 && e->parse.concurrency == 2,
	    "parse: an endpoint inherits the command and sets its timeout");
	ok(conf_endpoint(&c, "grants")->parse.command == NULL,
	    "parse: null turns it off for an endpoint");
	ok(conf_endpoint(&c, "other")->parse.command != NULL,
	    "parse: an unlisted endpoint gets the top-level parse");
	conf_free(&c);
	rc = load(&c, "endpoints:\n  nsf:\n    parse: {command: [x]}\n", err,
	    sizeof(err));
	ok(rc == 0 && conf_has_parse(&c) &&
	    conf_endpoint(&c, "other")->parse.command == NULL,
	    "parse: one endpoint's parse is only that endpoint's");
	conf_free(&c);
}

static void
test_budget(void)
{
	struct conf c;

	conf_init(&c);
	ok(conf_budget(&c, "2x") == 0 && conf_budget_total(&c, 5) == 10,
	    "budget: 2x of 5 admitted is 10");
	ok(conf_budget(&c, "2.5x") == 0 && conf_budget_total(&c, 3) == 8,
	    "budget: 2.5x of 3 is 8 (rounded up)");
	ok(conf_budget(&c, "0x") == 0 && conf_budget_total(&c, 100) == 0,
	    "budget: 0x is none");
	ok(conf_budget(&c, "900") == 0 && conf_budget_total(&c, 5) == 900,
	    "budget: an absolute count ignores admitted");
	ok(conf_budget(&c, "0") == 0 && conf_budget_total(&c, 5) == 0,
	    "budget: 0 is none");
	ok(conf_budget(&c, "3y") == -1, "budget: 3y is refused");
	ok(conf_budget(&c, "x") == -1, "budget: x alone is refused");
	ok(conf_budget(&c, "") == -1, "budget: empty is refused");
	ok(conf_budget(&c, "-1") == -1, "budget: negative is refused");
	ok(conf_budget(&c, "-1x") == -1, "budget: negative multiple refused");
	ok(conf_budget(&c, " 3x") == -1, "budget: leading space refused");
	ok(conf_budget(&c, "1e3") == -1, "budget: 1e3 is refused");
	ok(conf_budget(&c, "3") == 0 && conf_budget(&c, "junk") == -1 &&
	    conf_budget_total(&c, 1) == 3,
	    "budget: a refused value leaves the last good one");
	conf_free(&c);
}

/* transient: and permanent: lists, top-level and per endpoint, and flags. */
static void
test_statuses(void)
{
	struct conf c;
	const struct conf_ep *e;
	char err[512];
	int rc;

	rc = load(&c,
	    "transient: [408, \"520-522\"]\n"
	    "endpoints:\n"
	    "  a:\n"
	    "    permanent: [521]\n"
	    "    transient: [400]\n", err, sizeof(err));
	ok(rc == 0, "statuses: lists load (%s)", err);
	e = conf_endpoint(&c, "other");
	ok(e->status_class[408] == CONF_TRANSIENT &&
	    e->status_class[520] == CONF_TRANSIENT &&
	    e->status_class[522] == CONF_TRANSIENT &&
	    e->status_class[523] == 0 && e->status_class[400] == 0,
	    "statuses: top-level list and range for an unlisted endpoint");
	e = conf_endpoint(&c, "a");
	ok(e->status_class[521] == CONF_PERMANENT &&
	    e->status_class[520] == CONF_TRANSIENT &&
	    e->status_class[400] == CONF_TRANSIENT,
	    "statuses: an endpoint inherits the top level and overrides it");
	ok(conf_statuses(&c, "521,400-401", CONF_TRANSIENT) == 0 &&
	    conf_endpoint(&c, "a")->status_class[521] == CONF_TRANSIENT &&
	    conf_endpoint(&c, "x")->status_class[401] == CONF_TRANSIENT,
	    "statuses: a flag's list wins in every endpoint");
	ok(conf_statuses(&c, "200", CONF_TRANSIENT) == -1 &&
	    conf_statuses(&c, "", CONF_TRANSIENT) == -1 &&
	    conf_statuses(&c, "4xx", CONF_TRANSIENT) == -1 &&
	    conf_statuses(&c, "600", CONF_TRANSIENT) == -1 &&
	    conf_statuses(&c, "503-502", CONF_TRANSIENT) == -1,
	    "statuses: 2xx, empty, words, 600 and a reversed range are refused");
	conf_free(&c);
	rc = load(&c, "permanent: [503]\ntransient: [\"500-504\"]\n", err,
	    sizeof(err));
	ok(rc == -1 && strstr(err, "a status is in both transient and "
	    "permanent") != NULL, "statuses: one status in both lists of a "
	    "mapping is an error (%s)", err);
	conf_free(&c);
	rc = load(&c, "transient: [200]\n", err, sizeof(err));
	ok(rc == -1 && strstr(err, ":1: key \"transient\"") != NULL,
	    "statuses: 2xx in a list is an error at its line (%s)", err);
	conf_free(&c);
}

int
main(void)
{
	if (mkdtemp(dir) == NULL)
		return 2;
	snprintf(path, sizeof(path), "%s/rfpipe.yaml", dir);
	test_defaults();
	test_good();
	test_errors();
	test_budget();
	test_parse();
	test_statuses();
	test_wait();
	unlink(path);
	rmdir(dir);
	return tap_done();
}
