/*
 * rec: NDJSON records.  One JSON object per line; lines are capped at
 * REC_LINE_MAX bytes (the newline excluded); each record is written with a
 * single write(2) so writers sharing one pipe never interleave.
 */
#ifndef RFP_REC_H
#define RFP_REC_H

#include <stddef.h>

#include <jansson.h>

#define REC_LINE_MAX	(1024 * 1024)

enum rec_rc {
	REC_ERR = -1,		/* read error, errno set */
	REC_EOF = 0,		/* no more lines */
	REC_LINE = 1,		/* a line is ready */
	REC_TOOLONG = 2,	/* a line over the cap was skipped */
	REC_AGAIN = 3		/* no complete line yet (non-blocking fd) */
};

struct rec_reader;

/* A reader on fd with the given line cap (0: REC_LINE_MAX). */
struct rec_reader *rec_reader_new(int fd, size_t cap);
/* Next line: *line (NUL-terminated, valid until the next call), *len, *lineno. */
enum rec_rc rec_next(struct rec_reader *r, char **line, size_t *len,
	    long *lineno);
/* Close nothing, free the reader. */
void	rec_reader_free(struct rec_reader *r);

/* Parse a line into an object; NULL and a message in err otherwise. */
json_t	*rec_parse(const char *line, size_t len, char *err, size_t errlen);
/* Serialise rec plus '\n' and write it whole; 0 or -1 with errno. */
int	rec_write(int fd, const json_t *rec);
/* Serialise rec plus '\n' into a new buffer (caller frees); *len set. */
char	*rec_dump(const json_t *rec, size_t *len);

/* A dead bad_input record for an unusable line. */
json_t	*rec_bad_input(const char *stage, long lineno, const char *detail,
	    const char *line, size_t len);
/* Mark rec dead with reason and detail (detail may be NULL). */
void	rec_kill(json_t *rec, const char *reason, const char *detail);

/* String field or NULL when absent or not a string. */
const char *rec_str(const json_t *rec, const char *key);
/* Integer field or def when absent or not an integer. */
long	rec_int(const json_t *rec, const char *key, long def);
/* Number field (integer or real) or def. */
double	rec_num(const json_t *rec, const char *key, double def);

/*
 * The stage loop: read fd_in to EOF; fn handles each parsed record and
 * returns 0 to write it to fd_out, 1 when it wrote or consumed it itself,
 * -1 on a fatal error.  Bad lines become dead bad_input records, given to
 * fn like any other (fn passes records that carry a fate).  Returns 0 at
 * EOF, -1 on a read/write error or a fatal handler error.
 */
typedef int rec_fn(json_t *rec, long lineno, void *arg);
int	rec_loop(const char *stage, int fd_in, int fd_out, rec_fn *fn,
	    void *arg);

#endif
