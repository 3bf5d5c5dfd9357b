/* live_steps.h - the live command's output, one render for the uprobe
 * recorder (live.c) and the in-process one (live_inproc.c): the model or
 * the capture as --format asks, steps, TensorBoard. */
#ifndef TBPF_LIVE_STEPS_H
#define TBPF_LIVE_STEPS_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "export.h"
#include "options.h"

struct tbpf_model;

/* The distributed workers among the targets (read while they run). */
struct live_dist {
	struct export_dist v[64];
	size_t n;
};
/* pid's distributedInfo (RANK, WORLD_SIZE in its environment) when it is
 * a distributed worker; nothing otherwise. */
void live_dist_add(struct live_dist *ld, pid_t pid);
/* Where a recorder's model is finished from: the session that named its
 * stacks and holds its CUDA model (NULL: none, an in-process run without
 * Python stacks or CUDA probes), and the processes for their sections. */
struct live_finish {
	struct session *s;
	bool cuda;     /* CUDA probed: the CUDA tables and rows */
	bool python;   /* Python stacks walked: the layer tree can be built */
	bool low32;    /* stack ids in their low 32 bits (session_srcloc) */
	const struct model_proc_info *procs;
	size_t nprocs;
};
/* The collected model finished as a capture's is for table, tree and json
 * (live_renders_model): CUDA tables and call rows, the layer tree where
 * the format shows it, --group-by-stack's sources, a section per process.
 * A step that cannot be done is said in one line; 0 or the exit code. */
struct session;
struct model_proc_info;
int live_finish_model(const struct live_opts *o, const struct live_finish *f, struct tbpf_model *m);
/* The output after a run failed (render_rc nonzero, its line printed):
 * the run is not lost, the capture at path holds it; one line says where
 * and how to render it again.  True when the caller must keep the file
 * (a temporary capture it would remove). */
bool live_keep_capture(const struct live_opts *o, const char *path, int render_rc);
/* --tensorboard DIR from the capture; 0 or the exit code. */
int live_tensorboard(const struct live_opts *o, const char *capture_path,
		     const struct live_dist *ld);
/* Whether live_render renders a finished model (table, tree, json of the
 * whole run) rather than the capture at capture_path (trace formats, the
 * steps of --steps/--schedule) or nothing (--record alone): the recorder
 * finishes its model (CUDA rows, layer tree, sources, sections) only then. */
bool live_renders_model(const struct live_opts *o, const char *capture_path);
/* The run's output as --format asks, to -o, for either recorder: model m
 * (finished; NULL: render from the capture) or the capture at
 * capture_path (NULL: none), records its record count for --record's line
 * (0: not known).  When -o cannot be written a model goes to stdout after
 * one line saying so; an empty result gets its line on stderr.  0 or the
 * exit code. */
int live_render(const struct live_opts *o, const struct tbpf_model *m, const char *capture_path,
		uint64_t records);

#endif
