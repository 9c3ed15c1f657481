/*
 * Unit tests of lib/accounts/ledger's conditional append: the look and the
 * intent under one lock, so that of two processes that found a key unsent
 * only one sends it; a torn entry is a state like any other.
 */
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/ledger.h"
#include "lib/base/x.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/unit-ledger.XXXXXX";

/* Look key up in a ledger of its own, then try the intent: 0, 1 or -1. */
static int
look_then_intent(const char *path, const char *key, int pause_us)
{
	struct ledger *l;
	enum ledger_state st, now_st;
	json_t *e, *seen, *now;
	char err[256];
	int rc;

	if ((l = ledger_open(NULL, path, err, sizeof(err))) == NULL)
		return -1;
	if (ledger_lookup(l, key, &st, &e, err, sizeof(err)) == -1)
		return -1;
	seen = e ? json_deep_copy(e) : NULL;
	usleep((useconds_t)pause_us);	/* the other looks meanwhile */
	rc = ledger_append_if(l, key, "id", LEDGER_INTENT, NULL, st, seen,
	    &now_st, &now, err, sizeof(err));
	json_decref(seen);
	json_decref(now);
	ledger_close(l);
	return rc;
}

static void
race(void)
{
	char *path = xasprintf("%s/race.ndjson", dir);
	int i, st, sent = 0, kept = 0;
	pid_t p[4];

	for (i = 0; i < 4; i++)
		if ((p[i] = fork()) == 0)
			_exit(look_then_intent(path, "key-1", 200000) == 0 ?
			    0 : 1);
	for (i = 0; i < 4; i++) {
		waitpid(p[i], &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			sent++;
		else
			kept++;
	}
	ok(sent == 1 && kept == 3, "four processes that all found key-1 "
	    "unsent: one writes its intent (%d), three are told (%d)", sent,
	    kept);
	free(path);
}

static void
states(void)
{
	char *path = xasprintf("%s/states.ndjson", dir), err[256];
	struct ledger *l = ledger_open(NULL, path, err, sizeof(err));
	enum ledger_state st, now_st;
	json_t *e, *now;
	FILE *f;

	ok(ledger_append_if(l, "k", "id", LEDGER_INTENT, NULL, LEDGER_NONE,
	    NULL, &now_st, &now, err, sizeof(err)) == 0,
	    "a key nobody wrote: the intent is written");
	ok(ledger_append_if(l, "k", "id", LEDGER_INTENT, NULL, LEDGER_NONE,
	    NULL, &now_st, &now, err, sizeof(err)) == 1 &&
	    now_st == LEDGER_INTENT && now != NULL,
	    "... and not again by one that saw it unwritten: told intent");
	json_decref(now);
	ledger_lookup(l, "k", &st, &e, err, sizeof(err));
	e = json_deep_copy(e);
	ok(ledger_append_if(l, "k", "id", LEDGER_INTENT, NULL, st, e,
	    &now_st, &now, err, sizeof(err)) == 0,
	    "one that saw the intent as it stands (confirmed unsent) writes");
	json_decref(e);
	ledger_close(l);
	/* A torn entry, as a crash leaves it. */
	f = fopen(path, "a");
	fputs("{\"key\":\"t\",\"id\":\"x\",\"ev", f);
	fclose(f);
	l = ledger_open(NULL, path, err, sizeof(err));
	ok(ledger_lookup(l, "t", &st, &e, err, sizeof(err)) == 0 &&
	    st == LEDGER_AMBIGUOUS && e == NULL, "a torn entry: ambiguous");
	ok(ledger_append_if(l, "t", "x", LEDGER_INTENT, NULL, LEDGER_NONE,
	    NULL, &now_st, &now, err, sizeof(err)) == 1 &&
	    now_st == LEDGER_AMBIGUOUS,
	    "... not taken for a key nobody wrote");
	ok(ledger_append_if(l, "t", "x", LEDGER_INTENT, NULL,
	    LEDGER_AMBIGUOUS, NULL, &now_st, &now, err, sizeof(err)) == 0,
	    "... and written over by one that saw it so (confirmed unsent)");
	ledger_close(l);
	free(path);
}

int
main(void)
{
	char *cmd;

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	race();
	states();
	cmd = xasprintf("rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	free(cmd);
	printf("1..%d\n", tap_n);
	return tap_fail != 0;
}
