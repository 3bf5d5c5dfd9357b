/* shapes.h - model stage: an op call's input shapes (struct tbpf_shape,
 * read by the BPF side at op entry) as torch.profiler writes
 * them, and the FLOPs torch.profiler counts for them. */
#ifndef TBPF_SHAPES_H
#define TBPF_SHAPES_H

#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

/* A list's continuations (tbpf_abi.h: the sizes past the 8th of a
 * tensor of more dims), by tensor entry; NULL where there is none. */
struct shape_more {
	const struct tbpf_shape *e[TBPF_SHAPE_MAX_TENSORS];
};

/* The continuations of list `id` (s) through get(ctx, id), a lookup of
 * lists by id; more->e[i] is NULL where get finds none or what it finds
 * is not entry i's. */
void shape_more_find(uint64_t id, const struct tbpf_shape *s,
		     const struct tbpf_shape *(*get)(void *ctx, uint64_t id), void *ctx,
		     struct shape_more *more);

/* shape_more_find over a capture's (or live model's) shape lists */
struct capture_meta;
void shape_more_of_meta(const struct capture_meta *m, uint64_t id,
			const struct tbpf_shape *s, struct shape_more *more);

/* Pure: "[[2, 3], [], []]": one entry per argument, a tensor's sizes or
 * [] (scalars, lists, None, undefined tensors, tensor lists), "[?]" for a
 * tensor the reader could not read; a tensor of more than 8 dims takes
 * the rest from more (NULL: none), and ", ..." stands for sizes not kept
 * (more than TBPF_SHAPE_ALL_DIMS, or a continuation missing).  Returns
 * the length written (the text is cut to fit n, NUL-terminated when
 * n > 0). */
size_t shape_format(const struct tbpf_shape *s, const struct shape_more *more, char *buf,
		    size_t n);

/* Pure: torch.profiler's "Input type" list entry of a ScalarType:
 * "float", "long int", "c10::Half", ... ("" when unknown). */
const char *shape_dtype_name(unsigned scalar_type);

/* Pure: the ScalarTypes shape_dtype_name() names (0 .. n-1). */
unsigned shape_dtype_count(void);

/* Pure: torch.profiler's "Input type" of the call, as the JSON list
 * Kineto writes: ["float", "float", "Scalar", ""] (tbpf_abi.h, enum
 * tbpf_itype; "?" for an argument tbpf could not classify or read).
 * Length written, cut to fit n as shape_format; 0 and "" when no
 * argument's type is known (a capture written before Input type). */
size_t shape_types(const struct tbpf_shape *s, char *buf, size_t n);

/* Pure: the FLOPs torch.profiler's with_flops counts for one call of the
 * op `name` ("aten::mm") with these inputs: mm, addmm, bmm, baddbmm,
 * conv2d (its stride, padding, dilation, groups read too), mul, add; 0
 * for every other op, as torch.profiler (1.13 .. 2.8) gives conv1d, conv3d
 * and convolution 0.  more: a tensor's sizes past the 8th (mul, add of
 * more than 8 dims; NULL: none, 0 FLOPs for such a tensor). */
uint64_t shape_flops(const char *name, const struct tbpf_shape *s, const struct shape_more *more);

#endif
