/* cuda_late_load.c - test target: maps libcudart only after the tracer
 * attached.  Waits for SIGUSR1, dlopens argv[1] (a libcudart), prints
 * "loaded", waits for SIGUSR2, then launches late_kernel_stub 5 times with
 * grid (5,1,1) block (64,1,1) through the freshly loaded library. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct { unsigned x, y, z; } dim3;
typedef int (*launch_fn)(const void *, dim3, dim3, void **, size_t, void *);

static volatile sig_atomic_t go1, go2;
static void on_sig(int sig) { if (sig == SIGUSR1) go1 = 1; else go2 = 1; }

__attribute__((noinline)) void late_kernel_stub(void)
{
	asm volatile("");
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	sigset_t none;
	launch_fn launch;
	void *h;
	dim3 g = { 5, 1, 1 }, b = { 64, 1, 1 };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	sigemptyset(&none);
	while (!go1)
		sigsuspend(&none);
	h = dlopen(argc > 1 ? argv[1] : "libcudart.so", RTLD_NOW);
	launch = h ? (launch_fn)dlsym(h, "cudaLaunchKernel") : NULL;
	if (!launch) {
		printf("dlopen failed: %s\n", dlerror());
		return 1;
	}
	printf("loaded\n");
	fflush(stdout);
	while (!go2)
		sigsuspend(&none);
	for (int i = 0; i < 5; i++)
		launch((const void *)late_kernel_stub, g, b, NULL, 0, NULL);
	printf("done\n");
	fflush(stdout);
	sleep(1);
	return 0;
}
