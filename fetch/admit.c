/*
 * rfp-fetch's admission: manifest lines on stdin become jobs, or leave at
 * once as dead bad_input records; ids already filed (a resume) or held by
 * another live pipeline are skipped.  With --retry-fifo, rfp-sink's
 * retries and acknowledgements come back here too.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/filed.h"
#include "lib/control/valid.h"
#include "lib/state/files.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/record/doc.h"
#include "lib/record/field.h"
#include "lib/record/fate.h"
#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "lib/base/x.h"
#include "fetch/fetch.h"

static struct {
	const char	*fifo;		/* --retry-fifo, or NULL */
	struct rec_reader *in, *back;
	int		 fd_fifo;
	int		 in_eof;
	int		 sink_seen;	/* rfp-sink said hello */
	int		 sink_gone;	/* ... and later closed the FIFO */
	json_t		*seen;		/* id -> the manifest line first with it */
	json_t		*idem;		/* submissions' keys -> id, line */
	struct filed	*filed;		/* what the run directory has
					 * filed (resume), or NULL */
	int		 retry_dead;	/* a dead letter files nothing */
	json_t		*held;		/* id -> the live pipeline it was left to */
	json_t		*nth;		/* line hash -> keyed lines with it */
	json_t		*said;		/* file -> the last line passed over
					 * that was said (passed_over) */
	long		 lines;		/* the manifest's lines, when a file */
	long		 lineno;	/* ... and the last read */
	struct admit_counts n;
} A = { .fd_fifo = -1 };
static const struct fopts *fo;	/* set by admit_open */

static int held(const char *, long);
static void load_done(void);


/*
 * Whether rec, written as it will be (numbers as jansson writes them, with
 * its endpoint), fits REC_LINE_MAX, so that it leaves whole whatever the
 * stages add (lib/record/rec.h).  0, or -1 with err set.
 */
int
admit_size(const json_t *rec, size_t len, char *err, size_t errlen)
{
	char *ep, *s;
	size_t n;

	/* A number takes at most 25 bytes written, at least 3 read. */
	if (len <= REC_LINE_MAX / 9)
		return 0;
	ep = json_object_get(rec, "endpoint") ? NULL : doc_endpoint(rec);
	n = (s = json_dumps(rec, JSON_COMPACT)) ? strlen(s) : 0;
	n += ep ? strlen(ep) + sizeof(",\"endpoint\":\"\"") : 0;
	free(s);
	free(ep);
	if (n <= REC_LINE_MAX)
		return 0;
	snprintf(err, errlen, "record \"%.200s\" is %zu bytes as written, "
	    "over %d", rec_str(rec, "id") ? rec_str(rec, "id") : "", n,
	    REC_LINE_MAX);
	return -1;
}

int
admit_wait(const json_t *rec, const struct conf *c, double deadline,
    char *err, size_t errlen)
{
	json_t *nb = json_object_get(rec, "not_before");

	if (nb == NULL || (json_is_number(nb) && ((deadline > 0 &&
	    json_number_value(nb) >= deadline) || !conf_wait_past(
	    json_number_value(nb) - clk_now(),
	    clk_real(c->max_retry_after)))))
		return 0;
	snprintf(err, errlen, "field \"not_before\": not a time within "
	    "max_retry_after (%.0f s) of now", c->max_retry_after);
	return -1;
}

/*
 * A submission's idempotency key is its own: one another record of the
 * manifest holds would have the ledger take this one for that one (sent
 * never, or "replayed" with the other's reply).  0 (the key is taken), or
 * -1 with err set.
 */
static int
admit_key(const json_t *rec, const char *id, long lineno, char *err,
    size_t errlen)
{
	json_t *v;
	char *key;

	if (!doc_is_submission(rec))
		return 0;
	key = doc_idem_key(rec);
	if ((v = json_object_get(A.idem, key)) != NULL) {
		snprintf(err, errlen, "field \"idempotency_key\": \"%.60s\" is "
		    "already used by id \"%s\" (line %ld); each submission "
		    "needs its own key", key, rec_str(v, "id"),
		    rec_int(v, "line", 0));
		free(key);
		return -1;
	}
	json_object_set_new(A.idem, key, json_pack("{s:s,s:I}", "id", id,
	    "line", (json_int_t)lineno));
	free(key);
	return 0;
}

