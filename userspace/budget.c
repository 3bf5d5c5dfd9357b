/* budget.c - control stage: overhead budget (see budget.h): planner,
 * calibration of the probe cost in our own process, duty-cycle driver. */
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

uint64_t budget_proc_cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

void budget_init(struct budget *b, double limit, double hit_ns)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
	b->hit_ns = hit_ns;
	b->period_ns = 1000000000ULL;
	b->min_on_ns = 100000000ULL;
	b->max_period_ns = 10000000000ULL;
	b->overhead = -1;
}

void budget_free(struct budget *b)
{
	free(b->t);
	memset(b, 0, sizeof(*b));
}

static uint64_t on_time(const struct budget *b, const struct budget_target *t, uint64_t now)
{
	uint64_t from = t->since_ns > b->window_start_ns ? t->since_ns : b->window_start_ns;

	return t->on_ns_window + (t->on && now > from ? now - from : 0);
}

double budget_coverage(const struct budget *b, pid_t pid, uint64_t now_ns)
{
	const struct budget_target *t = NULL;
	uint64_t w = now_ns - b->window_start_ns;

	for (size_t i = 0; i < b->n; i++)
		if (b->t[i].pid == pid)
			t = &b->t[i];
	if (!t || !w)
		return 1;
	return (double)on_time(b, t, now_ns) / (double)w;
}

#ifdef HAVE_SESSION
static struct budget_target *bt_find(struct budget *b, pid_t pid)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->t[i].pid == pid)
			return &b->t[i];
	return NULL;
}

static void set_on(struct budget *b, struct session *s, struct budget_target *t, bool on,
		   uint64_t now)
{
	if (t->on == on)
		return;
	if (!on)
		t->on_ns_window = on_time(b, t, now);
	if (session_set_enabled(s, t->pid, on) && on)
		return;   /* re-attach failed (gone?): stays off */
	t->on = on;
	t->since_ns = on ? mono_ns() : now;
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
		t->cpu_ticks_start = budget_proc_cpu_ticks(ti->pid);
		/* measure first: a short on phase, then plan at the window end */
		t->plan.on_ns = b->min_on_ns * 2;
		t->plan.off_ns = b->period_ns > t->plan.on_ns ? b->period_ns - t->plan.on_ns : 0;
		t->plan.duty = 1;
		t->coverage = 1;
	}
	for (size_t i = 0; i < b->n; i++) {
		struct budget_target *t = &b->t[i];

		if (t->on && t->plan.off_ns && now - t->since_ns >= t->plan.on_ns)
			set_on(b, s, t, false, now);
		else if (!t->on && now - t->since_ns >= t->plan.off_ns)
			set_on(b, s, t, true, now);
	}
}

void budget_window(struct budget *b, struct session *s, const pid_t *pids,
		   const uint64_t *calls, size_t n, uint64_t now)
{
	double tick = (double)sysconf(_SC_CLK_TCK), added = 0, base_total = 0;
	double w_s = (double)(now - b->window_start_ns) / 1e9;
	size_t k = 0;

	for (size_t i = 0; i < b->n; i++) {
		struct budget_target *t = &b->t[i];
		uint64_t on = on_time(b, t, now), ticks = budget_proc_cpu_ticks(t->pid), c = 0;
		double cpu_s, base, rate;

		for (size_t j = 0; j < n; j++)
			if (pids[j] == t->pid)
				c += calls[j];
		if (!ticks) {   /* gone */
			continue;
		}
		cpu_s = ticks > t->cpu_ticks_start ? (ticks - t->cpu_ticks_start) / tick : 0;
		t->coverage = w_s > 0 ? (double)on / 1e9 / w_s : 1;
		if (on > 0 && w_s > 0) {
			rate = (double)c / ((double)on / 1e9);
			base = (cpu_s - c * b->hit_ns / 1e9) / w_s;
			budget_plan(rate, b->hit_ns, base, b->limit, b->period_ns, b->min_on_ns,
				    b->max_period_ns, &t->plan);
			added += c * b->hit_ns / 1e9;
			if (getenv("TBPF_BUDGET_DEBUG"))
				fprintf(stderr, "budget: pid %d hits %llu on %.3f s of %.3f s (coverage "
						"%.3f) cpu %.3f s -> rate %.0f/s base %.3f CPU full %.1f%%: "
						"on %.3f s off %.3f s\n", t->pid, (unsigned long long)c,
					on / 1e9, w_s, t->coverage, cpu_s, rate, base,
					t->plan.full_overhead * 100, t->plan.on_ns / 1e9,
					t->plan.off_ns / 1e9);
			base_total += base > 0.01 ? base * w_s : 0.01 * w_s;
		}
		t->cpu_ticks_start = ticks;
		t->on_ns_window = 0;
		b->t[k++] = *t;
	}
	b->n = k;
	b->overhead = base_total > 0 ? added / base_total : -1;
	b->window_start_ns = now;
	(void)s;
}
#else
void budget_tick(struct budget *b, struct session *s, uint64_t now) {}
void budget_window(struct budget *b, struct session *s, const pid_t *pids,
		   const uint64_t *calls, size_t n, uint64_t now) {}
#endif
