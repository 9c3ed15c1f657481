/* opt: what every executable's option handling shares. */
#ifndef RFP_OPT_H
#define RFP_OPT_H

struct conf;

/* Print "prog VERSION" to stdout and exit 0. */
_Noreturn void opt_version(void);
/* Print usage to stdout and exit 0. */
_Noreturn void opt_help(const char *usage);
/* Print usage to stderr after a bad option and exit 2. */
_Noreturn void opt_usage(const char *usage);
/*
 * After getopt_long (optstring starting with ':') returned ':' or '?':
 * name the option in the project's words, print usage, exit 2.
 */
_Noreturn void opt_bad(const char *usage, char *const argv[], int c);
/*
 * What every executable's getopt_long switch ends in, for c none of its
 * own: -h prints usage and exits 0, -v makes messages verbose,
 * --version ('V') prints the version and exits 0; anything else is
 * opt_bad's.
 */
void	opt_common(const char *usage, char *const argv[], int c);
/* Parse a positive integer option value or die 2 naming the option. */
long	opt_long(const char *opt, const char *s, long min, long max);
/* Parse a number option value in [min, max] or die 2 naming the option. */
double	opt_double(const char *opt, const char *s, double min, double max);
/* Parse a duration option value ("30s", "1h30m") or die 2. */
double	opt_duration(const char *opt, const char *s);
/* A --state value: a postgresql:// URL, or exit 2 naming the option. */
const char *opt_state(const char *s);
/*
 * The state URL: flag (from --state) when given, else the state key of c
 * (loaded from config), which must be a URL or exit 2; NULL when neither.
 */
const char *opt_state_pick(const char *flag, const struct conf *c,
	    const char *config);
/*
 * The deadline as an epoch: flag (from --deadline) when given, else the
 * deadline key of c, resolved now; 0 when neither; die 2 when it cannot
 * be read.
 */
double	opt_deadline_pick(const char *flag, const struct conf *c);
/* Flush and close stdout; die 1 naming the error (a full disk must not exit 0). */
void	opt_fshut(void);
/* Die 2 with the usage when an operand follows the options. */
void	opt_no_operands(int argc, char *const argv[], const char *usage);
/* The built-in defaults, then the config file at path (if any) or die 2. */
void	opt_conf(struct conf *c, const char *path);
/* Die 2 when RFPIPE_TIME_SCALE is set but not a number in (0, 1]. */
void	opt_check_env(void);

#endif
