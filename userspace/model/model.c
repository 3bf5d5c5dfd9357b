/* model.c - model stage: the one events -> op / layer / kernel model
 * (see model.h): one replay of a capture into profile rows, device times,
 * CUDA tables and the layer tree; the layer tree for live sessions too. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "grow.h"
#include "gpucap.h"
#include "model.h"
#include "bus.h"
#include "oprec.h"
#include "replay.h"

void model_init(struct tbpf_model *m)
{
	memset(m, 0, sizeof(*m));
	profile_init(&m->prof);
}

static void procs_free(struct tbpf_model *m)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		if (m->procs[i].m) {
			model_free(m->procs[i].m);
			free(m->procs[i].m);
		}
	}
	free(m->procs);
	m->procs = NULL;
	m->nprocs = 0;
}

void model_free(struct tbpf_model *m)
{
	procs_free(m);
	if (m->steps == &m->steps_own)
		m->steps = NULL;
	step_stats_free(&m->steps_own);
	steps_free(&m->steps_bounds);
	layers_free(m->tree);
	if (m->cuda_own_init)
		cuda_model_free(&m->cuda_own);
	if (m->mem_own_init)
		mem_model_free(&m->mem_own);
	profile_free(&m->prof);
	memset(m, 0, sizeof(*m));
}

/* ---- one replay: the sinks ------------------------------------------------ */

/* Kernel names were written as KERNEL meta records by the recorder;
 * without one the address stays unnamed, as an opaque handle would. */
static char *capture_resolve(void *ctx, uint32_t pid, uint64_t addr, int *where)
{
	const char *n = capture_meta_kernel(ctx, pid, addr);

	*where = CUDA_ADDR_NOFILE;
	return n ? strdup(n) : NULL;
}

/* --steps / --schedule: the CUDA and memory records of the
 * active steps only, as the op rows (profile_agg_window). */
struct cut {
	void *inner;
	const struct steps *win;            /* NULL: every record */
	const struct step_schedule *sched;
};

/* Every CUDA record and rec_mem has its pid right after the header. */
_Static_assert(offsetof(struct rec_launch, pid) == sizeof(struct rec_hdr) &&
	       offsetof(struct rec_mem, pid) == sizeof(struct rec_hdr), "pid after header");

static bool cut_keep(const struct cut *c, const struct rec_hdr *h)
{
	if (!c->win)
		return true;
	if (h->size < sizeof(*h) + sizeof(uint32_t))
		return false;
	return steps_window_has(c->win, c->sched, *(const uint32_t *)(h + 1), h->ts_ns);
}

static bool cut_keep_gpu(void *ctx, uint32_t pid, uint64_t ts_ns)
{
	const struct cut *c = ctx;

	return steps_window_has(c->win, c->sched, pid, ts_ns);
}

static int cuda_sink(void *ctx, const struct rec_hdr *h, size_t size)
{
	const struct cut *c = ctx;
	int ret;

	if (!cut_keep(c, h))
		return 0;
	ret = cuda_model_add(c->inner, h, h->size);
	return ret == -ENOMEM ? ret : 0;   /* a record it cannot use is skipped */
}

/* Module calls counted into the rows: the one sink for a
 * capture's replay, the --inproc feed and the BPF session's ring beside
 * it.  A call that cannot be counted (out of memory) does not stop the
 * bus, where a live ring's other consumers (the capture, the CUDA join)
 * go on; its error is kept and given at the bus's finish, so a replay or
 * a feed still fails. */
struct modcall_count {
	struct profile *p;
	int err;               /* the first, sticky */
};

static int modcall_record(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct modcall_count *mc = ctx;
	struct op_ev ev;
	int err;

	if (!op_ev_decode(h, size, &ev))
		return 0;
	err = profile_add_modcall(mc->p, ev.pid, ev.stack_id, 1);
	if (err && !mc->err)
		mc->err = err;
	return 0;
}

