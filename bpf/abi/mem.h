/* abi/mem.h - --profile-memory, shared by BPF (bpf/mem.bpf.h) and user
 * space: the REC_MEM record and the live-allocation map's key and value.
 */
#ifndef TBPF_ABI_MEM_H
#define TBPF_ABI_MEM_H

#include "core.h"

/* What torch.profiler's profile_memory=True counts, seen from outside:
 *  - CPU: c10::ProfiledCPUMemoryReporter::New(this, ptr, nbytes) and
 *    ::Delete(this, ptr) in libc10, which the default CPU allocator calls
 *    for every allocation and free, profiler on or off (they report to the
 *    profiler only while it runs);
 *  - CUDA (and any other device): c10::reportMemoryUsageToProfiler(ptr,
 *    alloc_size, total_allocated, total_reserved, Device), which the CUDA
 *    caching allocator calls for every block it hands out (+size) and takes
 *    back (-size), with its own totals.  CPU reports there are skipped
 *    (they come from New/Delete, when torch.profiler runs in the target).
 * An allocation or free is charged to the op open on the calling thread
 * (its Self and its ancestors' inclusive bytes), as torch.profiler does;
 * outside any op to the `[memory]` row (TBPF_OPID_MEMORY).  A free needs
 * the allocation's size: CPU allocations are kept in the bounded hash
 * `mem_live` ((pid, ptr) -> struct tbpf_memval); a free of an address not
 * in it (allocated before attach, or the map was full) is counted apart
 * (CNT_MEM_UNKNOWN_FREES) and charged nowhere, as torch.profiler skips
 * frees of memory allocated before it started. */
#define TBPF_OPID_MEMORY 0x7ffffff0u  /* the "[memory]" row */
#define TBPF_MEM_MAP_DEFAULT 262144   /* mem_live entries (--mem-map-size) */

enum tbpf_mem_dev { MEM_DEV_CPU = 0, MEM_DEV_CUDA = 1, MEM_DEV_N = 2 };

/* c10::DeviceType values (1.13 .. 2.8) used by the records */
#define TBPF_C10_DEV_CPU 0
#define TBPF_C10_DEV_CUDA 1

enum tbpf_mem_flags {
	MEMF_FREE = 1 << 0,       /* bytes < 0 */
	MEMF_NO_OP = 1 << 1,      /* no op open on the thread: "[memory]" */
	MEMF_UNTRACKED = 1 << 2,  /* allocation not kept (mem_live full) */
};

struct rec_mem {
	struct rec_hdr h;
	__u32 pid;
	__u16 dev_type;      /* c10::DeviceType (0 CPU, 1 CUDA, ...) */
	__s16 dev_index;     /* -1 = none (CPU) */
	__u64 ptr;
	__s64 bytes;         /* + allocated, - freed */
	__u64 total_alloc;   /* the allocator's allocated bytes after it
			      * (CUDA: its own; CPU: 0, computed by the model) */
	__u64 total_reserved;/* CUDA: reserved (segments); CPU: 0 */
	__u32 op_id;         /* op charged (top of the thread's stack), 0 none */
	__u32 stack_id;      /* its Python stack (low 32 bits) */
	__u32 flags;         /* enum tbpf_mem_flags */
	__u32 depth;
};

struct tbpf_memkey {
	__u32 pid;
	__u32 pad;
	__u64 ptr;
};

struct tbpf_memval {
	__s64 bytes;
};

#endif /* TBPF_ABI_MEM_H */
