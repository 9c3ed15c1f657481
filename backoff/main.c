/*
 * rfp-backoff: decide every classified record's fate.
 *
 * Reads records from rfp-classify and adds "fate": "done" for class ok;
 * "dead" with "dead_reason" permanent for class permanent (parse_failed,
 * with the parser's "parse_detail", when rfp-parse refused the body); for
 * class transient, "retry" with "not_before" (epoch seconds) and "delay_s" when
 * attempts remain and the run-wide retry budget grants one, else "dead"
 * with exhausted, budget_spent, quota (a Retry-After past
 * max_retry_after) or deadline_cut.  A submission that may have
 * reached the server is dead ambiguous_submit unless its endpoint is
 * declared (idempotency_keys: true) to honour Idempotency-Key.  A server's Retry-After is
 * a floor: jitter is added above it so records told the same thing do not
 * return in lockstep.  Records that already carry a fate pass through.
 *
 * Each retry it schedules is a line of RUNDIR/logs/attempts.ndjson (the
 * delay and why).  It never sends a request and never sleeps.  The budget lives in
 * RUNDIR/state/budget.json under flock(2), shared by every process, or
 * with --state in PostgreSQL, shared by every host.
 *
 * Exit: 0 at EOF, 1 on a write or state-file error, 2 on a usage or
 * configuration error.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/accounts/attlog.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/control/budget.h"
#include "lib/control/valid.h"
#include "lib/record/doc.h"
#include "lib/record/fate.h"
#include "cmd/loop.h"
#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/record/rec.h"
#include "lib/record/scan.h"
#include "lib/record/view.h"
#include "lib/state/rundir.h"
#include "lib/state/files.h"
#include "lib/state/store.h"

#define PROG	"rfp-backoff"

static const char usage[] =
    "usage: rfp-backoff [-hv] [--admitted N] [--base S] [--budget N|Nx]\n"
    "                   [--cap S] [--config FILE] [--deadline WHEN]\n"
    "                   [--max-attempts N] [--max-retry-after S]\n"
    "                   [--renew-budget] [--resolve-deadline WHEN]\n"
    "                   [--run-dir DIR] [--seed N] [--state URL]\n"
    "                   [--version]\n";

static struct opts {
	struct conf	 conf;
	const char	*run_dir;
	long		 admitted;
	double		 deadline;	/* epoch; 0: none */
	long		 seen;		/* records read */
	long		 docs;		/* first attempts and dead letters */
	int		 seeded;
	long		 unbudgeted;	/* retries granted with no budget */
	struct attlog	*log;		/* logs/attempts.ndjson */
} opts;

/* What decide() reads: of the wrong type, refused (cmd/loop.h). */
static const char *const reads[] = { "id", "class", "reason", "attempt",
	"retry_after_s", "parse_error", "parse_detail", "method",
	"idempotent", "sent", "status", "status_url", "endpoint", NULL };
static const struct loop_hooks hooks = { .reads = reads };

/* Draw the retry delay in logical seconds. */
static double
delay_for(struct view *v, long attempt, double ra)
{
	const struct conf *c = &opts.conf;
	const char *id;
	double ceiling, u;

	ceiling = fmin(c->cap, c->base * pow(2, (double)(attempt - 1)));
	id = view_str(v, "id");
	u = clk_draw(opts.conf.seed, id ? id : "", attempt);
	if (ra < 0)
		return u * ceiling;
	/*
	 * A floor, not an appointment: the backoff's own draw on top of it,
	 * so that records told the same do not come back in lockstep (told
	 * 0, all at once) and an outage that keeps saying 1 s is still
	 * backed off from.  Spread over max(ra, ceiling), a 1 s Retry-After
	 * was waited 1.5 s on average at the first attempt, and a refusal
	 * late in a batch held its end that long.
	 */
	return ra + u * ceiling;
}

