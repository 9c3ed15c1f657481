/*
 * rfp-fetch's wire: the transfers and status checks in flight, on one
 * libcurl multi handle.  It starts what it is given and hands back what
 * has ended; what an ending means is for the loop to say.
 */
#include <sys/timerfd.h>

#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cmd/msg.h"
#include "fetch/fetch.h"

static struct {
	CURLM		*multi;
	struct xfer	*list;		/* on the wire, newest first */
	int		 tfd;		/* a timer for waits finer than curl's
					   milliseconds; -1: none */
} W = { NULL, NULL, -1 };

void
wire_init(long max_connections)
{
	if ((W.multi = curl_multi_init()) == NULL)
		msg_die(1, "curl_multi_init failed");
	curl_multi_setopt(W.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
	    max_connections);
	/* Without it, waits are whole milliseconds, rounded up. */
	W.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
}

void
wire_add(struct xfer *x)
{
	x->prev = NULL;
	x->next = W.list;
	if (W.list != NULL)
		W.list->prev = x;
	W.list = x;
	curl_multi_add_handle(W.multi, x->easy);
}

/*
 * Real seconds by which two requests' write times, taken by libcurl's
 * pre-request callback, may be out of the order in which they reach the
 * portal: on a loaded machine, a cap of 4 let in four written just after
 * a refused one, which then found no older request held, and the breaker
 * opened on the cap's first round (for 23 ms).  Evidence up to this much
 * younger delays an outage's news by as much at the most.
 */
#define WIRE_SKEW	0.005

/*
 * 1 when a request to x's endpoint written before before (or within
 * WIRE_SKEW after), and since since, is still on the portal's count,
 * unanswered: the portal holds it, so it is serving.
 */
int
wire_older(const struct xfer *x, double since, double before)
{
	const struct xfer *o;

	for (o = W.list; o != NULL; o = o->next)
		if (o != x && o->on_wire && o->job->ep == x->job->ep &&
		    o->t_wrote >= since && o->t_wrote > 0 &&
		    o->t_wrote < before + WIRE_SKEW)
			return 1;
	return 0;
}

long
wire_hung(const struct ep *e, double before, double *next)
{
	const struct xfer *o;
	long n = 0;

	*next = 0;
	for (o = W.list; o != NULL; o = o->next) {
		if (!o->on_wire || o->job->ep != e || o->t_wrote <= 0)
			continue;
		if (o->t_wrote < before)
			n++;
		else if (*next == 0 || o->t_wrote < *next)
			*next = o->t_wrote;
	}
	return n;
}

/* Take x off the list, its handle off the multi. */
static void
unwire(struct xfer *x)
{
	curl_multi_remove_handle(W.multi, x->easy);
	if (x->prev != NULL)
		x->prev->next = x->next;
	else
		W.list = x->next;
	if (x->next != NULL)
		x->next->prev = x->prev;
	x->prev = x->next = NULL;
}

void
wire_perform(void)
{
	int running;

	curl_multi_perform(W.multi, &running);
}

struct xfer *
wire_done(void)
{
	struct xfer *x;
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(W.multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
		    (char **)&x);
		x->cc = m->data.result;
		unwire(x);
		return x;
	}
	return NULL;
}

struct xfer *
wire_pop(void)
{
	struct xfer *x = W.list;

	if (x != NULL)
		unwire(x);
	return x;
}

/*
 * Wait t seconds at most for the transfers or w.  curl waits in whole
 * milliseconds: a pace that sends every 27 ms, woken up to a millisecond
 * late each time, lost 3 % to it.  A timer wakes the loop on time, and
 * curl's timeout, a millisecond or two later, is only a backstop.  Arming
 * the timer clears what an earlier one left, fired or not.
 */
void
wire_poll(struct curl_waitfd *w, unsigned int nw, double t)
{
	struct curl_waitfd all[WIRE_FDS + 1];
	struct itimerspec its;
	int ms = t <= 0 ? 0 : (int)(t * 1000) + 1;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)t;
	its.it_value.tv_nsec = (long)((t - (double)its.it_value.tv_sec) * 1e9);
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	if (W.tfd == -1 || t <= 0 || nw > WIRE_FDS ||
	    timerfd_settime(W.tfd, 0, &its, NULL) == -1) {
		curl_multi_poll(W.multi, w, nw, ms, NULL);
		return;
	}
	memcpy(all, w, nw * sizeof(*w));
	all[nw].fd = W.tfd;
	all[nw].events = CURL_WAIT_POLLIN;
	all[nw].revents = 0;
	curl_multi_poll(W.multi, all, nw + 1, ms + 1, NULL);
	memcpy(w, all, nw * sizeof(*w));
}

void
wire_free(void)
{
	curl_multi_cleanup(W.multi);
	W.multi = NULL;
	if (W.tfd != -1)
		close(W.tfd);
	W.tfd = -1;
}
