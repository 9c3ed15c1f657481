/* msg: every line rfpipe writes to stderr: "<prog>: <where>: <what>". */
#ifndef RFP_MSG_H
#define RFP_MSG_H

#include <stdarg.h>

/* Set the program name used as the prefix of every message. */
void	msg_init(const char *prog);
/* The program name given to msg_init. */
const char *msg_prog(void);
/* Nonzero enables msg_debug output (-v). */
extern int msg_verbose;

/* "prog: <fmt>". */
void	msg_warn(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));
/* "prog: <fmt>: strerror(errno)". */
void	msg_warnsys(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));
/* "prog: line N: <fmt>". */
void	msg_line(long line, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* msg_warn only when msg_verbose is set. */
void	msg_debug(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));
/* msg_warn, then exit(code). */
_Noreturn void msg_die(int code, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* msg_warnsys, then exit(code). */
_Noreturn void msg_diesys(int code, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/*
 * For a filter that stopped on an error: when its standard output's
 * reader is gone (a pipe, closed), end quietly as SIGPIPE ends a filter
 * (the filters ignore it, so that a standard error gone does not end
 * them); else return.
 */
void	msg_output_gone(void);
/* Format into buf (always NUL-terminated, truncated to size). */
void	msg_vfmt(char *buf, size_t size, const char *fmt, va_list ap);

#endif