static int
spend(long *left)
{
	char err[512];
	int rc;

	/*
	 * Without --admitted (stages composed by hand), a multiple counts
	 * the documents as they arrive, and the budget grows with them: it
	 * is never a silent 0.  A count is a count: it never refills.
	 * Before any document is counted (a retry record run by hand) the
	 * multiple sizes nothing: a budget there is spent from, and with
	 * none the retry is granted, said once, and no budget of 0 is made
	 * for the run directory's next run to obey.
	 */
	if (opts.admitted < 0 && opts.conf.budget < 0 && opts.docs == 0 &&
	    opts.conf.budget_x > 0) {
		rc = budget_spend_existing(opts.run_dir, 0, left, err,
		    sizeof(err));
		if (rc == 2) {
			if (!opts.unbudgeted++)
				msg_warn("no retry budget: no document counted "
				    "yet (a retry) and none kept%s%s; retry "
				    "granted, nothing spent (--admitted N "
				    "sizes one)", opts.run_dir ? " in " : "",
				    opts.run_dir ? opts.run_dir : "");
			rc = 1;
		}
	} else if (opts.admitted < 0 && opts.conf.budget < 0)
		rc = budget_spend_grown(opts.run_dir,
		    conf_budget_total(&opts.conf, opts.docs), left, err,
		    sizeof(err));
	else
		rc = budget_spend(opts.run_dir, conf_budget_total(
		    &opts.conf, opts.admitted), left, err, sizeof(err));
	if (rc == -1)
		msg_warn("%s", err);
	return rc;
}

