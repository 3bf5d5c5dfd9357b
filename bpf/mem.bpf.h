/* mem.bpf.h - --profile-memory: the allocations and frees
 * torch.profiler's profile_memory=True reports, charged to the op open on
 * the calling thread.  Included by tbpf.bpf.c after the op programs; see
 * abi/mem.h for what is probed and why.
 *
 * Entry probes only (no return probe, nothing for the unwind guard):
 *   ProfiledCPUMemoryReporter::New(this, ptr, nbytes)      rsi, rdx
 *   ProfiledCPUMemoryReporter::Delete(this, ptr)           rsi
 *   reportMemoryUsageToProfiler(ptr, size, total_alloc, total_reserved,
 *                               Device{int8 type, int8 index} in r8)
 */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TBPF_MEM_MAP_DEFAULT);   /* --mem-map-size */
	__type(key, struct tbpf_memkey);
	__type(value, struct tbpf_memval);
} mem_live SEC(".maps");

/* Bytes to the top frame (its self and total; ancestors get them at its
 * close, pop_frame), or to the "[memory]" row when no op is open.  Sets
 * *op_id, *stack_id, *depth for the record. */
static __always_inline void mem_charge(struct pt_regs *ctx, __u32 pid, __u32 tid, __u32 dev,
				       __s64 bytes, __u32 *op_id, __u32 *stack_id, __u32 *depth)
{
	struct tbpf_thread *t = thread_get(tid, pid, false);
	struct tbpf_frame *f;
	__u32 d;

	*op_id = 0;
	*stack_id = 0;
	*depth = 0;
	if (dev >= MEM_DEV_N)
		return;
	if (t && t->gen == pid_gen[pid & (TBPF_GEN_SLOTS - 1)] && t->depth) {
		if (!(tbpf_mode & TBPF_MODE_EXITS)) {
			/* infer mode: close what has returned first, as the
			 * next op entry would */
			t->busy = 1;
			pop_returned(t, tid, PT_REGS_SP(ctx) + 1, bpf_ktime_get_ns(), 0);
		}
		/* busy (infer mode) until the bytes are on the frame: a
		 * sample closing it in between would lose them */
		d = t->depth;
		if (d > 0 && d <= TBPF_MAX_DEPTH) {
			f = &t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)];
			f->mem_self[dev & 1] += bytes;
			f->mem_total[dev & 1] += bytes;
			*op_id = f->op_id;
			*stack_id = (__u32)f->pystack;
			*depth = t->vdepth;
			t->busy = 0;
			return;
		}
		t->busy = 0;
	}
	/* torch.profiler: a "[memory]" event of its own */
	{
		struct tbpf_opkey k = { .pid = pid, .op_id = TBPF_OPID_MEMORY };
		struct tbpf_opstat *s;

		cnt_add(CNT_MEM_NO_OP, 1);
		s = opstat_get(&k);
		if (!s)
			return;
		s->calls++;
		s->mem_self[dev & 1] += bytes;
		s->mem_total[dev & 1] += bytes;
	}
}

static __always_inline void mem_emit(__u32 tid, __u32 pid, __u16 dev_type, __s16 dev_index,
				     __u64 ptr, __s64 bytes, __u64 talloc, __u64 tres,
				     __u32 op_id, __u32 stack_id, __u32 depth, __u32 flags)
{
	struct rec_mem *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		cnt_add(CNT_DROPS, 1);
		return;
	}
	r->h.type = REC_MEM;
	r->h.size = sizeof(*r);
	r->h.tid = tid;
	r->h.ts_ns = bpf_ktime_get_ns();
	r->pid = pid;
	r->dev_type = dev_type;
	r->dev_index = dev_index;
	r->ptr = ptr;
	r->bytes = bytes;
	r->total_alloc = talloc;
	r->total_reserved = tres;
	r->op_id = op_id;
	r->stack_id = stack_id;
	r->flags = flags | (bytes < 0 ? MEMF_FREE : 0) | (op_id ? 0 : MEMF_NO_OP);
	r->depth = depth;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* c10::ProfiledCPUMemoryReporter::New(this, void *ptr, size_t nbytes) */