/*
 * Key rec, the dead letter of a manifest line that has no id of its own
 * (a line that does not parse, a record without an id) or whose id is an
 * earlier line's (a duplicate), so that a resume knows it is filed and
 * dead.ndjson keeps one letter of the line however often it is filed
 * (lib/accounts/dead.c).  The key is the hash of the line's text and
 * which line of that text it is (the first, the second...): not its line
 * number, so that lines added above it do not file it again.  1 when a
 * resume finds it already in dead.ndjson (the line is skipped, rec
 * freed), else 0 with rec keyed.
 */
/* The key of this manifest line, counted as the nth of its text. */
static void
key_of(const char *line, size_t len, char *key, size_t keylen)
{
	char hex[17];
	json_int_t n;

	snprintf(hex, sizeof(hex), "%016llx",
	    (unsigned long long)clk_hash(0, line, len));
	n = json_integer_value(json_object_get(A.nth, hex)) + 1;
	json_object_set_new(A.nth, hex, json_integer(n));
	snprintf(key, keylen, "%s.%lld", hex, (long long)n);
}

static int
line_key(json_t *rec, const char *line, size_t len)
{
	char key[48];

	key_of(line, len, key, sizeof(key));
	if (A.filed != NULL && !A.retry_dead && filed_keyed(A.filed, key)) {
		A.n.skipped++;
		json_decref(rec);
		return 1;
	}
	json_object_set_new(rec, REC_LINE_KEY, json_string(key));
	return 0;
}

/*
 * Whether id is filed already (a resume): skip it.  Not when its only
 * letters are deadline cuts: a document the deadline cut never failed, it
 * ran out of night, and the next start on the run directory takes it up.
 */
static int
filed(const char *id)
{
	return A.filed != NULL && filed_as(A.filed, id) >=
	    (A.retry_dead ? FILED_DONE : FILED_DEAD);
}

/*
 * A submission whose letter says it left ("sent": true) goes out again
 * saying so: the ledger is what keeps it from a second send, and a ledger
 * since emptied, deleted or not named by this run's configuration does
 * not know its key; the letter does (submit_gate takes "sent" with no
 * ledger entry for ambiguous).  Run again with --retry-dead on a run
 * directory whose ledger was removed, an ambiguous submission was sent a
 * second time and committed twice.
 */
static void
carry_sent(json_t *rec, const char *id)
{
	json_t *was;
	size_t len;
	char *line, err[64];

	if (!doc_submits(rec_str(rec, "method"),
	    json_is_true(json_object_get(rec, "idempotent"))) ||
	    (line = filed_record(A.filed, id, &len)) == NULL)
		return;
	if ((was = rec_parse(line, len, err, sizeof(err))) != NULL &&
	    json_is_true(json_object_get(was, "sent")))
		json_object_set_new(rec, "sent", json_true());
	json_decref(was);
	free(line);
}

/*
 * rec, refused, leaves at once dead bad_input (err says why), unless a
 * resume finds it filed: by its id, or without one by its line's key.
 */
static void
admit_dead(json_t *rec, const char *line, size_t len, long lineno,
    const char *err)
{
	const char *id = rec_str(rec, "id");

	if (filed(id)) {
		A.n.skipped++;
		json_decref(rec);
		return;
	}
	if (id == NULL && line_key(rec, line, len))
		return;
	msg_line(lineno, "%s", err);
	/* rec_bad_input's own detail stays. */
	out_kill(rec, lineno, FATE_BAD_INPUT, json_object_get(rec,
	    "dead_detail") != NULL ? NULL : err);
	json_decref(rec);
	A.n.admitted++;
}

void
admit_clean(json_t *rec)
{
	const char *fate = rec_str(rec, "fate");
	int sent;

	/*
	 * What only a stage gives a record, never a manifest line, a retry's
	 * among them: a letter's key is its own run directory's (dead.ndjson
	 * run again as a manifest), and a key a line brought would be taken
	 * for a letter's (its result read as a letter and fetched again at
	 * every resume) or supersede another line's letter.  A line is keyed
	 * afresh, here, when it is refused.
	 */
	json_object_del(rec, REC_LINE_KEY);
	json_object_del(rec, "line");
	json_object_del(rec, "stage");
	if (fate != NULL && strcmp(fate, "retry") == 0)
		return;
	/*
	 * A submission an earlier run sent (a dead letter run again) keeps
	 * saying so: the ledger gate asks before it is resent.
	 */
	sent = doc_is_submission(rec) &&
	    json_is_true(json_object_get(rec, "sent"));
	xfer_clear(rec);
	json_object_del(rec, "attempt");
	if (sent)
		json_object_set_new(rec, "sent", json_true());
}

