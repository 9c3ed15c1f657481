/* rec: capped NDJSON line reading and whole-record writing. */
#include <sys/stat.h>
#include <sys/uio.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/record/fate.h"
#include "lib/record/rec.h"
#include "lib/base/x.h"

#define RAW_KEEP	200

struct rec_reader {
	int	 fd;
	size_t	 cap;		/* longest line accepted */
	char	*buf;
	size_t	 size;		/* allocated */
	size_t	 start;		/* first unconsumed byte */
	size_t	 end;		/* one past the last byte read */
	size_t	 scanned;	/* bytes from start already searched for '\n' */
	long	 lineno;
	int	 skipping;	/* discarding the rest of an oversized line */
	int	 bom;		/* a manifest's: skip a BOM before line 1 */
	int	 eof;
	long long left;		/* bytes it may still read; -1: no limit */
	long long got;		/* bytes read, and the newline added at EOF */
	long long at;		/* where the line last taken starts */
	int	(*drain)(void *);	/* called before each read, */
	void	*drain_arg;
	struct rec_out *flush;	/* ... then this written out */
	void	(*idle)(void *);	/* called while waiting for input */
	void	*idle_arg;
	int	 idle_ms;
};

struct rec_out {
	int	 fd;
	int	 file;		/* fd is a regular file */
	size_t	 len;
	char	 buf[PIPE_BUF];
};

struct rec_reader *
rec_reader_new(int fd, size_t cap)
{
	struct rec_reader *r = xcalloc(1, sizeof(*r));

	r->fd = fd;
	r->cap = cap ? cap : REC_LINE_MAX;
	r->bom = cap == 0;
	r->left = -1;
	r->size = 65536;
	r->buf = xmalloc(r->size);
	return r;
}

void
rec_reader_limit(struct rec_reader *r, long long n)
{
	r->left = n;
}

long long
rec_reader_at(const struct rec_reader *r)
{
	return r->at;
}

void
rec_reader_free(struct rec_reader *r)
{
	if (r == NULL)
		return;
	free(r->buf);
	free(r);
}

/* Take one line ending at nl (exclusive) out of the buffer. */
static enum rec_rc
take(struct rec_reader *r, char *nl, char **line, size_t *len, long *lineno)
{
	size_t n = (size_t)(nl - (r->buf + r->start));
	int skipped = r->skipping;

	/* What is dropped of an oversized line, never of the next one. */
	r->at = r->got - (long long)(r->end - r->start);
	*nl = '\0';
	*line = r->buf + r->start;
	*len = n;
	*lineno = ++r->lineno;
	r->start += n + 1;
	r->scanned = 0;
	r->skipping = 0;
	if (n > 0 && (*line)[n - 1] == '\r')
		(*line)[--(*len)] = '\0';
	/*
	 * A Windows editor starts the file with a byte order mark: it is
	 * the file's, not the first record's.
	 */
	if (r->bom && r->lineno == 1 && *len >= 3 &&
	    memcmp(*line, REC_BOM, 3) == 0) {
		*line += 3;
		*len -= 3;
	}
	if (skipped || *len > r->cap)
		return REC_TOOLONG;
	return REC_LINE;
}

/* Wait until fd_in is readable, calling the idle hook every idle_ms. */
static int
wait_input(struct rec_reader *r)
{
	struct pollfd p = { .fd = r->fd, .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, r->idle_ms)) != 1) {
		if (n == -1 && errno != EINTR)
			return -1;
		if (n == 0)
			r->idle(r->idle_arg);
	}
	return 0;
}

