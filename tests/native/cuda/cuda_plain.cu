// cuda_plain.cu - test target for issue 18: a plain CUDA program (host code
// in C style, libcudart linked as a shared library, no libtorch) that
// allocates, copies, launches and synchronizes a known number of times and
// prints how often it called each API, as JSON on its last line:
//   done {"cudaMalloc": 6, "cudaLaunchKernel": 12, ...}
// Without a GPU every call fails with an error code, yet each is a real
// call into libcudart (the host API entry and exit happen).  Before it, a
// line per worker thread: its tid and the CLOCK_MONOTONIC ns it ran, the
// wall time its calls' host times must fit in:
//   thread {"tid": 1234, "begin_ns": ..., "end_ns": ...}
//   cuda_plain [--wait] ITERS [THREADS]
//     --wait: print "ready PID" and wait for SIGUSR1 before the first call
//     (tbpf --pid attaches in between); else start at once (tbpf run).
#include <cuda_runtime.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

__global__ void plain_saxpy(float *y, const float *x, float a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] += a * x[i];
}

__global__ void plain_fill(float *y, float v, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = v;
}

enum { MALLOC, FREE, MEMCPY, MEMCPY_ASYNC, MEMSET, LAUNCH, STREAM_SYNC, DEVICE_SYNC, NAPI };
static const char *const names[NAPI] = {
	"cudaMalloc", "cudaFree", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemset",
	"cudaLaunchKernel", "cudaStreamSynchronize", "cudaDeviceSynchronize",
};
static unsigned long counts[NAPI];
static unsigned long saxpy_launches, fill_launches;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int iters;

static volatile sig_atomic_t go;
static void on_go(int sig) { (void)sig; go = 1; }

static void count(int api, unsigned long n)
{
	pthread_mutex_lock(&mu);
	counts[api] += n;
	pthread_mutex_unlock(&mu);
}

/* One iteration: the calls of a tiny training-style step. */
static void step(float *host, size_t bytes)
{
	float *x = NULL, *y = NULL;
	int n = (int)(bytes / sizeof(float));
	float a = 2.0f;
	void *sargs[] = { &y, &x, &a, &n };
	float v = 1.0f;
	void *fargs[] = { &y, &v, &n };
	dim3 grid((n + 127) / 128), block(128);

	cudaMalloc((void **)&x, bytes);
	cudaMalloc((void **)&y, bytes);
	count(MALLOC, 2);
	cudaMemcpy(x, host, bytes, cudaMemcpyHostToDevice);
	count(MEMCPY, 1);
	cudaMemset(y, 0, bytes);
	count(MEMSET, 1);
	cudaLaunchKernel((const void *)plain_fill, grid, block, fargs, 0, 0);
	for (int k = 0; k < 3; k++)
		cudaLaunchKernel((const void *)plain_saxpy, grid, block, sargs, 0, 0);
	count(LAUNCH, 4);
	pthread_mutex_lock(&mu);
	fill_launches += 1;
	saxpy_launches += 3;
	pthread_mutex_unlock(&mu);
	cudaMemcpyAsync(host, y, bytes, cudaMemcpyDeviceToHost, 0);
	count(MEMCPY_ASYNC, 1);
	cudaStreamSynchronize(0);
	count(STREAM_SYNC, 1);
	cudaDeviceSynchronize();
	count(DEVICE_SYNC, 1);
	cudaFree(x);
	cudaFree(y);
	count(FREE, 2);
}

struct span { long tid; unsigned long long begin_ns, end_ns; };

static unsigned long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static void *worker(void *arg)
{
	struct span *sp = (struct span *)arg;
	float *host = (float *)calloc(1024, sizeof(float));

	sp->tid = (long)syscall(SYS_gettid);
	sp->begin_ns = mono_ns();
	for (int i = 0; i < iters; i++)
		step(host, 1024 * sizeof(float));
	sp->end_ns = mono_ns();
	free(host);
	return NULL;
}

int main(int argc, char **argv)
{
	int a = 1, threads = 1;
	pthread_t tid[16];
	struct span spans[16];

	if (argc > 1 && !strcmp(argv[1], "--wait")) {
		struct sigaction sa;
		sigset_t none;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_go;
		sigaction(SIGUSR1, &sa, NULL);
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		sigemptyset(&none);
		while (!go)
			sigsuspend(&none);
		a++;
	}
	iters = argc > a ? atoi(argv[a]) : 10;
	threads = argc > a + 1 ? atoi(argv[a + 1]) : 1;
	if (iters <= 0 || threads <= 0 || threads > 16) {
		fprintf(stderr, "usage: cuda_plain [--wait] ITERS [THREADS<=16]\n");
		return 2;
	}
	for (int t = 0; t < threads; t++)
		pthread_create(&tid[t], NULL, worker, &spans[t]);
	for (int t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	for (int t = 0; t < threads; t++)
		printf("thread {\"tid\": %ld, \"begin_ns\": %llu, \"end_ns\": %llu}\n", spans[t].tid,
		       spans[t].begin_ns, spans[t].end_ns);
	printf("done {");
	for (int i = 0; i < NAPI; i++)
		printf("%s\"%s\": %lu", i ? ", " : "", names[i], counts[i]);
	printf(", \"kernels\": {\"plain_saxpy(float*, float const*, float, int)\": %lu, "
	       "\"plain_fill(float*, float, int)\": %lu}}\n", saxpy_launches, fill_launches);
	return 0;
}
