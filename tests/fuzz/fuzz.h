/*
 * fuzz: what the libFuzzer targets in tests/fuzz share: the entry points'
 * prototypes, NUL-terminated copies of the input, an anonymous file to
 * hand to file-based readers, and the check that stops on a broken
 * contract (abort, so libFuzzer saves the input as a crash).
 */
#ifndef RFP_FUZZ_H
#define RFP_FUZZ_H

#include <sys/syscall.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/x.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int	LLVMFuzzerInitialize(int *argc, char ***argv);

/* Abort, naming the broken contract, when cond is false. */
#define FUZZ_CHECK(cond, what) \
	((cond) ? (void)0 : fuzz_fail(#cond, (what), __FILE__, __LINE__))

static inline _Noreturn void
fuzz_fail(const char *cond, const char *what, const char *file, int line)
{
	fprintf(stderr, "%s:%d: contract broken: %s (%s)\n", file, line, what,
	    cond);
	abort();
}

/* A NUL-terminated copy of data (caller frees); an inner NUL ends it early. */
static inline char *
fuzz_str(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);

	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/*
 * An anonymous file: a memfd (by syscall, since the Makefile's feature
 * macros do not declare memfd_create), else an unlinked temporary file.
 * Aborts when neither can be had: the target cannot run without it.
 */
static inline int
fuzz_memfd(void)
{
	char tmp[] = "/tmp/rfp-fuzz.XXXXXX";
	int fd;

	if ((fd = (int)syscall(SYS_memfd_create, "rfp-fuzz", 0U)) != -1)
		return fd;
	if ((fd = mkstemp(tmp)) == -1) {
		perror("rfp-fuzz: memfd_create and mkstemp");
		abort();
	}
	unlink(tmp);
	return fd;
}

/* Make data the whole content of fd and rewind it; aborts on failure. */
static inline void
fuzz_fill(int fd, const uint8_t *data, size_t size)
{
	size_t off = 0;
	ssize_t n;

	if (ftruncate(fd, 0) == -1) {
		perror("rfp-fuzz: ftruncate");
		abort();
	}
	while (off < size) {
		if ((n = pwrite(fd, data + off, size - off, (off_t)off)) <= 0) {
			perror("rfp-fuzz: pwrite");
			abort();
		}
		off += (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) == -1) {
		perror("rfp-fuzz: lseek");
		abort();
	}
}

#endif
