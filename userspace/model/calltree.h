/* calltree.h - stack aggregation stage: frames and a call tree for folded and pprof.
 *
 * A stack is a path from the root: symbolized frames of the outermost op's
 * Python stack (Python functions, nn.Module layers, other frames; outermost
 * first), then the op nesting.  E.g.
 *   train.py:main ; Net ; blocks.0 ; conv ; aten::conv2d ; aten::convolution
 * Frames are unique by (kind, name, file, line); nodes by (parent, frame).
 */
#ifndef TBPF_CALLTREE_H
#define TBPF_CALLTREE_H

#include <stddef.h>
#include <stdint.h>

enum ct_kind {
	CT_OP = 0,        /* PyTorch op: name "aten::add" */
	CT_PYTHON = 1,    /* = CF_PYTHON: name = function, file, line */
	CT_LAYER = 2,     /* = CF_LAYER: name = module path component / path */
	CT_OTHER = 3,     /* = CF_OTHER */
};

struct ct_frame {
	uint32_t kind;
	uint32_t line;
	const char *name;   /* interned */
	const char *file;   /* interned, "" if none */
};

struct ct_node {
	uint32_t parent;    /* node index; root is node 0 and its own parent */
	uint32_t frame;     /* frame index (unused for the root) */
	uint32_t depth;     /* root = 0 */
	uint64_t self_ns;
	uint64_t calls;
};

struct calltree {
	struct ct_frame *frames;
	size_t nframes, cframes;
	struct ct_node *nodes;
	size_t nnodes, cnodes;
	uint32_t *fidx, *nidx;   /* hash indexes (value = index + 1) */
	size_t nfidx, nnidx;
	struct strintern *strings;
	uint64_t start_real_ns, duration_ns;  /* for pprof */
};

int calltree_init(struct calltree *ct);
void calltree_free(struct calltree *ct);
/* Index of the frame, created if new; (uint32_t)-1 when out of memory. */
uint32_t calltree_frame(struct calltree *ct, uint32_t kind, const char *name, const char *file, uint32_t line);
/* Index of parent's child with this frame, created if new; -1 on ENOMEM. */
uint32_t calltree_child(struct calltree *ct, uint32_t parent, uint32_t frame);
void calltree_add(struct calltree *ct, uint32_t node, uint64_t self_ns, uint64_t calls);
/* Frames of node from the root (root excluded) into out[depth]. */
void calltree_path(const struct calltree *ct, uint32_t node, uint32_t *frames_out);

/* Build from a capture: ops nested under the symbolized Python stack of
 * their outermost op.  0, -EINVAL (reader error), -ENOMEM. */
struct capture_reader;
int calltree_from_capture(struct capture_reader *r, struct calltree *ct);
/* The same as a replay sink (capture/replay.h), for a pass shared with
 * other consumers (model.c); free after the replay: it also sets the
 * tree's start and duration from the capture. */
struct capture_meta;
struct capture_stats;
struct bus_sink;
struct calltree_build;
struct calltree_build *calltree_build_new(struct calltree *ct, const struct capture_meta *m);
struct bus_sink calltree_build_sink(struct calltree_build *cb);
void calltree_build_free(struct calltree_build *cb, const struct capture_stats *st);

#endif /* TBPF_CALLTREE_H */
