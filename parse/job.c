/*
 * job: one parser run over one body.  The parser is started with
 * posix_spawnp(3) from the configured words and nothing else: no shell,
 * no word of the record.  The body is its standard input, its standard
 * output goes to docs/.parse/ID.parsed.PID (counted, hashed, cut at
 * output_max), the end of its standard error is kept for the record.
 * It runs in a process group of its own, so a timeout, an output over the
 * cap, the parser's own exit or rfp-parse's end kills whatever it started.
 */
#define _GNU_SOURCE	/* posix_spawn_file_actions_addclosefrom_np */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "lib/record/rec.h"
#include "lib/state/rundir.h"
#include "lib/base/x.h"
#include "parse/parse.h"

#define DETAIL_MAX	200	/* bytes of a parser's words in the record */

extern char **environ;

/* The running parsers' groups, for job_kill_all; changed with signals held. */
static pid_t	*groups;
static size_t	 ngroups;
static const EVP_MD *sha256;

void
job_init(long max)
{
	groups = xcalloc((size_t)max, sizeof(*groups));
	ngroups = (size_t)max;
	sha256 = EVP_sha256();
}

void
job_fini(void)
{
	free(groups);
	groups = NULL;
	ngroups = 0;
}

static void
group_set(pid_t old, pid_t pid)
{
	sigset_t all, prev;
	size_t i;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &prev);
	for (i = 0; i < ngroups; i++)
		if (groups[i] == old) {
			groups[i] = pid;
			break;
		}
	sigprocmask(SIG_SETMASK, &prev, NULL);
}

void
job_kill_all(void)
{
	size_t i;

	for (i = 0; i < ngroups; i++)
		if (groups[i] > 0)
			kill(-groups[i], SIGKILL);
}

/*
 * Open a regular file in dir, read-only: never a symlink, and never a FIFO
 * or a device, whose open or read could wait for ever (ENODEV, the
 * nearest errno to "not a regular file", is said as such by the caller).
 */
static int
open_regular(int dir, const char *name)
{
	struct stat st;
	int fd, e;

	if ((fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK)) == -1)
		return -1;
	if (fstat(fd, &st) == -1)
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = ENODEV;
	else if (fcntl(fd, F_SETFL, 0) == -1)
		e = errno;
	else
		return fd;
	close(fd);
	errno = e;
	return -1;
}

static int
pipe_cloexec(int p[2])
{
	int i;

	if (pipe(p) == -1)
		return -1;
	for (i = 0; i < 2; i++)
		if (fcntl(p[i], F_SETFD, FD_CLOEXEC) == -1) {
			close(p[0]);
			close(p[1]);
			return -1;
		}
	/* Only the read end, ours: the parser's writes may block. */
	return fcntl(p[0], F_SETFL, O_NONBLOCK);
}

static void
close_pair(int p[2])
{
	if (p[0] != -1)
		close(p[0]);
	if (p[1] != -1)
		close(p[1]);
	p[0] = p[1] = -1;
}

