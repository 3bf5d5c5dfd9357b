/* gpujoin.c - join stage: CUPTI device records -> API records (correlation
 * id) -> host launch records (thread + time) -> ops, stacks, kernels.
 *
 * Clock alignment.  The agent makes CUPTI stamp CLOCK_MONOTONIC, the clock
 * of bpf_ktime_get_ns, so the offset is 0.  For records stamped with another
 * clock (CUPTI's default CLOCK_REALTIME, or a recording from elsewhere) the
 * offset is estimated from the API records themselves: a host probe fires on
 * entry of cudaLaunchKernel a little before CUPTI's API callback takes its
 * start time, so for the true pair d = host.ts - api.start = offset - delta
 * with a small delta >= 0.  Over every same-thread, same-family (runtime or
 * driver) host/API pair, the densest GJ_OFFSET_WINDOW_NS window of d holds
 * the true pairs; the estimate is the largest d in it (offset minus the
 * smallest delta).  Durations are exact either way; start times carry at
 * most the window's error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpujoin.h"
#include "grow.h"

void gj_host_from_launch(struct gj_host *h, const struct rec_launch *r)
{
	h->ts_ns = r->h.ts_ns;
	h->tid = r->h.tid;
	h->api = r->api;
	h->op_id = r->op_id;
	h->stack_id = r->stack_id;
}

void gj_host_from_memop(struct gj_host *h, const struct rec_memop *r)
{
	h->ts_ns = r->h.ts_ns;
	h->tid = r->h.tid;
	h->api = r->api;
	h->op_id = r->op_id;
	h->stack_id = r->stack_id;
}

int gj_api_family(uint32_t api)
{
	switch (api) {
	case CU_cuLaunchKernel: case CU_cuLaunchKernel_ptsz: case CU_cuLaunchKernelEx:
	case CU_cuLaunchKernelEx_ptsz: case CU_cuGraphLaunch: case CU_cuGraphLaunch_ptsz:
	case CU_cuMemcpyAsync: case CU_cuMemcpyHtoDAsync: case CU_cuMemcpyDtoHAsync:
	case CU_cuMemcpyDtoDAsync: case CU_cuMemsetD8Async: case CU_cuMemsetD16Async:
	case CU_cuMemsetD32Async: case CU_cuStreamSynchronize: case CU_cuCtxSynchronize:
	case CU_cuEventSynchronize: case CU_cuMemAlloc: case CU_cuMemFree:
	case CU_cuMemAllocAsync: case CU_cuMemFreeAsync:
		return 2;
	case CU_API_NONE:
		return 0;
	default:
		return api < CU_API_MAX ? 1 : 0;
	}
}

static int gpu_family(const struct rec_gpu *g)
{
	return g->kind == GPU_API_RUNTIME ? 1 : g->kind == GPU_API_DRIVER ? 2 : 0;
}

static int is_device(const struct rec_gpu *g)
{
	return g->kind == GPU_KERNEL || g->kind == GPU_MEMCPY || g->kind == GPU_MEMSET;
}

/* ---- sorting helpers (qsort has no context argument) ---------------- */
struct hidx { uint64_t ts; uint32_t tid; int32_t i; };
struct aidx { uint64_t start; uint32_t tid; uint32_t corr; int32_t i; int32_t fam; };

static int cmp_hidx(const void *a, const void *b)
{
	const struct hidx *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->i - y->i;
}

static int cmp_aidx_tid(const void *a, const void *b)
{
	const struct aidx *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->i - y->i;
}

