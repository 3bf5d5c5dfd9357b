/* timeline.c - pairing stage: per-thread op stacks from enter/exit records. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "replay.h"
#include "timeline.h"
#include "grow.h"

struct tl_thread {
	uint32_t pid, tid;
	uint32_t depth;
	size_t cap;
	uint32_t overflow;        /* enters ignored beyond TL_MAX_DEPTH */
	uint64_t stack_id;
	uint64_t last_ts;
	struct tl_frame *frames;
};

struct timeline {
	struct timeline_ops ops;
	void *ctx;
	struct tl_thread **slots;
	size_t nslots, nthreads;
	struct tl_thread *last;   /* records of one thread come in runs */
	struct timeline_stats st;
};

struct timeline *timeline_new(const struct timeline_ops *ops, void *ctx)
{
	struct timeline *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return NULL;
	if (ops)
		tl->ops = *ops;
	tl->ctx = ctx;
	tl->nslots = 64;
	tl->slots = calloc(tl->nslots, sizeof(*tl->slots));
	if (!tl->slots) {
		free(tl);
		return NULL;
	}
	return tl;
}

void timeline_free(struct timeline *tl)
{
	if (!tl)
		return;
	for (size_t i = 0; i < tl->nslots; i++) {
		if (tl->slots[i]) {
			free(tl->slots[i]->frames);
			free(tl->slots[i]);
		}
	}
	free(tl->slots);
	free(tl);
}

static size_t slot_of(uint32_t pid, uint32_t tid, size_t nslots)
{
	uint64_t k = ((uint64_t)pid << 32 | tid) * 0x9E3779B97F4A7C15ULL;
	return (k >> 20) & (nslots - 1);
}

static struct tl_thread *get_thread(struct timeline *tl, uint32_t pid, uint32_t tid)
{
	if (tl->last && tl->last->tid == tid && tl->last->pid == pid)
		return tl->last;
	size_t i = slot_of(pid, tid, tl->nslots);
	for (; tl->slots[i]; i = (i + 1) & (tl->nslots - 1))
		if (tl->slots[i]->pid == pid && tl->slots[i]->tid == tid)
			return tl->last = tl->slots[i];
	if ((tl->nthreads + 1) * 2 > tl->nslots) {
		size_t n = tl->nslots * 2;
		struct tl_thread **s = calloc(n, sizeof(*s));
		if (!s)
			return NULL;
		for (size_t j = 0; j < tl->nslots; j++) {
			struct tl_thread *t = tl->slots[j];
			if (!t)
				continue;
			size_t k = slot_of(t->pid, t->tid, n);
			while (s[k])
				k = (k + 1) & (n - 1);
			s[k] = t;
		}
		free(tl->slots);
		tl->slots = s;
		tl->nslots = n;
		i = slot_of(pid, tid, n);
		while (tl->slots[i])
			i = (i + 1) & (n - 1);
	}
	struct tl_thread *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	tl->slots[i] = t;
	tl->last = t;
	tl->nthreads++;
	tl->st.threads++;
	return t;
}

static void fill_slice(struct tl_slice *s, struct tl_thread *t, uint32_t i)
{
	struct tl_frame *f = &t->frames[i];
	s->pid = t->pid;
	s->tid = t->tid;
	s->op_id = f->op_id;
	s->depth = i;
	s->flags = f->flags;
	s->begin_ns = f->begin_ns;
	s->end_ns = 0;
	s->self_ns = 0;
	s->launches = f->launches;
	s->stack_id = f->stack_id ? f->stack_id : t->stack_id;
	s->shape_id = f->shape_id;
	s->frames = t->frames;
}

/* Close the top frame at ts with flags. */
static void close_top(struct timeline *tl, struct tl_thread *t, uint64_t ts, uint32_t flags)
{
	uint32_t i = t->depth - 1;
	struct tl_frame *f = &t->frames[i];
	struct tl_slice s;
	if (ts < f->begin_ns) {
		tl->st.backwards++;
		ts = f->begin_ns;
	}
	uint64_t dur = ts - f->begin_ns;
	fill_slice(&s, t, i);
	s.end_ns = ts;
	s.flags = flags | (f->flags & (OPF_REDISPATCH | OPF_SKIP | OPF_SCOPE | OPF_USER));
	s.self_ns = dur > f->child_ns ? dur - f->child_ns : 0;
	tl->st.slices++;
	if (tl->ops.slice_end)
		tl->ops.slice_end(tl->ctx, &s);
	t->depth--;
	if (i > 0)
		t->frames[i - 1].child_ns += dur;
}

static int on_enter(struct timeline *tl, struct tl_thread *t, const struct rec_op *r)
{
	uint64_t ts = r->h.ts_ns;
	while (t->depth > r->depth) {
		tl->st.inferred_closes++;
		close_top(tl, t, ts, OPF_INFERRED);
	}
	if (t->depth >= TL_MAX_DEPTH) {
		tl->st.too_deep++;
		t->overflow++;
		return 0;
	}
	if (GROW(t->frames, t->depth, t->cap, 16))
		return -ENOMEM;
	if (t->depth == 0)
		t->stack_id = r->stack_id;
	struct tl_frame *f = &t->frames[t->depth++];
	memset(f, 0, sizeof(*f));
	f->op_id = r->op_id;
	f->depth_rec = r->depth;
	f->flags = r->flags;
	f->begin_ns = ts;
	f->stack_id = r->stack_id;
	if (r->h.size >= sizeof(struct rec_op_shape))
		f->shape_id = ((const struct rec_op_shape *)r)->shape_id;
	if (tl->ops.slice_begin) {
		struct tl_slice s;
		fill_slice(&s, t, t->depth - 1);
		tl->ops.slice_begin(tl->ctx, &s);
	}
	return 0;
}

