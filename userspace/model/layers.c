/* layers.c - aggregate stage: build the nn.Module layer tree from
 * symbolized Python stacks and per-(stack, op) statistics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "grow.h"

/* By the low 32 bits, as records carry stack ids (rec_op.stack_id) and as
 * ref_find matches them: rows keyed by the full id (live uprobe rows) and
 * rows from records (captures, --inproc's feed) find the same stack. */
static int cmp_u64(const void *a, const void *b)
{
	uint32_t x = (uint32_t)((const struct layer_stack *)a)->stack_id;
	uint32_t y = (uint32_t)((const struct layer_stack *)b)->stack_id;

	return x < y ? -1 : x > y;
}

static struct layer_node *kid_get(struct layer_node *p, const char *name,
				  const char *cls, enum layer_kind kind)
{
	struct layer_node *k;
	size_t i;

	for (i = 0; i < p->nkids; i++)
		if (p->kids[i]->kind == kind && !strcmp(p->kids[i]->name, name))
			return p->kids[i];
	if (GROW(p->kids, p->nkids, p->capkids, 4))
		return NULL;
	k = calloc(1, sizeof(*k));
	if (!k || !(k->name = strdup(name)) || (cls && !(k->cls = strdup(cls)))) {
		if (k)
			free(k->name);
		free(k);
		return NULL;
	}
	k->kind = kind;
	k->parent = p;
	p->kids[p->nkids++] = k;
	return k;
}

static int op_add(struct layer_node *n, const struct layer_opstat *s)
{
	struct layer_op *o;
	size_t i;

	for (i = 0; i < n->nops; i++)
		if (!strcmp(n->ops[i].name, s->op))
			break;
	if (i == n->nops) {
		if (GROW(n->ops, n->nops, n->capops, 4))
			return -ENOMEM;
		memset(&n->ops[i], 0, sizeof(n->ops[i]));
		n->ops[i].name = strdup(s->op);
		if (!n->ops[i].name)
			return -ENOMEM;
		n->nops++;
	}
	o = &n->ops[i];
	o->calls += s->calls;
	o->self_ns += s->self_ns;
	o->total_ns += s->total_ns;
	o->launches += s->launches;
	o->self_cuda_ns += s->self_cuda_ns;
	o->cuda_total_ns += s->cuda_total_ns;
	n->self_dev_ns += s->self_cuda_ns;
	for (int d = 0; d < 2; d++) {
		o->mem_self[d] += s->mem_self[d];
		o->mem_total[d] += s->mem_total[d];
		n->self_mem[d] += s->mem_self[d];
	}
	n->self_ns += s->self_ns;
	if (!s->cuda_call)
		n->self_calls += s->calls;
	return 0;
}

static void sum_up(struct layer_node *n)
{
	size_t i;

	n->total_ns = n->self_ns;
	n->calls = n->self_calls;
	n->mem[0] = n->self_mem[0];
	n->mem[1] = n->self_mem[1];
	n->cuda = n->self_cuda;
	n->dev_ns = n->self_dev_ns;
	for (i = 0; i < n->nkids; i++) {
		const struct layer_cuda *k = &n->kids[i]->cuda;

		sum_up(n->kids[i]);
		n->total_ns += n->kids[i]->total_ns;
		n->dev_ns += n->kids[i]->dev_ns;
		n->calls += n->kids[i]->calls;
		n->mem[0] += n->kids[i]->mem[0];
		n->mem[1] += n->kids[i]->mem[1];
		n->cuda.launches += k->launches;
		n->cuda.copies += k->copies;
		n->cuda.copy_bytes += k->copy_bytes;
		n->cuda.syncs += k->syncs;
		n->cuda.sync_ns += k->sync_ns;
	}
}

/* Deterministic order whatever order the stats came in: kids by total
 * time desc, then kind, then name; ops by self time desc, then name. */
