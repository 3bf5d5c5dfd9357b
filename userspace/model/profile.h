/* profile.h - aggregation stage: the per-op profile model behind table and json.
 *
 * Filled by the live table mode from BPF maps (profile_add_op per map
 * entry) or from a capture (profile_from_capture).  Rows are keyed by
 * (pid, op_id, stack_id, shape_id); adding a row with an existing key merges it.
 */
#ifndef TBPF_PROFILE_H
#define TBPF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct prof_op {
	uint32_t pid;
	uint32_t op_id;
	const char *name, *overload;   /* "aten::add", "Tensor" ("" = none) */
	uint64_t stack_id;             /* Python stack of the outermost op, 0 = none */
	uint64_t calls, self_ns, total_ns, max_ns, launches, inferred;
	uint64_t folded;   /* dispatcher calls shown inside a same-name parent
			    * (torch.profiler's table does so); not in calls */
	uint64_t self_cuda_ns, cuda_total_ns;
	/* --record-shapes: the input shapes row key, and their
	 * text in torch.profiler's notation ("[[2, 3], []]", "" = none) */
	uint64_t shape_id;
	const char *shapes;
	/* their Input type, the JSON list Kineto writes (shape_types(),
	 * '["float", "Scalar"]'; "" = none; a row folded from calls of
	 * several type lists: "" too) */
	const char *types;
	uint64_t flops;    /* --with-flops: torch.profiler's FLOPs, all calls */
	/* --group-by-stack N: the Source Location, N entries '\n'-joined
	 * (profile_apply_srcloc, srcloc.h); NULL/"" none */
	const char *srcloc;
	/* --profile-memory: bytes allocated minus freed while the op was
	 * open on its thread, alone (self) and with its children (total),
	 * [0] CPU, [1] CUDA: torch.profiler's self_cpu_memory_usage,
	 * cpu_memory_usage, self_cuda_memory_usage, cuda_memory_usage */
	int64_t mem_self[2], mem_total[2];
};

/* nn.Module calls under one Python stack (its layers end at the module
 * called): torchprof's Count. */
struct prof_modcall {
	uint32_t pid;
	uint64_t stack_id;
	uint64_t calls;
};

/* Device time of the work one process launched outside any op (CUPTI
 * records joined to a launch no op enclosed): the layer tree's [no op]. */
struct prof_gpu_noop {
	uint32_t pid;
	uint64_t ns;
};

struct profile {
	/* run */
	uint32_t *pids;
	size_t npids;
	uint64_t duration_ns;
	uint32_t probes_attached;
	uint64_t events_dropped;
	const char *exit_mode;         /* "duration", "signal", "target exited", "" */
	bool has_gpu_times;
	const char *gpu_note;          /* why not, when !has_gpu_times */
	bool has_memory;               /* --profile-memory: mem_* are measured */
	bool has_cuda_memory;          /* ... and CUDA allocations were seen */
	const char *mode;              /* how exits were observed: "return probes",
					* "inferred (entry probes only)", "" unknown */
	/* ops */
	struct prof_op *ops;
	size_t nops, cap;
	/* module calls (TBPF_MODCALL_ID rows, from the module-call records) */
	struct prof_modcall *modcalls;
	size_t nmodcalls, capmodcalls;
	/* device time outside any op, per pid (profile_add_gpu) */
	struct prof_gpu_noop *gpu_noop;
	size_t ngpu_noop, capgpu_noop;
	/* Python stacks as torch.profiler's Source Location entries
	 * (srcloc.h), by (pid, stack_id) */
	struct prof_srcstack *srcs;
	size_t nsrcs, csrcs;
	/* internals */
	struct strintern *strings;
	uint32_t *index;               /* open addressing: row + 1, 0 = empty */
	size_t nindex;
};

/* Add ns of device time launched outside any op by pid.  0 or -ENOMEM. */
int profile_add_gpu_noop(struct profile *p, uint32_t pid, uint64_t ns);
/* The device time launched outside any op, all pids. */
uint64_t profile_gpu_noop_ns(const struct profile *p);

/* The row of allocations and frees made outside any op (torch.profiler's
 * name), op id TBPF_OPID_MEMORY. */
#define PROF_MEMORY_ROW "[memory]"

/* A step of --steps / --schedule: one row per process named as
 * torch.profiler's key_averages() names its ProfilerStep#N spans (its
 * _rewrite_name with_wildcard: every step in one row, a call per step);
 * self time: the step's time outside its outermost ops. */
#define PROF_STEP_ROW "ProfilerStep*"
#define PROF_OPID_STEP 0x7ffffff1u   /* never an op id: TBPF_OPID_MEMORY's range */

