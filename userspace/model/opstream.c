/* opstream.c - op rows from a stream of enter/exit records (opstream.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "opstream.h"
#include "oprec.h"

#define MAX_DEPTH TBPF_INPROC_STACK

struct frame {
	uint32_t op_id, stack;
	uint64_t start, child_ns;
};

struct thread {
	uint32_t pid, tid, depth;
	struct frame f[MAX_DEPTH];
};

struct opstream {
	struct thread **t;
	size_t nt, ct, last;
	struct opstream_row *rows;
	size_t nrows, crows;
	uint32_t *index;        /* open addressing: row + 1 */
	size_t nindex;
};

struct opstream *opstream_new(void)
{
	return calloc(1, sizeof(struct opstream));
}

void opstream_free(struct opstream *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nt; i++)
		free(s->t[i]);
	free(s->t);
	free(s->rows);
	free(s->index);
	free(s);
}

unsigned opstream_bucket(uint64_t ns)
{
	unsigned bits = 0;
	uint64_t v = ns >> (TBPF_HIST_MIN_SHIFT - 1);

	while (v) {
		bits++;
		v >>= 1;
	}
	bits = bits > 1 ? bits - 1 : 0;
	return bits < TBPF_HIST_BUCKETS - 1 ? bits : TBPF_HIST_BUCKETS - 1;
}

static struct thread *thread_of(struct opstream *s, uint32_t pid, uint32_t tid, int create)
{
	struct thread *t;

	if (s->last < s->nt && s->t[s->last]->tid == tid && s->t[s->last]->pid == pid)
		return s->t[s->last];
	for (size_t i = 0; i < s->nt; i++)
		if (s->t[i]->tid == tid && s->t[i]->pid == pid) {
			s->last = i;
			return s->t[i];
		}
	if (!create || GROW(s->t, s->nt, s->ct, 8) || !(t = calloc(1, sizeof(*t))))
		return NULL;
	t->pid = pid;
	t->tid = tid;
	s->last = s->nt;
	s->t[s->nt++] = t;
	return t;
}

static size_t slot(uint32_t pid, uint32_t op_id, uint32_t stack, size_t n)
{
	uint64_t h = (((uint64_t)pid << 32 | op_id) ^ (uint64_t)stack << 17) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 17) & (n - 1);
}

static int reindex(struct opstream *s, size_t n)
{
	uint32_t *v = calloc(n, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t r = 0; r < s->nrows; r++) {
		size_t i = slot(s->rows[r].pid, s->rows[r].op_id, s->rows[r].stack_id, n);

		while (v[i])
			i = (i + 1) & (n - 1);
		v[i] = (uint32_t)r + 1;
	}
	free(s->index);
	s->index = v;
	s->nindex = n;
	return 0;
}

static struct opstream_row *row_of(struct opstream *s, uint32_t pid, uint32_t op_id,
				   uint32_t stack)
{
	size_t i;

	if (2 * (s->nrows + 1) > s->nindex && reindex(s, s->nindex ? 2 * s->nindex : 256))
		return NULL;
	for (i = slot(pid, op_id, stack, s->nindex); s->index[i]; i = (i + 1) & (s->nindex - 1)) {
		struct opstream_row *r = &s->rows[s->index[i] - 1];

		if (r->pid == pid && r->op_id == op_id && r->stack_id == stack)
			return r;
	}
	if (GROW(s->rows, s->nrows, s->crows, 64))
		return NULL;
	memset(&s->rows[s->nrows], 0, sizeof(s->rows[0]));
	s->rows[s->nrows].pid = pid;
	s->rows[s->nrows].op_id = op_id;
	s->rows[s->nrows].stack_id = stack;
	s->index[i] = (uint32_t)++s->nrows;
	return &s->rows[s->nrows - 1];
}

static int on_exit_rec(struct opstream *s, struct thread *t, const struct rec_op *r)
{
	unsigned d = r->depth;
	struct frame *f;
	struct opstream_row *row;
	uint64_t dur, self;

	if (d >= t->depth || !r->op_id || t->f[d].op_id != r->op_id)
		return 0;   /* its enter was not seen (before the attach) */
	f = &t->f[d];
	dur = r->h.ts_ns > f->start ? r->h.ts_ns - f->start : 0;
	self = dur > f->child_ns ? dur - f->child_ns : 0;
	t->depth = d;   /* frames above it ended elsewhere: dropped */
	if (d)
		t->f[d - 1].child_ns += dur;
	if (!(row = row_of(s, t->pid, r->op_id, f->stack)))
		return -ENOMEM;
	row->calls++;
	row->total_ns += dur;
	row->self_ns += self;
	if (dur > row->max_ns)
		row->max_ns = dur;
	row->buckets[opstream_bucket(dur)]++;
	return 0;
}

int opstream_add(struct opstream *s, const struct rec_op *r)
{
	enum ev_kind k = rec_kind(&r->h);
	struct thread *t;

	if (k != EV_OP_ENTER && k != EV_OP_EXIT)
		return 0;
	t = thread_of(s, r->pid, r->h.tid, k == EV_OP_ENTER);
	if (!t)
		return k == EV_OP_ENTER ? -ENOMEM : 0;
	if (k == EV_OP_EXIT)
		return on_exit_rec(s, t, r);
	if (r->depth >= MAX_DEPTH)
		return 0;
	/* frames below it that began before the records did: unknown (op 0,
	 * never matched); frames at or above it ended unseen */
	for (; t->depth < r->depth; t->depth++)
		t->f[t->depth] = (struct frame){ 0 };
	t->depth = r->depth;
	t->f[t->depth++] = (struct frame){ .op_id = r->op_id, .stack = r->stack_id,
					   .start = r->h.ts_ns };
	return 0;
}

struct opstream_row *opstream_take(struct opstream *s, size_t *n)
{
	struct opstream_row *v = s->rows;

	*n = s->nrows;
	s->rows = NULL;
	s->nrows = s->crows = 0;
	if (s->index)
		memset(s->index, 0, s->nindex * sizeof(*s->index));
	if (!*n) {
		free(v);
		return NULL;
	}
	return v;
}

void opstream_forget_pid(struct opstream *s, uint32_t pid)
{
	size_t k = 0;

	for (size_t i = 0; i < s->nt; i++) {
		if (s->t[i]->pid == pid)
			free(s->t[i]);
		else
			s->t[k++] = s->t[i];
	}
	s->nt = k;
	s->last = 0;
}
