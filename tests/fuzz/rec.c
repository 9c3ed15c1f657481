/*
 * Fuzz lib/rec.  The input is a byte stream read as NDJSON lines.
 *
 * Pass one reads it from a memfd under the stage cap and does with each
 * line what loop_run (cmd/loop.c) does: rec_parse, or rec_bad_input for an unusable
 * line, then rec_out_json and a flush to /dev/null.  Every record must
 * dump as exactly one line and parse back equal (one line in, one record
 * out).
 *
 * Pass two reads it again through an fd served from memory by a wrapped
 * read(2) (the link uses -Wl,--wrap=read) that returns short reads and
 * EINTR, under a 64-byte cap, to reach the buffer compaction, growth and
 * oversized-line paths.
 *
 * Both passes compare every line and line number with a plain split of
 * the input on '\n'.
 */
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/record/rec.h"
#include "tests/fuzz/fuzz.h"

#define SHORT_CAP	64
#define FEED_FD		1000003	/* never opened: served by __wrap_read */

ssize_t	__real_read(int, void *, size_t);
ssize_t	__wrap_read(int, void *, size_t);

static int memfd = -1, devnull = -1;

static struct {
	const uint8_t	*p;
	size_t		 left;
	uint32_t	 state;
} feed;

/* Short reads, with an occasional EINTR, for the reader in pass two. */
ssize_t
__wrap_read(int fd, void *buf, size_t n)
{
	static const size_t chunks[] = { 1, 2, 3, 63, 64, 65, 4095, 70000 };
	size_t k;

	if (fd != FEED_FD)
		return __real_read(fd, buf, n);
	feed.state = feed.state * 1103515245U + 12345U;
	k = (feed.state >> 16) % 9;
	if (k == 8) {
		errno = EINTR;
		return -1;
	}
	if (n > chunks[k])
		n = chunks[k];
	if (n > feed.left)
		n = feed.left;
	memcpy(buf, feed.p, n);
	feed.p += n;
	feed.left -= n;
	return (ssize_t)n;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = fuzz_memfd();
	if ((devnull = open("/dev/null", O_WRONLY)) == -1) {
		perror("rfp-fuzz: open /dev/null");
		abort();
	}
	return 0;
}

/* What loop_run does with one line, plus the round trip of its record. */
static void
handle(const char *line, size_t len, long lineno, int toolong)
{
	char err[256], *dump, *jd;
	json_t *rec, *back;
	struct rec_out *out;
	size_t dlen;

	err[0] = '\0';
	if (toolong)
		rec = rec_bad_input("fuzz", lineno, "line too long", line, len);
	else if ((rec = rec_parse(line, len, err, sizeof(err))) == NULL) {
		FUZZ_CHECK(err[0] != '\0', "rec_parse gives a reason");
		rec = rec_bad_input("fuzz", lineno, err, line, len);
		FUZZ_CHECK(json_is_string(json_object_get(rec, "raw")),
		    "bad_input keeps the raw line");
	}
	FUZZ_CHECK(json_is_object(rec), "rec_parse gives an object");
	(void)rec_str(rec, "id");
	(void)rec_int(rec, "attempt", 0);
	(void)rec_num(rec, "status", 0);
	out = rec_out_new(devnull);
	FUZZ_CHECK(rec_out_json(out, rec) == 0 && rec_out_flush(out) == 0,
	    "rec_out_json to /dev/null");
	rec_out_free(out);
	dump = rec_dump(rec, &dlen);
	FUZZ_CHECK(dump != NULL && dlen > 0 && dump[dlen - 1] == '\n',
	    "rec_dump ends in a newline");
	FUZZ_CHECK(memchr(dump, '\n', dlen - 1) == NULL,
	    "a record is one line");
	jd = json_dumps(rec, JSON_COMPACT);
	FUZZ_CHECK(jd != NULL && strlen(jd) == dlen - 1 &&
	    memcmp(jd, dump, dlen - 1) == 0,
	    "rec_dump writes what json_dumps writes, byte for byte");
	free(jd);
	back = rec_parse(dump, dlen - 1, err, sizeof(err));
	FUZZ_CHECK(back != NULL && json_equal(rec, back),
	    "a written record reads back equal");
	json_decref(back);
	free(dump);
	json_decref(rec);
}

/*
 * Read the whole stream from fd under cap; with full set, handle each line
 * too.  Each line must be the next piece of data up to '\n' (less a '\r').
 */
static void
pass(int fd, size_t cap, const uint8_t *data, size_t size, int full)
{
	struct rec_reader *r = rec_reader_new(fd, cap);
	const uint8_t *p = data, *end = data + size, *nl;
	size_t raw, want, len;
	long lineno, n = 0;
	enum rec_rc rc;
	char *line;

	while ((rc = rec_next(r, &line, &len, &lineno)) != REC_EOF) {
		FUZZ_CHECK(rc == REC_LINE || rc == REC_TOOLONG,
		    "only lines, oversized lines and EOF from a file");
		FUZZ_CHECK(p < end, "no line past the end of the input");
		FUZZ_CHECK(lineno == ++n, "line numbers count every line");
		nl = memchr(p, '\n', (size_t)(end - p));
		raw = nl ? (size_t)(nl - p) : (size_t)(end - p);
		want = raw > 0 && p[raw - 1] == '\r' ? raw - 1 : raw;
		FUZZ_CHECK(line[len] == '\0', "a line is NUL-terminated");
		if (rc == REC_LINE) {
			FUZZ_CHECK(len <= cap, "a line is within the cap");
			FUZZ_CHECK(len == want && memcmp(line, p, len) == 0,
			    "a line is the input up to the newline");
		} else
			FUZZ_CHECK(raw > cap, "only a line over the cap is "
			    "oversized");
		if (full && (rc == REC_TOOLONG || len > 0))
			handle(line, len, lineno, rc == REC_TOOLONG);
		p = nl ? nl + 1 : end;
	}
	FUZZ_CHECK(p == end, "every line of the input is read");
	rec_reader_free(r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i;

	fuzz_fill(memfd, data, size);
	pass(memfd, REC_LINE_MAX, data, size, 1);

	feed.p = data;
	feed.left = size;
	feed.state = (uint32_t)size;
	for (i = 0; i < size && i < 16; i++)
		feed.state = feed.state * 31U + data[i];
	pass(FEED_FD, SHORT_CAP, data, size, 0);
	return 0;
}
