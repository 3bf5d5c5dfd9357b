/* cpuclock.h - control stage: another process's CPU time, read up to date.
 *
 * /proc/PID/task/TID/schedstat is brought up to date only at ticks and
 * context switches, so a busy thread's figure lags by up to a tick (4 ms
 * at HZ=250, 1.9 ms on average, measured).  The budget's phases last tens
 * of milliseconds, and its readings are not random in that lag: a reading
 * taken just after probes went in is fresh (the attach makes the target
 * fault on the patched page, and sleep), one taken before they go out is
 * not, so the lag biased every phase's CPU low.  A task-clock perf event
 * per thread is read up to date (the kernel asks the thread's CPU).
 *
 * Threads are found by scanning /proc/PID/task at each reading; a thread
 * that exits is read once more and its count kept, its event closed.
 * Where perf events cannot be opened (perf_event_paranoid, no perf) a
 * thread falls back to schedstat. */
#ifndef TBPF_CPUCLOCK_H
#define TBPF_CPUCLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cpuclock_thread {
	pid_t tid;
	int fd;             /* task-clock event, -1: schedstat */
	uint64_t start;     /* schedstat threads found after open: at discovery */
	uint64_t last;      /* its last reading */
	bool seen;          /* in the last scan */
};

struct cpuclock {
	pid_t pid;
	uint64_t base;      /* schedstat total when opened */
	uint64_t gone_ns;   /* counts of exited threads */
	uint64_t last_total;   /* the last reading (readings never go back) */
	struct cpuclock_thread *v;
	size_t n, cap;
};

/* Start measuring pid.  0, or -ESRCH when it is gone. */
int cpuclock_open(struct cpuclock *c, pid_t pid);
/* CPU ns of all of pid's threads, monotonic (an offset from the true total
 * is possible: only differences mean anything); 0 when pid is gone.  When
 * its threads cannot be listed (out of file descriptors), the threads
 * known so far. */
uint64_t cpuclock_read(struct cpuclock *c);
void cpuclock_close(struct cpuclock *c);

#endif /* TBPF_CPUCLOCK_H */
