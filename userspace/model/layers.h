/* layers.h - aggregate stage: build the nn.Module layer tree from
 * symbolized Python stacks and per-(stack, op) statistics.  Pure: data in,
 * data out. */
#ifndef TBPF_LAYERS_H
#define TBPF_LAYERS_H

#include <stddef.h>
#include <stdint.h>

/* Row names for ops that have no module layer. */
#define LAYER_NOMODULE_NAME "[no module]"      /* Python, outside modules */
#define LAYER_NOPYTHON_NAME "[no python]"      /* threads without Python */
#define LAYER_UNRESOLVED_NAME "[unresolved]"   /* stack id not symbolized */
#define LAYER_NOOP_NAME "[no op]"              /* CUDA calls outside any op */

/* A symbolized stack's layers, outermost first (pysym_layers()):
 * names[0] is the root module's label, then attribute names. */
struct layer_stack {
	uint64_t stack_id;
	unsigned depth;                 /* 0: Python but no module */
	const char *const *names;
	const char *const *classes;
	const unsigned *orders;         /* per level: position in the root's
					 * named_modules() (root 1); NULL or
					 * 0: unknown (captures before it) */
};

/* Statistics of one op under one stack (tbpf_opkey/tbpf_opstat). */
struct layer_opstat {
	uint64_t stack_id;              /* 0: thread without Python */
	const char *op;
	uint64_t calls, self_ns, total_ns;
	uint64_t launches;              /* CUDA launches with this op on top */
	int64_t mem_self[2], mem_total[2];  /* --profile-memory, [0] CPU [1] CUDA */
	int outside_op;                 /* allocations outside any op (the
					 * "[memory]" row): LAYER_NOOP_NAME */
	int cuda_call;                  /* a CUDA runtime call row (cuda_ops.h):
					 * in the layer's ops, not its op calls */
	/* CUPTI device time (join/gpujoin.c, the op rows' Self CUDA / CUDA
	 * total): of the kernels, copies and sets launched with this op on
	 * top, and with it open (its child ops' too) */
	uint64_t self_cuda_ns, cuda_total_ns;
};

enum layer_kind { LAYER_MODULE, LAYER_NOMODULE, LAYER_NOPYTHON, LAYER_UNRESOLVED, LAYER_NOOP };

/* CUDA activity under one Python stack (cuda_model_layer_rows()): a
 * kernel's launches, or (kernel NULL) the stack's copies and syncs. */
struct layer_cudastat {
	uint64_t stack_id;              /* compared on its low 32 bits, which
					 * CUDA records carry; 0: no Python */
	int outside_op;                 /* made outside any op: LAYER_NOOP_NAME */
	const char *kernel;             /* NULL: not a launch row */
	uint64_t launches;
	uint64_t copies, copy_bytes;    /* copies and sets */
	uint64_t syncs, sync_ns;        /* host time blocked in syncs */
};

struct layer_cuda {
	uint64_t launches, copies, copy_bytes, syncs, sync_ns;
};

/* A kernel launched directly in a layer (innermost module). */
struct layer_kernel {
	char *name;
	uint64_t launches;
};

struct layer_op {
	char *name;
	uint64_t calls, self_ns, total_ns;
	uint64_t launches;
	uint64_t self_cuda_ns, cuda_total_ns;   /* device time (layer_opstat) */
	int64_t mem_self[2], mem_total[2];
};

/* Times are op times: self_ns is the self time of the ops whose innermost
 * module is this layer; total_ns adds every layer below it.  calls counts
 * op calls the same way (module invocations are not observed). */
