/* x: allocation that cannot fail; on out-of-memory the program exits 1. */
#ifndef RFP_X_H
#define RFP_X_H

#include <stddef.h>

/* malloc(n) or exit 1. */
void	*xmalloc(size_t n);
/* calloc(n, size) or exit 1. */
void	*xcalloc(size_t n, size_t size);
/* realloc(p, n) or exit 1. */
void	*xrealloc(void *p, size_t n);
/* strdup(s) or exit 1. */
char	*xstrdup(const char *s);
/* The program name the out-of-memory line starts with (msg_init sets it). */
void	x_name(const char *name);
/* asprintf-like: a newly allocated formatted string, or exit 1. */
char	*xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
