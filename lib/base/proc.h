/* proc: processes by their ids, and the host those ids mean something on. */
#ifndef RFP_PROC_H
#define RFP_PROC_H

#include <stddef.h>

/*
 * This host's name (gethostname(3), or "localhost"): a pid names a
 * process only here.
 */
const char *proc_host(void);
/* 1 when process pid runs on this host, whoever's it is (kill(2) with 0). */
int	proc_alive(long pid);
/* Process pid on host as shared state names it: "PID@HOST", in buf of n. */
void	proc_name(char *buf, size_t n, long pid, const char *host);
/* This process so named. */
void	proc_id(char *buf, size_t n);

#endif
