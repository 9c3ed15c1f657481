/* tab: a string-keyed table for the mock portal's per-key state. */
#ifndef MOCK_TAB_H
#define MOCK_TAB_H

#include <stddef.h>

/*
 * One key.  For paths a counts requests and b is the script position; for
 * idempotency keys a is the tracking number, b the commits; a limiter keyed
 * per path keeps its state in data.
 */
struct slot {
	char		*key;
	long		 a, b;
	void		*data;
	struct slot	*next;
};

struct tab {
	struct slot	**v;
	size_t		 nb, n;
};

/* The slot of key, created zeroed when create is set; else NULL if absent. */
struct slot *tab_get(struct tab *t, const char *key, int create);
/* Free every slot (passing each data to datafree, when given) and t's array. */
void	tab_free(struct tab *t, void (*datafree)(void *));

#endif
