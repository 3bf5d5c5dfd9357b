/* capture_meta.c - capture file stage: the meta tables (processes, threads, ops,
 * stacks, kernels, shapes) a reader loads and a live recorder fills. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "capture.h"
#include "strintern.h"
#include "grow.h"

/* ================= meta tables ================= */

void capture_meta_init(struct capture_meta *m)
{
	memset(m, 0, sizeof(*m));
}

void capture_meta_free(struct capture_meta *m)
{
	for (size_t i = 0; i < m->nstacks; i++)
		free(m->stacks[i].frames);
	for (size_t i = 0; i < m->nsrcstacks; i++)
		free(m->srcstacks[i].e);
	free(m->srcstacks);
	free(m->procs);
	free(m->threads);
	free(m->ops);
	free(m->stacks);
	free(m->kernels);
	free(m->shapes);
	free(m->run.pids);
	free(m->op_index);
	strintern_free(m->strings);
	memset(m, 0, sizeof(*m));
}

static const char *mstr(struct capture_meta *m, const char *s)
{
	if (!m->strings && !(m->strings = strintern_new()))
		return NULL;
	return strintern(m->strings, s ? s : "");
}

const char *capture_meta_strn(struct capture_meta *m, const char *s, size_t n)
{
	if (!m->strings && !(m->strings = strintern_new()))
		return NULL;
	return strintern_n(m->strings, s, n);
}

static void *grow_arr(void **arr, size_t *cap, size_t n, size_t elem)
{
	return grow_array(arr, cap, n, elem, 16) ? NULL : (char *)*arr + n * elem;
}

#define PUSH(m, arr, n, c) grow_arr((void **)&(m)->arr, &(m)->c, (m)->n, sizeof(*(m)->arr))

int capture_meta_add_process(struct capture_meta *m, uint32_t pid, const char *comm, const char *cmdline)
{
	struct capture_process *p = PUSH(m, procs, nprocs, cprocs);
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->comm = mstr(m, comm);
	p->cmdline = mstr(m, cmdline);
	p->torch = mstr(m, "");
	if (!p->comm || !p->cmdline || !p->torch)
		return -ENOMEM;
	m->nprocs++;
	m->sorted = false;
	return 0;
}

int capture_meta_add_thread(struct capture_meta *m, uint32_t pid, uint32_t tid, const char *name)
{
	struct capture_thread *t = PUSH(m, threads, nthreads, cthreads);
	if (!t)
		return -ENOMEM;
	t->pid = pid;
	t->tid = tid;
	if (!(t->name = mstr(m, name)))
		return -ENOMEM;
	m->nthreads++;
	m->sorted = false;
	return 0;
}

int capture_meta_add_op(struct capture_meta *m, uint32_t op_id, const char *name, const char *overload)
{
	struct capture_op *o = PUSH(m, ops, nops, cops);
	if (!o)
		return -ENOMEM;
	o->op_id = op_id;
	o->name = mstr(m, name);
	o->overload = mstr(m, overload);
	if (!o->name || !o->overload)
		return -ENOMEM;
	m->nops++;
	m->sorted = false;
	return 0;
}

