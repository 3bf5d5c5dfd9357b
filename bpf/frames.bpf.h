/* frames.bpf.h - probe stage: closing op frames.  pop_frame ends the top
 * frame of a thread's op stack (self and total time, torch.profiler's
 * folding of a same-name only child, memory columns, row, histogram,
 * REC_OP_EXIT); pop_below and pop_returned close every frame that has
 * returned or unwound, one bpf_loop() step a frame.  rows_make makes the
 * rows a close will update at the entry (rows_early).
 *
 * Included by tbpf.bpf.c after common.bpf.h, hist.bpf.h and bwstack.bpf.h.
 */
#ifndef TBPF_FRAMES_BPF_H
#define TBPF_FRAMES_BPF_H

/* 1 in sessions that may infer exits (user space sets it with the sample
 * and switch programs): an op or scope entry makes the rows its close
 * will update.  Those programs close frames with interrupts off, where a
 * run-time allocated map (BPF_F_NO_PREALLOC) takes a new element from a
 * per-CPU cache of 1-3 per-CPU values that only irq_work refills: a burst
 * of new rows there failed and lost ops (test_infer_bound,
 * test_attach_race, test_infer_burst).  An entry runs in an ordinary
 * uprobe context and makes at most one row per map, so the maps need no
 * preallocation (docs/benchmark.md, *tbpf's own memory*). */
const volatile __u32 rows_early = 0;

static __always_inline void rows_make(struct tbpf_thread *t, __u32 pid, __u32 op_id,
				      __u64 stack_id, __u64 shape_id)
{
	struct tbpf_opkey k = { .pid = pid, .op_id = op_id, .stack_id = stack_id,
				.shape_id = shape_id };
	__u64 h = (op_id * 0x9e3779b97f4a7c15ULL) ^ (stack_id * 0xc2b2ae3d27d4eb4fULL) ^
		  (shape_id * 0x165667b19e3779f9ULL);
	__u32 i = (h >> 59) & (TBPF_ROWSEEN_N - 1);

	if (!rows_early)
		return;
	h |= 1;
	if (t->rowseen[i] == h)
		return;
	/* full: counted at the close */
	if (opstat_row(&k) && (!hist_on || hist_row(pid, op_id)))
		t->rowseen[i] = h;
}

/* Does closing f need no new row (a skip frame updates none)? */
static __always_inline bool rows_there(const struct tbpf_thread *t, const struct tbpf_frame *f)
{
	struct tbpf_opkey k = { .pid = t->pid, .op_id = f->op_id, .stack_id = f->pystack,
				.shape_id = f->shape };
	struct tbpf_histkey hk = { .pid = t->pid, .op_id = f->op_id };

	if (f->flags & OPF_SKIP)
		return true;
	return bpf_map_lookup_elem(&opstats, &k) &&
	       (!hist_on || bpf_map_lookup_elem(&ophist, &hk));
}

static __always_inline void frame_mem_zero(struct tbpf_frame *f)
{
	for (int i = 0; i < MEM_DEV_N; i++) {
		f->mem_self[i] = 0;
		f->mem_total[i] = 0;
		f->dup_mem_self[i] = 0;
		f->dup_mem_total[i] = 0;
	}
}

/* Close the top frame at time `now`; flags say how the exit was seen. */
/* The nearest counted (non-skip) frame below index d, or -1. */
static __always_inline int counted_parent(struct tbpf_thread *t, __u32 d)
{
	for (int k = 0; k < 4; k++) {
		__u32 i;

		if (d == 0)
			return -1;
		d -= 1;
		i = d & (TBPF_MAX_DEPTH - 1);
		if (!(t->frames[i].flags & OPF_SKIP))
			return (int)i;
	}
	return -1;
}

static __always_inline void stat_undo(__u32 pid, __u32 op_id, __u64 stack_id, __u64 shape_id,
				      __u64 self, __u64 total, const struct tbpf_frame *f)
{
	struct tbpf_opkey k = { .pid = pid, .op_id = op_id, .stack_id = stack_id,
				.shape_id = shape_id };
	struct tbpf_opstat *s = bpf_map_lookup_elem(&opstats, &k);

	/* per-CPU slots may wrap below zero; their sum is right */
	if (s) {
		s->folded += 1;
		s->self_ns -= self;
		s->total_ns -= total;
		if (tbpf_mode & TBPF_MODE_MEMORY) {
			for (int i = 0; i < MEM_DEV_N; i++) {
				s->mem_self[i] -= f->dup_mem_self[i];
				s->mem_total[i] -= f->dup_mem_total[i];
			}
		}
	}
}

