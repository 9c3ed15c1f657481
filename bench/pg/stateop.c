/*
 * stateop: microseconds per shared-state operation, files versus
 * PostgreSQL.  usage: stateop RUNDIR [URL] [N]
 * Times N pace_take, N breaker_allow and N budget spends on RUNDIR's flock'd
 * files, or with URL in that database, and prints one line of results.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>

#include "lib/control/breaker.h"
#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "lib/control/budget.h"
#include "lib/control/pace.h"
#include "lib/state/files.h"
#include "lib/state/store.h"

int
main(int argc, char *argv[])
{
	struct pace_cfg pc = { 1e9, 1000000 };
	const char *rundir, *url;
	struct conf conf;
	enum breaker_verdict v;
	double t0, tp, tb, tg, wait, until, opened;
	char err[512], path[4096];
	long n, i, left;

	if (argc < 2) {
		fputs("usage: stateop RUNDIR [URL] [N]\n", stderr);
		return 2;
	}
	rundir = argv[1];
	url = argc > 2 && argv[2][0] != '\0' ? argv[2] : NULL;
	n = argc > 3 ? strtol(argv[3], NULL, 10) : 2000;
	conf_init(&conf);
	files_mkdirs(rundir, NULL, 0);
	snprintf(path, sizeof(path), "%s/state/rate", rundir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/state/breaker", rundir);
	mkdir(path, 0700);
	if (url != NULL && store_init(url, err, sizeof(err)) == -1) {
		fprintf(stderr, "stateop: %s\n", err);
		return 1;
	}
	t0 = clk_mono();
	for (i = 0; i < n; i++)
		if (pace_take(rundir, "bench", &pc, clk_now(), &wait, err,
		    sizeof(err)) == -1)
			goto fail;
	tp = clk_mono();
	for (i = 0; i < n; i++)
		if (breaker_allow(rundir, "bench", &conf.defaults.breaker,
		    clk_now(), 1, 0, 1, &v, &until, &opened, err,
		    sizeof(err)) == -1)
			goto fail;
	tb = clk_mono();
	for (i = 0; i < n; i++)
		if (budget_spend(rundir, 10 * n, &left, err,
		    sizeof(err)) == -1)
			goto fail;
	tg = clk_mono();
	printf("%-10s pace_take %7.1f us  breaker_allow %7.1f us  budget %7.1f "
	    "us  (per operation, n=%ld)\n", url ? "postgresql" : "files",
	    (tp - t0) * 1e6 / (double)n, (tb - tp) * 1e6 / (double)n,
	    (tg - tb) * 1e6 / (double)n, n);
	store_close();
	return 0;
fail:
	fprintf(stderr, "stateop: %s\n", err);
	return 1;
}
