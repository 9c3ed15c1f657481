/*
 * scan: a strict one-pass reading of a record line that finds its top-level
 * members without building a tree, for the stages' hot path.
 *
 * It accepts a subset of what jansson (rec_parse) accepts and nothing
 * else: ASCII strings whose keys carry no escape, numbers jansson reads
 * without overflow, nesting to SCAN_DEPTH, no duplicate key in any object.
 * Whatever falls outside (or is not JSON at all) is left to rec_parse,
 * which decides and words the error: a scan that says no is a fallback,
 * never a verdict.
 */
#ifndef RFP_SCAN_H
#define RFP_SCAN_H

#include <stddef.h>

#define SCAN_MEMBERS	64	/* top-level members of a record */
#define SCAN_DEPTH	32	/* nesting of objects and arrays */
#define SCAN_SETS	8	/* members one scan_edit sets */

enum scan_type {
	SCAN_STRING,
	SCAN_INTEGER,
	SCAN_REAL,
	SCAN_TRUE,
	SCAN_FALSE,
	SCAN_NULL,
	SCAN_OBJECT,
	SCAN_ARRAY
};

struct scan_member {
	const char	*key;		/* the key's bytes, between its quotes */
	size_t		 klen;
	const char	*val;		/* the value's text, quotes included */
	size_t		 vlen;
	enum scan_type	 type;
	int		 escaped;	/* a string value holding an escape */
};

struct scan_rec {
	struct scan_member m[SCAN_MEMBERS];
	int		 n;
	const char	*close;		/* the object's closing brace */
};

/* A member to set: its value replaced where the line has key, else added. */
struct scan_set {
	const char	*key;		/* plain ASCII, no quote or backslash */
	const char	*text;		/* the value's JSON text */
};

/* 0 when line is one object within the subset (s filled in), else -1. */
int	scan_record(const char *line, size_t len, struct scan_rec *s);
/* The top-level member named key, or NULL. */
const struct scan_member *scan_get(const struct scan_rec *s,
	    const char *key);
/*
 * A string member's value without its quotes, into buf (NUL-terminated):
 * its length, or -1 when m is not an escape-free string that fits.
 */
int	scan_str(const struct scan_member *m, char *buf, size_t len);

/*
 * A string member as a C string in buf: 0 with *v set; 1 (*v NULL) when
 * absent or not a string; -1 when it holds an escape or does not fit.
 */
int	scan_field(const struct scan_rec *s, const char *key, char *buf,
	    size_t len, const char **v);
/*
 * The scanned line with up to SCAN_SETS members set, in place where their
 * key is there and before the closing brace where not, every other byte
 * kept, and a newline: written over out (out->len its length).
 */
struct rec_buf;
void	scan_edit(const char *line, const struct scan_rec *s,
	    const struct scan_set *set, int n, struct rec_buf *out);

#endif