static int kid_cmp(const void *a, const void *b)
{
	const struct layer_node *x = *(const struct layer_node *const *)a;
	const struct layer_node *y = *(const struct layer_node *const *)b;

	if (x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int op_cmp(const void *a, const void *b)
{
	const struct layer_op *x = a, *y = b;

	if (x->self_ns != y->self_ns)
		return x->self_ns > y->self_ns ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void sort_tree(struct layer_node *n)
{
	qsort(n->kids, n->nkids, sizeof(*n->kids), kid_cmp);
	qsort(n->ops, n->nops, sizeof(*n->ops), op_cmp);
	for (size_t i = 0; i < n->nkids; i++)
		sort_tree(n->kids[i]);
}

/* ---- stacks kept by the tree ------------------------------------------- */

static int ref_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct layer_stackref *)a)->id32;
	uint32_t y = ((const struct layer_stackref *)b)->id32;

	return x < y ? -1 : x > y;
}

static void ref_clear(struct layer_stackref *r)
{
	for (unsigned d = 0; d < r->depth; d++) {
		if (r->names)
			free(r->names[d]);
		if (r->classes)
			free(r->classes[d]);
	}
	free(r->names);
	free(r->classes);
	free(r->orders);
	free(r->path);
}

static int ref_set(struct layer_stackref *r, const struct layer_stack *s)
{
	size_t len = 1;

	r->id32 = (uint32_t)s->stack_id;
	if (!s->depth)
		return (r->path = strdup(LAYER_NOMODULE_NAME)) ? 0 : -ENOMEM;
	r->names = calloc(s->depth, sizeof(*r->names));
	r->classes = calloc(s->depth, sizeof(*r->classes));
	if (!r->names || !r->classes)
		return -ENOMEM;
	if (s->orders) {
		r->orders = malloc(s->depth * sizeof(*r->orders));
		if (!r->orders)
			return -ENOMEM;
		memcpy(r->orders, s->orders, s->depth * sizeof(*r->orders));
	}
	r->depth = s->depth;
	for (unsigned d = 0; d < s->depth; d++) {
		if (!(r->names[d] = strdup(s->names[d])))
			return -ENOMEM;
		if (s->classes && s->classes[d] && !(r->classes[d] = strdup(s->classes[d])))
			return -ENOMEM;
		len += strlen(s->names[d]) + 1;
	}
	r->path = malloc(len);
	if (!r->path)
		return -ENOMEM;
	r->path[0] = '\0';
	for (unsigned d = 0; d < s->depth; d++) {
		if (d)
			strcat(r->path, "/");
		strcat(r->path, s->names[d]);
	}
	return 0;
}

static int keep_stacks(struct layer_tree *t, const struct layer_stack *stacks, size_t n)
{
	if (!n)
		return 0;
	t->stacks = calloc(n, sizeof(*t->stacks));
	if (!t->stacks)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int err = ref_set(&t->stacks[t->nstacks++], &stacks[i]);

		if (err)
			return err;
	}
	qsort(t->stacks, t->nstacks, sizeof(*t->stacks), ref_cmp);
	return 0;
}

static const struct layer_stackref *ref_find(const struct layer_tree *t, uint64_t stack_id)
{
	struct layer_stackref key = { .id32 = (uint32_t)stack_id };

	if (!t->nstacks)
		return NULL;
	return bsearch(&key, t->stacks, t->nstacks, sizeof(*t->stacks), ref_cmp);
}

