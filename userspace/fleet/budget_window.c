/* budget_window.c - control stage: overhead budget (see budget.h), its
 * state and the window close: each target's coverage, probe cost and own
 * CPU in the window, the rows of its steady intervals (scaled where only
 * discoveries saw them), exited targets dropped; and the per-pid figures
 * the metrics read from the last window. */
#include <stdlib.h>
#include <string.h>
#include "budget_int.h"
#include "profile.h"

void budget_init(struct budget *b, double limit, double hit_ns)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
	b->hit_ns = hit_ns;
	b->period_ns = 1000000000ULL;
	b->min_on_ns = 2000000ULL;        /* hot phases: tens of uprobes */
	b->max_period_ns = 10000000000ULL;
	b->rediscover_ns = 60000000000ULL;
	b->min_full_ns = 50000000ULL;     /* discoveries: thousands */
	b->recheck_ns = 250000000ULL;
	b->overhead = -1;
	b->steady = calloc(1, sizeof(*b->steady));
	if (b->steady)
		profile_init(b->steady);
}

static void free_mix(struct budget_target *t)
{
	for (size_t j = 0; j < t->nmix; j++) {
		free((char *)t->mix[j].name);
		free((char *)t->mix[j].overload);
	}
	free(t->mix);
	t->mix = NULL;
	t->nmix = 0;
}

/* What a target owns: at budget_free, and when it is dropped (exited). */
static void target_free(struct budget_target *t)
{
	free(t->snap);
	free(t->hot);
	free(t->light);
	free_mix(t);
	cpuclock_close(&t->clock);
}

void budget_free(struct budget *b)
{
	for (size_t i = 0; i < b->n; i++)
		target_free(&b->t[i]);
	free(b->t);
	free(b->gone);
	if (b->steady)
		profile_free(b->steady);
	free(b->steady);
	memset(b, 0, sizeof(*b));
}

void budget_steady_reset(struct budget *b)
{
	if (!b->steady)
		return;
	profile_free(b->steady);
	profile_init(b->steady);
}

bool budget_tracks(const struct budget *b, pid_t pid)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->t[i].pid == pid)
			return true;
	return false;
}

/* pid's figures from the last window: a target still budgeted, or one
 * dropped there (exited).  false when pid is neither. */
static bool last_window(const struct budget *b, pid_t pid, double *coverage,
			double *probe_cpu, double *base_cpu)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->t[i].pid == pid) {
			*coverage = b->t[i].coverage;
			*probe_cpu = b->t[i].probe_cpu;
			*base_cpu = b->t[i].base_cpu;
			return true;
		}
	for (size_t i = 0; i < b->ngone; i++)
		if (b->gone[i].pid == pid) {
			*coverage = b->gone[i].coverage;
			*probe_cpu = b->gone[i].probe_cpu;
			*base_cpu = b->gone[i].base_cpu;
			return true;
		}
	return false;
}

double budget_coverage(const struct budget *b, pid_t pid)
{
	double coverage, probe_cpu, base_cpu;

	return last_window(b, pid, &coverage, &probe_cpu, &base_cpu) ? coverage : 1;
}

bool budget_cost(const struct budget *b, pid_t pid, double *probe_cpu, double *base_cpu)
{
	double coverage;

	return last_window(b, pid, &coverage, probe_cpu, base_cpu) && *base_cpu > 0;
}

#ifdef HAVE_SESSION
/* Scale a row's counts and times by f (estimates from partial coverage). */
static void scale_op(struct prof_op *o, double f)
{
	o->calls = (uint64_t)(o->calls * f + 0.5);
	o->folded = (uint64_t)(o->folded * f + 0.5);
	o->self_ns = (uint64_t)(o->self_ns * f + 0.5);
	o->total_ns = (uint64_t)(o->total_ns * f + 0.5);
	o->launches = (uint64_t)(o->launches * f + 0.5);
}

/* The op mix of the target's last window with hot or full phases: its
 * rows as counted, per light-set call seen.  The names are copied: the
 * rows' own point into b->steady, emptied every window. */
