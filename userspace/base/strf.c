/* strf.c - shared helper: formatted malloc'd strings for error messages. */
#include <stdarg.h>
#include <stdio.h>
#include "strf.h"

char *strf(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}
