/* budget.c - control stage: overhead budget (see budget.h): planner,
 * calibration of the probe cost in our own process, duty-cycle driver. */
#include <dirent.h>
#include <errno.h>
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

/* CPU time of every thread of pid in ns (schedstat), 0 when gone. */
uint64_t budget_proc_cpu_ns(pid_t pid)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	uint64_t sum = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char sp[384];
		unsigned long long run = 0;
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(sp, sizeof(sp), "/proc/%d/task/%s/schedstat", pid, e->d_name);
		f = fopen(sp, "re");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &run) == 1)
			sum += run;
		fclose(f);
	}
	closedir(d);
	return sum;
}

void budget_init(struct budget *b, double limit, double hit_ns)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
	b->hit_ns = hit_ns;
	b->period_ns = 1000000000ULL;
	b->min_on_ns = 50000000ULL;
	b->max_period_ns = 10000000000ULL;
	b->overhead = -1;
	b->steady = calloc(1, sizeof(*b->steady));
	if (b->steady)
		profile_init(b->steady);
}

void budget_free(struct budget *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->t[i].snap);
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

double budget_coverage(const struct budget *b, pid_t pid)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->t[i].pid == pid)
			return b->t[i].coverage;
	for (size_t i = 0; i < b->ngone; i++)
		if (b->gone[i].pid == pid)
			return b->gone[i].coverage;
	return 1;
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

/* Close the steady interval: rows now minus the snapshot into b->steady;
 * with reopen, the rows now become the next snapshot. */
static void steady_cut(struct budget *b, struct session *s, struct budget_target *t,
		       uint64_t now, uint64_t cpu, bool reopen)
{
	struct prof_op *cur = NULL;
	size_t n = 0;

	if (!t->steady)
		return;
	if (!rows_of(s, t->pid, &cur, &n) && b->steady) {
		for (size_t i = 0; i < n; i++) {
			const struct prof_op *o = t->nsnap ?
				bsearch(&cur[i], t->snap, t->nsnap, sizeof(*t->snap), opkey_cmp) : NULL;
			struct prof_op d = cur[i];

			if (o) {
				d.calls = d.calls > o->calls ? d.calls - o->calls : 0;
				d.self_ns = d.self_ns > o->self_ns ? d.self_ns - o->self_ns : 0;
				d.total_ns = d.total_ns > o->total_ns ? d.total_ns - o->total_ns : 0;
				d.launches = d.launches > o->launches ? d.launches - o->launches : 0;
				d.inferred = d.inferred > o->inferred ? d.inferred - o->inferred : 0;
			}
			if (d.calls || d.self_ns)
				profile_add_op(b->steady, &d);
		}
	}
	t->steady_ns += now > t->steady_start ? now - t->steady_start : 0;
	t->cpu_steady_ns += cpu > t->cpu_steady_start ? cpu - t->cpu_steady_start : 0;
	free(t->snap);
	t->snap = reopen ? cur : NULL;
	t->nsnap = reopen ? n : 0;
	if (!reopen)
		free(cur);
	t->steady = reopen;
	t->steady_start = now;
	t->cpu_steady_start = cpu;
}

static void steady_open(struct session *s, struct budget_target *t)
{
	free(t->snap);
	t->snap = NULL;
	t->nsnap = 0;
	t->steady = !rows_of(s, t->pid, &t->snap, &t->nsnap);
	t->steady_start = mono_ns();
	t->cpu_steady_start = budget_proc_cpu_ns(t->pid);
}

static void on_phase_end(struct budget_target *t, uint64_t now, uint64_t cpu)
{
	uint64_t from = t->since_ns;

	t->on_ns_window += now > from ? now - from : 0;
	t->cpu_on_ns += cpu > t->cpu_at_on ? cpu - t->cpu_at_on : 0;
}

/* An on phase runs from the start of the attach to the end of the detach
 * (uprobes go in and out one at a time: 50 ms to 1 s for 6,000 of them);
 * only its steady part, all probes in, is counted. */
static void set_on(struct budget *b, struct session *s, struct budget_target *t, bool on,
		   uint64_t now)
{
	uint64_t cpu, done;

	if (t->on == on)
		return;
	if (!on) {
		cpu = budget_proc_cpu_ns(t->pid);
		if (cpu)
			t->cpu_last = cpu;
		steady_cut(b, s, t, now, t->cpu_last, false);
		session_set_enabled(s, t->pid, false);
		done = mono_ns();
		cpu = budget_proc_cpu_ns(t->pid);
		if (cpu)
			t->cpu_last = cpu;
		on_phase_end(t, done, t->cpu_last);
		t->detach_ns = done - now;
		if (getenv("TBPF_BUDGET_DEBUG"))
			fprintf(stderr, "budget: pid %d off in %.1f ms\n", t->pid, (done - now) / 1e6);
		t->on = false;
		t->since_ns = done;
		return;
	}
	cpu = budget_proc_cpu_ns(t->pid);
	if (session_set_enabled(s, t->pid, true))
		return;   /* gone: stays off */
	done = mono_ns();
	t->on = true;
	t->since_ns = now;
	t->cpu_at_on = cpu;
	t->attach_ns = done - now;
	steady_open(s, t);
	if (getenv("TBPF_BUDGET_DEBUG"))
		fprintf(stderr, "budget: pid %d on in %.1f ms\n", t->pid, (done - now) / 1e6);
}

