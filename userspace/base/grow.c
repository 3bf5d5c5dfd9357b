/* grow.c - shared helper: growing arrays (see grow.h). */
#include <errno.h>
#include <stdlib.h>
#include "grow.h"

int grow_array(void **v, size_t *cap, size_t n, size_t elem, size_t min)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : min;
	p = realloc(*v, nc * elem);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = nc;
	return 0;
}
