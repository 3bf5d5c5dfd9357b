/* units.c - shared helper: pure parsers for durations, sizes and ports. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "units.h"

int parse_duration(const char *s, uint64_t *ns)
{
	char *end;
	double v, mul;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -EINVAL;
	if (!*end || !strcmp(end, "s"))
		mul = 1e9;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "m") || !strcmp(end, "min"))
		mul = 60e9;
	else if (!strcmp(end, "h"))
		mul = 3600e9;
	else
		return -EINVAL;
	if (v * mul > 1e19)
		return -EINVAL;
	*ns = (uint64_t)(v * mul + 0.5);
	return 0;
}

int parse_size(const char *s, uint64_t *bytes)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (!strcasecmp(end, "k") || !strcasecmp(end, "kb") || !strcasecmp(end, "kib"))
		mul = 1ULL << 10;
	else if (!strcasecmp(end, "m") || !strcasecmp(end, "mb") || !strcasecmp(end, "mib"))
		mul = 1ULL << 20;
	else if (!strcasecmp(end, "g") || !strcasecmp(end, "gb") || !strcasecmp(end, "gib"))
		mul = 1ULL << 30;
	else if (*end)
		return -EINVAL;
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*bytes = v * mul;
	return 0;
}

uint64_t ring_size_round(uint64_t bytes)
{
	uint64_t r = 4096;

	while (r < bytes && r < (1ULL << 40))
		r <<= 1;
	return r;
}

long parse_port(const char *s, size_t len, long lo)
{
	long v = 0;

	if (!len || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v < lo || v > 65535 ? -1 : v;
}
