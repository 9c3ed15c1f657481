/*
 * Fuzz lib/conf: the input is an rfpipe.yaml written to a memfd and loaded
 * with conf_load through /proc/self/fd/N, as a stage loads its --config.
 * A load must leave every setting inside the schema's range; a failure
 * must give a "file:line: ..." message.  conf_free always runs,
 * since a failed load may have allocated endpoints already.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/conf.h"
#include "tests/fuzz/fuzz.h"

static int fd = -1;
static char path[64];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fd = fuzz_memfd();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

static void
check_breaker(const struct conf_breaker *b)
{
	FUZZ_CHECK(b->failures >= 1 && b->failures <= 1000000,
	    "breaker.failures in range");
	FUZZ_CHECK(b->rate >= 0 && b->rate <= 100, "breaker.rate in range");
	FUZZ_CHECK(b->window >= 1 && b->window <= 100000,
	    "breaker.window in range");
	FUZZ_CHECK(b->min_calls >= 1 && b->min_calls <= 1000000,
	    "breaker.min_calls in range");
	FUZZ_CHECK(b->cooldown >= 0.001 && b->cooldown <= 86400,
	    "breaker.cooldown in range");
	FUZZ_CHECK(b->cooldown_max >= 0 && b->cooldown_max <= 604800,
	    "breaker.cooldown_max in range");
	FUZZ_CHECK(b->max_open >= 0 && b->max_open <= 31536000,
	    "breaker.max_open in range");
}

static void
check_ep(const struct conf_ep *e)
{
	FUZZ_CHECK(e->concurrency == 0 || (e->concurrency >= 1 &&
	    e->concurrency <= 4096), "endpoint concurrency in range");
	FUZZ_CHECK(e->rate >= 0 && e->rate <= 1e6, "endpoint rate in range");
	FUZZ_CHECK(e->burst >= 0 && e->burst <= 100000,
	    "endpoint burst in range");
	check_breaker(&e->breaker);
}

static void
check(const struct conf *c)
{
	size_t i;

	FUZZ_CHECK(c->concurrency >= 1 && c->concurrency <= 4096,
	    "concurrency in range");
	FUZZ_CHECK(c->max_attempts >= 1 && c->max_attempts <= 1000,
	    "max_attempts in range");
	FUZZ_CHECK(c->base >= 0.001 && c->base <= 3600, "base in range");
	FUZZ_CHECK(c->cap >= 0.001 && c->cap <= 86400, "cap in range");
	FUZZ_CHECK(c->budget >= -1 && c->budget_x >= 0 &&
	    c->budget_x <= 1000, "budget in range");
	FUZZ_CHECK(conf_budget_total(c, 1000000) >= 0,
	    "the budget total is a count");
	FUZZ_CHECK(c->max_retry_after >= 0 && c->max_retry_after <= 31536000,
	    "max_retry_after in range");
	FUZZ_CHECK(c->connect_timeout >= 0.001 && c->connect_timeout <= 3600,
	    "connect_timeout in range");
	FUZZ_CHECK(c->timeout >= 0.001 && c->timeout <= 86400,
	    "timeout in range");
	FUZZ_CHECK(c->max_body >= 1 && c->max_body <= 1L << 40,
	    "max_body in range");
	FUZZ_CHECK(c->max_redirects >= 0 && c->max_redirects <= 50,
	    "max_redirects in range");
	check_ep(&c->defaults);
	for (i = 0; i < c->neps; i++) {
		FUZZ_CHECK(c->eps[i].name != NULL, "an endpoint has a name");
		FUZZ_CHECK(conf_endpoint(c, c->eps[i].name) == &c->eps[i],
		    "an endpoint is found by its name");
		check_ep(&c->eps[i]);
	}
	FUZZ_CHECK(c->neps > 0 || conf_endpoint(c, "x") == &c->defaults,
	    "an unlisted endpoint gets the defaults");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf c;
	char err[512];

	fuzz_fill(fd, data, size);
	conf_init(&c);
	err[0] = '\0';
	if (conf_load(&c, path, err, sizeof(err)) == 0)
		check(&c);
	else {
		FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0 &&
		    err[strlen(path)] == ':', "a failed load says "
		    "\"file:line: ...\"");
	}
	conf_free(&c);
	return 0;
}
