/* scopes.bpf.h - probe stage: record_function scopes (abi/scope.h): a
 * frame opened at at::RecordFunction's constructor (USER_SCOPE labels,
 * and FUNCTION scopes named by a pending stash: tbpf_scope_pend) and
 * closed at RecordFunction::end of the same object.
 *
 * Included by tbpf.bpf.c after ops.bpf.h.
 */
#ifndef TBPF_SCOPES_BPF_H
#define TBPF_SCOPES_BPF_H

/* The scope's name: the std::string the record_function entry points
 * (record_function_enter / _new, torch 1.13 .. 2.8) keep in r12 while
 * they construct the RecordFunction.  Accepted only when it reads as a
 * libstdc++ string: length 1.., the NUL exactly at its end.  Returns the
 * scope id, 0 when it is no such string. */
static __always_inline __u32 scope_read_name(struct pt_regs *ctx, struct tbpf_scope_name *n)
{
	__u64 str[2] = {};
	long len;

	if (bpf_probe_read_user(str, sizeof(str), (void *)ctx->r12))
		return 0;
	len = (long)str[1];
	if (len < 1 || len > 1 << 20)
		return 0;
	return scope_hash_name(str[0], len, n);
}

/* A FUNCTION-scope RecordFunction named by a pending stash of this thread
 * (tbpf_scope_pend), which is consumed; 0 when there is none for it. */
static __always_inline __u32 scope_pending_name(__u32 tid, __u32 pid, __u64 sp,
						 struct tbpf_scope_name *n)
{
	struct tbpf_thread *t = thread_get(tid, pid, false);
	__u64 ra = 0, p;
	__u32 kind;

	if (!t || !t->pend_kind)
		return 0;
	kind = t->pend_kind;
	p = t->pend_ptr;
	t->pend_kind = TBPF_PEND_NONE;
	/* constructed inside the stashing call, which is still running */
	if (sp >= t->pend_sp || bpf_probe_read_user(&ra, sizeof(ra), (void *)t->pend_sp) ||
	    ra != t->pend_ra)
		return 0;
	if (kind == TBPF_PEND_PYTYPE &&
	    bpf_probe_read_user(&p, sizeof(p), (void *)(p + 24)))   /* tp_name */
		return 0;
	return scope_hash_name(p, -1, n);
}

/* _pytorch_record_function_enter(const char *name) (torch._dynamo) and
 * THPFunction_apply(PyObject *cls, ...): the name of the RecordFunction
 * they are about to construct (with RecordScope::FUNCTION, which names it
 * only while a profiler callback is registered).  The cookie is the kind
 * (enum tbpf_pend_kind). */
SEC("uprobe")
int BPF_KPROBE(tbpf_scope_pend)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct tbpf_thread *t;
	__u64 sp = PT_REGS_SP(ctx), ra = 0;

	if (!pid_ok(pid))
		return 0;
	cnt_add(CNT_SCOPE_HITS, 1);
	t = thread_enter(tid, pid);
	if (!t || bpf_probe_read_user(&ra, sizeof(ra), (void *)sp))
		return 0;
	t->pend_kind = (__u32)bpf_get_attach_cookie(ctx);
	t->pend_ptr = PT_REGS_PARM1(ctx);
	t->pend_sp = sp;
	t->pend_ra = ra;
	return 0;
}

/* Open the scope `id` (named n) on the calling thread: a frame with no
 * return slot, closed by scope_close(key). */
static __always_inline int scope_open(struct pt_regs *ctx, __u32 pid, __u32 tid, __u64 now,
				      __u32 id, struct tbpf_scope_name *n, __u64 key, __u32 fl)
{
	struct tbpf_thread *t;
	struct tbpf_frame *f;
	__u64 sp;
	__u32 d;

	cnt_add(CNT_ENTRIES, 1);
	scope_name_note(pid, tid, now, id, n);
	t = thread_enter(tid, pid);
	if (!t)
		return 0;
	sp = PT_REGS_SP(ctx);
	/* as op_enter: a sample or switch-out of this thread keeps off
	 * frames being changed (it would close them a second time) */
	t->busy = 1;
	/* op frames at or below this slot have returned (infer mode) */
	pop_below(t, tid, sp, now, (tbpf_mode & TBPF_MODE_EXITS) ? OPF_UNWOUND : OPF_INFERRED);
	d = t->depth;
	if (d >= TBPF_MAX_DEPTH) {
		cnt_add(CNT_DEPTH_OVERFLOW, 1);
		t->busy = 0;
		return 0;
	}
	if (new_pystack(t, d))
		take_pystack(t, pid);
	f = &t->frames[d & (TBPF_MAX_DEPTH - 1)];
	f->start_ns = now;
	f->child_ns = 0;
	f->sp = ~0ULL;   /* no return slot: only its end closes it */
	f->ra = 0;
	f->op_id = id;
	f->flags = OPF_SCOPE | fl;
	f->name_id = 0;
	f->nchild = 0;
	f->dup_op = 0;
	f->pystack = t->pystack_id;
	f->scope = key;
	f->shape = 0;
	if (tbpf_mode & TBPF_MODE_MEMORY)
		frame_mem_zero(f);
	rows_make(t, pid, id, f->pystack, 0);
	t->depth = d + 1;
	emit_op(REC_OP_ENTER, tid, now, pid, id, t->vdepth, OPF_SCOPE | fl, (__u32)t->pystack_id);
	t->vdepth++;
	t->busy = 0;
	return 0;
}

