/* common.bpf.h - probe stage: what every probe uses: the global
 * counters, the pid filter and the attach window (entries_off), the
 * calling thread's state (thread_get, thread_enter), op records to the
 * ring and the op rows (opstats) they update.
 *
 * Included by tbpf.bpf.c after its settings and maps.
 */
#ifndef TBPF_COMMON_BPF_H
#define TBPF_COMMON_BPF_H

static __always_inline void cnt_add(__u32 idx, __u64 v)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += v;
}

/* 1 while the window is closed (user space, through the mmapped .bss):
 * while `tbpf --pid` attaches, until just before its "attached" line,
 * and from the start of the detach on.  An op entered then gets a
 * transparent frame (OPF_SKIP: not counted, its time its parent's; the
 * guard still sees its hijacked return), no scope or module call is
 * recorded.  So the window opens and ends at one moment for every kind
 * of record, not as each part comes up or down: the CUPTI agent's start
 * and stop took 8 ms under load, and the ops counted meanwhile had no
 * launch or device records (test_attach_midrun). */
__u32 entries_off;

/* Is pid a target?  With `hit` (the op entry probe) also count the hit
 * in its per-CPU slot of `pids`. */
static __always_inline bool pid_check(__u32 pid, bool hit)
{
	__u64 *h;

	if (targ_tgid)
		return pid == targ_tgid;
	if (!pid_filter)
		return true;
	h = bpf_map_lookup_elem(&pids, &pid);
	if (!h)
		return false;
	if (hit)
		*h += 1;
	return true;
}

static __always_inline bool pid_ok(__u32 pid)
{
	return pid_check(pid, false);
}

/* The calling thread's state (tid must be the current thread's). */
static __always_inline struct tbpf_thread *thread_get(__u32 tid, __u32 pid, bool create)
{
	struct tbpf_thread *t;
	__u32 zero = 0;

	if (thread_store) {
		/* created zeroed */
		t = bpf_task_storage_get(&thread_tls, bpf_get_current_task_btf(), 0,
					 create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
		if (!t && create)
			cnt_add(CNT_NO_THREAD_SLOT, 1);
		return t;
	}
	t = bpf_map_lookup_elem(&threads, &tid);
	if (t || !create)
		return t;
	t = bpf_map_lookup_elem(&thread_zero, &zero);
	if (!t)
		return NULL;
	t->pid = pid;
	bpf_map_update_elem(&threads, &tid, t, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		cnt_add(CNT_NO_THREAD_SLOT, 1);
	return t;
}

/* The calling thread's state at a probe that pushes a frame: created if
 * new; frames left from before a re-attach of its process (the budget's
 * duty cycle, pid_gen) are dropped uncounted. */
static __always_inline struct tbpf_thread *thread_enter(__u32 tid, __u32 pid)
{
	struct tbpf_thread *t = thread_get(tid, pid, true);
	__u32 g = pid_gen[pid & (TBPF_GEN_SLOTS - 1)];

	if (!t)
		return NULL;
	if (t->gen != g || t->pid != pid) {
		/* depth first, gen last: a sample or switch-out in between
		 * sees the old gen and keeps off (close_returned) */
		t->depth = 0;
		asm volatile("" ::: "memory");
		t->gen = g;
		t->vdepth = 0;
		t->stack_id = 0;
		t->pystack_id = 0;
		t->bw_nodes = 0;
		t->bw_last_seq = 0;
		t->py_lo = 0;
		t->py_lo2 = 0;
		for (int i = 0; i < TBPF_PYSEEN_N; i++)
			t->pyseen[i] = 0;
		for (int i = 0; i < TBPF_ROWSEEN_N; i++)
			t->rowseen[i] = 0;
	}
	t->pid = pid;
	return t;
}

static __always_inline void emit_op_shape(__u16 type, __u32 tid, __u64 ts, __u32 pid,
					  __u32 op_id, __u32 depth, __u32 flags, __u32 stack_id,
					  __u64 shape_id)
{
	struct rec_op_shape *rs;
	struct rec_op *r;

	if (!(tbpf_mode & TBPF_MODE_RECORD))
		return;
	/* with shapes, an enter record carries its shape id */
	if (type == REC_OP_ENTER && (tbpf_mode & TBPF_MODE_SHAPES)) {
		rs = bpf_ringbuf_reserve(&events, sizeof(*rs), 0);
		if (!rs) {
			cnt_add(CNT_DROPS, 1);
			return;
		}
		rs->shape_id = shape_id;
		r = &rs->op;
		r->h.size = sizeof(*rs);
	} else {
		r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
		if (!r) {
			cnt_add(CNT_DROPS, 1);
			return;
		}
		r->h.size = sizeof(*r);
	}
	r->h.type = type;
	r->h.tid = tid;
	r->h.ts_ns = ts;
	r->pid = pid;
	r->op_id = op_id;
	r->depth = depth;
	r->flags = flags;
	r->stack_id = stack_id;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

static __always_inline void emit_op(__u16 type, __u32 tid, __u64 ts, __u32 pid,
				    __u32 op_id, __u32 depth, __u32 flags, __u32 stack_id)
{
	emit_op_shape(type, tid, ts, pid, op_id, depth, flags, stack_id, 0);
}

/* The opstats row of k, made (zeroed) if new; NULL when the map is full
 * or, from a program that runs with interrupts off, when the allocator's
 * per-CPU cache is empty (rows_early). */
static __always_inline struct tbpf_opstat *opstat_row(const struct tbpf_opkey *k)
{
	struct tbpf_opstat *s = bpf_map_lookup_elem(&opstats, k);

	if (!s) {
		const void *z = zero_value();

		if (!z)
			return NULL;
		bpf_map_update_elem(&opstats, k, z, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&opstats, k);
	}
	return s;
}

/* opstat_row, a row it could not make counted (CNT_STAT_FULL). */
static __always_inline struct tbpf_opstat *opstat_get(const struct tbpf_opkey *k)
{
	struct tbpf_opstat *s = opstat_row(k);

	if (!s)
		cnt_add(CNT_STAT_FULL, 1);
	return s;
}

static __always_inline void stat_add(__u32 pid, __u32 op_id, __u64 stack_id, __u64 shape_id,
				     __u64 self, __u64 total, __u32 flags,
				     const struct tbpf_frame *f)
{
	struct tbpf_opkey k = { .pid = pid, .op_id = op_id, .stack_id = stack_id,
				.shape_id = shape_id };
	struct tbpf_opstat *s = opstat_get(&k);

	if (!s)
		return;
	s->calls++;
	s->self_ns += self;
	s->total_ns += total;
	if (total > s->max_ns)
		s->max_ns = total;
	if (flags & (OPF_INFERRED | OPF_UNWOUND))
		s->inferred++;
	if ((tbpf_mode & TBPF_MODE_MEMORY) && f) {
		for (int i = 0; i < MEM_DEV_N; i++) {
			s->mem_self[i] += f->mem_self[i];
			s->mem_total[i] += f->mem_total[i];
		}
	}
}

#endif /* TBPF_COMMON_BPF_H */
