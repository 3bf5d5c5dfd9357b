/* gpucap.c - join stage, records: device activity + host launches + op
 * spans per process -> gpujoin; flows from host launches to device
 * records; device times into profile rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "replay.h"
#include "gpucap.h"
#include "oprec.h"
#include "timeline.h"
#include "grow.h"

/* v with room for element n (grow_array), NULL when out of memory */
static void *grow(void *v, size_t *cap, size_t n, size_t elem)
{
	return grow_array(&v, cap, n, elem, 64) ? NULL : v;
}

/* ---- op spans enclosing a launch ----------------------------------------- */
struct span_pid {
	uint32_t pid;
	struct gj_op_span *v;
	size_t n, cap;
};

struct gj_spans {
	struct timeline *tl;
	struct span_pid *p;
	size_t np, cp;
	int err;
};

/* frame.user != NULL: a launch happened while the frame was open */
#define LAUNCHED ((void *)1)

static void sp_end(void *ctx, const struct tl_slice *s)
{
	struct gj_spans *g = ctx;
	if (!s->frames[s->depth].user)
		return;
	if (s->depth)
		s->frames[s->depth - 1].user = LAUNCHED;
	struct span_pid *sp = NULL;
	for (size_t i = 0; i < g->np && !sp; i++)
		if (g->p[i].pid == s->pid)
			sp = &g->p[i];
	if (!sp) {
		struct span_pid *n = grow(g->p, &g->cp, g->np, sizeof(*n));
		if (!n) {
			g->err = -ENOMEM;
			return;
		}
		g->p = n;
		sp = &g->p[g->np++];
		*sp = (struct span_pid){ .pid = s->pid };
	}
	struct gj_op_span *n = grow(sp->v, &sp->cap, sp->n, sizeof(*n));
	if (!n) {
		g->err = -ENOMEM;
		return;
	}
	sp->v = n;
	sp->v[sp->n++] = (struct gj_op_span){ s->begin_ns, s->end_ns, s->stack_id, s->tid, s->op_id };
}

static void sp_cuda(void *ctx, const struct tl_cuda *c)
{
	(void)ctx;
	if (c->top && (c->ev.kind == CEV_LAUNCH || c->ev.kind == CEV_MEMOP))
		c->top->frames[c->top->depth].user = LAUNCHED;
}

struct gj_spans *gj_spans_new(void)
{
	static const struct timeline_ops ops = { .slice_end = sp_end, .cuda = sp_cuda };
	struct gj_spans *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->tl = timeline_new(&ops, s);
	if (!s->tl) {
		free(s);
		return NULL;
	}
	return s;
}

int gj_spans_feed(struct gj_spans *s, const struct rec_hdr *h)
{
	int err = timeline_feed(s->tl, h);
	return err ? err : s->err;
}

void gj_spans_finish(struct gj_spans *s)
{
	timeline_finish(s->tl, 0);
}

const struct gj_op_span *gj_spans_of(const struct gj_spans *s, uint32_t pid, size_t *n)
{
	for (size_t i = 0; s && i < s->np; i++)
		if (s->p[i].pid == pid) {
			*n = s->p[i].n;
			return s->p[i].v;
		}
	*n = 0;
	return NULL;
}

struct open_spans {
	uint32_t pid, tid;
	uint64_t now;
	bool below;               /* a frame above, on this thread, holds a launch */
	struct gj_op_span *v;
	size_t n, cap;
	int err;
};

/* innermost first: a frame encloses a launch when it or one above does */
static void sp_open(void *ctx, const struct tl_slice *s)
{
	struct open_spans *o = ctx;
	struct gj_op_span *n;

	if (s->pid != o->pid || o->err)
		return;
	if (s->tid != o->tid)
		o->below = false;
	o->tid = s->tid;
	o->below |= s->frames[s->depth].user != NULL;
	if (!o->below)
		return;
	if (!(n = grow(o->v, &o->cap, o->n, sizeof(*n)))) {
		o->err = -ENOMEM;
		return;
	}
	o->v = n;
	o->v[o->n++] = (struct gj_op_span){ s->begin_ns, o->now, s->stack_id, s->tid, s->op_id };
}

