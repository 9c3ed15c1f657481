/*
 * rfp-fetch's wire: the transfers and status checks in flight, on one
 * libcurl multi handle.  It starts what it is given and hands back what
 * has ended; what an ending means is for the loop to say.
 */
#include <curl/curl.h>

#include "cmd/msg.h"
#include "fetch/fetch.h"

static struct {
	CURLM		*multi;
	struct xfer	*list;		/* on the wire, newest first */
} W;

void
wire_init(long max_connections)
{
	if ((W.multi = curl_multi_init()) == NULL)
		msg_die(1, "curl_multi_init failed");
	curl_multi_setopt(W.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
	    max_connections);
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

void
wire_poll(struct curl_waitfd *w, unsigned int nw, int ms)
{
	curl_multi_poll(W.multi, w, nw, ms, NULL);
}

void
wire_free(void)
{
	curl_multi_cleanup(W.multi);
	W.multi = NULL;
}
