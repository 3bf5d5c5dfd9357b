/* live_steps.h - the live command's outputs from a capture that the uprobe
 * mode (live.c) and --inproc (live_inproc.c) share: steps, TensorBoard,
 * the model to -o. */
#ifndef TBPF_LIVE_STEPS_H
#define TBPF_LIVE_STEPS_H
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
/* The host's GPUs for Kineto's deviceProperties; free eo->devprops after. */
void live_query_devices(struct export_opts *eo);
/* --tensorboard DIR from the capture; 0 or the exit code. */
/* The output after a run failed (render_rc nonzero, its line printed):
 * the run is not lost, the capture at path holds it; one line says where
 * and how to render it again.  True when the caller must keep the file
 * (a temporary capture it would remove). */
/* Model m as export format f (EXPORT_TREE too) to -o, or stdout.  When
 * the file cannot be written the output goes to stdout after one line
 * saying so: a run whose result is in no capture is not lost.  0 or the
 * exit code. */
struct tree_opts;
int live_write_model(const struct live_opts *o, const struct export_opts *eo, int f,
		     const struct tbpf_model *m, struct tree_opts *to);
/* An empty result (export_empty_why) is never silent: its line on stderr;
 * the exit status stays 0. */
struct tree_opts;
void live_warn_empty(const struct live_opts *o, const struct export_opts *eo, const char *fmt,
		     const struct tbpf_model *m, const struct tree_opts *to);
bool live_keep_capture(const struct live_opts *o, const char *path, int render_rc);
int live_tensorboard(const struct live_opts *o, const char *capture_path,
		     const struct live_dist *ld);
/* --format tree / table / json of m to -o.  0 or the exit code. */
int live_render_model(const struct live_opts *o, const struct export_opts *eo, const char *fmt,
		      const struct tbpf_model *m);
/* --steps / --schedule: table, tree and json of the active steps only,
 * from the capture (model_from_capture_steps, as `tbpf report --steps`).
 * 0 or the exit code. */
int live_render_steps(const struct live_opts *o, const struct export_opts *eo, const char *fmt,
		      const char *capture_path);

#endif