int gj_spans_window(const struct gj_spans *s, uint32_t pid, uint64_t now_ns,
		    struct gj_op_span **out, size_t *n)
{
	struct open_spans o = { .pid = pid, .now = now_ns };
	size_t nc = 0;
	const struct gj_op_span *closed = gj_spans_of(s, pid, &nc);

	*out = NULL;
	*n = 0;
	o.cap = nc + 16;
	if (!(o.v = malloc(o.cap * sizeof(*o.v))))
		return -ENOMEM;
	if (nc)
		memcpy(o.v, closed, nc * sizeof(*o.v));
	o.n = nc;
	if (s)
		timeline_each_open(s->tl, sp_open, &o);
	if (o.err) {
		free(o.v);
		return o.err;
	}
	*out = o.v;
	*n = o.n;
	return 0;
}

void gj_spans_drop_before(struct gj_spans *s, uint64_t ts)
{
	for (size_t i = 0; s && i < s->np; i++) {
		struct span_pid *p = &s->p[i];
		size_t k = 0;

		for (size_t j = 0; j < p->n; j++)
			if (p->v[j].end_ns >= ts)
				p->v[k++] = p->v[j];
		p->n = k;
	}
}

static int cmp_host_at(const void *a, const void *b)
{
	const struct gj_host *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

/* a host call of tid in [start, end] in v[0..n) (sorted by tid, ts) */
static bool encloses(const struct gj_host *v, size_t n, const struct gj_op_span *sp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v[mid].tid < sp->tid || (v[mid].tid == sp->tid && v[mid].ts_ns < sp->start_ns))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].tid == sp->tid && v[lo].ts_ns <= sp->end_ns;
}

void gj_spans_trim(struct gj_spans *s, uint32_t pid, uint64_t ts, const struct gj_pend *p)
{
	struct gj_host *v = malloc((p->nhost + 1) * sizeof(*v));

	if (!v)
		return;   /* kept: trimmed next time */
	if (p->nhost) {   /* (no records: p->host may be NULL) */
		memcpy(v, p->host, p->nhost * sizeof(*v));
		qsort(v, p->nhost, sizeof(*v), cmp_host_at);
	}
	for (size_t i = 0; s && i < s->np; i++) {
		struct span_pid *sp = &s->p[i];
		size_t k = 0;

		if (sp->pid != pid)
			continue;
		for (size_t j = 0; j < sp->n; j++)
			if (sp->v[j].end_ns >= ts || encloses(v, p->nhost, &sp->v[j]))
				sp->v[k++] = sp->v[j];
		sp->n = k;
	}
	free(v);
}

void gj_spans_free(struct gj_spans *s)
{
	if (!s)
		return;
	timeline_free(s->tl);
	for (size_t i = 0; i < s->np; i++)
		free(s->p[i].v);
	free(s->p);
	free(s);
}

/* ---- collection ------------------------------------------------------------ */
int gpucap_init(struct gpucap *g, bool spans)
{
	memset(g, 0, sizeof(*g));
	if (spans && !(g->spans = gj_spans_new()))
		return -ENOMEM;
	return 0;
}

static struct gpucap_proc *proc_get(struct gpucap *g, uint32_t pid)
{
	for (size_t i = g->n; i-- > 0;)
		if (g->v[i].pid == pid)
			return &g->v[i];
	struct gpucap_proc *n = grow(g->v, &g->cap, g->n, sizeof(*n));
	if (!n)
		return NULL;
	g->v = n;
	memset(&g->v[g->n], 0, sizeof(g->v[g->n]));
	g->v[g->n].pid = pid;
	return &g->v[g->n++];
}

struct keep_pid {
	const struct gpucap *g;
	uint32_t pid;
};

static bool keep_of_pid(void *ctx, uint64_t ts_ns)
{
	const struct keep_pid *k = ctx;

	return k->g->keep(k->g->keep_ctx, k->pid, ts_ns);
}

/* windowed: p's ready records joined into p->acc up to now_ns, as the
 * live command's (a call once its thread went past it, no time limit) */
