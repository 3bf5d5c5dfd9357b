/* gjwindow.c - join stage, incremental: records wait until a call's
 * records are in, gpujoin joins them, the device times add up, the joined
 * records go (see gjwindow.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cudarec.h"
#include "gjwindow.h"
#include "oprec.h"
#include "grow.h"

/* ---- keeping records -------------------------------------------------- */
static struct gj_tid *tid_get(struct gj_pend *p, uint32_t tid, bool add)
{
	for (size_t i = p->ntids; i-- > 0;)
		if (p->tids[i].tid == tid)
			return &p->tids[i];
	if (!add || GROW(p->tids, p->ntids, p->ctids, 16))
		return NULL;
	p->tids[p->ntids] = (struct gj_tid){ tid, 0, 0 };
	return &p->tids[p->ntids++];
}

static void tid_seen(struct gj_pend *p, uint32_t tid, uint64_t ts)
{
	struct gj_tid *t = tid_get(p, tid, true);

	if (t && ts > t->last_ns)
		t->last_ns = ts;
}

static bool full(struct gj_pend *p)
{
	if (!p->max || p->nhost + p->ngpu < p->max)
		return false;
	p->dropped++;
	return true;
}

static int keep_host(struct gj_pend *p, const struct gj_host *g)
{
	tid_seen(p, g->tid, g->ts_ns);
	if (full(p))
		return 0;
	if (GROW(p->host, p->nhost, p->chost, 256)) {
		p->dropped++;
		return -ENOMEM;
	}
	p->host[p->nhost++] = *g;
	return 1;
}

static int keep_name(struct gj_pend *p, const struct rec_gpu_name *nm)
{
	for (size_t i = 0; i < p->nnames; i++)
		if (p->names[i].name_id == nm->name_id)
			return 1;
	if (GROW(p->names, p->nnames, p->cnames, 16))
		return -ENOMEM;
	p->names[p->nnames] = *nm;
	p->names[p->nnames++].name[TBPF_GPU_NAME_MAX - 1] = 0;   /* ends inside */
	return 1;
}

static int keep_gpu(struct gj_pend *p, const struct rec_gpu *r, size_t size)
{
	switch (r->kind) {
	case GPU_KERNEL: case GPU_MEMCPY: case GPU_MEMSET:
	case GPU_API_RUNTIME: case GPU_API_DRIVER:
		if (size < sizeof(*r) || r->end_ns < r->start_ns || full(p))
			return 0;
		if (GROW(p->gpu, p->ngpu, p->cgpu, 256)) {
			p->dropped++;
			return -ENOMEM;
		}
		p->gpu[p->ngpu] = *r;
		p->gpu[p->ngpu++].name[TBPF_GPU_SHORT_NAME - 1] = 0;   /* ends inside */
		return 1;
	case GPU_NAME:
		return size < sizeof(struct rec_gpu_name) ? 0 : keep_name(p, (const void *)r);
	default:
		return 0;
	}
}

int gj_pend_feed(struct gj_pend *p, const struct rec_hdr *h, size_t size)
{
	struct gj_host g;

	if (size < sizeof(*h) + sizeof(uint32_t))
		return 0;
	switch (rec_kind(h)) {
	case EV_OP_ENTER:
	case EV_OP_EXIT:
		tid_seen(p, h->tid, h->ts_ns);
		return 0;
	case EV_LAUNCH:
		if (size < cuda_rec_min_size(h))
			return 0;
		gj_host_from_launch(&g, (const void *)h);
		return keep_host(p, &g);
	case EV_MEMOP:
		if (size < cuda_rec_min_size(h))
			return 0;
		gj_host_from_memop(&g, (const void *)h);
		return keep_host(p, &g);
	case EV_GPU:   /* kind sits at the same offset in the three layouts */
		if (size < offsetof(struct rec_gpu, kind) + sizeof(uint16_t))
			return 0;
		return keep_gpu(p, (const void *)h, size);
	default:
		return 0;
	}
}

size_t gj_pend_count(const struct gj_pend *p)
{
	return p->nhost + p->ngpu;
}

