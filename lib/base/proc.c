/* proc: processes by their ids, and the host those ids mean something on. */
#include <sys/types.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/proc.h"

const char *
proc_host(void)
{
	static char name[256];

	if (name[0] == '\0' && gethostname(name, sizeof(name) - 1) == -1)
		strcpy(name, "localhost");
	return name;
}

int
proc_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

void
proc_name(char *buf, size_t n, long pid, const char *host)
{
	snprintf(buf, n, "%ld@%s", pid, host);
}

void
proc_id(char *buf, size_t n)
{
	proc_name(buf, n, (long)getpid(), proc_host());
}
