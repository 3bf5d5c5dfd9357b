/* session.h - collection engine shared by the live command and the
 * daemon: one BPF object, any number of target processes.
 *
 *   s = session_open(&cfg)            load BPF with the mode flags
 *   session_add_target(s, pid)        discover ops, attach (guard first)
 *   session_scan(s)                   system-wide: attach new processes
 *   session_poll(s, ms)               drain records, notice exits
 *   session_collect(s, &profile)      read the aggregated maps
 *   session_reset_stats(s)            clear maps (daemon windows)
 *   session_close(s)                  safe detach of everything
 */
#ifndef TBPF_SESSION_H
#define TBPF_SESSION_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How op exits are seen (--exits): see docs/exception-safety.md. */
enum exits_mode { EXITS_AUTO = 0, EXITS_RETURN, EXITS_INFER };

struct profile;
struct capture_writer;

/* Which processes a session profiles and how: the options the live command
 * and the daemon share (--pid, --comm, --cgroup, --exits, --ring-size;
 * parsed once, cmd/options.c). */
struct session_select {
	pid_t *pids;                /* none: system-wide */
	size_t npids;
	const char *comm, *cgroup;  /* system-wide filters */
	enum exits_mode exits;
	uint64_t ring_size;         /* 0: the command's default */
};

struct rec_hdr;

struct session_config {
	enum exits_mode exits;
	bool record;                /* stream records to the ring buffer */
	bool python;                /* walk Python stacks */
	bool cuda;                  /* probe libcudart/libcuda */
	bool system_wide;           /* session_scan attaches every PyTorch process */
	bool end_with_targets;      /* the caller stops once its targets exit: the
				     * last one's links then stay until
				     * session_detach_all, after the report */
	bool no_multi;
	bool redispatch;            /* probe ::redispatch too (target_open) */
	bool no_hist;               /* no latency histograms (map ophist) */
	uint64_t ring_size;
	pid_t only_pid;             /* the one target, known before load: the BPF
				     * pid check is a constant compare (saves a
				     * hash lookup per probe hit) */
	const char *comm_filter;    /* system-wide: only processes with this comm */
	const char *cgroup_filter;  /* system-wide: only processes in this cgroup path */
	struct capture_writer *cw;  /* where records go when record is set */
	int verbose;
	/* GPU device times: enum gpu_agent_mode (gpu_session.h),
	 * 0 = off; agent_path: libtbpf_agent.so (run_agent_path()) */
	int gpu_agent;
	const char *agent_path;
	unsigned inject_flags;      /* enum inject_flags (--inject-force) */
	const char *cupti_path;     /* --cupti: the libcupti the agent opens, NULL:
				     * its own choice (agent/cupti_pick.h) */
	bool run_hold;              /* tbpf run: load the hold (session_hold_torch) */
	/* with cuda, a process that maps libcudart/libcuda but no
	 * libtorch is a target with the CUDA probes only (target_open's
	 * TARGET_CUDA_ONLY; session_scan takes them too); once it maps
	 * libtorch its op probes follow (checked once a second, and by the
	 * run hold) */
	bool cuda_only_ok;
	bool shapes;                /* --record-shapes: input shapes at op entry */
	bool bwstack;               /* --group-by-stack: backward ops get their
				     * forward op's stack (bw_session.h) */
	/* --profile-memory: allocator probes, per-op bytes,
	 * REC_MEM records into `mem` (the memory model, NULL: not kept);
	 * mem_map_size: entries of the BPF map of live CPU allocations */
	bool memory;
	uint32_t mem_map_size;
	struct mem_model *mem;
	/* --inproc: a target gets the pid filter, its Python
	 * offsets and the module-call probe only (forward counts; the ops
	 * come from the in-process agent), no op discovery */
	bool modcalls_only;
	/* with modcalls_only: no module-call uprobe either (the in-process
	 * agent counts them): the session only names Python stacks */
	bool modcalls_no_probe;
	/* --inproc's CUDA records (join/cudaattr.h): REC_LAUNCH, REC_MEMOP,
	 * REC_SYNC and REC_ALLOC go to this hook only (not to cw, the CUDA
	 * model or record_hook); the caller hands them back, their op filled
	 * in, through session_cuda_add.  NULL = as any record */
	void (*cuda_hook)(void *ctx, const struct rec_hdr *h, size_t size);
	void *cuda_hook_ctx;
};

struct mem_model;