void budget_tick(struct budget *b, struct session *s, uint64_t now)
{
	size_t nt = session_ntargets(s);

	if (!b->window_start_ns)
		b->window_start_ns = now;
	for (size_t i = 0; i < nt; i++) {
		const struct session_target_info *ti = session_target(s, i);
		struct budget_target *t, *v;

		if (!ti || !ti->alive || bt_find(b, ti->pid))
			continue;
		v = realloc(b->t, (b->n + 1) * sizeof(*v));
		if (!v)
			return;
		b->t = v;
		t = &b->t[b->n++];
		memset(t, 0, sizeof(*t));
		t->pid = ti->pid;
		t->on = true;          /* the session attached it */
		t->since_ns = now;
		t->cpu_at_on = t->cpu_last = t->cpu_window_start = budget_proc_cpu_ns(ti->pid);
		t->adopted_ns = t->seen_ns = now;
		steady_open(s, t);
		/* measure first: a short on phase, then plan at the window end */
		t->plan.on_ns = b->min_on_ns * 2;
		t->plan.off_ns = b->period_ns > t->plan.on_ns ? b->period_ns - t->plan.on_ns : 0;
		t->plan.duty = 1;
		t->coverage = 1;
	}
	for (size_t i = 0; i < b->n; i++) {
		struct budget_target *t = &b->t[i];
		uint64_t cpu = budget_proc_cpu_ns(t->pid);

		if (cpu) {
			t->cpu_last = cpu;
			t->seen_ns = now;
		}
		if (t->on && t->plan.off_ns && now - t->since_ns + t->detach_ns >= t->plan.on_ns)
			set_on(b, s, t, false, now);
		else if (!t->on && now - t->since_ns >= t->plan.off_ns)
			set_on(b, s, t, true, now);
	}
}

void budget_window(struct budget *b, struct session *s, double hits_per_call, uint64_t now)
{
	double added = 0, base_total = 0;
	double w_s = (double)(now - b->window_start_ns) / 1e9;
	size_t k = 0;

	free(b->gone);
	b->ngone = 0;
	b->gone = calloc(b->n + 1, sizeof(*b->gone));
	for (size_t i = 0; i < b->n; i++) {
		struct budget_target *t = &b->t[i];
		uint64_t cpu = budget_proc_cpu_ns(t->pid), c = 0, calls = 0, cpu_all;
		double probe_s, base_all, rate, base, hit_ns = b->hit_ns;
		bool gone = !cpu;

		if (gone)
			cpu = t->cpu_last;
		if (t->on) {
			on_phase_end(t, now, cpu);
			t->cpu_at_on = cpu;
			t->since_ns = now;
		}
		steady_cut(b, s, t, now, cpu, t->on && !gone);
		for (size_t j = 0; b->steady && j < b->steady->nops; j++)
			if (b->steady->ops[j].pid == (uint32_t)t->pid)
				calls += b->steady->ops[j].calls;
		c = (uint64_t)(calls * (hits_per_call > 1 ? hits_per_call : 1));
		cpu_all = cpu > t->cpu_window_start ? cpu - t->cpu_window_start : 0;
		/* Coverage: the share of the target's lifetime in this window
		 * spent with all probes in.  (The share of its CPU time would
		 * suit bursty targets better, but the probes' own cost, a large
		 * part of the CPU while they are in, is known too roughly.) */
		probe_s = c * hit_ns / 1e9;
		base_all = cpu_all / 1e9 - probe_s;
		if (t->steady_ns && t->on_ns_window > t->steady_ns)
			base_all -= probe_s * (t->on_ns_window - t->steady_ns) / 2 / t->steady_ns;
		{
			uint64_t from = t->adopted_ns > b->window_start_ns ? t->adopted_ns
									  : b->window_start_ns;
			uint64_t to = gone ? t->seen_ns : now;
			double life = to > from ? (double)(to - from) : 0;

			if (!t->steady_ns)
				t->coverage = 1;   /* nothing counted: nothing to scale */
			else
				t->coverage = life > 0 && t->steady_ns < life ? t->steady_ns / life : 1;
		}
		if (t->coverage <= 0)
			t->coverage = 1e-3;
		t->hits = c;
		if (t->steady_ns > 0 && w_s > 0 && c) {
			uint64_t min_on = t->attach_ns + t->detach_ns;

			rate = (double)c / ((double)t->steady_ns / 1e9);
			base = base_all / w_s;
			min_on = min_on > b->min_on_ns ? min_on : b->min_on_ns;
			if (min_on > b->period_ns)
				min_on = b->period_ns;
			budget_plan(rate, hit_ns, base, b->limit, b->period_ns, min_on,
				    b->max_period_ns, &t->plan);
			added += (double)t->on_ns_window / 1e9 * rate * hit_ns / 1e9;
			base_total += base_all > 0.01 * w_s ? base_all : 0.01 * w_s;
		}
		if (getenv("TBPF_BUDGET_DEBUG"))
			fprintf(stderr, "budget: pid %d calls %llu in %.3f s steady (%.3f s on) of "
					"%.3f s; cpu %.3f s, %.3f s steady -> coverage %.3f; plan on "
					"%.3f s off %.3f s (full %.1f%%)\n", t->pid,
				(unsigned long long)calls, t->steady_ns / 1e9, t->on_ns_window / 1e9,
				w_s, cpu_all / 1e9, t->cpu_steady_ns / 1e9, t->coverage,
				t->plan.on_ns / 1e9, t->plan.off_ns / 1e9, t->plan.full_overhead * 100);
		t->cpu_window_start = cpu;
		t->on_ns_window = 0;
		t->cpu_on_ns = 0;
		t->steady_ns = 0;
		t->cpu_steady_ns = 0;
		if (!gone) {
			b->t[k++] = *t;
		} else {
			free(t->snap);
			if (b->gone) {
				b->gone[b->ngone].pid = t->pid;
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
void budget_window(struct budget *b, struct session *s, double hits_per_call, uint64_t now) {}
#endif