/* Step i of closing a scope that has c->sp frames above it. */
static long pop_scope_step(__u32 i, void *ctx)
{
	struct pop_ctx *c = ctx;

	if (!c->t)
		return 1;
	pop_frame(c->t, c->tid, c->now, i < c->sp ? OPF_INFERRED : 0);
	return 0;
}

/* Return mode: the scope ends inside a transparent op that is still
 * running (profiler::_record_function_exit, called through torch.ops) and
 * sits right above it.  Swap the two, so the scope is closed on top and
 * the op stays for its own return; the scope's time then reaches the
 * scope's parent through the op's frame (skip_fold).  Needs the free
 * frame above the top as scratch. */
static __always_inline bool scope_under_live_skip(struct tbpf_thread *t)
{
	__u32 d = t->depth;
	struct tbpf_frame *r, *x, *tmp;

	if (d < 2 || d >= TBPF_MAX_DEPTH)
		return false;
	r = &t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)];
	x = &t->frames[(d - 2) & (TBPF_MAX_DEPTH - 1)];
	tmp = &t->frames[d & (TBPF_MAX_DEPTH - 1)];
	if (!(r->flags & OPF_SKIP) || !(r->flags & OPF_HIJACKED) || (r->flags & OPF_SCOPE))
		return false;
	__builtin_memcpy(tmp, r, sizeof(*tmp));
	__builtin_memcpy(r, x, sizeof(*r));
	__builtin_memcpy(x, tmp, sizeof(*x));
	return true;
}

/* Close the scope opened with `key` (and any frame left above it); no
 * such scope among the top 8 frames: nothing. */
static __always_inline int scope_close(__u32 pid, __u32 tid, __u64 key)
{
	struct tbpf_thread *t;
	__u64 now;
	int k = -1;

	t = thread_get(tid, pid, false);
	if (!t || t->depth == 0 || t->depth > TBPF_MAX_DEPTH)
		return 0;
	/* from the search on: a switch-out closing frames between it and
	 * the pops would make k wrong (and close frames twice) */
	t->busy = 1;
	for (int i = 0; i < 8; i++) {
		__u32 d = t->depth;
		struct tbpf_frame *f;

		if ((__u32)i >= d)
			break;
		f = &t->frames[(d - 1 - i) & (TBPF_MAX_DEPTH - 1)];
		if ((f->flags & OPF_SCOPE) && f->scope == key) {
			k = i;
			break;
		}
	}
	if (k < 0) {
		t->busy = 0;
		return 0;
	}
	now = bpf_ktime_get_ns();
	cnt_add(CNT_EXITS, 1);
	if (k == 1 && (tbpf_mode & TBPF_MODE_EXITS) && scope_under_live_skip(t))
		k = 0;
	{
		/* the k frames above it end unseen, then the scope itself */
		struct pop_ctx c = { .t = t, .sp = k, .now = now, .tid = tid };

		bpf_loop(k + 1, pop_scope_step, &c, 0);
		t->busy = 0;
	}
	return 0;
}

/* at::RecordFunction::RecordFunction(RecordScope): rdi = this, esi = scope.
 * USER_SCOPE: a record_function label (name in r12); FUNCTION: named by a
 * pending stash (tbpf_scope_pend), else not shown. */
SEC("uprobe")
int BPF_KPROBE(tbpf_scope_new)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid, zero = 0, id;
	__u32 scope = (__u32)PT_REGS_PARM2(ctx);
	struct tbpf_scope_name *n;

	if (!pid_ok(pid))
		return 0;
	cnt_add(CNT_SCOPE_HITS, 1);
	if ((scope != TBPF_RECORD_SCOPE_USER && scope != TBPF_RECORD_SCOPE_FUNCTION) ||
	    !pid_check(pid, true) || entries_off)
		return 0;
	n = bpf_map_lookup_elem(&scope_scratch, &zero);
	if (!n)
		return 0;
	if (scope == TBPF_RECORD_SCOPE_USER)
		id = scope_read_name(ctx, n);
	else
		id = scope_pending_name(tid, pid, PT_REGS_SP(ctx), n);
	if (!id)
		return 0;
	return scope_open(ctx, pid, tid, bpf_ktime_get_ns(), id, n, PT_REGS_PARM1(ctx),
			  scope == TBPF_RECORD_SCOPE_USER ? OPF_USER : 0);
}

/* at::RecordFunction::end(): rdi = this.  Closes the scope opened by that
 * RecordFunction (and any op frame left above it); the end() calls of every
 * other RecordFunction find no such frame. */
SEC("uprobe")
int BPF_KPROBE(tbpf_scope_end)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32;

	if (!pid_ok(pid))
		return 0;
	cnt_add(CNT_SCOPE_HITS, 1);
	return scope_close(pid, (__u32)pid_tgid, PT_REGS_PARM1(ctx));
}

#endif /* TBPF_SCOPES_BPF_H */
