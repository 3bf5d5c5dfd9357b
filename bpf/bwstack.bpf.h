/* bwstack.bpf.h - --group-by-stack in the uprobe mode: the Source Location
 * torch.profiler gives backward ops (EventList._set_backward_stacktraces,
 * the same rule as userspace/model/bwstack.h applies to the
 * in-process agent's records).
 *
 * torch.profiler gives every event inside a backward node (the node's
 * apply, RecordScope::BACKWARD_FUNCTION, and the ops it runs) the stack of
 * the first event, in start order and outside backward nodes, whose
 * sequence number is the node's sequence_nr_ on the node's forward thread
 * (thread_id_); none: an empty stack.  Here, with TBPF_MODE_BWSTACK and a
 * tbpf_bwproc for the process:
 *   - every op entered outside a node, not below autograd (libc10's
 *     thread-local excluded dispatch keys hold Autograd) and with grad
 *     mode on (libc10's AutogradState: under torch.no_grad() the
 *     dispatcher gives no sequence number either), registers (pid, torch thread id,
 *     sequence counter) -> its Python stack in bw_fwd, first one kept
 *     (both read from libtorch_cpu's thread_locals through the DTV: the
 *     counter at entry is what the dispatcher's RecordFunction peeks);
 *   - a node's apply reads its sequence_nr_ and thread_id_, looks its
 *     forward op up, and keys itself and every op inside it by a derived
 *     stack (TBPF_BWSTACK_ID of tbpf_bw_derive(own, fwd, found)); the
 *     parts go to bw_derived, from which user space makes the stack
 *     (its own frames and layers, the forward op's Source Location).
 * The table aggregates by that id like any stack; records carry it too.
 * Costs a few user reads and one map update per op, only when asked. */
#ifndef TBPF_BWSTACK_BPF_H
#define TBPF_BWSTACK_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_bwproc);
} bw_procs SEC(".maps");

/* the forward stacks of the last sequence numbers (LRU: a node whose
 * forward op is older than that reads an empty stack) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 18);
	__type(key, struct tbpf_bwfwd_key);
	__type(value, __u64);
} bw_fwd SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tbpf_bwdkey);
	__type(value, struct tbpf_bwderived);
} bw_derived SEC(".maps");

/* A module's TLS block in the calling thread, 0 when it has none yet */
static __always_inline __u64 bw_tls_block(__u64 modid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 fsbase = task->thread.fsbase, dtv = 0, n = 0, blk = 0;

	if (!fsbase || bpf_probe_read_user(&dtv, sizeof(dtv), (void *)(fsbase + TBPF_TCB_DTV)) ||
	    !dtv || bpf_probe_read_user(&n, sizeof(n), (void *)(dtv - TBPF_DTV_ENTRY)) ||
	    modid > n ||
	    bpf_probe_read_user(&blk, sizeof(blk), (void *)(dtv + TBPF_DTV_ENTRY * modid)))
		return 0;
	return blk == ~0ULL ? 0 : blk;
}

static __always_inline void bw_fwd_put(__u32 pid, __u64 thread, __u64 seq, __u64 stack)
{
	struct tbpf_bwfwd_key k = { .pid = pid, .thread = thread, .seq = seq };

	bpf_map_update_elem(&bw_fwd, &k, &stack, BPF_NOEXIST);
}

/* A forward op entered (frame f, outside any node): register its stack
 * under the thread's (torch thread id, sequence counter).  A thread that
 * has no torch thread id yet gets one in the op (its first autograd node
 * asks for it): the op registers at its exit (bw_forward_exit). */