enum rec_rc
rec_next(struct rec_reader *r, char **line, size_t *len, long *lineno)
{
	char *nl;
	ssize_t n;
	size_t want, keep;

	for (;;) {
		nl = memchr(r->buf + r->start + r->scanned, '\n',
		    r->end - r->start - r->scanned);
		if (nl != NULL)
			return take(r, nl, line, len, lineno);
		r->scanned = r->end - r->start;
		/* One byte more: a line of cap bytes may end in CR LF. */
		if (!r->skipping && r->scanned > r->cap + 1) {
			/*
			 * Over the cap: keep its first RAW_KEEP bytes, the
			 * evidence a dead letter quotes (its id is there; the
			 * line's last bytes were quoted, and told nothing).
			 */
			keep = r->scanned < RAW_KEEP ? r->scanned : RAW_KEEP;
			memmove(r->buf, r->buf + r->start, keep);
			r->skipping = 1;
			r->start = 0;
			r->end = r->scanned = keep;
		} else if (r->skipping && r->scanned > RAW_KEEP)
			r->end = r->start + (r->scanned = RAW_KEEP);
		if (r->eof) {
			if (r->end == r->start && !r->skipping)
				return REC_EOF;
			if (r->end == r->size)
				r->buf = xrealloc(r->buf, ++r->size);
			r->got++;
			return take(r, r->buf + r->end++, line, len, lineno);
		}
		if (r->start > 0) {
			memmove(r->buf, r->buf + r->start, r->end - r->start);
			r->end -= r->start;
			r->start = 0;
		}
		if (r->size - r->end < 4096) {
			r->size *= 2;
			r->buf = xrealloc(r->buf, r->size);
		}
		if (r->drain != NULL && r->drain(r->drain_arg) == -1)
			return REC_ERR;
		if (r->flush != NULL && rec_out_flush(r->flush) == -1)
			return REC_ERR;
		if (r->idle != NULL && wait_input(r) == -1)
			return REC_ERR;
		want = r->size - r->end - 1;
		if (r->left >= 0 && (long long)want > r->left)
			want = (size_t)r->left;
		n = want > 0 ? read(r->fd, r->buf + r->end, want) : 0;
		if (n > 0 && r->left >= 0)
			r->left -= n;
		if (n > 0)
			r->got += n;
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return REC_AGAIN;
			return REC_ERR;
		}
		if (n == 0)
			r->eof = 1;
		r->end += (size_t)n;
	}
}

const char *
rec_json_why(json_error_t *je)
{
	char *near;

	/* Not jansson's flag, which no one here can set. */
	if (strstr(je->text, "JSON_ALLOW_NUL") != NULL)
		return "\\u0000 (a NUL) in a string";
	if ((near = strstr(je->text, " near ")) != NULL)
		*near = '\0';
	return je->text;
}

json_t *
rec_parse(const char *line, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *v;
	const char *nul;
	size_t col;

	/* jansson's "near" would show it as nothing at all. */
	if (len >= 3 && memcmp(line, REC_BOM, 3) == 0) {
		snprintf(err, errlen, "malformed JSON at column 1: a UTF-8 "
		    "byte order mark (EF BB BF) before the record (one is "
		    "skipped only at the start of a manifest)");
		return NULL;
	}
	/*
	 * ... nor would it name a NUL byte: "end of file expected".  Its
	 * column counted as jansson counts, in characters.
	 */
	if ((nul = memchr(line, '\0', len)) != NULL) {
		for (col = 1; line < nul; line++)
			col += ((unsigned char)*line & 0xc0) != 0x80;
		snprintf(err, errlen, "malformed JSON at column %zu: a NUL "
		    "byte (a binary file, or a file in UTF-16?)", col);
		return NULL;
	}
	v = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (v == NULL) {
		snprintf(err, errlen, "malformed JSON at column %d: %s",
		    je.column, rec_json_why(&je));
		return NULL;
	}
	if (!json_is_object(v)) {
		snprintf(err, errlen, "record is not a JSON object");
		json_decref(v);
		return NULL;
	}
	return v;
}

/*
 * The compact text of a value, byte for byte what jansson's
 * json_dumps(JSON_COMPACT) writes, straight into a growing buffer: jansson
 * hands its text over a callback a token at a time, and that was a tenth
 * of rfp-fetch's time in a fast run.  Strings are jansson's, so valid
 * UTF-8; a test and the fuzz target compare the two on every record.
 */
#define DUMP_DEPTH	2048	/* jansson's own limit */

static void
db_room(struct rec_buf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return;
	b->cap = b->cap ? b->cap : 256;
	while (b->len + n > b->cap)
		b->cap *= 2;
	b->s = xrealloc(b->s, b->cap);
}

void
rec_put(struct rec_buf *b, const char *s, size_t n)
{
	db_room(b, n);
	memcpy(b->s + b->len, s, n);
	b->len += n;
}

static void
db_str(struct rec_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *run = s, *end = s + n;
	char e[6];
	unsigned char c;

	rec_put(b, "\"", 1);
	for (; s < end; s++) {
		c = (unsigned char)*s;
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		rec_put(b, run, (size_t)(s - run));
		run = s + 1;
		e[0] = '\\';
		switch (c) {
		case '"': case '\\': e[1] = (char)c; break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default:
			memcpy(e + 1, "u00", 3);
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			rec_put(b, e, 6);
			continue;
		}
		rec_put(b, e, 2);
	}
	rec_put(b, run, (size_t)(s - run));
	rec_put(b, "\"", 1);
}

