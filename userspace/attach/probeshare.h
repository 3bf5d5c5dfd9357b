/* probeshare.h - attach stage: other tools' uprobe_multi links on the
 * files tbpf probes.
 *
 * When a uprobe is hit, the kernel prepares a return instance - it
 * rewrites the caller's return address to the uretprobe trampoline - for
 * every return consumer of that uprobe, without asking the consumer's pid
 * filter (the filter only decides where breakpoints are installed, and
 * whether the BPF program runs).  So a pid-filtered return link on
 * libtorch makes every process in which anyone else has a breakpoint on
 * libtorch return through the trampoline, and a C++ exception thrown
 * through such a frame cannot unwind: std::terminate.  Seen here: a
 * process profiled in infer mode (entry probes only) died while another
 * tbpf had return probes on a second process using the same libtorch.
 *
 * So before attaching: another tool's return link on the file makes any
 * probe of ours unsafe for our target (refuse); another tool's entry link
 * makes our return probes unsafe for its targets (use inferred exits). */
#ifndef TBPF_PROBESHARE_H
#define TBPF_PROBESHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct probeshare_link {
	uint32_t link_id, prog_id;
	uint32_t pid;          /* its pid filter, 0 = every process */
	bool ret;              /* return probes */
};

enum probeshare_verdict {
	PS_OK,                 /* no other tool on the file */
	PS_NO_RETURNS,         /* others have entry probes: no return probes of ours */
	PS_REFUSE,             /* others have return probes: no probes of ours at all */
};

/* Pure: the verdict for our probes (with return probes when want_returns)
 * given the other links on the file.  *which = the link deciding it. */
enum probeshare_verdict probeshare_decide(const struct probeshare_link *v, size_t n,
					  bool want_returns, size_t *which);

/* The uprobe_multi links on the file at path (compared by device and
 * inode) whose program is not one of own_prog_ids.  0 or -errno; on a
 * kernel without link info for uprobe_multi, 0 with none found. */
int probeshare_scan(const char *path, const uint32_t *own_prog_ids, size_t nown,
		    struct probeshare_link **out, size_t *n);

/* One line describing v for a message ("BPF link 12 (program 40), return
 * probes, pid 1234"), malloc'd. */
char *probeshare_describe(const struct probeshare_link *v);

#endif /* TBPF_PROBESHARE_H */
