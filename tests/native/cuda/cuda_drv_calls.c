/* cuda_drv_calls.c - test target: a known sequence of CUDA driver API calls
 * through libcuda.so.1 (the toolkit's stub library here: every call fails,
 * the probes fire).  Waits for SIGUSR1, runs the sequence, exits. */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t go;
static void on_go(int sig) { go = 1; }

int main(void)
{
	CUfunction f1 = (CUfunction)0xabc000, f2 = (CUfunction)0xdef000;
	CUstream s1 = (CUstream)0x7000, s2 = (CUstream)0x8000;
	CUdeviceptr d[2];
	static char host[16384];
	struct sigaction sa;
	CUlaunchConfig cfg;
	sigset_t none;
	int errors = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_go;
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	sigemptyset(&none);
	while (!go)
		sigsuspend(&none);

	for (int i = 0; i < 4; i++)
		errors += cuLaunchKernel(f1, 3, 2, 1, 64, 1, 1, 128, s1, NULL, NULL) != 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = 5; cfg.gridDimY = 6; cfg.gridDimZ = 7;
	cfg.blockDimX = 32; cfg.blockDimY = 8; cfg.blockDimZ = 2;
	cfg.sharedMemBytes = 4096;
	cfg.hStream = s2;
	errors += cuLaunchKernelEx(&cfg, f2, NULL, NULL) != 0;
	for (int i = 0; i < 2; i++)
		errors += cuMemcpyHtoDAsync(0x100000, host, 5000, s1) != 0;
	errors += cuMemcpyDtoHAsync(host, 0x100000, 6000, s1) != 0;
	errors += cuMemcpyDtoDAsync(0x100000, 0x200000, 7000, s2) != 0;
	errors += cuMemsetD32Async(0x100000, 0, 100, s2) != 0;
	errors += cuMemsetD8Async(0x100000, 0, 11, s2) != 0;
	for (int i = 0; i < 3; i++)
		errors += cuStreamSynchronize(s1) != 0;
	errors += cuCtxSynchronize() != 0;
	errors += cuMemAlloc(&d[0], 1 << 16) != 0;
	errors += cuMemAlloc(&d[1], 1 << 17) != 0;
	errors += cuMemFree(0x100000) != 0;
	printf("done errors=%d\n", errors);
	fflush(stdout);
	sleep(1);
	return 0;
}
