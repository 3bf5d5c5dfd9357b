/* abi/cuda.h - CUDA host records, shared by BPF (bpf/cuda.bpf.h) and user
 * space: the probed CUDA runtime and driver APIs and what a launch, copy or
 * set, synchronization and allocation record holds (REC_LAUNCH, REC_MEMOP,
 * REC_SYNC, REC_ALLOC).
 */
#ifndef TBPF_ABI_CUDA_H
#define TBPF_ABI_CUDA_H

#include "core.h"

/* CUDA API ids (rec_launch.api, rec_memop.api, ...). */
enum tbpf_cuda_api {
	CU_API_NONE = 0,
	CU_cudaLaunchKernel, CU_cudaLaunchKernel_ptsz, CU_cudaLaunchKernelExC,
	CU_cudaLaunchKernelExC_ptsz, CU_cudaLaunchCooperativeKernel,
	CU_cudaLaunchCooperativeKernel_ptsz, CU_cudaGraphLaunch,
	CU_cudaGraphLaunch_ptsz, CU_cuLaunchKernel, CU_cuLaunchKernel_ptsz,
	CU_cuLaunchKernelEx, CU_cuLaunchKernelEx_ptsz, CU_cuGraphLaunch,
	CU_cuGraphLaunch_ptsz,
	CU_cudaMemcpy, CU_cudaMemcpyAsync, CU_cudaMemcpyAsync_ptsz,
	CU_cudaMemsetAsync, CU_cudaMemsetAsync_ptsz, CU_cudaMemset,
	CU_cuMemcpyAsync, CU_cuMemcpyHtoDAsync, CU_cuMemcpyDtoHAsync,
	CU_cuMemcpyDtoDAsync, CU_cuMemsetD8Async, CU_cuMemsetD16Async,
	CU_cuMemsetD32Async,
	CU_cudaStreamSynchronize, CU_cudaDeviceSynchronize,
	CU_cudaEventSynchronize, CU_cuStreamSynchronize, CU_cuCtxSynchronize,
	CU_cuEventSynchronize,
	CU_cudaMalloc, CU_cudaFree, CU_cudaMallocAsync, CU_cudaFreeAsync,
	CU_cuMemAlloc, CU_cuMemFree, CU_cuMemAllocAsync, CU_cuMemFreeAsync,
	CU_API_MAX
};

struct rec_launch {
	struct rec_hdr h;
	__u32 pid;
	__u32 api;       /* enum tbpf_cuda_api */
	__u64 func;      /* host stub, CUfunction, or graph exec */
	__u64 stream;
	__u32 grid[3];
	__u32 block[3];
	__u32 shmem;
	__u32 op_id;     /* op on top of the thread's stack, 0 = none */
	__u32 stack_id;  /* Python stack of the outermost op */
	__u32 depth;
	__u64 dur_ns;    /* host time in the call (written at its
			  * return; 0 = not timed); absent in records of
			  * REC_LAUNCH_V1_SIZE */
};
/* Records before return timing (older captures): no dur_ns, not timed. */
#define REC_LAUNCH_V1_SIZE 80

/* rec_memop.flags */
enum tbpf_memop_flags {
	MEMOP_TIMED = 1 << 0,   /* dur_ns is the call's host time (every copy and set since return timing;
				 * before it only cudaMemcpy and cudaMemset) */
};

enum tbpf_copy_dir { CP_UNKNOWN = 0, CP_HTOD, CP_DTOH, CP_DTOD, CP_HTOH, CP_SET };

struct rec_memop {
	struct rec_hdr h;
	__u32 pid;
	__u32 api;
	__u64 bytes;
	__u64 stream;
	__u64 dur_ns;    /* host time in the call (MEMOP_TIMED) */
	__u32 dir;       /* enum tbpf_copy_dir */
	__u32 op_id;
	__u32 stack_id;
	__u32 flags;     /* enum tbpf_memop_flags */
};

struct rec_sync {
	struct rec_hdr h;  /* ts_ns = start of the wait */
	__u32 pid;
	__u32 api;
	__u64 dur_ns;
	__u64 handle;      /* stream or event */
	__u32 op_id;
	__u32 stack_id;
	__u32 ret;         /* the API's return code */
	__u32 pad;
};

struct rec_alloc {
	struct rec_hdr h;
	__u32 pid;
	__u32 api;
	__u64 ptr;
	__u64 bytes;       /* 0 for frees */
	__u32 op_id;
	__u32 stack_id;
	__u32 ret;         /* the API's return code */
	__u32 pad;
	__u64 dur_ns;      /* host time in the call (0 = not
			    * timed); absent in records of REC_ALLOC_V1_SIZE */
};
#define REC_ALLOC_V1_SIZE 56

#endif /* TBPF_ABI_CUDA_H */
