/* daemon.h - `tbpf daemon`: continuous system-wide collection in rolling
 * windows -> Prometheus /metrics, rotated pprof files, Pyroscope push. */
#ifndef TBPF_DAEMON_H
#define TBPF_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "session.h"

struct daemon_opts {
	const char *listen;          /* host:port; NULL = 127.0.0.1:9464; "" or "none" = no server */
	uint64_t window_ns;          /* 10 s */
	uint64_t duration_ns;        /* stop after (tests, benchmarks); 0 = until a signal */
	const char *pprof_dir;
	unsigned keep;               /* pprof files kept (default 10) */
	const char *push_url;        /* Pyroscope-compatible ingest base URL */
	const char *app;             /* Pyroscope application name (default "tbpf") */
	const char *job;             /* --label job=NAME */
	const char **label_keys, **label_vals;   /* other --label k=v */
	size_t nlabels;
	size_t top_n;                /* ops per job (default 20) */
	double max_overhead;         /* 0 = probes always on */
	/* --pid/--comm/--cgroup, --exits (default infer: no ptrace; infer
	 * when budgeted), --ring-size: the CUDA record ring (default 2 MiB) */
	struct session_select sel;
	bool no_cuda;                /* no libcudart/libcuda probes */
	bool memory;                 /* --profile-memory: per-op bytes */
	/* --inproc: the RecordFunction agent in each --pid target
	 * instead of uprobes (fleet/daemon_inproc.c); the agent's path */
	bool inproc;
	bool uprobes;                /* --uprobes: the uprobe recorder named */
	bool recorder_auto;          /* inproc chosen by tbpf: back to uprobes with a line */
	const char *inproc_agent;
	/* --inject (--inject-force): with --inproc, the CUPTI agent too */
	bool inject, inject_force;
	const char *cupti_agent;     /* libtbpf_agent.so (NULL: not found) */
	int verbose;
};

/* Run until a signal or o->duration_ns.  0, or -errno after a message on
 * stderr: -EPERM without root, session_open's errors, -EIO for the rest. */
int daemon_run(const struct daemon_opts *o);

struct session;
struct metrics_copy_row;
/* The window's CUDA copies per process and direction from s's CUDA model
 * (rows malloc'd, count returned), which then starts over. */
size_t daemon_window_copies(struct session *s, struct metrics_copy_row **rows);

/* daemon_run with o->inproc: -EAGAIN (after one line) when a target's
 * torch has no verified layout: the caller runs daemon_run without it. */
int daemon_inproc_run(const struct daemon_opts *o);

#endif /* TBPF_DAEMON_H */
