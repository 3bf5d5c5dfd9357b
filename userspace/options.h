/* options.h - command-line stage: the live command's options and the pure
 * parsers for durations and sizes (unit-tested). */
#ifndef TBPF_OPTIONS_H
#define TBPF_OPTIONS_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum exits_mode { EXITS_AUTO = 0, EXITS_RETURN, EXITS_INFER };

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
	/* tbpf run: let the held command exec, once tbpf can hold it again
	 * where it maps libtorch (issue 13) */
	void (*release)(void *ctx);
	void *release_ctx;
	bool inject;               /* --inject: load the CUPTI agent (issue 6) */
	bool inject_force;         /* --inject-force: even with libcupti mapped */
	bool gpu_run;              /* tbpf run: the driver loads the agent (issue 6) */
	const char *comm;          /* system-wide filters */
	const char *cgroup;
	int verbose;
};

/* "10s", "500ms", "2m", "1h", "1.5s", bare number = seconds.  0 / -EINVAL. */
int parse_duration(const char *s, uint64_t *ns);
/* "64M", "512K", "1G", bare number = bytes.  0 / -EINVAL. */
int parse_size(const char *s, uint64_t *bytes);
/* Round up to a power of two of at least one page (ring buffer sizes). */
uint64_t ring_size_round(uint64_t bytes);

#endif
