/* num: strict number parsing; the whole string must be the number. */
#ifndef RFP_NUM_H
#define RFP_NUM_H

/* Parse a base-10 integer in [min, max]; 0 on success, -1 (errno set) on error. */
int	num_long(const char *s, long min, long max, long *out);
/* Parse a finite decimal number in [min, max]; 0 on success, -1 on error. */
int	num_double(const char *s, double min, double max, double *out);
/* Parse a duration: "90", "1.5", "250ms", "2s", "3m", "1h", "1h30m"; seconds. */
int	num_duration(const char *s, double *out);

#endif