static void dead(struct view *, enum fate_reason, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static void
dead(struct view *v, enum fate_reason reason, const char *fmt, ...)
{
	char detail[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	/* The cap cuts on a byte: a detail not UTF-8 would be set null. */
	rec_utf8_cut(detail);
	view_kill(v, reason, detail);
}

/*
 * A submission whose request left in full and got no clear "not processed"
 * (429) may have been committed: re-sending it blindly could file it twice.
 */
static int
ambiguous(struct view *v)
{
	const char *ep = view_str(v, "endpoint");

	/* With a status_url, rfp-fetch asks before it ever re-sends. */
	if (!doc_submits(view_str(v, "method"), view_type(v, "idempotent") ==
	    SCAN_TRUE) || view_type(v, "sent") != SCAN_TRUE ||
	    view_int(v, "status", 0) == 429 ||
	    view_str(v, "status_url") != NULL)
		return 0;
	return ep == NULL || !conf_endpoint(&opts.conf, ep)->idempotency_keys;
}

/* What the last attempt met, for the operator: "unreachable (connect)". */
static const char *
cause(struct view *v)
{
	static char buf[96];
	const char *r = view_str(v, "reason");

	if (r == NULL)
		r = "?";
	snprintf(buf, sizeof(buf), "%s (%.60s)", strcmp(r, "connect") == 0 ||
	    strcmp(r, "dns") == 0 ? "unreachable" : "last error", r);
	return buf;
}

static int
transient(struct view *v, long lineno)
{
	const struct conf *c = &opts.conf;
	const char *id = view_str(v, "id"), *ep = view_str(v, "endpoint");
	const char *why = view_str(v, "reason");
	double now = clk_now(), ra = -1, d, nb;
	long attempt = view_int(v, "attempt", 1), left;
	int rc;

	/* Whatever else ends it, a submission that may be in is ambiguous. */
	if (ambiguous(v)) {
		dead(v, FATE_AMBIGUOUS_SUBMIT, "the submission may have "
		    "reached the server (%s) and endpoint \"%s\" is not "
		    "declared to honour Idempotency-Key; not re-sent",
		    why ? why : "?", ep ? ep : "?");
		return 0;
	}
	if (opts.deadline > 0 && now >= opts.deadline) {
		dead(v, FATE_DEADLINE_CUT, "transient failure after the "
		    "deadline");
		return 0;
	}
	if (attempt >= c->max_attempts) {
		dead(v, FATE_EXHAUSTED, "%ld of %ld attempts failed; %s",
		    attempt, c->max_attempts, cause(v));
		return 0;
	}
	ra = view_num(v, "retry_after_s", -1);
	/*
	 * Past max_retry_after: a quota, deadline or not, as rfp-fetch files
	 * the endpoint's other documents.  A shorter wait that lands past
	 * the deadline is cut below, as any retry due after it.
	 */
	if (conf_wait_past(ra, c->max_retry_after)) {
		dead(v, FATE_QUOTA, "the portal said to come back in %.0f s, "
		    "past max_retry_after %.0f s; its other documents are held "
		    "unsent", ra, c->max_retry_after);
		return 0;
	}
	d = delay_for(v, attempt, ra);
	nb = now + clk_real(d);
	if (opts.deadline > 0 && nb >= opts.deadline) {
		dead(v, FATE_DEADLINE_CUT, "retry due %.1f s after the "
		    "deadline", nb - opts.deadline);
		return 0;
	}
	if ((rc = spend(&left)) == -1)
		return -1;
	if (rc == 0) {
		dead(v, FATE_BUDGET_SPENT, "the run's retry budget is "
		    "spent; %s", cause(v));
		return 0;
	}
	msg_debug("line %ld: %s: retry in %.3f s (attempt %ld, %ld retries "
	    "left)", lineno, id ? id : "?", d, attempt, left);
	if (attlog_write(opts.log, ATTLOG_DELAY, now, json_pack(
	    "{s:s?,s:s?,s:I,s:f,s:s,s:f}", "id", id, "ep", ep, "attempt",
	    (json_int_t)attempt, "delay_s", round(d * 1000) / 1000, "why",
	    ra >= 0 ? "retry_after" : "backoff", "not_before", nb)) == -1)
		msg_warnsys("write %s", attlog_path(opts.log));
	view_set_str(v, "fate", fate_name(FATE_RETRY));
	view_set_real(v, "not_before", nb);
	view_set_real(v, "delay_s", round(d * 1000) / 1000);
	return 0;
}

/*
 * One record: a fate for what rfp-classify decided.  Records that carry a
 * fate pass untouched; the view keeps every byte this stage does not set.
 */
static int
decide(struct view *v, long lineno, struct rec_out *out, void *arg)
{
	const char *cls, *why;

	(void)out;
	(void)arg;
	opts.seen++;
	if (view_int(v, "attempt", 1) <= 1)
		opts.docs++;
	if (view_type(v, "fate") != -1)
		return 0;
	if ((cls = view_str(v, "class")) == NULL) {
		msg_line(lineno, "missing field \"class\"");
		view_kill(v, FATE_BAD_INPUT, "missing field \"class\"");
		view_set_int(v, "line", lineno);
		return 0;
	}
	if (strcmp(cls, "ok") == 0) {
		view_set_str(v, "fate", fate_name(FATE_DONE));
		return 0;
	}
	if (strcmp(cls, "transient") == 0)
		return transient(v, lineno);
	/* The body came, and the site's parser refused it: say what it said. */
	why = view_str(v, "reason");
	if (view_str(v, "parse_error") != NULL && why != NULL &&
	    strncmp(why, "parse_", 6) == 0) {
		view_kill(v, FATE_PARSE_FAILED, view_str(v, "parse_detail") ?
		    view_str(v, "parse_detail") : why);
		return 0;
	}
	view_kill(v, FATE_PERMANENT, why);
	return 0;
}

/*
 * Read the options into opts, the configuration and the store opened;
 * a usage error exits 2.  --resolve-deadline prints and exits here.
 */
static void
options(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "admitted", required_argument, NULL, 'A' },
		{ "base", required_argument, NULL, 'b' },
		{ "budget", required_argument, NULL, 'B' },
		{ "cap", required_argument, NULL, 'c' },
		{ "config", required_argument, NULL, 'C' },
		{ "deadline", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "max-attempts", required_argument, NULL, 'm' },
		{ "max-retry-after", required_argument, NULL, 'M' },
		{ "renew-budget", no_argument, NULL, 'N' },
		{ "resolve-deadline", required_argument, NULL, 'R' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 's' },
		{ "state", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config = NULL, *budget = NULL, *deadline = NULL;
	const char *state = NULL;
	double base = -1, cap = -1, mra = -1, t;
	long maxa = -1, seed = -1, total, left, want;
	char err[512];
	int c, renew = 0;

	opts.admitted = -1;	/* not given: count the documents */
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'A':
			opts.admitted = opt_long("admitted", optarg, 0,
			    1000000000L);
			break;
		case 'b':
			base = opt_duration("base", optarg);
			break;
		case 'B':
			budget = optarg;
			break;
		case 'c':
			cap = opt_duration("cap", optarg);
			break;
		case 'C':
			config = optarg;
			break;
		case 'D':
			deadline = optarg;
			break;
		case 'm':
			maxa = opt_long("max-attempts", optarg, 1, 1000);
			break;
		case 'N':
			renew = 1;
			break;
		case 'M':
			mra = opt_duration("max-retry-after", optarg);
			break;
		case 'R':
			if (clk_deadline(optarg, clk_now(), &t) == -1)
				msg_die(2, "option --resolve-deadline: cannot "
				    "read \"%s\" as a time", optarg);
			printf("@%.3f\n", t);
			opt_fshut();
			exit(0);
		case 'r':
			opts.run_dir = optarg;
			break;
		case 's':
			seed = opt_long("seed", optarg, 0, 2147483647L);
			break;
		case 'S':
			state = opt_state(optarg);
			break;
		default:
			opt_common(usage, argv, c);
		}
	}
	opt_no_operands(argc, argv, usage);
	opt_conf(&opts.conf, config);
	if (base > 0)
		opts.conf.base = base;
	if (cap > 0)
		opts.conf.cap = cap;
	if (mra >= 0)
		opts.conf.max_retry_after = mra;
	if (maxa > 0)
		opts.conf.max_attempts = maxa;
	if (budget != NULL && conf_budget(&opts.conf, budget) == -1)
		msg_die(2, "option --budget: expected a count or a multiple "
		    "such as \"3x\", got \"%s\"", budget);
	if (seed >= 0)
		opts.conf.seed = (unsigned long)seed;
	else if (config == NULL || opts.conf.seed == 0)
		opts.conf.seed = (unsigned long)clk_hash((uint64_t)getpid(),
		    &t, 0) ^ (unsigned long)(clk_now() * 1e6);
	opts.deadline = opt_deadline_pick(deadline, &opts.conf);
	state = opt_state_pick(state, &opts.conf, config);
	if (state != NULL && store_init(state, err, sizeof(err)) == -1)
		msg_die(1, "%s", err);
	if (opts.run_dir != NULL && files_mkdirs(opts.run_dir, err,
	    sizeof(err)) == -1)
		msg_die(1, "%s", err);
	/*
	 * The state files every stage reads, checked before the first record
	 * (rfpipe asks this before anything is sent): one that cannot be
	 * read would otherwise stop the run at its first retry.
	 */
	if (opts.run_dir != NULL && (files_check_state(opts.run_dir,
	    store_shared(), control_valid, err, sizeof(err)) == -1 ||
	    (!store_shared() && budget_check(opts.run_dir, err,
	    sizeof(err)) == -1)))
		msg_die(1, "%s", err);
	if (opts.run_dir != NULL && (opts.log = attlog_open(opts.run_dir)) ==
	    NULL)
		msg_die(1, "open %s/%s: %s", opts.run_dir,
		    rundir_name(RUNDIR_ATTEMPTS), files_why(errno));
	if (renew && (budget == NULL || opts.run_dir == NULL ||
	    (opts.conf.budget < 0 && opts.admitted < 0)))
		msg_die(2, "option --renew-budget: needs --budget, --run-dir "
		    "and, for a multiple, --admitted");
	want = conf_budget_total(&opts.conf, opts.admitted);
	/*
	 * A budget given to a re-run of dead letters is theirs: what is
	 * left becomes it.  Given to another run on a run directory that
	 * has one, the run directory's is kept, and said: not silently.
	 */
	if (renew && budget_renew(opts.run_dir, want, &left, err,
	    sizeof(err)) == -1)
		msg_die(1, "%s", err);
	if (!renew && budget != NULL && (opts.conf.budget >= 0 ||
	    opts.admitted >= 0)) {
		if ((c = budget_peek(opts.run_dir, &total, &left, err,
		    sizeof(err))) == -1)
			msg_die(1, "%s", err);
		if (c == 1 && total != want)
			msg_warn("option --budget %s: the run directory's "
			    "budget is kept (%ld left of %ld); rfpipe "
			    "--retry-dead --budget renews it", budget, left,
			    total);
	}
}

int
main(int argc, char *argv[])
{

	msg_init(PROG);
	opt_check_env();
	options(argc, argv);
	/* As rfp-classify: a standard error gone does not end the stage. */
	signal(SIGPIPE, SIG_IGN);
	if (loop_run(PROG, STDIN_FILENO, STDOUT_FILENO, &hooks, decide,
	    NULL) == -1) {
		msg_output_gone();
		msg_die(1, "stopped: output is incomplete");
	}
	store_close();
	attlog_close(opts.log);
	conf_free(&opts.conf);
	files_close_all();
	opt_fshut();
	return 0;
}
