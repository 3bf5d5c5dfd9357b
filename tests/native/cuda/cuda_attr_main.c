/* cuda_attr_main.c - test target for launch attribution: waits for SIGUSR1,
 * then runs K rounds of fake ops from libtorch_cpu-fake.so (which launch
 * kernels through libcudart) plus one launch outside any op, and exits. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* C++ names of the library's ops, declared by their mangled symbols */
int _ZN2at4_ops9fake_conv4callEv(void);
int _ZN2at4_ops8fake_add4callEv(void);
int _ZN2at4_ops9fake_sync4callEv(void);
int fake_plain_launch(void);

static volatile sig_atomic_t go;
static void on_go(int sig) { go = 1; }

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 3;
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
	for (int i = 0; i < k; i++) {
		_ZN2at4_ops9fake_conv4callEv();
		_ZN2at4_ops8fake_add4callEv();
		_ZN2at4_ops9fake_sync4callEv();
		fake_plain_launch();
	}
	printf("done\n");
	fflush(stdout);
	sleep(1);
	return 0;
}
