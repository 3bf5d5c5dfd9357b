/* cuda_model.c - aggregation stage, CUDA: records -> kernel, copy, sync
 * and allocation tables; kernel names resolved once per (pid, address). */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbpf_abi.h"
#include "cuda_model.h"
#include "oprec.h"
#include "layers.h"
#include "grow.h"

_Static_assert(sizeof(struct rec_launch) % 8 == 0, "record ABI");
_Static_assert(sizeof(struct rec_memop) % 8 == 0, "record ABI");
_Static_assert(sizeof(struct rec_sync) % 8 == 0, "record ABI");
_Static_assert(sizeof(struct rec_alloc) % 8 == 0, "record ABI");
_Static_assert(CUDA_NDIRS == CP_SET + 1, "copy directions");
_Static_assert(CU_API_MAX <= CU_API_MAX_, "api table");
/* every CUDA record starts with pid, api after its header */
_Static_assert(offsetof(struct rec_launch, api) == offsetof(struct rec_memop, api) &&
	       offsetof(struct rec_launch, api) == offsetof(struct rec_sync, api) &&
	       offsetof(struct rec_launch, api) == offsetof(struct rec_alloc, api), "api offset");
_Static_assert(offsetof(struct rec_launch, pid) == offsetof(struct rec_memop, pid) &&
	       offsetof(struct rec_launch, pid) == offsetof(struct rec_sync, pid) &&
	       offsetof(struct rec_launch, pid) == offsetof(struct rec_alloc, pid), "pid offset");

static const char *const api_names[CU_API_MAX] = {
#define N(x) [CU_##x] = #x
	N(cudaLaunchKernel), N(cudaLaunchKernel_ptsz), N(cudaLaunchKernelExC),
	N(cudaLaunchKernelExC_ptsz), N(cudaLaunchCooperativeKernel),
	N(cudaLaunchCooperativeKernel_ptsz), N(cudaGraphLaunch),
	N(cudaGraphLaunch_ptsz), N(cuLaunchKernel), N(cuLaunchKernel_ptsz),
	N(cuLaunchKernelEx), N(cuLaunchKernelEx_ptsz), N(cuGraphLaunch),
	N(cuGraphLaunch_ptsz),
	N(cudaMemcpy), N(cudaMemcpyAsync), N(cudaMemcpyAsync_ptsz),
	N(cudaMemsetAsync), N(cudaMemsetAsync_ptsz), N(cudaMemset),
	N(cuMemcpyAsync), N(cuMemcpyHtoDAsync), N(cuMemcpyDtoHAsync),
	N(cuMemcpyDtoDAsync), N(cuMemsetD8Async), N(cuMemsetD16Async),
	N(cuMemsetD32Async),
	N(cudaStreamSynchronize), N(cudaDeviceSynchronize),
	N(cudaEventSynchronize), N(cuStreamSynchronize), N(cuCtxSynchronize),
	N(cuEventSynchronize),
	N(cudaMalloc), N(cudaFree), N(cudaMallocAsync), N(cudaFreeAsync),
	N(cuMemAlloc), N(cuMemFree), N(cuMemAllocAsync), N(cuMemFreeAsync),
#undef N
};

const char *cuda_model_api_name(uint32_t api)
{
	return api < CU_API_MAX && api_names[api] ? api_names[api] : "?";
}

const char *cuda_dir_name(uint32_t dir)
{
	static const char *const n[CUDA_NDIRS] = {
		[CP_UNKNOWN] = "Default", [CP_HTOD] = "HtoD", [CP_DTOH] = "DtoH",
		[CP_DTOD] = "DtoD", [CP_HTOH] = "HtoH", [CP_SET] = "Memset",
	};
	return dir < CUDA_NDIRS ? n[dir] : "?";
}

void cuda_model_init(struct cuda_model *m, cuda_resolve_fn resolve, void *ctx)
{
	memset(m, 0, sizeof(*m));
	m->resolve = resolve;
	m->resolve_ctx = ctx;
}

void cuda_model_free(struct cuda_model *m)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		cuda_model_free(m->procs[i]);
		free(m->procs[i]);
	}
	free(m->procs);
	for (size_t i = 0; i < m->nkernels; i++) {
		free(m->kernels[i].name);
		free(m->kernels[i].ops);
		free(m->kernels[i].stacks);
	}
	free(m->sstats);
	free(m->sidx);
	free(m->opapis);
	free(m->oidx);
	free(m->kernels);
	free(m->kidx);
	free(m->syncs);
	free(m->allocs);
	free(m->live);
	free(m->pcopies);
	memset(m, 0, sizeof(*m));
}