struct layer_node {
	char *name;                     /* attribute name or root label */
	char *cls;                      /* class name, NULL for special rows */
	enum layer_kind kind;
	unsigned order;                 /* named_modules() position, 0 unknown */
	struct layer_node *parent;
	struct layer_node **kids;
	size_t nkids, capkids;
	struct layer_op *ops;           /* ops run directly in this layer */
	size_t nops, capops;
	uint64_t self_ns, total_ns;
	uint64_t self_calls, calls;
	uint64_t forward_calls;         /* calls of this module (torchprof's
					 * Count; layer_tree.has_modcalls) */
	/* --profile-memory, [0] CPU [1] CUDA: self_mem is the Self Mem of
	 * the ops whose innermost module is this layer, mem adds every layer
	 * below it (like self_ns / total_ns) */
	int64_t self_mem[2], mem[2];
	/* CUDA (layers_add_cuda): self_cuda is what ran with this layer as
	 * the innermost module, cuda adds every layer below it. */
	struct layer_cuda self_cuda, cuda;
	/* CUPTI device time (torchprof's Self CUDA / CUDA): self_dev_ns is
	 * the device time of the work launched with this layer as the
	 * innermost module (its ops' Self CUDA, and for LAYER_NOOP the work
	 * launched outside any op), dev_ns adds every layer below it */
	uint64_t self_dev_ns, dev_ns;
	struct layer_kernel *kernels;   /* self launches by kernel: launches
					 * desc, then name */
	size_t nkernels, capkernels;
};

/* A stack as the tree keeps it, to place CUDA rows and name layers. */
struct layer_stackref {
	uint32_t id32;                  /* low 32 bits of the stack id */
	unsigned depth;
	char **names, **classes;
	unsigned *orders;               /* NULL: unknown */
	char *path;                     /* "Net/blocks/0", or a special name */
};

struct layer_tree {
	struct layer_node top;          /* unnamed; its kids are the roots */
	uint64_t total_ns;              /* all op self time: 100% */
	uint64_t dev_ns;                /* all device time in the tree: 100% of
					 * the CUDA columns */
	struct layer_stackref *stacks;  /* sorted by id32 */
	size_t nstacks;
	int has_cuda;                   /* layers_add_cuda added something */
	int has_modcalls;               /* layers_add_modcall added something */
	int has_memory;                 /* --profile-memory: mem columns */
	int has_cuda_memory;
	int has_dev;                    /* device times (CUPTI): Self CUDA, CUDA total */
};

/* Build the tree.  Ops whose stack_id is nonzero but missing from
 * `stacks` land in LAYER_UNRESOLVED_NAME.  Returns 0 or -ENOMEM. */
int layers_build(const struct layer_stack *stacks, size_t nstacks,
		 const struct layer_opstat *ops, size_t nops,
		 struct layer_tree **out);
void layers_free(struct layer_tree *t);
/* calls nn.Module calls of the module a stack's layers end at (a module
 * with no op of its own gets its row here).  0, or -ENOMEM. */
int layers_add_modcall(struct layer_tree *t, uint64_t stack_id, uint64_t calls);

/* Add CUDA rows to the layers of their stacks (placed like ops: stack 0
 * in LAYER_NOPYTHON_NAME, unknown stacks in LAYER_UNRESOLVED_NAME,
 * outside_op rows in LAYER_NOOP_NAME) and recompute the sums.  0 or
 * -ENOMEM. */
int layers_add_cuda(struct layer_tree *t, const struct layer_cudastat *rows, size_t n);

/* Device time of work launched outside any op (CUPTI records joined to a
 * launch that no op enclosed): to LAYER_NOOP_NAME, as its launches.
 * Sums recomputed.  0 or -ENOMEM. */
int layers_add_dev_noop(struct layer_tree *t, uint64_t ns);

/* The layer path of a stack ("Net/blocks/0", a special row's name);
 * valid while t lives.  Matches on the low 32 bits of stack_id. */
const char *layers_stack_path(const struct layer_tree *t, uint64_t stack_id, int outside_op);

/* Path of a node, names joined by '/' (malloc'd, NULL on -ENOMEM). */
char *layers_node_path(const struct layer_node *n);

/* The node at a path of names ("Net", "blocks", "0"), or NULL. */
const struct layer_node *layers_find(const struct layer_tree *t,
				     const char *const *names, unsigned n);

#endif
