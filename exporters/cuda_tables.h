/* cuda_tables.h - export stage, CUDA: text tables and JSON members for the
 * kernel, copy, sync and allocation tables of a cuda_model. */
#ifndef TBPF_CUDA_TABLES_H
#define TBPF_CUDA_TABLES_H

#include <stdint.h>
#include <stdio.h>
#include "cuda_model.h"

/* Display name of an op id (0 = no op; the callback is not asked for it). */
typedef const char *(*cuda_opname_fn)(void *ctx, uint32_t op_id);

/* Text tables: kernels (name, launches, grid/block, ops), copies by
 * direction, host sync time per op, allocations.  `device_note` (may be
 * NULL) is printed once, e.g. why device timings are absent.  Empty tables
 * are skipped; nothing at all is printed when the model is empty. */
int cuda_tables_print(FILE *f, const struct cuda_model *m, cuda_opname_fn opname,
		      void *ctx, const char *device_note);

/* JSON object members (no braces): "kernels": [...], "copies": [...],
 * "syncs": [...], "allocations": [...], "allocation_live_bytes": N,
 * "allocation_peak_bytes": N.  The caller writes the enclosing object and
 * a comma before when needed. */
int cuda_json_members(FILE *f, const struct cuda_model *m, cuda_opname_fn opname, void *ctx);

/* The same with layers: `layers` (may be NULL: as above) names the Python
 * stack of each launch.  The kernel table gains a "Layers" column (the
 * innermost module paths, top CUDA_LAYERS_SHOWN by launches; only when
 * some launch came from a Python stack), and each
 * JSON kernel "layers": [{"layer": path, "launches": n}] (all of them). */
struct layer_tree;
#define CUDA_LAYERS_SHOWN 3
int cuda_tables_print_ex(FILE *f, const struct cuda_model *m, cuda_opname_fn opname,
			 void *ctx, const struct layer_tree *layers, const char *device_note);
int cuda_json_members_ex(FILE *f, const struct cuda_model *m, cuda_opname_fn opname,
			 void *ctx, const struct layer_tree *layers);

/* Pure: a kernel's launches by layer path (layers_stack_path), stacks with
 * the same path merged, sorted by launches desc then path.  *out is
 * malloc'd (paths point into the tree).  0 or -ENOMEM. */
struct cuda_layercount {
	const char *layer;
	uint64_t launches;
};
int cuda_kernel_layers(const struct cuda_kernel *k, const struct layer_tree *layers,
		       struct cuda_layercount **out, size_t *n);

#endif /* TBPF_CUDA_TABLES_H */
