/* opt: --help, --version, option values, --state, closing stdout. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/clk.h"
#include "lib/config/conf.h"
#include "cmd/msg.h"
#include "lib/base/num.h"
#include "cmd/opt.h"
#include "lib/state/store.h"

void
opt_version(void)
{
	printf("%s %s\n", msg_prog(), RFP_VERSION);
	exit(0);
}

void
opt_help(const char *usage)
{
	fputs(usage, stdout);
	exit(0);
}

void
opt_usage(const char *usage)
{
	fputs(usage, stderr);
	exit(2);
}

void
opt_bad(const char *usage, char *const argv[], int c)
{
	const char *arg = argv[optind - 1];
	char letter[3] = { '-', (char)optopt, '\0' };

	/* In a cluster such as -xv, name the one letter that was wrong. */
	if (optopt != 0 && arg[0] == '-' && arg[1] != '-')
		arg = letter;
	if (c == ':')
		msg_warn("option %s: needs a value", arg);
	else	/* Its name: a value given with = may be a password. */
		msg_warn("unknown option \"%.*s\"", (int)strcspn(arg, "="),
		    arg);
	opt_usage(usage);
}

void
opt_common(const char *usage, char *const argv[], int c)
{
	switch (c) {
	case 'h':
		opt_help(usage);
	case 'v':
		msg_verbose = 1;
		return;
	case 'V':
		opt_version();
	default:
		opt_bad(usage, argv, c);
	}
}

long
opt_long(const char *opt, const char *s, long min, long max)
{
	long v;

	if (num_long(s, min, max, &v) == -1)
		msg_die(2, "option --%s: expected an integer from %ld to %ld, "
		    "got \"%s\"", opt, min, max, s);
	return v;
}

double
opt_double(const char *opt, const char *s, double min, double max)
{
	double v;

	if (num_double(s, min, max, &v) == -1)
		msg_die(2, "option --%s: expected a number from %g to %g, "
		    "got \"%s\"", opt, min, max, s);
	return v;
}

double
opt_duration(const char *opt, const char *s)
{
	double v;

	if (num_duration(s, &v) == -1)
		msg_die(2, "option --%s: expected a duration such as \"30s\" "
		    "or \"1h30m\", got \"%s\"", opt, s);
	return v;
}

void
opt_fshut(void)
{
	if (fflush(stdout) != 0 || ferror(stdout))
		msg_diesys(1, "write stdout");
	if (fclose(stdout) != 0 && errno != EBADF)
		msg_diesys(1, "close stdout");
}

void
opt_no_operands(int argc, char *const argv[], const char *usage)
{
	if (optind != argc) {
		msg_warn("unexpected argument \"%s\"", argv[optind]);
		opt_usage(usage);
	}
}

void
opt_conf(struct conf *c, const char *path)
{
	char err[512];

	conf_init(c);
	if (path != NULL && conf_load(c, path, err, sizeof(err)) == -1)
		msg_die(2, "%s", err);
}

void
opt_check_env(void)
{
	if (clk_scale() < 0)
		msg_die(2, "environment RFPIPE_TIME_SCALE: expected a number "
		    "in (0, 1], got \"%s\"", getenv("RFPIPE_TIME_SCALE"));
}

const char *
opt_state(const char *s)
{
	char err[256];

	if (!store_is_url(s))
		msg_die(2, "option --state: expected a postgresql:// URL");
	if (store_url_check(s, err, sizeof(err)) == -1)
		msg_die(2, "option --state: %s", err);
	return s;
}

const char *
opt_state_pick(const char *flag, const struct conf *c, const char *config)
{
	char err[256];

	if (flag != NULL || c->state == NULL)
		return flag;
	if (!store_is_url(c->state))
		msg_die(2, "%s: key \"state\": expected a postgresql:// URL",
		    config);
	if (store_url_check(c->state, err, sizeof(err)) == -1)
		msg_die(2, "%s: key \"state\": %s", config, err);
	return c->state;
}

double
opt_deadline_pick(const char *flag, const struct conf *c)
{
	const char *when = flag != NULL ? flag : c->deadline;
	double t = 0;

	if (when != NULL && clk_deadline(when, clk_now(), &t) == -1)
		msg_die(2, "option --deadline: cannot read \"%s\" as a time",
		    when);
	return t;
}
