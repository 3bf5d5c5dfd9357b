// recrate.cpp - driver of the recording-rate benchmark: T threads call
// at::_ops::bench_outer::call (2 ops = 4 events per call) for S seconds
// after SIGUSR1, then print the call rate.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <pthread.h>
#include <unistd.h>

namespace at {
namespace _ops {
struct bench_outer {
	static long call(long x);
};
} // namespace _ops
} // namespace at

static double seconds = 3;
static volatile long sink;

static double now()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	long n = 0, acc = 0;
	double end = now() + seconds;

	while (true) {
		for (int i = 0; i < 1000; i++)
			acc += at::_ops::bench_outer::call(n + i);
		n += 1000;
		if (now() >= end)
			break;
	}
	sink = acc;
	*(long *)arg = n;
	return nullptr;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	sigset_t set;
	int sig;
	long counts[64] = { 0 };
	pthread_t t[64];
	double t0;
	long total = 0;

	if (argc > 2)
		seconds = atof(argv[2]);
	if (threads < 1 || threads > 64)
		return 2;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, nullptr);
	printf("READY pid=%d\n", getpid());
	fflush(stdout);
	sigwait(&set, &sig);
	t0 = now();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], nullptr, worker, &counts[i]);
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], nullptr);
		total += counts[i];
	}
	printf("RESULT calls=%ld seconds=%.3f calls_per_s=%.0f events_per_s=%.0f\n", total,
	       now() - t0, total / (now() - t0), 4 * total / (now() - t0));
	return 0;
}
