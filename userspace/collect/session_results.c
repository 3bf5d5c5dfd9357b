/* session_results.c - what a session's BPF maps hold, read out: op rows
 * (names, shapes, memory), counters, CUDA and GPU models, the layer tree
 * and source locations. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "grow.h"
#include "model.h"
#include "profile.h"
#include "shapes.h"
#include "srcloc.h"
#include "memory.h"
#include "session_int.h"

/* A scope id's name from the BPF map, kept for the session's life. */
static const struct op_def *scope_lookup(struct session *s, uint32_t id)
{
	struct tbpf_scope_name n;
	char *name;

	for (size_t i = 0; i < s->nscopes; i++)
		if (s->scopes[i].id == id)
			return &s->scopes[i].def;
	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.scope_names), &id, &n))
		return NULL;
	if (GROW(s->scopes, s->nscopes, s->capscopes, 16))
		return NULL;
	n.name[sizeof(n.name) - 1] = '\0';
	name = strdup(n.name);
	if (!name)
		return NULL;
	s->scopes[s->nscopes] = (struct scope_def){ .id = id, .def = { .name = name, .overload = "" } };
	return &s->scopes[s->nscopes++].def;
}

static const struct op_def *op_lookup(struct session *s, uint32_t id)
{
	static const struct op_def memory_row = { PROF_MEMORY_ROW, "" };

	if (id == TBPF_OPID_MEMORY)
		return &memory_row;
	if (TBPF_IS_SCOPE_ID(id))
		return scope_lookup(s, id);
	for (size_t i = 0; i < s->n; i++) {
		struct tgt *tg = s->v[i];

		if (id > tg->id_base && id - tg->id_base < tg->t.nops)
			return &tg->t.ops[id - tg->id_base];
	}
	return NULL;
}

const char *session_op_name(struct session *s, uint32_t id, const char **overload)
{
	const struct op_def *d = op_lookup(s, id);

	if (overload)
		*overload = d && d->overload ? d->overload : "";
	return d && d->name ? d->name : NULL;
}

/* Are the shapes the reader took right?  Checked once, from the raw
 * TensorImpls it sampled; when not, one line, and no shapes are shown. */
static bool shapes_verified(struct session *s)
{
	pid_t *pids;
	struct shape_target *st;
	char *why = NULL;

	if (s->shapes_ok >= 0)
		return s->shapes_ok;
	pids = calloc(s->n ? s->n : 1, sizeof(*pids));
	st = calloc(s->n ? s->n : 1, sizeof(*st));
	if (!pids || !st) {
		free(pids);
		free(st);
		return false;
	}
	for (size_t i = 0; i < s->n; i++) {
		pids[i] = s->v[i]->t.pid;
		st[i] = s->v[i]->shapes;
	}
	s->shapes_ok = shape_verify(bpf_map__fd(s->skel->maps.shape_samples), pids, st, s->n, &why);
	if (!s->shapes_ok)
		fprintf(stderr, "tbpf: no input shapes: the TensorImpl layout could not be verified "
				"(%s)\n", why ? why : "?");
	free(why);
	free(pids);
	free(st);
	return s->shapes_ok;
}

static bool row_has_memory(const struct prof_op *r)
{
	for (int i = 0; i < MEM_DEV_N; i++)
		if (r->mem_self[i] || r->mem_total[i])
			return true;
	return false;
}

int session_collect(struct session *s, struct profile *p)
{
	bool shapes = s->cfg.shapes && shapes_verified(s);
	int shapes_fd = bpf_map__fd(s->skel->maps.shapes);
	char text[4096], types[1024];
	uint64_t flops_per_call = 0;
	int ncpu = libbpf_num_possible_cpus();
	int fd = bpf_map__fd(s->skel->maps.opstats);
	struct tbpf_opkey key, next, *prev = NULL;
	struct tbpf_opstat *vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(*vals));
	int err = 0;

	if (!vals)
		return -ENOMEM;
	for (size_t i = 0; s->cfg.memory && i < s->n; i++)
		p->has_memory |= s->v[i]->mem_probed;   /* columns only when measured */
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		struct prof_op row = { 0 };
		const struct op_def *d;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, vals))
			continue;
		if (key.op_id == TBPF_MODCALL_ID) {
			uint64_t calls = 0;

			for (int c = 0; c < ncpu; c++)
				calls += vals[c].calls;
			err = profile_add_modcall(p, key.pid, key.stack_id, calls);
			if (err)
				break;
			continue;
		}
		d = op_lookup(s, key.op_id);
		row.pid = key.pid;
		row.op_id = key.op_id;
		row.stack_id = key.stack_id;
		row.name = d && d->name ? d->name : "?";
		if (shapes) {
			struct tbpf_shape sh;

			row.shape_id = key.shape_id;
			types[0] = '\0';
			if (!shape_text(shapes_fd, key.shape_id, row.name, text, sizeof(text), &sh,
					&flops_per_call)) {
				shape_types(&sh, types, sizeof(types));
			} else {
				flops_per_call = 0;
			}
			row.shapes = text;
			row.types = types;
		}
		row.overload = d && d->overload ? d->overload : "";
		for (int c = 0; c < ncpu; c++) {
			row.calls += vals[c].calls;
			row.self_ns += vals[c].self_ns;
			row.total_ns += vals[c].total_ns;
			row.launches += vals[c].launches;
			row.inferred += vals[c].inferred;
			row.folded += vals[c].folded;
			if (vals[c].max_ns > row.max_ns)
				row.max_ns = vals[c].max_ns;
			for (int i = 0; i < MEM_DEV_N; i++) {
				row.mem_self[i] += vals[c].mem_self[i];
				row.mem_total[i] += vals[c].mem_total[i];
			}
		}
		/* made at an entry whose op has not closed (rows_early) */
		if (!row.calls && !row.launches && !row_has_memory(&row))
			continue;
		if (row.mem_self[MEM_DEV_CUDA] || row.mem_total[MEM_DEV_CUDA])
			p->has_cuda_memory = true;
		row.calls -= row.folded;   /* as torch.profiler's table counts */
		row.flops = flops_per_call * row.calls;
		err = profile_add_op(p, &row);
		if (err)
			break;
	}
	free(vals);
	return err;
}