static int modcall_finish(void *ctx)
{
	return ((const struct modcall_count *)ctx)->err;
}

static struct bus_sink modcall_sink(struct modcall_count *mc)
{
	return (struct bus_sink){ EVS_MODCALL, modcall_record, modcall_finish, mc };
}

static int mem_sink(void *ctx, const struct rec_hdr *h, size_t size)
{
	const struct cut *c = ctx;

	if (h->size < sizeof(struct rec_mem) || !cut_keep(c, h))
		return 0;
	return mem_model_add(c->inner, (const struct rec_mem *)h) == -ENOMEM ? -ENOMEM : 0;
}

static const char *capture_op_name(void *ctx, uint32_t id)
{
	const struct capture_op *o = capture_meta_op(ctx, id);

	return o ? o->name : NULL;
}

/* ---- the one model builder: records in, the model's parts out ------------- */

/* What a builder makes, and from which run.  Only p is required; the
 * parts left NULL get no sink. */
struct build_spec {
	struct profile *p;              /* op rows (+ device times, run info) */
	const struct capture_meta *meta;   /* op names, stacks, run and end */
	struct cuda_model *cm;          /* CUDA records (cuda_model_init'ed here) */
	struct calltree *ct;            /* the call tree (calltree_init'ed) */
	struct mem_model *mm;           /* allocator events (mem_model_init'ed) */
	const struct steps *win;        /* --steps: the active steps only */
	const struct step_schedule *sched;
	bool gpu;                       /* device activity records to join */
};

struct model_builder {
	struct build_spec in;
	struct profile_agg *agg;
	struct calltree_build *cb;
	struct gpucap g;
	bool g_init;
	struct cut ccut, mcut;
	struct modcall_count mc;
	struct rec_bus bus;             /* every record goes in here */
};

/* The one way a builder's state goes, whether it finished or not, and
 * safe to repeat; st: the run's counts for the call tree's duration
 * (NULL: none). */
static void builder_free(struct model_builder *b, const struct capture_stats *st)
{
	static const struct capture_stats none;

	if (!st)
		st = &none;
	profile_agg_free(b->agg);
	b->agg = NULL;
	calltree_build_free(b->cb, st);
	b->cb = NULL;
	if (b->g_init)
		gpucap_free(&b->g);
	b->g_init = false;
}

/* The sinks on one bus: op rows, device times (CUPTI's: Self CUDA, and
 * CUDA total over the op spans open at each launch), CUDA records,
 * module calls, memory, the call tree.  0 or -errno (nothing to free). */
static int builder_init(struct model_builder *b, const struct build_spec *in)
{
	int err;

	memset(b, 0, sizeof(*b));
	b->in = *in;
	b->ccut = (struct cut){ in->cm, in->win, in->sched };
	b->mcut = (struct cut){ in->mm, in->win, in->sched };
	b->mc = (struct modcall_count){ in->p, 0 };
	if (in->cm)
		cuda_model_init(in->cm, capture_resolve, (void *)in->meta);
	b->agg = profile_agg_new(in->p, in->meta);
	if (!b->agg)
		return -ENOMEM;
	if (in->win)
		profile_agg_window(b->agg, in->win, in->sched);
	if (in->ct && !(b->cb = calltree_build_new(in->ct, in->meta)))
		err = -ENOMEM;
	else
		err = gpucap_init(&b->g, true);
	if (err) {
		builder_free(b, NULL);
		return err;
	}
	b->g_init = true;
	b->g.windowed = true;   /* rows only: joined as the records come */
	if (in->win) {   /* device times of the work launched in the window */
		b->g.keep = cut_keep_gpu;
		b->g.keep_ctx = &b->ccut;
	}
	bus_init(&b->bus);
	err = bus_add(&b->bus, profile_agg_sink(b->agg));
	if (!err && in->gpu)
		err = bus_add(&b->bus, gpucap_sink(&b->g));
	if (!err)
		err = bus_add(&b->bus, (struct bus_sink){ in->cm ? EVS_CUDA_CALLS : 0, cuda_sink, NULL,
							  &b->ccut });
	if (!err)
		err = bus_add(&b->bus, modcall_sink(&b->mc));
	if (!err)
		err = bus_add(&b->bus, (struct bus_sink){ in->mm ? EVS_MEM : 0, mem_sink,
							  NULL, &b->mcut });
	if (!err && b->cb)
		err = bus_add(&b->bus, calltree_build_sink(b->cb));
	if (err)
		builder_free(b, NULL);
	return err;
}

