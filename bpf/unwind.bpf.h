/* unwind.bpf.h - exception safety stage: frames closed without their
 * return probe.  The unwinder hooks (ask the ptrace guard to restore
 * hijacked return addresses, close what an exception unwound), infer
 * mode's CPU-clock sample and switch-out programs, and the thread-exit
 * program that closes a dying thread's frames and frees its state.
 *
 * Included by tbpf.bpf.c after the op programs.
 */
#ifndef TBPF_UNWIND_BPF_H
#define TBPF_UNWIND_BPF_H

/* Attached to the entry of every unwinder entry point that walks return
 * addresses (_Unwind_RaiseException, _Unwind_Resume_or_Rethrow,
 * _Unwind_ForcedUnwind, _Unwind_Backtrace).  If this thread has frames
 * whose return address is the uretprobe trampoline, stop it (the guard's
 * signal) so the guard writes the real return addresses back first. */
SEC("uprobe")
int BPF_KPROBE(tbpf_unwind_begin)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct tbpf_thread *t;
	__u64 now;

	if (!(tbpf_mode & TBPF_MODE_EXITS) || !pid_ok(pid))
		return 0;
	t = thread_get(tid, pid, false);
	if (!t || t->depth == 0)
		return 0;
	if (!bpf_map_lookup_elem(&guard_tids, &tid)) {
		cnt_add(CNT_GUARD_UNSAFE, 1);
		return 0;
	}
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&guard_req, &tid, &now, BPF_ANY);
	cnt_add(CNT_GUARD_SIGNALS, 1);
	if (bpf_send_signal_thread(guard_sig))
		cnt_add(CNT_GUARD_UNSAFE, 1);
	return 0;
}

/* __cxa_begin_catch: the exception landed in the frame that called us;
 * every op frame at or below our return slot was unwound. */
SEC("uprobe")
int BPF_KPROBE(tbpf_unwind_catch)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct tbpf_thread *t;

	if (!pid_ok(pid))
		return 0;
	t = thread_get(tid, pid, false);
	if (!t || t->depth == 0)
		return 0;
	t->busy = 1;
	pop_below(t, tid, PT_REGS_SP(ctx), bpf_ktime_get_ns(), OPF_UNWOUND);
	t->busy = 0;
	return 0;
}

/* Infer mode's bound on an exit it did not see: an op frame
 * whose return slot lies below the thread's user stack pointer, or no
 * longer holds its return address, has returned.  Checked on a CPU-clock sample of a running target thread and
 * when a target thread is switched out, such a frame closes then, not at
 * the thread's next op, which can come after any amount of Python code
 * (loss.item() at the end of a training step).  In return mode nothing is
 * left to close: its frames closed at their return. */
static __always_inline void close_returned(void)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct tbpf_thread *t;
	struct pt_regs *regs;
	__u32 d0;
	__u64 sp;

	if (!pid || !pid_ok(pid))
		return;
	t = thread_get(tid, pid, false);
	/* busy: an op probe was interrupted; an old gen: frames from before
	 * the budget's re-attach, dropped uncounted at the next entry */
	if (!t || t->depth == 0 || t->busy || t->gen != pid_gen[pid & (TBPF_GEN_SLOTS - 1)])
		return;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	sp = BPF_CORE_READ(regs, sp);
	if (!sp)
		return;
	d0 = t->depth;
	pop_returned(t, tid, sp, bpf_ktime_get_ns(), POP_NO_NEW_ROWS);
	if (t->depth < d0)
		cnt_add(CNT_SAMPLE_POPS, d0 - t->depth);
}

SEC("perf_event")
int tbpf_infer_sample(struct bpf_perf_event_data *ctx)
{
	close_returned();
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(tbpf_infer_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	close_returned();   /* current is still prev */
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(tbpf_thread_exit, struct task_struct *task)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct tbpf_thread *t;

	if (thread_store)
		t = bpf_task_storage_get(&thread_tls, task, 0, 0);
	else
		t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		return 0;
	/* The thread is gone, so are its frames: count them (infer mode's
	 * last op ends here; in return mode they were unwound). */
	pop_below(t, tid, ~0ULL, bpf_ktime_get_ns(),
		  (tbpf_mode & TBPF_MODE_EXITS) ? OPF_UNWOUND : OPF_INFERRED);
	if (thread_store)
		bpf_task_storage_delete(&thread_tls, task);
	else
		bpf_map_delete_elem(&threads, &tid);
	bpf_map_delete_elem(&guard_req, &tid);
	return 0;
}

#endif /* TBPF_UNWIND_BPF_H */
