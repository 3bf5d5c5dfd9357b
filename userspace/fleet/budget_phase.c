/* budget_phase.c - control stage: overhead budget (see budget.h), the
 * duty-cycle driver: each target's phases (off, hot, light, all ops), the
 * steady intervals counted in them, the estimates and plan they feed, and
 * the attach and detach of its op probes when a phase is over. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "budget_int.h"
#include "profile.h"

#ifdef HAVE_SESSION
static struct budget_target *bt_find(struct budget *b, pid_t pid)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->t[i].pid == pid)
			return &b->t[i];
	return NULL;
}

static int opkey_cmp(const void *a, const void *b)
{
	const struct prof_op *x = a, *y = b;

	if (x->op_id != y->op_id)
		return x->op_id < y->op_id ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

static const char *const phase_name[] = { "off", "hot set", "light set", "all ops" };

void budget_debug(const char *fmt, ...)
{
	va_list ap;

	if (!getenv("TBPF_BUDGET_DEBUG"))
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* The target's cumulative op rows now, sorted by (op, stack).  Names point
 * into the session's op table. */
static int rows_of(struct session *s, pid_t pid, struct prof_op **rows, size_t *n)
{
	struct profile p;
	size_t k = 0;
	int err;

	*rows = NULL;
	*n = 0;
	profile_init(&p);
	err = session_collect(s, &p);
	if (!err) {
		*rows = calloc(p.nops + 1, sizeof(**rows));
		if (!*rows)
			err = -ENOMEM;
	}
	for (size_t i = 0; !err && i < p.nops; i++)
		if (p.ops[i].pid == (uint32_t)pid) {
			const char *ovl = NULL;

			(*rows)[k] = p.ops[i];
			(*rows)[k].name = session_op_name(s, p.ops[i].op_id, &ovl);
			(*rows)[k].overload = ovl;
			if (!(*rows)[k].name)
				(*rows)[k].name = "?";
			k++;
		}
	profile_free(&p);
	if (!err)
		qsort(*rows, k, sizeof(**rows), opkey_cmp);
	*n = k;
	return err;
}

/* Read the rows and the hit counter; the reading's time is the middle of
 * the read, so an interval between two readings is not biased by their
 * length (a few ms against hot intervals of a few ms). */
static uint64_t read_rows(struct session *s, struct budget_target *t, struct prof_op **rows, size_t *n,
			  uint64_t *hits, uint64_t *cpu, int *err)
{
	uint64_t t0 = mono_ns(), t1, c0 = cpuclock_read(&t->clock), c1;

	*err = rows_of(s, t->pid, rows, n);
	*hits = session_target_hits(s, t->pid);
	c1 = cpuclock_read(&t->clock);
	t1 = mono_ns();
	/* the target's CPU at the same moment: the middle of the read too;
	 * gone (0): the last reading, never 0 (a 0 start would make the
	 * next interval's CPU the whole lifetime's) */
	if (c0 && c1)
		t->cpu_last = c0 + (c1 - c0) / 2;
	*cpu = t->cpu_last;
	return t0 + (t1 - t0) / 2;
}

/* After a discovery (rows d, sorted by op): the hot set is every op seen;
 * the light set, kept while its ops are still seen, is the rarest ops
 * that still come often (>= 10 calls and >= 0.5% of the calls), up to 5%
 * of the calls, at least one.  The light set stays inside the hot set. */
static void choose_sets(struct budget_target *t, const struct prof_op *d, size_t n)
{
	uint32_t *hot = NULL, *light = NULL;
	size_t nh = 0, nl = 0;

	if (budget_sets(d, n, t->light, t->nlight, &hot, &nh, &light, &nl))
		return;   /* nothing ran, or no memory: keep the sets */
	free(t->hot);
	free(t->light);
	t->hot = hot;
	t->nhot = nh;
	t->light = light;
	t->nlight = nl;
	if (getenv("TBPF_BUDGET_DEBUG")) {
		char buf[512];
		size_t k = 0;

		for (size_t i = 0; i < nh && k < sizeof(buf) - 24; i++)
			k += (size_t)snprintf(buf + k, sizeof(buf) - k, " %u%s", hot[i],
					      in_set(light, nl, hot[i]) ? "*" : "");
		budget_debug("budget: pid %d hot set (* light):%s\n", t->pid, buf);
	}
}

