/* budget.c - control stage: overhead budget (see budget.h): planner,
 * calibration of the probe cost in our own process, duty-cycle driver. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "tbpf.skel.h"
#include "tbpf_abi.h"
#include "budget.h"
#include "procmaps.h"
#include "profile.h"
#include "uprobe.h"
#if __has_include("session.h")
#include "session.h"
#define HAVE_SESSION 1
#endif

int budget_plan(double hit_rate, double hit_ns, double base_cpu, double budget,
		uint64_t period_ns, uint64_t min_on_ns, uint64_t max_period_ns,
		struct budget_plan *out)
{
	double duty, period = (double)period_ns;

	if (hit_rate < 0 || hit_ns < 0 || budget <= 0 || !period_ns || min_on_ns > period_ns ||
	    max_period_ns < period_ns)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	/* a target that barely runs costs its own CPU; count at least 1% of
	 * a CPU so an idle process with stray hits still gets a duty cycle */
	if (base_cpu < 0.01)
		base_cpu = 0.01;
	out->full_overhead = hit_rate * hit_ns / 1e9 / base_cpu;
	duty = out->full_overhead > 0 ? budget / out->full_overhead : 1;
	if (duty >= 1) {
		out->on_ns = period_ns;
		out->off_ns = 0;
		out->duty = 1;
		out->overhead = out->full_overhead;
		return 0;
	}
	/* short on windows cost an attach each: stretch the period instead,
	 * up to max_period, then accept the longer on window */
	if (duty * period < (double)min_on_ns) {
		period = (double)min_on_ns / duty;
		if (period > (double)max_period_ns)
			period = (double)max_period_ns;
		out->on_ns = min_on_ns;
	} else {
		out->on_ns = (uint64_t)(duty * period + 0.5);
	}
	out->off_ns = period > (double)out->on_ns ? (uint64_t)(period + 0.5) - out->on_ns : 0;
	out->duty = (double)out->on_ns / (double)(out->on_ns + out->off_ns);
	out->overhead = out->duty * out->full_overhead;
	return 0;
}

uint64_t budget_discovery_on(double full_overhead, double share, uint64_t rediscover_ns,
			     uint64_t min_ns, uint64_t max_ns, double *overhead)
{
	double on;

	if (full_overhead <= 0 || share <= 0)
		on = (double)max_ns;
	else
		on = share * (double)rediscover_ns / full_overhead;
	if (on > (double)max_ns)
		on = (double)max_ns;
	if (on < (double)min_ns)
		on = (double)min_ns;
	if (overhead)
		*overhead = rediscover_ns ? on * full_overhead / (double)rediscover_ns : 0;
	return (uint64_t)(on + 0.5);
}

struct opcount { uint32_t id; uint64_t calls; };