static void keep_mix(const struct budget *b, struct budget_target *t, double seen)
{
	struct prof_op *v;
	size_t n = 0;

	if (!b->steady)
		return;
	v = calloc(b->steady->nops + 1, sizeof(*v));
	if (!v)
		return;
	for (size_t j = 0; j < b->steady->nops; j++) {
		struct prof_op o = b->steady->ops[j];

		if (o.pid != (uint32_t)t->pid)
			continue;
		o.name = strdup(o.name ? o.name : "?");
		o.overload = strdup(o.overload ? o.overload : "");
		if (!o.name || !o.overload) {
			free((char *)o.name);
			free((char *)o.overload);
			continue;
		}
		v[n++] = o;
	}
	free_mix(t);
	t->mix = v;
	t->nmix = n;
	t->mix_light = seen;
}

/* Rows for `light` light-set calls at the last mix, into b->steady. */
static void add_from_mix(struct budget *b, struct budget_target *t, double light)
{
	double f = t->mix_light > 0 ? light / t->mix_light : 0;

	for (size_t j = 0; b->steady && f > 0 && j < t->nmix; j++) {
		struct prof_op o = t->mix[j];

		scale_op(&o, f);
		o.max_ns = 0;
		o.inferred = (uint64_t)(o.inferred * f + 0.5);
		if (o.calls || o.self_ns)
			profile_add_op(b->steady, &o);
	}
}

/* The window's light-set calls: counted in its steady light, hot and full
 * phases (the light set is probed in all three), and for the rest of the
 * window (off phases, attaches and detaches) the CPU spent there, its
 * probe hits' cost removed, over w, the unprobed CPU per light-set call.
 * Only the uncounted part depends on the CPU yardstick, whose error
 * follows the vCPU's speed from moment to moment. */
static double light_total(const struct budget_target *t, double cpu_all, double h, double w)
{
	double counted = 0, cpu = 0, hits = 0, rest;

	for (int p = BP_HOT; p <= BP_FULL; p++) {
		counted += t->win[p].light;
		cpu += t->win[p].cpu;
		hits += t->win[p].hits;
	}
	rest = cpu_all - cpu - ((double)t->hits_window > hits ? (double)t->hits_window - hits : 0) * h;
	return counted + (rest > 0 && w > 0 ? rest / w : 0);
}