/* jansson's real: %.17g (or %.<prec>g), with ".0" when it would read as
 * an integer, and no '+' or leading zeros in the exponent.  prec is kept
 * as JSON_REAL_PRECISION keeps it, in 5 bits (0: 17), up to %.31g. */
static void
db_real(struct rec_buf *b, double d, int prec)
{
	char s[64], *start, *end;
	int p = prec & 0x1F;
	int n = snprintf(s, sizeof(s) - 3, "%.*g", p ? p : 17, d);

	if (strchr(s, '.') == NULL && strchr(s, 'e') == NULL) {
		memcpy(s + n, ".0", 3);
		n += 2;
	}
	if ((start = strchr(s, 'e')) != NULL) {
		end = ++start + 1;
		if (*start == '-')
			start++;
		while (*end == '0')
			end++;
		if (end != start) {
			memmove(start, end, (size_t)(s + n - end) + 1);
			n -= (int)(end - start);
		}
	}
	rec_put(b, s, (size_t)n);
}

static int
db_val(struct rec_buf *b, const json_t *v, int depth, int prec)
{
	json_t *m;
	void *it;
	size_t i;
	int first = 1;

	if (depth > DUMP_DEPTH)
		return -1;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		rec_put(b, "{", 1);
		for (it = json_object_iter((json_t *)v); it != NULL;
		    it = json_object_iter_next((json_t *)v, it)) {
			if (!first)
				rec_put(b, ",", 1);
			first = 0;
			db_str(b, json_object_iter_key(it),
			    json_object_iter_key_len(it));
			rec_put(b, ":", 1);
			if (db_val(b, json_object_iter_value(it), depth + 1,
			    prec) == -1)
				return -1;
		}
		rec_put(b, "}", 1);
		return 0;
	case JSON_ARRAY:
		rec_put(b, "[", 1);
		json_array_foreach(v, i, m) {
			if (i > 0)
				rec_put(b, ",", 1);
			if (db_val(b, m, depth + 1, prec) == -1)
				return -1;
		}
		rec_put(b, "]", 1);
		return 0;
	case JSON_STRING:
		db_str(b, json_string_value(v), json_string_length(v));
		return 0;
	case JSON_INTEGER:
		rec_put_int(b, json_integer_value(v));
		return 0;
	case JSON_REAL:
		db_real(b, json_real_value(v), prec);
		return 0;
	case JSON_TRUE:
		rec_put(b, "true", 4);
		return 0;
	case JSON_FALSE:
		rec_put(b, "false", 5);
		return 0;
	case JSON_NULL:
		rec_put(b, "null", 4);
		return 0;
	}
	return -1;
}

int
rec_dump_to(struct rec_buf *b, const json_t *rec)
{
	size_t at = b->len;

	if (db_val(b, rec, 1, 0) == -1) {
		b->len = at;
		return -1;
	}
	rec_puts(b, "\n");
	return 0;
}

void
rec_put_str(struct rec_buf *b, const char *s)
{
	db_str(b, s, strlen(s));
}

void
rec_put_int(struct rec_buf *b, long long v)
{
	char num[24];

	rec_put(b, num, (size_t)snprintf(num, sizeof(num), "%lld", v));
}

void
rec_put_real(struct rec_buf *b, double d, int prec)
{
	db_real(b, d, prec);
}

int
rec_put_val(struct rec_buf *b, const json_t *v, int prec)
{
	size_t at = b->len;

	if (db_val(b, v, 1, prec) == -1) {
		b->len = at;
		return -1;
	}
	return 0;
}

char *
rec_dump(const json_t *rec, size_t *len)
{
	struct rec_buf b = { NULL, 0, 0 };

	if (rec_dump_to(&b, rec) == -1) {
		free(b.s);
		return NULL;
	}
	db_room(&b, 1);
	b.s[b.len] = '\0';
	*len = b.len;
	return b.s;
}

int
rec_write_all(int fd, const char *s, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = write(fd, s + off, len - off);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = EIO;	/* no progress: never spin */
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}

size_t
rec_piece(const char *s, size_t len)
{
	const char *nl;
	size_t n;

	if (len <= PIPE_BUF)
		return len;
	for (n = PIPE_BUF; n > 0; n--)
		if (s[n - 1] == '\n')
			return n;
	nl = memchr(s + PIPE_BUF, '\n', len - PIPE_BUF);
	return nl != NULL ? (size_t)(nl - s) + 1 : len;
}

