/* grow.h - shared helper: growing arrays. */
#ifndef TBPF_GROW_H
#define TBPF_GROW_H
#include <stddef.h>

/* *v holds n elements in *cap slots: when full, double the slots (first
 * min).  0, or -ENOMEM with *v and *cap untouched. */
int grow_array(void **v, size_t *cap, size_t n, size_t elem, size_t min);

/* A table indexed by i (op ids, depths): make slot i exist, doubling from
 * min until it does; the new slots are zeroed.  0, or -ENOMEM with *v and
 * *cap untouched. */
int grow_index(void **v, size_t *cap, size_t i, size_t elem, size_t min);

/* GROW(p->ops, p->nops, p->cap, 64): arr, count, capacity (size_t), first
 * capacity.  0 or -ENOMEM. */
#define GROW(arr, n, cap, min) grow_array((void **)&(arr), &(cap), (n), sizeof(*(arr)), (min))
/* GROW_INDEX(c->ops, c->nops, op_id, 256): arr[i] exists afterwards. */
#define GROW_INDEX(arr, cap, i, min) \
	grow_index((void **)&(arr), &(cap), (i), sizeof(*(arr)), (min))

#endif /* TBPF_GROW_H */