static void
admit(char *line, size_t len, long lineno, enum rec_rc rrc)
{
	char err[300];
	const char *id;
	json_t *rec, *big;
	int h;

	if (rrc == REC_TOOLONG) {
		snprintf(err, sizeof(err), "line longer than %d bytes",
		    REC_LINE_MAX);
		admit_dead(rec_bad_input("rfp-fetch", lineno, "line too long",
		    line, len), line, len, lineno, err);
		return;
	}
	if ((rec = rec_parse(line, len, err, sizeof(err))) == NULL) {
		admit_dead(rec_bad_input("rfp-fetch", lineno, err, line, len),
		    line, len, lineno, err);
		return;
	}
	admit_clean(rec);
	id = rec_str(rec, "id");
	/*
	 * A duplicate of any earlier line with that id, filed, held or
	 * refused: else a first line refused and a second done would leave
	 * one letter, dropped from dead.ndjson for the result of its id.
	 */
	if (id != NULL && json_object_get(A.seen, id) != NULL) {
		snprintf(err, sizeof(err), "field \"id\": duplicate id \"%.200s\""
		    " (first on line %ld)", id, (long)json_integer_value(
		    json_object_get(A.seen, id)));
		if (line_key(rec, line, len))
			return;
		msg_line(lineno, "%s", err);
		out_kill(rec, lineno, FATE_BAD_INPUT, err);
		json_decref(rec);
		A.n.admitted++;
		return;
	}
	if (id != NULL)
		json_object_set_new(A.seen, id, json_integer(lineno));
	if (admit_size(rec, len, err, sizeof(err)) == -1) {
		/* Too long to pass on whole: its id and its start. */
		big = rec;
		rec = rec_bad_input("rfp-fetch", lineno, err, line, len);
		if (json_is_string(json_object_get(big, "id")))
			json_object_set(rec, "id", json_object_get(big, "id"));
		json_decref(big);
		admit_dead(rec, line, len, lineno, err);
		return;
	}
	/*
	 * A field of the contract of the wrong type, or an attempt out of
	 * its range, would be refused by a later stage once sent: here,
	 * before anything is.
	 */
	if (doc_check(rec, err, sizeof(err)) == -1 ||
	    field_check_json(rec, err, sizeof(err)) == -1) {
		admit_dead(rec, line, len, lineno, err);
		return;
	}
	if (filed(id)) {
		A.n.skipped++;
		json_decref(rec);
		return;
	}
	if (fo->run_dir != NULL && (h = held(id, lineno)) != 0) {
		/* Filed since by a pipeline that has ended: as any filed. */
		*(h == 1 ? &A.n.held : &A.n.skipped) += 1;
		json_decref(rec);
		return;
	}
	A.n.admitted++;
	switch (A.filed != NULL ? filed_as(A.filed, id) : FILED_NOT) {
	case FILED_CUT:
		A.n.resumed_cut++;
		carry_sent(rec, id);
		break;
	case FILED_DEAD:	/* --retry-dead */
		A.n.retried_dead++;
		carry_sent(rec, id);
		break;
	default:
		break;
	}
	if (admit_wait(rec, &fo->conf, fo->deadline, err, sizeof(err)) == -1 ||
	    xfer_admissible(rec, err, sizeof(err)) == -1 ||
	    admit_key(rec, id, lineno, err, sizeof(err)) == -1) {
		msg_line(lineno, "%s", err);
		out_kill(rec, lineno, FATE_BAD_INPUT, err);
		json_decref(rec);
		return;
	}
	queue_add(rec, lineno, 1);
}

/* A retry or an acknowledgement from rfp-sink. */
static void
take_back(char *line, size_t len, long lineno)
{
	static const char done[] = REC_ACK_DONE;
	static const char dead[] = REC_ACK_DEAD;
	char err[300];
	json_t *rec;

	/* rfp-sink's acks, word for word: no need to parse them. */
	if (len == sizeof(done) - 1 && (memcmp(line, done, len) == 0 ||
	    memcmp(line, dead, len) == 0)) {
		out_acked();
		return;
	}
	if ((rec = rec_parse(line, len, err, sizeof(err))) == NULL) {
		msg_warn("%s:%ld: %s", A.fifo, lineno, err);
		return;
	}
	if (json_is_string(json_object_get(rec, "ack"))) {
		A.sink_seen = 1;	/* "hello": rfp-sink holds the FIFO */
		json_decref(rec);
		return;
	}
	out_acked();
	if (json_is_true(json_object_get(rec, "ack"))) {
		json_decref(rec);
		return;
	}
	queue_add(rec, lineno, 0);
}

