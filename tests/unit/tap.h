/* tap: the Test Anything Protocol, as every unit test of lib/ prints it. */
#ifndef RFP_TAP_H
#define RFP_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tap_n, tap_fail;

static inline void ok(int, const char *, ...)
    __attribute__((format(printf, 2, 3)));

/* "ok N - what" or "not ok N - what". */
static inline void
ok(int cond, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	if (!cond)
		tap_fail++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* ok when the strings are equal (or both NULL); shows both when not. */
static inline void
is_str(const char *got, const char *want, const char *name)
{
	int c = got != NULL && want != NULL ? strcmp(got, want) == 0 :
	    got == want;

	ok(c, "%s", name);
	if (!c)
		printf("#   got:  \"%s\"\n#   want: \"%s\"\n",
		    got ? got : "(null)", want ? want : "(null)");
}

/* ok when the numbers are equal; shows both when not. */
static inline void
is_long(long got, long want, const char *name)
{
	ok(got == want, "%s", name);
	if (got != want)
		printf("#   got:  %ld\n#   want: %ld\n", got, want);
}

/* The plan line, and the exit status: 0 when every test passed. */
static inline int
tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_fail != 0;
}

/* A readable fd holding exactly len bytes of s, at its start. */
static inline int
tap_fd_of(const char *s, size_t len)
{
	FILE *f = tmpfile();
	int fd;

	if (f == NULL || fwrite(s, 1, len, f) != len || fflush(f) != 0) {
		perror("tap: tmpfile");
		exit(2);
	}
	fd = dup(fileno(f));
	fclose(f);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

#endif
