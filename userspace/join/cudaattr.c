/* cudaattr.c - join stage: CUDA host records to the in-process op open on
 * their thread (see cudaattr.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "cudaattr.h"
#include "cudarec.h"
#include "oprec.h"

union cuda_rec {
	struct rec_hdr h;
	struct rec_launch l;
	struct rec_memop m;
	struct rec_sync s;
	struct rec_alloc a;
};

struct held {
	uint64_t key;    /* the call's midpoint */
	uint32_t gen;    /* marks before it arrived */
	uint32_t size;
	union cuda_rec r;
};

struct frame {
	uint32_t op_id;
	uint32_t stack_id;
};

struct thread {
	uint64_t key;         /* pid << 32 | tid; 0 = free slot */
	uint32_t n;           /* frames open */
	uint32_t over;        /* enters beyond CUDAATTR_DEPTH still open */
	uint32_t outer;       /* stack id of the outermost op */
	struct frame f[CUDAATTR_DEPTH];
	struct held *pend;    /* by key; pend[head..npend) waiting */
	size_t head, npend, cap;
};

struct cudaattr {
	cudaattr_emit_fn emit;
	void *ctx;
	struct thread **slots;   /* open addressing, power of 2 */
	size_t nslots, nthreads;
	struct thread *last;     /* the last thread looked up */
	uint32_t gen;
	uint32_t begin;          /* the mark of the last cudaattr_begin */
	struct cudaattr_stats st;
};

struct cudaattr *cudaattr_new(cudaattr_emit_fn emit, void *ctx)
{
	struct cudaattr *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->emit = emit;
	a->ctx = ctx;
	a->nslots = 64;
	a->slots = calloc(a->nslots, sizeof(*a->slots));
	if (!a->slots) {
		free(a);
		return NULL;
	}
	return a;
}

static size_t slot_of(uint64_t key, size_t nslots)
{
	key ^= key >> 29;
	key *= 0xbf58476d1ce4e5b9ull;
	key ^= key >> 32;
	return (size_t)key & (nslots - 1);
}

static int grow_slots(struct cudaattr *a)
{
	size_t n = a->nslots * 2;
	struct thread **v = calloc(n, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < a->nslots; i++) {
		struct thread *t = a->slots[i];
		size_t j;

		if (!t)
			continue;
		for (j = slot_of(t->key, n); v[j]; j = (j + 1) & (n - 1))
			;
		v[j] = t;
	}
	free(a->slots);
	a->slots = v;
	a->nslots = n;
	return 0;
}

/* The thread (pid, tid), made when create; NULL if absent or no memory. */
static struct thread *thread_of(struct cudaattr *a, uint32_t pid, uint32_t tid, bool create)
{
	uint64_t key = (uint64_t)pid << 32 | tid;
	size_t j;

	if (a->last && a->last->key == key)
		return a->last;
	for (j = slot_of(key, a->nslots); a->slots[j]; j = (j + 1) & (a->nslots - 1))
		if (a->slots[j]->key == key)
			return a->last = a->slots[j];
	if (!create)
		return NULL;
	if ((a->nthreads + 1) * 2 > a->nslots) {
		if (grow_slots(a))
			return NULL;
		for (j = slot_of(key, a->nslots); a->slots[j]; j = (j + 1) & (a->nslots - 1))
			;
	}
	struct thread *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->key = key;
	a->slots[j] = t;
	a->nthreads++;
	return a->last = t;
}

int cudaattr_is_cuda(const struct rec_hdr *h, size_t size)
{
	size_t need;

	if (size < sizeof(*h) || !(need = cuda_rec_min_size(h)))
		return 0;
	return size >= need && h->size >= need && h->size <= size &&
	       h->size <= sizeof(union cuda_rec);
}

