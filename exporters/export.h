/* export.h - export stage: one small interface per output format.
 *
 * Aggregated formats take a struct profile (table, json) or a struct
 * calltree (folded, pprof, svg); trace formats stream a capture through the
 * one trace driver (trace.h: chrome, perfetto).  The model as a whole
 * (ops, CUDA tables, layers): report.h.  All return 0 or -errno (-EIO when writing
 * failed, -ENOMEM, -EINVAL with the reader's error set) and print nothing
 * else.
 */
#ifndef TBPF_EXPORT_H
#define TBPF_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct profile;
struct calltree;
struct capture_reader;
struct steps;
struct step_schedule;

/* distributedInfo of one process: RANK, WORLD_SIZE and the
 * backend from the target's environment. */
struct export_devprop;

struct export_dist {
	uint32_t pid;
	int rank, world_size;
	const char *backend;
};

enum export_format {
	EXPORT_TABLE,
	EXPORT_JSON,
	EXPORT_CHROME,
	EXPORT_PERFETTO,
	EXPORT_FOLDED,
	EXPORT_PPROF,
	EXPORT_SVG,        /* flame graph, also named "flamegraph" */
	EXPORT_NFORMATS
};

struct tree_opts;
struct export_opts {
	const char *sort;    /* table/json sort key (profile_sort_keys); NULL = self_cpu_time_total */
	long row_limit;      /* table rows: 0 = 100 (torch.profiler's default), < 0 = all */
	bool by_overload;    /* table: one row per (name, overload) instead of name */
	bool by_shape;       /* table: one row per input shapes too, an Input
			      * Shapes column (--group-by-input-shape) */
	bool with_flops;     /* table, json: a FLOPs column (--with-flops) */
	bool metric_count;   /* folded, pprof: op calls instead of self CPU time
			      * (--metric count; export_stacks' metric) */
	unsigned stack_n;    /* table, json: one row per Source Location too, its N
			      * innermost entries (--group-by-stack N; rows' srcloc
			      * set by profile_apply_srcloc); 0: none */
	bool merge;          /* table, tree, json: several processes as one
			      * (--merge); else one section per process */
	/* json: extra top-level members written before the closing brace
	 * (the CUDA tables: "kernels", "copies", ...); NULL = none */
	int (*json_extra)(FILE *out, void *ctx);
	void *json_extra_ctx;
	/* chrome (Kineto layout) and tensorboard */
	uint32_t only_pid;            /* 0: every process; else only its events */
	const struct steps *steps;    /* step boundaries: ProfilerStep#k spans (NULL: found
				       * by export_chrome with step_label) */
	const char *step_label;       /* scope that ends a step (NULL: Optimizer.step#) */
	/* table, tree, json: only the steps sched records, with
	 * ProfilerStep* rows (model_from_capture_steps); NULL: all */
	const struct step_schedule *sched;
	bool step_window;             /* only events that begin in steps [step_first, +step_count) */
	uint32_t step_first, step_count;
	const struct export_dist *dist;   /* distributedInfo by pid */
	size_t ndist;
	const char *trace_name;       /* "traceName" (NULL: none) */
	/* tree (tbpf report): --ops, --min-pct, --layer-filter, colour; NULL:
	 * defaults; the order is .sort's */
	const struct tree_opts *tree;
	const struct export_devprop *devprops;   /* "deviceProperties" */
	size_t ndevprops;
};

/* Every --format name, for usage errors ("tree": report.h's EXPORT_TREE). */
#define EXPORT_FORMAT_LIST "table, tree, json, chrome, perfetto, folded, pprof, svg"
/* "table" -> EXPORT_TABLE ...; -EINVAL when unknown. */
int export_format_parse(const char *name);
/* The format an output file's name asks for without --format (x.svg: the
 * flame graph); -ENOENT when its name says none. */
int export_format_for_path(const char *path);
const char *export_format_name(int fmt);
/* Bytes as torch.profiler's tables show them (_format_memory: "1.50 Mb",
 * "-12 b", powers of 1024).  Returns buf. */
char *export_fmt_memory(char *buf, size_t len, int64_t b);
/* --metric NAME for folded and pprof (torch.profiler's export_stacks
 * metric): "self_cpu_time_total" (false) or "count" (true); -EINVAL for
 * anything else, -ENOTSUP for "self_cuda_time_total" (the call tree has
 * no device times). */
int export_metric_parse(const char *name, bool *count);
/* Formats that need a binary-safe output (perfetto, pprof). */
bool export_format_binary(int fmt);

/* torch.profiler key_averages().table() layout. */
int export_table(FILE *out, const struct profile *p, const struct export_opts *o);
/* JSON document, schema "tbpf.profile/1" (see docs in export_json.c). */
int export_json(FILE *out, const struct profile *p, const struct export_opts *o);
/* Chrome Trace Event JSON from a capture, in Kineto's layout (what
 * torch.profiler's export_chrome_trace writes; shared/reference/formats.md). */
int export_chrome(FILE *out, struct capture_reader *r, const struct export_opts *o);
/* TensorBoard run folder: in dir, for each process of the
 * capture, one Kineto trace per active cycle of sched (NULL or unset: one
 * trace of the whole capture) named {host}_{pid}.{time_ns}.pt.trace.json,
 * time_ns the wall-clock start of the cycle.  Every written path is
 * printed to note (may be NULL) as "tbpf: wrote PATH (steps A-B)".
 * 0 or -errno (*errmsg set). */
struct step_schedule;
int export_tensorboard(const char *dir, struct capture_reader *r, const struct export_opts *o,
		       const struct step_schedule *sched, FILE *note, char **errmsg);
/* Perfetto TracePacket stream from a capture. */
int export_perfetto(FILE *out, struct capture_reader *r, const struct export_opts *o);
/* Folded stacks: "root;...;leaf <self microseconds>" per unique stack. */
int export_folded(FILE *out, const struct calltree *ct, const struct export_opts *o);
/* gzip'd profile.proto: sample types cpu/nanoseconds (self), calls/count. */
int export_pprof(FILE *out, const struct calltree *ct, const struct export_opts *o);
/* Interactive SVG flame graph of the folded stacks (flamegraph.h). */
int export_flamegraph(FILE *out, const struct calltree *ct, const struct export_opts *o);

#endif /* TBPF_EXPORT_H */
