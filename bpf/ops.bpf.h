/* ops.bpf.h - probe stage: op entry and exit on at::_ops::*::call and
 * ::redispatch (and the boxed, node and PyNode entries told apart by the
 * attach cookie): push a frame on the thread's op stack at entry (its
 * Python stack, input shapes, backward stack, early rows, REC_OP_ENTER)
 * and pop it at the return probe.  The programs themselves
 * (tbpf_op_entry, tbpf_op_exit) are in tbpf.bpf.c.
 *
 * Included by tbpf.bpf.c after frames.bpf.h, opnames.bpf.h, shapes.bpf.h
 * and pystack.bpf.h.
 */
#ifndef TBPF_OPS_BPF_H
#define TBPF_OPS_BPF_H

/* An op or scope entered at depth d gets its own Python stack when it is
 * the outermost counted frame or sits directly in a scope: the ops of a
 * record_function block keep their own module paths. */
static __always_inline bool new_pystack(struct tbpf_thread *t, __u32 d)
{
	int cp;

	if (t->vdepth == 0)
		return true;
	cp = counted_parent(t, d);
	return cp >= 0 && (t->frames[cp & (TBPF_MAX_DEPTH - 1)].flags & OPF_SCOPE);
}

static __always_inline void take_pystack(struct tbpf_thread *t, __u32 pid)
{
	t->pystack_id = 0;
#ifdef HAVE_PYSTACK
	if (tbpf_mode & TBPF_MODE_PYSTACK)
		t->pystack_id = pystack_capture(pid, t);
#endif
}

static __always_inline int op_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 cookie, now, sp, ra = 0;
	__u32 op_id, flags = 0, d, name_id;
	struct tbpf_thread *t;
	struct tbpf_frame *f;
	bool exits = tbpf_mode & TBPF_MODE_EXITS;

	if (!pid_check(pid, true))
		return 0;
	now = bpf_ktime_get_ns();
	cookie = bpf_get_attach_cookie(ctx);
	op_id = TBPF_COOKIE_OPID(cookie);
	name_id = TBPF_COOKIE_NAMEID(cookie);
	if (cookie & TBPF_COOKIE_NODE_EVAL)
		op_id = node_eval_id(pid, tid, now, PT_REGS_PARM3(ctx), op_id);
	if (cookie & TBPF_COOKIE_PYNODE) {
		struct tbpf_pynode *pn = bpf_map_lookup_elem(&py_nodes, &pid);

		/* variable_list PyNode::apply(variable_list&&): rdi is the
		 * returned vector, rsi `this`.  No layout or no object:
		 * transparent, like an unnamed boxed op */
		op_id = pn ? pynode_row(pn, pid, tid, now, PT_REGS_PARM2(ctx), false) : 0;
		if (!op_id)
			flags |= OPF_SKIP;
	}
	if (entries_off)
		flags |= OPF_SKIP;
	if (cookie & TBPF_COOKIE_BOXED) {
		struct tbpf_boxop bo = boxed_op(pid, PT_REGS_PARM1(ctx));

		op_id = bo.op_id;
		name_id = bo.name_id;
		/* an operator tbpf does not name (prim::, custom namespaces):
		 * transparent, its ops belong to the enclosing frame */
		if (!op_id)
			flags |= OPF_SKIP;
	}
	sp = PT_REGS_SP(ctx);
	cnt_add(CNT_ENTRIES, 1);
	t = thread_enter(tid, pid);
	if (!t)
		return 0;
	/* The return address: infer mode tells returned frames by it.  In
	 * return mode it is needed here only when a frame may share our slot
	 * (a tail call, or a frame an exception unwound); the guard takes the
	 * others from the kernel's own record (retaddr.bpf.h), which saves a
	 * user-memory read, about a third of this program, per op. */
	if (!exits || !ra_lazy || top_at_or_below(t, sp))
		bpf_probe_read_user(&ra, sizeof(ra), (void *)sp);
	if (exits) {
		flags |= OPF_HIJACKED;
		if (!pid_exits_live[pid & (TBPF_GEN_SLOTS - 1)])
			flags |= OPF_SKIP;
	}
	/* Frames at or below this slot are gone.  In return mode a frame
	 * sharing our slot is alive only if it tail-called us (its return
	 * address is already the uretprobe trampoline). */
	t->busy = 1;
	if (exits)
		pop_below(t, tid, (ra & ~0xfffULL) == tramp_page ? sp - 1 : sp, now, OPF_UNWOUND);
	else
		pop_returned(t, tid, sp + 1, now, 0);

	d = t->depth;
	if (d >= TBPF_MAX_DEPTH) {
		cnt_add(CNT_DEPTH_OVERFLOW, 1);
		t->busy = 0;
		return 0;
	}
	if (cookie & TBPF_COOKIE_REDISPATCH) {
		/* Dispatcher::redispatch never runs RecordFunction, so
		 * torch.profiler sees an op entered this way only on the
		 * boxed path, where no op is open yet (torch.ops.aten.X,
		 * TorchScript).  Nested redispatches - autograd ->
		 * ADInplaceOrView -> CPU of the same op, or a kernel handing
		 * work to another op's next dispatch key - are folded into
		 * the enclosing op. */
		flags |= OPF_REDISPATCH;
		if (d > 0)
			flags |= OPF_SKIP;
	}
	if (exits && (ra & ~0xfffULL) == tramp_page && d > 0)
		ra = t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)].ra; /* chained */

	if (!(flags & OPF_SKIP) && new_pystack(t, d))
		take_pystack(t, pid);
	f = &t->frames[d & (TBPF_MAX_DEPTH - 1)];
	f->pystack = t->pystack_id;
	f->scope = 0;
	f->start_ns = now;
	f->child_ns = 0;
	f->sp = sp;
	f->ra = ra;
	f->op_id = op_id;
	f->flags = flags;
	f->name_id = name_id;
	f->nchild = 0;
	f->dup_op = 0;
	f->shape = 0;
	if ((tbpf_mode & TBPF_MODE_SHAPES) && !(flags & OPF_SKIP) &&
	    !(cookie & (TBPF_COOKIE_BOXED | TBPF_COOKIE_PYNODE)))
		f->shape = shape_capture(ctx, pid, tid,
					 cookie & (0xffffffffULL | TBPF_COOKIE_REDISPATCH), now);
	if (tbpf_mode & TBPF_MODE_MEMORY)
		frame_mem_zero(f);
