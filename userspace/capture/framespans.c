/* framespans.c - trace stage: Python-function and nn.Module spans around op slices. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "framespans.h"
#include "grow.h"

struct fs_thread {
	uint32_t pid, tid;
	uint32_t n;                           /* open spans */
	const struct capture_frame **frames;  /* outermost first */
	uint64_t *begin;
	uint32_t cap;
	uint64_t last_end;                    /* end of the last outermost op */
	uint64_t stack_id;                    /* stack of the open spans */
};

struct fspans {
	const struct capture_meta *m;
	struct fspan_ops ops;
	void *ctx;
	struct fs_thread *th;
	size_t nth, cth;
	size_t last;                          /* index of the last thread used */
};

struct fspans *fspans_new(const struct capture_meta *m, const struct fspan_ops *ops, void *ctx)
{
	struct fspans *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return NULL;
	fs->m = m;
	fs->ops = *ops;
	fs->ctx = ctx;
	return fs;
}

void fspans_free(struct fspans *fs)
{
	if (!fs)
		return;
	for (size_t i = 0; i < fs->nth; i++) {
		free(fs->th[i].frames);
		free(fs->th[i].begin);
	}
	free(fs->th);
	free(fs);
}

char *fspan_frame_name(const struct capture_frame *f, char *buf, size_t len)
{
	if (f->kind == CF_PYTHON && f->file[0]) {
		const char *b = strrchr(f->file, '/');
		snprintf(buf, len, "%s:%s", b ? b + 1 : f->file, f->name);
	} else {
		snprintf(buf, len, "%s", f->name[0] ? f->name : "?");
	}
	return buf;
}

static struct fs_thread *thread_of(struct fspans *fs, uint32_t pid, uint32_t tid)
{
	/* few threads trace Python; the last one is usually the one asked for */
	if (fs->last < fs->nth && fs->th[fs->last].pid == pid && fs->th[fs->last].tid == tid)
		return &fs->th[fs->last];
	for (size_t i = 0; i < fs->nth; i++)
		if (fs->th[i].pid == pid && fs->th[i].tid == tid)
			return &fs->th[fs->last = i];
	if (GROW(fs->th, fs->nth, fs->cth, 8))
		return NULL;
	struct fs_thread *t = &fs->th[fs->nth];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	fs->last = fs->nth++;
	return t;
}

static bool same_frame(const struct capture_frame *a, const struct capture_frame *b)
{
	if (a == b)
		return true;
	/* strings are interned in the meta tables: pointer equality */
	if (a->kind != b->kind || a->name != b->name)
		return false;
	if (a->kind == CF_PYTHON)
		return a->file == b->file;
	return a->module_path == b->module_path;
}

static void close_to(struct fspans *fs, struct fs_thread *t, uint32_t keep)
{
	while (t->n > keep) {
		t->n--;
		struct fspan s = { t->pid, t->tid, t->n, t->frames[t->n], t->begin[t->n], t->last_end };
		if (fs->ops.close)
			fs->ops.close(fs->ctx, &s);
	}
}

int fspans_slice_begin(struct fspans *fs, const struct tl_slice *s)
{
	if (s->depth != 0)
		return 0;
	struct fs_thread *t = thread_of(fs, s->pid, s->tid);
	if (!t)
		return -ENOMEM;
	if (t->n && s->stack_id == t->stack_id)
		return 0;  /* same stack as the last op: the spans go on */
	t->stack_id = s->stack_id;
	const struct capture_stack *st = s->stack_id ? capture_meta_stack(fs->m, s->pid, s->stack_id) : NULL;
	uint32_t n = st ? st->nframes : 0;
	/* frames are stored innermost first: outermost is frames[n - 1] */
	uint32_t common = 0;
	while (common < t->n && common < n && same_frame(t->frames[common], &st->frames[n - 1 - common]))
		common++;
	close_to(fs, t, common);
	if (n > t->cap) {
		const struct capture_frame **nf = realloc(t->frames, n * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		t->frames = nf;
		uint64_t *nb = realloc(t->begin, n * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		t->begin = nb;
		t->cap = n;
	}
	for (; t->n < n; t->n++) {
		t->frames[t->n] = &st->frames[n - 1 - t->n];
		t->begin[t->n] = s->begin_ns;
		struct fspan sp = { t->pid, t->tid, t->n, t->frames[t->n], s->begin_ns, 0 };
		if (fs->ops.open)
			fs->ops.open(fs->ctx, &sp);
	}
	return 0;
}

void fspans_slice_end(struct fspans *fs, const struct tl_slice *s)
{
	if (s->depth != 0)
		return;
	struct fs_thread *t = thread_of(fs, s->pid, s->tid);
	if (t && s->end_ns > t->last_end)
		t->last_end = s->end_ns;
}

static int cmp_th(const void *a, const void *b)
{
	const struct fs_thread *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

void fspans_finish(struct fspans *fs)
{
	if (fs->nth)
		qsort(fs->th, fs->nth, sizeof(*fs->th), cmp_th);
	fs->last = 0;
	for (size_t i = 0; i < fs->nth; i++)
		close_to(fs, &fs->th[i], 0);
}
