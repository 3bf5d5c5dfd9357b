/* budget_int.h - the overhead budget's state helpers, shared by its
 * files: budget.c (the pure planner, the calibration of the probe cost),
 * budget_phase.c (each target's phases: steady intervals, estimates,
 * re-planning, toggling its probes), budget_window.c (the budget's state,
 * the window close and the per-pid figures it leaves).  Not for other
 * stages: they use budget.h. */
#ifndef TBPF_BUDGET_INT_H
#define TBPF_BUDGET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include "budget.h"
#if __has_include("session.h")
#include "session.h"
#define HAVE_SESSION 1
#endif


static inline int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static inline bool in_set(const uint32_t *v, size_t n, uint32_t id)
{
	return n && bsearch(&id, v, n, sizeof(*v), u32_cmp);
}

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline double hit_cost(const struct budget *b, const struct budget_target *t)
{
	return t->hit_ns > 0 ? t->hit_ns : b->hit_ns;
}

/* budget_phase.c, for the window close */
void budget_debug(const char *fmt, ...);
/* Add the hits since the phase's last reading to the window. */
void bt_take_hits(struct session *s, struct budget_target *t);
/* Close t's steady interval into the window and the estimates; with
 * reopen the next one starts now. */
void bt_steady_cut(struct budget *b, struct session *s, struct budget_target *t,
		   bool reopen);
/* The yardstick and the in-target hit cost from the estimates. */
void bt_update_estimates(const struct budget *b, struct budget_target *t);

#endif /* TBPF_BUDGET_INT_H */