static void acc_add(struct budget_acc *a, double ns, double cpu, double hits, double light)
{
	a->ns += ns;
	a->cpu += cpu;
	a->hits += hits;
	a->light += light;
}

/* Close the steady interval: rows now minus the snapshot go to b->steady
 * (hot and full phases) and, after a discovery, choose the sets; the
 * interval's time, CPU, hits and light-set calls feed the window and the
 * estimates.  With reopen the rows now are the next snapshot. */
void bt_steady_cut(struct budget *b, struct session *s, struct budget_target *t,
		   bool reopen)
{
	struct prof_op *cur = NULL, *d = NULL;
	size_t n = 0, nd = 0;
	uint64_t hits = 0, now, cpu, dt, dcpu, dh, light = 0;
	int err;

	if (!t->steady)
		return;
	now = read_rows(s, t, &cur, &n, &hits, &cpu, &err);
	if (!err)
		d = calloc(n + 1, sizeof(*d));
	for (size_t i = 0; d && i < n; i++) {
		const struct prof_op *o = t->nsnap ?
			bsearch(&cur[i], t->snap, t->nsnap, sizeof(*t->snap), opkey_cmp) : NULL;
		struct prof_op x = cur[i];

		if (o) {
			x.calls = x.calls > o->calls ? x.calls - o->calls : 0;
			x.folded = x.folded > o->folded ? x.folded - o->folded : 0;
			x.self_ns = x.self_ns > o->self_ns ? x.self_ns - o->self_ns : 0;
			x.total_ns = x.total_ns > o->total_ns ? x.total_ns - o->total_ns : 0;
			x.launches = x.launches > o->launches ? x.launches - o->launches : 0;
			x.inferred = x.inferred > o->inferred ? x.inferred - o->inferred : 0;
		}
		if (x.calls || x.self_ns || x.folded)
			d[nd++] = x;
	}
	if (t->phase == BP_FULL && d)
		choose_sets(t, d, nd);
	for (size_t i = 0; i < nd; i++) {
		if (in_set(t->light, t->nlight, d[i].op_id))
			light += d[i].calls;
		if (b->steady && (t->phase == BP_HOT || t->phase == BP_FULL))
			profile_add_op(b->steady, &d[i]);
	}
	free(d);
	dt = now > t->steady_start ? now - t->steady_start : 0;
	dcpu = cpu > t->cpu_steady_start ? cpu - t->cpu_steady_start : 0;
	dh = hits > t->hits_steady_start ? hits - t->hits_steady_start : 0;
	acc_add(&t->win[t->phase], (double)dt, (double)dcpu, (double)dh, (double)light);
	acc_add(&t->est[t->phase], (double)dt, (double)dcpu, (double)dh, (double)light);
	free(t->snap);
	t->snap = reopen ? cur : NULL;
	t->nsnap = reopen ? n : 0;
	if (!reopen)
		free(cur);
	t->steady = reopen;
	t->steady_start = now;
	t->cpu_steady_start = cpu;
	t->hits_steady_start = hits;
}

static void steady_open(struct session *s, struct budget_target *t)
{
	int err;

	free(t->snap);
	t->snap = NULL;
	t->nsnap = 0;
	t->steady_start = read_rows(s, t, &t->snap, &t->nsnap, &t->hits_steady_start,
				    &t->cpu_steady_start, &err);
	t->steady = !err;
}


/* The yardstick and the in-target hit cost from the estimates.  Light
 * and hot (or full) phases give two equations in the unprobed CPU per
 * light-set call w and the cost per hit h:
 *   CPU_light = light calls_light x w + hits_light x h
 *   CPU_hot   = light calls_hot x w   + hits_hot x h
 * solved together (hits per light-set call differ: 1 in light phases, the
 * hot set's many in hot phases).  Until the hot phases have enough hits,
 * or when the two barely differ, h stays at its last value (at first the
 * calibration) and w follows from the light phases alone.  Sleepy targets
 * pay several times the calibrated cost per hit (every trap on cold
 * caches): taking the calibration there overstated w by the difference
 * and undercounted by 20%. */
