/* profile.c - model stage: per-op rows, folding, sorting; op records ->
 * rows (profile_agg, fed by model.c's replay). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "capture.h"
#include "gpujoin.h"
#include "profile.h"
#include "shapes.h"
#include "srcloc.h"
#include "steps.h"
#include "strintern.h"
#include "replay.h"
#include "timeline.h"
#include "grow.h"

void profile_init(struct profile *p)
{
	memset(p, 0, sizeof(*p));
	p->exit_mode = "";
	p->gpu_note = "";
	p->mode = "";
}

void profile_free(struct profile *p)
{
	free(p->pids);
	free(p->ops);
	free(p->modcalls);
	free(p->gpu_noop);
	for (size_t i = 0; i < p->nsrcs; i++)
		free(p->srcs[i].f);
	free(p->srcs);
	free(p->index);
	strintern_free(p->strings);
	profile_init(p);
}

int profile_add_modcall(struct profile *p, uint32_t pid, uint64_t stack_id, uint64_t calls)
{
	/* a few hundred stacks at most: newest first */
	for (size_t k = p->nmodcalls; k-- > 0;) {
		struct prof_modcall *m = &p->modcalls[k];

		if (m->pid == pid && m->stack_id == stack_id) {
			m->calls += calls;
			return 0;
		}
	}
	if (GROW(p->modcalls, p->nmodcalls, p->capmodcalls, 64))
		return -ENOMEM;
	p->modcalls[p->nmodcalls++] = (struct prof_modcall){ pid, stack_id, calls };
	return 0;
}

int profile_add_gpu_noop(struct profile *p, uint32_t pid, uint64_t ns)
{
	for (size_t k = 0; k < p->ngpu_noop; k++)
		if (p->gpu_noop[k].pid == pid) {
			p->gpu_noop[k].ns += ns;
			return 0;
		}
	if (GROW(p->gpu_noop, p->ngpu_noop, p->capgpu_noop, 4))
		return -ENOMEM;
	p->gpu_noop[p->ngpu_noop++] = (struct prof_gpu_noop){ pid, ns };
	return 0;
}

uint64_t profile_gpu_noop_ns(const struct profile *p)
{
	uint64_t ns = 0;

	for (size_t k = 0; k < p->ngpu_noop; k++)
		ns += p->gpu_noop[k].ns;
	return ns;
}

const char *profile_intern(struct profile *p, const char *s)
{
	if (!p->strings && !(p->strings = strintern_new()))
		return NULL;
	return strintern(p->strings, s ? s : "");
}

int profile_set_pids(struct profile *p, const uint32_t *pids, size_t n)
{
	uint32_t *np = malloc((n ? n : 1) * sizeof(*np));
	if (!np)
		return -ENOMEM;
	if (n)
		memcpy(np, pids, n * sizeof(*np));
	free(p->pids);
	p->pids = np;
	p->npids = n;
	return 0;
}

static size_t key_hash(uint32_t pid, uint32_t op_id, uint64_t stack_id, uint64_t shape_id,
		       size_t n)
{
	uint64_t h = ((uint64_t)pid << 32 | op_id) * 0x9E3779B97F4A7C15ULL;
	h ^= stack_id * 0xC2B2AE3D27D4EB4FULL;
	h ^= shape_id * 0x165667B19E3779F9ULL;
	h ^= h >> 29;
	return h & (n - 1);
}

static int reindex(struct profile *p, size_t n)
{
	uint32_t *idx = calloc(n, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t r = 0; r < p->nops; r++) {
		const struct prof_op *o = &p->ops[r];
		size_t i = key_hash(o->pid, o->op_id, o->stack_id, o->shape_id, n);
		while (idx[i])
			i = (i + 1) & (n - 1);
		idx[i] = r + 1;
	}
	free(p->index);
	p->index = idx;
	p->nindex = n;
	return 0;
}

static void mem_add(struct prof_op *e, const struct prof_op *o)
{
	for (int i = 0; i < 2; i++) {
		e->mem_self[i] += o->mem_self[i];
		e->mem_total[i] += o->mem_total[i];
	}
}

