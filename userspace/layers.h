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

/* A symbolized stack's layers, outermost first (pysym_layers()):
 * names[0] is the root module's label, then attribute names. */
struct layer_stack {
	uint64_t stack_id;
	unsigned depth;                 /* 0: Python but no module */
	const char *const *names;
	const char *const *classes;
};

/* Statistics of one op under one stack (tbpf_opkey/tbpf_opstat). */
struct layer_opstat {
	uint64_t stack_id;              /* 0: thread without Python */
	const char *op;
	uint64_t calls, self_ns, total_ns;
};

enum layer_kind { LAYER_MODULE, LAYER_NOMODULE, LAYER_NOPYTHON, LAYER_UNRESOLVED };

struct layer_op {
	char *name;
	uint64_t calls, self_ns, total_ns;
};

/* Times are op times: self_ns is the self time of the ops whose innermost
 * module is this layer; total_ns adds every layer below it.  calls counts
 * op calls the same way (module invocations are not observed). */
struct layer_node {
	char *name;                     /* attribute name or root label */
	char *cls;                      /* class name, NULL for special rows */
	enum layer_kind kind;
	struct layer_node *parent;
	struct layer_node **kids;
	size_t nkids, capkids;
	struct layer_op *ops;           /* ops run directly in this layer */
	size_t nops, capops;
	uint64_t self_ns, total_ns;
	uint64_t self_calls, calls;
};

struct layer_tree {
	struct layer_node top;          /* unnamed; its kids are the roots */
	uint64_t total_ns;              /* all op self time: 100% */
};

/* Build the tree.  Ops whose stack_id is nonzero but missing from
 * `stacks` land in LAYER_UNRESOLVED_NAME.  Returns 0 or -ENOMEM. */
int layers_build(const struct layer_stack *stacks, size_t nstacks,
		 const struct layer_opstat *ops, size_t nops,
		 struct layer_tree **out);
void layers_free(struct layer_tree *t);

/* The node at a path of names ("Net", "blocks", "0"), or NULL. */
const struct layer_node *layers_find(const struct layer_tree *t,
				     const char *const *names, unsigned n);

#endif