/* After the last record went through the bus (bus_finish included, ret
 * its result): device times onto the rows, the run info; frees b. */
static int builder_done(struct model_builder *b, int ret, const struct capture_stats *st)
{
	uint64_t gpu_reached = 0, gpu_devices = b->g.ndev;
	struct profile *p = b->in.p;

	/* the rows are in p once the bus finished: the joined device times
	 * go onto them before the join's state goes with the rest of b */
	for (size_t i = 0; !ret && i < b->g.n; i++) {
		int n = profile_add_gpu(p, &b->g.v[i].res, b->g.v[i].pid, NULL, NULL);

		if (n < 0)
			ret = n;
		else
			gpu_reached += (uint64_t)n;
	}
	builder_free(b, st);
	if (ret)
		return ret;
	return profile_capture_info(p, b->in.meta, st, gpu_reached, gpu_devices);
}

/* Rows (+ device times, run info) into p; with cm, the CUDA records into
 * it (cuda_model_init'ed here); with ct (calltree_init'ed), the call tree:
 * the capture's records through the one builder. */
static int replay_model_w(struct capture_reader *r, struct profile *p, struct cuda_model *cm,
			  struct calltree *ct, struct mem_model *mm, const struct steps *win,
			  const struct step_schedule *sched)
{
	const struct capture_stats *st = capture_reader_stats(r);
	struct build_spec in = { .p = p, .meta = capture_reader_meta(r), .cm = cm, .ct = ct,
				 .mm = mm, .win = win, .sched = sched,
				 /* nothing to join without device records */
				 .gpu = capture_stats_gpu(st) != 0 };
	struct model_builder b;
	int ret;

	if (capture_reader_error(r))
		return -EINVAL;
	if ((ret = builder_init(&b, &in)))
		return ret;
	ret = capture_replay(r, &b.bus);
	return builder_done(&b, ret, st);
}

static int replay_model(struct capture_reader *r, struct profile *p, struct cuda_model *cm,
			struct calltree *ct, struct mem_model *mm)
{
	return replay_model_w(r, p, cm, ct, mm, NULL, NULL);
}

int profile_from_capture(struct capture_reader *r, struct profile *p)
{
	return replay_model(r, p, NULL, NULL, NULL);
}

int profile_calltree_from_capture(struct capture_reader *r, struct profile *p,
				  struct calltree *ct)
{
	return replay_model(r, p, NULL, ct, NULL);
}

