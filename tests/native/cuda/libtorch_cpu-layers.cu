// libtorch_cpu-layers.cu - test library for CUDA attribution to layers:
// functions named like PyTorch's at::_ops::<op>::call, called through
// ctypes from the forward() of real torch nn.Modules
// (tests/workloads/cuda_layers_model.py), that launch known kernels,
// copy and synchronize through the real libcudart.  Every call fails
// without a GPU; the probes fire all the same.  The file name makes tbpf
// take it for a libtorch (procmaps_is_libtorch: "libtorch_cpu-<x>.so").
#include <cuda_runtime.h>

__global__ void layer_conv_kernel(float *x, int n) { if (x && n) x[0] = 1; }
__global__ void layer_head_kernel(float *x, int n) { if (x && n) x[0] = 2; }
__global__ void layer_norm_kernel(float *x, int n) { if (x && n) x[0] += 1; }

static int errors;
static char host_buf[1 << 16];

__attribute__((noinline)) static void launch(const void *k, unsigned gx, unsigned bx)
{
	float *x = 0;
	int n = 1;
	void *args[] = { &x, &n };

	errors += cudaLaunchKernel(k, dim3(gx), dim3(bx), args, 0, 0) != cudaSuccess;
	asm volatile("" ::: "memory");   /* no tail call: keep this frame */
}

namespace at {
namespace _ops {
struct lkconv { static int call(int n); };
struct lkhead { static int call(int n); };
struct lknorm { static int call(int n); };
struct lkcopy { static int call(long bytes); };
struct lksync { static int call(); };

/* n launches of layer_conv_kernel, grid 4, block 128 */
__attribute__((noinline)) int lkconv::call(int n)
{
	for (int i = 0; i < n; i++)
		launch((const void *)layer_conv_kernel, 4, 128);
	asm volatile("" ::: "memory");
	return errors;
}

__attribute__((noinline)) int lkhead::call(int n)
{
	for (int i = 0; i < n; i++)
		launch((const void *)layer_head_kernel, 2, 64);
	asm volatile("" ::: "memory");
	return errors;
}

__attribute__((noinline)) int lknorm::call(int n)
{
	for (int i = 0; i < n; i++)
		launch((const void *)layer_norm_kernel, 1, 32);
	asm volatile("" ::: "memory");
	return errors;
}

/* one host-to-device copy of `bytes` (at most sizeof(host_buf)) */
__attribute__((noinline)) int lkcopy::call(long bytes)
{
	void *dev = (void *)0x7f0000000000ULL;

	if (bytes > (long)sizeof(host_buf))
		bytes = sizeof(host_buf);
	errors += cudaMemcpyAsync(dev, host_buf, (size_t)bytes, cudaMemcpyHostToDevice, 0) !=
		  cudaSuccess;
	asm volatile("" ::: "memory");
	return errors;
}

__attribute__((noinline)) int lksync::call()
{
	errors += cudaStreamSynchronize(0) != cudaSuccess;
	asm volatile("" ::: "memory");
	return errors;
}
} // namespace _ops
} // namespace at
