/* portal: the mock portal's HTTP side (libmicrohttpd) and its request log. */
#ifndef MOCK_PORTAL_H
#define MOCK_PORTAL_H

#include <stddef.h>
#include <stdint.h>

#include "scen.h"

struct portal;

/* A portal serving s (borrowed) with seed; logfd is -1 for no log. */
struct portal *portal_new(const struct scen *s, uint64_t seed, int logfd);
/* Serve https with this PEM certificate and key (borrowed), before start. */
void	portal_tls(struct portal *p, const char *cert, const char *key);
#define PORTAL_HOLD_MAX	16

/*
 * Hold the requests to routes after the at[0]th, until portal_release();
 * then after the at[1]th, and so on (n <= PORTAL_HOLD_MAX, at rising).
 */
void	portal_hold(struct portal *p, const long *at, size_t n);
/* End the hold in force, if any: the held requests are answered. */
void	portal_release(struct portal *p);
/* Listen on 127.0.0.1:port (0 picks one); the bound port, or -1 and err. */
int	portal_start(struct portal *p, int port, char *err, size_t errlen);
/* Cut every sleep short, stop the daemon and wait for its threads. */
void	portal_stop(struct portal *p);
/* Nonzero when a log write failed (warned once). */
int	portal_log_failed(struct portal *p);
/* Free p (stop it first); NULL is fine. */
void	portal_free(struct portal *p);

#endif
