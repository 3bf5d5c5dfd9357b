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

#endif /* TBPF_CUDA_TABLES_H */