/* Records waiting at which a join pushes the oldest quarter out
 * (cap_oldest); 0 without a cap. */
static size_t push_out_line(const struct gj_pend *p)
{
	return p->max / 4 * 3;
}

size_t gj_pend_next_join(const struct gj_pend *p)
{
	size_t n = gj_pend_count(p), next = n + (n > GJ_JOIN_EVERY ? n : GJ_JOIN_EVERY);
	size_t soft = push_out_line(p);

	/* a backlog above max/8 that only waits for CUPTI's next delivery
	 * would double past cap_oldest's line and lose its oldest quarter:
	 * join just below that line instead */
	if (p->max && n + 1 < soft && next >= soft)
		return soft - 1;
	return p->max && next >= p->max ? p->max - 1 : next;
}

uint64_t gj_pend_first_host(const struct gj_pend *p)
{
	uint64_t first = UINT64_MAX;

	for (size_t i = 0; i < p->nhost; i++)
		if (p->host[i].ts_ns < first)
			first = p->host[i].ts_ns;
	return first;
}

void gj_pend_free(struct gj_pend *p)
{
	free(p->host);
	free(p->gpu);
	free(p->names);
	free(p->tids);
	memset(p, 0, sizeof(*p));
}

/* ---- the window ---------------------------------------------------------- */
static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool in_set(const uint32_t *v, size_t n, uint32_t x)
{
	return n && bsearch(&x, v, n, sizeof(*v), u32_cmp);
}

static bool is_api(const struct rec_gpu *g)
{
	return g->kind == GPU_API_RUNTIME || g->kind == GPU_API_DRIVER;
}

struct bounds {
	uint64_t horizon, oldest;
	bool last;
};

/* A CUPTI time on the host's clock (p->offset_ns once estimated). */
static uint64_t on_host(const struct gj_pend *p, uint64_t cupti_ns)
{
	uint64_t d;

	if (p->offset_ns >= 0) {   /* saturating: a capture's times are any u64 */
		d = (uint64_t)p->offset_ns;
		return cupti_ns > UINT64_MAX - d ? UINT64_MAX : cupti_ns + d;
	}
	d = (uint64_t)(-(p->offset_ns + 1)) + 1;
	return cupti_ns < d ? 0 : cupti_ns - d;
}

static bool api_ready(struct gj_pend *p, const struct rec_gpu *g, const struct bounds *b)
{
	const struct gj_tid *t;

	if (b->last || on_host(p, g->start_ns) < b->horizon)
		return true;
	t = tid_get(p, g->h.tid, false);
	return t && on_host(p, g->end_ns) < t->last_ns;
}

/* The correlations of the API records (all, ready), sorted. */
static int api_sets(struct gj_pend *p, const struct bounds *b, uint32_t **all, size_t *na,
		    uint32_t **ready, size_t *nr)
{
	*all = malloc((p->ngpu + 1) * sizeof(**all));
	*ready = malloc((p->ngpu + 1) * sizeof(**ready));
	*na = *nr = 0;
	if (!*all || !*ready)
		return -ENOMEM;
	for (size_t i = 0; i < p->ngpu; i++) {
		if (!is_api(&p->gpu[i]))
			continue;
		(*all)[(*na)++] = p->gpu[i].correlation;
		if (api_ready(p, &p->gpu[i], b))
			(*ready)[(*nr)++] = p->gpu[i].correlation;
	}
	qsort(*all, *na, sizeof(**all), u32_cmp);
	qsort(*ready, *nr, sizeof(**ready), u32_cmp);
	return 0;
}

/* Does record g join now: a ready API record, a device record of a
 * ready call, or one without an API record that is too old to wait? */
static bool joins_now(struct gj_pend *p, const struct rec_gpu *g, const struct bounds *b,
		      const uint32_t *all, size_t na, const uint32_t *ready, size_t nr)
{
	if (is_api(g))
		return api_ready(p, g, b);
	return in_set(ready, nr, g->correlation) ||
	       (!in_set(all, na, g->correlation) &&
		(b->last || on_host(p, g->start_ns) < b->oldest));
}