struct session_target_info {
	pid_t pid;
	const char *comm, *cmdline;
	size_t nprobes;
	const char *exits;          /* "return" or "infer" */
	bool alive;
	const char *python;         /* detected interpreter or why not */
	bool cuda_only;             /* CUDA probes only: no libtorch mapped (yet) */
};

struct session;

/* NULL with *why (malloc'd one line) and *err: -EPERM missing privileges,
 * -EOPNOTSUPP the kernel lacks a feature, -EIO anything else. */
struct session *session_open(const struct session_config *cfg, char **why, int *err);
/* 0, or -errno with *why. */
/* modcalls_only sessions: whether targets added from now on get the
 * module-call uprobe (cfg.modcalls_no_probe). */
void session_set_modcall_probe(struct session *s, bool on);
/* The module-call uprobe on pid, a target added without it (the agents
 * start after their targets' CUDA probes and say only then whether they
 * count module calls).  0, or -errno with *why. */
int session_add_modcall_probe(struct session *s, pid_t pid, char **why);
int session_add_target(struct session *s, pid_t pid, char **why);
/* --inproc --inject: the CUPTI agent into pid before the
 * target is added (its START may take seconds); a failure is one warning
 * and the note gpu_session_status gives.  No-op without cfg.gpu_agent or
 * when pid has one. */
void session_add_gpu_agent(struct session *s, pid_t pid);
/* tbpf run: stop only_pid where its dynamic linker has mapped
 * libtorch_cpu, before code in it runs (bpf/runhold.bpf.h).  0 or -errno
 * with *why. */
int session_hold_torch(struct session *s, char **why);
/* Whether the held process has stopped there. */
bool session_torch_held(struct session *s);
/* Hold links off; a process stopped by it is continued. */
void session_hold_release(struct session *s);
/* Hold links off; a process stopped by it stays stopped (tbpf run
 * --inproc hands it to the uprobe mode, which continues it). */
void session_hold_keep(struct session *s);
/* tbpf run --inproc: the process stopped where it mapped
 * libtorch_cpu (session_torch_held); hold it again at its first
 * RecordFunction check (at::getStepCallbacks[UnlessEmpty] of
 * libtorch_cpu, the mapped file) and continue it.  session_torch_held
 * turns true at that stop.  0, or -errno with *why (it stays stopped). */
int session_hold_first_op(struct session *s, const char *libtorch_cpu, char **why);
/* The thread that stopped at that first op. */
pid_t session_hold_tid(struct session *s);
/* Stopped at a first op: the next op of any thread stops the process
 * again (run_inproc.c lets it run a moment with that thread held). */
void session_hold_again(struct session *s);
/* After session_add_target took the held process as CUDA-only (it mapped
 * libcudart first): hold again where it maps libtorch_cpu and continue it;
 * session_poll adds the op probes at that stop.  False (nothing done)
 * when the target is no CUDA-only one or there is no hold. */
bool session_hold_rearm(struct session *s);
/* A target that gained op probes since the last call (it mapped libtorch
 * after a CUDA-only attach): true with *i its index, once per target. */
bool session_take_upgraded(struct session *s, size_t *i);
/* System-wide: attach every new process that maps libtorch and passes
 * the filters; returns how many were added. */
int session_scan(struct session *s);
/* Wait up to ms, drain records, detach from exited targets.  Returns the
 * number of live targets. */
int session_poll(struct session *s, int ms);
/* Read the ring buffer now, nothing else (--inproc: before the agent's
 * records are handed on, join/cudaattr.h). */
void session_drain(struct session *s);
/* A CUDA record taken by cfg.cuda_hook, its op filled in, into the
 * session's CUDA model (the tables, kernel names).  0 or -ENOMEM. */
int session_cuda_add(struct session *s, const struct rec_hdr *h);
/* Add every aggregated row to p (pids, names, counters). */
int session_collect(struct session *s, struct profile *p);
void session_reset_stats(struct session *s);
/* Summed BPF counters (enum tbpf_counter). */
void session_counters(struct session *s, uint64_t *out);
/* Op-probe hits in target `pid` since it was added (0 if not a target). */
uint64_t session_target_hits(struct session *s, pid_t pid);
size_t session_ntargets(struct session *s);
const struct session_target_info *session_target(struct session *s, size_t i);
uint32_t session_ring_size(struct session *s);
/* The fd of the session's BPF map `name` (opstats, ophist, ...; the
 * daemon reads and trims them per window), or -ENOENT. */
