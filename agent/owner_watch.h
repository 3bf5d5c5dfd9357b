/* owner_watch.h - both in-process agents (inproc.c, tbpf_agent.c) watch
 * the tbpf that started them through a pidfd, to undo what they set up
 * in the target when that tbpf dies (SIGKILL, crash) without asking.
 * A pidfd turns readable when its process exits; it never names another
 * process later, as a recycled pid number could. */
#ifndef TBPF_OWNER_WATCH_H
#define TBPF_OWNER_WATCH_H
#include <poll.h>
#include <unistd.h>
#include <sys/syscall.h>

/* A pidfd on tbpf's pid, or -1 (no such process: tbpf already gone, or a
 * pid from another pid namespace). */
static inline int owner_watch_open(int pid)
{
	return pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
}

/* 1 once the owner exited (or fd is bad), 0 while it runs; never blocks. */
static inline int owner_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&p, 1, 0) != 0;
}
#endif