int
rec_out_json(struct rec_out *o, const json_t *rec)
{
	size_t len;
	char *s;
	int rc;

	if ((s = rec_dump(rec, &len)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	rc = rec_out_put(o, s, len);
	free(s);
	return rc;
}

int
rec_write_line(int fd, const char *s, size_t len)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)s, .iov_len = len },
		{ .iov_base = "\n", .iov_len = 1 }
	};
	ssize_t n;

	while ((n = writev(fd, iov, 2)) == -1)
		if (errno != EINTR)
			return -1;
	/* A short write (a full disk, a signal): finish in order. */
	if ((size_t)n < len)
		return rec_write_all(fd, s + n, len - (size_t)n) == -1 ||
		    rec_write_all(fd, "\n", 1) == -1 ? -1 : 0;
	if ((size_t)n == len)
		return rec_write_all(fd, "\n", 1);
	return 0;
}

struct rec_out *
rec_out_new(int fd)
{
	struct rec_out *o = xmalloc(sizeof(*o));
	struct stat st;

	o->fd = fd;
	o->file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	o->len = 0;
	return o;
}

/*
 * Write whole records (plus a newline when nl).  To a file, a write that
 * fails part way (a full disk, a size limit) is cut back to where it
 * began: the file never ends in a torn record.
 */
static int
out_write(struct rec_out *o, const char *s, size_t len, int nl)
{
	off_t at = o->file ? lseek(o->fd, 0, SEEK_END) : -1;
	int rc, e;

	rc = nl ? rec_write_line(o->fd, s, len) : rec_write_all(o->fd, s, len);
	if (rc == -1 && at != -1) {
		e = errno;
		/* Were the cut to fail too, the write's error is the one told. */
		(void)!ftruncate(o->fd, at);
		errno = e;
	}
	return rc;
}

int
rec_out_flush(struct rec_out *o)
{
	size_t len = o->len;

	o->len = 0;
	return len == 0 ? 0 : out_write(o, o->buf, len, 0);
}

int
rec_out_fits(const struct rec_out *o, size_t n)
{
	return o->len + n <= sizeof(o->buf);
}

/* Add s, plus a newline when nl, as one whole record. */
static int
out_add(struct rec_out *o, const char *s, size_t len, int nl)
{
	size_t n = len + (nl != 0);

	if (o->len + n > sizeof(o->buf) && rec_out_flush(o) == -1)
		return -1;
	if (n > sizeof(o->buf))		/* too big to gather: on its own */
		return out_write(o, s, len, nl);
	memcpy(o->buf + o->len, s, len);
	if (nl)
		o->buf[o->len + len] = '\n';
	o->len += n;
	return 0;
}

int
rec_out_put(struct rec_out *o, const char *s, size_t len)
{
	return out_add(o, s, len, 0);
}

int
rec_out_line(struct rec_out *o, const char *s, size_t len)
{
	return out_add(o, s, len, 1);
}

void
rec_out_free(struct rec_out *o)
{
	free(o);
}

void
rec_reader_flush_first(struct rec_reader *r, struct rec_out *o)
{
	r->flush = o;
}

void
rec_reader_drain(struct rec_reader *r, int (*fn)(void *), void *arg)
{
	r->drain = fn;
	r->drain_arg = arg;
}

void
rec_reader_idle(struct rec_reader *r, double secs, void (*fn)(void *),
    void *arg)
{
	r->idle = fn;
	r->idle_arg = arg;
	r->idle_ms = secs * 1000 < 1 ? 1 : secs * 1000 > 3600000 ? 3600000 :
	    (int)(secs * 1000);
}

json_t *
rec_bad_input(const char *stage, long lineno, const char *detail,
    const char *line, size_t len)
{
	json_t *rec = json_object(), *raw;
	size_t n = len < RAW_KEEP ? len : RAW_KEEP, i;
	char *copy;

	/* Control bytes (NUL above all) would make the record unreadable. */
	copy = xmalloc(n + 1);
	for (i = 0; i < n; i++)
		copy[i] = (unsigned char)line[i] < 0x20 || line[i] == 0x7f ?
		    '?' : line[i];
	if ((raw = json_stringn(copy, n)) == NULL) {
		/* Not valid UTF-8 (or cut inside a character): keep ASCII only. */
		for (i = 0; i < n; i++)
			if ((unsigned char)copy[i] >= 0x80)
				copy[i] = '?';
		raw = json_stringn(copy, n);
	}
	free(copy);
	json_object_set_new(rec, "id", json_null());
	json_object_set_new(rec, "line", json_integer(lineno));
	json_object_set_new(rec, "stage", json_string(stage));
	json_object_set_new(rec, "raw", raw ? raw : json_null());
	rec_kill(rec, FATE_BAD_INPUT, detail);
	return rec;
}

