/* remote.c - shared helper: another process's memory (see remote.h). */
#include <errno.h>
#include <sys/uio.h>
#include "remote.h"

static int remote_rw(pid_t pid, uint64_t addr, void *buf, size_t len, int write)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
			  : process_vm_readv(pid, &l, 1, &r, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	return remote_rw(pid, addr, buf, len, 0);
}

int remote_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	return remote_rw(pid, addr, (void *)buf, len, 1);
}
