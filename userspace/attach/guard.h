/* guard.h - exception safety for return probes: the ptrace unwind guard.
 *
 * A uretprobe replaces a return address with a trampoline that has no
 * unwind information; a C++ exception unwinding through it aborts the
 * process.  The guard is a small child process that ptrace-seizes every
 * thread of the target.  When a thread enters the unwinder with hijacked
 * frames, BPF signals it; the signal stops it for the guard, which writes
 * the original return addresses back (the kernel's record of them,
 * retaddr.h, or read by BPF at entry) and lets
 * it go on.  The guard owns the return-probe and unwind-hook links, so if
 * tbpf is killed it still removes them in a safe order: no new hijacks,
 * repair every thread, detach.  It owns the entry probes too: were they
 * to go first (tbpf killed), calls would be hijacked without the record
 * the repair needs.
 */
#ifndef TBPF_GUARD_H
#define TBPF_GUARD_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_program;

/* One library to place return probes on (offsets of op entry points). */
struct guard_lib {
	const char *path;         /* as seen from tbpf */
	const uint64_t *offsets;
	const uint64_t *cookies;
	size_t n;
};

/* One library whose unwinder entry points get the unwind hook. */
struct guard_hook {
	const char *path;
	uint64_t offset;
	bool is_catch;            /* __cxa_begin_catch rather than an unwinder */
};

struct guard_config {
	pid_t pid;
	int sig;                  /* signal BPF sends (default SIGURG) */
	uint64_t tramp_page;
	int threads_map_fd;       /* per-thread op stacks: tid-keyed hash or
				   * task storage (told apart by map type) */
	int guard_tids_fd, guard_req_fd;
	int ret_prog_fd;          /* the tbpf_ret_addrs task iterator when op
				   * entry leaves return addresses unread
				   * (retaddr.h), else -1 */
	struct bpf_program *entry_prog, *exit_prog, *unwind_prog, *catch_prog;
	volatile uint8_t *exits_live;  /* the pid's pid_exits_live slot (mmapped .bss):
					* 1 once every return probe is attached,
					* 0 before they are detached; or NULL */
	bool multi;               /* uprobe_multi available */
	const struct guard_lib *libs;
	size_t nlibs;
	const struct guard_hook *hooks;
	size_t nhooks;
};

struct guard_stats {
	uint64_t threads_seized;
	uint64_t repairs;          /* unwinds repaired */
	uint64_t slots_restored;   /* return addresses written back */
	uint64_t detach_restored;  /* written back at detach time */
	uint64_t return_probes;
	uint64_t children_cleaned; /* forked children whose breakpoints were dropped */
	uint64_t children_failed;  /* ... that could not be cleaned (warned) */
	uint64_t child_restored;   /* return addresses children inherited hijacked */
	uint64_t ra_from_kernel;   /* return addresses taken from the kernel's record */
	uint64_t ra_unknown;       /* frames whose record could not be read */
};

struct guard;

/* Fork the guard, seize the target's threads and create the return and
 * unwind links.  Returns 0 with *out set, or -errno with *why set
 * (malloc'd) when return probes cannot be made safe. */
int guard_start(const struct guard_config *cfg, struct guard **out, char **why);
/* Orderly stop: no new hijacks, repair all threads, detach; fills stats.
 * A target whose threads have all exited has nothing to repair: its links
 * are removed at once. */
int guard_stop(struct guard *g, struct guard_stats *st);
/* guard_stop's request alone: the guard starts its stop now, guard_stop
 * later waits for it (a gone target's links and tbpf's own then go
 * together). */
void guard_stop_request(struct guard *g);
/* A gone target's guard left to finish alone, as after tbpf's SIGKILL:
 * asked to stop, not waited for (it removes the last links of a process
 * that no longer runs, then exits); no statistics.  g is freed. */
void guard_release(struct guard *g);
/* true while the guard process runs */
bool guard_alive(struct guard *g);
pid_t guard_pid(const struct guard *g);
/* Op entry probes the guard attached. */
size_t guard_entry_probes(const struct guard *g);

/* true when this kernel opens pidfds of single threads (PIDFD_THREAD,
 * Linux 6.9+), which the guard needs to read a thread's op stack kept in
 * BPF task storage (threads_map_fd of type BPF_MAP_TYPE_TASK_STORAGE);
 * with a tid-keyed hash it needs nothing.  TBPF_THREAD_HASH=1 in the
 * environment makes it false (to test that path on new kernels). */
bool guard_thread_store_ok(void);

/* Pure helper used by the guard and unit-tested: decide which recorded
 * frames need their return address restored, given the slot contents
 * read from the target.  frames[i].sp/ra/flags come from BPF; slot[i] is
 * the current 8 bytes at frames[i].sp.  Writes the indexes to fix in
 * out[] and returns how many. */
struct tbpf_frame;
size_t guard_plan_repair(const struct tbpf_frame *frames, size_t n, const uint64_t *slot,
			 uint64_t tramp_page, size_t *out);

#endif
