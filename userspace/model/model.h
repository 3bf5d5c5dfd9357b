/* model.h - model stage: the one events -> op / layer / kernel model that
 * every command renders (exporters/report.h).
 *
 * Two feeds, one model:
 *   capture  model_from_capture(r, parts, &m): ONE replay of the capture
 *            (capture/replay.h): op records -> profile rows (profile_agg),
 *            device activity + launches -> device times (join/gpucap),
 *            CUDA records -> cuda_model; then names and run info from the meta tables
 *            and the layer tree from the STACK records.
 *   records  model_feed (--inproc): op records and op names
 *            handed over as they arrive go through the same profile_agg
 *            as a capture replay, with an in-memory meta table, so no
 *            capture file grows with the run.
 *   live     the session (collect/) fills m.prof from the BPF maps, points
 *            m.cuda at its CUDA model, and builds m.tree with model_layers
 *            from the stacks it symbolized.
 * A new event kind: its record -> one more replay sink here (and the
 * session's record callback for live), one more part of struct tbpf_model,
 * and the exporters that show it.
 */
#ifndef TBPF_MODEL_H
#define TBPF_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "capture.h"
#include "cuda_model.h"
#include "cuda_ops.h"
#include "layers.h"
#include "memory.h"
#include "profile.h"
#include "steps.h"

enum model_part {
	MODEL_CUDA = 1 << 0,      /* kernels, copies, syncs, allocations */
	MODEL_LAYERS = 1 << 1,    /* the nn.Module layer tree */
	MODEL_LAYERS_WITH_CUDA = 1 << 2,   /* the tree only beside CUDA tables */
};

/* One process of a run with several: its own rows, layer tree
 * and steps, for the per-process sections of tables, trees and JSON. */
struct model_proc {
	uint32_t pid;
	const char *cmdline, *torch;        /* "" unknown */
	struct tbpf_model *m;
};
/* What the feed knows of a process: its command line and torch version. */
struct model_proc_info {
	uint32_t pid;
	const char *cmdline, *torch;
};

struct tbpf_model {
	struct profile prof;                /* op rows, run info, device times */
	const struct cuda_model *cuda;      /* NULL: no CUDA tables */
	struct layer_tree *tree;            /* NULL: no Python stacks (or not asked) */
	/* op id -> name, for the CUDA tables */
	const char *(*op_name)(void *ctx, uint32_t id);
	void *op_name_ctx;
	const struct step_stats *steps;     /* per-step times; NULL: none */
	struct cuda_model cuda_own;         /* the capture's (cuda points here) */
	bool cuda_own_init;
	/* --profile-memory: live at the end, peaks (NULL: not profiled) */
	const struct mem_model *mem;
	uint32_t mem_pid;                   /* a process's part: mem's rows of it */
	struct mem_model mem_own;           /* the capture's (mem points here) */
	bool mem_own_init;
	/* several processes (model_split): one part each, pid order; 0
	 * parts: one process, or --merge */
	struct model_proc *procs;
	size_t nprocs;
	/* model_from_capture_steps: the boundaries and the active steps */
	struct steps steps_bounds;
	struct step_stats steps_own;
};

void model_init(struct tbpf_model *m);
/* Frees what the model owns (prof, tree, cuda_own); a live m.cuda is the
 * session's. */
void model_free(struct tbpf_model *m);

/* One replay of the capture r -> m (model_init first): always the op rows
 * with device times and run info; parts adds the CUDA tables (m->cuda set
 * when the capture has CUDA records) and the layer tree (m->tree set when
 * it has Python stacks; with the CUDA rows when both).  0, -EINVAL
 * (corrupt capture: capture_reader_error) or -ENOMEM. */
int model_from_capture(struct capture_reader *r, unsigned parts, struct tbpf_model *m);
/* model_from_capture, cut to the steps sched records (--steps /
 * --schedule): only the ops (and [memory] records) that begin in
 * an active step of their process (boundaries: label's scope, NULL the
 * optimizer's), one PROF_STEP_ROW call per active step, m->steps the
 * active steps.  As torch.profiler's key_averages() after a schedule.
 * The CUDA and memory tables are cut the same way (a record is kept when
 * its time is in an active step of its process). */
struct step_schedule;
int model_from_capture_steps(struct capture_reader *r, unsigned parts, const char *label,
			     const struct step_schedule *sched, struct tbpf_model *m);
/* One part per process when the run has several (m->procs, pid order):
 * each with the rows of its pid, its steps (from m->steps), its CUDA
 * tables (cuda_model_of_pid), its memory rows (mem_pid) and, when
 * m->tree is set, its own layer tree over the layer stacks ls; command
 * line and torch version from info (by pid; missing: "").  Nothing when
 * one process.  0 or -ENOMEM. */
int model_split(struct tbpf_model *m, const struct layer_stack *ls, size_t nls,
		const struct model_proc_info *info, size_t ninfo);
/* The same from the capture's meta tables (process records, stacks). */
int model_split_capture(struct tbpf_model *m, const struct capture_meta *meta);

/* The op rows only (diff, tests): model_from_capture without parts, into
 * an initialized profile. */
int profile_from_capture(struct capture_reader *r, struct profile *p);
/* The op rows and the call tree (calltree_init'ed) in the same one replay
 * (tbpf diff: ops and layers). */
struct calltree;
int profile_calltree_from_capture(struct capture_reader *r, struct profile *p,
				  struct calltree *ct);

/* The layer tree of the rows of p over the layer stacks ls, with the CUDA
 * model's launches, copies and syncs when cm is not empty (cm may be
 * NULL).  Live and capture alike.  0 or -ENOMEM; *out NULL on error. */
int model_layers(const struct profile *p, const struct layer_stack *ls, size_t nls,
		 const struct cuda_model *cm, struct layer_tree **out);

/* Pure: layer_stack views of the capture's stacks: the CF_LAYER frames
 * (innermost first in the capture) outermost first; stack ids cut to the
 * low 32 bits, as op and CUDA records carry them.  *v and each names /
 * classes array are malloc'd: free with capture_layer_stacks_free.
 * 0 or -ENOMEM. */
int capture_layer_stacks(const struct capture_meta *m, struct layer_stack **v, size_t *n);
void capture_layer_stacks_free(struct layer_stack *v, size_t n);

/* ---- records fed as they arrive (--inproc) ------------------- */
struct model_feed;
/* Rows into m->prof (model_init'ed); m->op_name names ids from the feed's
 * table (valid until model_feed_free). */
struct model_feed *model_feed_new(struct tbpf_model *m);
int model_feed_name(struct model_feed *f, uint32_t op_id, const char *name, const char *overload);
/* One op start or end record; 0 or -errno. */
int model_feed_record(struct model_feed *f, const struct rec_hdr *h);
/* The feed's module-call sink (module calls into its rows), for another
 * bus to take: the --inproc BPF session's ring, whose module calls never
 * pass model_feed_record.  Valid until model_feed_free; an error it met
 * (out of memory) is model_feed_finish's if it came before. */
struct bus_sink;
struct bus_sink model_feed_modcall_sink(struct model_feed *f);
/* An input shape list (--record-shapes) by its id, as the shape record
 * gives it to a capture's meta table. */
int model_feed_shape(struct model_feed *f, uint64_t shape_id, const struct tbpf_shape *s);
/* Close the open frames, name the rows, take the run info of run/end (as a
 * capture's run and end records would give it).  0 or -errno. */
int model_feed_finish(struct model_feed *f, const struct capture_run *run,
		      const struct capture_end *end);
void model_feed_free(struct model_feed *f);

#endif /* TBPF_MODEL_H */
