/* budget.c - control stage: overhead budget (see budget.h), its pure
 * parts: the planner, the hot and light sets, and the calibration of the
 * probe cost in our own process.  The per-target phases are
 * budget_phase.c, the window close budget_window.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "tbpf.skel.h"
#include "tbpf_abi.h"
#include "budget_int.h"
#include "procmaps.h"
#include "profile.h"
#include "uprobe.h"

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
