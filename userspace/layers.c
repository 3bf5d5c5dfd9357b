/* layers.c - aggregate stage: build the nn.Module layer tree from
 * symbolized Python stacks and per-(stack, op) statistics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = ((const struct layer_stack *)a)->stack_id;
	uint64_t y = ((const struct layer_stack *)b)->stack_id;

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
	if (p->nkids == p->capkids) {
		size_t c = p->capkids ? p->capkids * 2 : 4;
		struct layer_node **n = realloc(p->kids, c * sizeof(*n));

		if (!n)
			return NULL;
		p->kids = n;
		p->capkids = c;
	}
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
		if (n->nops == n->capops) {
			size_t c = n->capops ? n->capops * 2 : 4;
			struct layer_op *a = realloc(n->ops, c * sizeof(*a));

			if (!a)
				return -ENOMEM;
			n->ops = a;
			n->capops = c;
		}
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
	n->self_ns += s->self_ns;
	n->self_calls += s->calls;
	return 0;
}

static void sum_up(struct layer_node *n)
{
	size_t i;

	n->total_ns = n->self_ns;
	n->calls = n->self_calls;
	for (i = 0; i < n->nkids; i++) {
		sum_up(n->kids[i]);
		n->total_ns += n->kids[i]->total_ns;
		n->calls += n->kids[i]->calls;
	}
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
		if (!s->stack_id)
			n = kid_get(&t->top, LAYER_NOPYTHON_NAME, NULL, LAYER_NOPYTHON);
		else if (!st)
			n = kid_get(&t->top, LAYER_UNRESOLVED_NAME, NULL, LAYER_UNRESOLVED);
		else if (!st->depth)
			n = kid_get(&t->top, LAYER_NOMODULE_NAME, NULL, LAYER_NOMODULE);
		else
			for (n = &t->top, d = 0; n && d < st->depth; d++)
				n = kid_get(n, st->names[d], st->classes[d], LAYER_MODULE);
		if (!n || op_add(n, s))
			goto fail;
		t->total_ns += s->self_ns;
	}
	sum_up(&t->top);
	free(sorted);
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
