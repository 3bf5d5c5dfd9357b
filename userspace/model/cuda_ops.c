/* cuda_ops.c - model stage: CUDA runtime calls per op, and their rows in
 * the op table (see cuda_ops.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tbpf_abi.h"
#include "cuda_model.h"
#include "cuda_ops.h"
#include "profile.h"
#include "grow.h"

bool cuda_ops_is_row(uint32_t op_id)
{
	return op_id >= CUDA_OPS_OPID_BASE && op_id < CUDA_OPS_OPID_BASE + CU_API_MAX;
}

bool cuda_ops_api_is_runtime(uint32_t api)
{
	return !strncmp(cuda_model_api_name(api), "cuda", 4);
}

static size_t ohash(uint32_t pid, uint32_t op, uint32_t stack, uint32_t api, size_t cap)
{
	uint64_t h = (((uint64_t)pid << 32) | op) * 0x9e3779b97f4a7c15ULL;

	h ^= (((uint64_t)stack << 8) | api) * 0xC2B2AE3D27D4EB4FULL;
	return (h >> 17) & (cap - 1);
}

static int oidx_grow(struct cuda_model *m)
{
	size_t cap = m->oidx_cap ? m->oidx_cap * 2 : 256;
	uint32_t *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->nopapis; i++) {
		const struct cuda_opapi *o = &m->opapis[i];
		size_t h = ohash(o->pid, o->op_id, o->stack_id, o->api, cap);

		while (v[h])
			h = (h + 1) & (cap - 1);
		v[h] = i + 1;
	}
	free(m->oidx);
	m->oidx = v;
	m->oidx_cap = cap;
	return 0;
}

int cuda_opapi_add(struct cuda_model *m, const void *rec)
{
	struct cuda_ev ev;
	struct cuda_opapi *o;
	uint32_t op, stack;
	size_t h;

	if (!cuda_ev_decode(rec, &ev) || ev.kind == CEV_MEM || ev.api >= CU_API_MAX)
		return 0;
	op = ev.op_id;
	stack = ev.stack_id;
	if ((m->nopapis + 1) * 2 > m->oidx_cap && oidx_grow(m))
		return -ENOMEM;
	h = ohash(ev.pid, op, stack, ev.api, m->oidx_cap);
	for (o = NULL; m->oidx[h]; h = (h + 1) & (m->oidx_cap - 1)) {
		o = &m->opapis[m->oidx[h] - 1];
		if (o->pid == ev.pid && o->op_id == op && o->stack_id == stack && o->api == ev.api)
			break;
		o = NULL;
	}
	if (!o) {
		if (GROW(m->opapis, m->nopapis, m->capopapis, 64))
			return -ENOMEM;
		o = &m->opapis[m->nopapis];
		*o = (struct cuda_opapi){ .pid = ev.pid, .op_id = op, .stack_id = stack,
					  .api = ev.api };
		m->oidx[h] = ++m->nopapis;
	}
	o->calls++;
	if (ev.timed) {
		o->total_ns += ev.host_ns;
		if (ev.host_ns > o->max_ns)
			o->max_ns = ev.host_ns;
	}
	return 0;
}

/* The row of the op that made the calls: (pid, op, low 32 bits of the
 * stack), the one of most self time when shapes split it; -1 none. */
static long parent_row(const struct profile *p, const struct cuda_opapi *o)
{
	long best = -1;

	for (size_t i = 0; i < p->nops; i++) {
		const struct prof_op *r = &p->ops[i];

		if (r->pid != o->pid || r->op_id != o->op_id || (uint32_t)r->stack_id != o->stack_id)
			continue;
		if (best < 0 || r->self_ns > p->ops[best].self_ns)
			best = (long)i;
	}
	return best;
}

int cuda_ops_to_profile(struct profile *p, const struct cuda_model *cm)
{
	if (!cm)
		return 0;
	for (size_t i = 0; i < cm->nopapis; i++) {
		const struct cuda_opapi *o = &cm->opapis[i];
		long par = -1;
		struct prof_op row = {
			.pid = o->pid, .op_id = CUDA_OPS_OPID(o->api), .stack_id = o->stack_id,
			.name = cuda_model_api_name(o->api), .overload = "",
			.calls = o->calls, .self_ns = o->total_ns, .total_ns = o->total_ns,
			.max_ns = o->max_ns,
		};
		int err;

		if (!cuda_ops_api_is_runtime(o->api))
			continue;
		if (o->op_id && (par = parent_row(p, o)) >= 0) {
			struct prof_op *pr = &p->ops[par];

			row.stack_id = pr->stack_id;   /* the parent's layer */
			pr->self_ns = pr->self_ns > o->total_ns ? pr->self_ns - o->total_ns : 0;
		}
		err = profile_add_op(p, &row);
		if (err)
			return err;
	}
	return 0;
}