void cuda_model_reset(struct cuda_model *m)
{
	cuda_resolve_fn resolve = m->resolve;
	void *ctx = m->resolve_ctx;

	cuda_model_free(m);
	cuda_model_init(m, resolve, ctx);
}

/* ---- kernels ---------------------------------------------------------- */

static size_t khash(uint32_t pid, uint64_t func, size_t cap)
{
	uint64_t h = (func ^ ((uint64_t)pid << 48)) * 0x9e3779b97f4a7c15ULL;

	return (h >> 20) & (cap - 1);
}

static int kidx_grow(struct cuda_model *m)
{
	size_t cap = m->kidx_cap ? m->kidx_cap * 2 : 256;
	uint32_t *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->nkernels; i++) {
		size_t h = khash(m->kernels[i].pid, m->kernels[i].func, cap);

		while (v[h])
			h = (h + 1) & (cap - 1);
		v[h] = i + 1;
	}
	free(m->kidx);
	m->kidx = v;
	m->kidx_cap = cap;
	return 0;
}

static bool api_is_graph(uint32_t api)
{
	return api == CU_cudaGraphLaunch || api == CU_cudaGraphLaunch_ptsz ||
	       api == CU_cuGraphLaunch || api == CU_cuGraphLaunch_ptsz;
}

static bool api_is_driver_launch(uint32_t api)
{
	return api == CU_cuLaunchKernel || api == CU_cuLaunchKernel_ptsz ||
	       api == CU_cuLaunchKernelEx || api == CU_cuLaunchKernelEx_ptsz;
}

static const struct cuda_kernel *kernel_find(const struct cuda_model *m, uint32_t pid,
					     uint64_t func)
{
	size_t h;

	if (!m->kidx_cap)
		return NULL;
	h = khash(pid, func, m->kidx_cap);
	while (m->kidx[h]) {
		const struct cuda_kernel *k = &m->kernels[m->kidx[h] - 1];

		if (k->pid == pid && k->func == func)
			return k;
		h = (h + 1) & (m->kidx_cap - 1);
	}
	return NULL;
}

static int kernel_name(struct cuda_model *m, struct cuda_kernel *k)
{
	char *name = NULL;
	int where = CUDA_ADDR_NOFILE;
	int r;

	if (m->parent) {   /* a process's model: named once, by the parent */
		const struct cuda_kernel *pk = kernel_find(m->parent, k->pid, k->func);

		if (pk) {
			k->src = pk->src;
			k->name = strdup(pk->name);
			return k->name ? 0 : -ENOMEM;
		}
	}
	if (api_is_graph(k->api)) {
		k->src = CUDA_NAME_GRAPH;
		r = asprintf(&k->name, "<graph exec 0x%" PRIx64 ">", k->func);
	} else if (api_is_driver_launch(k->api)) {
		k->src = CUDA_NAME_DRIVER;
		r = asprintf(&k->name, "<CUfunction 0x%" PRIx64 ">; name from device records",
			     k->func);
	} else {
		if (m->resolve)
			name = m->resolve(m->resolve_ctx, k->pid, k->func, &where);
		if (name) {
			k->src = CUDA_NAME_SYMBOL;
			k->name = name;
			return 0;
		}
		switch (where) {
		case CUDA_ADDR_FILE:
			k->src = CUDA_NAME_NOSYM;
			r = asprintf(&k->name, "<no symbol at 0x%" PRIx64 ">", k->func);
			break;
		case CUDA_ADDR_GONE:
			k->src = CUDA_NAME_GONE;
			r = asprintf(&k->name, "<kernel 0x%" PRIx64 ">; process exited before "
				     "it was named", k->func);
			break;
		default:
			k->src = CUDA_NAME_OPAQUE;
			r = asprintf(&k->name, "<opaque kernel handle 0x%" PRIx64
				     ">; name from device records", k->func);
		}
	}
	return r < 0 ? -ENOMEM : 0;
}

