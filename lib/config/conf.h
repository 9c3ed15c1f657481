/*
 * conf: the rfpipe.yaml schema shared by every stage.  Each stage loads the
 * whole file, so a misspelt key is caught whichever stage reads it first;
 * flags are applied afterwards and win.
 */
#ifndef RFP_CONF_H
#define RFP_CONF_H

#include <stddef.h>

struct conf_breaker {
	long	failures;	/* consecutive transient failures that open */
	double	rate;		/* or: failure percentage over the window ... */
	long	window;		/* ... of the last calls ... */
	long	min_calls;	/* ... once at least this many were seen */
	double	cooldown;	/* seconds open before a probe */
	double	cooldown_max;	/* if above cooldown, it doubles on each re-open up to this */
	double	max_open;	/* held work is dead-lettered past this; 0: never */
};

/* The site's own parser of a fetched body (rfp-parse). */
struct conf_parse {
	char	**command;	/* argv, NULL-terminated; NULL: no parse */
	double	timeout;	/* seconds before its process group is killed */
	long	concurrency;	/* parsers at once for the endpoint */
	long	output_max;	/* most bytes of standard output kept */
};
#define CONF_STATUS_MAX	599
#define CONF_TRANSIENT	't'
#define CONF_PERMANENT	'p'

struct conf_ep {
	char	*name;
	long	concurrency;	/* in-flight ceiling; 0: the global one */
	double	rate;		/* requests per second; 0: unpaced */
	long	burst;
	int	idempotency_keys; /* the endpoint honours Idempotency-Key */
	struct conf_breaker breaker;
	struct conf_parse parse;
	/* Per status: 0 as the table says, CONF_TRANSIENT or CONF_PERMANENT. */
	char	status_class[CONF_STATUS_MAX + 1];
};

struct conf {
	long	concurrency;
	long	max_attempts;
	double	base;
	double	cap;
	long	budget;		/* absolute count; -1: budget_x times admitted */
	double	budget_x;
	double	max_retry_after;
	unsigned long seed;
	double	connect_timeout;
	double	timeout;
	long	max_body;
	long	max_redirects;
	int	on_open_dead;
	char	*deadline;	/* as written; parsed by lib/deadline */
	char	*ca_file;
	char	*state;		/* a postgresql:// URL; NULL: the run dir */
	char	*ledger;	/* the submission ledger, shared by the runs
				   of a cycle; NULL: RUNDIR/state/ */
	char	*body_root;	/* body_file must be under it; NULL: the
				   manifest's directory */
	char	**trusted;	/* trusted_origins: may have the secrets */
	size_t	ntrusted;
	struct conf_ep	defaults;	/* endpoint settings for unlisted ones */
	struct conf_ep	*eps;
	size_t	neps;
};

/* Fill c with the built-in defaults. */
void	conf_init(struct conf *c);
/* Load path over c; 0, or -1 with "file:line: key ...: what" in err. */
int	conf_load(struct conf *c, const char *path, char *err, size_t errlen);
/* Settings for endpoint name (the defaults when it is not listed). */
const struct conf_ep *conf_endpoint(const struct conf *c, const char *name);
/* Parse a budget "900" or "3x" into c; 0 or -1. */
int	conf_budget(struct conf *c, const char *s);
/* The budget for admitted documents. */
long	conf_budget_total(const struct conf *c, long admitted);
/* 1 when the defaults or any endpoint name a parse command. */
int	conf_has_parse(const struct conf *c);
/*
 * Set the statuses of list ("408,520-524") to cls (CONF_TRANSIENT or
 * CONF_PERMANENT) in every endpoint of c, over what the file said; -1 when
 * list does not read.
 */
int	conf_statuses(struct conf *c, const char *list, char cls);
/*
 * The one rule that bounds every wait asked from outside: a Retry-After,
 * a RateLimit reset, a record's not_before.  1 when wait is past bound
 * (max_retry_after, in the caller's unit; NaN and infinity are past it),
 * 0 when it may be waited.  A wait past it is a quota, never a hold.
 */
int	conf_wait_past(double wait, double bound);
/* Free what conf_load allocated. */
void	conf_free(struct conf *c);

#endif
