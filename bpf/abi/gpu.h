/* abi/gpu.h - the CUPTI agent's device records (REC_GPU), shared by the
 * agent (agent/tbpf_agent.c), BPF (bpf/agent.bpf.h) and user space, and
 * the agent's status and control word.
 */
#ifndef TBPF_ABI_GPU_H
#define TBPF_ABI_GPU_H

#include "core.h"

/* Records the in-process agent (agent/tbpf_agent.c) builds from CUPTI
 * activity and hands to the BPF side through probed no-op functions
 * (bpf/agent.bpf.h).  One REC_GPU header type, three layouts told apart by
 * `kind` (same offset in all three). */
enum tbpf_gpu_kind {
	GPU_KERNEL = 1,
	GPU_MEMCPY = 2,
	GPU_MEMSET = 3,
	GPU_API_RUNTIME = 4,  /* cudaXxx call: tid, correlation, cbid */
	GPU_API_DRIVER = 5,   /* cuXxx call */
	GPU_NAME = 6,         /* struct rec_gpu_name: name_id -> full name */
	GPU_STATUS = 7,       /* struct rec_gpu_status */
};

#define TBPF_GPU_SHORT_NAME 48   /* inline kernel name prefix */
#define TBPF_GPU_NAME_MAX 512    /* full name in a GPU_NAME record */
#define TBPF_GPU_BATCH 32        /* records per tbpf_agent_emit_batch call */

struct rec_gpu {
	struct rec_hdr h;  /* ts_ns = start_ns; tid = API thread (API kinds), else 0 */
	__u32 pid;
	__u16 kind;        /* enum tbpf_gpu_kind */
	__u16 copy_kind;   /* CUpti_ActivityMemcpyKind (GPU_MEMCPY) */
	__u64 start_ns;    /* CLOCK_MONOTONIC (agent timestamp callback) */
	__u64 end_ns;
	__u64 bytes;       /* memcpy/memset */
	__u64 name_id;     /* kernel: FNV-1a 64 of the full name, see GPU_NAME */
	__u32 correlation; /* CUPTI correlationId */
	__u32 device;
	__u32 context;
	__u32 stream;
	__u32 grid[3];
	__u32 block[3];
	__u32 cbid;        /* API kinds: CUPTI callback id */
	__u32 flags;       /* enum tbpf_gpu_flags */
	char name[TBPF_GPU_SHORT_NAME]; /* kernel name prefix, NUL-terminated */
};

enum tbpf_gpu_flags {
	GPUF_NAME_TRUNC = 1 << 0,  /* name[] holds a prefix; see GPU_NAME */
	GPUF_GRAPH = 1 << 1,       /* launched as part of a CUDA graph */
};

struct rec_gpu_name {
	struct rec_hdr h;
	__u32 pid;
	__u16 kind;        /* GPU_NAME */
	__u16 len;         /* bytes in name, without the NUL */
	__u64 name_id;
	char name[TBPF_GPU_NAME_MAX];
};

/* Agent state (rec_gpu_status.state and the exported tbpf_agent_status). */
enum tbpf_agent_state {
	AGENT_LOADED = 1,      /* library loaded, idle: nothing enabled */
	AGENT_NO_DRIVER = 2,   /* libcuda.so.1 not found: no NVIDIA driver */
	AGENT_NO_DEVICE = 3,   /* cuInit/cuDeviceGetCount failed or 0 devices */
	AGENT_NO_CUPTI = 4,    /* libcupti could not be loaded */
	AGENT_CONFLICT = 5,    /* another CUPTI subscriber (torch.profiler) */
	AGENT_CUPTI_ERROR = 6, /* other CUPTI failure, see cupti_err */
	AGENT_ACTIVE = 7,      /* collecting and emitting */
	AGENT_STOPPED = 8,     /* was active, now disabled */
	AGENT_ORPHANED = 9,    /* tbpf exited without STOP: CUPTI released by the agent */
};

#define TBPF_AGENT_MAGIC 0x74627066676e7431ULL /* "1tngfpbt" */

struct rec_gpu_status {
	struct rec_hdr h;
	__u32 pid;
	__u16 kind;        /* GPU_STATUS */
	__u16 state;       /* enum tbpf_agent_state */
	__u64 magic;       /* TBPF_AGENT_MAGIC */
	__u32 version;     /* TBPF_ABI_VERSION of the agent */
	__s32 cupti_err;   /* last CUptiResult/CUresult, 0 = none */
	__u32 devices;     /* device count when known */
	__u32 generation;  /* bumps at every start request served */
	__u64 records;     /* records emitted */
	__u64 dropped;     /* cuptiActivityGetNumDroppedRecords sum */
	__u64 invalid;     /* records with bad times or unknown kinds */
	__u64 ratelimited; /* records discarded by the agent's rate limit */
	__u64 buffers;     /* CUPTI buffers completed */
	__u32 served_seq;  /* last tbpf_agent_ctl.seq the agent acted on */
	__u32 ctl_thread;  /* 1 while its control thread runs (0: it ended after
			    * releasing CUPTI; tbpf_agent_restart() starts it) */
	char detail[56];   /* short human-readable reason */
};

/* Control word the tool writes into the agent (exported symbol
 * tbpf_agent_ctl; process_vm_writev).  The agent polls it. */
enum tbpf_agent_request { AGENT_REQ_NONE = 0, AGENT_REQ_START = 1, AGENT_REQ_STOP = 2,
			  AGENT_REQ_CHANNEL = 3 /* offer a fresh owner channel in the
						 * exported tbpf_agent_chan */ };

/* Size of the agent's exported `char tbpf_agent_cupti_path[]`: the
 * libcupti tbpf names (--cupti), written before START; empty = the
 * agent's own choice (agent/cupti_pick.h). */
#define TBPF_AGENT_CUPTI_PATH_MAX 4096

struct tbpf_agent_ctl {
	__u64 magic;        /* TBPF_AGENT_MAGIC, set by the agent */
	__u32 request;      /* enum tbpf_agent_request, written by tbpf */
	__u32 seq;          /* tbpf bumps it with every request */
	__u32 max_rate;     /* records per second, 0 = agent default */
	__s32 owner;        /* tbpf's pid in its own pid namespace, for messages;
			     * the agent watches its owner through the channel
			     * in its exported `struct tbpf_owner_chan
			     * tbpf_agent_chan` and releases CUPTI when it closes */
};

#endif /* TBPF_ABI_GPU_H */
