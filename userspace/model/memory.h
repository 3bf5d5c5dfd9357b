/* memory.h - model stage, --profile-memory: allocations and
 * frees (allocator records, live or replayed) -> what is live, per process
 * and device, the peak and what held it, and what is still live at the
 * end by the op and Python stack (layer) that allocated it.  Pure: records
 * in, tables out; the per-op columns are the profile's (profile.h).
 *
 * Totals per (pid, device): `live` bytes allocated and not yet freed of
 * the allocations seen (CPU: what Kineto's "Total Allocated" counts since
 * profiling started); CUDA records carry the caching allocator's own
 * totals (allocated, reserved), kept as reported.  A free whose
 * allocation was not seen is counted (unknown_frees) and changes nothing. */
#ifndef TBPF_MEMORY_H
#define TBPF_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cudarec.h"

struct rec_mem;

/* Allocations grouped by who made them. */
struct mem_group {
	uint32_t pid;
	uint16_t dev_type;      /* c10::DeviceType: 0 CPU, 1 CUDA */
	int16_t dev_index;
	uint32_t op_id;         /* 0: outside any op ("[memory]") */
	uint32_t stack_id;      /* low 32 bits of the Python stack id */
	uint64_t count;
	int64_t bytes;
};

struct mem_dev {
	uint32_t pid;
	uint16_t dev_type;
	int16_t dev_index;
	int64_t live, peak;     /* bytes of seen allocations */
	uint64_t peak_ts;       /* CLOCK_MONOTONIC ns when the peak was reached */
	uint64_t allocs, frees;
	uint64_t unknown_frees;  /* frees of allocations without a record */
	uint64_t alloc_bytes;   /* sum of allocation sizes */
	uint64_t total_alloc, total_reserved;  /* last reported (CUDA) */
	uint64_t max_reserved;
	struct mem_group *peak_groups;   /* live at the peak, bytes desc */
	size_t npeak_groups;
	bool pending;           /* a new peak not snapshotted yet */
};

struct mem_ent {
	uint64_t ptr;           /* 0 = empty slot */
	uint32_t pid, op_id, stack_id;
	uint16_t dev_type;
	int16_t dev_index;
	int64_t bytes;
};

struct mem_model {
	struct mem_dev *devs;
	size_t ndevs, capdevs;
	struct mem_ent *tab;    /* live allocations, open addressing */
	size_t ntab, nlive;
	uint64_t records;
	/* from the BPF counters (set by the feed): frees of memory allocated
	 * before attach, which make no record; allocations mem_live could not
	 * keep */
	uint64_t frees_before_attach, untracked;
};

void mem_model_init(struct mem_model *m);
void mem_model_free(struct mem_model *m);
/* One allocation or free.  0 or -ENOMEM. */
int mem_model_add(struct mem_model *m, const struct rec_mem *r);
/* After the last record: peaks not snapshotted yet are taken now. */
int mem_model_finish(struct mem_model *m);
bool mem_model_empty(const struct mem_model *m);
/* Live allocations grouped by (pid, device, op, stack), bytes desc (then
 * count desc, pid, op, stack).  *v malloc'd.  0 or -ENOMEM. */
int mem_model_live_groups(const struct mem_model *m, struct mem_group **v, size_t *n);
/* The running totals a trace shows at each record (Kineto's "Total
 * Allocated" / "Total Reserved"): the model's live bytes for CPU, the
 * allocator's own for CUDA.  Call with the decoded event r after
 * mem_model_add of its record. */
void mem_model_totals(const struct mem_model *m, const struct cuda_ev *r, uint64_t *alloc,
		      uint64_t *reserved);

#endif