/* p->gpu reordered in place: the records that join now first (their count
 * returned), the rest after.  The join does not depend on the order
 * (test_join_order_independent); a copy of the rest, as before, was the
 * largest allocation of a busy job's join (9 MB of the daemon's 28 MB
 * heap peak, bench/results_tbpf_memory.md). */
static int partition(struct gj_pend *p, const struct bounds *b, size_t *k)
{
	uint32_t *all, *ready;
	size_t na, nr, lo = 0, hi = p->ngpu;
	int err = api_sets(p, b, &all, &na, &ready, &nr);

	while (!err && lo < hi) {
		struct rec_gpu t;

		if (joins_now(p, &p->gpu[lo], b, all, na, ready, nr)) {
			lo++;
			continue;
		}
		while (--hi > lo && !joins_now(p, &p->gpu[hi], b, all, na, ready, nr))
			;
		if (hi == lo)
			break;
		t = p->gpu[lo];
		p->gpu[lo++] = p->gpu[hi];
		p->gpu[hi] = t;
	}
	*k = err ? 0 : lo;
	free(all);
	free(ready);
	return err;
}

static int opstat_key_cmp(const void *a, const void *b)
{
	const struct gj_opstat *x = a, *y = b;

	if (x->op_id != y->op_id)
		return x->op_id < y->op_id ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* r's ops and counts into acc (ops kept sorted by op, stack). */
static int acc_add(struct gj_acc *acc, const struct gj_result *r)
{
	size_t n0 = acc->nops;

	for (size_t i = 0; i < r->nops; i++) {
		const struct gj_opstat *o = &r->ops[i];
		struct gj_opstat *a = n0 ? bsearch(o, acc->ops, n0, sizeof(*o), opstat_key_cmp) : NULL;

		if (!a) {
			if (GROW(acc->ops, acc->nops, acc->cap, 64))
				return -ENOMEM;
			a = &acc->ops[acc->nops++];
			*a = (struct gj_opstat){ .op_id = o->op_id, .stack_id = o->stack_id };
		}
		a->self_cuda_ns += o->self_cuda_ns;
		a->total_cuda_ns += o->total_cuda_ns;
		a->kernels += o->kernels;
		a->memcpys += o->memcpys;
		a->memsets += o->memsets;
	}
	if (acc->nops > n0)
		qsort(acc->ops, acc->nops, sizeof(*acc->ops), opstat_key_cmp);
	acc->counts.device += r->counts.device;
	acc->counts.attributed += r->counts.attributed;
	acc->counts.no_api += r->counts.no_api;
	acc->counts.no_host += r->counts.no_host;
	acc->counts.unattributed_ns += r->counts.unattributed_ns;
	acc->counts.outside += r->counts.outside;
	if (r->counts.offset_pairs > acc->counts.offset_pairs)
		acc->counts.offset_pairs = r->counts.offset_pairs;
	return 0;
}

/* Give back what a burst left: a quarter used, half the room goes. */
static void shrink(void **v, size_t n, size_t *cap, size_t elem)
{
	void *s;

	if (*cap <= 4096 || n > *cap / 4)
		return;
	if ((s = realloc(*v, (*cap / 2) * elem))) {
		*v = s;
		*cap /= 2;
	}
}

/* The joined API records' latest start per thread (gj_tid.api_ns). */
static void note_api(struct gj_pend *p, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		const struct rec_gpu *g = &p->gpu[i];
		struct gj_tid *t;
		uint64_t s;

		if (!is_api(g) || !(t = tid_get(p, g->h.tid, false)))
			continue;
		s = on_host(p, g->start_ns);
		if (s > t->api_ns)
			t->api_ns = s;
	}
}

/* Can a launch still get its API record?  Not once an API record of its
 * thread GJ_WINDOW_LAG_NS later was joined: CUPTI hands a thread's API
 * records over in order, within far less than that (and only a launch
 * whose own record is lost could take one older than GJ_MATCH_MAX_GAP_NS,
 * gpujoin.c, match_host).  Launches no API record took, kept for ever,
 * had filled the set to its cap under ~100,000 launches/s. */
