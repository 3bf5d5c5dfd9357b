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

/* ---- driver -------------------------------------------------------- */
struct session;

struct prof_op;

struct budget_target {
	pid_t pid;
	struct prof_op *snap;      /* its op rows when the probes were last fully in */
	size_t nsnap;
	bool steady;               /* snap taken: counting from it */
	uint64_t steady_ns, cpu_steady_ns;   /* this window: time and CPU fully attached */
	uint64_t steady_start, cpu_steady_start;
	bool on;
	uint64_t since_ns;         /* last toggle (attach done) */
	uint64_t on_ns_window;     /* attached time in the current window */
	uint64_t cpu_window_start; /* target CPU ns at window start */
	uint64_t cpu_at_on;        /* target CPU ns when the on phase began */
	uint64_t cpu_on_ns;        /* target CPU ns spent in on phases this window */
	uint64_t cpu_last;         /* last reading (kept when the target exits) */
	uint64_t hits;             /* last window */
	uint64_t adopted_ns, seen_ns;    /* first and last time seen alive */
	uint64_t attach_ns, detach_ns;   /* last attach and detach took */
	struct budget_plan plan;
	double coverage;           /* last window: share of its work observed */
};

struct budget {
	double limit, hit_ns;
	uint64_t period_ns, min_on_ns, max_period_ns;
	uint64_t window_start_ns;
	struct budget_target *t;
	size_t n;
	double overhead;           /* last window's estimate over all targets, < 0 unknown */
	struct profile *steady;    /* op calls seen with the probes fully in, this window */
	struct { pid_t pid; double coverage; } *gone;   /* dropped at the last window */
	size_t ngone;
};

void budget_init(struct budget *b, double limit, double hit_ns);
void budget_free(struct budget *b);
/* Toggle targets whose on/off phase is over; adopt new session targets
 * (attached, so on).  Call often (every poll). */
void budget_tick(struct budget *b, struct session *s, uint64_t now_ns);
/* Window end: closes the targets' steady intervals into b->steady (the
 * op rows counted between "all probes in" and "detach begins": calls made
 * while uprobes were going in or out are left out, they would bias the
 * estimate), computes each target's coverage (share of its own CPU work
 * done in steady intervals, probe cost removed; hits_per_call converts
 * calls to probe hits), re-plans it, drops exited targets.  The caller
 * takes the rows of b->steady for the budget's pids (budget_tracks) and
 * then calls budget_steady_reset. */
void budget_window(struct budget *b, struct session *s, double hits_per_call, uint64_t now_ns);
bool budget_tracks(const struct budget *b, pid_t pid);
void budget_steady_reset(struct budget *b);
/* Coverage of pid computed by the last budget_window (1 when unknown). */
double budget_coverage(const struct budget *b, pid_t pid);

/* CPU time of all threads of a process in ns (schedstat), 0 when gone. */
uint64_t budget_proc_cpu_ns(pid_t pid);

#endif /* TBPF_BUDGET_H */
