/* uprobe.h - attach stage: uprobe_multi links (one per library and kind)
 * with a per-offset cookie, and the per-probe fallback for old kernels. */
#ifndef TBPF_UPROBE_H
#define TBPF_UPROBE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TBPF_ATTACH_UPROBE_MULTI 48   /* BPF_TRACE_UPROBE_MULTI */
#define TBPF_F_UPROBE_MULTI_RETURN 1

struct bpf_program;
struct bpf_link;

/* One uprobe_multi link on `n` file offsets of `path`; returns the link fd
 * or -errno.  pid 0 = every process mapping the file. */
int uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets,
			const uint64_t *cookies, size_t n, bool retprobe, pid_t pid);

/* 1 if this kernel creates uprobe_multi links, 0 if not, -errno on error. */
int uprobe_multi_supported(void);

/* A set of attachments of any kind, closed together. */
struct uprobe_set {
	int *fds;
	size_t nfds, capfds;
	struct bpf_link **links;
	size_t nlinks, caplinks;
	size_t nprobes;     /* offsets attached */
};

/* Attach prog to every offset: one multi link when `multi`, else one
 * perf-event uprobe per offset.  Returns 0 or -errno. */
int uprobe_set_attach(struct uprobe_set *s, struct bpf_program *prog, const char *path,
		      const uint64_t *offsets, const uint64_t *cookies, size_t n,
		      bool retprobe, pid_t pid, bool multi);
/* Every attachment of the sets closed, at once (threads), before it
 * returns; the sets are left empty.  uprobe_set_close: one set. */
void uprobe_sets_close(struct uprobe_set *const *sets, size_t nsets);
void uprobe_set_close(struct uprobe_set *s);

#endif
