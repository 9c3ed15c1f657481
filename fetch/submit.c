/*
 * rfp-fetch's submissions: the ledger of idempotency keys, asked before a
 * submission is sent and told its every attempt and outcome, and the
 * status checks that settle what the ledger cannot.  A submission that
 * may have reached the server is never sent again without one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "lib/base/clk.h"
#include "lib/record/doc.h"
#include "lib/accounts/ledger.h"
#include "lib/record/fate.h"
#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/base/x.h"
#include "fetch/fetch.h"

static struct {
	struct ledger	*ledger;
	struct job	*q, **tail;	/* to ask status_url */
	long		 nq;		/* ... how many */
	long		 asking;	/* status_url asked, on the wire */
} U;
static const struct fopts *fo;	/* set by submit_init */

void
submit_init(const struct fopts *o)
{
	fo = o;
	U.tail = &U.q;
}


/*
 * j's submission may have reached the server, and its dead letter says so:
 * fed to any later run, even one without this ledger, it is asked about,
 * never sent blind.
 */
static void
in_doubt(json_t *rec)
{
	json_object_set_new(rec, "sent", json_true());
}

static void
state_fail(const char *err)
{
	msg_die(1, "%s", err);
}

/* A torn ledger entry, said where the operator sees it. */
static void
torn(const char *path, long line, const char *key)
{
	if (key != NULL)
		msg_warn("%s:%ld: torn entry (a crash while writing); key "
		    "\"%s\" is treated as ambiguous, never as unsent", path,
		    line, key);
	else
		msg_warn("%s:%ld: unreadable entry with no key; it is ignored",
		    path, line);
}

static struct ledger *
ledger(void)
{
	char err[512];

	if (U.ledger == NULL) {
		if ((U.ledger = ledger_open(fo->run_dir, fo->conf.ledger, err,
		    sizeof(err))) == NULL)
			state_fail(err);
		ledger_on_torn(U.ledger, torn);
	}
	return U.ledger;
}

/* A submission the server already has: out with the prior outcome. */
static void
replay(struct job *j, const json_t *entry)
{
	json_t *rec = j->rec;
	char *path;

	xfer_clear(rec);
	json_object_set_new(rec, "status", json_integer(rec_int(entry,
	    "status", 200)));
	json_object_set_new(rec, "error", json_null());
	json_object_set_new(rec, "sent", json_true());
	json_object_set_new(rec, "replayed", json_true());
	json_object_set(rec, "reply", json_object_get(entry, "reply") ?
	    json_object_get(entry, "reply") : json_null());
	path = rundir_path(fo->run_dir, RUNDIR_DOCS, rec_str(rec, "id"));
	if (access(path, F_OK) == 0)
		json_object_set_new(rec, "body_path", json_string(path +
		    strlen(fo->run_dir) + 1));
	free(path);
	out_emit(rec);
}

/* The record's status_url for key: "{key}" in it replaced. */
static char *
status_url(const json_t *rec, const char *key)
{
	const char *tmpl = rec_str(rec, "status_url"), *at;

	at = strstr(tmpl, "{key}");
	return at ? xasprintf("%.*s%s%s", (int)(at - tmpl), tmpl, key, at + 5) :
	    xstrdup(tmpl);
}

/* j's status_url is to be asked before anything else is done with it. */
static void
confirm_queue(struct job *j)
{
	j->next = NULL;
	*U.tail = j;
	U.tail = &j->next;
	U.nq++;
}

/*
 * Start the confirmations that may start: at most CONFIRM_MAX at once, on
 * connections of their own beyond -j, so that none waits for a transfer
 * and no transfer waits for one.
 */
void
submit_confirm_start(void)
{
	struct job *j;
	char *key, *url;

	while (U.asking < CONFIRM_MAX && !deadline_come(fo->deadline,
	    clk_now()) && (j = U.q) != NULL) {
		if ((U.q = j->next) == NULL)
			U.tail = &U.q;
		U.nq--;
		key = doc_idem_key(j->rec);
		url = status_url(j->rec, key);
		/* Ids and endpoints only: a URL may carry a key in its query. */
		msg_debug("%s: asking its status_url", rec_str(j->rec, "id"));
		wire_add(xfer_confirm_start(j, url));
		U.asking++;
		free(url);
		free(key);
	}
}