void bt_update_estimates(const struct budget *b, struct budget_target *t)
{
	const struct budget_acc *l = &t->est[BP_LIGHT];
	double cpu, light, hits, det;

	if (l->light < 20)
		return;
	cpu = t->est[BP_HOT].cpu + t->est[BP_FULL].cpu;
	light = t->est[BP_HOT].light + t->est[BP_FULL].light;
	hits = t->est[BP_HOT].hits + t->est[BP_FULL].hits;
	det = l->light * hits - light * l->hits;
	if (hits >= 300 && light >= 20 && det > 0.3 * l->light * hits) {
		double h = (l->light * cpu - light * l->cpu) / det;

		/* a measurement far from the calibration is noise, not news */
		if (h < b->hit_ns / 4)
			h = b->hit_ns / 4;
		if (h > b->hit_ns * 8)
			h = b->hit_ns * 8;
		t->hit_ns = h;
	}
	t->work_per_light = (l->cpu - l->hits * hit_cost(b, t)) / l->light;
	if (t->work_per_light <= 0)
		t->work_per_light = 0;
}

/* The share of the budget for light phases: the yardstick's precision
 * decides the estimates' (hot phases only need a few hundred light-set
 * calls to fix every op's ratio to them). */
#define LIGHT_SHARE 0.4
/* The light time of a period is split into up to this many light phases
 * spread over its off time: the yardstick then samples the target's speed
 * (which drifts on this VM by several percent within a second) all
 * through the period rather than once. */
#define LIGHT_PARTS_MAX 8

/* Re-plan from the estimates: the always-on cost; up to a quarter of the
 * budget for discoveries, LIGHT_SHARE for light phases, the rest (at least
 * a quarter) for hot phases. */
static void replan(struct budget *b, struct budget_target *t)
{
	const struct budget_acc *hp = &t->est[BP_HOT], *fp = &t->est[BP_FULL];
	const struct budget_acc *lp = &t->est[BP_LIGHT];
	double h = hit_cost(b, t), full, disc, light_cost = 0, hot_budget;
	double ns = hp->ns + fp->ns, hits = hp->hits + fp->hits, light = hp->light + fp->light;
	struct budget_plan plan;
	uint64_t min_on, period, light_on = 0, max_full;

	bt_update_estimates(b, t);
	if (ns < 1e6)
		return;
	if (t->work_per_light > 0 && light > 0) {
		full = hits / light / t->work_per_light * h;
	} else {
		double base = (hp->cpu + fp->cpu - hits * h) / ns;

		full = hits / ns * h / (base > 0.01 ? base : 0.01);
	}
	if (full <= b->limit) {
		t->always_on = true;
		memset(&t->plan, 0, sizeof(t->plan));
		t->plan.duty = 1;
		t->plan.full_overhead = t->plan.overhead = full;
		return;
	}
	t->always_on = false;
	max_full = b->rediscover_ns / 4;
	t->on_ns[BP_FULL] = budget_discovery_on(full, b->limit / 4, b->rediscover_ns,
						b->min_full_ns,
						max_full > b->min_full_ns ? max_full : b->min_full_ns,
						&disc);
	if (t->nlight && t->work_per_light > 0 && lp->light > 0)
		light_cost = lp->hits / lp->light * h / t->work_per_light;
	else if (t->nlight)
		light_cost = full / 10;   /* not measured yet: a guess, corrected next time */
	hot_budget = b->limit - disc - (t->nlight ? b->limit * LIGHT_SHARE : 0);
	if (hot_budget < b->limit / 4)
		hot_budget = b->limit / 4;
	/* the detach's wall time is mostly the kernel waiting for a grace
	 * period after the breakpoints are out: it costs the target nothing */
	min_on = 2 * t->att_ns[BP_HOT] + b->min_on_ns;
	if (min_on < b->min_on_ns)
		min_on = b->min_on_ns;
	if (min_on > b->period_ns / 2)
		min_on = b->period_ns / 2;
	/* the hot cost as a fraction: rate 1/s x full s/hit, base 1 CPU */
	if (budget_plan(1, full * 1e9, 1, hot_budget, b->period_ns, min_on, b->max_period_ns,
			&plan))
		return;
	period = plan.on_ns + plan.off_ns;
	t->light_parts = 1;
	if (light_cost > 0) {
		double duty = b->limit * LIGHT_SHARE / light_cost;
		uint64_t min_l = 2 * t->att_ns[BP_LIGHT] + b->min_on_ns, parts;

		light_on = (uint64_t)(duty * (double)period);
		if (light_on < min_l)
			light_on = min_l;
		if (light_on > plan.off_ns / 2)
			light_on = plan.off_ns / 2;
		parts = light_on / (min_l ? min_l : 1);
		t->light_parts = parts < 1 ? 1 : parts > LIGHT_PARTS_MAX ? LIGHT_PARTS_MAX : (uint32_t)parts;
	}
	t->on_ns[BP_HOT] = plan.on_ns;
	t->on_ns[BP_LIGHT] = light_on / t->light_parts;
	t->on_ns[BP_OFF] = plan.off_ns - light_on;
	t->plan = plan;
	t->plan.full_overhead = full;
	t->plan.overhead = plan.duty * full + disc +
			   (period ? (double)light_on / (double)period * light_cost : 0);
}