/* A transparent (OPF_SKIP) frame f ends: its nested ops are its parent
 * p's children; its own time is p's self time (and its own bytes p's). */
static __always_inline void skip_fold(struct tbpf_frame *p, const struct tbpf_frame *f)
{
	p->child_ns += f->child_ns;
	if (tbpf_mode & TBPF_MODE_MEMORY) {
		for (int i = 0; i < MEM_DEV_N; i++) {
			p->mem_self[i] += f->mem_self[i];
			p->mem_total[i] += f->mem_total[i];
		}
	}
}

static __always_inline void pop_frame(struct tbpf_thread *t, __u32 tid, __u64 now, __u32 flags)
{
	__u32 d = t->depth, pi, fi;
	struct tbpf_frame *f;
	__u64 dur, self, child, pystack;
	__u32 op_id, fflags;
	int cp;

	if (d == 0 || d > TBPF_MAX_DEPTH)
		return;
	d -= 1;
	fi = d & (TBPF_MAX_DEPTH - 1);
	f = &t->frames[fi];
	dur = now > f->start_ns ? now - f->start_ns : 0;
	child = f->child_ns;
	op_id = f->op_id;
	fflags = f->flags;
	t->depth = d;
	pi = (d - 1) & (TBPF_MAX_DEPTH - 1);
	if (fflags & OPF_SKIP) {
		if (d > 0)
			skip_fold(&t->frames[pi], f);
		return;
	}
	self = dur > child ? dur - child : 0;
	pystack = f->pystack;
#ifdef HAVE_BWSTACK
	if (fflags & (OPF_BWNODE | OPF_BWPEND))
		bw_frame_exit(t, f);
#endif
	/* torch.profiler drops a child that has its parent's name and is
	 * its only child (EventList._remove_dup_nodes): fold it back in */
	if (f->nchild == 1 && f->dup_op) {
		stat_undo(t->pid, f->dup_op, pystack, f->dup_shape, f->dup_self, f->dup_total, f);
		self += f->dup_self;
		if (tbpf_mode & TBPF_MODE_MEMORY) {
			for (int i = 0; i < MEM_DEV_N; i++)
				f->mem_self[i] += f->dup_mem_self[i];
		}
	}
	if (d > 0) {
		t->frames[pi].child_ns += dur;
		if (tbpf_mode & TBPF_MODE_MEMORY) {
			for (int i = 0; i < MEM_DEV_N; i++)
				t->frames[pi].mem_total[i] += f->mem_total[i];
		}
	}
	cp = counted_parent(t, d);
	if (cp >= 0) {
		struct tbpf_frame *p = &t->frames[cp & (TBPF_MAX_DEPTH - 1)];

		p->nchild++;
		if (p->nchild == 1 && p->name_id && p->name_id == f->name_id) {
			p->dup_op = op_id;
			p->dup_self = self;
			p->dup_total = dur;
			p->dup_shape = f->shape;
			if (tbpf_mode & TBPF_MODE_MEMORY) {
				for (int i = 0; i < MEM_DEV_N; i++) {
					p->dup_mem_self[i] = f->mem_self[i];
					p->dup_mem_total[i] = f->mem_total[i];
				}
			}
		}
	}
	if (t->vdepth)
		t->vdepth--;
	stat_add(t->pid, op_id, pystack, f->shape, self, dur, flags, f);
#ifdef HAVE_HIST
	hist_add(t->pid, op_id, dur);
#endif
	emit_op(REC_OP_EXIT, tid, now, t->pid, op_id, t->vdepth,
		flags | (fflags & (OPF_REDISPATCH | OPF_SCOPE | OPF_USER)), (__u32)pystack);
	/* back to the enclosing frame's stack (a scope's ops have their own) */
	if (d > 0)
		t->pystack_id = t->frames[pi].pystack;
	if (flags & OPF_UNWOUND)
		cnt_add(CNT_UNWIND_POPS, 1);
	else if (flags & OPF_INFERRED)
		cnt_add(CNT_STALE_POPS, 1);
}

