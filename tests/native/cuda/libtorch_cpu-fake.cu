// libtorch_cpu_fake.cu - test library: functions named like PyTorch's
// at::_ops::<op>::call that launch kernels through libcudart, so launches
// must be attributed to the op on top of the calling thread's op stack.
#include <cuda_runtime.h>

__global__ void conv_kernel(float *x, int n) { if (x && n) x[0] = 1; }
__global__ void add_kernel(float *x, int n) { if (x && n) x[0] += 1; }
__global__ void plain_kernel(float *x, int n) { if (x && n) x[0] = 2; }

static int errors;

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
struct fake_add { static int call(); };
struct fake_conv { static int call(); };
struct fake_sync { static int call(); };
struct fake_copy { static int call(); };

__attribute__((noinline)) int fake_add::call()
{
	launch((const void *)add_kernel, 2, 32);
	asm volatile("" ::: "memory");
	return errors;
}

__attribute__((noinline)) int fake_conv::call()
{
	launch((const void *)conv_kernel, 8, 256);
	fake_add::call();
	launch((const void *)conv_kernel, 8, 256);
	asm volatile("" ::: "memory");
	return errors;
}

__attribute__((noinline)) int fake_sync::call()
{
	errors += cudaStreamSynchronize(0) != cudaSuccess;
	asm volatile("" ::: "memory");
	return errors;
}
/* one host-to-device copy of 4096 bytes and one device-to-host of 1000
 * (they fail without a device; the probes see the calls all the same) */
__attribute__((noinline)) int fake_copy::call()
{
	static char host[4096];

	errors += cudaMemcpy((void *)0x1000, host, 4096, cudaMemcpyHostToDevice) != cudaSuccess;
	errors += cudaMemcpy(host, (void *)0x1000, 1000, cudaMemcpyDeviceToHost) != cudaSuccess;
	asm volatile("" ::: "memory");
	return errors;
}
} // namespace _ops
} // namespace at

extern "C" __attribute__((noinline)) int fake_plain_launch(void)
{
	launch((const void *)plain_kernel, 1, 1);
	asm volatile("" ::: "memory");
	return errors;
}