static __noinline void bw_forward(struct tbpf_thread *t, struct tbpf_frame *f, __u32 pid)
{
	struct tbpf_bwproc *bp;
	__u64 blk, seq = 0, thread = 0, excl = 0;
	__u8 guard = 0, grad = 0;

	if (t->bw_nodes)
		return;
	bp = bpf_map_lookup_elem(&bw_procs, &pid);
	if (!bp)
		return;
	/* below autograd (a kernel's own calls): the dispatcher gives the
	 * op no sequence number */
	blk = bw_tls_block(bp->c10_modid);
	if (blk && !bpf_probe_read_user(&excl, sizeof(excl), (void *)(blk + bp->c10_excl_off)) &&
	    (excl & bp->autograd_mask))
		return;
	/* grad mode off (torch.no_grad()): no sequence number either; a
	 * state not yet initialised (guard 0) is its default, on */
	if (blk && !bpf_probe_read_user(&guard, 1, (void *)(blk + bp->grad_guard_off)) && guard &&
	    !bpf_probe_read_user(&grad, 1, (void *)(blk + bp->grad_off)) && !(grad & bp->grad_mask))
		return;
	blk = bw_tls_block(bp->modid);
	if (!blk || bpf_probe_read_user(&seq, sizeof(seq), (void *)(blk + bp->seq_off)) ||
	    bpf_probe_read_user(&thread, sizeof(thread), (void *)(blk + bp->tid_off)))
		return;
	if (!thread) {
		f->flags |= OPF_BWPEND;
		f->bwseq = seq;
		return;
	}
	/* the thread's last registered key: already in the map (nested
	 * ops and same-number neighbours share it) */
	if (t->bw_last_seq == seq + 1 && t->bw_last_thread == thread)
		return;
	t->bw_last_seq = seq + 1;
	t->bw_last_thread = thread;
	bw_fwd_put(pid, thread, seq, f->pystack);
}

/* A frame with OPF_BWNODE or OPF_BWPEND closes. */
static __noinline void bw_frame_exit(struct tbpf_thread *t, struct tbpf_frame *f)
{
	struct tbpf_bwproc *bp;
	__u64 blk, thread = 0;
	__u32 pid = t->pid;

	if ((f->flags & OPF_BWNODE) && t->bw_nodes)
		t->bw_nodes--;
	if (!(f->flags & OPF_BWPEND))
		return;
	bp = bpf_map_lookup_elem(&bw_procs, &pid);
	if (!bp)
		return;
	blk = bw_tls_block(bp->modid);
	if (blk && !bpf_probe_read_user(&thread, sizeof(thread), (void *)(blk + bp->tid_off)) &&
	    thread)
		bw_fwd_put(pid, thread, f->bwseq, f->pystack);
}

/* A backward node's apply entered (frame f, `node` its this): key it and
 * its ops by the derived stack. */
static __noinline void bw_node(struct tbpf_thread *t, struct tbpf_frame *f, __u32 pid,
				    __u64 node)
{
	struct tbpf_bwproc *bp = bpf_map_lookup_elem(&bw_procs, &pid);
	struct tbpf_bwfwd_key k = { .pid = pid };
	struct tbpf_bwderived dv = {};
	struct tbpf_bwdkey dk = { .pid = pid };
	__u64 *fwd, id;

	if (!bp || !node)
		return;
	if (bpf_probe_read_user(&k.seq, sizeof(k.seq), (void *)(node + bp->node_seq_off)) ||
	    bpf_probe_read_user(&k.thread, sizeof(k.thread), (void *)(node + bp->node_tid_off)))
		return;
	fwd = bpf_map_lookup_elem(&bw_fwd, &k);
	dv.own = (__u32)f->pystack;
	dv.fwd = fwd ? (__u32)*fwd : 0;
	dv.found = fwd ? 1 : 0;
	dk.id = tbpf_bw_derive(dv.own, dv.fwd, dv.found);
	bpf_map_update_elem(&bw_derived, &dk, &dv, BPF_NOEXIST);
	id = TBPF_BWSTACK_ID(dk.id);
	f->pystack = id;
	t->pystack_id = id;
	f->flags |= OPF_BWNODE;
	t->bw_nodes++;
}

#endif /* TBPF_BWSTACK_BPF_H */
