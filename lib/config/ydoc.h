/*
 * ydoc: YAML files (libyaml) loaded as JSON values (jansson), with the source
 * line of every mapping key kept for "file:line: key" errors.
 */
#ifndef RFP_YDOC_H
#define RFP_YDOC_H

#include <jansson.h>

struct ydoc {
	char	*path;		/* the file, as given */
	json_t	*root;		/* the document as JSON; an empty object if empty */
	json_t	*lines;		/* "a.b.c" key path -> line number */
};

/* Load path; on error NULL and a one-line message "file:line: what" in err. */
struct ydoc *ydoc_load(const char *path, char *err, size_t errlen);
/* Parse YAML text from memory (for tests and fuzzing); name labels errors. */
struct ydoc *ydoc_parse(const char *name, const char *text, size_t len,
	    char *err, size_t errlen);
/* The line of key path "a.b.c", or 0 when unknown. */
long	ydoc_line(const struct ydoc *c, const char *keypath);
/* Free c and everything it holds; NULL is fine. */
void	ydoc_free(struct ydoc *c);

#endif