int profile_add_op(struct profile *p, const struct prof_op *o)
{
	if ((p->nops + 1) * 2 > p->nindex && reindex(p, p->nindex ? p->nindex * 2 : 256))
		return -ENOMEM;
	size_t i = key_hash(o->pid, o->op_id, o->stack_id, o->shape_id, p->nindex);
	for (; p->index[i]; i = (i + 1) & (p->nindex - 1)) {
		struct prof_op *e = &p->ops[p->index[i] - 1];
		if (e->pid == o->pid && e->op_id == o->op_id && e->stack_id == o->stack_id &&
		    e->shape_id == o->shape_id) {
			e->calls += o->calls;
			e->self_ns += o->self_ns;
			e->total_ns += o->total_ns;
			if (o->max_ns > e->max_ns)
				e->max_ns = o->max_ns;
			e->launches += o->launches;
			e->inferred += o->inferred;
			e->folded += o->folded;
			e->self_cuda_ns += o->self_cuda_ns;
			e->cuda_total_ns += o->cuda_total_ns;
			e->flops += o->flops;
			mem_add(e, o);
			return 0;
		}
	}
	if (GROW(p->ops, p->nops, p->cap, 64))
		return -ENOMEM;
	struct prof_op *e = &p->ops[p->nops];
	*e = *o;
	e->name = profile_intern(p, o->name);
	e->overload = profile_intern(p, o->overload);
	e->shapes = profile_intern(p, o->shapes);
	e->srcloc = profile_intern(p, o->srcloc);
	e->types = profile_intern(p, o->types);
	if (!e->name || !e->overload || !e->shapes || !e->srcloc || !e->types)
		return -ENOMEM;
	p->index[i] = ++p->nops;
	return 0;
}

int profile_add_opstat(struct profile *p, const struct tbpf_opkey *k, const struct tbpf_opstat *v,
		       const char *name, const char *overload)
{
	struct prof_op o = {
		.pid = k->pid, .op_id = k->op_id, .stack_id = k->stack_id, .shape_id = k->shape_id,
		.name = name, .overload = overload,
		.calls = v->calls - v->folded, .self_ns = v->self_ns, .total_ns = v->total_ns,
		.max_ns = v->max_ns, .launches = v->launches, .inferred = v->inferred,
		.folded = v->folded,
	};
	for (int i = 0; i < 2; i++) {
		o.mem_self[i] = v->mem_self[i];
		o.mem_total[i] = v->mem_total[i];
	}
	return profile_add_op(p, &o);
}

/* ---- folding ---- */

static unsigned fold_by;

