/* modcall.bpf.h - probe stage: nn.Module calls (torchprof's Count),
 * counted from the uprobe on torch::jit::tracer::getTracingState() under
 * the calling module's Python stack (abi/scope.h, TBPF_MODCALL_ID).
 *
 * Included by tbpf.bpf.c after pystack.bpf.h.
 */
#ifndef TBPF_MODCALL_BPF_H
#define TBPF_MODCALL_BPF_H

/* torch::jit::tracer::getTracingState(): one call per nn.Module call
 * (TBPF_MODCALL_ID in abi/scope.h), among others told apart by the
 * innermost Python frame.  Counts the call under the module's stack;
 * touches no op frame. */
SEC("uprobe")
int BPF_KPROBE(tbpf_module_call)
{
#ifdef TBPF_FLOOR
	return 0;
#endif
#ifdef HAVE_PYSTACK
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct tbpf_pyproc *pp;
	__u64 stack, frame;

	if (!(tbpf_mode & TBPF_MODE_PYSTACK) || !pid_ok(pid) || entries_off)
		return 0;
	pp = bpf_map_lookup_elem(&py_procs, &pid);
	frame = pystack_top_call_impl(pp);
	if (!frame)
		return 0;
	stack = pystack_capture_from(pp, pid, frame, thread_get(tid, pid, false));
	if (!stack)
		return 0;
	cnt_add(CNT_MODCALLS, 1);
	stat_add(pid, TBPF_MODCALL_ID, stack, 0, 0, 0, 0, NULL);
	emit_op(REC_MODCALL, tid, bpf_ktime_get_ns(), pid, TBPF_MODCALL_ID, 0, 0, (__u32)stack);
#endif
	return 0;
}

#endif /* TBPF_MODCALL_BPF_H */
