/*
 * cmds: the parse commands a configuration names, checked before the first
 * record is read, and listed for rfpipe (--list).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/config/conf.h"
#include "cmd/msg.h"
#include "lib/base/x.h"
#include "parse/parse.h"

/* 1 when prog names an executable: itself with a '/', else in PATH. */
static int
found(const char *prog)
{
	const char *path = getenv("PATH"), *p, *e;
	char *f;
	int ok;

	if (strchr(prog, '/') != NULL)
		return access(prog, X_OK) == 0;
	for (p = path ? path : "/usr/bin:/bin"; ; p = e + 1) {
		e = strchr(p, ':');
		if (e == NULL)
			e = p + strlen(p);
		f = xasprintf("%.*s%s%s", (int)(e - p), p, e == p ? "" : "/",
		    prog);
		ok = access(f, X_OK) == 0;
		free(f);
		if (ok)
			return 1;
		if (*e == '\0')
			return 0;
	}
}

static json_t *
describe(const char *ep, const struct conf_parse *p)
{
	json_t *o = json_object(), *cmd = json_array();
	size_t i;

	for (i = 0; p->command[i] != NULL; i++)
		json_array_append_new(cmd, json_string(p->command[i]));
	json_object_set_new(o, "endpoint", ep ? json_string(ep) :
	    json_null());
	json_object_set_new(o, "command", cmd);
	json_object_set_new(o, "timeout", json_real(p->timeout));
	json_object_set_new(o, "concurrency", json_integer(p->concurrency));
	json_object_set_new(o, "output_max", json_integer(p->output_max));
	return o;
}

void
cmds_check(const struct conf *c, const char *config, int list)
{
	const struct conf_parse *p;
	json_t *o;
	char *s;
	size_t i;

	for (i = 0; i <= c->neps; i++) {
		p = i < c->neps ? &c->eps[i].parse : &c->defaults.parse;
		if (p->command == NULL)
			continue;
		if (!found(p->command[0]))
			msg_die(2, "%s: parse command \"%s\" for %s: not "
			    "found", config, p->command[0], i < c->neps ?
			    c->eps[i].name : "every endpoint");
		if (!list)
			continue;
		o = describe(i < c->neps ? c->eps[i].name : NULL, p);
		s = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		if (s == NULL || puts(s) == EOF)
			msg_diesys(1, "write stdout");
		free(s);
	}
}
