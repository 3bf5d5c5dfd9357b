/* budget.h - control stage: --max-overhead.  Calibrate the per-hit probe
 * cost, estimate each target's added cost from its hit rate and CPU time,
 * and duty-cycle its op probes (attach/detach in windows) to stay within
 * the budget.  The planner is pure; the driver calls the session. */
#ifndef TBPF_BUDGET_H
#define TBPF_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "cpuclock.h"

struct budget_plan {
	uint64_t on_ns, off_ns;    /* probes attached for on_ns, then off for off_ns */
	double duty;               /* on / (on + off) */
	double full_overhead;      /* added cost / base CPU with probes always on */
	double overhead;           /* expected with this plan: duty * full_overhead */
};

/* Pure planner.  hit_rate: probe hits per second of attached time;
 * hit_ns: cost of one hit; base_cpu: the target's own CPU seconds per
 * second without probes; budget: allowed added fraction (0.01 = 1%).
 * period_ns: preferred on+off period; min_on_ns: shortest useful on
 * window (attach cost); max_period_ns: longest period.  0 or -EINVAL. */
int budget_plan(double hit_rate, double hit_ns, double base_cpu, double budget,
		uint64_t period_ns, uint64_t min_on_ns, uint64_t max_period_ns,
		struct budget_plan *out);

/* Per-hit cost in ns of the op entry program, measured in this process:
 * a loop calling a noinline function with and without an entry probe on
 * it.  -errno on failure. */
int budget_calibrate(double *hit_ns);

/* Discovery (all ops attached) once per rediscover_ns, given the cost
 * with all probes in (full_overhead, a fraction of the target's CPU) and
 * the share of the budget it may use: the on time, clamped to
 * [min_ns, max_ns].  The overhead it adds on average goes to *overhead. */
uint64_t budget_discovery_on(double full_overhead, double share, uint64_t rediscover_ns,
			     uint64_t min_ns, uint64_t max_ns, double *overhead);

/* The sets after a discovery whose op rows are d (sorted by op id): hot
 * = every op with calls or time; light = the old light set while any of
 * its ops still has calls (added to hot), else the rarest ops with >= 10
 * calls and >= 0.5% of all calls, taken while they stay within 5% of the
 * calls (at least one).  Both sorted, caller frees.  -ENODATA when no op
 * had calls (keep the old sets), -ENOMEM. */
struct prof_op;
int budget_sets(const struct prof_op *d, size_t n, const uint32_t *light, size_t nlight,
		uint32_t **hot, size_t *nhot, uint32_t **new_light, size_t *nnew_light);

/* ---- driver -------------------------------------------------------- */
struct session;

struct prof_op;

/* A budgeted target cycles through four states (docs/fleet.md):
 *   off    no op probes;
 *   hot    entry probes on the ops seen in the last discovery only (tens
 *          of uprobes, in and out in milliseconds): the counted calls;
 *   light  entry probes on the light set only, a few of the rarest hot
 *          ops: nearly free, it measures how many light-set calls the
 *          target makes per second of its own (unprobed) CPU;
 *   full   all ops (thousands of uprobes): the discovery of the hot set,
 *          once per rediscover_ns.
 * The light-set calls are the yardstick of the target's work: a window's
 * total is its CPU (probe cost removed) times the light rate, and counts
 * seen in hot and full phases are scaled by total / light-set calls seen
 * there.  The per-hit cost in the target follows from the same figures. */
enum budget_phase { BP_OFF, BP_HOT, BP_LIGHT, BP_FULL };

struct budget_acc {           /* steady intervals of one kind of phase */
	double ns, cpu, hits, light;   /* time, target CPU, probe hits, light-set calls */
};