#ifdef HAVE_BWSTACK
	/* a backward node: it and its ops keyed by a derived stack */
	if ((tbpf_mode & TBPF_MODE_BWSTACK) && !(flags & OPF_SKIP) &&
	    (cookie & (TBPF_COOKIE_NODE | TBPF_COOKIE_PYNODE)))
		bw_node(t, f, pid, PT_REGS_PARM2(ctx));   /* apply: `this` in rsi */
#endif
	if (!(flags & OPF_SKIP))
		rows_make(t, pid, op_id, f->pystack, f->shape);
	t->depth = d + 1;
	if (!(flags & OPF_SKIP)) {
		emit_op_shape(REC_OP_ENTER, tid, now, pid, op_id, t->vdepth,
			      flags & OPF_REDISPATCH, (__u32)t->pystack_id, f->shape);
		t->vdepth++;
	}
	t->busy = 0;
#ifdef HAVE_BWSTACK
	/* a forward op (last: nothing is live across the call) */
	if ((tbpf_mode & TBPF_MODE_BWSTACK) && !(flags & OPF_SKIP) &&
	    !(cookie & (TBPF_COOKIE_NODE | TBPF_COOKIE_PYNODE | TBPF_COOKIE_NODE_EVAL |
			TBPF_COOKIE_NOTENSOR)))
		bw_forward(t, f, pid);
#endif
	return 0;
}

/* Return mode: `with record_function(...)` opens its scope inside a
 * transparent op (profiler::_record_function_enter[_new], called through
 * torch.ops), and the scope outlives that op.  At the op's return the
 * scope is on top with the op's frame under it: fold that frame into its
 * parent and move the scope down, so the scope's parent is the op's. */
static __always_inline bool drop_under_scope(struct tbpf_thread *t, __u64 slot)
{
	__u32 d = t->depth;
	struct tbpf_frame *x, *e;

	if (d < 2 || d > TBPF_MAX_DEPTH)
		return false;
	x = &t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)];
	e = &t->frames[(d - 2) & (TBPF_MAX_DEPTH - 1)];
	if (!(x->flags & OPF_SCOPE) || !(e->flags & OPF_SKIP) || e->sp != slot)
		return false;
	if (d > 2)
		skip_fold(&t->frames[(d - 3) & (TBPF_MAX_DEPTH - 1)], e);
	__builtin_memcpy(e, x, sizeof(*e));
	t->depth = d - 1;
	return true;
}

static __always_inline int op_exit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct tbpf_thread *t;
	__u64 now, slot;
	__u32 d;

	if (!pid_ok(pid))
		return 0;
	now = bpf_ktime_get_ns();
	t = thread_get(tid, pid, false);
	if (!t)
		return 0;
	cnt_add(CNT_EXITS, 1);
	slot = PT_REGS_SP(ctx) - 8;   /* `ret` popped the return slot */
	pop_below(t, tid, slot - 1, now, OPF_UNWOUND);
	d = t->depth;
	if (d == 0 || d > TBPF_MAX_DEPTH ||
	    t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)].sp != slot) {
		/* not our frame on top; a scope it opened may be (its sp is
		 * ~0, never a slot: so only here) */
		if (!drop_under_scope(t, slot))
			cnt_add(CNT_STACK_UNDERFLOW, 1);
		return 0;
	}
	pop_frame(t, tid, now, 0);
	return 0;
}

#endif /* TBPF_OPS_BPF_H */