static int model_from_capture_w(struct capture_reader *r, unsigned parts, struct tbpf_model *m,
				const struct step_schedule *sched)
{
	const struct capture_meta *meta = capture_reader_meta(r);
	struct layer_stack *ls = NULL;
	size_t nls = 0;
	int err;

	m->cuda_own_init = parts & MODEL_CUDA;
	m->mem_own_init = true;
	mem_model_init(&m->mem_own);
	err = replay_model_w(r, &m->prof, m->cuda_own_init ? &m->cuda_own : NULL, NULL, &m->mem_own,
			     sched ? &m->steps_bounds : NULL, sched);
	if (!err && sched)
		err = profile_add_steps(&m->prof, &m->steps_own);
	if (!err)
		err = mem_model_finish(&m->mem_own);
	m->mem_own.frees_before_attach = meta->end.counters[CNT_MEM_UNKNOWN_FREES];
	m->mem_own.untracked = meta->end.counters[CNT_MEM_MAP_FULL];
	if (err)
		return err;
	if (m->prof.has_memory)
		m->mem = &m->mem_own;
	m->op_name = capture_op_name;
	m->op_name_ctx = (void *)meta;
	if (m->cuda_own_init && !cuda_model_empty(&m->cuda_own))
		m->cuda = &m->cuda_own;
	/* the CUDA runtime calls as rows under their ops */
	if ((err = cuda_ops_to_profile(&m->prof, m->cuda)))
		return err;
	if (!meta->nstacks || !((parts & MODEL_LAYERS) ||
				 ((parts & MODEL_LAYERS_WITH_CUDA) && (m->cuda || m->mem))))
		return 0;
	err = capture_layer_stacks(meta, &ls, &nls);
	if (!err)
		err = model_layers(&m->prof, ls, nls, m->cuda, &m->tree);
	capture_layer_stacks_free(ls, nls);
	return err;
}

int model_from_capture(struct capture_reader *r, unsigned parts, struct tbpf_model *m)
{
	return model_from_capture_w(r, parts, m, NULL);
}

int model_from_capture_steps(struct capture_reader *r, unsigned parts, const char *label,
			     const struct step_schedule *sched, struct tbpf_model *m)
{
	int err = steps_from_capture(r, label, &m->steps_bounds);

	if (!err)
		err = step_stats_from_capture(r, &m->steps_bounds, &m->steps_own);
	if (err)
		return err;
	/* a repeating schedule: the last cycle, as key_averages() shows it */
	steps_last_cycle(&m->steps_bounds, sched);
	step_stats_keep_active(&m->steps_own, sched, &m->steps_bounds);
	m->steps = &m->steps_own;
	return model_from_capture_w(r, parts, m, sched);
}

/* ---- several processes ------------------------------------------ */

static const struct model_proc_info *info_of(const struct model_proc_info *v, size_t n,
					     uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].pid == pid)
			return &v[i];
	return NULL;
}

/* Process pid's part of m: rows, steps, tree. */
static int split_one(const struct tbpf_model *m, struct model_proc *pp,
		     const struct layer_stack *ls, size_t nls)
{
	struct tbpf_model *pm = calloc(1, sizeof(*pm));
	int err;

	if (!pm)
		return -ENOMEM;
	model_init(pm);
	pp->m = pm;
	err = profile_of_pid(&m->prof, pp->pid, &pm->prof);
	for (size_t i = 0; !err && m->steps && i < m->steps->n; i++) {
		if (m->steps->v[i].pid != pp->pid)
			continue;
		if (GROW(pm->steps_own.v, pm->steps_own.n, pm->steps_own.cap, 8))
			err = -ENOMEM;
		else
			pm->steps_own.v[pm->steps_own.n++] = m->steps->v[i];
	}
	if (err)
		return err;
	if (m->steps)
		pm->steps = &pm->steps_own;
	pm->op_name = m->op_name;
	pm->op_name_ctx = m->op_name_ctx;
	pp->cmdline = profile_intern(&pm->prof, pp->cmdline);
	pp->torch = profile_intern(&pm->prof, pp->torch);
	if (!pp->cmdline || !pp->torch)
		return -ENOMEM;
	/* its own CUDA and memory tables */
	pm->cuda = cuda_model_of_pid(m->cuda, pp->pid);
	if (m->mem) {
		pm->mem = m->mem;
		pm->mem_pid = pp->pid;
	}
	return m->tree ? model_layers(&pm->prof, ls, nls, pm->cuda, &pm->tree) : 0;
}