void session_reset_stats(struct session *s)
{
	int fd = bpf_map__fd(s->skel->maps.opstats);
	struct tbpf_opkey key, next;

	/* delete while iterating from the start: get_next_key(NULL) */
	while (!bpf_map_get_next_key(fd, NULL, &next)) {
		key = next;
		if (bpf_map_delete_elem(fd, &key))
			break;
	}
}

/* Sum over CPUs of one u64 entry of a per-CPU map (vals: ncpu scratch
 * slots); 0 when the key is absent. */
static uint64_t percpu_sum(int fd, const void *key, uint64_t *vals, int ncpu)
{
	uint64_t sum = 0;

	if (!bpf_map_lookup_elem(fd, key, vals))
		for (int c = 0; c < ncpu; c++)
			sum += vals[c];
	return sum;
}

void session_counters(struct session *s, uint64_t *out)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(uint64_t));
	int fd = bpf_map__fd(s->skel->maps.counters);

	memset(out, 0, sizeof(uint64_t) * CNT_MAX);
	if (!vals)
		return;
	for (__u32 i = 0; i < CNT_MAX; i++)
		out[i] = percpu_sum(fd, &i, vals, ncpu);
	free(vals);
}

uint64_t session_target_hits(struct session *s, pid_t pid)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(uint64_t)), sum;
	__u32 key = (__u32)pid, entries = CNT_ENTRIES;

	if (!vals)
		return 0;
	/* one target: the filter is targ_tgid and every entry hit is its */
	sum = s->cfg.only_pid > 0 ? percpu_sum(bpf_map__fd(s->skel->maps.counters), &entries, vals, ncpu)
				  : percpu_sum(bpf_map__fd(s->skel->maps.pids), &key, vals, ncpu);
	free(vals);
	return sum;
}

int session_cuda_add(struct session *s, const struct rec_hdr *h)
{
	if (!s->cfg.cuda)
		return 0;
	return cuda_session_record(&s->cuda, h, h->size) == -ENOMEM ? -ENOMEM : 0;
}

struct gpu_session *session_gpu(struct session *s)
{
	return s->cfg.gpu_agent ? &s->gpu : NULL;
}

void session_cuda_reset(struct session *s)
{
	if (s->cfg.cuda)
		cuda_model_reset(&s->cuda.model);
}

const struct cuda_model *session_cuda(struct session *s, size_t *nprobes, size_t *nlibs)
{
	if (!s->cfg.cuda)
		return NULL;
	if (nprobes)
		*nprobes = cuda_session_nprobes(&s->cuda, nlibs);
	return &s->cuda.model;
}

int session_layer_tree(struct session *s, const struct profile *p, const struct cuda_model *cm,
		       struct layer_tree **out)
{
	struct layer_stack *ls = NULL;
	size_t nls = 0;
	int err;

	*out = NULL;
	if (s->cfg.python)
		session_sync_stacks(s);
	err = stackstore_layer_stacks(&s->stacks, &ls, &nls);
	if (!err)
		err = model_layers(p, ls, nls, cm, out);
	free(ls);
	return err;
}

int session_srcloc(struct session *s, struct profile *p, unsigned depth, bool low32)
{
	int err = 0;

	if (s->cfg.python)
		session_sync_stacks(s);
	if (s->cfg.python && s->cfg.bwstack)
		session_sync_derived(s, true);
	for (size_t i = 0; i < s->stacks.n && !err; i++) {
		const struct sym_stack *st = &s->stacks.v[i];

		err = profile_add_srcstack(p, st->pid, low32 ? st->id & 0xffffffffu : st->id,
					   st->src, st->nsrc);
	}
	return err ? err : profile_apply_srcloc(p, depth);
}

int session_model_split(struct session *s, struct tbpf_model *m,
			const struct model_proc_info *info, size_t ninfo)
{
	struct layer_stack *ls = NULL;
	size_t nls = 0;
	int err = m->tree ? stackstore_layer_stacks(&s->stacks, &ls, &nls) : 0;

	if (!err)
		err = model_split(m, ls, nls, info, ninfo);
	free(ls);
	return err;
}