/*
 * A confirmation is over: a commit is filed with the answer, a "not
 * committed" sends the submission, and anything else leaves it dead
 * ambiguous_submit, never sent again.
 */
void
submit_confirmed(struct xfer *x)
{
	struct job *j = x->job;
	json_t *reply, *extra;
	char err[512], why[256], *key;
	int c, cut;

	U.asking--;
	c = xfer_confirmed(x, &reply, why, sizeof(why));
	cut = c == -1 && x->cc == CURLE_OPERATION_TIMEDOUT &&
	    x->capped_at > 0 && deadline_come(fo->deadline, clk_now());
	x->job = NULL;
	xfer_free(x);
	if (cut) {
		/* Not "cannot tell": not asked in time; a resume asks again. */
		in_doubt(j->rec);
		out_kill(j->rec, 0, FATE_DEADLINE_CUT, "its status_url did not "
		    "answer by the deadline");
		job_free(j);
		return;
	}
	if (c == 0) {
		j->confirmed = 1;
		queue_put(j);
		return;
	}
	key = doc_idem_key(j->rec);
	if (c == 1) {
		extra = json_pack("{s:i,s:o}", "status", 200, "reply", reply);
		if (ledger_append(ledger(), key, rec_str(j->rec, "id"),
		    LEDGER_SUCCESS, extra, err, sizeof(err)) == -1)
			state_fail(err);
		replay(j, extra);
		json_decref(extra);
	} else {
		snprintf(err, sizeof(err), "an earlier attempt may have reached "
		    "the server, and its status_url cannot tell: %s", why);
		in_doubt(j->rec);
		out_kill(j->rec, 0, FATE_AMBIGUOUS_SUBMIT, err);
	}
	free(key);
	job_free(j);
}

/*
 * Before a submission is sent: 0 to send it, 1 when the ledger settled it
 * (replayed, or dead ambiguous_submit), 2 when its status_url is to be
 * asked first.
 */
int
submit_gate(struct job *j)
{
	json_t *entry;
	enum ledger_state st;
	const char *owner;
	char err[512], *key;
	int rc = 0;

	if (j->confirmed) {
		/* Its status_url said "not committed" a moment ago. */
		j->confirmed = 0;
		return 0;
	}
	key = doc_idem_key(j->rec);
	if (ledger_lookup(ledger(), key, &st, &entry, err, sizeof(err)) == -1)
		state_fail(err);
	/* What the intent, if it is sent, must still find (submit_intent). */
	j->l_st = (int)st;
	json_decref(j->l_seen);
	j->l_seen = entry ? json_deep_copy(entry) : NULL;
	/*
	 * Sent by an earlier run this ledger did not see (a dead letter fed
	 * to a new run directory): it may have been committed.
	 */
	if (st == LEDGER_NONE && json_is_true(json_object_get(j->rec, "sent")))
		st = LEDGER_AMBIGUOUS;
	/*
	 * The key is another id's (an earlier night's, or another pipeline's
	 * on the ledger): its outcome is not this record's.  Refused, never
	 * replayed with the other's reply nor left in doubt.  An entry with
	 * no id (a torn line) names no one: as before.
	 */
	owner = entry != NULL ? rec_str(entry, "id") : NULL;
	if (owner != NULL && strcmp(owner, rec_str(j->rec, "id")) != 0) {
		snprintf(err, sizeof(err), "field \"idempotency_key\": "
		    "\"%.60s\" is already used by id \"%.200s\" (ledger: %s); "
		    "each submission needs its own key", key, owner,
		    ledger_name(st));
		msg_line(j->lineno, "%s", err);
		out_kill(j->rec, j->lineno, FATE_BAD_INPUT, err);
		rc = 1;
	} else if (st == LEDGER_SUCCESS) {
		replay(j, entry);
		rc = 1;
	} else if ((st == LEDGER_INTENT || st == LEDGER_AMBIGUOUS) &&
	    !gate_idempotent(j->ep)) {
		if (rec_str(j->rec, "status_url") != NULL)
			rc = 2;
		else {
			snprintf(err, sizeof(err), "an earlier attempt may "
			    "have reached the server (ledger: %s)",
			    ledger_name(st));
			in_doubt(j->rec);
			out_kill(j->rec, 0, FATE_AMBIGUOUS_SUBMIT, err);
			rc = 1;
		}
	}
	free(key);
	if (rc == 2)
		confirm_queue(j);
	return rc;
}

