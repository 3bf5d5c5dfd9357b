/* steps.h - model stage: training steps seen from outside.
 *
 * A step boundary is the end of a record_function scope the job opens once
 * per iteration: by default the optimizer's (`Optimizer.step#SGD.step`,
 * any optimizer), else the label given with --step-on.  Step k of a
 * process runs from its boundary k to its boundary k+1 (so the part before
 * the first boundary is no whole step and belongs to none), numbered from
 * 0 as torch.profiler numbers ProfilerStep#k.
 *
 * A schedule (torch.profiler.schedule's skip_first, wait, warmup, active,
 * repeat) picks the active steps: cycle c records steps
 * [skip_first + c*(wait+warmup+active) + wait + warmup, ... + active).
 * --steps N is the schedule active=N, repeat=1.
 *
 * Pure parts (names, schedules, boundaries from records) are fed by the
 * capture (steps_from_capture) and by the live session's records
 * (steps_watch: when to stop).
 */
#ifndef TBPF_STEPS_H
#define TBPF_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

struct capture_reader;

/* Default boundary: every optimizer's step scope. */
#define STEPS_DEFAULT_LABEL "Optimizer.step#"

/* Does scope `name` mark a boundary for `label` (NULL: the default)?  A
 * label ending in '#' matches every name it starts; another label the
 * name itself, or the name followed by '#'. */
bool steps_label_match(const char *label, const char *name);

struct step_stats;

struct step_schedule {
	uint32_t skip_first, wait, warmup, active, repeat;   /* repeat 0: no end */
	bool set;                                            /* --steps / --schedule given */
};

/* "skip_first=1,wait=1,warmup=1,active=3,repeat=2" (any order, any subset;
 * active defaults to 1) -> *s.  0, or -EINVAL (*bad: the offending part). */
int steps_schedule_parse(const char *spec, struct step_schedule *s, const char **bad);
/* Active cycle c: its first step and count; false when the schedule has no
 * cycle c. */
bool steps_cycle(const struct step_schedule *s, uint32_t c, uint32_t *first, uint32_t *count);
/* Is step k recorded by the schedule (in an active cycle)? */
bool steps_is_active(const struct step_schedule *s, uint32_t k);
/* Keep only the steps s records; with st (NULL: none), only those of the
 * window steps_last_cycle chose for each process. */
struct steps;
void step_stats_keep_active(struct step_stats *ss, const struct step_schedule *s,
			    const struct steps *st);
/* Time t of process pid is in a step s records (tables, trees
 * and JSON cut to the active steps, as torch.profiler's key_averages
 * covers only them).  Pure. */
struct steps;
bool steps_window_has(const struct steps *st, const struct step_schedule *s, uint32_t pid,
		      uint64_t t);
/* The last active cycle of each process that has at least one whole step
 * (its whole steps), as the window of steps_window_has and
 * step_stats_keep_active (torch.profiler's key_averages() after
 * a repeating schedule covers the last cycle on_trace_ready saw, and a
 * partial one when the profiler stopped inside it).  A process with no
 * whole active step keeps none.  Pure. */
void steps_last_cycle(struct steps *st, const struct step_schedule *s);
/* Boundaries a process must show before the schedule is complete (stop
 * then); 0 when the schedule never ends (repeat 0). */
uint64_t steps_bounds_needed(const struct step_schedule *s);

/* Boundaries per process, in time order. */
struct step_proc {
	uint32_t pid, tid;          /* tid: the thread of the first boundary; the others are ignored */
	uint64_t *t;                /* boundary times (CLOCK_MONOTONIC ns) */
	size_t n, cap;
	/* steps_last_cycle: the steps [win_first, win_first + win_count) */
	bool win_set;
	uint32_t win_first, win_count;
};
struct step_pending { uint32_t pid, tid; uint64_t t; };
struct steps {
	struct step_proc *v;
	size_t n, cap;
	/* threads whose boundary scope ended inside an enclosing op or
	 * scope: the step ends when that outermost one does */
	struct step_pending *pend;
	size_t npend, cpend;
};

void steps_free(struct steps *st);
/* One boundary of (pid, tid) at t.  0 or -ENOMEM. */
int steps_add(struct steps *st, uint32_t pid, uint32_t tid, uint64_t t);
/* An op or scope exit o at t; boundary: it is the step label's scope.  A
 * boundary at depth 0 is added at once; one nested in a user scope (a
 * `train_step` label around the optimizer) when the thread's outermost
 * frame ends, so ProfilerStep spans never cut an open span.  A frame that
 * never closes (seen on torch 1.13 when attach races an op) must not
 * stall the steps: a pending boundary that meets the thread's next one
 * is added at its own time, and steps_flush adds those left.  0/-ENOMEM. */
int steps_exit(struct steps *st, const struct rec_op *o, uint64_t t, bool boundary);
/* The pending boundaries, at their own times (end of a replay). */
int steps_flush(struct steps *st);
const struct step_proc *steps_proc(const struct steps *st, uint32_t pid);
/* Step k of p: [*begin, *end); false when p has no whole step k. */
bool steps_range(const struct step_proc *p, uint32_t k, uint64_t *begin, uint64_t *end);
/* Every boundary in capture r (scope exits whose name matches label) from
 * the run's start on (the "attached" time: ops before it ran while the
 * probes and the Python walker were being set up).  0, -EINVAL (reader
 * error) or -ENOMEM. */
int steps_from_capture(struct capture_reader *r, const char *label, struct steps *st);

/* Per step: its time, the time of the outermost ops and scopes
 * on the boundaries' thread in it (op_ns), the gaps between them (gap_ns =
 * dur_ns - op_ns: Python, data loading, idle) and the longest gap, and the
 * op calls (scopes not counted) of the whole process that began in it. */
struct step_stat {
	uint32_t pid, tid, k;
	uint64_t begin_ns, dur_ns, op_ns, gap_ns, max_gap_ns, ops;
	uint64_t last_end;          /* while adding: end of the last outermost slice */
};
struct step_stats {
	struct step_stat *v;
	size_t n, cap;
};
/* One slot per whole step of st.  0 or -ENOMEM. */
int step_stats_init(struct step_stats *ss, const struct steps *st);
/* One op slice (pure: from a timeline). */
void step_stats_add(struct step_stats *ss, uint32_t pid, uint32_t tid, uint32_t op_id,
		    uint32_t depth, uint64_t begin_ns, uint64_t end_ns);
/* The gaps up to each step's end. */
void step_stats_finish(struct step_stats *ss);
/* All of it from capture r (st: its boundaries).  0, -EINVAL or -ENOMEM. */
int step_stats_from_capture(struct capture_reader *r, const struct steps *st,
			    struct step_stats *ss);
void step_stats_free(struct step_stats *ss);

/* Live: boundaries counted from ring records as they arrive. */
struct steps_watch {
	const char *label;
	uint64_t after_ns;          /* boundaries before it are not counted */
	uint32_t *ids;              /* scope ids whose name matches */
	size_t nids, cids;
	struct steps seen;
};
/* A scope's name (the uprobe mode's scope-name records, --inproc's
 * op table): ids whose name matches the label are boundaries.  0/-ENOMEM. */
int steps_watch_name(struct steps_watch *w, uint32_t scope_id, const char *name);
/* One ring record (a scope name, an op end; others ignored). 0 or -ENOMEM. */
int steps_watch_feed(struct steps_watch *w, const struct rec_hdr *h, size_t size);
/* Boundaries seen for pid so far. */
size_t steps_watch_count(const struct steps_watch *w, uint32_t pid);
void steps_watch_free(struct steps_watch *w);

#endif /* TBPF_STEPS_H */
