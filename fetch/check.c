/*
 * rfp-fetch --check: read the manifest as a run would, send nothing, and
 * say what would apply to each endpoint.  Every bad line is named as the
 * run names it; a config endpoint that no record reaches, or a deadline
 * already past, is a configuration error.  Nothing is created.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fetch/fetch.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/record/doc.h"
#include "lib/record/field.h"
#include "cmd/msg.h"
#include "lib/record/rec.h"
#include "lib/base/x.h"

#define SHOW_MAX	10	/* endpoints named in one message */

/* The statuses of e set to cls, as "408,425", into buf. */
static void
statuses(const struct conf_ep *e, char cls, char *buf, size_t len)
{
	size_t n = 0;
	int i, w;

	buf[0] = '\0';
	for (i = 0; i <= CONF_STATUS_MAX && n < len; i++)
		if (e->status_class[i] == cls) {
			w = snprintf(buf + n, len - n, "%s%d", n ? "," : "", i);
			if (w < 0)
				return;
			n += (size_t)w;
		}
}

/*
 * One line for endpoint name: its documents and its limits.  The name is
 * a manifest's, shown as the run's table shows it (rec_shown).
 */
static void
show(const struct conf *c, const char *name, long docs)
{
	const struct conf_ep *e = conf_endpoint(c, name);
	char t[256], p[256], rate[64], *shown;

	if (e->rate > 0)
		snprintf(rate, sizeof(rate), "rate %g/s burst %ld", e->rate,
		    e->burst);
	else
		snprintf(rate, sizeof(rate), "rate adaptive");
	statuses(e, CONF_TRANSIENT, t, sizeof(t));
	statuses(e, CONF_PERMANENT, p, sizeof(p));
	shown = rec_shown(xstrdup(name));
	printf("endpoint %s: %ld document%s; concurrency %ld, %s; breaker "
	    "%ld failures, cooldown %gs%s%s%s%s%s%s\n", shown, docs,
	    docs == 1 ? "" : "s",
	    e->concurrency > 0 ? e->concurrency : c->concurrency, rate,
	    e->breaker.failures, e->breaker.cooldown,
	    e == &c->defaults ? " (defaults)" : "",
	    e->idempotency_keys ? "; honours Idempotency-Key" : "",
	    *t ? "; transient " : "", t, *p ? "; permanent " : "", p);
	free(shown);
}

/* The endpoints the records have, quoted, as one list into buf. */
static void
names(const json_t *eps, char *buf, size_t len)
{
	const char *k;
	json_t *v;
	size_t n = 0;
	int i = 0, w;

	buf[0] = '\0';
	json_object_foreach((json_t *)eps, k, v) {
		if (i++ == SHOW_MAX) {
			snprintf(buf + n, len - n, ", ...");
			return;
		}
		w = snprintf(buf + n, len - n, "%s\"%s\"", n ? ", " : "", k);
		if (w < 0 || (size_t)w >= len - n)
			return;
		n += (size_t)w;
	}
}