struct budget_target {
	pid_t pid;
	struct cpuclock clock;     /* its CPU time, up to date */
	enum budget_phase phase;
	struct prof_op *snap;      /* its op rows when the probes were last fully in */
	size_t nsnap;
	bool steady;               /* snap taken: counting from it */
	uint64_t steady_start, cpu_steady_start, hits_steady_start;
	uint64_t since_ns;         /* start of the current phase (its attach) */
	uint64_t hits_on_start;    /* probe hit counter when the phase's attach began */
	uint64_t cpu_window_start; /* target CPU ns at window start */
	uint64_t cpu_last;         /* last reading (kept when the target exits) */
	uint64_t adopted_ns, seen_ns;    /* first and last time seen alive */
	uint64_t att_ns[4];        /* last attach time per phase */
	uint64_t on_mark_ns;       /* probe time counted into on_ns_window up to here */
	uint64_t next_full_ns;     /* next discovery */
	uint64_t on_ns[4];         /* planned on time per phase; off: off time */
	uint32_t *hot, *light;     /* op ids, sorted */
	size_t nhot, nlight;
	/* this window */
	struct budget_acc win[4];
	uint64_t hits_window;      /* probe hits while any probes were in */
	uint64_t on_ns_window;     /* time with any probes in */
	/* decaying over windows: the estimates */
	struct budget_acc est[4];
	double hit_ns;             /* per-hit cost measured in this target, 0 unknown */
	double work_per_light;     /* unprobed CPU ns per light-set call, 0 unknown */
	struct budget_plan plan;   /* always-on cost and the expected overhead */
	bool always_on;            /* within budget with every op probed */
	bool light_next;           /* the next on phase is a light one */
	uint32_t light_parts;      /* light phases per period (on_ns[BP_LIGHT] each) */
	uint32_t light_left;       /* ... still to come in this period */
	bool dead;                 /* exited: nothing more to schedule */
	double coverage;           /* last window: share of its work observed */
	double probe_cpu, base_cpu;     /* last window: probe cost and own CPU, ns */
	struct prof_op *mix;       /* rows of its last window with hot/full phases */
	size_t nmix;
	double mix_light;          /* light-set calls seen in those phases */
	double full_coverage;      /* ... with all ops in */
	bool by_time;              /* coverage from time, no light-set measure */
};

struct budget {
	double limit, hit_ns;
	uint64_t period_ns, min_on_ns, max_period_ns;
	uint64_t rediscover_ns, min_full_ns;
	uint64_t recheck_ns;       /* all ops in and within budget: measure again after */
	uint64_t window_start_ns;
	struct budget_target *t;
	size_t n;
	double overhead;           /* last window's estimate over all targets, < 0 unknown */
	struct profile *steady;    /* op calls seen with the probes fully in, this window */
	struct { pid_t pid; double coverage, probe_cpu, base_cpu; } *gone;   /* dropped at the last window */
	size_t ngone;
};

void budget_init(struct budget *b, double limit, double hit_ns);
void budget_free(struct budget *b);
/* Toggle targets whose on/off phase is over; adopt new session targets
 * (attached, so on).  Call often (every poll). */
void budget_tick(struct budget *b, struct session *s, uint64_t now_ns);
/* When budget_tick next has something to do (monotonic ns), UINT64_MAX
 * when never. */
uint64_t budget_next_ns(const struct budget *b);
/* Window end: closes the targets' steady intervals into b->steady (the
 * op rows counted between "all probes in" and "detach begins": calls made
 * while uprobes were going in or out are left out, they would bias the
 * estimate), computes each target's coverage (share of its lifetime in
 * the window spent in steady intervals), drops exited targets.  Rows of
 * ops outside the hot set, observed only in discoveries, are pre-scaled
 * by coverage / full coverage, so that scaling every row of the target by
 * 1 / coverage (what the metrics do) scales them by 1 / full coverage.
 * The caller takes the rows of b->steady for the budget's pids
 * (budget_tracks) and then calls budget_steady_reset. */
void budget_window(struct budget *b, struct session *s, uint64_t now_ns);
bool budget_tracks(const struct budget *b, pid_t pid);
void budget_steady_reset(struct budget *b);
/* Coverage of pid computed by the last budget_window (1 when unknown). */
double budget_coverage(const struct budget *b, pid_t pid);
/* pid's probe cost and its own CPU (probe cost removed) in the last
 * window, ns; false when pid is not budgeted or had no CPU. */
bool budget_cost(const struct budget *b, pid_t pid, double *probe_cpu, double *base_cpu);

#endif /* TBPF_BUDGET_H */