int capture_meta_add_stack(struct capture_meta *m, uint32_t pid, uint64_t stack_id,
			   const struct capture_frame *frames, uint32_t nframes)
{
	struct capture_stack *s = PUSH(m, stacks, nstacks, cstacks);
	if (!s)
		return -ENOMEM;
	struct capture_frame *f = calloc(nframes ? nframes : 1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	for (uint32_t i = 0; i < nframes; i++) {
		f[i].kind = frames[i].kind;
		f[i].line = frames[i].line;
		f[i].name = mstr(m, frames[i].name);
		f[i].file = mstr(m, frames[i].file);
		f[i].class_name = mstr(m, frames[i].class_name);
		f[i].module_path = mstr(m, frames[i].module_path);
		if (!f[i].name || !f[i].file || !f[i].class_name || !f[i].module_path) {
			free(f);
			return -ENOMEM;
		}
	}
	s->pid = pid;
	s->stack_id = stack_id;
	s->nframes = nframes;
	s->frames = f;
	m->nstacks++;
	m->sorted = false;
	return 0;
}

int capture_meta_add_srcstack(struct capture_meta *m, uint32_t pid, uint64_t stack_id,
			      const struct capture_srcentry *e, uint32_t n)
{
	struct capture_srcstack *s = PUSH(m, srcstacks, nsrcstacks, csrcstacks);
	struct capture_srcentry *c;

	if (!s)
		return -ENOMEM;
	c = calloc(n ? n : 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		c[i].text = e[i].text ? mstr(m, e[i].text) : NULL;
		c[i].cls = mstr(m, e[i].cls ? e[i].cls : "");
		c[i].module = e[i].module;
		c[i].order = e[i].order;
		if ((e[i].text && !c[i].text) || !c[i].cls) {
			free(c);
			return -ENOMEM;
		}
	}
	s->pid = pid;
	s->stack_id = stack_id;
	s->n = n;
	s->e = c;
	m->nsrcstacks++;
	return 0;
}

int capture_meta_add_kernel(struct capture_meta *m, uint32_t pid, uint64_t addr, const char *name)
{
	struct capture_kernel *k = PUSH(m, kernels, nkernels, ckernels);
	if (!k)
		return -ENOMEM;
	k->pid = pid;
	k->addr = addr;
	if (!(k->name = mstr(m, name)))
		return -ENOMEM;
	m->nkernels++;
	m->sorted = false;
	return 0;
}

int capture_meta_add_shape(struct capture_meta *m, uint64_t id, const struct tbpf_shape *sh)
{
	struct capture_shape *e = PUSH(m, shapes, nshapes, cshapes);

	if (!e)
		return -ENOMEM;
	e->id = id;
	e->s = *sh;
	m->nshapes++;
	m->sorted = false;
	return 0;
}

/* Sorting: key, then insertion order, so that de-duplication keeps the
 * last definition.  Entries carry their index through a side array. */
struct sortent { uint64_t k1, k2; size_t idx; };

static int cmp_sortent(const void *a, const void *b)
{
	const struct sortent *x = a, *y = b;
	if (x->k1 != y->k1)
		return x->k1 < y->k1 ? -1 : 1;
	if (x->k2 != y->k2)
		return x->k2 < y->k2 ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sort arr[n] of elem bytes by keys; drop all but the last of equal keys;
 * free_cb releases dropped entries.  Returns the new count. */
static size_t sort_dedupe(void *arr, size_t n, size_t elem,
			  void (*key)(const void *e, uint64_t *k1, uint64_t *k2),
			  void (*drop)(void *e))
{
	if (n < 2)
		return n;
	struct sortent *se = malloc(n * sizeof(*se));
	char *tmp = malloc(n * elem);
	if (!se || !tmp) {
		/* out of memory: leave unsorted; lookups fall back to a scan */
		free(se);
		free(tmp);
		return n;
	}
	for (size_t i = 0; i < n; i++) {
		key((char *)arr + i * elem, &se[i].k1, &se[i].k2);
		se[i].idx = i;
	}
	qsort(se, n, sizeof(*se), cmp_sortent);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		char *e = (char *)arr + se[i].idx * elem;
		if (i + 1 < n && se[i + 1].k1 == se[i].k1 && se[i + 1].k2 == se[i].k2) {
			if (drop)
				drop(e);
			continue;
		}
		memcpy(tmp + out++ * elem, e, elem);
	}
	memcpy(arr, tmp, out * elem);
	free(se);
	free(tmp);
	return out;
}

static void key_proc(const void *e, uint64_t *a, uint64_t *b) { *a = ((const struct capture_process *)e)->pid; *b = 0; }
static void key_thread(const void *e, uint64_t *a, uint64_t *b) { const struct capture_thread *t = e; *a = t->pid; *b = t->tid; }
static void key_op(const void *e, uint64_t *a, uint64_t *b) { *a = ((const struct capture_op *)e)->op_id; *b = 0; }
static void key_stack(const void *e, uint64_t *a, uint64_t *b) { const struct capture_stack *s = e; *a = s->pid; *b = (uint32_t)s->stack_id; }
static void key_kernel(const void *e, uint64_t *a, uint64_t *b) { const struct capture_kernel *k = e; *a = k->pid; *b = k->addr; }
static void key_shape(const void *e, uint64_t *a, uint64_t *b) { *a = ((const struct capture_shape *)e)->id; *b = 0; }
static void drop_stack(void *e) { free(((struct capture_stack *)e)->frames); }

void capture_meta_finish(struct capture_meta *m)
{
	if (m->sorted)
		return;
	m->nprocs = sort_dedupe(m->procs, m->nprocs, sizeof(*m->procs), key_proc, NULL);
	m->nthreads = sort_dedupe(m->threads, m->nthreads, sizeof(*m->threads), key_thread, NULL);
	m->nops = sort_dedupe(m->ops, m->nops, sizeof(*m->ops), key_op, NULL);
	m->nstacks = sort_dedupe(m->stacks, m->nstacks, sizeof(*m->stacks), key_stack, drop_stack);
	m->nkernels = sort_dedupe(m->kernels, m->nkernels, sizeof(*m->kernels), key_kernel, NULL);
	m->nshapes = sort_dedupe(m->shapes, m->nshapes, sizeof(*m->shapes), key_shape, NULL);
	m->sorted = true;
	/* direct index for the op ids a recorder hands out (small, dense) */
	free(m->op_index);
	m->op_index = NULL;
	m->nop_index = 0;
	uint32_t maxid = m->nops ? m->ops[m->nops - 1].op_id : 0;
	if (m->nops && maxid < (1u << 20) && (m->op_index = calloc(maxid + 1, sizeof(uint32_t)))) {
		m->nop_index = maxid + 1;
		for (size_t i = 0; i < m->nops; i++)
			m->op_index[m->ops[i].op_id] = i + 1;
	}
}

static const void *bfind(const void *arr, size_t n, size_t elem, bool sorted,
			 void (*key)(const void *e, uint64_t *k1, uint64_t *k2),
			 uint64_t k1, uint64_t k2)
{
	if (!sorted) {
		const void *hit = NULL;
		for (size_t i = 0; i < n; i++) {
			uint64_t a, b;
			key((const char *)arr + i * elem, &a, &b);
			if (a == k1 && b == k2)
				hit = (const char *)arr + i * elem;
		}
		return hit;
	}
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t a, b;
		key((const char *)arr + mid * elem, &a, &b);
		if (a == k1 && b == k2)
			return (const char *)arr + mid * elem;
		if (a < k1 || (a == k1 && b < k2))
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct tbpf_shape *capture_meta_shape(const struct capture_meta *m, uint64_t id)
{
	const struct capture_shape *e = id ? bfind(m->shapes, m->nshapes, sizeof(*m->shapes),
						     m->sorted, key_shape, id, 0) : NULL;

	return e ? &e->s : NULL;
}

const struct capture_op *capture_meta_op(const struct capture_meta *m, uint32_t op_id)
{
	if (m->sorted && m->op_index) {
		if (op_id >= m->nop_index || !m->op_index[op_id])
			return NULL;
		return &m->ops[m->op_index[op_id] - 1];
	}
	return bfind(m->ops, m->nops, sizeof(*m->ops), m->sorted, key_op, op_id, 0);
}

const struct capture_thread *capture_meta_thread(const struct capture_meta *m, uint32_t pid, uint32_t tid)
{
	return bfind(m->threads, m->nthreads, sizeof(*m->threads), m->sorted, key_thread, pid, tid);
}

const struct capture_process *capture_meta_process(const struct capture_meta *m, uint32_t pid)
{
	return bfind(m->procs, m->nprocs, sizeof(*m->procs), m->sorted, key_proc, pid, 0);
}

const struct capture_stack *capture_meta_stack(const struct capture_meta *m, uint32_t pid, uint64_t stack_id)
{
	return bfind(m->stacks, m->nstacks, sizeof(*m->stacks), m->sorted, key_stack, pid, (uint32_t)stack_id);
}

const char *capture_meta_kernel(const struct capture_meta *m, uint32_t pid, uint64_t addr)
{
	const struct capture_kernel *k = bfind(m->kernels, m->nkernels, sizeof(*m->kernels),
					       m->sorted, key_kernel, pid, addr);
	return k ? k->name : NULL;
}

static const char *const cuda_api_names[CU_API_MAX] = {
	[CU_API_NONE] = "none",
	[CU_cudaLaunchKernel] = "cudaLaunchKernel",
	[CU_cudaLaunchKernel_ptsz] = "cudaLaunchKernel_ptsz",
	[CU_cudaLaunchKernelExC] = "cudaLaunchKernelExC",
	[CU_cudaLaunchKernelExC_ptsz] = "cudaLaunchKernelExC_ptsz",
	[CU_cudaLaunchCooperativeKernel] = "cudaLaunchCooperativeKernel",
	[CU_cudaLaunchCooperativeKernel_ptsz] = "cudaLaunchCooperativeKernel_ptsz",
	[CU_cudaGraphLaunch] = "cudaGraphLaunch",
	[CU_cudaGraphLaunch_ptsz] = "cudaGraphLaunch_ptsz",
	[CU_cuLaunchKernel] = "cuLaunchKernel",
	[CU_cuLaunchKernel_ptsz] = "cuLaunchKernel_ptsz",
	[CU_cuLaunchKernelEx] = "cuLaunchKernelEx",
	[CU_cuLaunchKernelEx_ptsz] = "cuLaunchKernelEx_ptsz",
	[CU_cuGraphLaunch] = "cuGraphLaunch",
	[CU_cuGraphLaunch_ptsz] = "cuGraphLaunch_ptsz",
	[CU_cudaMemcpy] = "cudaMemcpy",
	[CU_cudaMemcpyAsync] = "cudaMemcpyAsync",
	[CU_cudaMemcpyAsync_ptsz] = "cudaMemcpyAsync_ptsz",
	[CU_cudaMemsetAsync] = "cudaMemsetAsync",
	[CU_cudaMemsetAsync_ptsz] = "cudaMemsetAsync_ptsz",
	[CU_cudaMemset] = "cudaMemset",
	[CU_cuMemcpyAsync] = "cuMemcpyAsync",
	[CU_cuMemcpyHtoDAsync] = "cuMemcpyHtoDAsync",
	[CU_cuMemcpyDtoHAsync] = "cuMemcpyDtoHAsync",
	[CU_cuMemcpyDtoDAsync] = "cuMemcpyDtoDAsync",
	[CU_cuMemsetD8Async] = "cuMemsetD8Async",
	[CU_cuMemsetD16Async] = "cuMemsetD16Async",
	[CU_cuMemsetD32Async] = "cuMemsetD32Async",
	[CU_cudaStreamSynchronize] = "cudaStreamSynchronize",
	[CU_cudaDeviceSynchronize] = "cudaDeviceSynchronize",
	[CU_cudaEventSynchronize] = "cudaEventSynchronize",
	[CU_cuStreamSynchronize] = "cuStreamSynchronize",
	[CU_cuCtxSynchronize] = "cuCtxSynchronize",
	[CU_cuEventSynchronize] = "cuEventSynchronize",
	[CU_cudaMalloc] = "cudaMalloc",
	[CU_cudaFree] = "cudaFree",
	[CU_cudaMallocAsync] = "cudaMallocAsync",
	[CU_cudaFreeAsync] = "cudaFreeAsync",
	[CU_cuMemAlloc] = "cuMemAlloc",
	[CU_cuMemFree] = "cuMemFree",
	[CU_cuMemAllocAsync] = "cuMemAllocAsync",
	[CU_cuMemFreeAsync] = "cuMemFreeAsync",
};

const char *capture_cuda_api_name(uint32_t api)
{
	if (api >= CU_API_MAX || !cuda_api_names[api])
		return "?";
	return cuda_api_names[api];
}

