/* fake_cudart.c - test library libcudart.so.99: runtime entry points that,
 * like the real libcudart, call the driver (libcuda.so.1) underneath.  Used
 * to check that one user call is counted once (the nested driver call is
 * skipped) while direct driver calls still count. */
#include <cuda.h>

typedef int cudaError_t;
typedef struct { unsigned x, y, z; } dim3;

cudaError_t cudaStreamSynchronize(void *stream)
{
	int r = cuStreamSynchronize((CUstream)stream);

	asm volatile("" ::: "memory");   /* not a tail call */
	return r ? 1 : 0;
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
			     unsigned long shmem, void *stream)
{
	int r = cuLaunchKernel((CUfunction)func, grid.x, grid.y, grid.z, block.x, block.y,
			       block.z, (unsigned)shmem, (CUstream)stream, args, 0);

	asm volatile("" ::: "memory");
	return r ? 1 : 0;
}

/* the driver reached by a tail call */
cudaError_t cudaDeviceSynchronize(void)
{
	return cuCtxSynchronize();
}
