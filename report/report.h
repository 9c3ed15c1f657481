/* rfp-report internals: what load.c reads of a run directory, for the rest. */
#ifndef RFP_REPORT_H
#define RFP_REPORT_H

#include <stdio.h>

#include <jansson.h>

#include "lib/accounts/summ.h"

/* An outcome of a request, as the timeline draws it. */
enum rep_out {
	OUT_OK,		/* answered 1xx-3xx */
	OUT_REFUSED,	/* 429 or 503: the portal said not now */
	OUT_FAILED,	/* any other status, or no answer */
	OUT_N
};

/* One point of an endpoint's timeline. */
struct rep_ev {
	double	 at;		/* epoch seconds */
	char	 kind;		/* 'q' request, 'y' retry, 'p' pace,
				   'b' breaker */
	int	 out;		/* 'q': enum rep_out; 'b': 0 closed, 1 open,
				   2 half_open */
	double	 rate;		/* 'p': requests a real second; 0: let go */
};

struct rep_ep {
	char		*name;
	struct summ	*summ;		/* its documents filed, by fate */
	long		 n[OUT_N];	/* requests by outcome */
	long		 reqs, retries, openings, http_429;
	json_t		*errors;	/* {"http_503": n, "connect": n, ...} */
	struct rep_ev	*ev;		/* in the log's order */
	size_t		 nev, capev;
	struct rep_ep	*next;
};

struct rep {
	const char	*dir;
	struct summ	*all;		/* every document filed */
	long		 succeeded, dead;
	long		 stray;		/* stray lines' letters: summ_stray */
	json_t		*dead_by;	/* {reason: [{id, detail, ep}, ...]} */
	json_t		*summary;	/* summary.json, or NULL */
	json_t		*filed;		/* {id: true} */
	json_t		*seen;		/* {id: true}: logged or claimed */
	json_t		*pending;	/* [id, ...]: seen, not filed */
	struct rep_ep	*eps;		/* in order of first appearance */
	long		 reqs, retries, http_429, openings, dropped;
	int		 has_log;
	double		 t0, t1;	/* the first and last line of the log */
	double		 deadline;	/* epoch; 0: none */
	double		 scale;		/* RFPIPE_TIME_SCALE of the run */
	json_t		*chosen;	/* while loading: {id: [filed_weight,
					   record, path, lineno]}, the line
					   that counts ... */
	json_t		*order;		/* ... and the ids in the order met */
	const char	*path;		/* the file being read, and ... */
	long		 lineno;	/* ... its line (a warning names them) */
};

/* At most this many dead letters of a reason are listed by id. */
#define REP_DEAD_LISTED	20

/* load.c: read dir into r (nothing written); -1 when a file of it could
   not be read (said on stderr; r holds what could). */
int	rep_load(struct rep *r, const char *dir);
void	rep_free(struct rep *r);
/* "http_503" or the error's name: the key of a request's outcome. */
const char *rep_error_key(const json_t *line, char *buf, size_t len);
/* The endpoint's errors, most frequent first: a new array of [key, n]. */
json_t	*rep_top_errors(const struct rep_ep *e);

/* text.c: the summary, the pending ids and the top errors on f. */
void	rep_text(const struct rep *r, FILE *f);
/* prom.c: the Prometheus text exposition of r's counts on f. */
void	rep_prom(const struct rep *r, FILE *f);
/* html.c: the whole report, one self-contained HTML page, on f. */
void	rep_html(const struct rep *r, FILE *f);

#endif
