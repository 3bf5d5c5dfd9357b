/* bwstack.c - model stage: backward ops' Source Location (see bwstack.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "tbpf_abi.h"
#include "bwstack.h"
#include "grow.h"

#define SEQ_EMPTY INT64_MIN

/* The forward stacks of one forward thread: a window of sequence numbers
 * (direct-mapped: a thread's numbers only grow, so a slot taken by a
 * larger number held one at least BWSTACK_WINDOW older), and the events
 * without one (-1). */
struct fline {
	uint32_t pid;
	uint64_t fthread;
	bool neg_set;
	uint32_t neg_stack;
	int64_t *seq;
	uint32_t *stack;
};

struct bscope {
	unsigned depth;
	uint32_t fwd;
	bool found;
};

struct tstate {
	uint32_t pid, tid;
	bool pend;
	uint64_t p_fthread;
	int64_t p_seq;
	unsigned n;
	struct bscope open[BWSTACK_NEST];
};

struct bwstack {
	struct fline *lines;
	size_t nlines, caplines;
	struct tstate *ts;
	size_t nts, capts;
	uint64_t *dset;        /* pid << 32 | derived id, open addressing */
	size_t ndset, capdset;
	uint64_t lost;
};

struct bwstack *bwstack_new(void)
{
	return calloc(1, sizeof(struct bwstack));
}

void bwstack_free(struct bwstack *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nlines; i++) {
		free(b->lines[i].seq);
		free(b->lines[i].stack);
	}
	free(b->lines);
	free(b->ts);
	free(b->dset);
	free(b);
}

uint64_t bwstack_lost(const struct bwstack *b)
{
	return b->lost;
}

static struct fline *line_find(const struct bwstack *b, uint32_t pid, uint64_t fthread)
{
	for (size_t i = 0; i < b->nlines; i++)
		if (b->lines[i].pid == pid && b->lines[i].fthread == fthread)
			return &b->lines[i];
	return NULL;
}

static struct fline *line_get(struct bwstack *b, uint32_t pid, uint64_t fthread)
{
	struct fline *l = line_find(b, pid, fthread), n = { .pid = pid, .fthread = fthread };
	size_t per_pid = 0;

	if (l)
		return l;
	for (size_t i = 0; i < b->nlines; i++)
		per_pid += b->lines[i].pid == pid;
	if (per_pid >= BWSTACK_THREADS)
		return NULL;
	n.seq = malloc(BWSTACK_WINDOW * sizeof(*n.seq));
	n.stack = calloc(BWSTACK_WINDOW, sizeof(*n.stack));
	if (!n.seq || !n.stack || GROW(b->lines, b->nlines, b->caplines, 4)) {
		free(n.seq);
		free(n.stack);
		return NULL;
	}
	for (size_t i = 0; i < BWSTACK_WINDOW; i++)
		n.seq[i] = SEQ_EMPTY;
	b->lines[b->nlines] = n;
	return &b->lines[b->nlines++];
}

void bwstack_fwd(struct bwstack *b, uint32_t pid, uint64_t fthread, int64_t seq, uint32_t stack)
{
	struct fline *l = line_get(b, pid, fthread);
	size_t k;

	if (!l)
		return;
	if (seq < 0) {
		if (!l->neg_set) {
			l->neg_set = true;
			l->neg_stack = stack;
		}
		return;
	}
	k = (uint64_t)seq & (BWSTACK_WINDOW - 1);
	if (l->seq[k] == seq)
		return;   /* the first event of the key keeps it */
	l->seq[k] = seq;
	l->stack[k] = stack;
}

/* 1 found, 0 no forward event, -1 not kept (window, thread table) */
static int lookup(const struct bwstack *b, uint32_t pid, uint64_t fthread, int64_t seq,
		  uint32_t *stack)
{
	const struct fline *l = fthread ? line_find(b, pid, fthread) : NULL;
	size_t k;

	if (!l)
		return 0;
	if (seq < 0) {
		*stack = l->neg_stack;
		return l->neg_set;
	}
	k = (uint64_t)seq & (BWSTACK_WINDOW - 1);
	if (l->seq[k] == seq) {
		*stack = l->stack[k];
		return 1;
	}
	return l->seq[k] > seq ? -1 : 0;
}

