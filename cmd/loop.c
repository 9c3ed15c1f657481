/* loop: read records, hand each to the stage through one view, write. */
#include <stddef.h>

#include <jansson.h>

#include "cmd/loop.h"
#include "cmd/msg.h"
#include "lib/record/fate.h"
#include "lib/record/field.h"
#include "lib/record/rec.h"
#include "lib/record/scan.h"
#include "lib/record/view.h"

/*
 * Refuse a record with a field of the wrong type among those the stage
 * reads (h->reads), before it reads any: dead bad_input, its id kept.
 */
static void
typed(const char *stage, struct view *v, long lineno,
    const struct loop_hooks *h)
{
	char err[160];
	int ft;

	if (h == NULL || h->reads == NULL)
		return;
	if ((ft = view_type(v, "fate")) != -1 && (!h->fated ||
	    (ft == SCAN_STRING && fate_of(view_str(v, "fate")) == FATE_DEAD)))
		return;
	if (field_check(v, h->reads, err, sizeof(err)) == 0)
		return;
	msg_line(lineno, "%s", err);
	view_kill(v, FATE_BAD_INPUT, err);
	view_set_int(v, "line", lineno);
	view_set_str(v, "stage", stage);
}

int
loop_run(const char *stage, int fd_in, int fd_out,
    const struct loop_hooks *h, loop_fn *fn, void *arg)
{
	struct rec_reader *r = rec_reader_new(fd_in, REC_STREAM_MAX);
	struct rec_out *o = rec_out_new(fd_out);
	struct view *v = view_new();
	const char *t;
	char *line, err[256];
	size_t len;
	long lineno;
	int rc, ret = 0;

	rec_reader_flush_first(r, o);
	if (h != NULL && h->drain != NULL)
		rec_reader_drain(r, h->drain, arg);
	if (h != NULL && h->idle != NULL)
		rec_reader_idle(r, h->idle_s, h->idle, arg);
	for (;;) {
		switch (rec_next(r, &line, &len, &lineno)) {
		case REC_EOF:
			goto out;
		case REC_ERR:
		case REC_AGAIN:
			ret = -1;
			goto out;
		case REC_TOOLONG:
			msg_line(lineno, "line longer than %d bytes",
			    REC_STREAM_MAX);
			view_open_tree(v, rec_bad_input(stage, lineno,
			    "line too long", line, len));
			break;
		default:
			if (len == 0)
				continue;
			if (view_open(v, line, len, err, sizeof(err)) == -1) {
				msg_line(lineno, "%s", err);
				view_open_tree(v, rec_bad_input(stage, lineno,
				    err, line, len));
			} else
				typed(stage, v, lineno, h);
			break;
		}
		/* Bad lines go to fn too, already dead, for it to file. */
		if ((rc = fn(v, lineno, o, arg)) == -1) {
			ret = -1;
			goto out;
		}
		if (rc == 0 && ((t = view_text(v, &len)) == NULL ||
		    rec_out_put(o, t, len) == -1)) {
			ret = -1;
			goto out;
		}
	}
out:
	if (rec_out_flush(o) == -1)
		ret = -1;
	view_free(v);
	rec_out_free(o);
	rec_reader_free(r);
	return ret;
}
