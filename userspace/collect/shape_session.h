/* shape_session.h - collection engine: input shapes of a live session
 * (--record-shapes): the per-op argument descriptors and the
 * TensorImpl layout handed to the BPF reader (bpf/shapes.bpf.h), the
 * layout's verification from the tensors it read, and shape ids -> text. */
#ifndef TBPF_SHAPE_SESSION_H
#define TBPF_SHAPE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tbpf_abi.h"

struct target;

struct shape_target {
	struct tbpf_tlayout layout;   /* what the reader of this pid uses */
	size_t placed, ops;           /* op entry points described / all */
};

/* Describe every op entry point of t (op_args map) and give pid its
 * starting layout (shape_layouts map).  0 or -errno. */
int shape_target_add(int op_args_fd, int layouts_fd, pid_t pid, const struct target *t,
		     struct shape_target *st);

/* Verify the layouts of ns targets from the samples the reader took
 * (shape_samples map, TBPF_TSAMPLES for all processes): 1 when every
 * target's samples derive its layout (a target without samples while
 * slots were left read no tensor), 0 with *why (malloc'd) when not,
 * also when the slots ran out before a target got one. */
int shape_verify(int samples_fd, const pid_t *pids, const struct shape_target *st, size_t ns,
		 char **why);

/* The text of a shape id ("[[2, 3], []]") from the shapes map, into buf;
 * "" when unknown (a tensor of more than 8 dims with its continuation).
 * Also the struct when s is not NULL, and the FLOPs of a call of op
 * `name` when flops is not NULL.  0 or -ENOENT. */
int shape_text(int shapes_fd, uint64_t id, const char *name, char *buf, size_t n,
	       struct tbpf_shape *s, uint64_t *flops);

#endif