bool bwstack_lookup(const struct bwstack *b, uint32_t pid, uint64_t fthread, int64_t seq,
		    uint32_t *stack)
{
	return lookup(b, pid, fthread, seq, stack) == 1;
}

static struct tstate *ts_get(struct bwstack *b, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < b->nts; i++)
		if (b->ts[i].pid == pid && b->ts[i].tid == tid)
			return &b->ts[i];
	if (GROW(b->ts, b->nts, b->capts, 8))
		return NULL;
	memset(&b->ts[b->nts], 0, sizeof(b->ts[0]));
	b->ts[b->nts].pid = pid;
	b->ts[b->nts].tid = tid;
	return &b->ts[b->nts++];
}

void bwstack_bwd(struct bwstack *b, uint32_t pid, uint32_t tid, uint64_t fthread, int64_t seq)
{
	struct tstate *t = ts_get(b, pid, tid);

	if (!t)
		return;
	t->pend = true;
	/* Kineto's fwdThreadId() is 0 for an event without a sequence
	 * number (AccumulateGrad): no forward event has thread 0 */
	t->p_fthread = seq >= 0 ? fthread : 0;
	t->p_seq = seq;
}

uint32_t bwstack_derive_id(uint32_t own, uint32_t fwd, bool found)
{
	return tbpf_bw_derive(own, fwd, found);
}

/* true when key was not in the set (and is now) */
static bool dset_mark(struct bwstack *b, uint64_t key)
{
	size_t i;

	if (2 * (b->ndset + 1) > b->capdset) {
		size_t cap = b->capdset ? 2 * b->capdset : 256;
		uint64_t *v = calloc(cap, sizeof(*v));

		if (!v)
			return false;
		for (size_t k = 0; k < b->capdset; k++)
			if (b->dset[k]) {
				for (i = b->dset[k] & (cap - 1); v[i]; i = (i + 1) & (cap - 1))
					;
				v[i] = b->dset[k];
			}
		free(b->dset);
		b->dset = v;
		b->capdset = cap;
	}
	for (i = (key ^ key >> 29) & (b->capdset - 1); b->dset[i]; i = (i + 1) & (b->capdset - 1))
		if (b->dset[i] == key)
			return false;
	b->dset[i] = key;
	b->ndset++;
	return true;
}

static void pop_to(struct tstate *t, unsigned depth)
{
	while (t->n && t->open[t->n - 1].depth >= depth)
		t->n--;
}

uint32_t bwstack_enter(struct bwstack *b, uint32_t pid, uint32_t tid, unsigned depth,
		       uint32_t stack, bool *fresh, struct bwstack_derived *d)
{
	struct tstate *t = ts_get(b, pid, tid);
	const struct bscope *top;
	uint32_t id;

	*fresh = false;
	if (!t)
		return stack;
	pop_to(t, depth);   /* scopes whose end was not seen */
	if (t->pend) {
		struct bscope s = { .depth = depth };
		int r = lookup(b, pid, t->p_fthread, t->p_seq, &s.fwd);

		t->pend = false;
		s.found = r == 1;
		if (!s.found)
			s.fwd = 0;
		b->lost += r < 0;
		if (t->n < BWSTACK_NEST)
			t->open[t->n++] = s;
	}
	if (!t->n)
		return stack;
	top = &t->open[t->n - 1];
	id = bwstack_derive_id(stack, top->fwd, top->found);
	if (dset_mark(b, (uint64_t)pid << 32 | id)) {
		*fresh = true;
		*d = (struct bwstack_derived){ .id = id, .own = stack, .fwd = top->fwd,
					       .found = top->found };
	}
	return id;
}

void bwstack_exit(struct bwstack *b, uint32_t pid, uint32_t tid, unsigned depth)
{
	for (size_t i = 0; i < b->nts; i++)
		if (b->ts[i].pid == pid && b->ts[i].tid == tid) {
			pop_to(&b->ts[i], depth);
			return;
		}
}