static void
read_lines(struct rec_reader *r, int manifest)
{
	enum rec_rc rc;
	size_t len;
	long lineno;
	char *line;

	/* A read's ids are claimed under one lock, in one write. */
	if (manifest)
		claims_begin();
	for (;;) {
		if (manifest && !admit_wants())
			break;	/* back-pressure: enough work queued */
		rc = rec_next(r, &line, &len, &lineno);
		if (rc == REC_AGAIN)
			break;
		if (rc == REC_EOF || rc == REC_ERR) {
			if (rc == REC_ERR)
				msg_warnsys("read %s", manifest ? "stdin" :
				    A.fifo);
			if (manifest)
				A.in_eof = 1;
			else if (A.sink_seen)
				A.sink_gone = 1;
			break;
		}
		if (rc == REC_LINE && len == 0)
			continue;
		if (manifest) {
			A.lineno = lineno;
			admit(line, len, lineno, rc);
		} else if (rc == REC_LINE)
			take_back(line, len, lineno);
	}
	if (manifest)
		claims_end();
}


/*
 * 1 when another live pipeline on the run directory holds id (it is named
 * on stderr); 2 when a dead one held it and has filed it since; else 0.
 */
static int
held(const char *id, long lineno)
{
	char who[64];
	int rc = claims_take(id, who, sizeof(who));

	if (rc == 0) {
		json_object_set_new(A.held, id, json_string(who));
		/* The first by its line; the count at the end. */
		if (A.n.held == 0)
			msg_line(lineno, "id \"%s\" is being processed by "
			    "another pipeline on this run directory (%s); "
			    "skipped, as any other it holds", id, who);
		return 1;
	}
	/*
	 * Held by a pipeline that has ended since this one read the files:
	 * filed by it, if the files grew.  Read them again whenever they did
	 * (a stat each), never on a timer: an id met a moment after another
	 * pipeline filed it must not be fetched again.
	 */
	if (rc == 2 && A.filed != NULL && filed_changed(A.filed)) {
		load_done();
		return filed(id) ? 2 : 0;
	}
	return 0;
}

/* A line of results.ndjson or dead.ndjson that says nothing filed. */
static void
passed_over(const char *path, long lineno, int torn, void *arg)
{
	(void)arg;
	/*
	 * Said once: the files read again whole (one was replaced), the
	 * lines said before are passed over again.  A line found since is
	 * said.
	 */
	if (A.said == NULL)
		A.said = json_object();
	if (json_integer_value(json_object_get(A.said, path)) >= lineno)
		return;
	json_object_set_new(A.said, path, json_integer(lineno));
	if (torn)
		msg_warn("%s:%ld: torn last line, its document will be "
		    "fetched again", path, lineno);
	else
		msg_warn("%s:%ld: unreadable record, its document will be "
		    "fetched again", path, lineno);
}

/*
 * What the run directory has filed, read again for what was added since:
 * the ids in results.ndjson and dead.ndjson, and the line keys of
 * dead.ndjson's letters (see line_key).  With --retry-dead a dead letter
 * files nothing (filed): it says what is taken up again.
 */
static void
load_done(void)
{
	char err[PATH_MAX + 128];

	if (filed_read(A.filed, passed_over, NULL, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
}

/*
 * The lines from fd's offset to its end, when it is a regular file, or 0:
 * newlines counted, and a last line without one; the offset stays.  Only
 * the first COUNT_MAX bytes are read: the pace's start needs to know of a
 * few thousand documents at the most (gate.c, ep_queued), not of millions.
 */
#define COUNT_MAX	(4 << 20)
static long
count_lines(int fd)
{
	char buf[65536];
	struct stat st;
	off_t at, end;
	ssize_t n;
	long lines = 0;
	char last = '\n';

	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (at = lseek(fd, 0, SEEK_CUR)) == -1)
		return 0;
	end = at + COUNT_MAX;
	while (at < end && (n = pread(fd, buf, sizeof(buf), at)) > 0) {
		for (char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n -
		    p))) != NULL; p++)
			lines++;
		last = buf[n - 1];
		at += n;
	}
	return lines + (last != '\n');
}

/*
 * Manifest lines not yet read: 0 when its end is reached, or when it is
 * not a file (a pipe, rfp-queue pull) and they cannot be known.
 */
long
admit_unread(void)
{
	return A.in_eof || A.lines <= A.lineno ? 0 : A.lines - A.lineno;
}

