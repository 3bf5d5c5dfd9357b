/* agent.bpf.h - BPF side of the CUPTI agent transport: uprobes on the
 * agent's no-op functions copy the records they are passed into the
 * `events` ring buffer as REC_GPU.
 *
 * Included by bpf/tbpf.bpf.c after it defines `events` (BPF_MAP_TYPE_RINGBUF),
 * `counters` (per-CPU array of __u64 indexed by enum tbpf_counter) and
 * `const volatile __u32 tbpf_mode`.  User space attaches the three programs
 * at the file offsets userspace/attach/agent_attach.c finds:
 *   tbpf_agent_batch  -> tbpf_agent_emit_batch(const struct rec_gpu *, __u32 n)
 *   tbpf_agent_name   -> tbpf_agent_emit_name(const struct rec_gpu_name *)
 *   tbpf_agent_status -> tbpf_agent_emit_status(const struct rec_gpu_status *)
 * The target fills the records; BPF rewrites type, size and pid (never
 * trusted from the target) and drops kinds it does not know.
 */
#ifndef TBPF_AGENT_BPF_H
#define TBPF_AGENT_BPF_H

#ifndef TBPF_AGENT_COUNT
static __always_inline void tbpf_agent_count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		*c += 1;  /* per-CPU slot: no atomic needed */
}
#define TBPF_AGENT_COUNT(idx) tbpf_agent_count(idx)
#endif

SEC("uprobe")
int tbpf_agent_batch(struct pt_regs *ctx)
{
	const struct rec_gpu *src = (const struct rec_gpu *)PT_REGS_PARM1(ctx);
	__u32 n = (__u32)PT_REGS_PARM2(ctx);
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	if (n > TBPF_GPU_BATCH)
		n = TBPF_GPU_BATCH;
	for (__u32 i = 0; i < TBPF_GPU_BATCH; i++) {
		if (i >= n)
			break;
		struct rec_gpu *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
		if (!r) {
			TBPF_AGENT_COUNT(CNT_DROPS);
			break;
		}
		if (bpf_probe_read_user(r, sizeof(*r), &src[i]) ||
		    r->kind < GPU_KERNEL || r->kind > GPU_API_DRIVER) {
			bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
			continue;
		}
		r->h.type = REC_GPU;
		r->h.size = sizeof(*r);
		r->pid = pid;
		r->name[TBPF_GPU_SHORT_NAME - 1] = 0;
		bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	}
	return 0;
}

SEC("uprobe")
int tbpf_agent_name(struct pt_regs *ctx)
{
	const struct rec_gpu_name *src = (const struct rec_gpu_name *)PT_REGS_PARM1(ctx);
	struct rec_gpu_name *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		TBPF_AGENT_COUNT(CNT_DROPS);
		return 0;
	}
	if (bpf_probe_read_user(r, sizeof(*r), src) || r->kind != GPU_NAME) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		return 0;
	}
	r->h.type = REC_GPU;
	r->h.size = sizeof(*r);
	r->pid = bpf_get_current_pid_tgid() >> 32;
	if (r->len >= TBPF_GPU_NAME_MAX)
		r->len = TBPF_GPU_NAME_MAX - 1;
	r->name[TBPF_GPU_NAME_MAX - 1] = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Status changes are rare and tbpf waits for them: wake the reader. */
SEC("uprobe")
int tbpf_agent_status(struct pt_regs *ctx)
{
	const struct rec_gpu_status *src = (const struct rec_gpu_status *)PT_REGS_PARM1(ctx);
	struct rec_gpu_status *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		TBPF_AGENT_COUNT(CNT_DROPS);
		return 0;
	}
	if (bpf_probe_read_user(r, sizeof(*r), src) || r->kind != GPU_STATUS ||
	    r->magic != TBPF_AGENT_MAGIC) {
		bpf_ringbuf_discard(r, 0);
		return 0;
	}
	r->h.type = REC_GPU;
	r->h.size = sizeof(*r);
	r->pid = bpf_get_current_pid_tgid() >> 32;
	r->detail[sizeof(r->detail) - 1] = 0;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

#endif /* TBPF_AGENT_BPF_H */