int model_split(struct tbpf_model *m, const struct layer_stack *ls, size_t nls,
		const struct model_proc_info *info, size_t ninfo)
{
	uint32_t *pids;
	size_t n;
	int err = profile_row_pids(&m->prof, &pids, &n);

	procs_free(m);
	if (err || n < 2) {
		free(pids);
		return err;
	}
	m->procs = calloc(n, sizeof(*m->procs));
	if (!m->procs) {
		free(pids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !err; i++) {
		const struct model_proc_info *in = info_of(info, ninfo, pids[i]);

		m->procs[i] = (struct model_proc){ .pid = pids[i],
						   .cmdline = in && in->cmdline ? in->cmdline : "",
						   .torch = in && in->torch ? in->torch : "" };
		m->nprocs = i + 1;
		err = split_one(m, &m->procs[i], ls, nls);
	}
	free(pids);
	if (err)
		procs_free(m);
	return err;
}

int model_split_capture(struct tbpf_model *m, const struct capture_meta *meta)
{
	struct model_proc_info *info = calloc(meta->nprocs + 1, sizeof(*info));
	struct layer_stack *ls = NULL;
	size_t nls = 0;
	int err;

	if (!info)
		return -ENOMEM;
	for (size_t i = 0; i < meta->nprocs; i++)
		info[i] = (struct model_proc_info){ meta->procs[i].pid, meta->procs[i].cmdline,
						    meta->procs[i].torch };
	err = m->tree ? capture_layer_stacks(meta, &ls, &nls) : 0;
	if (!err)
		err = model_split(m, ls, nls, info, meta->nprocs);
	capture_layer_stacks_free(ls, nls);
	free(info);
	return err;
}

/* ---- records fed as they arrive (--inproc) -------------------------------- */

struct model_feed {
	struct tbpf_model *m;
	struct capture_meta meta;     /* op names, then run and end */
	struct model_builder b;       /* the builder a capture's replay uses */
	bool finished;
};

struct model_feed *model_feed_new(struct tbpf_model *m)
{
	struct model_feed *f = calloc(1, sizeof(*f));
	struct build_spec in = { .p = &m->prof, .meta = &f->meta };

	if (!f)
		return NULL;
	f->m = m;
	capture_meta_init(&f->meta);
	capture_meta_finish(&f->meta);
	in.meta = &f->meta;
	if (builder_init(&f->b, &in)) {
		capture_meta_free(&f->meta);
		free(f);
		return NULL;
	}
	m->op_name = capture_op_name;
	m->op_name_ctx = &f->meta;
	return f;
}

int model_feed_name(struct model_feed *f, uint32_t op_id, const char *name, const char *overload)
{
	return capture_meta_add_op(&f->meta, op_id, name, overload);
}

int model_feed_shape(struct model_feed *f, uint64_t shape_id, const struct tbpf_shape *s)
{
	return capture_meta_add_shape(&f->meta, shape_id, s);
}

int model_feed_record(struct model_feed *f, const struct rec_hdr *h)
{
	capture_meta_finish(&f->meta);   /* sorts only after names were added */
	return bus_feed(&f->b.bus, h, h->size);
}

struct bus_sink model_feed_modcall_sink(struct model_feed *f)
{
	return modcall_sink(&f->b.mc);
}

int model_feed_finish(struct model_feed *f, const struct capture_run *run,
		      const struct capture_end *end)
{
	struct capture_stats st = { 0 };
	int err;

	if (f->finished)
		return -EINVAL;
	f->finished = true;
	capture_meta_finish(&f->meta);
	err = bus_finish(&f->b.bus);
	f->meta.run = *run;
	f->meta.end = *end;
	err = builder_done(&f->b, err, &st);
	/* run and end point at the caller's memory: not the meta's to free */
	memset(&f->meta.run, 0, sizeof(f->meta.run));
	memset(&f->meta.end, 0, sizeof(f->meta.end));
	return err;
}

void model_feed_free(struct model_feed *f)
{
	if (!f)
		return;
	builder_free(&f->b, NULL);   /* a finished one's again: nothing left */
	capture_meta_free(&f->meta);
	free(f);
}

/* ---- layers ---------------------------------------------------------------- */

int model_layers(const struct profile *p, const struct layer_stack *ls, size_t nls,
		 const struct cuda_model *cm, struct layer_tree **out)
{
	struct layer_opstat *ops = calloc(p->nops + 1, sizeof(*ops));
	int err;

	*out = NULL;
	if (!ops)
		return -ENOMEM;
	size_t k = 0;

	for (size_t i = 0; i < p->nops; i++) {
		if (p->ops[i].op_id == PROF_OPID_STEP)
			continue;   /* a step is no op of a layer */
		ops[k++] = (struct layer_opstat){ .stack_id = p->ops[i].stack_id,
						.op = p->ops[i].name, .calls = p->ops[i].calls,
						.self_ns = p->ops[i].self_ns,
						.total_ns = p->ops[i].total_ns,
						.launches = p->ops[i].launches,
						.mem_self = { p->ops[i].mem_self[0], p->ops[i].mem_self[1] },
						.mem_total = { p->ops[i].mem_total[0],
							       p->ops[i].mem_total[1] },
						.outside_op = p->ops[i].op_id == TBPF_OPID_MEMORY,
						.cuda_call = cuda_ops_is_row(p->ops[i].op_id),
						.self_cuda_ns = p->ops[i].self_cuda_ns,
						.cuda_total_ns = p->ops[i].cuda_total_ns };
	}
	err = layers_build(ls, nls, ops, k, out);
	for (size_t i = 0; !err && i < p->nmodcalls; i++)
		err = layers_add_modcall(*out, p->modcalls[i].stack_id, p->modcalls[i].calls);
	/* device time per layer: the op rows' Self CUDA above, and here the
	 * work launched outside any op */
	if (!err)
		err = layers_add_dev_noop(*out, profile_gpu_noop_ns(p));
	if (!err) {
		(*out)->has_memory = p->has_memory;
		(*out)->has_cuda_memory = p->has_memory && p->has_cuda_memory;
	}
	if (!err && cm && !cuda_model_empty(cm))
		err = cuda_model_to_layers(cm, *out);
	if (err) {
		layers_free(*out);
		*out = NULL;
	}
	free(ops);
	return err;
}

void capture_layer_stacks_free(struct layer_stack *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free((void *)v[i].names);
		free((void *)v[i].classes);
		free((void *)v[i].orders);
	}
	free(v);
}

