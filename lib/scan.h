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

#endif
