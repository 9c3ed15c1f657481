/*
 * Fuzz lib/ledger: the input is the text of a ledger.ndjson.
 *
 * ledger_scan folds it into keys: it must count every line, give each key
 * a known state, a line within the text and (unless the line was torn) the
 * entry that names the key, and fold the same in two pieces cut at a
 * newline as in one.
 *
 * A text without torn lines (which ledger.c reports on stderr) is also
 * written as RUNDIR/state/ledger.ndjson, in a temporary directory under
 * /dev/shm (fdatasync is cheap there) or $TMPDIR: ledger_lookup must agree
 * with the scan, and after ledger_append of a success the key must read
 * back as a success.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/ledger.h"
#include "tests/fuzz/fuzz.h"

static char rundir[256], statedir[300], file[350];
static long ntorn, nlines;

static void
cleanup(void)
{
	unlink(file);
	rmdir(statedir);
	rmdir(rundir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");

	(void)argc;
	(void)argv;
	if (access("/dev/shm", W_OK) == 0)
		tmp = "/dev/shm";
	else if (tmp == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(rundir, sizeof(rundir), "%s/rfp-fuzz-ledger.XXXXXX", tmp);
	if (mkdtemp(rundir) == NULL) {
		perror("rfp-fuzz: mkdtemp");
		abort();
	}
	snprintf(statedir, sizeof(statedir), "%s/state", rundir);
	snprintf(file, sizeof(file), "%s/ledger.ndjson", statedir);
	if (mkdir(statedir, 0700) == -1) {
		perror("rfp-fuzz: mkdir");
		abort();
	}
	atexit(cleanup);
	return 0;
}

static void
torn(long line, const char *key)
{
	ntorn++;
	FUZZ_CHECK(line >= 1 && line <= nlines, "a torn line is in the text");
	FUZZ_CHECK(key == NULL || strchr(key, '\n') == NULL,
	    "a torn line's key lies within the line");
}

static enum ledger_state
state_named(const char *name)
{
	int i;

	for (i = LEDGER_NONE; i <= LEDGER_AMBIGUOUS; i++)
		if (name != NULL && strcmp(ledger_name(i), name) == 0)
			return (enum ledger_state)i;
	fuzz_fail("state_named", "every key has a known state", __FILE__,
	    __LINE__);
}

static void
check_keys(json_t *keys, long lineno)
{
	const char *k, *ek;
	json_t *v, *entry;
	long line;

	json_object_foreach(keys, k, v) {
		(void)state_named(json_string_value(json_object_get(v,
		    "state")));
		line = (long)json_integer_value(json_object_get(v, "line"));
		FUZZ_CHECK(line >= 1 && line <= lineno,
		    "a key's line is in the text");
		entry = json_object_get(v, "entry");
		FUZZ_CHECK(entry != NULL, "a key has an entry, maybe null");
		if (json_is_null(entry))
			continue;
		ek = json_string_value(json_object_get(entry, "key"));
		FUZZ_CHECK(ek != NULL && strcmp(ek, k) == 0,
		    "a key's entry names the key");
	}
}

/* Through the file: lookup agrees with the scan; an append is read back. */
static void
through_file(const uint8_t *data, size_t size, json_t *keys)
{
	struct ledger *l;
	enum ledger_state st;
	json_t *entry, *extra, *k;
	const char *key = "rfp-fuzz", *first;
	void *it;
	char err[512];
	int fd;

	if ((fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1) {
		perror("rfp-fuzz: open ledger");
		abort();
	}
	fuzz_fill(fd, data, size);
	close(fd);
	if ((it = json_object_iter(keys)) != NULL &&
	    (first = json_object_iter_key(it)) != NULL)
		key = first;
	err[0] = '\0';
	l = ledger_open(rundir, NULL, err, sizeof(err));
	/*
	 * A first line that is no entry (nor an entry's torn start) is no
	 * ledger, and is refused so: nothing is appended to it.
	 */
	FUZZ_CHECK(l != NULL || strstr(err, "not a ledger") != NULL,
	    "ledger_open on a writable run dir, unless it is no ledger");
	if (l == NULL)
		return;
	FUZZ_CHECK(ledger_lookup(l, key, &st, &entry, err, sizeof(err)) == 0,
	    "ledger_lookup");
	k = json_object_get(keys, key);
	FUZZ_CHECK(st == (k ? state_named(json_string_value(json_object_get(k,
	    "state"))) : LEDGER_NONE), "lookup agrees with the scan");
	extra = json_pack("{s:i}", "status", 200);
	FUZZ_CHECK(ledger_append(l, key, "fuzz-id", LEDGER_SUCCESS, extra,
	    err, sizeof(err)) == 0, "ledger_append");
	json_decref(extra);
	FUZZ_CHECK(ledger_lookup(l, key, &st, &entry, err, sizeof(err)) == 0 &&
	    st == LEDGER_SUCCESS && entry != NULL,
	    "an appended success reads back");
	FUZZ_CHECK(json_integer_value(json_object_get(entry, "status")) == 200,
	    "an appended entry keeps its extra fields");
	ledger_close(l);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *nl;
	json_t *keys = json_object(), *two;
	long lineno = 0, lineno2 = 0;
	size_t i, cut;

	nlines = 0;
	for (i = 0; i < size; i++)
		nlines += data[i] == '\n';
	nlines += size > 0 && data[size - 1] != '\n';
	ntorn = 0;
	ledger_scan(keys, buf, size, &lineno, torn);
	FUZZ_CHECK(lineno == nlines, "every line is counted");
	check_keys(keys, lineno);

	if ((nl = memchr(buf, '\n', size)) != NULL) {
		cut = (size_t)(nl - buf) + 1;
		two = json_object();
		ledger_scan(two, buf, cut, &lineno2, NULL);
		ledger_scan(two, buf + cut, size - cut, &lineno2, NULL);
		FUZZ_CHECK(lineno2 == lineno && json_equal(keys, two),
		    "a text folds the same in two pieces");
		json_decref(two);
	}

	if (ntorn == 0)
		through_file(data, size, keys);
	json_decref(keys);
	return 0;
}