int capture_layer_stacks(const struct capture_meta *m, struct layer_stack **v, size_t *n)
{
	struct layer_stack *out = calloc(m->nstacks + 1, sizeof(*out));

	*v = NULL;
	*n = 0;
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < m->nstacks; i++) {
		const struct capture_stack *cs = &m->stacks[i];
		unsigned depth = 0;
		const char **names, **classes;
		unsigned *orders;

		while (depth < cs->nframes && cs->frames[depth].kind == CF_LAYER)
			depth++;
		names = calloc(depth + 1, sizeof(*names));
		classes = calloc(depth + 1, sizeof(*classes));
		orders = calloc(depth + 1, sizeof(*orders));
		if (!names || !classes || !orders) {
			free(names);
			free(classes);
			free(orders);
			capture_layer_stacks_free(out, i);
			return -ENOMEM;
		}
		for (unsigned d = 0; d < depth; d++) {
			names[d] = cs->frames[depth - 1 - d].name;
			classes[d] = cs->frames[depth - 1 - d].class_name;
			orders[d] = cs->frames[depth - 1 - d].line;
		}
		out[i] = (struct layer_stack){
			.stack_id = (uint32_t)cs->stack_id,
			.depth = depth,
			.names = names,
			.classes = classes,
			.orders = orders,
		};
	}
	*v = out;
	*n = m->nstacks;
	return 0;
}
