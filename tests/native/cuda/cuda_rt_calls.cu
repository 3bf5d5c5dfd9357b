// cuda_rt_calls.cu - test target: a known sequence of CUDA runtime calls
// (every call fails here without a GPU, but the probes fire).
//   cuda_rt_calls            wait for SIGUSR1, run the sequence, exit
//   cuda_rt_calls bench N    time N cudaLaunchKernel calls (ns per call)
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__global__ void vec_add(float *out, const float *in, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] += in[i];
}

namespace tbpf_test {
template <typename T> __global__ void scale(T *x, T s, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= s;
}
template __global__ void scale<float>(float *, float, int);
}

__global__ void chevron_kernel(int *p)
{
	if (p)
		*p = 1;
}

static volatile sig_atomic_t go;
static void on_go(int sig) { go = 1; }

static void wait_go(void)
{
	sigset_t none;
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_go;
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	sigemptyset(&none);
	while (!go)
		sigsuspend(&none);
}

static int errors;
static void chk(cudaError_t e) { errors += e != cudaSuccess; }

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	float *out = NULL, *in = NULL, s = 2.0f;
	int n = 1000;
	void *args[] = { &out, &in, &n };
	void *sargs[] = { &out, &s, &n };
	cudaStream_t st1 = (cudaStream_t)0x5000, st2 = (cudaStream_t)0x6000;
	static char host[8192];
	void *dptr[3], *opaque;

	if (argc == 3 && !strcmp(argv[1], "bench")) {
		long N = atol(argv[2]);
		double t0;

		/* warm up: the first call initializes (and fails) */
		cudaLaunchKernel((const void *)vec_add, dim3(1), dim3(1), args, 0, 0);
		if (argc > 3)
			return 0;
		wait_go();
		t0 = now_ns();
		for (long i = 0; i < N; i++)
			cudaLaunchKernel((const void *)vec_add, dim3(1), dim3(1), args, 0, 0);
		printf("ns_per_launch %.1f\n", (now_ns() - t0) / N);
		return 0;
	}
	opaque = malloc(64);
	printf("vec_add %p scale %p chevron %p opaque %p\n", (void *)vec_add,
	       (void *)tbpf_test::scale<float>, (void *)chevron_kernel, opaque);
	wait_go();

	for (int i = 0; i < 5; i++)
		chk(cudaLaunchKernel((const void *)vec_add, dim3(4, 2, 1), dim3(128, 1, 1), args, 0, 0));
	for (int i = 0; i < 3; i++)
		chk(cudaLaunchKernel((const void *)tbpf_test::scale<float>, dim3(7, 1, 1),
				     dim3(32, 4, 2), sargs, 256, st1));
	{
		cudaLaunchConfig_t cfg;

		memset(&cfg, 0, sizeof(cfg));
		cfg.gridDim = dim3(9, 8, 7);
		cfg.blockDim = dim3(64, 2, 1);
		cfg.dynamicSmemBytes = 1024;
		cfg.stream = st2;
		for (int i = 0; i < 2; i++)
			chk(cudaLaunchKernelExC(&cfg, (const void *)vec_add, args));
	}
	chevron_kernel<<<dim3(2, 2, 2), dim3(16, 16, 1)>>>(NULL);
	/* a heap address stands for an opaque cudaKernel_t handle */
	chk(cudaLaunchKernel(opaque, dim3(3, 3, 3), dim3(8, 8, 8), args, 64, st2));

	for (int i = 0; i < 4; i++)
		chk(cudaMemcpyAsync(dptr, host, 4096, cudaMemcpyHostToDevice, st1));
	for (int i = 0; i < 2; i++)
		chk(cudaMemcpyAsync(host, dptr, 1000, cudaMemcpyDeviceToHost, st1));
	chk(cudaMemcpyAsync(dptr, dptr, 333, cudaMemcpyDeviceToDevice, st2));
	for (int i = 0; i < 3; i++)
		chk(cudaMemsetAsync(dptr, 0, 777, st2));
	chk(cudaMemcpy(dptr, host, 2048, cudaMemcpyHostToDevice));
	chk(cudaMemcpyAsync(dptr, host, 55, cudaMemcpyDefault, st1));
	chk(cudaGraphLaunch((cudaGraphExec_t)0x77000, st1));

	for (int i = 0; i < 2; i++)
		chk(cudaStreamSynchronize(st1));
	chk(cudaDeviceSynchronize());
	chk(cudaEventSynchronize((cudaEvent_t)0x88000));

	chk(cudaMalloc(&dptr[0], 1 << 20));
	chk(cudaMalloc(&dptr[1], 2 << 20));
	chk(cudaMalloc(&dptr[2], 3 << 20));
	chk(cudaFree((void *)0x7000000));
	chk(cudaMallocAsync(&dptr[0], 4096, st2));
	chk(cudaFreeAsync((void *)0x7100000, st2));

	printf("done errors=%d\n", errors);
	fflush(stdout);
	sleep(1);   /* stay mapped while the tracer names the kernels */
	return 0;
}
