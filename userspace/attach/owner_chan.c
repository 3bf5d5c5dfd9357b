/* owner_chan.c - tbpf's end of the owner channel (see owner_chan.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "owner_chan.h"

/* The channel fds tbpf holds, one bit per fd number: the fork child
 * handler may take no lock, so a bitmap with atomic updates. */
#define CHAN_FD_MAX 65536
static uint64_t held[CHAN_FD_MAX / 64];

static void forked_child(void)
{
	for (int w = 0; w < CHAN_FD_MAX / 64; w++) {
		for (uint64_t b = held[w]; b; b &= b - 1)
			close(w * 64 + __builtin_ctzll(b));
		held[w] = 0;
	}
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, forked_child);
}

/* fd from now on closed in every forked child; fd, or -errno (closed) */
static int hold(int fd)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (fd >= CHAN_FD_MAX) {
		close(fd);
		return -EMFILE;
	}
	pthread_once(&once, register_atfork);
	__atomic_or_fetch(&held[fd / 64], 1ull << (fd % 64), __ATOMIC_SEQ_CST);
	return fd;
}

void owner_chan_close(int fd)
{
	if (fd < 0 || fd >= CHAN_FD_MAX)
		return;
	__atomic_and_fetch(&held[fd / 64], ~(1ull << (fd % 64)), __ATOMIC_SEQ_CST);
	close(fd);
}

int owner_chan_take(pid_t pid, const struct tbpf_owner_chan *c)
{
	struct stat st;
	int pfd, fd, err = 0;

	if (c->wfd < 0 || !c->ino)
		return -ENOENT;
	pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return -errno;
	/* O_CLOEXEC by the kernel */
	fd = (int)syscall(SYS_pidfd_getfd, pfd, c->wfd, 0);
	if (fd < 0)
		err = -errno;
	close(pfd);
	if (err)
		return err;
	/* the pipe the agent offered, its write end: not whatever file the
	 * target may have at that number by now */
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) || (uint64_t)st.st_ino != c->ino ||
	    (fcntl(fd, F_GETFL) & O_ACCMODE) != O_WRONLY) {
		close(fd);
		return -EPROTO;
	}
	return hold(fd);
}

int owner_chan_pipe(int *rfd, int *wfd, char *spec, size_t n)
{
	struct stat st;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (fstat(p[0], &st) < 0) {
		int err = -errno;

		close(p[0]);
		close(p[1]);
		return err;
	}
	if ((*wfd = hold(p[1])) < 0) {
		close(p[0]);
		return *wfd;
	}
	*rfd = p[0];
	snprintf(spec, n, "%d:%llu", p[0], (unsigned long long)st.st_ino);
	return 0;
}
