/* tab: a chained hash table of strings, doubled as it fills. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/clk.h"
#include "lib/base/x.h"
#include "tab.h"

struct slot *
tab_get(struct tab *t, const char *key, int create)
{
	struct slot *s, *next, **nv;
	size_t h, i, nnb;

	if (t->nb == 0) {
		if (!create)
			return NULL;
		t->nb = 256;
		t->v = xcalloc(t->nb, sizeof(*t->v));
	}
	h = clk_hash(0, key, strlen(key)) & (t->nb - 1);
	for (s = t->v[h]; s != NULL; s = s->next)
		if (strcmp(s->key, key) == 0)
			return s;
	if (!create)
		return NULL;
	if (t->n >= t->nb) {
		nnb = t->nb * 2;
		nv = xcalloc(nnb, sizeof(*nv));
		for (i = 0; i < t->nb; i++)
			for (s = t->v[i]; s != NULL; s = next) {
				next = s->next;
				h = clk_hash(0, s->key, strlen(s->key)) &
				    (nnb - 1);
				s->next = nv[h];
				nv[h] = s;
			}
		free(t->v);
		t->v = nv;
		t->nb = nnb;
		h = clk_hash(0, key, strlen(key)) & (t->nb - 1);
	}
	s = xcalloc(1, sizeof(*s));
	s->key = xstrdup(key);
	s->next = t->v[h];
	t->v[h] = s;
	t->n++;
	return s;
}

void
tab_free(struct tab *t, void (*datafree)(void *))
{
	struct slot *s, *next;
	size_t i;

	for (i = 0; i < t->nb; i++)
		for (s = t->v[i]; s != NULL; s = next) {
			next = s->next;
			if (datafree != NULL)
				datafree(s->data);
			free(s->key);
			free(s);
		}
	free(t->v);
	t->v = NULL;
	t->nb = t->n = 0;
}
