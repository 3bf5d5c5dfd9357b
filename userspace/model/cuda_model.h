/* cuda_model.h - aggregation stage, CUDA: launch/copy/sync/alloc records
 * into kernel, copy, sync and allocation tables, with a kernel-name cache.
 * Pure: records in, tables out; names come from a caller's resolver. */
#ifndef TBPF_CUDA_MODEL_H
#define TBPF_CUDA_MODEL_H

#include "cudarec.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CUDA_MAX_DIMS 16
#define CU_API_MAX_ 64      /* >= CU_API_MAX (checked in cuda_model.c) */   /* distinct launch configs kept per kernel */

/* One launch configuration: dimensions, dynamic shared memory, stream. */
struct cuda_dims {
	uint32_t grid[3], block[3], shmem;
	uint64_t stream;
	uint64_t launches;
};

struct cuda_opcount {
	uint32_t op_id;     /* 0 = launched outside any op */
	uint64_t count;
};

/* Launches of one kernel under one Python stack (its layer). */
struct cuda_stackcount {
	uint32_t pid;
	uint32_t stack_id;  /* low 32 bits of the Python stack id, 0 = none */
	bool outside_op;    /* launched outside any op (stack_id is then 0) */
	uint64_t count;
};

/* What code under one Python stack launched, copied and waited for: the
 * per-layer CUDA totals (layers_add_cuda via cuda_model_layer_rows). */
struct cuda_stackstat {
	uint32_t pid;
	uint32_t stack_id;
	bool outside_op;
	uint64_t launches;
	uint64_t copies, copy_bytes;    /* copies and sets */
	uint64_t syncs, sync_ns;        /* host time blocked in syncs */
};

enum cuda_name_src {
	CUDA_NAME_SYMBOL = 0,   /* host stub found in an ELF symbol table */
	CUDA_NAME_OPAQUE,       /* runtime launch with an opaque cudaKernel_t */
	CUDA_NAME_NOSYM,        /* in a file mapping, no symbol covers it */
	CUDA_NAME_DRIVER,       /* CUfunction handle (driver API) */
	CUDA_NAME_GRAPH,        /* graph launch: the exec handle */
	CUDA_NAME_GONE,         /* process exited before the name was read */
};

struct cuda_kernel {
	uint32_t pid;
	uint32_t api;           /* first API seen launching it */
	uint64_t func;
	char *name;             /* display name (owned) */
	enum cuda_name_src src;
	uint64_t launches;
	struct cuda_dims dims[CUDA_MAX_DIMS];
	size_t ndims;
	uint64_t other_dims;    /* launches with configs beyond CUDA_MAX_DIMS */
	struct cuda_opcount *ops;
	size_t nops, capops;
	struct cuda_stackcount *stacks;  /* by Python stack (layer) */
	size_t nstacks, capstacks;
};

enum { CUDA_NDIRS = 6 };    /* enum tbpf_copy_dir */

struct cuda_copy {
	uint64_t count, bytes;
	uint64_t host_ns;       /* time inside synchronous copies */
};

/* Copies and sets of one process by direction (for per-process metrics). */
struct cuda_pidcopy {
	uint32_t pid;
	uint64_t count[CUDA_NDIRS], bytes[CUDA_NDIRS];
};

struct cuda_sync {
	uint32_t op_id;
	uint32_t api;
	uint64_t count, total_ns, max_ns;
};

struct cuda_alloc {
	uint32_t api;
	uint64_t calls, failed, bytes;   /* bytes requested, all calls */
	uint64_t frees, freed_bytes;     /* freed_bytes: frees of known blocks */
};

/* Where a launch address lies in its process. */
enum cuda_where {
	CUDA_ADDR_NOFILE = 0,   /* no file mapping: an opaque handle */
	CUDA_ADDR_FILE,         /* in an executable file mapping */
	CUDA_ADDR_GONE,         /* unknown: the process exited first */
};

/* Name resolver: demangled name of a host stub (malloc'd) or NULL; sets
 * *where (enum cuda_where). */
typedef char *(*cuda_resolve_fn)(void *ctx, uint32_t pid, uint64_t addr, int *where);

struct cuda_live { uint32_t pid; uint64_t ptr, bytes; };

/* Calls of one CUDA API (the table of a plain CUDA program,
 * named as Kineto's cuda_runtime/cuda_driver events).  Host time of the
 * calls timed at their return (every call since return timing;
 * cuda_rec_host_ns): `timed` of the `calls`. */
struct cuda_apistat {
	uint32_t api;
	uint64_t calls, timed, total_ns, max_ns;
};

/* The calls of one API made under one op (torch.profiler's rows
 * of Kineto's cuda_runtime events, nested under the op that made them):
 * op_id 0 = outside any op.  total_ns: host time of the timed calls. */
