/* rfp-fetch internals shared by main.c (the loop) and xfer.c (one transfer). */
#ifndef RFP_FETCH_H
#define RFP_FETCH_H

#include <stdio.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "lib/conf.h"
#include "lib/hdr.h"

struct ep;

struct job {
	json_t		*rec;
	struct ep	*ep;
	double		 not_before;	/* epoch; 0: now */
	long		 lineno;
	int		 held;		/* held back by an open breaker */
	int		 confirmed;	/* status_url said: not committed */
	long		 seq;		/* the pace's grant number; -1: none */
	struct job	*next;		/* in the ready queue */
};

struct xfer {
	struct xfer	*prev, *next;	/* transfers on the wire */
	struct job	*job;
	CURL		*easy;
	struct curl_slist *hdrs;
	char		*url;		/* this hop's; the record's at first */
	long		 hops;		/* redirects followed */
	double		 until;		/* clk_mono the attempt times out */
	char		*body;		/* request body */
	size_t		 body_len;
	int		 body_fd;	/* ... or its body_file, or -1 */
	long		 body_off;	/* ... read so far */
	int		 fd;		/* response body, or -1 */
	char		*mem;		/* ... held in memory while small */
	size_t		 mlen, mcap;
	char		*bid;		/* its file name: the record's id */
	char		*part;		/* its temporary path */
	char		*final;		/* its path once complete */
	EVP_MD_CTX	*sha;
	long		 bytes;
	int		 too_large;
	int		 slot;		/* slot index held, -1: none */
	int		 probe;		/* the breaker's half-open probe */
	int		 confirm;	/* asks a status_url, sends nothing */
	long		 inflight;	/* on its endpoint at its send, itself
					   included */
	double		 t0;
	double		 t1;		/* when the transfer ended */
	char		*retry_after;
	char		*date;
	char		*ctype;
	struct hdr_ratelimit rl;
	int		 rl_seen;
	double		 capped_at;	/* deadline that capped the timeout */
	CURLcode	 cc;		/* how the transfer ended */
	int		 wr_err;	/* the body thread's errno, or 0 */
	int		 renamed;	/* ... and the body is in docs/ */
	struct xfer	*bnext;		/* in the body thread's lists */
};

/* Bodies up to this size are held in memory and filed by the body thread. */
#define BODY_MEM	(64 * 1024)

struct fopts {
	struct conf	 conf;
	const char	*run_dir;
	int		 docs_fd;	/* RUNDIR/docs, with a run directory */
	int		 part_fd;	/* RUNDIR/docs/.part: bodies being fetched */
	double		 deadline;	/* epoch; 0: none */
	int		 insecure;
	int		 on_open_dead;
};

extern struct fopts fo;

/*
 * Within this many real seconds of the deadline, it has come: a transfer
 * whose timeout was capped to the deadline ends up to a millisecond early
 * by the wall clock, and nothing new is started only to be cut at once.
 */
#define DEADLINE_SLACK	0.01

/* Whether the deadline has come (within DEADLINE_SLACK) at wall time now. */
int	deadline_come(double now);

/* Set up a transfer for job's next attempt; NULL and *err on a local error. */
struct xfer *xfer_start(struct job *job, char *err, size_t errlen);
/*
 * After one hop of x: when its answer is a redirect to follow, set x up for
 * the next hop and return 1 (the caller adds x->easy to the multi again);
 * else 0, x->cc possibly changed to say why the redirect was refused.
 */
int	xfer_redirect(struct xfer *x);
/*
 * Set up a GET of url, the status_url of job's submission (its answer held
 * in memory): over the same path as every request, TLS settings, timeout
 * and headers included, but sending nothing of the submission.
 */
struct xfer *xfer_confirm_start(struct job *job, const char *url);
/*
 * What a finished confirmation says: 1 committed (*reply set: the answer),
 * 0 not committed, -1 cannot tell (why says so).  Only a 200 with a JSON
 * object whose "committed" is true or false says either.
 */
int	xfer_confirmed(const struct xfer *x, json_t **reply, char *why,
	    size_t len);
/* Fill the record from a finished transfer; the caller frees with xfer_free. */
void	xfer_finish(struct xfer *x, CURLcode cc);
/* Release everything of x (not the job). */
void	xfer_free(struct xfer *x);
/* Handles kept for reuse: at most this many, freed by xfer_pool_free. */
#define XFER_POOL	64
void	xfer_pool_free(void);
/* Create (truncate) x's partial body file: the fd, or -1 with errno. */
int	xfer_open_part(const struct xfer *x);
/* 1 when the finished x has a body for the body thread to file. */
int	xfer_files_body(const struct xfer *x);

/* bodies.c: the body thread.  bodies_start returns the fd to poll. */
int	bodies_start(void);
void	bodies_put(struct xfer *list);
struct xfer *bodies_take(void);
void	bodies_stop(void);
/*
 * Open a request's body_file: a regular file under the body root, reached
 * without a symbolic link, at most max bytes.  The fd (*size set), or -1
 * with "field \"body_file\": ..." in err.
 */
int	bodies_open(const char *path, long max, long *size, char *err,
	    size_t errlen);
/* Close the body root (at exit). */
void	bodies_close_root(void);
/* Fields of a previous attempt, removed before the next. */
void	xfer_clear(json_t *rec);

/*
 * --check (check.c): read the manifest on fd and print, per endpoint, its
 * documents and the limits of c; 0, 3 when lines are bad, 2 when config
 * names an endpoint no record has or the deadline is past.
 */
int	check_manifest(int fd, const struct conf *c, const char *config,
	    double deadline, const char *deadline_text);

/*
 * Claims (claims.c): which live pipeline on the run directory holds an id.
 * claims_take: 1 when it is now this process's (or was), 2 the same but
 * taken from a pipeline that died (it may have filed it), 0 when a live
 * one holds it (its name in holder).  Fatal errors exit 1.
 */
void	claims_open(const char *rundir);
int	claims_take(const char *id, char *holder, size_t len);
void	claims_close(void);

#endif
