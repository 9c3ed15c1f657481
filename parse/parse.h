/* parse: what rfp-parse's loop (main.c) and its parsers (job.c) share. */
#ifndef RFP_PARSE_H
#define RFP_PARSE_H

#include <sys/types.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "lib/config/conf.h"

#define TAIL_MAX	1024	/* bytes of a parser's stderr kept */

enum job_why {
	WHY_NONE,
	WHY_TIMEOUT,		/* killed at its timeout */
	WHY_TOO_LARGE,		/* killed when its output passed output_max */
	WHY_STOPPED		/* killed as rfp-parse stops: its record dropped */
};

/* One record's parse: the record, the parser, what it has said so far. */
struct job {
	json_t		*rec;
	long		 lineno;
	char		*id;		/* the record's, checked by doc_id_check */
	char		*ep;		/* its endpoint key */
	const struct conf_parse *cp;
	char		*name;		/* "ID.parsed" */
	char		*pname;		/* "ID.parsed.PID", in docs/.parse */
	pid_t		 pid;		/* also its process group; 0: none */
	int		 out, err;	/* pipes from the parser; -1: at EOF */
	int		 part;		/* docs/.parse/pname; -1: closed */
	EVP_MD_CTX	*sha;
	long long	 bytes;		/* of standard output */
	double		 t_end;		/* monotonic, real seconds */
	int		 exited, status;
	int		 spawn_err;	/* errno of a parser that could not start */
	enum job_why	 why;
	char		 tail[TAIL_MAX];	/* the end of its stderr */
	size_t		 tlen;
	struct job	*next;
};

/* The run directory's docs/ and docs/.parse, opened once. */
struct dirs {
	int		 docs;
	int		 part;
	const char	*run_dir;	/* for messages */
};

/*
 * Every parse command of c must be found (else exit 2 naming config);
 * with list, print each as a JSON line, the top level's as endpoint null.
 */
void	cmds_check(const struct conf *c, const char *config, int list);

/* Room for max parsers at once; job_fini frees it. */
void	job_init(long max);
void	job_fini(void);
/*
 * Start j's parser: the body docs/ID on its stdin, its stdout into
 * docs/.parse/ID.parsed.PID, its stderr kept; in a process group of its own.
 * 0, or -1 with a message in err when the run directory fails us (a
 * parser that cannot be started is an outcome, not an error).
 */
int	job_start(struct job *j, const struct dirs *d, char *err,
	    size_t errlen);
/* Read what the parser has written; -1 with a message when a write fails. */
int	job_read(struct job *j, const struct dirs *d, char *err, size_t errlen);
/* Reap the parser if it has exited, and end what it left in its group. */
void	job_reap(struct job *j);
/*
 * At its time (now, monotonic): kill the parser's group, or, when it has
 * exited but something that left its group holds its pipes, stop reading.
 */
void	job_expire(struct job *j, double now);
/* 1 when the parser is reaped and both its pipes are at EOF. */
int	job_done(const struct job *j);
/*
 * Write the outcome into j->rec: parsed, parsed_bytes and parsed_sha256
 * with docs/ID.parsed renamed into place, or parse_error and parse_detail.
 * -1 with a message in err when the run directory fails us.
 */
int	job_finish(struct job *j, const struct dirs *d, char *err,
	    size_t errlen);
/* Kill every running parser's group (safe in a signal handler). */
void	job_kill_all(void);
/* Free j and its record; a parser still running is killed first. */
void	job_free(struct job *j);
/* The hex SHA-256 of the file name in dir, into hex[65]; 0 or -1. */
int	job_digest(int dir, const char *name, char hex[65]);

#endif