/* What a bpf_loop() step of pop_below / pop_returned / scope_close works
 * on. */
struct pop_ctx {
	struct tbpf_thread *t;
	__u64 sp;         /* pop_below: the limit; pop_returned: the stack
			   * pointer; scope_close: the frames above the scope */
	__u64 now;
	__u32 tid, flags; /* pop_returned: POP_NO_NEW_ROWS or 0 */
};

/* pop_returned from a program that cannot make rows (interrupts off):
 * a frame whose rows are missing stays open (CNT_SAMPLE_DEFERRED) for the
 * thread's next op probe, which closes it as returned. */
#define POP_NO_NEW_ROWS 1

/* The top frame, when its return slot is at or below `limit`. */
static __always_inline struct tbpf_frame *top_at_or_below(struct tbpf_thread *t, __u64 limit)
{
	__u32 d = t->depth;
	struct tbpf_frame *f;

	if (d == 0 || d > TBPF_MAX_DEPTH)
		return NULL;
	f = &t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)];
	return f->sp <= limit ? f : NULL;
}

/* One frame per bpf_loop() step: pop_frame is verified once, not once per
 * depth.  Inlined TBPF_MAX_DEPTH times it was most of the BPF load time
 * (op entry alone 355,050 verified instructions, 0.6 s), and
 * with the memory columns and the histograms op entry passed the
 * verifier's 1M limit. */
static long pop_below_step(__u32 i, void *ctx)
{
	struct pop_ctx *c = ctx;

	if (!c->t || !top_at_or_below(c->t, c->sp))
		return 1;
	pop_frame(c->t, c->tid, c->now, c->flags);
	return 0;
}

/* Close every frame whose return slot is at or below `limit`: the thread's
 * stack pointer has moved above it, so that call has returned or unwound.
 * The usual case, nothing to close, is decided here without the loop. */
static __always_inline void pop_below(struct tbpf_thread *t, __u32 tid, __u64 limit,
				      __u64 now, __u32 flags)
{
	struct pop_ctx c = { .t = t, .sp = limit, .now = now, .tid = tid, .flags = flags };

	if (top_at_or_below(t, limit))
		bpf_loop(TBPF_MAX_DEPTH, pop_below_step, &c, 0);
}

/* Infer mode (entry probes only): close the innermost frames that have
 * returned although the stack pointer rule cannot tell - the caller went
 * on to deeper calls that reuse the returned op's stack.  Such a frame's
 * return slot no longer holds its return address; a live frame's does,
 * since nothing rewrites return addresses without return probes.  Frames
 * whose slot lies below `sp` (the thread's stack pointer now) have
 * returned too. */
static long pop_returned_step(__u32 i, void *ctx)
{
	struct pop_ctx *c = ctx;
	struct tbpf_thread *t = c->t;
	struct tbpf_frame *f;
	__u64 v = 0;
	__u32 d;

	if (!t)
		return 1;
	d = t->depth;
	if (d == 0 || d > TBPF_MAX_DEPTH)
		return 1;
	f = &t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)];
	if (f->sp >= c->sp && ((f->flags & OPF_HIJACKED) ||
			       bpf_probe_read_user(&v, sizeof(v), (void *)f->sp) || v == f->ra))
		return 1;
	if ((c->flags & POP_NO_NEW_ROWS) && !rows_there(t, f)) {
		cnt_add(CNT_SAMPLE_DEFERRED, 1);
		return 1;
	}
	pop_frame(t, c->tid, c->now, OPF_INFERRED);
	return 0;
}

static __always_inline void pop_returned(struct tbpf_thread *t, __u32 tid, __u64 sp, __u64 now,
					 __u32 how)
{
	struct pop_ctx c = { .t = t, .sp = sp, .now = now, .tid = tid, .flags = how };

	bpf_loop(TBPF_MAX_DEPTH, pop_returned_step, &c, 0);
}

#endif /* TBPF_FRAMES_BPF_H */