static struct cuda_kernel *kernel_get(struct cuda_model *m, uint32_t pid, uint32_t api,
				      uint64_t func)
{
	struct cuda_kernel *k;
	size_t h;

	if ((m->nkernels + 1) * 2 > m->kidx_cap && kidx_grow(m))
		return NULL;
	h = khash(pid, func, m->kidx_cap);
	while (m->kidx[h]) {
		k = &m->kernels[m->kidx[h] - 1];
		if (k->pid == pid && k->func == func)
			return k;
		h = (h + 1) & (m->kidx_cap - 1);
	}
	if (GROW(m->kernels, m->nkernels, m->capkernels, 64))
		return NULL;
	k = &m->kernels[m->nkernels];
	memset(k, 0, sizeof(*k));
	k->pid = pid;
	k->api = api;
	k->func = func;
	if (kernel_name(m, k))
		return NULL;
	m->kidx[h] = ++m->nkernels;
	return k;
}

/* ---- per Python stack (layers) ------------------------------------------ */

static size_t shash(uint32_t pid, uint32_t stack_id, bool outside, size_t cap)
{
	uint64_t h = (((uint64_t)pid << 33) ^ ((uint64_t)stack_id << 1) ^ outside) *
		     0x9e3779b97f4a7c15ULL;

	return (h >> 20) & (cap - 1);
}

static int sidx_grow(struct cuda_model *m)
{
	size_t cap = m->sidx_cap ? m->sidx_cap * 2 : 256;
	uint32_t *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->nsstats; i++) {
		const struct cuda_stackstat *st = &m->sstats[i];
		size_t h = shash(st->pid, st->stack_id, st->outside_op, cap);

		while (v[h])
			h = (h + 1) & (cap - 1);
		v[h] = i + 1;
	}
	free(m->sidx);
	m->sidx = v;
	m->sidx_cap = cap;
	return 0;
}

/* Launches outside any op have no Python stack: stack_id is ignored. */
static struct cuda_stackstat *stackstat_get(struct cuda_model *m, uint32_t pid,
					    uint32_t stack_id, uint32_t op_id)
{
	bool outside = !op_id;
	struct cuda_stackstat *st;
	size_t h;

	if (outside)
		stack_id = 0;
	if ((m->nsstats + 1) * 2 > m->sidx_cap && sidx_grow(m))
		return NULL;
	h = shash(pid, stack_id, outside, m->sidx_cap);
	while (m->sidx[h]) {
		st = &m->sstats[m->sidx[h] - 1];
		if (st->pid == pid && st->stack_id == stack_id && st->outside_op == outside)
			return st;
		h = (h + 1) & (m->sidx_cap - 1);
	}
	if (GROW(m->sstats, m->nsstats, m->capsstats, 64))
		return NULL;
	st = &m->sstats[m->nsstats];
	*st = (struct cuda_stackstat){ .pid = pid, .stack_id = stack_id, .outside_op = outside };
	m->sidx[h] = ++m->nsstats;
	return st;
}

static int kernel_stack_add(struct cuda_kernel *k, uint32_t pid, uint32_t stack_id,
			    uint32_t op_id)
{
	bool outside = !op_id;
	size_t i;

	if (outside)
		stack_id = 0;
	for (i = 0; i < k->nstacks; i++)
		if (k->stacks[i].pid == pid && k->stacks[i].stack_id == stack_id &&
		    k->stacks[i].outside_op == outside)
			break;
	if (i == k->nstacks) {
		if (GROW(k->stacks, k->nstacks, k->capstacks, 4))
			return -ENOMEM;
		k->stacks[k->nstacks++] = (struct cuda_stackcount){ pid, stack_id, outside, 0 };
	}
	k->stacks[i].count++;
	return 0;
}