static int cmp_aidx_corr(const void *a, const void *b)
{
	const struct aidx *x = a, *y = b;
	if (x->corr != y->corr)
		return x->corr < y->corr ? -1 : 1;
	if (x->fam != y->fam)  /* runtime before driver for a shared id */
		return x->fam - y->fam;
	return x->i - y->i;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static struct hidx *host_index(const struct gj_host *host, size_t n)
{
	struct hidx *h = calloc(n ? n : 1, sizeof(*h));
	if (!h)
		return NULL;
	for (size_t i = 0; i < n; i++)
		h[i] = (struct hidx){ host[i].ts_ns, host[i].tid, (int32_t)i };
	qsort(h, n, sizeof(*h), cmp_hidx);
	return h;
}

static struct aidx *api_index(const struct rec_gpu *gpu, size_t n, size_t *na)
{
	struct aidx *a = calloc(n ? n : 1, sizeof(*a));
	if (!a)
		return NULL;
	*na = 0;
	for (size_t i = 0; i < n; i++)
		if (gpu_family(&gpu[i]))
			a[(*na)++] = (struct aidx){ gpu[i].start_ns, gpu[i].h.tid, gpu[i].correlation,
						    (int32_t)i, gpu_family(&gpu[i]) };
	return a;
}

/* ---- clock offset ------------------------------------------------------ */
#define OFFSET_PER_TID 512

/* Does offset 0 explain the records (both clocks CLOCK_MONOTONIC, as the
 * agent stamps them)?  Of the API records a[0..na) (in thread, start
 * order) that start inside their thread's span of host records h[0..nh),
 * count those with a host record after the thread's previous API start
 * and at or before their own (match_host's rule).  1: at least
 * GJ_ZERO_FIT_MIN are counted and half of them have one; 0: they do not;
 * -1: too few to tell.  Without this test the estimate below, taken over
 * the first records of each side, can lock onto a multiple of a periodic
 * job's iteration when those first records do not overlap in time (CUPTI
 * on before the launch probes are attached), and shift every match by
 * that many launches. */
#define GJ_ZERO_FIT_MIN 16
static int zero_fits(const struct hidx *h, size_t nh, const struct aidx *a, size_t na,
		     uint64_t *hits)
{
	size_t considered = 0, hit = 0, hi = 0, first = 0, last = 0;
	bool any = false;

	for (size_t y = 0; y < na; y++) {
		uint32_t tid = a[y].tid;
		uint64_t s = a[y].start, prev = y && a[y - 1].tid == tid ? a[y - 1].start : 0;

		if (!y || a[y - 1].tid != tid) {   /* the thread's host records */
			while (first < nh && h[first].tid < tid)
				first++;
			any = first < nh && h[first].tid == tid;
			for (last = first; any && last + 1 < nh && h[last + 1].tid == tid; last++)
				;
			hi = first;
		}
		if (!any || s < h[first].ts || s > h[last].ts)
			continue;
		while (hi < last && h[hi].ts <= prev)
			hi++;
		considered++;
		hit += h[hi].ts > prev && h[hi].ts <= s;
	}
	*hits = hit;
	if (considered < GJ_ZERO_FIT_MIN)
		return -1;
	return hit * 2 >= considered;
}

/* Are the host records' and the API records' time ranges within
 * GJ_MATCH_MAX_GAP_NS of each other on offset 0 (the same clock, one side
 * begun before the other: then wait for records that overlap)? */
static bool ranges_close(const struct gj_host *host, size_t nhost, const struct aidx *a,
			 size_t na)
{
	uint64_t h0 = UINT64_MAX, h1 = 0, a0 = UINT64_MAX, a1 = 0;

	for (size_t i = 0; i < nhost; i++) {
		h0 = host[i].ts_ns < h0 ? host[i].ts_ns : h0;
		h1 = host[i].ts_ns > h1 ? host[i].ts_ns : h1;
	}
	for (size_t i = 0; i < na; i++) {
		a0 = a[i].start < a0 ? a[i].start : a0;
		a1 = a[i].start > a1 ? a[i].start : a1;
	}
	if (!nhost || !na)
		return false;
	return (a0 > h1 ? a0 - h1 : 0) < GJ_MATCH_MAX_GAP_NS &&
	       (h0 > a1 ? h0 - a1 : 0) < GJ_MATCH_MAX_GAP_NS;
}

int gj_estimate_offset(const struct gj_host *host, size_t nhost, const struct rec_gpu *gpu,
		       size_t ngpu, int64_t *offset, uint64_t *pairs)
{
	size_t na = 0, nd = 0, cap = 0;
	int64_t *d = NULL;
	int err = -ENOMEM;
	struct hidx *h = host_index(host, nhost);
	struct aidx *a = api_index(gpu, ngpu, &na);
	if (!h || !a)
		goto out;
	qsort(a, na, sizeof(*a), cmp_aidx_tid);
	uint64_t zhits;
	int zf = zero_fits(h, nhost, a, na, &zhits);
	if (zf == 1) {
		*offset = 0;
		if (pairs)
			*pairs = zhits;
		err = 0;
		goto out;
	}
	if (zf < 0 && ranges_close(host, nhost, a, na)) {
		err = -ENODATA;   /* the same clock, not overlapping yet */
		goto out;
	}
	for (size_t hi = 0, ai = 0; hi < nhost && ai < na;) {
		uint32_t tid = h[hi].tid < a[ai].tid ? h[hi].tid : a[ai].tid;
		size_t h0 = hi, a0 = ai;
		while (hi < nhost && h[hi].tid == tid)
			hi++;
		while (ai < na && a[ai].tid == tid)
			ai++;
		size_t hn = hi - h0 < OFFSET_PER_TID ? hi - h0 : OFFSET_PER_TID;
		size_t an = ai - a0 < OFFSET_PER_TID ? ai - a0 : OFFSET_PER_TID;
		for (size_t x = h0; x < h0 + hn; x++) {
			int hf = gj_api_family(host[h[x].i].api);
			for (size_t y = a0; y < a0 + an; y++) {
				if (hf != a[y].fam)
					continue;
				if (GROW(d, nd, cap, 1024))
					goto out;
				d[nd++] = (int64_t)(h[x].ts - a[y].start);
			}
		}
	}
	if (!nd) {
		err = -ENODATA;
		goto out;
	}
	qsort(d, nd, sizeof(*d), cmp_i64);
	size_t best = 0, best_lo = 0, best_hi = 0;
	for (size_t lo = 0, hi2 = 0; lo < nd; lo++) {
		while (hi2 < nd && d[hi2] - d[lo] <= GJ_OFFSET_WINDOW_NS)
			hi2++;
		if (hi2 - lo > best) {
			best = hi2 - lo;
			best_lo = lo;
			best_hi = hi2;
		}
	}
	*offset = d[best_hi - 1];
	if (pairs)
		*pairs = best_hi - best_lo;
	err = 0;
out:
	free(d);
	free(h);
	free(a);
	return err;
}

/* ---- API record -> host record ------------------------------------------ */
/* The host record of an API call is on the call's thread, between the
 * previous API record of the thread (lo: its start; of the same family in
 * pass 0, of any in pass 1) and the call's end e: the latest unused one
 * at or before the call's start s (the probe fires on entry, before CUPTI
 * stamps the start; a preempted thread or a uprobe's first hit puts any
 * time between them), else the earliest unused inside the call (another
 * family's probe inside it, or the offset estimate's error).  Bounded by
 * records, not by a time slack: a host record whose API record CUPTI
 * dropped is older than the previous API record, so the next call does
 * not take it, and a call whose host record is missing finds none.  Only
 * GJ_MATCH_MAX_GAP_NS bounds the thread's first API record (clocks not
 * aligned: no host record is that old). */
struct api_prev { uint32_t tid; uint64_t start[3]; };   /* [0]: any family, 1 runtime, 2 driver */

static int32_t match_host(const struct gj_host *host, struct hidx *h, size_t nh, char *used,
			  uint32_t tid, uint64_t s, uint64_t e, int fam, const struct api_prev *prev)
{
	for (int pass = 0; pass < 2; pass++) {
		/* first index with (tid, ts > the previous API record's start) */
		uint64_t lo = prev->tid == tid ? prev->start[pass ? 0 : fam] : 0;
		uint64_t from = lo ? lo + 1 : 0;
		if (s > GJ_MATCH_MAX_GAP_NS && from < s - GJ_MATCH_MAX_GAP_NS)
			from = s - GJ_MATCH_MAX_GAP_NS;
		size_t a = 0, b = nh;
		while (a < b) {
			size_t mid = (a + b) / 2;
			if (h[mid].tid < tid || (h[mid].tid == tid && h[mid].ts < from))
				a = mid + 1;
			else
				b = mid;
		}
		int32_t before = -1, after = -1;
		for (size_t k = a; k < nh && h[k].tid == tid && h[k].ts <= e; k++) {
			int32_t i = h[k].i;
			if (used[i] || (pass == 0 && gj_api_family(host[i].api) != fam))
				continue;
			if (h[k].ts <= s)
				before = i;         /* latest at or before the API start */
			else if (after < 0)
				after = i;          /* earliest inside the API call */
		}
		int32_t pick = before >= 0 ? before : after;
		if (pick >= 0) {
			used[pick] = 1;
			return pick;
		}
	}
	return -1;
}

/* API records a[0..na) in (thread, start) order: each one's host record
 * into api_host (indexed by gpu record). */
static void match_all(const struct gj_input *in, struct hidx *h, char *used, const struct aidx *a,
		      size_t na, int64_t off, int32_t *api_host)
{
	struct api_prev prev = { 0 };
	for (size_t k = 0; k < na; k++) {
		const struct rec_gpu *g = &in->gpu[a[k].i];
		uint64_t s = g->start_ns + off;
		if (k == 0 || prev.tid != g->h.tid)
			prev = (struct api_prev){ g->h.tid, { 0 } };
		api_host[a[k].i] = match_host(in->host, h, in->nhost, used, g->h.tid, s,
					      g->end_ns + off, a[k].fam, &prev);
		prev.start[0] = prev.start[a[k].fam] = s;
	}
}

/* ---- outputs --------------------------------------------------------- */
static int cmp_dev(const void *a, const void *b)
{
	const struct gj_dev *x = a, *y = b;
	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

static int cmp_name(const void *a, const void *b)
{
	const struct rec_gpu_name *x = *(const struct rec_gpu_name *const *)a;
	const struct rec_gpu_name *y = *(const struct rec_gpu_name *const *)b;
	return x->name_id < y->name_id ? -1 : x->name_id > y->name_id;
}

static int cmp_op(const void *a, const void *b)
{
	const struct gj_opstat *x = a, *y = b;
	if (x->self_cuda_ns != y->self_cuda_ns)
		return x->self_cuda_ns > y->self_cuda_ns ? -1 : 1;
	if (x->total_cuda_ns != y->total_cuda_ns)
		return x->total_cuda_ns > y->total_cuda_ns ? -1 : 1;
	if (x->op_id != y->op_id)
		return x->op_id < y->op_id ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

static int cmp_kernel(const void *a, const void *b)
{
	const struct gj_kstat *x = a, *y = b;
	if (x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->name_id < y->name_id ? -1 : x->name_id > y->name_id;
}

/* Open-addressing index: slot = row + 1, 0 = empty; 64-bit keys. */
struct gj_index {
	uint32_t *slot;
	size_t cap;     /* power of two */
};

static size_t gj_hash(uint64_t key, size_t cap)
{
	key *= 0x9E3779B97F4A7C15ULL;
	return (size_t)(key ^ key >> 31) & (cap - 1);
}

/* Room for one more than the n rows indexed (rehashes them when half
 * full); 0 or -ENOMEM. */
static int gj_index_fit(struct gj_index *x, size_t n, uint64_t (*key)(const void *rows, size_t i),
			const void *rows)
{
	if (2 * (n + 2) <= x->cap)
		return 0;
	size_t cap = x->cap ? x->cap * 2 : 256;
	while (2 * (n + 2) > cap)
		cap *= 2;
	uint32_t *slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t j = gj_hash(key(rows, i), cap);
		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = (uint32_t)i + 1;
	}
	free(x->slot);
	x->slot = slot;
	x->cap = cap;
	return 0;
}

static uint64_t op_key(const void *rows, size_t i)
{
	const struct gj_opstat *o = &((const struct gj_opstat *)rows)[i];
	return (uint64_t)o->op_id << 32 | o->stack_id;
}

static uint64_t kernel_key(const void *rows, size_t i)
{
	return ((const struct gj_kstat *)rows)[i].name_id;
}

/* Find-or-add the (op, stack) row. */
static struct gj_opstat *op_get(struct gj_result *r, size_t *cap, struct gj_index *x, uint32_t op,
				uint32_t stack)
{
	uint64_t key = (uint64_t)op << 32 | stack;
	if (gj_index_fit(x, r->nops, op_key, r->ops))
		return NULL;
	size_t j = gj_hash(key, x->cap);
	for (; x->slot[j]; j = (j + 1) & (x->cap - 1))
		if (op_key(r->ops, x->slot[j] - 1) == key)
			return &r->ops[x->slot[j] - 1];
	if (GROW(r->ops, r->nops, *cap, 64))
		return NULL;
	struct gj_opstat *o = &r->ops[r->nops];
	memset(o, 0, sizeof(*o));
	o->op_id = op;
	o->stack_id = stack;
	x->slot[j] = (uint32_t)++r->nops;
	return o;
}

/* Find-or-add the kernel row (same name id and name). */
static struct gj_kstat *kernel_get(struct gj_result *r, size_t *cap, struct gj_index *x,
				   const struct gj_dev *d)
{
	if (gj_index_fit(x, r->nkernels, kernel_key, r->kernels))
		return NULL;
	size_t j = gj_hash(d->name_id, x->cap);
	for (; x->slot[j]; j = (j + 1) & (x->cap - 1)) {
		struct gj_kstat *k = &r->kernels[x->slot[j] - 1];
		if (k->name_id == d->name_id && !strcmp(k->name, d->name))
			return k;
	}
	if (GROW(r->kernels, r->nkernels, *cap, 64))
		return NULL;
	struct gj_kstat *k = &r->kernels[r->nkernels];
	*k = (struct gj_kstat){ d->name_id, d->name, 0, 0, UINT64_MAX, 0 };
	x->slot[j] = (uint32_t)++r->nkernels;
	return k;
}

struct span_ev { uint64_t ts; uint32_t tid; int32_t span; int32_t dev; };

static int cmp_span_ev(const void *a, const void *b)
{
	const struct span_ev *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	/* spans open before a launch at the same instant; outer spans first */
	if ((x->span >= 0) != (y->span >= 0))
		return x->span >= 0 ? -1 : 1;
	return x->span != y->span ? x->span - y->span : x->dev - y->dev;
}

/* Keep the spans of stack[0..depth) that are still open at ts; returns the
 * new depth.  Spans nest per thread, except where an op's exit was lost
 * (attach and detach, an unwound frame): one such span must not hold the
 * spans under it open for the rest of the run. */
static size_t open_at(const struct gj_op_span *spans, int32_t *stack, size_t depth, uint64_t ts)
{
	size_t n = 0;

	for (size_t i = 0; i < depth; i++)
		if (spans[stack[i]].end_ns >= ts)
			stack[n++] = stack[i];
	return n;
}

/* CUDA total: every op instance open on the launching thread at launch
 * time gets the device time. */
static int add_totals(const struct gj_input *in, struct gj_result *r, size_t *cap,
		      struct gj_index *x)
{
	size_t n = 0, nattr = 0;
	for (size_t i = 0; i < r->ndev; i++)
		nattr += r->dev[i].host_idx >= 0;
	struct span_ev *ev = calloc(in->nspans + nattr + 1, sizeof(*ev));
	int32_t *stack = calloc(in->nspans + 1, sizeof(*stack));
	if (!ev || !stack) {
		free(ev);
		free(stack);
		return -ENOMEM;
	}
	for (size_t i = 0; i < in->nspans; i++)
		ev[n++] = (struct span_ev){ in->spans[i].start_ns, in->spans[i].tid, (int32_t)i, -1 };
	for (size_t i = 0; i < r->ndev; i++)
		if (r->dev[i].host_idx >= 0)
			ev[n++] = (struct span_ev){ r->dev[i].launch_ts_ns, r->dev[i].tid, -1, (int32_t)i };
	qsort(ev, n, sizeof(*ev), cmp_span_ev);
	size_t depth = 0;
	uint32_t tid = 0;
	for (size_t k = 0; k < n; k++) {
		if (k == 0 || ev[k].tid != tid) {
			depth = 0;
			tid = ev[k].tid;
		}
		depth = open_at(in->spans, stack, depth, ev[k].ts);
		if (ev[k].span >= 0) {
			stack[depth++] = ev[k].span;
			continue;
		}
		const struct gj_dev *d = &r->dev[ev[k].dev];
		for (size_t s = 0; s < depth; s++) {
			const struct gj_op_span *sp = &in->spans[stack[s]];
			struct gj_opstat *o = op_get(r, cap, x, sp->op_id, (uint32_t)sp->stack_id);
			if (!o) {
				free(ev);
				free(stack);
				return -ENOMEM;
			}
			o->total_cuda_ns += d->end_ns - d->start_ns;
		}
	}
	free(ev);
	free(stack);
	return 0;
}

static int build_stats(const struct gj_input *in, struct gj_result *r)
{
	size_t ocap = 0, kcap = 0;
	struct gj_index ox = { 0 }, kx = { 0 };
	int err = -ENOMEM;
	for (size_t i = 0; i < r->ndev; i++) {
		struct gj_dev *d = &r->dev[i];
		uint64_t dur = d->end_ns - d->start_ns;
		if (d->host_idx >= 0) {
			struct gj_opstat *o = op_get(r, &ocap, &ox, d->op_id, d->stack_id);
			if (!o)
				goto out;
			o->self_cuda_ns += dur;
			if (!in->nspans)
				o->total_cuda_ns += dur;
			o->kernels += d->kind == GPU_KERNEL;
			o->memcpys += d->kind == GPU_MEMCPY;
			o->memsets += d->kind == GPU_MEMSET;
		}
		if (d->kind != GPU_KERNEL)
			continue;
		struct gj_kstat *k = kernel_get(r, &kcap, &kx, d);
		if (!k)
			goto out;
		k->count++;
		k->total_ns += dur;
		k->min_ns = dur < k->min_ns ? dur : k->min_ns;
		k->max_ns = dur > k->max_ns ? dur : k->max_ns;
	}
	if (in->nspans && add_totals(in, r, &ocap, &ox) < 0)
		goto out;
	if (r->nops)
		qsort(r->ops, r->nops, sizeof(*r->ops), cmp_op);
	if (r->nkernels)
		qsort(r->kernels, r->nkernels, sizeof(*r->kernels), cmp_kernel);
	err = 0;
out:
	free(ox.slot);
	free(kx.slot);
	return err;
}

static const char *full_name(const struct rec_gpu *g, const struct rec_gpu_name **names, size_t n)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (names[mid]->name_id < g->name_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n && names[lo]->name_id == g->name_id)
		return names[lo]->name;
	return g->name;  /* inline prefix (complete unless GPUF_NAME_TRUNC) */
}

/* d (from device record g): its API record (same correlation) and the host
 * record that API call matched; counts what it reached. */
static void attribute(const struct gj_input *in, struct gj_result *r, const struct aidx *a,
		      size_t na, const int32_t *api_host, struct gj_dev *d, const struct rec_gpu *g)
{
	int64_t off = r->clock_offset_ns;
	size_t lo = 0, hi = na;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (a[mid].corr < g->correlation)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= na || a[lo].corr != g->correlation) {
		r->counts.no_api++;
		r->counts.unattributed_ns += g->end_ns - g->start_ns;
		return;
	}
	const struct rec_gpu *api = &in->gpu[a[lo].i];
	d->tid = api->h.tid;
	d->api_start_ns = api->start_ns + off;
	d->api_end_ns = api->end_ns + off;
	d->api_kind = api->kind;
	d->cbid = api->cbid;
	int32_t hi_ = api_host[a[lo].i];
	if (hi_ < 0) {
		r->counts.no_host++;
		r->counts.unattributed_ns += g->end_ns - g->start_ns;
		return;
	}
	const struct gj_host *ho = &in->host[hi_];
	d->host_idx = hi_;
	d->op_id = ho->op_id;
	d->stack_id = ho->stack_id;
	d->launch_ts_ns = ho->ts_ns;
	d->host_api = ho->api;
	d->flow_id = g->correlation;
	r->counts.attributed++;
}

int gpujoin_run(const struct gj_input *in, struct gj_result *r)
{
	size_t na = 0;
	int err = -ENOMEM;
	struct hidx *h = NULL;
	struct aidx *a = NULL;
	char *used = NULL;
	int32_t *api_host = NULL;
	const struct rec_gpu_name **names = NULL;

	memset(r, 0, sizeof(*r));
	r->clock_offset_ns = in->clock_offset_ns;
	if (in->estimate_offset) {
		int64_t est = 0;
		uint64_t pairs = 0;
		err = gj_estimate_offset(in->host, in->nhost, in->gpu, in->ngpu, &est, &pairs);
		if (err == -ENODATA && in->estimate_offset == GJ_OFFSET_AUTO)
			err = 0;
		else if (err)
			return err;
		else if (in->estimate_offset == GJ_OFFSET_ESTIMATE ||
			 est >= GJ_SAME_CLOCK_NS || est <= -GJ_SAME_CLOCK_NS) {
			r->clock_offset_ns = est;
			r->counts.offset_pairs = pairs;
			r->offset_estimated = 1;
		}
		err = -ENOMEM;
	}
	int64_t off = r->clock_offset_ns;

	h = host_index(in->host, in->nhost);
	a = api_index(in->gpu, in->ngpu, &na);
	used = calloc(in->nhost + 1, 1);
	names = calloc(in->nnames + 1, sizeof(*names));
	r->dev = calloc(in->ngpu + 1, sizeof(*r->dev));
	if (!h || !a || !used || !names || !r->dev)
		goto out;
	for (size_t i = 0; i < in->nnames; i++)
		names[i] = &in->names[i];
	qsort(names, in->nnames, sizeof(*names), cmp_name);
	r->counts.api = na;

	/* Match API records to host records in (thread, time) order so the
	 * greedy one-to-one choice does not depend on record order. */
	qsort(a, na, sizeof(*a), cmp_aidx_tid);
	api_host = malloc((in->ngpu + 1) * sizeof(*api_host));
	if (!api_host)
		goto out;
	for (size_t i = 0; i < in->ngpu; i++)
		api_host[i] = -1;
	match_all(in, h, used, a, na, off, api_host);
	qsort(a, na, sizeof(*a), cmp_aidx_corr);

	for (size_t i = 0; i < in->ngpu; i++) {
		const struct rec_gpu *g = &in->gpu[i];
		if (!is_device(g))
			continue;
		struct gj_dev *d = &r->dev[r->ndev++];
		*d = (struct gj_dev){
			.start_ns = g->start_ns + off, .end_ns = g->end_ns + off,
			.bytes = g->bytes, .name_id = g->name_id, .kind = g->kind,
			.copy_kind = g->copy_kind, .device = g->device, .context = g->context,
			.stream = g->stream, .correlation = g->correlation, .host_idx = -1,
		};
		memcpy(d->grid, g->grid, sizeof(d->grid));
		memcpy(d->block, g->block, sizeof(d->block));
		d->name = g->kind == GPU_KERNEL ? full_name(g, names, in->nnames) : NULL;
		if (d->name && !*d->name)
			d->name = "(unnamed kernel)";
		r->counts.device++;
		attribute(in, r, a, na, api_host, d, g);
		/* a --steps window: the work launched in its steps only */
		if (in->keep && !in->keep(in->keep_ctx, d->launch_ts_ns ? d->launch_ts_ns
									: d->start_ns)) {
			r->ndev--;
			r->counts.outside++;
		}
	}
	qsort(r->dev, r->ndev, sizeof(*r->dev), cmp_dev);
	err = build_stats(in, r);
out:
	free(h);
	free(a);
	free(used);
	free(api_host);
	free(names);
	if (err)
		gpujoin_free(r);
	return err;
}

void gpujoin_free(struct gj_result *r)
{
	free(r->dev);
	free(r->ops);
	free(r->kernels);
	memset(r, 0, sizeof(*r));
}
