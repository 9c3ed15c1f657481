/*
 * rec: NDJSON records.  One JSON object per line; lines are capped at
 * REC_LINE_MAX bytes (the newline excluded).  A record is never split
 * between two write(2)s: rec_out gathers whole records into writes of at
 * most PIPE_BUF bytes (atomic on a pipe), so writers sharing one pipe
 * never interleave, and rec_piece cuts a text of records the same way.
 */
#ifndef RFP_REC_H
#define RFP_REC_H

#include <stddef.h>

#include <jansson.h>

#include "lib/record/fate.h"

/*
 * Two caps, so that a record admitted is never refused later.  A manifest
 * line, and a record as rfp-fetch admits it (written compact, with its
 * endpoint), is at most REC_LINE_MAX bytes.  The stages add at most
 * REC_ADDED_MAX between them (every field they add is bounded: header
 * values 512 bytes, messages a few hundred, a ledger reply dropped when
 * it would pass half of it), and every reader after rfp-fetch (the
 * stages, the retry FIFO, results.ndjson and dead.ndjson) takes lines of
 * up to REC_STREAM_MAX.
 */
#define REC_LINE_MAX	(1024 * 1024)
#define REC_ADDED_MAX	(64 * 1024)
#define REC_STREAM_MAX	(REC_LINE_MAX + REC_ADDED_MAX)

/* rfp-sink's acknowledgements on the retry FIFO, word for word. */
#define REC_ACK_DONE	"{\"ack\":true,\"fate\":\"done\"}"
#define REC_ACK_DEAD	"{\"ack\":true,\"fate\":\"dead\"}"

/*
 * The member that keys rfp-fetch's dead letter of a manifest line with no
 * id of its own, or a duplicate id: see fetch/admit.c and lib/accounts/dead.h.
 */
#define REC_LINE_KEY	"line_key"

/*
 * The member in which rfp-queue load records the directory of the
 * manifest a record came from, the root of its body_file; rfp-fetch
 * reads it only with --from-queue (fetch/bodies.c).
 */
#define REC_MANIFEST_DIR	"manifest_dir"

enum rec_rc {
	REC_ERR = -1,		/* read error, errno set */
	REC_EOF = 0,		/* no more lines */
	REC_LINE = 1,		/* a line is ready */
	REC_TOOLONG = 2,	/* a line over the cap was skipped */
	REC_AGAIN = 3		/* no complete line yet (non-blocking fd) */
};

struct rec_reader;

/* A UTF-8 byte order mark, as Windows editors start a text file. */
#define REC_BOM		"\xef\xbb\xbf"

/*
 * A reader on fd with the given line cap (0: REC_LINE_MAX, a manifest's:
 * a byte order mark at the very start of a manifest is skipped).
 */
struct rec_reader *rec_reader_new(int fd, size_t cap);
/* Next line: *line (NUL-terminated, valid until the next call), *len, *lineno. */
enum rec_rc rec_next(struct rec_reader *r, char **line, size_t *len,
	    long *lineno);
/* Read no more than n bytes of its fd from now: what follows is not there. */
void	rec_reader_limit(struct rec_reader *r, long long n);
/*
 * Where the line rec_next last gave starts, in bytes from where the
 * reader began on its fd (a byte order mark skipped is the line's): for
 * the line to be read again with pread(2).
 */
long long rec_reader_at(const struct rec_reader *r);
/* Close nothing, free the reader. */
void	rec_reader_free(struct rec_reader *r);

/* Parse a line into an object; NULL and a message in err otherwise. */
json_t	*rec_parse(const char *line, size_t len, char *err, size_t errlen);
/*
 * jansson's reason for text it could not parse, without the "near '...'"
 * it quotes from the text: a line cut short in a header's value quoted
 * the secret.  The column says where.  je's text is cut in place.
 */
const char *rec_json_why(json_error_t *je);
/* Write the record text s plus '\n' with one writev(2); 0 or -1 with errno. */
int	rec_write_line(int fd, const char *s, size_t len);
/* Write all len bytes of s to fd, through EINTR and short writes; 0 or -1. */
int	rec_write_all(int fd, const char *s, size_t len);
/*
 * The length of the first piece of the records text s (len bytes): the
 * whole records that fit in PIPE_BUF bytes, or the first record alone
 * when it does not fit (a piece holding a record's end, when s starts in
 * mid-record), or all of len when no newline ends one.
 */
size_t	rec_piece(const char *s, size_t len);
/* Serialise rec plus '\n' into a new buffer (caller frees); *len set. */
char	*rec_dump(const json_t *rec, size_t *len);
/*
 * JSON written by hand into a growing buffer (b->s, b->len bytes of
 * b->cap; zeroed, it is empty): what json_dumps(JSON_COMPACT |
 * JSON_REAL_PRECISION(prec)) writes of the same values, byte for byte
 * (prec 1 to 31; 0: jansson's 17 digits), without building them first.
 * rec_put adds n bytes as they are, rec_put_str a string, quoted and escaped
 * (valid UTF-8: the caller's to see to), rec_put_int an integer,
 * rec_put_real a real; rec_put_val a value, -1 (nothing added) when it
 * nests deeper than jansson parses.  rec_puts adds a string literal.
 */