static int add_launch(struct cuda_model *m, const struct rec_launch *r)
{
	struct cuda_kernel *k = kernel_get(m, r->pid, r->api, r->func);
	size_t i;

	if (!k)
		return -ENOMEM;
	k->launches++;
	for (i = 0; i < k->ndims; i++) {
		struct cuda_dims *d = &k->dims[i];

		if (!memcmp(d->grid, r->grid, sizeof(d->grid)) &&
		    !memcmp(d->block, r->block, sizeof(d->block)) && d->shmem == r->shmem &&
		    d->stream == r->stream) {
			d->launches++;
			break;
		}
	}
	if (i == k->ndims) {
		if (k->ndims < CUDA_MAX_DIMS) {
			struct cuda_dims *d = &k->dims[k->ndims++];

			memcpy(d->grid, r->grid, sizeof(d->grid));
			memcpy(d->block, r->block, sizeof(d->block));
			d->shmem = r->shmem;
			d->stream = r->stream;
			d->launches = 1;
		} else {
			k->other_dims++;
		}
	}
	for (i = 0; i < k->nops; i++)
		if (k->ops[i].op_id == r->op_id)
			break;
	if (i == k->nops) {
		if (GROW(k->ops, k->nops, k->capops, 4))
			return -ENOMEM;
		k->ops[k->nops++] = (struct cuda_opcount){ r->op_id, 0 };
	}
	k->ops[i].count++;
	{
		struct cuda_stackstat *st = stackstat_get(m, r->pid, r->stack_id, r->op_id);

		if (!st)
			return -ENOMEM;
		st->launches++;
	}
	return kernel_stack_add(k, r->pid, r->stack_id, r->op_id);
}

/* ---- copies, syncs, allocations ---------------------------------------- */

static struct cuda_pidcopy *pidcopy_get(struct cuda_model *m, uint32_t pid)
{
	struct cuda_pidcopy *v;

	for (size_t i = 0; i < m->npcopies; i++)
		if (m->pcopies[i].pid == pid)
			return &m->pcopies[i];
	if (GROW(m->pcopies, m->npcopies, m->cappcopies, 4))
		return NULL;
	v = &m->pcopies[m->npcopies++];
	memset(v, 0, sizeof(*v));
	v->pid = pid;
	return v;
}

static int add_memop(struct cuda_model *m, const struct rec_memop *r)
{
	uint32_t dir = r->dir < CUDA_NDIRS ? r->dir : CP_UNKNOWN;
	struct cuda_copy *c = &m->copies[dir];
	struct cuda_stackstat *st = stackstat_get(m, r->pid, r->stack_id, r->op_id);
	struct cuda_pidcopy *pc = pidcopy_get(m, r->pid);

	c->count++;
	c->bytes += r->bytes;
	c->host_ns += r->dur_ns;
	if (pc) {
		pc->count[dir]++;
		pc->bytes[dir] += r->bytes;
	}
	if (!st || !pc)
		return -ENOMEM;
	st->copies++;
	st->copy_bytes += r->bytes;
	return 0;
}

static int add_sync(struct cuda_model *m, const struct rec_sync *r)
{
	struct cuda_sync *s = NULL;

	for (size_t i = 0; i < m->nsyncs; i++)
		if (m->syncs[i].op_id == r->op_id && m->syncs[i].api == r->api)
			s = &m->syncs[i];
	if (!s) {
		if (GROW(m->syncs, m->nsyncs, m->capsyncs, 8))
			return -ENOMEM;
		s = &m->syncs[m->nsyncs++];
		*s = (struct cuda_sync){ .op_id = r->op_id, .api = r->api };
	}
	s->count++;
	s->total_ns += r->dur_ns;
	if (r->dur_ns > s->max_ns)
		s->max_ns = r->dur_ns;
	{
		struct cuda_stackstat *st = stackstat_get(m, r->pid, r->stack_id, r->op_id);

		if (!st)
			return -ENOMEM;
		st->syncs++;
		st->sync_ns += r->dur_ns;
	}
	return 0;
}

static bool api_is_free(uint32_t api)
{
	return api == CU_cudaFree || api == CU_cudaFreeAsync || api == CU_cuMemFree ||
	       api == CU_cuMemFreeAsync;
}

static int add_alloc(struct cuda_model *m, const struct rec_alloc *r)
{
	struct cuda_alloc *a = NULL;

	for (size_t i = 0; i < m->nallocs; i++)
		if (m->allocs[i].api == r->api)
			a = &m->allocs[i];
	if (!a) {
		if (GROW(m->allocs, m->nallocs, m->capallocs, 4))
			return -ENOMEM;
		a = &m->allocs[m->nallocs++];
		*a = (struct cuda_alloc){ .api = r->api };
	}
	if (api_is_free(r->api)) {
		a->frees++;
		for (size_t i = 0; i < m->nlive; i++) {
			if (m->live[i].pid != r->pid || m->live[i].ptr != r->ptr)
				continue;
			a->freed_bytes += m->live[i].bytes;
			m->live_bytes -= m->live[i].bytes;
			m->live[i] = m->live[--m->nlive];
			break;
		}
		return 0;
	}
	a->calls++;
	a->bytes += r->bytes;
	if (r->ret) {
		a->failed++;
		return 0;
	}
	if (GROW(m->live, m->nlive, m->caplive, 64))
		return -ENOMEM;
	m->live[m->nlive++] = (struct cuda_live){ r->pid, r->ptr, r->bytes };
	m->live_bytes += r->bytes;
	if (m->live_bytes > m->peak_bytes)
		m->peak_bytes = m->live_bytes;
	return 0;
}