struct cuda_opapi {
	uint32_t pid, op_id, stack_id, api;
	uint64_t calls, total_ns, max_ns;
};

struct cuda_model {
	cuda_resolve_fn resolve;
	void *resolve_ctx;
	struct cuda_kernel *kernels;
	size_t nkernels, capkernels;
	uint32_t *kidx;           /* open addressing: index + 1, 0 = empty */
	size_t kidx_cap;
	struct cuda_copy copies[CUDA_NDIRS];
	struct cuda_pidcopy *pcopies;    /* per process, in order of first copy */
	size_t npcopies, cappcopies;
	struct cuda_sync *syncs;
	size_t nsyncs, capsyncs;
	struct cuda_alloc *allocs;
	size_t nallocs, capallocs;
	struct cuda_live *live;
	size_t nlive, caplive;
	struct cuda_stackstat *sstats;   /* per (pid, stack, outside_op) */
	size_t nsstats, capsstats;
	uint32_t *sidx;                  /* open addressing: index + 1 */
	size_t sidx_cap;
	uint64_t live_bytes, peak_bytes;
	uint64_t records, bad_records;
	struct cuda_apistat apis[CU_API_MAX_];   /* by api id; calls 0: not seen */
	struct cuda_opapi *opapis;       /* per (pid, op, stack, api), cuda_ops.c */
	size_t nopapis, capopapis;
	uint32_t *oidx;                  /* open addressing: index + 1 */
	size_t oidx_cap;
	/* the same tables per process, one model each (pid
	 * order of first record); a process's model has none of its own and
	 * names its kernels from its parent's */
	struct cuda_model **procs;
	size_t nprocs, capprocs;
	const struct cuda_model *parent;
	uint32_t pid;                    /* a process's model: its pid */
};

void cuda_model_init(struct cuda_model *m, cuda_resolve_fn resolve, void *ctx);
void cuda_model_free(struct cuda_model *m);
/* Empty the model, keeping its resolver (the daemon: one model a window). */
void cuda_model_reset(struct cuda_model *m);
/* Feed one ring-buffer record (any type; non-CUDA records are ignored).
 * Returns 0, or -EINVAL for a short/garbled CUDA record, -ENOMEM. */
int cuda_model_add(struct cuda_model *m, const void *rec, size_t len);

/* Sorted views (arrays of pointers into the model, malloc'd): kernels by
 * launches desc then name; syncs by total time desc then api; allocs by
 * bytes desc then api. */
const struct cuda_kernel **cuda_model_kernels(const struct cuda_model *m);
const struct cuda_sync **cuda_model_syncs(const struct cuda_model *m);
const struct cuda_alloc **cuda_model_allocs(const struct cuda_model *m);
/* The APIs called, by host time desc, then calls desc, then name
 * (malloc'd pointer array, *n set). */
const struct cuda_apistat **cuda_model_apis(const struct cuda_model *m, size_t *n);

/* Per-stack totals sorted by (pid, stack_id, outside_op) (malloc'd
 * pointer array, *n set). */
const struct cuda_stackstat **cuda_model_stackstats(const struct cuda_model *m, size_t *n);

/* Rows for layers_add_cuda(): one per (kernel, stack) with its launches
 * (kernel names point into the model), then one per stack with its copies
 * and syncs.  Pure; malloc'd array (free it), *n set.  0 or -ENOMEM. */
struct layer_cudastat;
int cuda_model_layer_rows(const struct cuda_model *m, struct layer_cudastat **rows, size_t *n);

/* cuda_model_layer_rows() into layers_add_cuda(): the tree's layers gain
 * their launches, kernels, copies and sync time.  0 or -ENOMEM. */
struct layer_tree;
int cuda_model_to_layers(const struct cuda_model *m, struct layer_tree *t);

/* The tables of one process (a section each), or NULL when pid
 * made no CUDA record.  Valid while m is. */
const struct cuda_model *cuda_model_of_pid(const struct cuda_model *m, uint32_t pid);

/* cuda_rec_host_ns, a CUDA record's host time: capture/cudarec.h */

/* Count one CUDA record under its (pid, op, stack, api) (cuda_ops.c).
 * 0 or -ENOMEM. */
int cuda_opapi_add(struct cuda_model *m, const void *rec);

/* True when no CUDA record was added. */
bool cuda_model_empty(const struct cuda_model *m);
const char *cuda_dir_name(uint32_t dir);
/* Name of an API id ("cudaLaunchKernel"), "?" when unknown. */
const char *cuda_model_api_name(uint32_t api);

#endif /* TBPF_CUDA_MODEL_H */
