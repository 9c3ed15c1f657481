/* msg: one-line diagnostics on stderr, each written with one write(2). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/msg.h"
#include "lib/base/x.h"
#include "lib/record/rec.h"

int msg_verbose;
static const char *prog = "rfpipe";

void
msg_init(const char *p)
{
	prog = p;
	x_name(p);
}

const char *
msg_prog(void)
{
	return prog;
}

void
msg_vfmt(char *buf, size_t size, const char *fmt, va_list ap)
{
	int n;

	if (size == 0)
		return;
	n = vsnprintf(buf, size, fmt, ap);
	if (n < 0)
		buf[0] = '\0';
}

/*
 * Emit "prog: <text>[: <syserr>]\n"; embedded newlines become spaces and
 * other control characters (rec_tty_bad: C0, C1, bidi overrides) '?', so
 * that a portal's header or a record's field quoted in a message cannot
 * move the operator's terminal.
 */
static void
emit(const char *pre, const char *sys, const char *fmt, va_list ap)
{
	char text[2048], line[2304];
	size_t i, j, k;
	int n;

	msg_vfmt(text, sizeof(text), fmt, ap);
	for (i = j = 0; text[i] != '\0'; i += k > 0 ? k : 1) {
		k = text[i] == '\t' ? 0 : rec_tty_bad(text + i);
		text[j++] = text[i] == '\n' || text[i] == '\r' ? ' ' :
		    k > 0 ? '?' : text[i];
	}
	text[j] = '\0';
	n = snprintf(line, sizeof(line), "%s: %s%s%s%s\n", prog, pre, text,
	    sys ? ": " : "", sys ? sys : "");
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	(void)!write(STDERR_FILENO, line, (size_t)n);
}

void
msg_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit("", NULL, fmt, ap);
	va_end(ap);
}

void
msg_warnsys(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	va_start(ap, fmt);
	emit("", strerror(e), fmt, ap);
	va_end(ap);
	errno = e;
}

void
msg_line(long line, const char *fmt, ...)
{
	char pre[40];
	va_list ap;

	snprintf(pre, sizeof(pre), "line %ld: ", line);
	va_start(ap, fmt);
	emit(pre, NULL, fmt, ap);
	va_end(ap);
}

void
msg_debug(const char *fmt, ...)
{
	va_list ap;

	if (!msg_verbose)
		return;
	va_start(ap, fmt);
	emit("", NULL, fmt, ap);
	va_end(ap);
}

void
msg_die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit("", NULL, fmt, ap);
	va_end(ap);
	exit(code);
}

void
msg_diesys(int code, const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	va_start(ap, fmt);
	emit("", strerror(e), fmt, ap);
	va_end(ap);
	exit(code);
}

void
msg_output_gone(void)
{
	struct pollfd p = { STDOUT_FILENO, POLLOUT, 0 };
	int e = errno;

	/* A pipe's write end polls POLLERR once its reader has closed. */
	if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) {
		signal(SIGPIPE, SIG_DFL);
		raise(SIGPIPE);
	}
	errno = e;
}