static int cmp_fold(const void *a, const void *b)
{
	const struct prof_op *x = a, *y = b;
	int c;
	if ((fold_by & PROF_BY_PID) && x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if ((c = strcmp(x->name, y->name)))
		return c;
	if ((fold_by & PROF_BY_OVERLOAD) && (c = strcmp(x->overload, y->overload)))
		return c;
	if ((fold_by & PROF_BY_STACK) && x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	if ((fold_by & PROF_BY_SHAPE) && (c = strcmp(x->shapes ? x->shapes : "",
						     y->shapes ? y->shapes : "")))
		return c;
	if ((fold_by & PROF_BY_SRCLOC) && (c = strcmp(x->srcloc ? x->srcloc : "",
						      y->srcloc ? y->srcloc : "")))
		return c;
	return 0;
}

int profile_fold(const struct profile *p, unsigned by, struct prof_op **rows, size_t *nrows)
{
	struct prof_op *r = malloc((p->nops ? p->nops : 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (p->nops)
		memcpy(r, p->ops, p->nops * sizeof(*r));
	fold_by = by;
	qsort(r, p->nops, sizeof(*r), cmp_fold);
	size_t n = 0;
	for (size_t i = 0; i < p->nops; i++) {
		struct prof_op o = r[i];
		if (!(by & PROF_BY_PID))
			o.pid = 0;
		if (!(by & PROF_BY_OVERLOAD))
			o.overload = "";
		if (!(by & PROF_BY_STACK))
			o.stack_id = 0;
		if (!(by & PROF_BY_SHAPE)) {
			o.shape_id = 0;
			o.shapes = "";
			o.types = "";
		}
		if (!(by & PROF_BY_SRCLOC))
			o.srcloc = "";
		if (n && cmp_fold(&r[n - 1], &o) == 0) {
			struct prof_op *e = &r[n - 1];
			if (e->op_id != o.op_id)
				e->op_id = 0;
			e->calls += o.calls;
			e->self_ns += o.self_ns;
			e->total_ns += o.total_ns;
			if (o.max_ns > e->max_ns)
				e->max_ns = o.max_ns;
			e->launches += o.launches;
			e->inferred += o.inferred;
			e->folded += o.folded;
			e->self_cuda_ns += o.self_cuda_ns;
			e->cuda_total_ns += o.cuda_total_ns;
			e->flops += o.flops;
			if (e->shape_id != o.shape_id)
				e->shape_id = 0;
			if (strcmp(e->types ? e->types : "", o.types ? o.types : ""))
				e->types = "";
			mem_add(e, &o);
		} else {
			r[n++] = o;
		}
	}
	*rows = r;
	*nrows = n;
	return 0;
}

/* ---- sorting ---- */

enum skey { SK_SELF_CPU, SK_CPU_TOTAL, SK_CPU_AVG, SK_COUNT, SK_SELF_CUDA, SK_CUDA_TOTAL,
	    SK_CUDA_AVG, SK_LAUNCHES, SK_MAX, SK_NAME, SK_SELF_CPU_MEM, SK_CPU_MEM,
	    SK_SELF_CUDA_MEM, SK_CUDA_MEM };

const char *const profile_sort_keys[] = {
	"self_cpu_time_total", "cpu_time_total", "cpu_time", "count", "self_cuda_time_total",
	"cuda_time_total", "cuda_time", "launches", "max_cpu_time", "name",
	"self_cpu_memory_usage", "cpu_memory_usage", "self_cuda_memory_usage",
	"cuda_memory_usage", NULL,
};

static int skey_of(const char *key)
{
	for (int i = 0; profile_sort_keys[i]; i++)
		if (!strcmp(key, profile_sort_keys[i]))
			return i;
	return -1;
}

bool profile_sort_key_valid(const char *key)
{
	return key && skey_of(key) >= 0;
}

static int sort_key;

/* a/b vs c/d without rounding; x/0 counts as 0 like torch's average */
static int cmp_avg(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	if (!b)
		a = 0, b = 1;
	if (!d)
		c = 0, d = 1;
	unsigned __int128 l = (unsigned __int128)a * d, r = (unsigned __int128)c * b;
	return l < r ? -1 : l > r;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_i64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_rows(const void *pa, const void *pb)
{
	const struct prof_op *x = pa, *y = pb;
	int c = 0;
	switch (sort_key) {
	case SK_SELF_CPU: c = cmp_u64(x->self_ns, y->self_ns); break;
	case SK_CPU_TOTAL: c = cmp_u64(x->total_ns, y->total_ns); break;
	case SK_CPU_AVG: c = cmp_avg(x->total_ns, x->calls, y->total_ns, y->calls); break;
	case SK_COUNT: c = cmp_u64(x->calls, y->calls); break;
	case SK_SELF_CUDA: c = cmp_u64(x->self_cuda_ns, y->self_cuda_ns); break;
	case SK_CUDA_TOTAL: c = cmp_u64(x->cuda_total_ns, y->cuda_total_ns); break;
	case SK_CUDA_AVG: c = cmp_avg(x->cuda_total_ns, x->calls, y->cuda_total_ns, y->calls); break;
	case SK_LAUNCHES: c = cmp_u64(x->launches, y->launches); break;
	case SK_MAX: c = cmp_u64(x->max_ns, y->max_ns); break;
	case SK_NAME: c = 0; break;
	case SK_SELF_CPU_MEM: c = cmp_i64(x->mem_self[0], y->mem_self[0]); break;
	case SK_CPU_MEM: c = cmp_i64(x->mem_total[0], y->mem_total[0]); break;
	case SK_SELF_CUDA_MEM: c = cmp_i64(x->mem_self[1], y->mem_self[1]); break;
	case SK_CUDA_MEM: c = cmp_i64(x->mem_total[1], y->mem_total[1]); break;
	}
	if (c)
		return -c;  /* descending */
	if ((c = strcmp(x->name, y->name)))
		return c;
	if ((c = strcmp(x->overload, y->overload)))
		return c;
	if ((c = cmp_u64(x->pid, y->pid)))
		return c;
	if ((c = strcmp(x->shapes ? x->shapes : "", y->shapes ? y->shapes : "")))
		return c;
	if ((c = strcmp(x->srcloc ? x->srcloc : "", y->srcloc ? y->srcloc : "")))
		return c;
	return cmp_u64(x->stack_id, y->stack_id);
}

int profile_sort(struct prof_op *rows, size_t n, const char *key)
{
	int k = skey_of(key ? key : "self_cpu_time_total");
	if (k < 0)
		return -EINVAL;
	sort_key = k;
	qsort(rows, n, sizeof(*rows), cmp_rows);
	return 0;
}

/* ---- capture -> profile ---- */

/* Per open op, what torch.profiler's _remove_dup_nodes needs: how many
 * ops closed directly inside it, and the first one when it has its name
 * (the same rule as pop_frame in bpf/frames.bpf.h). */
struct agg_frame {
	uint32_t op_id, nchild, dup_op;
	uint64_t dup_self, dup_total, dup_shape;
	/* --profile-memory (as pop_frame in BPF): bytes by this op, with
	 * its children, and the same of its dup child */
	int64_t mem_self[2], mem_total[2], dup_mem_self[2], dup_mem_total[2];
};

struct agg_thread {
	uint32_t pid, tid;
	struct agg_frame *f;
	size_t cap;
};

struct agg_ctx {
	struct profile *p;
	const struct capture_meta *m;
	struct agg_thread *th;
	size_t nth, cth;
	int err;
	/* --steps / --schedule: only slices that begin in an active step */
	const struct steps *win;
	const struct step_schedule *sched;
};

static bool agg_keep(const struct agg_ctx *c, uint32_t pid, uint64_t t)
{
	return !c->win || steps_window_has(c->win, c->sched, pid, t);
}

static struct agg_frame *agg_frame_at(struct agg_ctx *c, uint32_t pid, uint32_t tid, uint32_t d)
{
	struct agg_thread *t = NULL;

	for (size_t i = 0; i < c->nth; i++)
		if (c->th[i].pid == pid && c->th[i].tid == tid) {
			t = &c->th[i];
			break;
		}
	if (!t) {
		if (GROW(c->th, c->nth, c->cth, 8))
			return NULL;
		t = &c->th[c->nth++];
		*t = (struct agg_thread){ .pid = pid, .tid = tid };
	}
	if (GROW_INDEX(t->f, t->cap, d, 16))
		return NULL;
	return &t->f[d];
}

static const char *agg_name(struct agg_ctx *c, uint32_t op_id)
{
	const struct capture_op *o = c->m ? capture_meta_op(c->m, op_id) : NULL;
	return o && o->name ? o->name : NULL;
}

static void agg_add(struct agg_ctx *ctx, const struct prof_op *o)
{
	int err = profile_add_op(ctx->p, o);
	if (err && !ctx->err)
		ctx->err = err;
}

static void agg_slice_begin(void *vctx, const struct tl_slice *s)
{
	struct agg_ctx *ctx = vctx;
	struct agg_frame *f = agg_frame_at(ctx, s->pid, s->tid, s->depth);

	if (!f) {
		ctx->err = -ENOMEM;
		return;
	}
	*f = (struct agg_frame){ .op_id = s->op_id };
}

static void agg_slice_end(void *vctx, const struct tl_slice *s)
{
	struct agg_ctx *ctx = vctx;
	uint64_t dur = s->end_ns - s->begin_ns, self = s->self_ns;
	struct agg_frame *f = agg_frame_at(ctx, s->pid, s->tid, s->depth);
	struct agg_frame *pf = s->depth ? agg_frame_at(ctx, s->pid, s->tid, s->depth - 1) : NULL;
	const char *name;

	int64_t ms[2] = { 0 }, mt[2] = { 0 };
	bool own = f && f->op_id == s->op_id;
	bool keep = agg_keep(ctx, s->pid, s->begin_ns);

	if (own)
		for (int i = 0; i < 2; i++) {
			ms[i] = f->mem_self[i];
			mt[i] = f->mem_total[i];
		}
	if (own && f->nchild == 1 && f->dup_op) {
		/* u64 wrap-around: the row's sums stay right */
		struct prof_op u = { .pid = s->pid, .op_id = f->dup_op, .name = "", .overload = "",
				     .stack_id = s->stack_id, .shape_id = f->dup_shape, .folded = 1, .calls = (uint64_t)0 - 1,
				     .self_ns = (uint64_t)0 - f->dup_self,
				     .total_ns = (uint64_t)0 - f->dup_total };
		for (int i = 0; i < 2; i++) {
			u.mem_self[i] = -f->dup_mem_self[i];
			u.mem_total[i] = -f->dup_mem_total[i];
			ms[i] += f->dup_mem_self[i];
		}
		if (keep)
			agg_add(ctx, &u);
		self += f->dup_self;
	}
	if (pf) {
		pf->nchild++;
		for (int i = 0; i < 2; i++)
			pf->mem_total[i] += mt[i];
		name = agg_name(ctx, s->op_id);
		if (pf->nchild == 1 && name && agg_name(ctx, pf->op_id) &&
		    !strcmp(name, agg_name(ctx, pf->op_id))) {
			pf->dup_op = s->op_id;
			pf->dup_self = self;
			pf->dup_total = dur;
			pf->dup_shape = s->shape_id;
			for (int i = 0; i < 2; i++) {
				pf->dup_mem_self[i] = ms[i];
				pf->dup_mem_total[i] = mt[i];
			}
		}
	}
	struct prof_op o = {
		.pid = s->pid,
		.op_id = s->op_id,
		.name = "",
		.overload = "",
		.stack_id = s->stack_id,
		.shape_id = s->shape_id,
		.calls = 1,
		.self_ns = self,
		.total_ns = dur,
		.max_ns = dur,
		.launches = s->launches,
		.inferred = (s->flags & (OPF_INFERRED | OPF_UNWOUND)) ? 1 : 0,
		.mem_self = { ms[0], ms[1] },
		.mem_total = { mt[0], mt[1] },
	};
	if (keep)
		agg_add(ctx, &o);
}

/* --profile-memory: an allocation or free torch.profiler reports to the
 * op on top of its thread, or to the "[memory]" row */
static void agg_mem(void *vctx, const struct tl_cuda *c)
{
	struct agg_ctx *ctx = vctx;
	int64_t bytes = c->ev.mem_bytes;
	int dev = c->ev.dev_type == TBPF_C10_DEV_CPU ? MEM_DEV_CPU : MEM_DEV_CUDA;

	if (c->ev.kind != CEV_MEM)
		return;
	if (dev == MEM_DEV_CUDA)
		ctx->p->has_cuda_memory = true;
	if (c->top) {
		struct agg_frame *f = agg_frame_at(ctx, c->pid, c->tid, c->top->depth);

		if (!f) {
			ctx->err = -ENOMEM;
			return;
		}
		f->mem_self[dev] += bytes;
		f->mem_total[dev] += bytes;
		return;
	}
	if (!agg_keep(ctx, c->pid, c->ev.ts_ns))
		return;
	struct prof_op o = { .pid = c->pid, .op_id = TBPF_OPID_MEMORY, .name = "", .overload = "",
			     .calls = 1 };
	o.mem_self[dev] = o.mem_total[dev] = bytes;
	agg_add(ctx, &o);
}

static int cmp_pid(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

struct profile_agg {
	struct agg_ctx ctx;
	struct timeline_sink_ctx tc;
};

struct profile_agg *profile_agg_new(struct profile *p, const struct capture_meta *m)
{
	static const struct timeline_ops ops = { .slice_begin = agg_slice_begin,
						 .slice_end = agg_slice_end, .cuda = agg_mem };
	struct profile_agg *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->ctx = (struct agg_ctx){ .p = p, .m = m };
	a->tc.err = &a->ctx.err;
	a->tc.tl = timeline_new(&ops, &a->ctx);
	if (!a->tc.tl) {
		free(a);
		return NULL;
	}
	return a;
}

void profile_agg_window(struct profile_agg *a, const struct steps *st,
			const struct step_schedule *s)
{
	a->ctx.win = st;
	a->ctx.sched = s;
}

struct bus_sink profile_agg_sink(struct profile_agg *a)
{
	return timeline_sink(&a->tc);
}

void profile_agg_free(struct profile_agg *a)
{
	if (!a)
		return;
	timeline_free(a->tc.tl);
	for (size_t i = 0; i < a->ctx.nth; i++)
		free(a->ctx.th[i].f);
	free(a->ctx.th);
	free(a);
}

int profile_capture_info(struct profile *p, const struct capture_meta *m,
			 const struct capture_stats *st, uint64_t gpu_reached, uint64_t gpu_devices)
{
	/* names from the op table */
	for (size_t i = 0; i < p->nops; i++) {
		struct prof_op *o = &p->ops[i];
		if (o->name[0])
			continue;
		const struct capture_op *co = capture_meta_op(m, o->op_id);
		char buf[32];
		if (o->op_id == TBPF_OPID_MEMORY) {
			o->name = profile_intern(p, PROF_MEMORY_ROW);
			o->overload = profile_intern(p, "");
			if (!o->name || !o->overload)
				return -ENOMEM;
			continue;
		}
		if (!co)
			snprintf(buf, sizeof(buf), "op#%u", o->op_id);
		o->name = profile_intern(p, co ? co->name : buf);
		o->overload = profile_intern(p, co ? co->overload : "");
		if (!o->name || !o->overload)
			return -ENOMEM;
	}
	/* input shapes: text and FLOPs from the capture's shape lists */
	for (size_t i = 0; i < p->nops; i++) {
		struct prof_op *o = &p->ops[i];
		const struct tbpf_shape *sh = capture_meta_shape(m, o->shape_id);
		struct shape_more more;
		char text[4096];

		if (!sh)
			continue;
		shape_more_of_meta(m, o->shape_id, sh, &more);
		shape_format(sh, &more, text, sizeof(text));
		if (!(o->shapes = profile_intern(p, text)))
			return -ENOMEM;
		shape_types(sh, text, sizeof(text));
		if (!(o->types = profile_intern(p, text)))
			return -ENOMEM;
		o->flops = shape_flops(o->name, sh, &more) * o->calls;
	}

	/* run; without a run record, the pids seen */
	if (m->run.present) {
		if (profile_set_pids(p, m->run.pids, m->run.npids))
			return -ENOMEM;
	} else if (p->nops) {
		uint32_t *pids = malloc(p->nops * sizeof(*pids));
		size_t n = 0;
		if (!pids)
			return -ENOMEM;
		for (size_t i = 0; i < p->nops; i++)
			pids[n++] = p->ops[i].pid;
		qsort(pids, n, sizeof(*pids), cmp_pid);
		size_t u = 0;
		for (size_t i = 0; i < n; i++)
			if (!u || pids[u - 1] != pids[i])
				pids[u++] = pids[i];
		int err = profile_set_pids(p, pids, u);
		free(pids);
		if (err)
			return err;
	}
	p->probes_attached = m->run.probes_attached;
	p->has_memory = m->run.present && (m->run.mode & TBPF_MODE_MEMORY);
	if (m->run.present)
		p->mode = (m->run.mode & TBPF_MODE_INPROC) ? "in-process RecordFunction callbacks"
			  : (m->run.mode & TBPF_MODE_EXITS) ? "return probes"
			  : "inferred (entry probes only)";
	if (m->end.present) {
		p->duration_ns = m->end.duration_ns;
		p->events_dropped = capture_end_dropped(&m->end);
		p->exit_mode = profile_intern(p, m->end.exit_mode);
		p->has_gpu_times = (m->end.flags & CAPTURE_END_GPU_TIMES) || gpu_reached;
		p->gpu_note = profile_intern(p, p->has_gpu_times ? "" :
					     (m->end.gpu_note[0] ? m->end.gpu_note
					      : "no device activity records in the capture"));
	} else {
		p->duration_ns = st->max_ts - st->min_ts;
		p->exit_mode = profile_intern(p, "incomplete (no end record)");
		p->has_gpu_times = gpu_reached > 0;
		p->gpu_note = profile_intern(p, gpu_reached ? "" : gpu_devices ?
					     "device records in the capture, none launched inside an op" :
					     "no device activity records in the capture");
	}
	if (!p->exit_mode || !p->gpu_note)
		return -ENOMEM;
	return 0;
}


/* ---- device times (join/gpucap.c) into the rows -------------------------- */
static ssize_t find_gpu_row(const struct profile *p, uint32_t pid, uint32_t op, uint32_t stack)
{
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].pid == pid && p->ops[i].op_id == op && (uint32_t)p->ops[i].stack_id == stack)
			return (ssize_t)i;
	return -1;
}

int profile_add_gpu(struct profile *p, const struct gj_result *res, uint32_t pid,
		    const char *(*op_name)(void *ctx, uint32_t id, const char **overload), void *ctx)
{
	int reached = 0;
	for (size_t k = 0; k < res->nops; k++) {
		const struct gj_opstat *o = &res->ops[k];
		if (!o->op_id) {   /* launched outside any op: the tree's [no op] */
			int err = o->self_cuda_ns ? profile_add_gpu_noop(p, pid, o->self_cuda_ns) : 0;

			if (err)
				return err;
			continue;
		}
		reached += (int)(o->kernels + o->memcpys + o->memsets);
		ssize_t row = find_gpu_row(p, pid, o->op_id, o->stack_id);
		if (row >= 0) {
			p->ops[row].self_cuda_ns += o->self_cuda_ns;
			p->ops[row].cuda_total_ns += o->total_cuda_ns;
			continue;
		}
		const char *ovl = "";
		const char *name = op_name ? op_name(ctx, o->op_id, &ovl) : NULL;
		struct prof_op add = { .pid = pid, .op_id = o->op_id, .stack_id = o->stack_id,
				       .name = name ? name : op_name ? "?" : "", .overload = ovl ? ovl : "",
				       .self_cuda_ns = o->self_cuda_ns, .cuda_total_ns = o->total_cuda_ns };
		int err = profile_add_op(p, &add);
		if (err)
			return err;
	}
	return reached;
}

/* ---- per process ------------------------------------------------ */

int profile_row_pids(const struct profile *p, uint32_t **pids, size_t *n)
{
	uint32_t *v = malloc((p->nops + p->npids + 1) * sizeof(*v));
	size_t k = 0, u = 0;

	*pids = NULL;
	*n = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < p->npids; i++)
		v[k++] = p->pids[i];
	for (size_t i = 0; i < p->nops; i++)
		v[k++] = p->ops[i].pid;
	qsort(v, k, sizeof(*v), cmp_pid);
	for (size_t i = 0; i < k; i++)
		if (!u || v[u - 1] != v[i])
			v[u++] = v[i];
	*pids = v;
	*n = u;
	return 0;
}

int profile_of_pid(const struct profile *src, uint32_t pid, struct profile *dst)
{
	int err = profile_set_pids(dst, &pid, 1);

	dst->duration_ns = src->duration_ns;
	dst->probes_attached = src->probes_attached;
	dst->events_dropped = src->events_dropped;
	dst->has_gpu_times = src->has_gpu_times;
	dst->has_memory = src->has_memory;
	dst->has_cuda_memory = src->has_cuda_memory;
	dst->exit_mode = profile_intern(dst, src->exit_mode);
	dst->gpu_note = profile_intern(dst, src->gpu_note);
	dst->mode = profile_intern(dst, src->mode);
	if (err || !dst->exit_mode || !dst->gpu_note || !dst->mode)
		return -ENOMEM;
	for (size_t i = 0; i < src->nops; i++)
		if (src->ops[i].pid == pid && (err = profile_add_op(dst, &src->ops[i])))
			return err;
	for (size_t i = 0; i < src->nmodcalls; i++) {
		const struct prof_modcall *m = &src->modcalls[i];

		if (m->pid == pid && (err = profile_add_modcall(dst, pid, m->stack_id, m->calls)))
			return err;
	}
	for (size_t i = 0; i < src->ngpu_noop; i++)
		if (src->gpu_noop[i].pid == pid &&
		    (err = profile_add_gpu_noop(dst, pid, src->gpu_noop[i].ns)))
			return err;
	return 0;
}

int profile_add_steps(struct profile *p, const struct step_stats *ss)
{
	for (size_t i = 0; ss && i < ss->n; i++) {
		const struct step_stat *s = &ss->v[i];
		struct prof_op o = { .pid = s->pid, .op_id = PROF_OPID_STEP,
				     .name = PROF_STEP_ROW, .overload = "", .calls = 1,
				     .self_ns = s->gap_ns, .total_ns = s->dur_ns,
				     .max_ns = s->dur_ns };
		int err = profile_add_op(p, &o);

		if (err)
			return err;
	}
	return 0;
}
