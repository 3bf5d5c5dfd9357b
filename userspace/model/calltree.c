/* calltree.c - stack aggregation stage: interned frames, call tree from a capture. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "calltree.h"
#include "capture.h"
#include "replay.h"
#include "strintern.h"
#include "timeline.h"
#include "grow.h"

#define NONE ((uint32_t)-1)

int calltree_init(struct calltree *ct)
{
	memset(ct, 0, sizeof(*ct));
	ct->strings = strintern_new();
	ct->cnodes = 64;
	ct->nodes = calloc(ct->cnodes, sizeof(*ct->nodes));
	if (!ct->strings || !ct->nodes) {
		calltree_free(ct);
		return -ENOMEM;
	}
	ct->nnodes = 1;  /* root */
	return 0;
}

void calltree_free(struct calltree *ct)
{
	free(ct->frames);
	free(ct->nodes);
	free(ct->fidx);
	free(ct->nidx);
	strintern_free(ct->strings);
	memset(ct, 0, sizeof(*ct));
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static uint64_t frame_hash(uint32_t kind, const char *name, const char *file, uint32_t line)
{
	return mix((uintptr_t)name * 31 + (uintptr_t)file * 17 + ((uint64_t)kind << 32 | line));
}

static int rehash(uint32_t **idx, size_t *n, size_t count, const void *arr, size_t elem,
		  uint64_t (*h)(const void *))
{
	size_t nn = *n ? *n * 2 : 256;
	while ((count + 1) * 2 > nn)
		nn *= 2;
	uint32_t *ni = calloc(nn, sizeof(*ni));
	if (!ni)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		size_t j = h((const char *)arr + i * elem) & (nn - 1);
		while (ni[j])
			j = (j + 1) & (nn - 1);
		ni[j] = i + 1;
	}
	free(*idx);
	*idx = ni;
	*n = nn;
	return 0;
}

static uint64_t h_frame(const void *e)
{
	const struct ct_frame *f = e;
	return frame_hash(f->kind, f->name, f->file, f->line);
}

static uint64_t h_node(const void *e)
{
	const struct ct_node *n = e;
	return mix(((uint64_t)n->parent << 32) | n->frame);
}

uint32_t calltree_frame(struct calltree *ct, uint32_t kind, const char *name, const char *file, uint32_t line)
{
	name = strintern(ct->strings, name);
	file = strintern(ct->strings, file);
	if (!name || !file)
		return NONE;
	if ((ct->nframes + 1) * 2 > ct->nfidx &&
	    rehash(&ct->fidx, &ct->nfidx, ct->nframes, ct->frames, sizeof(*ct->frames), h_frame))
		return NONE;
	size_t j = frame_hash(kind, name, file, line) & (ct->nfidx - 1);
	for (; ct->fidx[j]; j = (j + 1) & (ct->nfidx - 1)) {
		const struct ct_frame *f = &ct->frames[ct->fidx[j] - 1];
		if (f->kind == kind && f->name == name && f->file == file && f->line == line)
			return ct->fidx[j] - 1;
	}
	if (GROW(ct->frames, ct->nframes, ct->cframes, 64))
		return NONE;
	ct->frames[ct->nframes] = (struct ct_frame){ kind, line, name, file };
	ct->fidx[j] = ++ct->nframes;
	return ct->nframes - 1;
}

uint32_t calltree_child(struct calltree *ct, uint32_t parent, uint32_t frame)
{
	if ((ct->nnodes + 1) * 2 > ct->nnidx &&
	    rehash(&ct->nidx, &ct->nnidx, ct->nnodes, ct->nodes, sizeof(*ct->nodes), h_node))
		return NONE;
	size_t j = mix(((uint64_t)parent << 32) | frame) & (ct->nnidx - 1);
	for (; ct->nidx[j]; j = (j + 1) & (ct->nnidx - 1)) {
		const struct ct_node *n = &ct->nodes[ct->nidx[j] - 1];
		if (n->parent == parent && n->frame == frame && ct->nidx[j] != 1)
			return ct->nidx[j] - 1;
	}
	if (GROW(ct->nodes, ct->nnodes, ct->cnodes, 64))
		return NONE;
	ct->nodes[ct->nnodes] = (struct ct_node){ .parent = parent, .frame = frame,
						  .depth = ct->nodes[parent].depth + 1 };
	ct->nidx[j] = ++ct->nnodes;
	return ct->nnodes - 1;
}

void calltree_add(struct calltree *ct, uint32_t node, uint64_t self_ns, uint64_t calls)
{
	ct->nodes[node].self_ns += self_ns;
	ct->nodes[node].calls += calls;
}

void calltree_path(const struct calltree *ct, uint32_t node, uint32_t *out)
{
	for (uint32_t n = node; n != 0; n = ct->nodes[n].parent)
		out[ct->nodes[n].depth - 1] = ct->nodes[n].frame;
}

/* ---- from a capture ---- */

struct pystack_ent { uint32_t pid; uint32_t stack_id; uint32_t node; };

struct build_ctx {
	struct calltree *ct;
	const struct capture_meta *m;
	uint32_t *opframe;          /* op_id -> frame index + 1, grown on demand */
	size_t nopframe;
	struct pystack_ent *ps;     /* (pid, stack_id) -> node cache */
	size_t nps, cps;
	int err;
};

