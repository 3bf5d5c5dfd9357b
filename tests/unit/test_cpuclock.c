/* test_cpuclock.c - another process's CPU time, checked against what the
 * process reads itself (CLOCK_PROCESS_CPUTIME_ID, exact for the caller and
 * including its exited threads).  A busy child answers SIGUSR1 with its
 * own clock; each interval measured by cpuclock between two signals must
 * match the child's to 1 ms.  schedstat, which lags a busy thread by up
 * to a 4 ms tick, fails this within a few intervals.  A second case has a
 * thread that spins and exits between two readings: its time must stay
 * in the total. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "cpuclock.h"

static int answer_fd;
static pid_t child;   /* killed by the teardown, should a check fail */

static void on_usr1(int sig)
{
	struct timespec ts;
	uint64_t ns;

	(void)sig;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (write(answer_fd, &ns, sizeof(ns)) != sizeof(ns))
		_exit(9);
}

static void spin_ms(long ms)
{
	struct timespec a, b;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	do
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static void *spinner(void *arg)
{
	spin_ms((long)(intptr_t)arg);
	return NULL;
}

/* child: spin forever, answering SIGUSR1; with a thread, also start one
 * that spins 150 ms and exits, on SIGUSR2 */
static volatile sig_atomic_t start_thread;
static void on_usr2(int sig) { (void)sig; start_thread = 1; }

static pid_t start_child(int fds[2])
{
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		volatile unsigned long x = 0;

		close(fds[0]);
		answer_fd = fds[1];
		signal(SIGUSR1, on_usr1);
		signal(SIGUSR2, on_usr2);
		for (;;) {
			x++;
			if (start_thread) {
				pthread_t t;

				start_thread = 0;
				if (pthread_create(&t, NULL, spinner, (void *)(intptr_t)150) == 0)
					pthread_detach(t);
			}
		}
	}
	close(fds[1]);
	child = pid;
	return pid;
}

static uint64_t child_clock(pid_t pid, int fd)
{
	uint64_t ns = 0;

	kill(pid, SIGUSR1);
	assert_int_equal(read(fd, &ns, sizeof(ns)), sizeof(ns));
	return ns;
}

/* One paired sample: cpuclock's reading, then the child's own clock.
 * This process runs SCHED_FIFO (main), so nothing gets between the two
 * but the signal's delivery, microseconds; under load a normal process
 * could be preempted there while the child runs on. */
static void sample(struct cpuclock *c, pid_t pid, int fd, uint64_t *ours, uint64_t *theirs)
{
	*ours = cpuclock_read(c);
	*theirs = child_clock(pid, fd);
}

static void stop_child(pid_t pid, int fd)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fd);
	child = 0;
}

static int teardown(void **state)
{
	(void)state;
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = 0;
	}
	return 0;
}

/* 12 intervals of 20-50 ms, each measured by cpuclock and by the child;
 * returns how many agree to 1 ms, the others appended to log. */
static int intervals_within_1ms(struct cpuclock *c, pid_t pid, int fd, char *log, size_t cap)
{
	uint64_t a, ca, b, cb;
	size_t len = strlen(log);
	int good = 0;

	sample(c, pid, fd, &a, &ca);
	for (int i = 0; i < 12; i++) {
		usleep(20000 + 7919 * i % 30000);   /* not in step with the tick */
		sample(c, pid, fd, &b, &cb);
		double ours = (double)(b - a) / 1e6, theirs = (double)(cb - ca) / 1e6;

		if (ours - theirs <= 1 && theirs - ours <= 1)
			good++;
		else if (len < cap - 64)
			len += (size_t)snprintf(log + len, cap - len, " [%d: %.3f vs %.3f ms]", i,
						ours, theirs);
		a = b;
		ca = cb;
	}
	return good;
}

/* At least 10 of 12 intervals within 1 ms of the child's own clock, in
 * one of up to three runs of 12.  (Not all 12, and not always the first
 * run: this VM's host now and then stops a vCPU, for a millisecond or
 * two and at times for 8 (one CI run: 9 of 12, one interval 45.9 vs
 * 37.4 ms); the perf clock counts that time as the thread's, the
 * process's own clock, steal time removed, does not.  schedstat, off by
 * up to a 4 ms tick at either end, fails a run of 12 within a few
 * intervals, every run.) */
