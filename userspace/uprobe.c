/* uprobe.c - attach stage: uprobe_multi links (STUB in branch cuda). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include "uprobe.h"

int uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets,
			const uint64_t *cookies, size_t n, bool retprobe, pid_t pid)
{
	uint8_t attr[128];
	uint64_t p = (uintptr_t)path, o = (uintptr_t)offsets, c = (uintptr_t)cookies;
	uint32_t v;
	long fd;

	memset(attr, 0, sizeof(attr));
	v = prog_fd; memcpy(attr + 0, &v, 4);
	v = 48; memcpy(attr + 8, &v, 4);
	memcpy(attr + 16, &p, 8);
	memcpy(attr + 24, &o, 8);
	memcpy(attr + 40, &c, 8);
	v = n; memcpy(attr + 48, &v, 4);
	v = retprobe ? 1 : 0; memcpy(attr + 52, &v, 4);
	v = pid; memcpy(attr + 56, &v, 4);
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, attr, sizeof(attr));
	return fd < 0 ? -errno : (int)fd;
}
