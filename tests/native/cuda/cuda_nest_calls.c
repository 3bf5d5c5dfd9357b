/* cuda_nest_calls.c - test target: K rounds of runtime calls into
 * libcudart.so.99 (fake_cudart.c) that call the driver underneath, plus
 * direct driver calls from the same frame and from a deeper one.  Waits for
 * SIGUSR1, runs, exits. */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { unsigned x, y, z; } dim3;
int cudaStreamSynchronize(void *stream);
int cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
		     unsigned long shmem, void *stream);
int cudaDeviceSynchronize(void);

static volatile sig_atomic_t go;
static void on_go(int sig) { go = 1; }

__attribute__((noinline)) static int deeper(CUstream s)
{
	int r = cuStreamSynchronize(s);

	asm volatile("" ::: "memory");
	return r;
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 3, errors = 0;
	CUstream s = (CUstream)0x9000;
	struct sigaction sa;
	sigset_t none;
	dim3 g = { 2, 3, 4 }, b = { 32, 1, 1 };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_go;
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	sigemptyset(&none);
	while (!go)
		sigsuspend(&none);
	for (int i = 0; i < k; i++) {
		errors += cudaStreamSynchronize(s);
		errors += cudaLaunchKernel((const void *)0x4242000, g, b, NULL, 8, s);
		errors += cudaDeviceSynchronize();
		errors += cuStreamSynchronize(s) != 0;   /* direct, same frame */
		errors += deeper(s) != 0;                /* direct, deeper frame */
		errors += cuLaunchKernel((CUfunction)0x5151000, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL) != 0;
	}
	printf("done errors=%d\n", errors);
	fflush(stdout);
	sleep(1);
	return 0;
}