static void test_intervals_match_the_process(void **state)
{
	int fds[2];
	pid_t pid = start_child(fds);
	struct cpuclock c;
	int best = 0, run;
	char log[1024] = "";

	(void)state;
	usleep(50000);
	assert_int_equal(cpuclock_open(&c, pid), 0);
	for (run = 0; run < 3 && best < 10; run++) {
		int good;

		if (run)
			snprintf(log + strlen(log), sizeof(log) - strlen(log), " | run %d:", run + 1);
		good = intervals_within_1ms(&c, pid, fds[0], log, sizeof(log));
		if (good > best)
			best = good;
	}
	if (best < 10)
		fail_msg("in 3 runs of 12 intervals, at most %d within 1 ms of the process's own "
			 "clock:%s", best, log);
	cpuclock_close(&c);
	stop_child(pid, fds[0]);
}

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One run of the exited-thread case: a thread that spins 150 ms starts
 * after the first reading and has exited by the second.  Its first
 * milliseconds before cpuclock found it are not counted (counting starts
 * when a thread is found), so ours may be short of the process's own
 * clock by at most the wall time from its start to the reading that
 * found it (about 60 ms, more on a loaded machine), and never over it by
 * more than 1 ms.  Writes the two intervals (ms) to *ours, *theirs and
 * that wall time to *unfound. */
static bool exited_thread_run(double *ours, double *theirs, double *unfound)
{
	int fds[2];
	pid_t pid = start_child(fds);
	struct cpuclock c;
	uint64_t a, ca, b, cb;

	usleep(50000);
	assert_int_equal(cpuclock_open(&c, pid), 0);
	sample(&c, pid, fds[0], &a, &ca);
	*unfound = mono_ms();
	kill(pid, SIGUSR2);
	usleep(60000);
	(void)cpuclock_read(&c);   /* the thread is running: found here */
	*unfound = mono_ms() - *unfound;
	usleep(400000);            /* ... and has exited by now */
	sample(&c, pid, fds[0], &b, &cb);
	*ours = (double)(b - a) / 1e6;
	*theirs = (double)(cb - ca) / 1e6;
	cpuclock_close(&c);
	stop_child(pid, fds[0]);
	return *ours <= *theirs + 1 && *ours >= *theirs - *unfound - 1 && *theirs > 150 && *ours > 150;
}

/* Up to three runs, as test_intervals_match_the_process: the host's
 * stopping a vCPU is time the perf clock counts and the process's own
 * clock does not (one CI run: cpuclock 550.4 ms, as always here,
 * against the process's 493.0, 117 ms below its usual 610).  A thread
 * lost or counted twice (150 ms) fails every run. */
static void test_exited_thread_stays_counted(void **state)
{
	char log[512] = "";
	double ours, theirs, unfound;
	bool ok = false;

	(void)state;
	for (int run = 0; run < 3 && !ok; run++) {
		ok = exited_thread_run(&ours, &theirs, &unfound);
		snprintf(log + strlen(log), sizeof(log) - strlen(log),
			 "%s cpuclock %.3f ms, the process itself %.3f ms (thread unfound for %.1f ms)",
			 run ? ";" : "", ours, theirs, unfound);
	}
	if (!ok)
		fail_msg("in 3 runs:%s", log);
}

static void test_gone(void **state)
{
	struct cpuclock c;
	pid_t pid = fork();

	(void)state;
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	assert_int_equal(cpuclock_open(&c, pid), -ESRCH);
	cpuclock_close(&c);
	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	usleep(20000);
	assert_int_equal(cpuclock_open(&c, pid), 0);
	assert_true(cpuclock_read(&c) > 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(cpuclock_read(&c), 0);
	cpuclock_close(&c);
}

int main(void)
{
	struct sched_param sp = { .sched_priority = 1 };

	/* children start as normal processes */
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp))
		fprintf(stderr, "test_cpuclock: no SCHED_FIFO (%s): a loaded machine may fail it\n",
			strerror(errno));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_intervals_match_the_process, teardown),
		cmocka_unit_test_teardown(test_exited_thread_stays_counted, teardown),
		cmocka_unit_test(test_gone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