/* posix_spawnp with the body, two pipes, a group and default signals. */
static int
spawn(struct job *j, int body, int pout[2], int perr[2])
{
	static const int sigs[] = { SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP,
		SIGCHLD };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	size_t i;
	int rc;

	sigemptyset(&none);
	sigemptyset(&def);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&def, sigs[i]);
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0)
		return rc;
	if ((rc = posix_spawnattr_init(&at)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return rc;
	}
	if ((rc = posix_spawn_file_actions_adddup2(&fa, body, 0)) == 0 &&
	    (rc = posix_spawn_file_actions_adddup2(&fa, pout[1], 1)) == 0 &&
	    (rc = posix_spawn_file_actions_adddup2(&fa, perr[1], 2)) == 0 &&
	    /* Nothing else the caller left open without close-on-exec. */
	    (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
	    (rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0 &&
	    (rc = posix_spawnattr_setpgroup(&at, 0)) == 0 &&
	    (rc = posix_spawnattr_setsigmask(&at, &none)) == 0 &&
	    (rc = posix_spawnattr_setsigdefault(&at, &def)) == 0)
		rc = posix_spawnp(&j->pid, j->cp->command[0], &fa, &at,
		    j->cp->command, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

int
job_start(struct job *j, const struct dirs *d, char *err, size_t errlen)
{
	int body, pout[2] = { -1, -1 }, perr[2] = { -1, -1 }, rc;
	sigset_t all, prev;

	j->out = j->err = j->part = -1;
	if ((body = open_regular(d->docs, j->id)) == -1) {
		snprintf(err, errlen, "open %s/%s/%s: %s", d->run_dir,
		    rundir_name(RUNDIR_DOCS), j->id, errno == ENODEV ? "not a regular file" : strerror(errno));
		return -1;
	}
	if ((j->part = openat(d->part, j->pname, O_WRONLY | O_CREAT |
	    O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1 ||
	    pipe_cloexec(pout) == -1 || pipe_cloexec(perr) == -1) {
		snprintf(err, errlen, "%s %s/%s/%s: %s", j->part == -1 ?
		    "open" : "pipe for", d->run_dir, rundir_name(RUNDIR_PARSING),
		    j->pname, strerror(errno));
		close(body);
		close_pair(pout);
		return -1;
	}
	if ((j->sha = EVP_MD_CTX_new()) == NULL ||
	    !EVP_DigestInit_ex(j->sha, sha256, NULL)) {
		snprintf(err, errlen, "SHA-256: cannot start a digest");
		close(body);
		close_pair(pout);
		close_pair(perr);
		return -1;
	}
	/* The group is listed before any signal could find it unlisted. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &prev);
	rc = spawn(j, body, pout, perr);
	if (rc == 0)
		group_set(0, j->pid);
	sigprocmask(SIG_SETMASK, &prev, NULL);
	close(body);
	close(pout[1]);
	close(perr[1]);
	if (rc != 0) {
		close(pout[0]);
		close(perr[0]);
		j->pid = 0;
		j->spawn_err = rc;
		j->exited = 1;
		return 0;
	}
	j->out = pout[0];
	j->err = perr[0];
	return 0;
}

static void
keep_tail(struct job *j, const char *p, size_t n)
{
	if (n >= TAIL_MAX) {
		memcpy(j->tail, p + n - TAIL_MAX, TAIL_MAX);
		j->tlen = TAIL_MAX;
		return;
	}
	if (j->tlen + n > TAIL_MAX) {
		memmove(j->tail, j->tail + (j->tlen + n - TAIL_MAX),
		    TAIL_MAX - n);
		j->tlen = TAIL_MAX - n;
	}
	memcpy(j->tail + j->tlen, p, n);
	j->tlen += n;
}

/* Take the parser's output; over the cap, kill it and read on to EOF. */
static int
take_out(struct job *j, const char *p, size_t n, const struct dirs *d,
    char *err, size_t errlen)
{
	if (j->why == WHY_TOO_LARGE)
		return 0;
	if (j->bytes + (long long)n > j->cp->output_max) {
		j->why = WHY_TOO_LARGE;
		if (j->pid > 0 && !j->exited)
			kill(-j->pid, SIGKILL);
		return 0;
	}
	if (rec_write_all(j->part, p, n) == -1) {
		snprintf(err, errlen, "write %s/%s/%s: %s", d->run_dir,
		    rundir_name(RUNDIR_PARSING), j->pname, strerror(errno));
		return -1;
	}
	EVP_DigestUpdate(j->sha, p, n);
	j->bytes += (long long)n;
	return 0;
}

int
job_read(struct job *j, const struct dirs *d, char *err, size_t errlen)
{
	char buf[65536];
	ssize_t n;
	int *fd, k;

	for (k = 0; k < 2; k++) {
		fd = k == 0 ? &j->out : &j->err;
		while (*fd != -1) {
			n = read(*fd, buf, sizeof(buf));
			if (n == -1 && errno == EINTR)
				continue;
			if (n == -1 && (errno == EAGAIN ||
			    errno == EWOULDBLOCK))
				break;
			if (n <= 0) {
				close(*fd);
				*fd = -1;
				break;
			}
			if (k == 1)
				keep_tail(j, buf, (size_t)n);
			else if (take_out(j, buf, (size_t)n, d, err,
			    errlen) == -1)
				return -1;
		}
	}
	return 0;
}

void
job_reap(struct job *j)
{
	siginfo_t si;

	if (j->exited || j->pid <= 0)
		return;
	/* Look without reaping: until it is reaped, its group is its own. */
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
	    -1 || si.si_pid == 0)
		return;
	kill(-j->pid, SIGKILL);
	while (waitpid(j->pid, &j->status, 0) == -1 && errno == EINTR)
		;
	group_set(j->pid, 0);
	j->exited = 1;
}

void
job_expire(struct job *j, double now)
{
	if (now < j->t_end)
		return;
	if (!j->exited && j->pid > 0 && j->why == WHY_NONE) {
		j->why = WHY_TIMEOUT;
		kill(-j->pid, SIGKILL);
	} else if (j->exited) {
		/* Its pipes held open past its time by what left its group. */
		if (j->out != -1)
			close(j->out);
		if (j->err != -1)
			close(j->err);
		j->out = j->err = -1;
	}
}

int
job_done(const struct job *j)
{
	return j->exited && j->out == -1 && j->err == -1;
}

/* The last non-empty line of the parser's stderr, made fit for a record. */
static void
last_line(const struct job *j, char *buf, size_t len)
{
	size_t end = j->tlen, start, n, i;

	while (end > 0 && (j->tail[end - 1] == '\n' ||
	    j->tail[end - 1] == '\r' || j->tail[end - 1] == ' ' ||
	    j->tail[end - 1] == '\t'))
		end--;
	start = end;
	while (start > 0 && j->tail[start - 1] != '\n')
		start--;
	n = end - start < len - 1 ? end - start : len - 1;
	memcpy(buf, j->tail + start, n);
	buf[n] = '\0';
	for (i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = ' ';
}

static const char *
signame(int sig)
{
	static const struct {
		int sig;
		const char *name;
	} t[] = {
		{ SIGABRT, "SIGABRT" }, { SIGALRM, "SIGALRM" },
		{ SIGBUS, "SIGBUS" }, { SIGFPE, "SIGFPE" },
		{ SIGHUP, "SIGHUP" }, { SIGILL, "SIGILL" },
		{ SIGINT, "SIGINT" }, { SIGKILL, "SIGKILL" },
		{ SIGPIPE, "SIGPIPE" }, { SIGQUIT, "SIGQUIT" },
		{ SIGSEGV, "SIGSEGV" }, { SIGSYS, "SIGSYS" },
		{ SIGTERM, "SIGTERM" }, { SIGTRAP, "SIGTRAP" },
		{ SIGUSR1, "SIGUSR1" }, { SIGUSR2, "SIGUSR2" },
		{ SIGXCPU, "SIGXCPU" }, { SIGXFSZ, "SIGXFSZ" },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].sig == sig)
			return t[i].name;
	return NULL;
}

/* A JSON string of s, whatever bytes the parser wrote (not UTF-8: '?'). */
static json_t *
text(const char *s)
{
	json_t *v;
	char *c;
	size_t i;

	if ((v = json_string(s)) != NULL)
		return v;
	c = xstrdup(s);
	for (i = 0; c[i] != '\0'; i++)
		if ((unsigned char)c[i] >= 0x80)
			c[i] = '?';
	v = json_string(c);
	free(c);
	return v;
}

static void
failed(struct job *j, const char *what, const char *detail)
{
	static const char *gone[] = { "parsed", "parsed_bytes",
		"parsed_sha256", NULL };
	int i;

	for (i = 0; gone[i] != NULL; i++)
		json_object_del(j->rec, gone[i]);
	json_object_set_new(j->rec, "parse_error", json_string(what));
	json_object_set_new(j->rec, "parse_detail", text(detail));
}

static int
parsed(struct job *j, const struct dirs *d, char *err, size_t errlen)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	char hex[2 * EVP_MAX_MD_SIZE + 1], *path;
	int rc;

	rc = close(j->part);
	j->part = -1;
	if (rc == -1 || renameat(d->part, j->pname, d->docs, j->name) == -1) {
		snprintf(err, errlen, "%s %s/%s/%s: %s", rc == -1 ?
		    "write" : "rename into", d->run_dir,
		    rundir_name(RUNDIR_DOCS), j->name, strerror(errno));
		return -1;
	}
	EVP_DigestFinal_ex(j->sha, md, &mdlen);
	for (i = 0; i < mdlen; i++) {
		hex[2 * i] = "0123456789abcdef"[md[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[md[i] & 15];
	}
	hex[2 * mdlen] = '\0';
	json_object_del(j->rec, "parse_error");
	json_object_del(j->rec, "parse_detail");
	path = rundir_path(NULL, RUNDIR_DOCS, j->name);
	json_object_set_new(j->rec, "parsed", json_string(path));
	free(path);
	json_object_set_new(j->rec, "parsed_bytes", json_integer(j->bytes));
	json_object_set_new(j->rec, "parsed_sha256", json_string(hex));
	return 0;
}

int
job_finish(struct job *j, const struct dirs *d, char *err, size_t errlen)
{
	char line[DETAIL_MAX + 1], detail[DETAIL_MAX + 64];
	const char *sn;
	int code;

	if (j->spawn_err == 0 && j->why != WHY_TOO_LARGE &&
	    j->why != WHY_STOPPED && WIFEXITED(j->status) &&
	    WEXITSTATUS(j->status) == 0)
		return parsed(j, d, err, errlen);
	if (j->part != -1) {
		close(j->part);
		j->part = -1;
	}
	unlinkat(d->part, j->pname, 0);
	if (j->why == WHY_STOPPED)
		return 0;	/* the record is not written */
	last_line(j, line, sizeof(line));
	if (j->spawn_err != 0) {
		snprintf(detail, sizeof(detail), "cannot run \"%s\": %s",
		    j->cp->command[0], strerror(j->spawn_err));
		failed(j, "failed", detail);
	} else if (j->why == WHY_TOO_LARGE) {
		snprintf(detail, sizeof(detail), "output over %ld bytes",
		    j->cp->output_max);
		failed(j, "too_large", detail);
	} else if (WIFEXITED(j->status)) {
		code = WEXITSTATUS(j->status);
		if (*line == '\0')
			snprintf(line, sizeof(line), "exit %d", code);
		failed(j, code == 75 ? "tempfail" : "failed", line);
	} else if (j->why == WHY_TIMEOUT) {
		snprintf(detail, sizeof(detail), "no result after %g s",
		    j->cp->timeout);
		failed(j, "timeout", detail);
	} else {
		sn = signame(WTERMSIG(j->status));
		if (sn != NULL)
			snprintf(detail, sizeof(detail), "killed by %s", sn);
		else
			snprintf(detail, sizeof(detail), "killed by signal %d",
			    WTERMSIG(j->status));
		failed(j, "signal", detail);
	}
	return 0;
}

int
job_digest(int dir, const char *name, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE], buf[65536];
	unsigned int mdlen = 0, i;
	EVP_MD_CTX *c;
	ssize_t n;
	int fd, rc = -1;

	if ((fd = open_regular(dir, name)) == -1)
		return -1;
	if ((c = EVP_MD_CTX_new()) == NULL ||
	    !EVP_DigestInit_ex(c, sha256, NULL))
		goto out;
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			goto out;
		EVP_DigestUpdate(c, buf, (size_t)n);
	}
	EVP_DigestFinal_ex(c, md, &mdlen);
	for (i = 0; i < mdlen && i < 32; i++) {
		hex[2 * i] = "0123456789abcdef"[md[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[md[i] & 15];
	}
	hex[2 * i] = '\0';
	rc = 0;
out:
	EVP_MD_CTX_free(c);
	close(fd);
	return rc;
}

void
job_free(struct job *j)
{
	if (j == NULL)
		return;
	if (j->pid > 0 && !j->exited) {
		kill(-j->pid, SIGKILL);
		while (waitpid(j->pid, NULL, 0) == -1 && errno == EINTR)
			;
		group_set(j->pid, 0);
	}
	if (j->out != -1)
		close(j->out);
	if (j->err != -1)
		close(j->err);
	if (j->part != -1)
		close(j->part);
	EVP_MD_CTX_free(j->sha);
	json_decref(j->rec);
	free(j->id);
	free(j->ep);
	free(j->name);
	free(j->pname);
	free(j);
}
