/*
 * cfg: YAML files (libyaml) loaded as JSON values (jansson), with the source
 * line of every mapping key kept for "file:line: key" errors.
 */
#ifndef RFP_CFG_H
#define RFP_CFG_H

#include <jansson.h>

struct cfg {
	char	*path;		/* the file, as given */
	json_t	*root;		/* the document as JSON; an empty object if empty */
	json_t	*lines;		/* "a.b.c" key path -> line number */
};

/* Load path; on error NULL and a one-line message "file:line: what" in err. */
struct cfg *cfg_load(const char *path, char *err, size_t errlen);
/* Parse YAML text from memory (for tests and fuzzing); name labels errors. */
struct cfg *cfg_parse(const char *name, const char *text, size_t len,
	    char *err, size_t errlen);
/* The line of key path "a.b.c", or 0 when unknown. */
long	cfg_line(const struct cfg *c, const char *keypath);
/* Free c and everything it holds; NULL is fine. */
void	cfg_free(struct cfg *c);

#endif