void budget_window(struct budget *b, struct session *s, uint64_t now)
{
	double added = 0, base_total = 0;
	size_t k = 0;

	free(b->gone);
	b->ngone = 0;
	b->gone = calloc(b->n + 1, sizeof(*b->gone));
	for (size_t i = 0; i < b->n; i++) {
		struct budget_target *t = &b->t[i];
		uint64_t cpu = cpuclock_read(&t->clock);
		bool gone = !cpu;
		double life, cpu_all, h, probe_cpu, seen, seen_full;
		bool counted;

		if (t->phase != BP_OFF) {
			t->on_ns_window += now - t->on_mark_ns;
			t->on_mark_ns = now;
			bt_take_hits(s, t);
			bt_steady_cut(b, s, t, !gone);
		}
		if (gone)
			cpu = t->cpu_last;
		bt_update_estimates(b, t);
		h = hit_cost(b, t);
		{
			uint64_t from = t->adopted_ns > b->window_start_ns ? t->adopted_ns
									  : b->window_start_ns;
			uint64_t to = gone ? t->seen_ns : now;

			life = to > from ? (double)(to - from) : 0;
		}
		cpu_all = cpu > t->cpu_window_start ? (double)(cpu - t->cpu_window_start) : 0;
		probe_cpu = (double)t->hits_window * h;
		seen = t->win[BP_HOT].light + t->win[BP_FULL].light;
		seen_full = t->win[BP_FULL].light;
		t->by_time = false;
		counted = t->win[BP_HOT].ns + t->win[BP_FULL].ns > 0;
		if (!counted && life > 0 && t->nmix &&
		    t->win[BP_LIGHT].light > 0 && t->work_per_light > 0 && cpu_all > probe_cpu) {
			/* only light phases in this window (the target exited, or
			 * the window was shorter than its off time): its light-set
			 * calls were counted, the other ops come from the last mix */
			double l = t->win[BP_LIGHT].light;
			double total = light_total(t, cpu_all, h, t->work_per_light);

			add_from_mix(b, t, l);
			t->coverage = t->full_coverage = l < total ? l / total : 1;
		} else if (!counted || life <= 0) {
			t->coverage = t->full_coverage = 1;   /* nothing counted: nothing to scale */
		} else if (t->work_per_light > 0 && seen > 0 && cpu_all > probe_cpu) {
			/* this window's own yardstick when it measured enough (the
			 * target's speed drifts), else the running estimate */
			const struct budget_acc *lw = &t->win[BP_LIGHT];
			double w = lw->light >= 500 ? (lw->cpu - lw->hits * h) / lw->light : 0;
			double total = light_total(t, cpu_all, h, w > 0 ? w : t->work_per_light);

			t->coverage = seen < total ? seen / total : 1;
			t->full_coverage = seen_full < total ? seen_full / total : 1;
		} else {
			double st = t->win[BP_HOT].ns + t->win[BP_FULL].ns;

			t->by_time = true;
			t->coverage = st < life ? st / life : 1;
			t->full_coverage = t->win[BP_FULL].ns < life ? t->win[BP_FULL].ns / life : 1;
		}
		if (t->coverage <= 0)
			t->coverage = 1e-3;
		if (seen > 0)
			keep_mix(b, t, seen);
		/* ops outside the hot set were seen in discoveries only */
		if (t->win[BP_FULL].ns > 0 && t->full_coverage > 0 &&
		    t->full_coverage < t->coverage && b->steady) {
			double f = t->coverage / t->full_coverage;

			for (size_t j = 0; j < b->steady->nops; j++) {
				struct prof_op *o = &b->steady->ops[j];

				if (o->pid != (uint32_t)t->pid || in_set(t->hot, t->nhot, o->op_id))
					continue;
				scale_op(o, f);
			}
		}
		t->probe_cpu = t->base_cpu = 0;
		if (life > 0 && cpu_all > 0) {
			t->probe_cpu = probe_cpu;
			t->base_cpu = cpu_all > probe_cpu ? cpu_all - probe_cpu : cpu_all;
			added += t->probe_cpu;
			base_total += t->base_cpu;
		}
		budget_debug("budget: pid %d window %.3f s: probes in %.3f s, %llu hits at %.0f ns, %.0f ns CPU per light call; steady "
			     "hot %.3f s light %.3f s all %.3f s; light-set calls hot %.0f light %.0f all "
			     "%.0f (%zu light ops, %zu hot); cpu %.3f s; coverage %.4f (all ops %.4f)%s; "
			     "plan hot %.1f light %.1f off %.1f ms, all ops %.1f ms every %.0f s; "
			     "always-on cost %.1f%%, planned %.2f%%\n",
			     t->pid, life / 1e9, t->on_ns_window / 1e9, (unsigned long long)t->hits_window,
			     h, t->work_per_light, t->win[BP_HOT].ns / 1e9, t->win[BP_LIGHT].ns / 1e9,
			     t->win[BP_FULL].ns / 1e9, t->win[BP_HOT].light, t->win[BP_LIGHT].light,
			     t->win[BP_FULL].light, t->nlight, t->nhot, cpu_all / 1e9, t->coverage,
			     t->full_coverage, t->by_time ? " by time" : "", t->on_ns[BP_HOT] / 1e6,
			     t->on_ns[BP_LIGHT] / 1e6, t->on_ns[BP_OFF] / 1e6, t->on_ns[BP_FULL] / 1e6,
			     b->rediscover_ns / 1e9, t->plan.full_overhead * 100, t->plan.overhead * 100);
		/* the estimates follow the target: older windows weigh half */
		for (int p = 0; p < 4; p++) {
			t->est[p].ns /= 2;
			t->est[p].cpu /= 2;
			t->est[p].hits /= 2;
			t->est[p].light /= 2;
		}
		memset(t->win, 0, sizeof(t->win));
		t->cpu_window_start = cpu;
		t->on_ns_window = 0;
		t->hits_window = 0;
		if (!gone) {
			b->t[k++] = *t;
		} else {
			target_free(t);
			if (b->gone) {
				b->gone[b->ngone].pid = t->pid;
				b->gone[b->ngone].probe_cpu = t->probe_cpu;
				b->gone[b->ngone].base_cpu = t->base_cpu;
				b->gone[b->ngone++].coverage = t->coverage;
			}
		}
	}
	b->n = k;
	b->overhead = base_total > 0 ? added / base_total : -1;
	b->window_start_ns = now;
}
#else
void budget_window(struct budget *b, struct session *s, uint64_t now) {}
#endif