static int opcount_cmp(const void *a, const void *b)
{
	const struct opcount *x = a, *y = b;

	if (x->calls != y->calls)
		return x->calls < y->calls ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool in_set(const uint32_t *v, size_t n, uint32_t id)
{
	return n && bsearch(&id, v, n, sizeof(*v), u32_cmp);
}

int budget_sets(const struct prof_op *d, size_t n, const uint32_t *light, size_t nlight,
		uint32_t **hot_out, size_t *nhot_out, uint32_t **light_out, size_t *nlight_out)
{
	struct opcount *c;
	uint32_t *hot, *nl_ids;
	size_t k = 0, nh = 0, nl = 0;
	uint64_t total = 0, cum = 0;
	bool keep_light = false;

	for (size_t i = 0; i < n; i++)
		total += d[i].calls;
	if (!total)
		return -ENODATA;
	total = 0;
	c = calloc(n + 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!d[i].calls && !d[i].self_ns && !d[i].folded)
			continue;
		if (k && c[k - 1].id == d[i].op_id)
			c[k - 1].calls += d[i].calls;
		else
			c[k++] = (struct opcount){ d[i].op_id, d[i].calls };
		total += d[i].calls;
		if (d[i].calls && in_set(light, nlight, d[i].op_id))
			keep_light = true;
	}
	hot = calloc(k + nlight + 1, sizeof(*hot));
	nl_ids = calloc(k + nlight + 1, sizeof(*nl_ids));
	if (!hot || !nl_ids) {
		free(c);
		free(hot);
		free(nl_ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++)   /* ascending: d is sorted by op */
		hot[nh++] = c[i].id;
	if (keep_light) {
		for (size_t i = 0; i < nlight; i++) {
			nl_ids[nl++] = light[i];
			if (!in_set(hot, k, light[i]))
				hot[nh++] = light[i];
		}
	} else {
		qsort(c, k, sizeof(*c), opcount_cmp);
		for (size_t i = 0; i < k; i++) {
			if (c[i].calls < 10 || c[i].calls * 200 < total)
				continue;
			if (nl && (cum + c[i].calls) * 20 > total)
				break;
			nl_ids[nl++] = c[i].id;
			cum += c[i].calls;
		}
	}
	qsort(hot, nh, sizeof(*hot), u32_cmp);
	qsort(nl_ids, nl, sizeof(*nl_ids), u32_cmp);
	free(c);
	*hot_out = hot;
	*nhot_out = nh;
	*light_out = nl_ids;
	*nlight_out = nl;
	return 0;
}

/* ---- calibration ----------------------------------------------------- */

/* The probed function starts with push %rbp like libtorch's ops, so the
 * kernel emulates it (the fast path); written in asm so the compiler
 * cannot drop the frame setup of a leaf. */
asm(".text\n"
    ".globl budget_probe_target\n"
    ".type budget_probe_target, @function\n"
    "budget_probe_target:\n"
    "\tpush %rbp\n"
    "\tmov %rsp, %rbp\n"
    "\tlea 1(%rdi), %eax\n"
    "\tpop %rbp\n"
    "\tret\n"
    ".size budget_probe_target, .-budget_probe_target\n");
int budget_probe_target(int x);

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double time_loop(int n)
{
	volatile int acc = 0;
	uint64_t t0 = mono_ns();

	for (int i = 0; i < n; i++)
		acc = budget_probe_target(acc);
	return (double)(mono_ns() - t0) / n;
}

static int self_file_offset(uint64_t addr, char **path, uint64_t *off)
{
	struct pm_maps m = { 0 };
	const struct pm_entry *e;
	int err = procmaps_read(getpid(), &m);

	if (err)
		return err;
	e = procmaps_find(&m, addr);
	if (!e || !e->path) {
		procmaps_free(&m);
		return -ENOENT;
	}
	*off = addr - e->start + e->offset;
	*path = strdup(e->path);
	procmaps_free(&m);
	return *path ? 0 : -ENOMEM;
}

int budget_calibrate(double *hit_ns)
{
	struct tbpf_bpf *skel;
	struct uprobe_set set = { 0 };
	uint64_t off, cookie = 1;
	char *path = NULL;
	double base = 1e30, probed = 1e30;
	bool multi = uprobe_multi_supported() == 1;
	int err, n = 200000;

	err = self_file_offset((uint64_t)(uintptr_t)budget_probe_target, &path, &off);
	if (err)
		return err;
	skel = tbpf_bpf__open();
	if (!skel) {
		free(path);
		return -errno ? -errno : -ENOMEM;
	}
	/* the op entry program as the daemon runs it: infer mode, our pid */
	skel->rodata->tbpf_mode = 0;
	skel->rodata->targ_tgid = (uint32_t)getpid();
	if (multi) {
		struct bpf_program *p;

		bpf_object__for_each_program(p, skel->obj)
			if (bpf_program__type(p) == BPF_PROG_TYPE_KPROBE)
				bpf_program__set_expected_attach_type(p, TBPF_ATTACH_UPROBE_MULTI);
	}
	bpf_map__set_max_entries(skel->maps.events, 4096);
	err = tbpf_bpf__load(skel);
	if (err)
		goto out;
	for (int r = 0; r < 3; r++) {
		double t = time_loop(n);

		if (t < base)
			base = t;
	}
	err = uprobe_set_attach(&set, skel->progs.tbpf_op_entry, path, &off, &cookie, 1, false,
				getpid(), multi);
	if (err)
		goto out;
	for (int r = 0; r < 5; r++) {
		double t = time_loop(n / 4);

		if (t < probed)
			probed = t;
	}
	*hit_ns = probed > base ? probed - base : 0;
out:
	uprobe_set_close(&set);
	tbpf_bpf__destroy(skel);
	free(path);
	return err;
}

/* ---- driver -------------------------------------------------------- */

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

static void debug(const char *fmt, ...)
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
		debug("budget: pid %d hot set (* light):%s\n", t->pid, buf);
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
static void steady_cut(struct budget *b, struct session *s, struct budget_target *t,
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

static double hit_cost(const struct budget *b, const struct budget_target *t)
{
	return t->hit_ns > 0 ? t->hit_ns : b->hit_ns;
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
static void update_estimates(const struct budget *b, struct budget_target *t)
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

	update_estimates(b, t);
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
static void take_hits(struct session *s, struct budget_target *t)
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

	steady_cut(b, s, t, false);
	session_set_enabled(s, t->pid, false);
	done = mono_ns();
	take_hits(s, t);
	t->on_ns_window += done - t->on_mark_ns;
	debug("budget: pid %d %s off in %.2f ms\n", t->pid, phase_name[t->phase],
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
	debug("budget: pid %d %s on in %.2f ms\n", t->pid, phase_name[ph], (done - now) / 1e6);
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
			steady_cut(b, s, t, true);
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
			take_hits(s, t);
			steady_cut(b, s, t, !gone);
		}
		if (gone)
			cpu = t->cpu_last;
		update_estimates(b, t);
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
		debug("budget: pid %d window %.3f s: probes in %.3f s, %llu hits at %.0f ns, %.0f ns CPU per light call; steady "
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
void budget_tick(struct budget *b, struct session *s, uint64_t now) {}
void budget_window(struct budget *b, struct session *s, uint64_t now) {}
uint64_t budget_next_ns(const struct budget *b) { return UINT64_MAX; }
#endif