SEC("uprobe")
int BPF_KPROBE(tbpf_mem_new)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid, op, stack, depth, flags = 0;
	__u64 ptr = PT_REGS_PARM2(ctx);
	__s64 n = (__s64)PT_REGS_PARM3(ctx);
	struct tbpf_memkey k = { .pid = pid, .ptr = ptr };
	struct tbpf_memval v = { .bytes = n };

	if (!(tbpf_mode & TBPF_MODE_MEMORY) || !pid_ok(pid))
		return 0;
	if (n <= 0 || !ptr)   /* New ignores nbytes == 0 too */
		return 0;
	cnt_add(CNT_MEM_ALLOCS, 1);
	if (bpf_map_update_elem(&mem_live, &k, &v, BPF_ANY)) {
		cnt_add(CNT_MEM_MAP_FULL, 1);
		flags |= MEMF_UNTRACKED;
	}
	mem_charge(ctx, pid, tid, MEM_DEV_CPU, n, &op, &stack, &depth);
	mem_emit(tid, pid, TBPF_C10_DEV_CPU, -1, ptr, n, 0, 0, op, stack, depth, flags);
	return 0;
}

/* c10::ProfiledCPUMemoryReporter::Delete(this, void *ptr) */
SEC("uprobe")
int BPF_KPROBE(tbpf_mem_delete)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid, op, stack, depth;
	struct tbpf_memkey k = { .pid = pid, .ptr = PT_REGS_PARM2(ctx) };
	struct tbpf_memval *v;
	__s64 n;

	if (!(tbpf_mode & TBPF_MODE_MEMORY) || !pid_ok(pid) || !k.ptr)
		return 0;
	v = bpf_map_lookup_elem(&mem_live, &k);
	if (!v) {
		/* allocated before attach (or not kept): its size is unknown
		 * and torch.profiler would not report it either */
		cnt_add(CNT_MEM_UNKNOWN_FREES, 1);
		return 0;
	}
	n = v->bytes;
	bpf_map_delete_elem(&mem_live, &k);
	cnt_add(CNT_MEM_FREES, 1);
	mem_charge(ctx, pid, tid, MEM_DEV_CPU, -n, &op, &stack, &depth);
	mem_emit(tid, pid, TBPF_C10_DEV_CPU, -1, k.ptr, -n, 0, 0, op, stack, depth, 0);
	return 0;
}

/* c10::reportMemoryUsageToProfiler(void *ptr, int64_t alloc_size,
 *     size_t total_allocated, size_t total_reserved, c10::Device device):
 * the CUDA caching allocator's blocks (and other devices').  CPU reports
 * are skipped: New/Delete above see every one of them. */
SEC("uprobe")
int BPF_KPROBE(tbpf_mem_report)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid, op, stack, depth;
	__u64 dev = PT_REGS_PARM5(ctx);
	__u16 type = (__u8)dev;
	__s16 index = (__s8)(dev >> 8);
	__s64 n = (__s64)PT_REGS_PARM2(ctx);

	if (!(tbpf_mode & TBPF_MODE_MEMORY) || !pid_ok(pid))
		return 0;
	if (type == TBPF_C10_DEV_CPU || n == 0)
		return 0;
	cnt_add(n > 0 ? CNT_MEM_ALLOCS : CNT_MEM_FREES, 1);
	mem_charge(ctx, pid, tid, MEM_DEV_CUDA, n, &op, &stack, &depth);
	mem_emit(tid, pid, type, index, PT_REGS_PARM1(ctx), n, PT_REGS_PARM3(ctx),
		 PT_REGS_PARM4(ctx), op, stack, depth, 0);
	return 0;
}