static void on_exit_rec(struct timeline *tl, struct tl_thread *t, const struct rec_op *r)
{
	if (t->overflow) {  /* LIFO: the deepest (ignored) enters exit first */
		t->overflow--;
		return;
	}
	int i;
	/* prefer a frame with the same op and recorded depth, else same op */
	for (i = (int)t->depth - 1; i >= 0; i--)
		if (t->frames[i].op_id == r->op_id && t->frames[i].depth_rec == r->depth)
			break;
	if (i < 0)
		for (i = (int)t->depth - 1; i >= 0; i--)
			if (t->frames[i].op_id == r->op_id)
				break;
	if (i < 0) {
		tl->st.orphan_exits++;
		return;
	}
	while ((int)t->depth - 1 > i) {
		tl->st.inferred_closes++;
		close_top(tl, t, r->h.ts_ns, OPF_INFERRED);
	}
	close_top(tl, t, r->h.ts_ns, r->flags);
}

/* The thread of (pid, tid), its last timestamp moved on to ts. */
static struct tl_thread *thread_at(struct timeline *tl, uint32_t pid, uint32_t tid, uint64_t ts)
{
	struct tl_thread *t = get_thread(tl, pid, tid);

	if (t && ts > t->last_ts)
		t->last_ts = ts;
	return t;
}

static int feed_op(struct timeline *tl, const struct rec_op *r)
{
	struct tl_thread *t = thread_at(tl, r->pid, r->h.tid, r->h.ts_ns);

	if (!t)
		return -ENOMEM;
	/* a redispatch nested directly in its own call is the same op call:
	 * not a slice of its own (BPF counts it once as well) */
	if (r->flags & OPF_SKIP) {
		tl->st.skipped++;
		return 0;
	}
	if (r->h.type == REC_OP_ENTER)
		return on_enter(tl, t, r);
	on_exit_rec(tl, t, r);
	return 0;
}

/* A CUDA call or allocator event (c->ev decoded), with the op on top of
 * its thread's stack. */
static int feed_cuda(struct timeline *tl, struct tl_cuda *c)
{
	struct tl_thread *t = thread_at(tl, c->ev.pid, c->ev.tid, c->ev.ts_ns);
	struct tl_slice top;

	if (!t)
		return -ENOMEM;
	c->pid = c->ev.pid;
	c->tid = c->ev.tid;
	if (t->depth) {
		if (c->ev.kind == CEV_LAUNCH)
			t->frames[t->depth - 1].launches++;
		fill_slice(&top, t, t->depth - 1);
		c->top = &top;
	}
	if (tl->ops.cuda)
		tl->ops.cuda(tl->ctx, c);
	return 0;
}

int timeline_feed(struct timeline *tl, const struct rec_hdr *rec)
{
	struct tl_cuda c = { .rec = rec };

	if (rec->type == REC_OP_ENTER || rec->type == REC_OP_EXIT)
		return feed_op(tl, (const struct rec_op *)rec);
	/* the CUDA records told apart by the capture's one decoder */
	if (!cuda_ev_decode(rec, &c.ev))
		return 0;
	return feed_cuda(tl, &c);
}

static int cmp_thread(const void *a, const void *b)
{
	const struct tl_thread *x = *(struct tl_thread *const *)a, *y = *(struct tl_thread *const *)b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

void timeline_finish(struct timeline *tl, uint64_t end_ns)
{
	struct tl_thread **ts = malloc((tl->nthreads + 1) * sizeof(*ts));
	size_t n = 0;
	if (!ts)
		return;
	for (size_t i = 0; i < tl->nslots; i++)
		if (tl->slots[i] && tl->slots[i]->depth)
			ts[n++] = tl->slots[i];
	qsort(ts, n, sizeof(*ts), cmp_thread);
	for (size_t i = 0; i < n; i++) {
		struct tl_thread *t = ts[i];
		uint64_t end = end_ns ? end_ns : t->last_ts;
		while (t->depth) {
			tl->st.inferred_closes++;
			close_top(tl, t, end, OPF_INFERRED);
		}
		t->overflow = 0;
	}
	free(ts);
}

void timeline_each_open(const struct timeline *tl, void (*fn)(void *ctx, const struct tl_slice *s),
			void *ctx)
{
	for (size_t i = 0; i < tl->nslots; i++) {
		struct tl_thread *t = tl->slots[i];

		for (uint32_t d = t ? t->depth : 0; d-- > 0;) {
			struct tl_slice s;

			fill_slice(&s, t, d);
			fn(ctx, &s);
		}
	}
}

const struct timeline_stats *timeline_stats(const struct timeline *tl)
{
	return &tl->st;
}

static int sink_feed(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct timeline_sink_ctx *c = ctx;
	int ret = timeline_feed(c->tl, h);

	return ret ? ret : c->err ? *c->err : 0;
}

static int sink_finish(void *ctx)
{
	struct timeline_sink_ctx *c = ctx;

	timeline_finish(c->tl, 0);
	return c->err ? *c->err : 0;
}

struct bus_sink timeline_sink(struct timeline_sink_ctx *c)
{
	return (struct bus_sink){ BUS_ALL, sink_feed, sink_finish, c };
}