/* The per-API row of a record: a call, and its host time when the
 * probes timed it. */
static void api_add(struct cuda_model *m, const void *rec)
{
	uint32_t api = ((const struct rec_launch *)rec)->api;
	struct cuda_apistat *a;
	uint64_t dur;
	bool timed = cuda_rec_host_ns(rec, &dur);

	if (api >= CU_API_MAX)
		return;
	a = &m->apis[api];
	a->api = api;
	a->calls++;
	if (!timed)
		return;
	a->timed++;
	a->total_ns += dur;
	if (dur > a->max_ns)
		a->max_ns = dur;
}

/* The model of process pid (made on its first record). */
static struct cuda_model *proc_get(struct cuda_model *m, uint32_t pid)
{
	struct cuda_model *c;

	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i]->pid == pid)
			return m->procs[i];
	if (GROW(m->procs, m->nprocs, m->capprocs, 4))
		return NULL;
	c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	cuda_model_init(c, m->resolve, m->resolve_ctx);
	c->parent = m;
	c->pid = pid;
	m->procs[m->nprocs++] = c;
	return c;
}

const struct cuda_model *cuda_model_of_pid(const struct cuda_model *m, uint32_t pid)
{
	for (size_t i = 0; m && i < m->nprocs; i++)
		if (m->procs[i]->pid == pid)
			return m->procs[i];
	return NULL;
}

static int add_one(struct cuda_model *m, const void *rec);

int cuda_model_add(struct cuda_model *m, const void *rec, size_t len)
{
	const struct rec_hdr *h = rec;
	struct cuda_model *pm;
	size_t need;
	int err;

	if (len < sizeof(*h))
		return -EINVAL;
	if (!(need = cuda_rec_min_size(h)))   /* not a host CUDA call */
		return 0;
	if (len < need || h->size < need) {
		m->bad_records++;
		return -EINVAL;
	}
	err = add_one(m, rec);
	if (err || m->parent)
		return err;
	/* and into the model of its process (a section each) */
	pm = proc_get(m, ((const struct rec_launch *)rec)->pid);
	return pm ? add_one(pm, rec) : -ENOMEM;
}

static int add_one(struct cuda_model *m, const void *rec)
{
	const struct rec_hdr *h = rec;

	m->records++;
	api_add(m, rec);
	if (cuda_opapi_add(m, rec))
		return -ENOMEM;
	switch (rec_kind(h)) {
	case EV_LAUNCH: return add_launch(m, rec);
	case EV_MEMOP: return add_memop(m, rec);
	case EV_SYNC: return add_sync(m, rec);
	default: return add_alloc(m, rec);
	}
}

static int apistat_cmp(const void *x, const void *y)
{
	const struct cuda_apistat *a = *(const struct cuda_apistat *const *)x;
	const struct cuda_apistat *b = *(const struct cuda_apistat *const *)y;

	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	if (a->calls != b->calls)
		return a->calls > b->calls ? -1 : 1;
	return strcmp(cuda_model_api_name(a->api), cuda_model_api_name(b->api));
}