void profile_init(struct profile *p);
void profile_free(struct profile *p);
/* Intern a string for the profile's lifetime (NULL -> ""); NULL on ENOMEM. */
const char *profile_intern(struct profile *p, const char *s);
int profile_set_pids(struct profile *p, const uint32_t *pids, size_t n);
/* Add or merge a row: counters add up, max_ns takes the maximum; names are
 * copied on insert.  0 or -ENOMEM. */
int profile_add_op(struct profile *p, const struct prof_op *o);
/* Add calls nn.Module calls under (pid, stack_id).  0 or -ENOMEM. */
int profile_add_modcall(struct profile *p, uint32_t pid, uint64_t stack_id, uint64_t calls);

/* One entry of the BPF opstats map (struct tbpf_opkey -> struct
 * tbpf_opstat, bpf/tbpf_abi.h) as a row; name/overload from the op table. */
struct tbpf_opkey;
struct tbpf_opstat;
int profile_add_opstat(struct profile *p, const struct tbpf_opkey *k, const struct tbpf_opstat *v,
		       const char *name, const char *overload);

/* Which fields rows are folded by (name always). */
enum prof_fold_key {
	PROF_BY_NAME = 0,
	PROF_BY_OVERLOAD = 1 << 0,
	PROF_BY_PID = 1 << 1,
	PROF_BY_STACK = 1 << 2,
	PROF_BY_SHAPE = 1 << 3,   /* the Input Shapes text */
	PROF_BY_SRCLOC = 1 << 4,  /* the Source Location text */
};
/* New array of folded rows, ordered by (pid, name, overload, stack) as
 * keyed; fields not in the key are 0 / "" in the result.  Free *rows. */
int profile_fold(const struct profile *p, unsigned by, struct prof_op **rows, size_t *nrows);

/* Sort keys, torch.profiler's names: self_cpu_time_total, cpu_time_total,
 * cpu_time (average), count, self_cuda_time_total, cuda_time_total,
 * cuda_time (average), self_cpu_memory_usage, cpu_memory_usage,
 * self_cuda_memory_usage, cuda_memory_usage; also launches,
 * max_cpu_time, name.  Descending by
 * value, ties by name, overload, pid.  -EINVAL for an unknown key. */
int profile_sort(struct prof_op *rows, size_t n, const char *key);
bool profile_sort_key_valid(const char *key);
extern const char *const profile_sort_keys[];

/* Op records (through the timeline) -> rows, as torch.profiler counts
 * them (duplicate nested ops folded): a replay sink (capture/replay.h)
 * that takes the records in ring order and closes what is still open
 * after the last.  Capture as a whole: model_from_capture (model.h). */
struct capture_meta;
struct capture_stats;
struct bus_sink;
struct profile_agg;
struct profile_agg *profile_agg_new(struct profile *p, const struct capture_meta *m);
/* Keep only the slices (and [memory] records) that begin in a step s
 * records (steps_window_has); st and s must outlive the replay. */
struct steps;
struct step_schedule;
void profile_agg_window(struct profile_agg *a, const struct steps *st,
			const struct step_schedule *s);
struct bus_sink profile_agg_sink(struct profile_agg *a);
void profile_agg_free(struct profile_agg *a);
/* After the rows: names from the capture's op table, pids, duration,
 * drops, exit mode and the GPU note (gpu_reached device records reached an
 * op, of gpu_devices joined).  0 or -ENOMEM. */
int profile_capture_info(struct profile *p, const struct capture_meta *m,
			 const struct capture_stats *st, uint64_t gpu_reached, uint64_t gpu_devices);

/* Add a joined process's device times to profile rows (pid, op, low 32 bits
 * of the stack id), creating rows named by op_name for ops without one
 * (op_name NULL: unnamed rows, "" name, for the caller to name).
 * Device time launched outside any op goes to profile_add_gpu_noop.
 * Returns the number of device records that reached an op. */
struct gj_result;
int profile_add_gpu(struct profile *p, const struct gj_result *res, uint32_t pid,
		    const char *(*op_name)(void *ctx, uint32_t id, const char **overload), void *ctx);

/* ---- several processes ---- */
/* The pids of the run and of the rows, ascending, once each (*pids
 * malloc'd).  0 or -ENOMEM. */
int profile_row_pids(const struct profile *p, uint32_t **pids, size_t *n);
/* The rows and module calls of pid alone into dst (profile_init'ed), with
 * src's run info (pids: pid).  0 or -ENOMEM. */
int profile_of_pid(const struct profile *src, uint32_t pid, struct profile *dst);
/* One PROF_STEP_ROW call per step of ss (its pid).  0 or -ENOMEM. */
struct step_stats;
int profile_add_steps(struct profile *p, const struct step_stats *ss);

#endif /* TBPF_PROFILE_H */
