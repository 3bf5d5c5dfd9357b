/* metrics.h - aggregation stage, fleet: window profiles -> cumulative
 * counters -> Prometheus text exposition (format 0.0.4).
 *
 * Pure: the daemon hands in each window's deltas (a profile read from the
 * BPF maps, histogram rows, BPF counters, process names) and the state
 * adds them up, so every counter is monotonic across windows.
 *
 * Cardinality is bounded: per job at most top_n ops get their own series,
 * handed out when an op is first seen, heaviest (self time) first within
 * a window, and kept for good; every other op adds to op="other".  Jobs
 * beyond max_jobs add to job="other".  A job is the process's comm, or
 * the operator's --label job=NAME for all of them.
 *
 * Families (labels job, op, device; constant --label pairs on every line):
 *   tbpf_op_calls_total, tbpf_op_self_seconds_total, tbpf_op_seconds_total,
 *   tbpf_op_duration_seconds (histogram), tbpf_cuda_launches_total,
 *   tbpf_cuda_copies_total, tbpf_cuda_copy_bytes_total, tbpf_job_processes,
 *   tbpf_job_coverage_ratio, tbpf_job_estimated, tbpf_probe_hits_total,
 *   tbpf_events_dropped_total, tbpf_ops_lost_total, tbpf_windows_total,
 *   tbpf_cpu_seconds_total, tbpf_resident_memory_bytes, tbpf_targets,
 *   tbpf_overhead_ratio.
 */
#ifndef TBPF_METRICS_H
#define TBPF_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "tbpf_abi.h"

struct profile;

struct metrics_config {
	size_t top_n;              /* ops per job with their own series; 0 = 20 */
	size_t max_jobs;           /* jobs with their own series; 0 = 64 */
	const char *job;           /* job of every process (--label job=NAME); NULL = comm */
	const char *const *label_keys;  /* other constant labels (--label k=v) */
	const char *const *label_vals;
	size_t nlabels;
};

struct metrics_proc {
	uint32_t pid;
	const char *comm;
	double coverage;           /* fraction of the window its op probes were on; 0 = 1 */
	double probe_cpu_ns;       /* budgeted: estimated probe cost in the window */
	double base_cpu_ns;        /* budgeted: its own CPU without it; 0 = not budgeted */
};

struct metrics_hist_row {
	uint32_t pid, op_id;
	uint64_t buckets[TBPF_HIST_BUCKETS];
};

/* CUDA copies per process and direction (enum tbpf_copy_dir).  Hook for
 * the CUDA probes (branch cuda): the daemon fills these from its CUDA
 * model once that lands; until then the families are present and empty. */
struct metrics_copy_row {
	uint32_t pid, dir;
	uint64_t count, bytes;
};

struct metrics_window {
	const struct profile *prof;                 /* op rows of this window */
	const struct metrics_proc *procs; size_t nprocs;
	const struct metrics_hist_row *hist; size_t nhist;
	const struct metrics_copy_row *copies; size_t ncopies;
	const uint64_t *counters;                   /* CNT_MAX deltas, or NULL */
};

struct metrics_self {
	uint64_t user_ns, sys_ns;  /* tbpf's own CPU time (getrusage), cumulative */
	uint64_t rss_bytes;
	uint32_t targets;          /* processes attached now */
	double overhead;           /* estimated added cost / target CPU, < 0 = unknown */
};

struct metrics_series {
	const char *op;            /* interned; "other" for the overflow series */
	uint64_t calls, self_ns, total_ns, launches, cuda_self_ns, cuda_total_ns;
	uint64_t buckets[TBPF_HIST_BUCKETS];
	uint64_t hist_sum_ns;
	int64_t mem_self[2];       /* --profile-memory: net bytes, [0] CPU [1] CUDA */
};

struct metrics_job {
	const char *name;          /* interned */
	struct metrics_series *series;   /* named ops, then [nseries] = "other" */
	size_t nseries;
	struct metrics_series other;
	uint64_t copies[6], copy_bytes[6];
	uint32_t processes;        /* in the last window */
	double coverage;           /* last window's lowest coverage */
	double probe_cpu_ns, base_cpu_ns;   /* last window, over its budgeted processes */
	bool estimated;            /* some counts were scaled from partial coverage */
	bool seen_window;
};

struct metrics {
	struct metrics_config cfg;
	struct metrics_job *jobs;
	size_t njobs;
	struct metrics_job other_job;
	bool has_gpu_times;
	bool has_memory;           /* --profile-memory rows seen */
	uint64_t windows;
	uint64_t counters[CNT_MAX];
	struct metrics_self self;
	struct strintern *strings;
};

int metrics_init(struct metrics *m, const struct metrics_config *cfg);
void metrics_free(struct metrics *m);
/* Add one window's deltas.  Counts of a process whose coverage is below 1
 * are scaled by 1/coverage and its job is marked estimated.  0 or -ENOMEM. */
int metrics_add_window(struct metrics *m, const struct metrics_window *w);
void metrics_set_self(struct metrics *m, const struct metrics_self *s);
/* Prometheus text format 0.0.4; families in a fixed order, series by job
 * then op name ("other" last).  0 or -EIO. */
int metrics_write(const struct metrics *m, FILE *out);
/* Upper bound of histogram bucket i in nanoseconds (i < last). */
uint64_t metrics_bucket_le_ns(size_t i);

#endif /* TBPF_METRICS_H */