void
rec_kill(json_t *rec, enum fate_reason reason, const char *detail)
{
	json_object_set_new(rec, "fate", json_string(fate_name(FATE_DEAD)));
	json_object_set_new(rec, "dead_reason", json_string(
	    fate_reason(reason)));
	if (detail != NULL)
		json_object_set_new(rec, "dead_detail", rec_jstring(detail));
}

/*
 * The length of the UTF-8 character at s (n bytes there, n > 0) as
 * jansson takes it: no overlong form, no surrogate, nothing past
 * U+10FFFF.  0 when s starts none.
 */
static size_t
utf8_char(const unsigned char *s, size_t n)
{
	size_t want, i;
	unsigned long u;

	if (s[0] < 0x80)
		return 1;
	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	want = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	if (n < want)
		return 0;
	u = s[0] & (want == 2 ? 0x1f : want == 3 ? 0x0f : 0x07);
	for (i = 1; i < want; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		u = u << 6 | (s[i] & 0x3f);
	}
	if ((want == 3 && u < 0x800) || (want == 4 && u < 0x10000) ||
	    u > 0x10ffff || (u >= 0xd800 && u <= 0xdfff))
		return 0;
	return want;
}

size_t
rec_utf8_prefix(const char *s, size_t max)
{
	size_t n = strlen(s), i = 0, k;

	while (i < n) {
		/* A byte that starts no character stands for one. */
		if ((k = utf8_char((const unsigned char *)s + i, n - i)) == 0)
			k = 1;
		if (i + k > max)
			break;
		i += k;
	}
	return i;
}

void
rec_utf8_fix(char *s)
{
	size_t n = strlen(s), i = 0, k;

	while (i < n) {
		if ((k = utf8_char((unsigned char *)s + i, n - i)) == 0) {
			s[i] = '?';
			k = 1;
		}
		i += k;
	}
}

size_t
rec_tty_bad(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;

	if (u[0] < 0x20 || u[0] == 0x7f)
		return u[0] != '\0';
	/* C1 (U+0080 to U+009F): 0x9B is a CSI to a terminal in 8 bits. */
	if (u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f)
		return 2;
	/* Bidi overrides and isolates: U+202A to U+202E, U+2066 to U+2069. */
	if (u[0] == 0xe2 && ((u[1] == 0x80 && u[2] >= 0xaa && u[2] <= 0xae) ||
	    (u[1] == 0x81 && u[2] >= 0xa6 && u[2] <= 0xa9)))
		return 3;
	return 0;
}

char *
rec_shown(char *s)
{
	char *r = s, *w = s;
	size_t k;

	while (*r != '\0') {
		if ((k = rec_tty_bad(r)) > 0) {
			*w++ = '?';
			r += k;
		} else
			*w++ = *r++;
	}
	*w = '\0';
	return s;
}

json_t *
rec_jstring(const char *s)
{
	json_t *v;
	char *copy;

	if (s == NULL)
		return NULL;
	if ((v = json_string(s)) != NULL)
		return v;
	copy = xstrdup(s);
	rec_utf8_fix(copy);
	v = json_string(copy);
	free(copy);
	return v;
}

void
rec_utf8_cut(char *s)
{
	size_t n = strlen(s), i = n, want;
	unsigned char c;

	while (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i > 0 && (c = (unsigned char)s[i - 1]) >= 0xc0) {
		want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		if (n - (i - 1) < want)
			s[i - 1] = '\0';
	}
}

int
rec_real(double d, char *buf, size_t len)
{
	json_t *v = json_real(d);
	size_t n;

	if (v == NULL)
		return -1;
	n = json_dumpb(v, buf, len, JSON_ENCODE_ANY);
	json_decref(v);
	if (n == 0 || n >= len)
		return -1;
	buf[n] = '\0';
	return (int)n;
}

const char *
rec_str(const json_t *rec, const char *key)
{
	return json_string_value(json_object_get(rec, key));
}

long
rec_int(const json_t *rec, const char *key, long def)
{
	json_t *v = json_object_get(rec, key);

	return json_is_integer(v) ? (long)json_integer_value(v) : def;
}

double
rec_num(const json_t *rec, const char *key, double def)
{
	json_t *v = json_object_get(rec, key);

	return json_is_number(v) ? json_number_value(v) : def;
}