const struct cuda_apistat **cuda_model_apis(const struct cuda_model *m, size_t *n)
{
	const struct cuda_apistat **v = calloc(CU_API_MAX, sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (uint32_t i = 0; i < CU_API_MAX; i++)
		if (m->apis[i].calls)
			v[(*n)++] = &m->apis[i];
	qsort(v, *n, sizeof(*v), apistat_cmp);
	return v;
}

bool cuda_model_empty(const struct cuda_model *m)
{
	return m->records == 0;
}

/* ---- sorted views ------------------------------------------------------ */

static int kernel_cmp(const void *a, const void *b)
{
	const struct cuda_kernel *x = *(const struct cuda_kernel *const *)a;
	const struct cuda_kernel *y = *(const struct cuda_kernel *const *)b;
	int c;

	if (x->launches != y->launches)
		return x->launches > y->launches ? -1 : 1;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->func < y->func ? -1 : x->func > y->func;
}

static int sync_cmp(const void *a, const void *b)
{
	const struct cuda_sync *x = *(const struct cuda_sync *const *)a;
	const struct cuda_sync *y = *(const struct cuda_sync *const *)b;

	if (x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	if (x->op_id != y->op_id)
		return x->op_id < y->op_id ? -1 : 1;
	return strcmp(cuda_model_api_name(x->api), cuda_model_api_name(y->api));
}

static int alloc_cmp(const void *a, const void *b)
{
	const struct cuda_alloc *x = *(const struct cuda_alloc *const *)a;
	const struct cuda_alloc *y = *(const struct cuda_alloc *const *)b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return strcmp(cuda_model_api_name(x->api), cuda_model_api_name(y->api));
}

static const void **sorted(const void *base, size_t n, size_t sz,
			   int (*cmp)(const void *, const void *))
{
	const void **v = malloc((n ? n : 1) * sizeof(*v));

	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		v[i] = (const char *)base + i * sz;
	qsort(v, n, sizeof(*v), cmp);
	return v;
}

const struct cuda_kernel **cuda_model_kernels(const struct cuda_model *m)
{
	return (const struct cuda_kernel **)sorted(m->kernels, m->nkernels,
						   sizeof(*m->kernels), kernel_cmp);
}

const struct cuda_sync **cuda_model_syncs(const struct cuda_model *m)
{
	return (const struct cuda_sync **)sorted(m->syncs, m->nsyncs, sizeof(*m->syncs),
						 sync_cmp);
}

const struct cuda_alloc **cuda_model_allocs(const struct cuda_model *m)
{
	return (const struct cuda_alloc **)sorted(m->allocs, m->nallocs,
						  sizeof(*m->allocs), alloc_cmp);
}

static int sstat_cmp(const void *a, const void *b)
{
	const struct cuda_stackstat *x = *(const struct cuda_stackstat *const *)a;
	const struct cuda_stackstat *y = *(const struct cuda_stackstat *const *)b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	return (int)x->outside_op - (int)y->outside_op;
}

const struct cuda_stackstat **cuda_model_stackstats(const struct cuda_model *m, size_t *n)
{
	*n = m->nsstats;
	return (const struct cuda_stackstat **)sorted(m->sstats, m->nsstats,
						      sizeof(*m->sstats), sstat_cmp);
}

int cuda_model_layer_rows(const struct cuda_model *m, struct layer_cudastat **rows, size_t *n)
{
	size_t cnt = m->nsstats, k = 0;
	struct layer_cudastat *v;

	for (size_t i = 0; i < m->nkernels; i++)
		cnt += m->kernels[i].nstacks;
	*rows = NULL;
	*n = 0;
	v = calloc(cnt + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->nkernels; i++) {
		const struct cuda_kernel *kn = &m->kernels[i];

		for (size_t j = 0; j < kn->nstacks; j++)
			v[k++] = (struct layer_cudastat){
				.stack_id = kn->stacks[j].stack_id,
				.outside_op = kn->stacks[j].outside_op,
				.kernel = kn->name,
				.launches = kn->stacks[j].count,
			};
	}
	for (size_t i = 0; i < m->nsstats; i++) {
		const struct cuda_stackstat *st = &m->sstats[i];

		if (!st->copies && !st->syncs)
			continue;
		v[k++] = (struct layer_cudastat){
			.stack_id = st->stack_id, .outside_op = st->outside_op,
			.copies = st->copies, .copy_bytes = st->copy_bytes,
			.syncs = st->syncs, .sync_ns = st->sync_ns,
		};
	}
	*rows = v;
	*n = k;
	return 0;
}

int cuda_model_to_layers(const struct cuda_model *m, struct layer_tree *t)
{
	struct layer_cudastat *rows;
	size_t n;
	int err = cuda_model_layer_rows(m, &rows, &n);

	if (!err)
		err = layers_add_cuda(t, rows, n);
	free(rows);
	return err;
}