int layers_build(const struct layer_stack *stacks, size_t nstacks,
		 const struct layer_opstat *ops, size_t nops,
		 struct layer_tree **out)
{
	struct layer_stack *sorted = NULL;
	struct layer_tree *t;
	size_t i;
	int err = -ENOMEM;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->top.name = strdup("");
	if (!t->top.name)
		goto fail;
	if (nstacks) {
		sorted = malloc(nstacks * sizeof(*sorted));
		if (!sorted)
			goto fail;
		memcpy(sorted, stacks, nstacks * sizeof(*sorted));
		qsort(sorted, nstacks, sizeof(*sorted), cmp_u64);
	}
	for (i = 0; i < nops; i++) {
		const struct layer_opstat *s = &ops[i];
		struct layer_stack key = { .stack_id = s->stack_id };
		const struct layer_stack *st = NULL;
		struct layer_node *n;
		unsigned d;

		if (s->stack_id && nstacks)
			st = bsearch(&key, sorted, nstacks, sizeof(*sorted), cmp_u64);
		if (s->outside_op)
			n = kid_get(&t->top, LAYER_NOOP_NAME, NULL, LAYER_NOOP);
		else if (!s->stack_id)
			n = kid_get(&t->top, LAYER_NOPYTHON_NAME, NULL, LAYER_NOPYTHON);
		else if (!st)
			n = kid_get(&t->top, LAYER_UNRESOLVED_NAME, NULL, LAYER_UNRESOLVED);
		else if (!st->depth)
			n = kid_get(&t->top, LAYER_NOMODULE_NAME, NULL, LAYER_NOMODULE);
		else
			for (n = &t->top, d = 0; n && d < st->depth; d++) {
				n = kid_get(n, st->names[d], st->classes[d], LAYER_MODULE);
				if (n && !n->order && st->orders)
					n->order = st->orders[d];
			}
		if (!n || op_add(n, s))
			goto fail;
		t->total_ns += s->self_ns;
		t->dev_ns += s->self_cuda_ns;
		t->has_dev |= s->self_cuda_ns || s->cuda_total_ns;
	}
	sum_up(&t->top);
	sort_tree(&t->top);
	free(sorted);
	sorted = NULL;
	if (keep_stacks(t, stacks, nstacks))
		goto fail;
	*out = t;
	return 0;
fail:
	free(sorted);
	layers_free(t);
	return err;
}

static void node_free(struct layer_node *n)
{
	size_t i;

	for (i = 0; i < n->nkids; i++) {
		node_free(n->kids[i]);
		free(n->kids[i]);
	}
	for (i = 0; i < n->nops; i++)
		free(n->ops[i].name);
	for (i = 0; i < n->nkernels; i++)
		free(n->kernels[i].name);
	free(n->kernels);
	free(n->kids);
	free(n->ops);
	free(n->name);
	free(n->cls);
}

void layers_free(struct layer_tree *t)
{
	if (!t)
		return;
	node_free(&t->top);
	for (size_t i = 0; i < t->nstacks; i++)
		ref_clear(&t->stacks[i]);
	free(t->stacks);
	free(t);
}

const struct layer_node *layers_find(const struct layer_tree *t,
				     const char *const *names, unsigned n)
{
	const struct layer_node *cur = &t->top;
	unsigned d;
	size_t i;

	for (d = 0; d < n; d++) {
		const struct layer_node *next = NULL;

		for (i = 0; i < cur->nkids && !next; i++)
			if (!strcmp(cur->kids[i]->name, names[d]))
				next = cur->kids[i];
		if (!next)
			return NULL;
		cur = next;
	}
	return cur;
}

/* ---- CUDA per layer ------------------------------------------------------ */

static int kernel_add(struct layer_node *n, const char *name, uint64_t launches)
{
	size_t i;

	for (i = 0; i < n->nkernels; i++)
		if (!strcmp(n->kernels[i].name, name))
			break;
	if (i == n->nkernels) {
		if (GROW(n->kernels, n->nkernels, n->capkernels, 4))
			return -ENOMEM;
		n->kernels[i].name = strdup(name);
		if (!n->kernels[i].name)
			return -ENOMEM;
		n->kernels[i].launches = 0;
		n->nkernels++;
	}
	n->kernels[i].launches += launches;
	return 0;
}

