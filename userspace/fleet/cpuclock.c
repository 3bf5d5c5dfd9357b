/* cpuclock.c - another process's CPU time from task-clock perf events. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include "cpuclock.h"
#include "grow.h"

static uint64_t schedstat_ns(pid_t pid, pid_t tid)
{
	char path[64];
	unsigned long long run = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &run) != 1)
		run = 0;
	fclose(f);
	return run;
}

static int task_clock_open(pid_t tid)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* A thread's count now; its last one when it cannot be read (exited). */
static uint64_t thread_ns(const struct cpuclock *c, struct cpuclock_thread *t)
{
	uint64_t v = 0;

	if (t->fd < 0)
		v = schedstat_ns(c->pid, t->tid);
	else if (read(t->fd, &v, sizeof(v)) != sizeof(v))
		v = 0;
	if (v > t->last)
		t->last = v;
	return t->last > t->start ? t->last - t->start : 0;
}

static struct cpuclock_thread *find(struct cpuclock *c, pid_t tid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].tid == tid)
			return &c->v[i];
	return NULL;
}

/* Mark the threads listed now; add new ones.  -ESRCH when pid is gone. */
static int scan(struct cpuclock *c, bool at_open)
{
	char path[64];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", c->pid);
	if (!(d = opendir(path)))
		return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
	for (size_t i = 0; i < c->n; i++)
		c->v[i].seen = false;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		struct cpuclock_thread *t;

		if (tid <= 0)
			continue;
		if ((t = find(c, tid))) {
			t->seen = true;
			continue;
		}
		if (GROW(c->v, c->n, c->cap, 8))
			break;
		t = &c->v[c->n++];
		t->tid = tid;
		t->seen = true;
		t->start = t->last = 0;
		t->fd = task_clock_open(tid);
		/* counting from now on: the schedstat figure up to now goes
		 * into the base at open (a later thread's earlier CPU is
		 * left out rather than added as a jump) */
		if (at_open && t->fd >= 0)
			c->base += schedstat_ns(c->pid, tid);
		else if (!at_open && t->fd < 0)
			t->start = t->last = schedstat_ns(c->pid, tid);
	}
	closedir(d);
	return 0;
}

int cpuclock_open(struct cpuclock *c, pid_t pid)
{
	int err;

	memset(c, 0, sizeof(*c));
	c->pid = pid;
	err = scan(c, true);
	return err == -ESRCH ? err : 0;
}

uint64_t cpuclock_read(struct cpuclock *c)
{
	uint64_t sum;
	size_t k = 0;

	int err = scan(c, false);

	if (err == -ESRCH)
		return 0;
	if (err)   /* out of fds, say: the threads known so far */
		return c->last_total;
	sum = c->base;
	for (size_t i = 0; i < c->n; i++) {
		struct cpuclock_thread *t = &c->v[i];
		uint64_t ns = thread_ns(c, t);

		if (!t->seen) {   /* exited: its final count stays */
			c->gone_ns += ns;
			if (t->fd >= 0)
				close(t->fd);
			continue;
		}
		sum += ns;
		c->v[k++] = *t;
	}
	c->n = k;
	sum += c->gone_ns;
	if (sum < c->last_total)
		sum = c->last_total;
	c->last_total = sum ? sum : 1;
	return c->last_total;
}

void cpuclock_close(struct cpuclock *c)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].fd >= 0)
			close(c->v[i].fd);
	free(c->v);
	memset(c, 0, sizeof(*c));
}
