// forced_unwind.cpp - pthread_cancel forced unwinds through profiled op frames.
//
// A worker thread calls at::from_file() on a FIFO nobody writes to: it
// blocks in open() inside MapAllocator, under at::_ops::from_file::call and
// ::redispatch (checked with gdb).  The main thread waits until the worker
// sits in the openat syscall, cancels it (glibc's forced unwind, the
// exception-like unwind through every frame, libtorch's included), joins
// it, and runs ordinary ops in between.  No Python: a Python thread
// cancelled inside an op dies holding the GIL and hangs the interpreter,
// with or without a profiler.  Built by forced_unwind.py against the
// torch whose libraries the target maps.
//
// Protocol as wl_common.py: READY pid=N, SIGUSR1 (or --go-file PATH), run
// --cycles N, RESULT cycles=N canceled=C checksum=X, exit 0.
#include <ATen/ATen.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

static std::atomic<long> worker_tid{0};

static void *worker(void *arg)
{
	worker_tid = syscall(SYS_gettid);
	at::Tensor t = at::from_file((const char *)arg, false, 4, at::kFloat);
	std::fprintf(stderr, "forced_unwind: from_file returned (nobody should write the FIFO)\n");
	return nullptr;
}

// True once thread tid is blocked in openat (syscall 257 on x86-64).
static bool in_openat(long tid)
{
	char path[64];
	std::snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall", tid);
	FILE *f = std::fopen(path, "r");
	if (!f)
		return false;
	long nr = -1;
	int n = std::fscanf(f, "%ld", &nr);
	std::fclose(f);
	return n == 1 && nr == 257;
}

int main(int argc, char **argv)
{
	int cycles = 20;
	const char *go_file = nullptr;
	for (int i = 1; i < argc; i++) {
		if (!std::strcmp(argv[i], "--cycles") && i + 1 < argc)
			cycles = std::atoi(argv[++i]);
		else if (!std::strcmp(argv[i], "--go-file") && i + 1 < argc)
			go_file = argv[++i];
		else {
			std::fprintf(stderr, "usage: %s [--cycles N] [--go-file PATH]\n", argv[0]);
			return 2;
		}
	}
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, nullptr);

	std::string fifo = "/tmp/tbpf-forced-unwind." + std::to_string(getpid());
	unlink(fifo.c_str());
	if (mkfifo(fifo.c_str(), 0600)) {
		std::perror("forced_unwind: mkfifo");
		return 1;
	}
	at::Tensor acc = at::zeros({4}, at::kDouble);
	acc = acc.add(at::ones({4}, at::kDouble)); // warm-up: libtorch loaded and used

	std::printf("READY pid=%d\n", getpid());
	std::fflush(stdout);
	if (go_file) {
		struct stat st;
		while (stat(go_file, &st))
			usleep(5000);
	} else {
		int sig;
		sigwait(&usr1, &sig);
	}

	int canceled = 0;
	for (int i = 0; i < cycles; i++) {
		pthread_t th;
		worker_tid = 0;
		if (pthread_create(&th, nullptr, worker, (void *)fifo.c_str())) {
			std::perror("forced_unwind: pthread_create");
			return 1;
		}
		for (int w = 0; w < 5000 && !(worker_tid && in_openat(worker_tid)); w++)
			usleep(1000);
		pthread_cancel(th);
		void *ret = nullptr;
		pthread_join(th, &ret);
		canceled += ret == PTHREAD_CANCELED;
		acc = acc.mul(1.5).add(at::full({4}, (double)i, at::kDouble));
	}
	unlink(fifo.c_str());
	std::printf("RESULT cycles=%d canceled=%d checksum=%.12e\n", cycles, canceled,
		    acc.sum().item<double>());
	return 0;
}
