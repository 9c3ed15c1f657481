/* num: strict number parsing (never atoi). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/num.h"

int
num_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (s == NULL || *s == '\0' || isspace((unsigned char)*s)) {
		errno = EINVAL;
		return -1;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0') {
		errno = EINVAL;
		return -1;
	}
	if (errno == ERANGE || v < min || v > max) {
		errno = ERANGE;
		return -1;
	}
	*out = v;
	return 0;
}

int
num_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0' || isspace((unsigned char)*s) ||
	    strpbrk(s, "xXpPnNiI") != NULL) {
		errno = EINVAL;
		return -1;
	}
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0') {
		errno = EINVAL;
		return -1;
	}
	if (errno == ERANGE || !isfinite(v) || v < min || v > max) {
		errno = ERANGE;
		return -1;
	}
	*out = v;
	return 0;
}

int
num_duration(const char *s, double *out)
{
	double total = 0, v, mul;
	const char *p = s;
	char *end;
	int parts = 0;

	if (s == NULL || *s == '\0' || strpbrk(s, "xXpPnNiIeE") != NULL) {
		errno = EINVAL;
		return -1;
	}
	while (*p != '\0') {
		if (*p == '-' || *p == '+' || isspace((unsigned char)*p)) {
			errno = EINVAL;
			return -1;
		}
		errno = 0;
		v = strtod(p, &end);
		if (end == p || errno == ERANGE || !isfinite(v)) {
			errno = EINVAL;
			return -1;
		}
		p = end;
		if (strncmp(p, "ms", 2) == 0) {
			mul = 0.001;
			p += 2;
		} else if (*p == 's') {
			mul = 1;
			p++;
		} else if (*p == 'm') {
			mul = 60;
			p++;
		} else if (*p == 'h') {
			mul = 3600;
			p++;
		} else if (*p == 'd') {
			mul = 86400;
			p++;
		} else if (*p == '\0' && parts == 0) {
			mul = 1;
		} else {
			errno = EINVAL;
			return -1;
		}
		total += v * mul;
		parts++;
	}
	if (total > 1e9) {
		errno = ERANGE;
		return -1;
	}
	*out = total;
	return 0;
}
