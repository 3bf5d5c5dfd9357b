/* gpucap.c - join stage, records: REC_GPU + host launches + op spans per
 * process -> gpujoin; flows from host launches to device records; device
 * times into profile rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "replay.h"
#include "gpucap.h"
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
	if (c->top && (c->rec->type == REC_LAUNCH || c->rec->type == REC_MEMOP))
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

#define PUSH(arr, n, cap, val)                                          \
	do {                                                            \
		void *p_ = grow(arr, &(cap), n, sizeof(*(arr)));        \
		if (!p_)                                                \
			return -ENOMEM;                                 \
		(arr) = p_;                                             \
		(arr)[(n)++] = (val);                                   \
	} while (0)

int gpucap_feed(struct gpucap *g, const struct rec_hdr *h)
{
	uint32_t pid;
	if (h->size < sizeof(*h) + sizeof(pid))
		return 0;
	if (g->spans && (h->type == REC_OP_ENTER || h->type == REC_OP_EXIT ||
			 h->type == REC_LAUNCH || h->type == REC_MEMOP)) {
		int err = gj_spans_feed(g->spans, h);
		if (err)
			return err;
	}
	if (h->type != REC_GPU && h->type != REC_LAUNCH && h->type != REC_MEMOP)
		return 0;
	memcpy(&pid, h + 1, sizeof(pid));
	struct gpucap_proc *p = proc_get(g, pid);
	if (!p)
		return -ENOMEM;
	struct gj_host host;
	switch (h->type) {
	case REC_LAUNCH:
		if (h->size < REC_LAUNCH_V1_SIZE)
			return 0;
		gj_host_from_launch(&host, (const void *)h);
		PUSH(p->host, p->nhost, p->chost, host);
		return 0;
	case REC_MEMOP:
		if (h->size < sizeof(struct rec_memop))
			return 0;
		gj_host_from_memop(&host, (const void *)h);
		PUSH(p->host, p->nhost, p->chost, host);
		return 0;
	}
	if (h->size < offsetof(struct rec_gpu, kind) + sizeof(uint16_t))
		return 0;
	const struct rec_gpu *r = (const void *)h;
	switch (r->kind) {
	case GPU_KERNEL: case GPU_MEMCPY: case GPU_MEMSET:
	case GPU_API_RUNTIME: case GPU_API_DRIVER:
		if (h->size < sizeof(struct rec_gpu) || r->end_ns < r->start_ns)
			return 0;
		PUSH(p->gpu, p->ngpu, p->cgpu, *r);
		p->gpu[p->ngpu - 1].name[TBPF_GPU_SHORT_NAME - 1] = 0;   /* ends inside */
		return 0;
	case GPU_NAME: {
		const struct rec_gpu_name *nm = (const void *)h;
		if (h->size < sizeof(*nm))
			return 0;
		for (size_t i = 0; i < p->nnames; i++)
			if (p->names[i].name_id == nm->name_id)
				return 0;
		PUSH(p->names, p->nnames, p->cnames, *nm);
		/* the name must end inside the record */
		p->names[p->nnames - 1].name[TBPF_GPU_NAME_MAX - 1] = 0;
		return 0;
	}
	default:
		return 0;
	}
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

struct keep_pid {
	const struct gpucap *g;
	uint32_t pid;
};

static bool keep_of_pid(void *ctx, uint64_t ts_ns)
{
	const struct keep_pid *k = ctx;

	return k->g->keep(k->g->keep_ctx, k->pid, ts_ns);
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
		struct gj_input in = { p->host, p->nhost, p->gpu, p->ngpu, p->names, p->nnames,
				       spans, nspans, GJ_OFFSET_AUTO, 0,
				       g->keep ? keep_of_pid : NULL, &kp };
		if (!p->ngpu)
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

static int sink_feed(void *g, const struct rec_hdr *h)
{
	return gpucap_feed(g, h);
}

static int sink_join(void *g)
{
	return gpucap_join(g);
}

struct replay_sink gpucap_sink(struct gpucap *g, const struct capture_reader *r)
{
	/* nothing to join without device records: the sink stays off */
	uint64_t types = capture_reader_stats(r)->records[REC_GPU] ? REPLAY_ALL : 0;

	return (struct replay_sink){ types, sink_feed, sink_join, g };
}

int gpucap_load(struct capture_reader *r, bool spans, struct gpucap *g)
{
	int ret = gpucap_init(g, spans);
	struct replay_sink sink = gpucap_sink(g, r);

	if (ret)
		return ret;
	if (capture_reader_error(r))
		return -EINVAL;
	if (!sink.types)
		return 0;   /* skip the pass */
	return capture_replay(r, &sink, 1);
}

void gpucap_free(struct gpucap *g)
{
	for (size_t i = 0; i < g->n; i++) {
		struct gpucap_proc *p = &g->v[i];
		free(p->host);
		free(p->gpu);
		free(p->names);
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
