/* options.h - command stage: the live command's options (cli.c fills
 * them, live.c runs them).  Parsers for durations and sizes: units.h. */
#ifndef TBPF_OPTIONS_H
#define TBPF_OPTIONS_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "session.h"
#include "units.h"

struct live_opts {
	pid_t *pids;
	size_t npids;
	uint64_t duration_ns;      /* 0 = until Ctrl-C or the target exits */
	const char *format;        /* table json tree chrome perfetto folded pprof */
	const char *out;           /* -o FILE; a .tbpf file records a capture */
	const char *record;        /* capture path when recording */
	const char *sort;
	long row_limit;            /* -1 = all */
	enum exits_mode exits;
	uint64_t ring_size;
	bool python;               /* walk Python stacks */
	bool cuda;                 /* probe libcudart/libcuda */
	bool no_multi;             /* force per-probe attach (testing) */
	bool redispatch;           /* probe ::redispatch too (boxed-path ops) */
	bool by_overload;          /* table rows per overload */
	bool tree_ops;             /* --format tree: ops under each layer */
	double min_pct;            /* --format tree: hide smaller rows */
	bool wait_torch;           /* tbpf run: attach once the pid maps libtorch */
	bool inject;               /* --inject: load the CUPTI agent (issue 6) */
	bool inject_force;         /* --inject-force: even with libcupti mapped */
	bool gpu_run;              /* tbpf run: the driver loads the agent (issue 6) */
	const char *comm;          /* system-wide filters */
	const char *cgroup;
	int verbose;
};

#endif