struct rec_buf {
	char	*s;
	size_t	 len, cap;
};
void	rec_put(struct rec_buf *b, const char *s, size_t n);
/* A string literal's bytes. */
#define rec_puts(b, lit)	rec_put((b), (lit), sizeof(lit) - 1)
void	rec_put_str(struct rec_buf *b, const char *s);
void	rec_put_int(struct rec_buf *b, long long v);
void	rec_put_real(struct rec_buf *b, double d, int prec);
int	rec_put_val(struct rec_buf *b, const json_t *v, int prec);
/*
 * Append rec plus '\n' to b, as json_dumps(JSON_COMPACT) would write it;
 * -1 (nothing added) when rec nests deeper than jansson allows.
 */
int	rec_dump_to(struct rec_buf *b, const json_t *rec);

struct rec_out;

/* Whole records to fd, gathered into writes of at most PIPE_BUF bytes. */
struct rec_out *rec_out_new(int fd);
/* Add one whole record (s ends in '\n'); 0 or -1 with errno. */
int	rec_out_put(struct rec_out *o, const char *s, size_t len);
/* Add one whole record given without its newline; 0 or -1 with errno. */
int	rec_out_line(struct rec_out *o, const char *s, size_t len);
/* Add rec, serialised, as one whole record; 0 or -1 with errno. */
int	rec_out_json(struct rec_out *o, const json_t *rec);
/* Write what is gathered; 0 or -1 with errno. */
int	rec_out_flush(struct rec_out *o);
/* Whether n more bytes would be gathered without a write first. */
int	rec_out_fits(const struct rec_out *o, size_t n);
/* Free o without writing. */
void	rec_out_free(struct rec_out *o);
/* Flush o before every read(2) of r, so nothing waits while r blocks. */
void	rec_reader_flush_first(struct rec_reader *r, struct rec_out *o);
/* Call fn(arg) before every read(2) of r (before the flush); -1 stops r. */
void	rec_reader_drain(struct rec_reader *r, int (*fn)(void *), void *arg);
/* Call fn(arg) every secs real seconds while r waits for input. */
void	rec_reader_idle(struct rec_reader *r, double secs,
	    void (*fn)(void *), void *arg);

/* A dead bad_input record for an unusable line. */
json_t	*rec_bad_input(const char *stage, long lineno, const char *detail,
	    const char *line, size_t len);
/*
 * Mark rec dead with reason and detail (detail may be NULL; as
 * rec_jstring keeps it, so a detail cut on a byte is never lost).
 */
void	rec_kill(json_t *rec, enum fate_reason reason, const char *detail);

/*
 * Cut the string s back to its last whole UTF-8 character: a text cut to
 * a cap on a byte is then still UTF-8 (jansson takes nothing else).
 */
void	rec_utf8_cut(char *s);
/*
 * The bytes of s, at most max, that end on a character boundary: a text
 * cut there for a message ("%.*s") is still UTF-8.  A byte that is not
 * UTF-8 counts as a character of its own.
 */
size_t	rec_utf8_prefix(const char *s, size_t max);
/* Replace, in place, every byte of s that is not part of a UTF-8 character with '?'. */
void	rec_utf8_fix(char *s);
/*
 * The length of the control character s starts with, 0 if none: a C0
 * byte or DEL (an escape sequence, a newline), a C1 character or a bidi
 * override or isolate (U+202A to U+202E, U+2066 to U+2069), which would
 * move a terminal's cursor or turn the text after it around.
 */
size_t	rec_tty_bad(const char *s);
/*
 * s, in place, fit for a terminal: every control character (rec_tty_bad)
 * one '?', as the run's table shows a record's text; s returned.
 */
char	*rec_shown(char *s);
/*
 * s as a JSON string, its bytes that are not UTF-8 made '?' (a portal's
 * header, a text cut on a byte): json_string() gives NULL for them, and
 * json_object_set_new() then sets nothing, so the field is lost.  NULL
 * only for a NULL s or out of memory.
 */
json_t	*rec_jstring(const char *s);
/* The text jansson writes for the real d, into buf; its length or -1. */
int	rec_real(double d, char *buf, size_t len);
/* String field or NULL when absent or not a string. */
const char *rec_str(const json_t *rec, const char *key);
/* Integer field or def when absent or not an integer. */
long	rec_int(const json_t *rec, const char *key, long def);
/* Number field (integer or real) or def. */
double	rec_num(const json_t *rec, const char *key, double def);

#endif