static int proc_window(struct gpucap *g, struct gpucap_proc *p, uint64_t now_ns)
{
	struct gj_op_span *spans = NULL;
	size_t nspans = 0;
	struct keep_pid kp = { g, p->pid };
	int err = g->spans ? gj_spans_window(g->spans, p->pid, now_ns, &spans, &nspans) : 0;

	if (!err) {
		struct gj_window w = { now_ns, UINT64_MAX, UINT64_MAX, spans, nspans,
				       g->keep ? keep_of_pid : NULL, &kp };

		err = gj_window_join(&p->pend, &w, &p->acc);
	}
	free(spans);
	p->next_join = gj_pend_next_join(&p->pend);
	return err;
}

/* windowed: the spans no launch left to join lies in go */
static void spans_trim(struct gpucap *g)
{
	uint64_t before = g->now_ns > GJ_WINDOW_LAG_NS ? g->now_ns - GJ_WINDOW_LAG_NS : 0;

	for (size_t i = 0; i < g->n; i++)
		gj_spans_trim(g->spans, g->v[i].pid, before, &g->v[i].pend);
}

int gpucap_feed(struct gpucap *g, const struct rec_hdr *h)
{
	enum ev_kind k = rec_kind(h);
	bool op = k == EV_OP_ENTER || k == EV_OP_EXIT, host = k == EV_LAUNCH || k == EV_MEMOP;
	uint32_t pid;
	int kept;

	if (h->size < sizeof(*h) + sizeof(pid))
		return 0;
	if (g->spans && (op || host)) {
		int err = gj_spans_feed(g->spans, h);
		if (err)
			return err;
	}
	if (k != EV_GPU && !host && (!g->windowed || !op))
		return 0;
	if (k != EV_GPU && h->ts_ns > g->now_ns)
		g->now_ns = h->ts_ns;
	memcpy(&pid, h + 1, sizeof(pid));
	struct gpucap_proc *p = proc_get(g, pid);
	if (!p)
		return -ENOMEM;
	p->pend.max = g->windowed ? GJ_PEND_MAX : 0;   /* as the live command's */
	kept = gj_pend_feed(&p->pend, h, h->size);
	if (kept < 0)
		return kept;
	if (g->windowed && kept && gj_pend_count(&p->pend) >= p->next_join) {
		int err = proc_window(g, p, g->now_ns);

		if (err)
			return err;
		spans_trim(g);
	}
	return 0;
}