/* Add the hits since hits_on_start to the window.  The per-pid counter
 * reads 0 once the session dropped an exited target: no new hits then. */
void bt_take_hits(struct session *s, struct budget_target *t)
{
	uint64_t h = session_target_hits(s, t->pid);

	if (h > t->hits_on_start) {
		t->hits_window += h - t->hits_on_start;
		t->hits_on_start = h;
	}
}

/* An on phase runs from the start of its attach to the end of its
 * detach; only its steady part, all its probes in, is counted. */
static void set_off(struct budget *b, struct session *s, struct budget_target *t, uint64_t now)
{
	uint64_t done;

	bt_steady_cut(b, s, t, false);
	session_set_enabled(s, t->pid, false);
	done = mono_ns();
	bt_take_hits(s, t);
	t->on_ns_window += done - t->on_mark_ns;
	budget_debug("budget: pid %d %s off in %.2f ms\n", t->pid, phase_name[t->phase],
		     (done - now) / 1e6);
	replan(b, t);
	t->phase = BP_OFF;
	t->since_ns = done;
}

static void set_on(struct session *s, struct budget_target *t, enum budget_phase ph,
		   uint64_t now)
{
	uint64_t done, hits = session_target_hits(s, t->pid);
	int err = ph == BP_FULL ? session_set_enabled(s, t->pid, true) :
		  ph == BP_HOT ? session_set_enabled_ops(s, t->pid, true, t->hot, t->nhot) :
		  session_set_enabled_ops(s, t->pid, true, t->light, t->nlight);

	if (err)
		return;   /* gone: stays off */
	done = mono_ns();
	t->phase = ph;
	t->since_ns = t->on_mark_ns = now;
	t->hits_on_start = hits;
	t->att_ns[ph] = done - now;
	steady_open(s, t);
	budget_debug("budget: pid %d %s on in %.2f ms\n", t->pid, phase_name[ph], (done - now) / 1e6);
}