void
admit_open(const struct fopts *o, const char *fifo, int resume,
    int retry_dead)
{
	struct stat st;

	fo = o;
	A.fifo = fifo;
	A.seen = json_object();
	A.idem = json_object();
	A.nth = json_object();
	A.held = json_object();
	A.retry_dead = retry_dead;
	if (resume || retry_dead) {
		A.filed = filed_new(fo->run_dir, 0);
		load_done();
	}
	A.in = rec_reader_new(STDIN_FILENO, 0);
	A.lines = count_lines(STDIN_FILENO);
	if (fifo != NULL) {
		if ((A.fd_fifo = open(fifo, O_RDONLY | O_NONBLOCK |
		    O_CLOEXEC)) == -1)
			msg_diesys(1, "open %s", fifo);
		/* A file there reads as rfp-sink gone: nothing sent. */
		if (fstat(A.fd_fifo, &st) == -1 || !S_ISFIFO(st.st_mode))
			msg_die(1, "%s: not a FIFO (make it with mkfifo)", fifo);
		A.back = rec_reader_new(A.fd_fifo, REC_STREAM_MAX);
	}
}

/* Whether the manifest is to be read: not at its end, and work not piled up. */
int
admit_wants(void)
{
	return !A.in_eof && queue_ready() + queue_held() <=
	    4 * fo->conf.concurrency + 64;
}

void
admit_manifest(void)
{
	if (!A.in_eof)
		read_lines(A.in, 1);
}

void
admit_back(void)
{
	if (A.back != NULL)
		read_lines(A.back, 0);
}

int
admit_fifo_fd(void)
{
	return A.fd_fifo;
}

int
admit_eof(void)
{
	return A.in_eof;
}

int
admit_sink_seen(void)
{
	return A.sink_seen;
}

int
admit_sink_gone(void)
{
	return A.sink_gone;
}

const char *
admit_fifo(void)
{
	return A.fifo;
}

void
admit_counts(struct admit_counts *n)
{
	*n = A.n;
}

/*
 * The ids left to a live pipeline, as the counts are read at the end:
 * filed, not held, when it has filed them since (the files read again if
 * they changed), and orphaned, not held, when it has ended without (cut
 * by its deadline, or killed): no one holds them, and a re-run takes them
 * up.  Of several pipelines on one run directory, the one that ends last
 * finds every id filed, and its run is done, not waiting on the others.
 */
void
admit_settle(void)
{
	const char *id;
	json_t *who;
	void *tmp;
	int f;

	if (fo->run_dir == NULL || json_object_size(A.held) == 0)
		return;
	if (A.filed == NULL)
		A.filed = filed_new(fo->run_dir, 0);
	if (filed_changed(A.filed))
		load_done();
	/* Each holder asked once, now: not once an id it holds. */
	claims_ask_again();
	json_object_foreach_safe(A.held, tmp, id, who) {
		if (!(f = filed(id)) && claims_alive(json_string_value(who)))
			continue;
		claims_settle(json_string_value(who));
		A.n.held--;
		*(f ? &A.n.skipped : &A.n.orphaned) += 1;
		json_object_del(A.held, id);
	}
}

int
admit_check_open(const char *run_dir, int retry_dead, int shared)
{
	char err[PATH_MAX + 128];

	A.nth = json_object();
	A.retry_dead = retry_dead;
	A.fd_fifo = -1;
	A.filed = filed_new(run_dir, 0);
	/*
	 * What the run would stop at: a link, a FIFO, no right to read; and
	 * with the state in the run directory, a state file corrupt.
	 */
	if (files_check_state(run_dir, shared, control_valid, err,
	    sizeof(err)) == -1 || filed_read(A.filed, NULL, NULL, err,
	    sizeof(err)) == -1) {
		msg_warn("%s", err);
		filed_free(A.filed);
		A.filed = NULL;
		return -1;
	}
	return 0;
}

int
admit_check_filed(const char *id, const char *line, size_t len)
{
	char key[48];

	if (id != NULL)
		return filed(id);
	key_of(line, len, key, sizeof(key));
	return A.filed != NULL && !A.retry_dead && filed_keyed(A.filed, key);
}

void
admit_close(void)
{
	rec_reader_free(A.in);
	rec_reader_free(A.back);
	if (A.fd_fifo != -1)
		close(A.fd_fifo);
	json_decref(A.seen);
	json_decref(A.held);
	json_decref(A.said);
	A.said = NULL;
	filed_free(A.filed);
	json_decref(A.nth);
	json_decref(A.idem);
	A.in = A.back = NULL;
	A.fd_fifo = -1;
	A.filed = NULL;
	A.seen = A.nth = A.idem = A.held = NULL;
}
