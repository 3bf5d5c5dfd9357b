/* uprobe.c - attach stage: raw BPF_LINK_CREATE for uprobe_multi (Debian's
 * libbpf 1.1 predates bpf_program__attach_uprobe_multi) and a per-offset
 * fallback through libbpf's perf-event uprobes. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "uprobe.h"
#include "grow.h"

/* link_create.uprobe_multi as in the 6.6+ UAPI; offsets from the start
 * of union bpf_attr (Debian's headers do not have these fields yet). */
struct link_create_upm {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 upm_flags;
	__u32 pid;
	__u32 pad;
	__u8 rest[64];
};
_Static_assert(__builtin_offsetof(struct link_create_upm, path) == 16, "uprobe_multi ABI");
_Static_assert(__builtin_offsetof(struct link_create_upm, cnt) == 48, "uprobe_multi ABI");
_Static_assert(__builtin_offsetof(struct link_create_upm, pid) == 56, "uprobe_multi ABI");

int uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets,
			const uint64_t *cookies, size_t n, bool retprobe, pid_t pid)
{
	struct link_create_upm a;
	int fd;

	if (n == 0 || n > UINT32_MAX)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.prog_fd = prog_fd;
	a.attach_type = TBPF_ATTACH_UPROBE_MULTI;
	a.path = (__u64)(unsigned long)path;
	a.offsets = (__u64)(unsigned long)offsets;
	a.cookies = (__u64)(unsigned long)cookies;
	a.cnt = (__u32)n;
	a.upm_flags = retprobe ? TBPF_F_UPROBE_MULTI_RETURN : 0;
	a.pid = pid > 0 ? (__u32)pid : 0;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

int uprobe_multi_supported(void)
{
	static int cached = -1;
	struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = TBPF_ATTACH_UPROBE_MULTI);
	uint64_t off = 0, cookie = 0;
	int pfd, lfd;

	if (cached >= 0)
		return cached;
	pfd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "tbpf_feat", "GPL", prog, 2, &opts);
	if (pfd < 0)
		return cached = 0;
	/* A kernel that knows the attach type looks the path up (ENOENT);
	 * one that does not rejects the attributes (EINVAL). */
	lfd = uprobe_multi_attach(pfd, "/nonexistent/tbpf-feature-probe", &off, &cookie, 1,
				  false, 0);
	close(pfd);
	if (lfd >= 0) {
		close(lfd);
		return cached = 1;
	}
	return cached = (lfd == -ENOENT || lfd == -ENOTDIR) ? 1 : 0;
}

static int push_fd(struct uprobe_set *s, int fd)
{
	if (GROW(s->fds, s->nfds, s->capfds, 16))
		return -ENOMEM;
	s->fds[s->nfds++] = fd;
	return 0;
}

static int push_link(struct uprobe_set *s, struct bpf_link *l)
{
	if (GROW(s->links, s->nlinks, s->caplinks, 64))
		return -ENOMEM;
	s->links[s->nlinks++] = l;
	return 0;
}

int uprobe_set_attach(struct uprobe_set *s, struct bpf_program *prog, const char *path,
		      const uint64_t *offsets, const uint64_t *cookies, size_t n,
		      bool retprobe, pid_t pid, bool multi)
{
	int err;

	if (multi) {
		int fd = uprobe_multi_attach(bpf_program__fd(prog), path, offsets, cookies, n,
					     retprobe, pid);

		if (fd < 0)
			return fd;
		err = push_fd(s, fd);
		if (err) {
			close(fd);
			return err;
		}
		s->nprobes += n;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = cookies ? cookies[i] : 0,
			    .retprobe = retprobe);
		struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, pid > 0 ? pid : -1,
								     path, offsets[i], &o);

		if (!l)
			return -errno ? -errno : -EINVAL;
		err = push_link(s, l);
		if (err) {
			bpf_link__destroy(l);
			return err;
		}
		s->nprobes++;
	}
	return 0;
}

/* Closing a uprobe_multi link waits for an RCU tasks-trace grace period
 * in close() (~40 ms here, whatever its probe count); closed from a thread
 * each, links share grace periods (10 links: 376-440 ms one after the
 * other, 48-80 ms at once).  Workers take the next fd or link
 * until none is left; a worker that cannot start leaves its share to the
 * others and to the calling thread. */
#define CLOSE_WORKERS 32

struct close_job {
	struct uprobe_set *const *sets;
	size_t nsets;
	atomic_size_t next;
};

/* The i-th attachment over all sets (their fds, then their links); false
 * past the end. */
static bool close_nth(const struct close_job *j, size_t i)
{
	for (size_t k = 0; k < j->nsets; k++) {
		struct uprobe_set *s = j->sets[k];

		if (i < s->nfds) {
			close(s->fds[i]);
			return true;
		}
		i -= s->nfds;
		if (i < s->nlinks) {
			bpf_link__destroy(s->links[i]);
			return true;
		}
		i -= s->nlinks;
	}
	return false;
}

static void *close_worker(void *arg)
{
	struct close_job *j = arg;

	while (close_nth(j, atomic_fetch_add(&j->next, 1)))
		;
	return NULL;
}

void uprobe_sets_close(struct uprobe_set *const *sets, size_t nsets)
{
	struct close_job j = { .sets = sets, .nsets = nsets };
	pthread_t th[CLOSE_WORKERS];
	size_t total = 0, started = 0;

	atomic_init(&j.next, 0);
	for (size_t k = 0; k < nsets; k++)
		total += sets[k]->nfds + sets[k]->nlinks;
	while (total > 1 && started < total - 1 && started < CLOSE_WORKERS &&
	       !pthread_create(&th[started], NULL, close_worker, &j))
		started++;
	close_worker(&j);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (size_t k = 0; k < nsets; k++) {
		free(sets[k]->fds);
		free(sets[k]->links);
		memset(sets[k], 0, sizeof(*sets[k]));
	}
}

void uprobe_set_close(struct uprobe_set *s)
{
	uprobe_sets_close(&s, 1);
}