static void adopt(struct budget *b, struct session *s, pid_t pid, uint64_t now)
{
	struct budget_target *t, *v = realloc(b->t, (b->n + 1) * sizeof(*v));

	if (!v)
		return;
	b->t = v;
	t = &b->t[b->n++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->phase = BP_FULL;        /* the session attached all of its ops */
	t->since_ns = t->on_mark_ns = now;
	t->hits_on_start = session_target_hits(s, pid);
	if (cpuclock_open(&t->clock, pid)) {
		b->n--;   /* already gone */
		return;
	}
	t->cpu_last = t->cpu_window_start = cpuclock_read(&t->clock);
	t->adopted_ns = t->seen_ns = now;
	t->on_ns[BP_FULL] = b->min_full_ns;
	t->next_full_ns = now + b->rediscover_ns;
	t->coverage = t->full_coverage = 1;
	steady_open(s, t);
}

static bool has_hot_phases(const struct budget_target *t)
{
	return !t->always_on && t->nhot && t->on_ns[BP_HOT];
}

static bool has_light_phases(const struct budget_target *t)
{
	return !t->always_on && t->nlight && t->on_ns[BP_LIGHT];
}

/* When t's current phase ends. */
static uint64_t phase_end(const struct budget *b, const struct budget_target *t)
{
	uint64_t end;

	switch (t->phase) {
	case BP_FULL:
		if (t->always_on)
			return t->since_ns + b->recheck_ns;   /* re-check the plan */
		return t->since_ns + t->on_ns[BP_FULL];
	case BP_HOT:
	case BP_LIGHT:
		if (t->always_on)
			return t->since_ns;   /* off, then on with all ops */
		return t->since_ns + t->on_ns[t->phase];
	case BP_OFF:
	default:
		if (t->always_on)
			return t->since_ns;
		if (!has_hot_phases(t) && !(t->light_next && has_light_phases(t)))
			return t->next_full_ns;
		/* hot, then off and light light_parts times, then off: the
		 * off time in light_parts + 1 equal parts */
		end = t->since_ns + (has_light_phases(t) ? t->on_ns[BP_OFF] / (t->light_parts + 1)
							  : t->on_ns[BP_OFF]);
		return end < t->next_full_ns ? end : t->next_full_ns;
	}
}

uint64_t budget_next_ns(const struct budget *b)
{
	uint64_t next = UINT64_MAX;

	for (size_t i = 0; i < b->n; i++) {
		uint64_t e = b->t[i].dead ? UINT64_MAX : phase_end(b, &b->t[i]);

		if (e < next)
			next = e;
	}
	return next;
}

void budget_tick(struct budget *b, struct session *s, uint64_t now)
{
	size_t nt = session_ntargets(s);

	if (!b->window_start_ns)
		b->window_start_ns = now;
	for (size_t i = 0; i < nt; i++) {
		const struct session_target_info *ti = session_target(s, i);

		if (ti && ti->alive && !bt_find(b, ti->pid))
			adopt(b, s, ti->pid, now);
	}
	for (size_t i = 0; i < b->n; i++) {
		struct budget_target *t = &b->t[i];
		uint64_t cpu = cpuclock_read(&t->clock);
		enum budget_phase was = t->phase;

		if (!cpu) {
			t->dead = true;   /* budget_window drops it */
			continue;
		}
		t->cpu_last = cpu;
		t->seen_ns = now;
		if (now < phase_end(b, t))
			continue;
		if (was == BP_FULL) {
			/* is the target within budget with every op in?  (an
			 * idle target may have become busy, or the reverse) */
			bt_steady_cut(b, s, t, true);
			replan(b, t);
			if (t->always_on) {
				t->since_ns = now;
				continue;
			}
		}
		if (was != BP_OFF) {
			set_off(b, s, t, now);
			/* light phases come an off part after a hot phase (away
			 * from the toggles' after-effects in the target) and
			 * after a discovery, light_parts of them with off parts
			 * between */
			if (was != BP_LIGHT)
				t->light_left = t->light_parts;
			else if (t->light_left)
				t->light_left--;
			t->light_next = t->light_left > 0;
			continue;
		}
		if (now >= t->next_full_ns && !t->always_on) {
			t->next_full_ns = now + b->rediscover_ns;
			set_on(s, t, BP_FULL, mono_ns());
		} else if (t->light_next && has_light_phases(t)) {
			t->light_next = false;
			set_on(s, t, BP_LIGHT, mono_ns());
		} else if (!has_hot_phases(t)) {
			if (!t->always_on)
				t->next_full_ns = now + b->rediscover_ns;
			set_on(s, t, BP_FULL, mono_ns());
		} else {
			set_on(s, t, BP_HOT, mono_ns());
		}
	}
}
#else
void budget_tick(struct budget *b, struct session *s, uint64_t now) {}
uint64_t budget_next_ns(const struct budget *b) { return UINT64_MAX; }
#endif