static uint32_t op_frame(struct build_ctx *b, uint32_t op_id)
{
	if (op_id < b->nopframe && b->opframe[op_id])
		return b->opframe[op_id] - 1;
	const struct capture_op *o = capture_meta_op(b->m, op_id);
	char buf[32];
	if (!o)
		snprintf(buf, sizeof(buf), "op#%u", op_id);
	uint32_t f = calltree_frame(b->ct, CT_OP, o ? o->name : buf, "", 0);
	if (f == NONE)
		return NONE;
	if (op_id < (1u << 20)) {
		if (GROW_INDEX(b->opframe, b->nopframe, op_id, 256))
			return NONE;
		b->opframe[op_id] = f + 1;
	}
	return f;
}

static uint32_t pystack_node(struct build_ctx *b, uint32_t pid, uint32_t stack_id)
{
	if (!stack_id)
		return 0;
	/* open-addressing cache (pid, stack_id) -> node */
	size_t j = 0;
	if (b->cps) {
		j = mix((uint64_t)pid << 32 | stack_id) & (b->cps - 1);
		for (; b->ps[j].stack_id; j = (j + 1) & (b->cps - 1))
			if (b->ps[j].pid == pid && b->ps[j].stack_id == stack_id)
				return b->ps[j].node;
	}
	uint32_t node = 0;
	const struct capture_stack *s = capture_meta_stack(b->m, pid, stack_id);
	if (s) {
		for (uint32_t i = s->nframes; i-- > 0 && node != NONE;) {
			const struct capture_frame *f = &s->frames[i];
			uint32_t fr = calltree_frame(b->ct, f->kind, f->name, f->file, f->line);
			node = fr == NONE ? NONE : calltree_child(b->ct, node, fr);
		}
	}
	if (node == NONE)
		return NONE;
	if ((b->nps + 1) * 2 > b->cps) {
		size_t nc = b->cps ? b->cps * 2 : 64;
		struct pystack_ent *np = calloc(nc, sizeof(*np));
		if (!np)
			return NONE;
		for (size_t i = 0; i < b->cps; i++) {
			if (!b->ps[i].stack_id)
				continue;
			size_t k = mix((uint64_t)b->ps[i].pid << 32 | b->ps[i].stack_id) & (nc - 1);
			while (np[k].stack_id)
				k = (k + 1) & (nc - 1);
			np[k] = b->ps[i];
		}
		free(b->ps);
		b->ps = np;
		b->cps = nc;
		j = mix((uint64_t)pid << 32 | stack_id) & (nc - 1);
		while (b->ps[j].stack_id)
			j = (j + 1) & (nc - 1);
	}
	b->ps[j] = (struct pystack_ent){ pid, stack_id, node };
	b->nps++;
	return node;
}

static void b_begin(void *vb, const struct tl_slice *s)
{
	struct build_ctx *b = vb;
	uint32_t parent = s->depth == 0 ? pystack_node(b, s->pid, (uint32_t)s->stack_id)
		: (uint32_t)(uintptr_t)s->frames[s->depth - 1].user;
	uint32_t f = parent == NONE ? NONE : op_frame(b, s->op_id);
	uint32_t node = f == NONE ? NONE : calltree_child(b->ct, parent, f);
	if (node == NONE) {
		b->err = -ENOMEM;
		node = 0;
	}
	s->frames[s->depth].user = (void *)(uintptr_t)node;
}

static void b_end(void *vb, const struct tl_slice *s)
{
	struct build_ctx *b = vb;
	calltree_add(b->ct, (uint32_t)(uintptr_t)s->frames[s->depth].user, s->self_ns, 1);
}

struct calltree_build {
	struct build_ctx b;
	struct timeline_sink_ctx tc;
};

struct calltree_build *calltree_build_new(struct calltree *ct, const struct capture_meta *m)
{
	static const struct timeline_ops ops = { .slice_begin = b_begin, .slice_end = b_end };
	struct calltree_build *cb = calloc(1, sizeof(*cb));

	if (!cb)
		return NULL;
	cb->b = (struct build_ctx){ .ct = ct, .m = m };
	cb->tc.err = &cb->b.err;
	cb->tc.tl = timeline_new(&ops, &cb->b);
	if (!cb->tc.tl) {
		free(cb);
		return NULL;
	}
	return cb;
}

struct bus_sink calltree_build_sink(struct calltree_build *cb)
{
	return timeline_sink(&cb->tc);
}

void calltree_build_free(struct calltree_build *cb, const struct capture_stats *st)
{
	const struct capture_meta *m;

	if (!cb)
		return;
	m = cb->b.m;
	timeline_free(cb->tc.tl);
	free(cb->b.opframe);
	free(cb->b.ps);
	cb->b.ct->start_real_ns = m->run.start_real_ns;
	cb->b.ct->duration_ns = m->end.present ? m->end.duration_ns : st->max_ts - st->min_ts;
	free(cb);
}

int calltree_from_capture(struct capture_reader *r, struct calltree *ct)
{
	struct calltree_build *cb;
	struct bus_sink sink;
	int ret;

	if (capture_reader_error(r))
		return -EINVAL;
	cb = calltree_build_new(ct, capture_reader_meta(r));
	if (!cb)
		return -ENOMEM;
	sink = calltree_build_sink(cb);
	ret = capture_replay_sink(r, sink);
	calltree_build_free(cb, capture_reader_stats(r));
	return ret;
}
