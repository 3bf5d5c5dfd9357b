/* grow.c - shared helper: growing arrays (see grow.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

int grow_index(void **v, size_t *cap, size_t i, size_t elem, size_t min)
{
	size_t nc = *cap ? *cap : (min ? min : 1);
	char *p;

	if (i < *cap)
		return 0;
	while (nc <= i) {
		if (nc > SIZE_MAX / 2)
			return -ENOMEM;
		nc *= 2;
	}
	if (elem && nc > SIZE_MAX / elem)
		return -ENOMEM;
	p = realloc(*v, nc * elem);
	if (!p)
		return -ENOMEM;
	memset(p + *cap * elem, 0, (nc - *cap) * elem);
	*v = p;
	*cap = nc;
	return 0;
}
