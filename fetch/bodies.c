/*
 * bodies: response bodies filed into RUNDIR/docs by a thread of their own.
 *
 * Creating a file, writing it and renaming it into docs/ costs a fast run
 * more than a third of rfp-fetch's time, all of it in system calls that
 * need nothing from the loop.  A finished transfer whose body is held in
 * memory (or already spilled to docs/.part) is handed over here; this
 * thread opens the partial file when it is not open yet, writes what is
 * held, closes it and renames it into docs/, and hands the transfer back.
 * The loop files the record only then, so a record never names a body
 * that is not in place, as before.
 *
 * The thread touches only the transfer's fd, mem, mlen, bid, wr_err and
 * renamed fields, and only between bodies_put and bodies_take: the loop
 * leaves a transfer alone while it is here.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "lib/msg.h"
#include "lib/rec.h"
#include "fetch/fetch.h"

static struct {
	pthread_t	 th;
	int		 running;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	struct xfer	*todo, **todo_tail;	/* handed over, in order */
	struct xfer	*done, **done_tail;	/* filed, for the loop */
	int		 stop;
	int		 wake[2];	/* a byte when done turns non-empty */
} B = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.wake = { -1, -1 },
};

static void
file_one(struct xfer *x)
{
	x->wr_err = 0;
	if (x->fd == -1 && (x->fd = xfer_open_part(x)) == -1) {
		x->wr_err = errno;
		return;
	}
	if (rec_write_all(x->fd, x->mem, x->mlen) == -1)
		x->wr_err = errno;
	if (close(x->fd) == -1 && x->wr_err == 0)
		x->wr_err = errno;
	x->fd = -1;
	if (x->wr_err == 0 && renameat(fo.part_fd, x->bid, fo.docs_fd,
	    x->bid) == 0)
		x->renamed = 1;
}

static void *
loop(void *arg)
{
	struct xfer *x;
	char c = 1;

	(void)arg;
	pthread_mutex_lock(&B.mu);
	for (;;) {
		while (B.todo == NULL && !B.stop)
			pthread_cond_wait(&B.cv, &B.mu);
		if ((x = B.todo) == NULL)
			break;		/* stopping, and nothing left */
		if ((B.todo = x->bnext) == NULL)
			B.todo_tail = &B.todo;
		pthread_mutex_unlock(&B.mu);
		file_one(x);
		pthread_mutex_lock(&B.mu);
		x->bnext = NULL;
		if (B.done == NULL && write(B.wake[1], &c, 1) == -1 &&
		    errno != EAGAIN)
			msg_warnsys("write to the loop's wake-up pipe");
		*B.done_tail = x;
		B.done_tail = &x->bnext;
	}
	pthread_mutex_unlock(&B.mu);
	return NULL;
}

int
bodies_start(void)
{
	sigset_t all, old;
	int rc, i;

	B.todo_tail = &B.todo;
	B.done_tail = &B.done;
	if (pipe(B.wake) == -1)
		msg_diesys(1, "pipe");
	for (i = 0; i < 2; i++)
		if (fcntl(B.wake[i], F_SETFL, O_NONBLOCK) == -1 ||
		    fcntl(B.wake[i], F_SETFD, FD_CLOEXEC) == -1)
			msg_diesys(1, "fcntl");
	/* Signals are the loop's to handle. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&B.th, NULL, loop, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		errno = rc;
		msg_diesys(1, "pthread_create");
	}
	B.running = 1;
	return B.wake[0];
}

/* Hand over a list linked by bnext, in order: one wake-up for all. */
void
bodies_put(struct xfer *list)
{
	struct xfer *x;

	if (list == NULL)
		return;
	for (x = list; x->bnext != NULL; x = x->bnext)
		;
	pthread_mutex_lock(&B.mu);
	*B.todo_tail = list;
	B.todo_tail = &x->bnext;
	pthread_cond_signal(&B.cv);
	pthread_mutex_unlock(&B.mu);
}

struct xfer *
bodies_take(void)
{
	struct xfer *list;
	char buf[64];

	while (read(B.wake[0], buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&B.mu);
	list = B.done;
	B.done = NULL;
	B.done_tail = &B.done;
	pthread_mutex_unlock(&B.mu);
	return list;
}

void
bodies_stop(void)
{
	if (!B.running)
		return;
	pthread_mutex_lock(&B.mu);
	B.stop = 1;
	pthread_cond_signal(&B.cv);
	pthread_mutex_unlock(&B.mu);
	pthread_join(B.th, NULL);
	B.running = 0;
	close(B.wake[0]);
	close(B.wake[1]);
	B.wake[0] = B.wake[1] = -1;
}