/* Write the submission's outcome to the ledger. */
void
submit_outcome(const struct xfer *x)
{
	const json_t *rec = x->job->rec;
	long st = rec_int(rec, "status", 0);
	enum ledger_state s;
	json_t *extra, *reply = NULL;
	char err[512], *key, *path;

	if (st >= 200 && st <= 299)
		s = LEDGER_SUCCESS;
	else if (!json_is_true(json_object_get(rec, "sent")))
		s = LEDGER_NOT_SENT;
	else if (st >= 400 && st <= 499)
		s = LEDGER_REJECTED;
	else
		s = LEDGER_AMBIGUOUS;
	if (s == LEDGER_SUCCESS && rec_str(rec, "body_path") != NULL &&
	    rec_int(rec, "bytes", 0) <= 65536) {
		path = xasprintf("%s/%s", fo->run_dir, rec_str(rec,
		    "body_path"));
		reply = files_load(path, JSON_DECODE_ANY, NULL);
		free(path);
	}
	extra = json_pack("{s:I,s:o,s:o}", "attempt", (json_int_t)rec_int(rec,
	    "attempt", 0), "status", st ? json_integer(st) : json_null(),
	    "reply", reply ? reply : json_null());
	key = doc_idem_key(rec);
	if (ledger_append(ledger(), key, rec_str(rec, "id"), s, extra, err,
	    sizeof(err)) == -1)
		state_fail(err);
	free(key);
	json_decref(extra);
}

int
submit_intent(struct job *j)
{
	char err[512], *key = doc_idem_key(j->rec);
	json_t *extra = json_pack("{s:I}", "attempt",
	    (json_int_t)rec_int(j->rec, "attempt", 0) + 1), *now;
	enum ledger_state st;
	int rc;

	if ((rc = ledger_append_if(ledger(), key, rec_str(j->rec, "id"),
	    LEDGER_INTENT, extra, (enum ledger_state)j->l_st, j->l_seen, &st,
	    &now, err, sizeof(err))) == -1)
		state_fail(err);
	if (rc == 1) {
		/* Ids only: a key may be a secret's digest. */
		msg_debug("%s: its key was written by another process since it "
		    "was looked at (%s): asked again", rec_str(j->rec, "id"),
		    ledger_name(st));
		json_decref(now);
		j->confirmed = 0;
	}
	json_decref(extra);
	free(key);
	return rc;
}

void
submit_unsent(const struct job *j)
{
	char err[512], *key = doc_idem_key(j->rec);
	json_t *extra = json_pack("{s:I}", "attempt",
	    (json_int_t)rec_int(j->rec, "attempt", 0));

	if (ledger_append(ledger(), key, rec_str(j->rec, "id"),
	    LEDGER_NOT_SENT, extra, err, sizeof(err)) == -1)
		state_fail(err);
	json_decref(extra);
	free(key);
}

long
submit_busy(void)
{
	return U.nq + U.asking;
}

long
submit_waiting(void)
{
	return U.nq;
}

void
submit_cut(void)
{
	struct job *j;

	while ((j = U.q) != NULL) {
		U.q = j->next;
		in_doubt(j->rec);
		out_kill(j->rec, 0, FATE_DEADLINE_CUT, "its status_url not "
		    "asked by the deadline");
		job_free(j);
	}
	U.tail = &U.q;
	U.nq = 0;
}

void
submit_close(void)
{
	struct job *j;

	while ((j = U.q) != NULL) {
		U.q = j->next;
		job_free(j);
	}
	U.tail = &U.q;
	U.nq = 0;
	ledger_close(U.ledger);
	U.ledger = NULL;
}
