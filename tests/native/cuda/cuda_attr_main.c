/* cuda_attr_main.c - test target for launch attribution: waits for SIGUSR1,
 * then runs K rounds of fake ops from libtorch_cpu-fake.so (which launch
 * kernels through libcudart) plus one launch outside any op, and exits.
 * `cuda_attr_main K copy [COMM]`: each round also calls aten::fake_copy
 * (one 4096-byte host-to-device and one 1000-byte device-to-host
 * cudaMemcpy); COMM names the process (/proc/self/comm). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* C++ names of the library's ops, declared by their mangled symbols */
int _ZN2at4_ops9fake_conv4callEv(void);
int _ZN2at4_ops8fake_add4callEv(void);
int _ZN2at4_ops9fake_sync4callEv(void);
int _ZN2at4_ops9fake_copy4callEv(void);
int fake_plain_launch(void);

static volatile sig_atomic_t go;
static void on_go(int sig) { go = 1; }

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 3;
	int copy = argc > 2 && !strcmp(argv[2], "copy");
	struct sigaction sa;
	sigset_t none;

	if (argc > 3) {
		FILE *f = fopen("/proc/self/comm", "w");

		if (f) {
			fputs(argv[3], f);
			fclose(f);
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_go;
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	sigemptyset(&none);
	while (!go)
		sigsuspend(&none);
	for (int i = 0; i < k; i++) {
		_ZN2at4_ops9fake_conv4callEv();
		_ZN2at4_ops8fake_add4callEv();
		_ZN2at4_ops9fake_sync4callEv();
		fake_plain_launch();
		if (copy)
			_ZN2at4_ops9fake_copy4callEv();
	}
	printf("done\n");
	fflush(stdout);
	sleep(1);
	return 0;
}
