/*
 * opt: the --state checks, apart from the rest of lib/opt so that a stage
 * without shared state does not link the store (and with it libpq).
 */
#include <stddef.h>

#include "lib/config/conf.h"
#include "cmd/msg.h"
#include "cmd/opt.h"
#include "lib/state/store.h"

const char *
opt_state(const char *s)
{
	if (!store_is_url(s))
		msg_die(2, "option --state: expected a postgresql:// URL");
	return s;
}

const char *
opt_state_pick(const char *flag, const struct conf *c, const char *config)
{
	if (flag != NULL || c->state == NULL)
		return flag;
	if (!store_is_url(c->state))
		msg_die(2, "%s: key \"state\": expected a postgresql:// URL",
		    config);
	return c->state;
}
