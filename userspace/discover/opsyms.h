/* opsyms.h - discovery stage: the PyTorch operators of one libtorch
 * (at::_ops::<op>::call / ::redispatch) and their torch.profiler names. */
#ifndef TBPF_OPSYMS_H
#define TBPF_OPSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct opsym {
	uint64_t file_off;   /* probe offset (uprobe / uprobe_multi) */
	uint64_t vaddr, size;
	char *mangled;       /* "_ZN2at4_ops10add_Tensor4callE..." */
	char *struct_name;   /* "add_Tensor" */
	char *name;          /* "aten::add" (what torch.profiler prints) */
	char *overload;      /* "Tensor", or "" */
	bool redispatch;     /* ::redispatch, else ::call */
	uint32_t op_index;   /* same for the call and redispatch of one op:
			      * 0..n_ops-1 in the sorted order below */
	int name_source;     /* enum opname_source that named it */
	int kind;            /* enum opsym_kind */
	uint8_t ret;         /* OPSYM_OP: enum argdesc_ret, from its schema */
	uint32_t name_id;    /* set by target_open: the cookie's name id */
	uint64_t vtable;     /* OPSYM_NODE_EVAL: ELF vaddr the node class's
			      * objects point to (_ZTV... + 16), 0 = unknown */
};

/* Besides the operators: autograd nodes, as torch.profiler
 * names their RecordFunction scopes. */
enum opsym_kind {
	OPSYM_OP = 0,        /* at::_ops::<op>::call / ::redispatch */
	OPSYM_NODE,          /* <Node>::apply: "AddmmBackward0",
			      * "torch::autograd::AccumulateGrad" */
	OPSYM_NODE_EVAL,     /* no probe: the name "autograd::engine::
			      * evaluate_function: <Node>" of one node class */
	OPSYM_EVAL,          /* Engine::evaluate_function (Node* in rdx): its
			      * rows take the NODE_EVAL id of the node's class */
	OPSYM_BOXED,         /* the boxed-call entry (boxedop.h): its rows take
			      * the id of the operator it calls, read from the
			      * OperatorHandle (boxed_names map) */
};

struct opsym_set {
	struct opsym *v;  /* sorted by name, overload, struct name, call first */
	size_t n;
	size_t n_ops;     /* distinct operators (op_index values) */
	size_t n_call, n_redispatch;
	size_t n_nodes;   /* OPSYM_NODE entries */
	char *lib_path;
};

/* Every at::_ops::<op>::call and ::redispatch defined in path (.dynsym;
 * .symtab only when .dynsym has none), named from the schema strings in
 * the same file.  -errno from opening the file; an empty set is 0. */
int opsyms_discover(const char *path, struct opsym_set *out);
void opsyms_free(struct opsym_set *s);

/* Pure: "_ZN2at4_ops10add_Tensor4callE..." -> "add_Tensor", false.
 * 0, or -EINVAL when mangled is no op entry point. */
int opsym_parse_mangled(const char *mangled, char **struct_name, bool *redispatch);

/* Pure: an op entry point's mangled name has an at::Tensor among its
 * arguments (Tensor, optional<Tensor>, a list of them, an out tensor).
 * One without (a factory op: ones, arange, empty, ...) is dispatched to
 * BackendSelect first, never to an Autograd key, so torch gives its
 * RecordFunction no sequence number (--group-by-stack's backward rule). */
bool opsym_has_tensor_arg(const char *mangled);

/* Pure: an autograd node's apply -> its torch.profiler name and the
 * mangled name of its vtable:
 *   "_ZN5torch8autograd9generated14AddmmBackward05applyEOSt6vector..." ->
 *   "AddmmBackward0", "_ZTVN5torch8autograd9generated14AddmmBackward0E";
 *   "_ZN5torch8autograd14AccumulateGrad5applyEOSt6vector..." ->
 *   "torch::autograd::AccumulateGrad", "_ZTVN5torch8autograd14AccumulateGradE".
 * 0, or -EINVAL when mangled is no node's apply(variable_list&&). */
int opsym_parse_node(const char *mangled, char **name, char **vtable_sym);

/* ---- op struct name -> (name, overload) ------------------------------
 * The struct name is name + "_" + overload (overload may be empty), which
 * alone cannot be split ("add__Tensor" is add_ + Tensor; "scatter_reduce"
 * is scatter + reduce, while the op scatter_reduce has overload "two").
 * The strings compiled into the library settle it.  Fed every read-only
 * string, the map keeps, from most to least trusted:
 *   OPNAME_SCHEMA     "aten::add.Tensor(Tensor self, ...) -> Tensor"
 *   OPNAME_QUALIFIED  "aten::add.Tensor" (the op's name/overload pair)
 *   OPNAME_SCHEMA_UNQ "add.Tensor(Tensor self, ...) -> Tensor": the same
 *                     schema without namespace (torch 1.13 and 2.x hold
 *                     both kinds; other namespaces' schemas look alike,
 *                     hence the lower rank)
 *   OPNAME_TAIL       the end of a schema's name: the linker merges the
 *                     string "sinc.out(...)" into the tail of
 *                     "special_sinc.out(...)" when the argument lists
 *                     agree, so no string starts with "sinc.out("
 *   OPNAME_BARE       "aten::relu_": a name (overload taken as "")
 * and, when no string names the struct, a heuristic:
 *   OPNAME_GUESS      split at the '_' that leaves the longest known op
 *                     name on the left and a known overload name on the
 *                     right, else the longest known op name that is a
 *                     prefix followed by '_'
 *   OPNAME_NONE       the whole struct name with overload "".
 * Ties within a rank keep the string seen first.
 */
enum opname_source {
	OPNAME_SCHEMA = 0,
	OPNAME_QUALIFIED,
	OPNAME_SCHEMA_UNQ,
	OPNAME_TAIL,
	OPNAME_BARE,
	OPNAME_GUESS,
	OPNAME_NONE,
};
const char *opname_source_str(int src);

struct opname_map;
struct opname_map *opname_map_new(void);
/* Any string; those that are not op names or schemas are ignored.  An
 * allocation failure is kept and reported by opname_map_split. */
void opname_map_add(struct opname_map *m, const char *str);
/* struct name -> malloc'd "aten::<name>" and overload ("" if none).
 * Returns the enum opname_source used (>= 0), -EINVAL for an empty
 * struct name or -ENOMEM.  Not
 * thread-safe (the first call sorts an index). */
int opname_map_split(const struct opname_map *m, const char *struct_name,
		     char **name, char **overload);
void opname_map_free(struct opname_map *m);
/* How the op of a struct name returns (enum argdesc_ret, argdesc.h),
 * from its best-ranked schema string, or the string its schema was
 * merged into as a tail; ARGRET_UNKNOWN without one. */
int opname_map_ret(const struct opname_map *m, const char *struct_name);

#endif
