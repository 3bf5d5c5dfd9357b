/* options.h - command stage: the live command's options (cli.c fills
 * them, live.c runs them).  Parsers for durations and sizes: units.h. */
#ifndef TBPF_OPTIONS_H
#define TBPF_OPTIONS_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "session.h"
#include "steps.h"
#include "units.h"

/* Steps and TensorBoard output, shared by the live command and
 * `tbpf report`: STEP_LONGOPTS in the getopt table, step_opt() for each
 * result (1 taken, 0 not, -EINVAL with *why). */
struct step_opts {
	const char *tensorboard;          /* --tensorboard DIR */
	const char *label;                /* --step-on LABEL (NULL: Optimizer.step#) */
	struct step_schedule sched;       /* --steps N / --schedule SPEC */
};
enum { OPT_STEP_TB = 0x1100, OPT_STEP_N, OPT_STEP_SCHED, OPT_STEP_ON };
#define STEP_LONGOPTS \
	{ "tensorboard", required_argument, NULL, OPT_STEP_TB }, \
	{ "steps", required_argument, NULL, OPT_STEP_N }, \
	{ "schedule", required_argument, NULL, OPT_STEP_SCHED }, \
	{ "step-on", required_argument, NULL, OPT_STEP_ON }
int step_opt(int c, const char *arg, struct step_opts *so, char **why);

/* --uprobes, --inproc, or neither (recorder.h) */
enum recorder { RECORDER_AUTO, RECORDER_UPROBES, RECORDER_INPROC };

struct live_opts {
	struct session_select sel;  /* --pid, --comm, --cgroup, --exits, --ring-size */
	uint64_t duration_ns;      /* 0 = until Ctrl-C or the target exits */
	const char *format;        /* table json tree chrome perfetto folded pprof */
	const char *out;           /* -o FILE; a .tbpf file records a capture */
	const char *record;        /* capture path when recording */
	const char *sort;
	long row_limit;            /* -1 = all */
	bool python;               /* walk Python stacks */
	bool cuda;                 /* probe libcudart/libcuda */
	bool no_multi;             /* force per-probe attach (testing) */
	bool redispatch;           /* probe ::redispatch too (boxed-path ops) */
	bool by_overload;          /* table rows per overload */
	bool merge;                /* --merge: several processes in one table */
	bool record_shapes;        /* --record-shapes: input shapes at op entry */
	bool by_shape;             /* --group-by-input-shape: rows per shapes */
	bool with_flops;           /* --with-flops: FLOPs column (needs shapes) */
	unsigned stack_n;          /* --group-by-stack N: Source Location rows */
	bool metric_count;         /* --metric count: folded/pprof count calls */
	bool tree_ops;             /* --format tree: ops under each layer */
	double min_pct;            /* --format tree: hide smaller rows */
	const char *layer_filter;  /* --format tree: --layer-filter SUBSTR */
	bool wait_torch;           /* tbpf run: attach once the pid maps libtorch */
	/* tbpf run: let the held command exec, once tbpf can hold it again
	 * where it maps libtorch */
	void (*release)(void *ctx);
	void *release_ctx;
	/* tbpf run --inproc handed the command over to the uprobe mode (an
	 * unverified torch): already stopped where it mapped libtorch, so
	 * attach at once and continue it */
	bool run_stopped;
	bool inject;               /* --inject: load the CUPTI agent */
	bool inject_force;         /* --inject-force: the same as --inject */
	const char *cupti;         /* --cupti PATH: the libcupti the agent opens
				    * where the job maps none (validate_cupti) */
	enum recorder recorder;    /* as named: --inproc, --uprobes, neither */
	bool inproc;               /* the RecordFunction agent records (recorder.h) */
	bool recorder_auto;        /* ... chosen by tbpf: it falls back with a line */
	bool gpu_run;              /* tbpf run: the driver loads the agent */
	bool memory;               /* --profile-memory */
	uint32_t mem_map_size;     /* --mem-map-size: live CPU allocations kept */
	int verbose;
	struct step_opts steps;    /* --tensorboard, --steps, --schedule, --step-on */
};

/* The options the live command and the daemon share (struct
 * session_select): SELECT_LONGOPTS in their getopt_long tables ('p' for
 * --pid), select_opt() for each getopt_long result.  Returns 1 when c was
 * one of them (taken into sel), 0 when not, -EINVAL for a bad value with
 * *why (malloc'd, "invalid --exits 'x' (auto, return, infer)").  sel->pids
 * holds max_pids. */
enum { OPT_SEL_COMM = 0x1000, OPT_SEL_CGROUP, OPT_SEL_EXITS, OPT_SEL_RING };
#define SELECT_LONGOPTS \
	{ "pid", required_argument, NULL, 'p' }, \
	{ "comm", required_argument, NULL, OPT_SEL_COMM }, \
	{ "cgroup", required_argument, NULL, OPT_SEL_CGROUP }, \
	{ "exits", required_argument, NULL, OPT_SEL_EXITS }, \
	{ "ring-size", required_argument, NULL, OPT_SEL_RING }
int select_opt(int c, const char *arg, struct session_select *sel, size_t max_pids, char **why);

#endif