static int kernel_cmp(const void *a, const void *b)
{
	const struct layer_kernel *x = a, *y = b;

	if (x->launches != y->launches)
		return x->launches > y->launches ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void sort_kernels(struct layer_node *n)
{
	qsort(n->kernels, n->nkernels, sizeof(*n->kernels), kernel_cmp);
	for (size_t i = 0; i < n->nkids; i++)
		sort_kernels(n->kids[i]);
}

static struct layer_node *stack_node(struct layer_tree *t, uint64_t stack_id, int outside_op)
{
	const struct layer_stackref *r;
	struct layer_node *n;

	if (outside_op)
		return kid_get(&t->top, LAYER_NOOP_NAME, NULL, LAYER_NOOP);
	if (!(uint32_t)stack_id)
		return kid_get(&t->top, LAYER_NOPYTHON_NAME, NULL, LAYER_NOPYTHON);
	r = ref_find(t, stack_id);
	if (!r)
		return kid_get(&t->top, LAYER_UNRESOLVED_NAME, NULL, LAYER_UNRESOLVED);
	if (!r->depth)
		return kid_get(&t->top, LAYER_NOMODULE_NAME, NULL, LAYER_NOMODULE);
	n = &t->top;
	for (unsigned d = 0; n && d < r->depth; d++)
		n = kid_get(n, r->names[d], r->classes[d], LAYER_MODULE);
	return n;
}

int layers_add_modcall(struct layer_tree *t, uint64_t stack_id, uint64_t calls)
{
	const struct layer_stackref *r = ref_find(t, stack_id);
	struct layer_node *n = &t->top;

	if (!r || !r->depth)
		return 0;   /* not resolved to a module: nothing to count */
	for (unsigned d = 0; n && d < r->depth; d++) {
		n = kid_get(n, r->names[d], r->classes[d], LAYER_MODULE);
		if (n && !n->order && r->orders)
			n->order = r->orders[d];
	}
	if (!n)
		return -ENOMEM;
	n->forward_calls += calls;
	t->has_modcalls = 1;
	return 0;
}

int layers_add_cuda(struct layer_tree *t, const struct layer_cudastat *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct layer_cudastat *c = &rows[i];
		struct layer_node *nd = stack_node(t, c->stack_id, c->outside_op);

		if (!nd)
			return -ENOMEM;
		if (c->kernel && c->launches && kernel_add(nd, c->kernel, c->launches))
			return -ENOMEM;
		nd->self_cuda.launches += c->launches;
		nd->self_cuda.copies += c->copies;
		nd->self_cuda.copy_bytes += c->copy_bytes;
		nd->self_cuda.syncs += c->syncs;
		nd->self_cuda.sync_ns += c->sync_ns;
		t->has_cuda = 1;
	}
	sort_kernels(&t->top);
	sum_up(&t->top);
	sort_tree(&t->top);
	return 0;
}

int layers_add_dev_noop(struct layer_tree *t, uint64_t ns)
{
	struct layer_node *n;

	if (!ns)
		return 0;
	n = kid_get(&t->top, LAYER_NOOP_NAME, NULL, LAYER_NOOP);
	if (!n)
		return -ENOMEM;
	n->self_dev_ns += ns;
	t->dev_ns += ns;
	t->has_dev = 1;
	sum_up(&t->top);
	sort_tree(&t->top);
	return 0;
}

const char *layers_stack_path(const struct layer_tree *t, uint64_t stack_id, int outside_op)
{
	const struct layer_stackref *r;

	if (outside_op)
		return LAYER_NOOP_NAME;
	if (!(uint32_t)stack_id)
		return LAYER_NOPYTHON_NAME;
	r = ref_find(t, stack_id);
	return r ? r->path : LAYER_UNRESOLVED_NAME;
}

char *layers_node_path(const struct layer_node *n)
{
	const struct layer_node *p;
	size_t len = 1;
	char *s, *end;

	for (p = n; p && p->parent; p = p->parent)
		len += strlen(p->name) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	end = s + len - 1;
	*end = '\0';
	for (p = n; p && p->parent; p = p->parent) {
		size_t l = strlen(p->name);

		end -= l;
		memcpy(end, p->name, l);
		if (p->parent->parent)
			*--end = '/';
	}
	if (end != s)   /* the top node: empty path */
		memmove(s, end, strlen(end) + 1);
	return s;
}