static bool host_can_match(struct gj_pend *p, const struct gj_host *h)
{
	const struct gj_tid *t = tid_get(p, h->tid, false);

	return !t || h->ts_ns + GJ_WINDOW_LAG_NS >= t->api_ns;
}

/* After the join of gpu[0..k): the device records there go, the API
 * records there that found their device record (or are old), the launches
 * that were reached (or are old, or can match no API record any more).
 * Out of memory: all of them go. */
static void prune(struct gj_pend *p, size_t k, const struct gj_result *r, const struct bounds *b,
		  bool failed, struct gj_acc *acc)
{
	uint8_t *used = calloc(p->nhost + 1, 1);
	uint32_t *devc = malloc((k + 1) * sizeof(*devc));
	size_t nd = 0, n = 0;
	bool ok = used && devc && !b->last && !failed;

	for (size_t i = 0; used && i < r->ndev; i++)
		if (r->dev[i].host_idx >= 0 && (size_t)r->dev[i].host_idx < p->nhost)
			used[r->dev[i].host_idx] = 1;
	for (size_t i = 0; devc && i < k; i++)
		if (!is_api(&p->gpu[i]))
			devc[nd++] = p->gpu[i].correlation;
	note_api(p, k);
	if (nd)
		qsort(devc, nd, sizeof(*devc), u32_cmp);
	for (size_t i = 0; i < p->ngpu; i++) {
		const struct rec_gpu *g = &p->gpu[i];
		bool stays = i >= k ? ok : ok && is_api(g) && on_host(p, g->start_ns) >= b->oldest &&
					   !in_set(devc, nd, g->correlation);

		if (stays)
			p->gpu[n++] = *g;
		else
			acc->counts.api += is_api(g);
	}
	p->ngpu = n;
	n = 0;
	for (size_t i = 0; i < p->nhost; i++)
		if (ok && !used[i] && p->host[i].ts_ns >= b->oldest && host_can_match(p, &p->host[i]))
			p->host[n++] = p->host[i];
	p->nhost = n;
	free(used);
	free(devc);
	shrink((void **)&p->gpu, p->ngpu, &p->cgpu, sizeof(*p->gpu));
	shrink((void **)&p->host, p->nhost, &p->chost, sizeof(*p->host));
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Over three quarters of p->max waiting: the oldest quarter's time, so
 * it joins as it is (counted in p->expired); else 0. */
static uint64_t cap_oldest(struct gj_pend *p)
{
	size_t n = gj_pend_count(p), k = 0;
	uint64_t *ts, cut;

	if (!p->max || n < push_out_line(p) || !(ts = malloc(n * sizeof(*ts))))
		return 0;
	for (size_t i = 0; i < p->nhost; i++)
		ts[k++] = p->host[i].ts_ns;
	for (size_t i = 0; i < p->ngpu; i++)
		ts[k++] = p->gpu[i].start_ns;
	qsort(ts, n, sizeof(*ts), u64_cmp);
	cut = ts[n / 4];
	free(ts);
	p->expired += n / 4;
	return cut;
}

/* p->offset_ns from the first n CUPTI records and the host records, once
 * (GJ_OFFSET_AUTO's rule: kept 0 within GJ_SAME_CLOCK_NS, and while no
 * host/API pair exists yet).  0 or -errno. */
static int pend_offset(struct gj_pend *p, size_t n)
{
	int64_t est = 0;
	uint64_t pairs = 0;
	int err;

	if (p->offset_done)
		return 0;
	err = gj_estimate_offset(p->host, p->nhost, p->gpu, n, &est, &pairs);
	if (err == -ENODATA)
		return 0;
	if (err)
		return err;
	p->offset_done = true;
	if (est >= GJ_SAME_CLOCK_NS || est <= -GJ_SAME_CLOCK_NS) {
		p->offset_ns = est;
		p->offset_pairs = pairs;
	}
	return 0;
}

int gj_window_join(struct gj_pend *p, const struct gj_window *w, struct gj_acc *acc)
{
	bool last = w->now_ns == UINT64_MAX;
	struct bounds b = {
		.horizon = last ? UINT64_MAX : w->now_ns > w->lag_ns ? w->now_ns - w->lag_ns : 0,
		.oldest = last ? UINT64_MAX : w->now_ns > w->keep_ns ? w->now_ns - w->keep_ns : 0,
		.last = last,
	};
	struct gj_result r = { 0 };
	size_t k = 0;
	uint64_t cut = last ? 0 : cap_oldest(p);
	int err;

	if (cut > b.oldest)
		b.oldest = cut;
	if (b.oldest > b.horizon)
		b.horizon = b.oldest;
	/* before the partition: it puts CUPTI's times on the host's clock */
	err = p->nhost ? pend_offset(p, p->ngpu) : 0;
	if (!err)
		err = partition(p, &b, &k);

	if (!err && k) {
		struct gj_input in = { p->host, p->nhost, p->gpu, k, p->names, p->nnames,
				       w->spans, w->nspans, GJ_OFFSET_GIVEN, p->offset_ns,
				       w->keep, w->keep_ctx };

		err = gpujoin_run(&in, &r);
		if (!err && p->offset_ns)
			r.counts.offset_pairs = p->offset_pairs;
		if (!err)
			err = acc_add(acc, &r);
	}
	prune(p, k, &r, &b, err != 0, acc);
	gpujoin_free(&r);
	return err;
}

void gj_acc_result(const struct gj_acc *acc, struct gj_result *res)
{
	memset(res, 0, sizeof(*res));
	res->ops = acc->ops;
	res->nops = acc->nops;
	res->counts = acc->counts;
}

void gj_acc_free(struct gj_acc *acc)
{
	free(acc->ops);
	memset(acc, 0, sizeof(*acc));
}

/* ---- calls before the in-process ops began ---------------------------- */
static bool dev_kind(uint16_t kind)
{
	return kind == GPU_KERNEL || kind == GPU_MEMCPY || kind == GPU_MEMSET;
}

/* The first correlation of pid's calls after until_ns (or 0 when there
 * is none yet); with `add`, corr becomes it when lower or new. */
static uint32_t after_corr(struct gj_before *b, uint32_t pid, uint32_t corr, bool add)
{
	for (size_t i = 0; i < b->nafter; i++)
		if (b->after[i].pid == pid) {
			if (add && corr < b->after[i].corr)
				b->after[i].corr = corr;
			return b->after[i].corr;
		}
	if (add && b->nafter < GJ_AFTER_PIDS)
		b->after[b->nafter++] = (typeof(b->after[0])){ pid, corr };
	return add ? corr : 0;
}

static bool outside(const struct gj_before *b, uint64_t ts)
{
	return (b->since_ns && ts < b->since_ns) || (b->until_ns && ts > b->until_ns);
}

bool gj_before_drop(struct gj_before *b, const struct rec_hdr *h, size_t size)
{
	const struct rec_gpu *g = (const void *)h;
	bool drop = false;
	uint32_t ac;

	if ((!b->since_ns && !b->until_ns) || size < sizeof(*h) + sizeof(uint32_t))
		return false;
	switch (rec_kind(h)) {
	case EV_LAUNCH:
	case EV_MEMOP:
		drop = outside(b, h->ts_ns);
		break;
	case EV_GPU:
		if (size < sizeof(*g))
			return false;
		if (is_api(g) && b->since_ns && g->start_ns < b->since_ns) {
			if (!b->any || g->correlation > b->corr)
				b->corr = g->correlation;
			b->any = true;
			drop = true;
		} else if (is_api(g) && b->until_ns && g->start_ns > b->until_ns) {
			after_corr(b, g->pid, g->correlation, true);
			drop = true;
		} else if (dev_kind(g->kind)) {
			ac = b->until_ns ? after_corr(b, g->pid, 0, false) : 0;
			drop = (b->any && g->correlation <= b->corr) || (ac && g->correlation >= ac);
		}
		break;
	default:
		break;
	}
	b->dropped += drop;
	return drop;
}