/* ---- join ------------------------------------------------------------------ */
static int cmp_pid(const void *a, const void *b)
{
	const struct gpucap_proc *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static const struct gj_result *sort_res;

static int cmp_by_host(const void *a, const void *b)
{
	const struct gj_dev *x = &sort_res->dev[*(const uint32_t *)a];
	const struct gj_dev *y = &sort_res->dev[*(const uint32_t *)b];
	if (x->host_idx != y->host_idx)
		return x->host_idx < y->host_idx ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int cmp_flow(const void *a, const void *b)
{
	const struct gpucap_flow *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	if (x->api != y->api)
		return x->api < y->api ? -1 : 1;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

static int build_flows(struct gpucap_proc *p)
{
	const struct gj_result *r = &p->res;
	uint32_t *idx = calloc(r->ndev + 1, sizeof(*idx));
	p->flow_end = calloc(r->ndev + 1, 1);
	p->flows = calloc(r->ndev + 1, sizeof(*p->flows));
	if (!idx || !p->flow_end || !p->flows) {
		free(idx);
		return -ENOMEM;
	}
	size_t n = 0;
	for (size_t i = 0; i < r->ndev; i++)
		if (r->dev[i].host_idx >= 0)
			idx[n++] = (uint32_t)i;
	sort_res = r;
	qsort(idx, n, sizeof(*idx), cmp_by_host);
	for (size_t k = 0; k < n; k++) {
		const struct gj_dev *d = &r->dev[idx[k]];
		if (k && r->dev[idx[k - 1]].host_idx == d->host_idx)
			continue;   /* a graph's further kernels: one flow per launch */
		p->flow_end[idx[k]] = 1;
		p->flows[p->nflows++] = (struct gpucap_flow){ d->tid, d->host_api, d->launch_ts_ns, idx[k] };
	}
	free(idx);
	qsort(p->flows, p->nflows, sizeof(*p->flows), cmp_flow);
	return 0;
}

/* windowed: the rest joined; res takes the ops */
static int proc_last(struct gpucap *g, struct gpucap_proc *p)
{
	int err = proc_window(g, p, UINT64_MAX);

	gj_acc_result(&p->acc, &p->res);
	p->acc = (struct gj_acc){ 0 };   /* res.ops owns them now */
	g->ndev += p->res.counts.device;
	g->attributed += p->res.counts.attributed;
	return err;
}

int gpucap_join(struct gpucap *g)
{
	if (g->spans)
		gj_spans_finish(g->spans);
	qsort(g->v, g->n, sizeof(*g->v), cmp_pid);
	for (size_t i = 0; i < g->n; i++) {
		struct gpucap_proc *p = &g->v[i];
		size_t nspans = 0;
		const struct gj_op_span *spans = gj_spans_of(g->spans, p->pid, &nspans);
		struct keep_pid kp = { g, p->pid };
		struct gj_input in = { p->pend.host, p->pend.nhost, p->pend.gpu, p->pend.ngpu,
				       p->pend.names, p->pend.nnames, spans, nspans, GJ_OFFSET_AUTO, 0,
				       g->keep ? keep_of_pid : NULL, &kp };
		if (g->windowed) {
			int err = proc_last(g, p);

			if (err)
				return err;
			continue;
		}
		if (!p->pend.ngpu)
			continue;
		int err = gpujoin_run(&in, &p->res);
		if (err)
			return err;
		err = build_flows(p);
		if (err)
			return err;
		g->ndev += p->res.counts.device;
		for (size_t k = 0; k < p->res.ndev; k++)
			g->attributed += p->res.dev[k].host_idx >= 0 && p->res.dev[k].op_id;
	}
	return 0;
}

static int sink_feed(void *g, const struct rec_hdr *h, size_t size)
{
	return gpucap_feed(g, h);
}

static int sink_join(void *g)
{
	return gpucap_join(g);
}

struct bus_sink gpucap_sink(struct gpucap *g)
{
	return (struct bus_sink){ BUS_ALL, sink_feed, sink_join, g };
}

int gpucap_load(struct capture_reader *r, bool spans, struct gpucap *g)
{
	int ret = gpucap_init(g, spans);

	if (ret)
		return ret;
	if (capture_reader_error(r))
		return -EINVAL;
	if (!capture_stats_gpu(capture_reader_stats(r)))
		return 0;   /* nothing to join without device records: no pass */
	return capture_replay_sink(r, gpucap_sink(g));
}

void gpucap_free(struct gpucap *g)
{
	for (size_t i = 0; i < g->n; i++) {
		struct gpucap_proc *p = &g->v[i];
		gj_pend_free(&p->pend);
		gj_acc_free(&p->acc);
		free(p->flows);
		free(p->flow_end);
		gpujoin_free(&p->res);
	}
	free(g->v);
	gj_spans_free(g->spans);
	memset(g, 0, sizeof(*g));
}

const struct gpucap_proc *gpucap_proc(const struct gpucap *g, uint32_t pid)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->v[i].pid == pid)
			return &g->v[i];
	return NULL;
}

const struct gj_dev *gpucap_flow_of(const struct gpucap *g, uint32_t pid, uint32_t tid,
				    uint64_t ts_ns, uint32_t api)
{
	const struct gpucap_proc *p = gpucap_proc(g, pid);
	if (!p || !p->nflows)
		return NULL;
	struct gpucap_flow key = { tid, api, ts_ns, 0 };
	size_t lo = 0, hi = p->nflows;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cmp_flow(&p->flows[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nflows && p->flows[lo].tid == tid && p->flows[lo].ts_ns == ts_ns &&
	    p->flows[lo].api == api)
		return &p->res.dev[p->flows[lo].dev];
	return NULL;
}

size_t gpucap_nprocs_with_devices(const struct gpucap *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->n; i++)
		n += g->v[i].res.ndev > 0;
	return n;
}

const char *gpucap_copy_kind_name(uint32_t k)
{
	static const char *const names[] = { "?", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					     "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };
	return k < sizeof(names) / sizeof(*names) ? names[k] : "?";
}
