/* stacks.h - symbolize stage: Python stacks captured by BPF (pystacks map
 * or Python stack records) -> symbolized frames for captures, flame graphs
 * and the layer tree, while the target is still alive to be read. */
#ifndef TBPF_STACKS_H
#define TBPF_STACKS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "capture.h"
#include "layers.h"
#include "pysym.h"
#include "srcloc.h"

/* One symbolized stack. frames: innermost first (capture order): the
 * module layers innermost-first, then the Python frames outside the
 * outermost module, innermost first.  layer_* for layers_build(). */
struct sym_stack {
	uint32_t pid;
	uint64_t id;
	struct capture_frame *frames;
	uint32_t nframes;
	unsigned depth;            /* module layers */
	char **names, **classes;   /* layers, outermost first */
	unsigned *orders;          /* their named_modules() positions, 0 unknown */
	/* every Python frame as torch.profiler's with_stack entries,
	 * innermost first (srcloc.h); texts are malloc'd */
	struct prof_srcframe *src;
	unsigned nsrc;
};

/* Pure: out->src from decoded Python frames (innermost first): a frame
 * "file(first line): co_name", the file cut by srcloc_trim(prefixes);
 * Module.__call__'s frame (_wrapped_call_impl, else _call_impl, of an
 * nn.Module self) as a module entry; unreadable frames left out.  Module
 * orders are 0 (the caller knows them).  0 or -ENOMEM. */
int stack_src_build(const struct pysym_frame *pf, unsigned n, const char *const *prefixes,
		    size_t nprefixes, struct sym_stack *out);

/* Pure: build sym->frames from decoded Python frames (innermost first)
 * and the stack's layers.  Strings are copied.  0 or -ENOMEM. */
int stack_frames_build(const struct pysym_frame *pf, unsigned n, const struct pysym_layers *l,
		       struct sym_stack *out);
void sym_stack_clear(struct sym_stack *s);

struct stackstore {
	struct sym_stack *v;
	size_t n, cap;
};

void stackstore_free(struct stackstore *ss);
const struct sym_stack *stackstore_find(const struct stackstore *ss, uint32_t pid, uint64_t id);
/* Symbolize a captured stack with ps and keep it; file names in its
 * Source Location entries are cut by prefixes (the target's sys.path
 * directories, "/x/y/").  0, or -errno. */
int stackstore_add(struct stackstore *ss, struct pysym *ps, uint32_t pid,
		   const struct rec_pystack *r, const char *const *prefixes, size_t nprefixes,
		   const struct sym_stack **out);
/* The stored stack of pid whose id's low 32 bits are id (what records
 * carry in --inproc), or NULL. */
const struct sym_stack *stackstore_find_low32(const struct stackstore *ss, uint32_t pid,
					      uint32_t id);
/* Keep a stack made of two others (backward ops, model/bwstack.h): the
 * frames and layers of own, the Source Location entries of src; either
 * may be NULL (none).  Copied.  0, or -ENOMEM. */
int stackstore_derive(struct stackstore *ss, uint32_t pid, uint64_t id,
		      const struct sym_stack *own, const struct sym_stack *src,
		      const struct sym_stack **out);
/* layer_stack views of every stored stack (for layers_build); free *v. */
int stackstore_layer_stacks(const struct stackstore *ss, struct layer_stack **v, size_t *n);

#endif