int
check_manifest(int fd, const struct conf *c, const char *config,
    double deadline, const char *deadline_text, const char *run_dir)
{
	struct rec_reader *r = rec_reader_new(fd, 0);
	json_t *eps = json_object(), *seen = json_object(), *rec, *v;
	json_t *keys = json_object(), *ids = json_object();
	long lines = 0, bad = 0, filed = 0, lineno, n;
	int rc, problems = 0;
	char err[300], list[1024], when[32];
	const char *k, *id;
	char *line, *ep, *key;
	size_t len, i, unmatched;

	while ((rc = rec_next(r, &line, &len, &lineno)) != REC_EOF) {
		if (rc == REC_ERR) {
			msg_warnsys("read manifest");
			problems++;
			break;
		}
		/* As a run reads it: an empty line is no record. */
		if (rc == REC_LINE && len == 0)
			continue;
		lines++;
		if (rc == REC_TOOLONG) {
			msg_line(lineno, "line longer than %d bytes",
			    REC_LINE_MAX);
			bad++;
			filed += run_dir != NULL && admit_check_filed(NULL,
			    line, len);
			continue;
		}
		/* As admission reads it (fetch/admit.c), in its order. */
		if ((rec = rec_parse(line, len, err, sizeof(err))) != NULL)
			admit_clean(rec);
		/*
		 * What a resume skips, filed: by its id, the first line's
		 * that has it; else by the line's key.
		 */
		if (run_dir != NULL) {
			id = rec_str(rec, "id");
			if (id != NULL && json_object_get(ids, id) != NULL)
				id = NULL;
			else if (id != NULL)
				json_object_set_new(ids, id, json_true());
			filed += admit_check_filed(id, line, len);
		}
		if (rec == NULL || admit_size(rec, len, err, sizeof(err)) ==
		    -1 || doc_check(rec, err, sizeof(err)) == -1 ||
		    field_check_json(rec, err, sizeof(err)) == -1 ||
		    admit_wait(rec, c, deadline, err, sizeof(err)) == -1 ||
		    xfer_admissible(rec, err, sizeof(err)) == -1) {
			msg_line(lineno, "%s", err);
			json_decref(rec);
			bad++;
			continue;
		}
		id = rec_str(rec, "id");
		if ((v = json_object_get(seen, id)) != NULL) {
			msg_line(lineno, "field \"id\": duplicate id \"%s\" "
			    "(first on line %ld)", id,
			    (long)json_integer_value(v));
			json_decref(rec);
			bad++;
			continue;
		}
		/* As admission refuses it: a submission's key is its own. */
		key = doc_is_submission(rec) ? doc_idem_key(rec) : NULL;
		if (key != NULL && (v = json_object_get(keys, key)) != NULL) {
			msg_line(lineno, "field \"idempotency_key\": \"%.60s\" "
			    "is already used by id \"%s\" (line %ld); each "
			    "submission needs its own key", key, rec_str(v,
			    "id"), rec_int(v, "line", 0));
			free(key);
			json_decref(rec);
			bad++;
			continue;
		}
		if (key != NULL)
			json_object_set_new(keys, key, json_pack("{s:s,s:I}",
			    "id", id, "line", (json_int_t)lineno));
		free(key);
		json_object_set_new(seen, id, json_integer(lineno));
		ep = doc_endpoint(rec);
		v = json_object_get(eps, ep);
		json_object_set_new(eps, ep, json_integer(v ?
		    json_integer_value(v) + 1 : 1));
		free(ep);
		json_decref(rec);
	}
	rec_reader_free(r);
	printf("manifest: %ld lines, %ld documents, %ld bad\n", lines,
	    lines - bad, bad);
	if (run_dir != NULL)
		printf("filed: %ld of the %ld lines already, in %s; a resume "
		    "admits the other %ld\n", filed, lines, run_dir, lines -
		    filed);
	json_object_foreach(eps, k, v)
		show(c, k, (long)json_integer_value(v));
	names(eps, list, sizeof(list));
	for (i = unmatched = 0; i < c->neps; i++) {
		if (json_object_get(eps, c->eps[i].name) != NULL)
			continue;
		msg_warn("%s: endpoint \"%s\" matches no record; the records' "
		    "endpoints are %s", config, c->eps[i].name, *list ? list :
		    "(none)");
		unmatched++;
		problems++;
	}
	/*
	 * One a night's manifest does not reach is a site's config that names
	 * every portal; none reached is a config keyed by other names.
	 */
	if (unmatched > 0 && unmatched == c->neps && lines > bad)
		msg_warn("%s: none of its endpoints matches a record: their "
		    "limits would apply to nothing", config);
	if (deadline > 0) {
		clk_iso(deadline, when, sizeof(when));
		/* "+0s" is meant; a time already past is a mistake. */
		if (deadline < clk_now() && deadline_text[0] != '+') {
			/* rfp-fetch took the config's when given none. */
			if (deadline_text == c->deadline)
				msg_warn("%s: key \"deadline\": \"%s\" is in "
				    "the past (%s)", config, deadline_text,
				    when);
			else
				msg_warn("option --deadline: \"%s\" is in the "
				    "past (%s)", deadline_text, when);
			problems++;
		} else
			printf("deadline: %s\n", when);
	}
	printf("retries: max_attempts %ld, budget ", c->max_attempts);
	n = lines - bad;
	if (c->budget >= 0)
		printf("%ld\n", c->budget);
	else
		printf("%gx = %ld\n", c->budget_x, conf_budget_total(c, n));
	json_decref(eps);
	json_decref(seen);
	json_decref(keys);
	json_decref(ids);
	if (problems > 0)
		return 2;
	return bad > 0 ? 3 : 0;
}