int cudaattr_cuda(struct cudaattr *a, const struct rec_hdr *h, size_t size)
{
	struct held x = { .gen = a->gen };
	struct thread *t;
	size_t i;

	if (!cudaattr_is_cuda(h, size)) {
		a->st.bad++;
		return 0;
	}
	memcpy(&x.r, h, h->size);
	x.size = h->size;
	x.key = h->ts_ns + cuda_rec_return_ns(&x.r.h) / 2;
	t = thread_of(a, x.r.l.pid, h->tid, true);
	if (!t)
		return -ENOMEM;
	if (t->head && t->head == t->npend)
		t->head = t->npend = 0;
	if (t->npend == t->cap) {
		if (t->head) {   /* room at the front: move the waiting ones down */
			memmove(t->pend, t->pend + t->head, (t->npend - t->head) * sizeof(*t->pend));
			t->npend -= t->head;
			t->head = 0;
		} else {
			size_t cap = t->cap ? t->cap * 2 : 16;
			struct held *v = realloc(t->pend, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			t->pend = v;
			t->cap = cap;
		}
	}
	/* BPF writes a record at the call's return: nearly in key order */
	for (i = t->npend; i > t->head && t->pend[i - 1].key > x.key; i--)
		t->pend[i] = t->pend[i - 1];
	t->pend[i] = x;
	t->npend++;
	a->st.held++;
	return 0;
}

void cudaattr_mark(struct cudaattr *a)
{
	a->gen++;
}

void cudaattr_begin(struct cudaattr *a)
{
	a->begin = ++a->gen;
}

/* Emit t's first waiting record under the op on top of t. */
static int emit_front(struct cudaattr *a, struct thread *t)
{
	struct held *x = &t->pend[t->head++];

	if (t->n) {
		const struct frame *top = &t->f[t->n - 1];
		uint32_t stack = top->stack_id ? top->stack_id : t->outer;

		cuda_rec_set_op(&x->r.h, top->op_id, stack, t->n);
		a->st.in_op++;
	} else {
		a->st.no_op++;
	}
	return a->emit(a->ctx, &x->r.h);
}

/* t's waiting records: those before key (all: UINT64_MAX) that arrived
 * before mark gen (all: UINT32_MAX). */
static int emit_until(struct cudaattr *a, struct thread *t, uint64_t key, uint32_t gen)
{
	int err = 0;

	while (!err && t->head < t->npend && t->pend[t->head].key < key &&
	       t->pend[t->head].gen < gen)
		err = emit_front(a, t);
	return err;
}

static void apply_enter(struct cudaattr *a, struct thread *t, const struct rec_op *r)
{
	while (t->n > r->depth)   /* frames whose ends were lost */
		t->n--;
	if (t->n >= CUDAATTR_DEPTH) {
		t->over++;
		a->st.too_deep++;
		return;
	}
	if (!t->n)
		t->outer = r->stack_id;
	t->f[t->n++] = (struct frame){ r->op_id, r->stack_id };
}

static void apply_exit(struct thread *t, const struct rec_op *r)
{
	uint32_t i;

	if (t->over) {   /* LIFO: the deepest (untracked) enters end first */
		t->over--;
		return;
	}
	for (i = t->n; i > 0 && t->f[i - 1].op_id != r->op_id; i--)
		;
	if (i)   /* an end without its start changes nothing */
		t->n = i - 1;
}

int cudaattr_op(struct cudaattr *a, const struct rec_op *r)
{
	struct thread *t;
	int err;

	if (!rec_is_op(&r->h))
		return 0;
	t = thread_of(a, r->pid, r->h.tid, true);
	if (!t)
		return -ENOMEM;
	/* the records held at any mark: this op record is in a drain that
	 * read the head after they arrived (cudaattr.h) */
	err = emit_until(a, t, r->h.ts_ns, UINT32_MAX);
	if (err)
		return err;
	if (rec_is_op_enter(&r->h))
		apply_enter(a, t, r);
	else
		apply_exit(t, r);
	return 0;
}

int cudaattr_settled(struct cudaattr *a, uint32_t pid)
{
	int err = 0;

	for (size_t i = 0; !err && i < a->nslots; i++) {
		struct thread *t = a->slots[i];

		if (t && (uint32_t)(t->key >> 32) == pid)
			err = emit_until(a, t, UINT64_MAX, a->begin);
	}
	return err;
}

int cudaattr_flush(struct cudaattr *a, uint64_t end_ns)
{
	int err = 0;

	/* by time over every thread would be nicer to read; within a
	 * thread it is what counts (timeline order is per thread) */
	for (size_t i = 0; !err && i < a->nslots; i++) {
		struct thread *t = a->slots[i];

		if (!t)
			continue;
		err = emit_until(a, t, end_ns, UINT32_MAX);
		a->st.after_end += t->npend - t->head;
		t->head = t->npend;
	}
	return err;
}

void cudaattr_get_stats(const struct cudaattr *a, struct cudaattr_stats *st)
{
	*st = a->st;
}

void cudaattr_free(struct cudaattr *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nslots; i++) {
		if (a->slots[i]) {
			free(a->slots[i]->pend);
			free(a->slots[i]);
		}
	}
	free(a->slots);
	free(a);
}