int session_map_fd(struct session *s, const char *name);
int session_pidfd(struct session *s, size_t i);
/* Record op and scope entries (the default) or not (tbpf.bpf.c,
 * entries_off): off while `tbpf --pid` attaches and from the detach on,
 * so every part's window is the same. */
void session_entries(struct session *s, bool on);
/* Detach from every target (safe order) and drain the ring buffer;
 * maps stay readable until session_close. */
void session_detach_all(struct session *s);
void session_close(struct session *s);
/* --inproc: a Python stack the in-process agent walked, named
 * now (while the target lives) in the session's stack store and written
 * to the capture like the BPF walker's. */
struct rec_pystack;
void session_note_pystack(struct session *s, const struct rec_pystack *r);
/* The frames of a Python stack named so far (capture order: innermost
 * first, *n of them), by its id or (low32) the low 32 bits of it, as
 * --inproc records carry; NULL when not named.  Valid until the next
 * note or reap. */
struct capture_frame;
const struct capture_frame *session_stack_frames(struct session *s, uint32_t pid, uint64_t id,
						bool low32, uint32_t *n);
/* The nn.Module layer tree of a collected profile (Python stacks named
 * during the run; model_layers), with the CUDA rows of cm when it is not
 * empty (cm may be NULL).  0 or -errno; layers_free(*out). */
struct layer_tree;
struct cuda_model;
/* Several processes: model_split of m over the session's
 * layer stacks (info: command lines and torch versions).  0 or -errno. */
struct tbpf_model;
struct model_proc_info;
int session_model_split(struct session *s, struct tbpf_model *m,
			const struct model_proc_info *info, size_t ninfo);
int session_layer_tree(struct session *s, const struct profile *p, const struct cuda_model *cm,
		       struct layer_tree **out);
/* --group-by-stack N: every Python stack named during the run as
 * torch.profiler's Source Location entries into p, and each row's first
 * depth of them (profile_apply_srcloc).  0 or -ENOMEM. */
int session_srcloc(struct session *s, struct profile *p, unsigned depth, bool low32);
/* --inproc --group-by-stack: a backward op's stack (model/bwstack.h), id
 * made of the stored stacks whose low 32 bits are own (frames, layers)
 * and, with has_src, src (Source Location entries); written to the
 * capture like a walked one.  Call after both were noted.  0 or -ENOMEM. */
int session_note_derived(struct session *s, uint32_t pid, uint64_t id, uint32_t own,
			 uint32_t src, bool has_src);
/* Free the targets that exited (their op names and Python stacks go
 * too): call once their rows have been read and removed.  Returns how
 * many were freed.  Bounded memory for the daemon. */
size_t session_reap(struct session *s);
/* Where records go (cfg.record); set before targets are added. */
void session_set_capture(struct session *s, struct capture_writer *cw);
/* One more consumer of the ring's records (bus/bus.h), after the
 * session's own (filters, capture, CUDA model, GPU join, memory model);
 * before the first session_poll.  0, or -ENOSPC. */
struct bus_sink;
int session_add_sink(struct session *s, struct bus_sink sink);

/* The CUDA tables (all targets) and the CUDA probes attached; NULL unless
 * cfg.cuda.  Valid until session_close. */
struct cuda_model;
const struct cuda_model *session_cuda(struct session *s, size_t *nprobes, size_t *nlibs);
/* Empty the CUDA model (records read so far are dropped). */
void session_cuda_reset(struct session *s);
/* Op id -> "aten::add" (and overload); NULL when unknown. */
const char *session_op_name(struct session *s, uint32_t id, const char **overload);
struct target;
struct guard_stats;
const struct target *session_target_detail(struct session *s, size_t i);
const struct guard_stats *session_guard_stats(struct session *s, size_t i);
uint64_t session_records(struct session *s);
/* Duty cycling (--max-overhead): detach or re-attach a target's op
 * probes.  Meant for infer mode; a guarded target is detached safely
 * and re-attached in infer mode.  0 or -errno. */
int session_set_enabled(struct session *s, pid_t pid, bool on);
/* The same, attaching only the ops whose ids are in ids (sorted
 * ascending; both the call and redispatch entry points of each); ids NULL
 * means all.  Turning on a target that is on changes nothing. */
int session_set_enabled_ops(struct session *s, pid_t pid, bool on, const uint32_t *ids,
			    size_t nids);

/* The CUPTI agents and their records (cfg.gpu_agent); NULL when off.
 * Valid until session_close. */
struct gpu_session;
struct gpu_session *session_gpu(struct session *s);

#endif
