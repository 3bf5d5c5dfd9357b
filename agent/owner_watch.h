/* owner_watch.h - both in-process agents (inproc.c, tbpf_agent.c) watch
 * the tbpf that started them, to undo what they set up in the target when
 * that tbpf dies (SIGKILL, crash) without asking.
 *
 * The watch is a pipe, not a pid: on a CHANNEL request the
 * agent makes one and offers its write end (struct tbpf_owner_chan,
 * bpf/tbpf_abi.h); tbpf takes a copy with pidfd_getfd(2) and says so; at
 * START the agent closes its own write end (owner_accept).  From then on
 * tbpf holds the only write end, and the read end polls POLLHUP exactly
 * when tbpf's copy is closed: tbpf exited, was killed or crashed, in any
 * pid namespace (a tbpf on the host, the job in a container).  Forked
 * children of the target close their copies at once (owner_forked), so a
 * DataLoader worker never keeps an offered write end open.  `tbpf run`
 * passes a read end instead (owner_inherit: the command inherits it). */
#ifndef TBPF_OWNER_WATCH_H
#define TBPF_OWNER_WATCH_H
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "tbpf_abi.h"

struct owner_watch {
	int rfd;           /* read end: the watch */
	int wfd;           /* our write end while offered, -1 once tbpf took it */
	uint64_t offered;  /* CLOCK_MONOTONIC ns of the offer */
};
#define OWNER_WATCH_INIT { -1, -1, 0 }
/* an offer tbpf did not take within this long is withdrawn (that tbpf
 * died between its CHANNEL and START requests) */
#define OWNER_OFFER_NS 10000000000ull

static inline uint64_t owner_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline void owner_drop(struct owner_watch *w)
{
	if (w->wfd >= 0)
		close(w->wfd);
	if (w->rfd >= 0)
		close(w->rfd);
	w->rfd = w->wfd = -1;
}

static inline void owner_unpublish(volatile struct tbpf_owner_chan *pub)
{
	pub->wfd = -1;
	pub->ino = 0;
}

/* CHANNEL: a fresh pipe, its write end offered in *pub (the previous
 * channel, if any, closed).  0, or -1 (no pipe: nothing offered). */
static inline int owner_offer(struct owner_watch *w, volatile struct tbpf_owner_chan *pub)
{
	struct stat st;
	int p[2];

	owner_drop(w);
	owner_unpublish(pub);
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	if (fstat(p[1], &st) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	w->rfd = p[0];
	w->wfd = p[1];
	w->offered = owner_now();
	pub->ino = st.st_ino;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	pub->wfd = p[1];
	return 0;
}

/* 1 once no write end is left (tbpf's copy closed) or nothing is watched;
 * 0 while tbpf holds it.  Never blocks. */
static inline int owner_gone(const struct owner_watch *w)
{
	struct pollfd p = { .fd = w->rfd, .events = POLLIN };

	return w->rfd < 0 || poll(&p, 1, 0) != 0;
}

/* START: tbpf says (pub->taken) it holds a copy of the offered write end;
 * close ours.  0: watching tbpf; -1: nothing offered, another fd named, or
 * tbpf's copy already closed (then everything is dropped). */
static inline int owner_accept(struct owner_watch *w, volatile struct tbpf_owner_chan *pub)
{
	int ok = w->rfd >= 0 && w->wfd >= 0 && pub->taken == w->wfd;

	owner_unpublish(pub);
	if (ok) {
		close(w->wfd);
		w->wfd = -1;
		ok = !owner_gone(w);
	}
	if (!ok)
		owner_drop(w);
	return ok ? 0 : -1;
}

/* An offer is out: tbpf's START follows within milliseconds, so the
 * control thread looks again soon (its poll period would otherwise add to
 * every attach). */
static inline int owner_offered(const struct owner_watch *w)
{
	return w->wfd >= 0;
}

/* A channel tbpf holds (accepted or inherited). */
static inline int owner_watching(const struct owner_watch *w)
{
	return w->rfd >= 0 && w->wfd < 0;
}

/* Per tick: withdraw an offer nobody took. */
static inline void owner_expire(struct owner_watch *w, volatile struct tbpf_owner_chan *pub)
{
	if (w->wfd >= 0 && owner_now() - w->offered > OWNER_OFFER_NS) {
		owner_drop(w);
		owner_unpublish(pub);
	}
}

/* pthread_atfork child: the child watches nothing, holds no write end. */
static inline void owner_forked(struct owner_watch *w)
{
	owner_drop(w);
}

/* tbpf run: "FD:INODE" (TBPF_AGENT_OWNER_CHAN) names a pipe's read end the
 * command inherited from tbpf; watched through a private copy when FD
 * still is that pipe's read end.  A process of the job that did not
 * inherit it (started with its fds closed: Python subprocess' default
 * close_fds, a launcher's workers) may have another file there; it
 * watches tbpf's pid instead (TBPF_AGENT_OWNER, `pid`), through a pidfd,
 * which turns readable when tbpf exits: the job's processes share tbpf's
 * pid namespace, as its command's children.  0 or -1 (nothing watched). */
static inline int owner_inherit(struct owner_watch *w, const char *spec, const char *pid)
{
	char *end;
	long fd = spec ? strtol(spec, &end, 10) : -1;
	long p = pid ? strtol(pid, NULL, 10) : 0;
	struct stat st;

	owner_drop(w);
	if (fd < 0 || *end != ':' || fstat((int)fd, &st) < 0 || !S_ISFIFO(st.st_mode) ||
	    (uint64_t)st.st_ino != strtoull(end + 1, NULL, 10) ||
	    (fcntl((int)fd, F_GETFL) & O_ACCMODE) != O_RDONLY) {
		if (p <= 1)
			return -1;
		w->rfd = (int)syscall(SYS_pidfd_open, (pid_t)p, 0);
		if (w->rfd >= 0 && owner_gone(w))   /* tbpf already gone */
			owner_drop(w);
		return w->rfd >= 0 ? 0 : -1;
	}
	w->rfd = fcntl((int)fd, F_DUPFD_CLOEXEC, 3);
	return w->rfd >= 0 ? 0 : -1;
}
#endif
