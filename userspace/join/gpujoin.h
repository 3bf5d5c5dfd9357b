/* gpujoin.h - join stage: CUPTI device activity records with tbpf's host
 * launch records, so device time flows to op ids and Python stacks.
 *
 *   device record --correlation id--> CUPTI API record (thread, interval)
 *   API record --same thread, time--> host launch/copy record (op, stack)
 *
 * Pure: arrays in, arrays out; no I/O. */
#ifndef TBPF_GPUJOIN_H
#define TBPF_GPUJOIN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

/* A host-side CUDA call tbpf probed (rec_launch or rec_memop). */
struct gj_host {
	uint64_t ts_ns;    /* probe entry, CLOCK_MONOTONIC */
	uint32_t tid;
	uint32_t api;      /* enum tbpf_cuda_api */
	uint32_t op_id;    /* op on top of the thread's stack, 0 = none */
	uint32_t stack_id;
};
void gj_host_from_launch(struct gj_host *h, const struct rec_launch *r);
void gj_host_from_memop(struct gj_host *h, const struct rec_memop *r);
/* 1 = runtime (cudaXxx), 2 = driver (cuXxx), 0 = none. */
int gj_api_family(uint32_t api);

/* One op instance on one thread (from its start and end); optional, gives
 * CUDA total (device time of everything launched inside the op). */
struct gj_op_span {
	uint64_t start_ns, end_ns;
	uint64_t stack_id;
	uint32_t tid;
	uint32_t op_id;
};

struct gj_input {
	const struct gj_host *host;
	size_t nhost;
	const struct rec_gpu *gpu;   /* device and API kinds, any order */
	size_t ngpu;
	const struct rec_gpu_name *names;
	size_t nnames;
	const struct gj_op_span *spans;
	size_t nspans;
	int estimate_offset;         /* GJ_OFFSET_*: how CUPTI times reach the host clock */
	int64_t clock_offset_ns;     /* GJ_OFFSET_GIVEN: added to every CUPTI timestamp */
	/* NULL, or the device records to keep, by their host launch time (the
	 * device start without one): a --steps window keeps the work launched
	 * in its steps, as torch.profiler's schedule records it */
	bool (*keep)(void *ctx, uint64_t ts_ns);
	void *keep_ctx;
};

/* One device activity, placed on the host clock and attributed. */
struct gj_dev {
	uint64_t start_ns, end_ns;   /* host clock */
	uint64_t bytes;
	uint64_t name_id;
	const char *name;            /* full kernel name or NULL (points into input) */
	uint64_t launch_ts_ns;       /* host launch time, 0 if unattributed */
	uint64_t flow_id;            /* Chrome "ac2g" flow id (correlation), 0 = none */
	uint32_t kind;               /* GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET */
	uint32_t copy_kind;
	uint32_t device, context, stream, correlation;
	uint32_t tid;                /* launching thread (from the API record), 0 = unknown */
	uint32_t op_id, stack_id;    /* from the host record, 0 = unattributed */
	int32_t host_idx;            /* index into gj_input.host, -1 = none */
	uint32_t grid[3], block[3];
	/* the CUPTI API record of the same correlation (api_kind 0 = none) */
	uint64_t api_start_ns, api_end_ns;   /* host clock */
	uint32_t api_kind;           /* GPU_API_RUNTIME or GPU_API_DRIVER */
	uint32_t cbid;               /* its CUPTI callback id */
	uint32_t host_api;           /* enum tbpf_cuda_api of the host record (host_idx >= 0) */
};

struct gj_opstat {
	uint32_t op_id;
	uint32_t stack_id;
	uint64_t self_cuda_ns;   /* device time of work launched with this op on top */
	uint64_t total_cuda_ns;  /* + work launched by nested ops (needs spans) */
	uint64_t kernels, memcpys, memsets;
};

struct gj_kstat {
	uint64_t name_id;
	const char *name;        /* full name when known, else the inline prefix */
	uint64_t count, total_ns, min_ns, max_ns;
};

struct gj_counts {
	uint64_t device;         /* device records seen */
	uint64_t api;            /* API records seen */
	uint64_t attributed;     /* device records that reached a host record */
	uint64_t no_api;         /* device record without its API record */
	uint64_t no_host;        /* API record without a host launch */
	uint64_t unattributed_ns;
	uint64_t offset_pairs;   /* host/API pairs behind the offset estimate */
	uint64_t outside;        /* of device, left out by gj_input.keep */
};

struct gj_result {
	int64_t clock_offset_ns;
	int offset_estimated;
	struct gj_dev *dev;      /* sorted by device, stream, start, correlation */
	size_t ndev;
	struct gj_opstat *ops;   /* sorted by self CUDA desc, op id, stack id */
	size_t nops;
	struct gj_kstat *kernels;/* sorted by total desc, then name */
	size_t nkernels;
	struct gj_counts counts;
};

/* gj_input.estimate_offset */
enum {
	GJ_OFFSET_GIVEN = 0,     /* use clock_offset_ns (0: the agent's CLOCK_MONOTONIC) */
	GJ_OFFSET_ESTIMATE = 1,  /* estimate; -ENODATA without a host/API pair */
	GJ_OFFSET_AUTO = 2,      /* estimate, but keep 0 when no pair exists or the
				  * estimate is within GJ_SAME_CLOCK_NS (same clock:
				  * the estimate would only be the launch-to-API gap) */
};
#define GJ_SAME_CLOCK_NS 10000000ll

/* Window for the offset estimate (the spread of the host-probe-to-API-start
 * delay of the pairs it takes as true).
 *
 * The match of an API record to its host record has no time slack (issue
 * 19): the probe's timestamp and CUPTI's API start are apart by whatever
 * happens between the uprobe and the call's first instruction: a uprobe's
 * first hit in a process (the kernel maps its out-of-line single-step
 * area, the page is faulted in) took 13-37 us here, and a thread
 * preempted there waits for a CPU (up to 8 ms measured beside two busy
 * loops on 2 vCPUs; the former fixed 100 us slack lost about one kernel
 * in 3,000 then).  The host record is bounded by the thread's previous
 * API record instead (gpujoin.c, match_host).  GJ_MATCH_MAX_GAP_NS only
 * bounds a thread's first API record, far beyond any preemption: clocks
 * that are not aligned join nothing. */
#define GJ_OFFSET_WINDOW_NS 2000
#define GJ_MATCH_MAX_GAP_NS 1000000000ull

/* Returns 0 or -errno (-ENOMEM; -ENODATA when an offset estimate was asked
 * for and no host/API pair exists). */
int gpujoin_run(const struct gj_input *in, struct gj_result *out);
void gpujoin_free(struct gj_result *out);

/* The estimate alone: offset such that cupti_ts + offset = host clock. */
int gj_estimate_offset(const struct gj_host *host, size_t nhost, const struct rec_gpu *gpu,
		       size_t ngpu, int64_t *offset, uint64_t *pairs);

#endif
