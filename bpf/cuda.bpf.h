/* cuda.bpf.h - probe stage, CUDA: launches, copies/sets, host syncs and
 * allocations in libcudart and libcuda, attributed to the op on top of the
 * calling thread's op stack.  Included at the end of tbpf.bpf.c (uses its
 * maps and helpers: events, counters, threads, opstats, cnt_add, pid_ok,
 * thread_get, tramp_page).
 *
 * One program serves every API with the same argument layout; the attach
 * cookie is the API id (enum tbpf_cuda_api).  Every call is timed (issue
 * 18: Kineto's cuda_runtime events have a duration, the API table a host
 * time): its entry keeps its state per thread, in `cuda_pending` (copies,
 * sets, syncs, allocations: the arguments) or `cuda_lpend` (launches: the
 * whole record), and its return probe writes the record with the time in
 * the call and the results known only then (cudaMalloc's *devPtr, the
 * return code).  These C APIs do not throw, so return probes are safe on
 * them; a call whose return is never seen (the thread died inside it)
 * writes no record.
 *
 * libcudart calls the driver API underneath (cudaMalloc -> cuMemAlloc,
 * cudaStreamSynchronize -> cuStreamSynchronize, ...).  Each runtime entry
 * remembers its return slot and return address in `cuda_rt`; a driver call
 * made at or below that slot while it still holds the runtime call's return
 * address (or the uretprobe trampoline) is the runtime's own and is skipped
 * (CNT_CUDA_NESTED), so one user call is counted once.  Once the runtime
 * call returned, any later call from its caller or deeper overwrites the
 * slot with a different return address.
 */
#ifndef TBPF_CUDA_BPF_H
#define TBPF_CUDA_BPF_H

struct cuda_pending {
	__u64 ts;
	__u64 sp;       /* return slot at entry */
	__u64 a0, a1, a2;
	__u32 api;
	__u32 op_id;
	__u32 stack_id;
	__u32 pad;
};

/* A launch between its entry and its return. */
struct cuda_lpending {
	__u64 sp;       /* return slot at entry; 0 = none pending */
	struct rec_launch r;
};

struct cuda_rt_call {
	__u64 sp;       /* return slot of the last runtime API entry */
	__u64 ra;       /* return address found there at entry */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);   /* entries of exited threads age out */
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct cuda_pending);
} cuda_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);   /* entries of exited threads age out */
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct cuda_lpending);
} cuda_lpend SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);   /* entries of exited threads age out */
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct cuda_rt_call);
} cuda_rt SEC(".maps");

/* Runtime (libcudart) API ids; everything else is the driver. */
static __always_inline bool cuda_api_is_runtime(__u32 api)
{
	switch (api) {
	case CU_cudaLaunchKernel: case CU_cudaLaunchKernel_ptsz:
	case CU_cudaLaunchKernelExC: case CU_cudaLaunchKernelExC_ptsz:
	case CU_cudaLaunchCooperativeKernel: case CU_cudaLaunchCooperativeKernel_ptsz:
	case CU_cudaGraphLaunch: case CU_cudaGraphLaunch_ptsz:
	case CU_cudaMemcpy: case CU_cudaMemcpyAsync: case CU_cudaMemcpyAsync_ptsz:
	case CU_cudaMemsetAsync: case CU_cudaMemsetAsync_ptsz: case CU_cudaMemset:
	case CU_cudaStreamSynchronize: case CU_cudaDeviceSynchronize:
	case CU_cudaEventSynchronize:
	case CU_cudaMalloc: case CU_cudaFree: case CU_cudaMallocAsync:
	case CU_cudaFreeAsync:
		return true;
	}
	return false;
}

/* Nesting rule at entry; `ra` is the return address at sp (the caller
 * read it already with the stack arguments).  Returns false when the call
 * is not to be recorded. */
static __always_inline bool cuda_enter_ra(__u64 sp, __u64 ra, __u32 api, __u32 tid)
{
	__u64 cur = 0;
	struct cuda_rt_call *rt;

	if (cuda_api_is_runtime(api)) {
		struct cuda_rt_call c = { .sp = sp, .ra = ra };

		/* in place when the thread has a slot: a hash update costs more */
		rt = bpf_map_lookup_elem(&cuda_rt, &tid);
		if (rt)
			*rt = c;
		else
			bpf_map_update_elem(&cuda_rt, &tid, &c, BPF_ANY);
		return true;
	}
	/* the runtime call's slot must be at or above ours (at: it
	 * tail-called the driver) and still hold its return address */
	rt = bpf_map_lookup_elem(&cuda_rt, &tid);
	if (!rt || rt->sp < sp)
		return true;
	if (bpf_probe_read_user(&cur, sizeof(cur), (void *)rt->sp))
		return true;
	if (cur == rt->ra || (cur & ~0xfffULL) == tramp_page) {
		cnt_add(CNT_CUDA_NESTED, 1);
		return false;
	}
	return true;
}

static __always_inline bool cuda_enter(__u64 sp, __u32 api, __u32 tid)
{
	__u64 ra = 0;

	if (cuda_api_is_runtime(api))
		bpf_probe_read_user(&ra, sizeof(ra), (void *)sp);
	return cuda_enter_ra(sp, ra, api, tid);
}

/* The op on top of this thread's op stack.  Frames that returned but are
 * not closed yet (infer mode closes them at the next op entry) are
 * skipped: a live frame's return slot is above our stack pointer (or at
 * it, when the op tail-called us) and still holds the return address seen
 * at its entry, or the uretprobe trampoline in return mode.  Without a
 * recorded return address only the slot position is checked. */
static __always_inline __u32 cuda_top_op(__u32 tid, __u64 sp, __u32 *stack_id,
					 __u64 *pystack, __u32 *depth)
{
	struct tbpf_thread *t = thread_get(tid, 0, false);
	__u32 d;

	*stack_id = 0;
	*pystack = 0;
	*depth = 0;
	if (!t)
		return 0;
	d = t->depth;
	for (int i = 0; i < TBPF_MAX_DEPTH; i++) {
		struct tbpf_frame *f;
		__u64 slot = 0;
		bool live;

		if (d == 0 || d > TBPF_MAX_DEPTH)
			return 0;
		f = &t->frames[(d - 1) & (TBPF_MAX_DEPTH - 1)];
		d--;
		if (f->sp < sp)
			continue;
		bpf_probe_read_user(&slot, sizeof(slot), (void *)f->sp);
		if ((slot & ~0xfffULL) == tramp_page)
			live = true;
		else if (f->ra)
			live = slot == f->ra;
		else    /* return mode reads ra only for a shared slot */
			live = f->sp > sp;
		if (!live)
			continue;
		*stack_id = (__u32)t->pystack_id;
		*pystack = t->pystack_id;
		*depth = d + 1;
		return f->op_id;
	}
	return 0;
}

static __always_inline void cuda_count_launch(__u32 pid, __u32 op_id, __u64 pystack)
{
	struct tbpf_opkey k = { .pid = pid, .op_id = op_id, .stack_id = pystack };
	struct tbpf_opstat *s;

	if (!op_id)
		return;
	s = opstat_get(&k);
	if (s)
		s->launches++;
}

static __always_inline void *cuda_reserve(__u32 size, __u16 type, __u32 tid, __u64 ts)
{
	struct rec_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		cnt_add(CNT_DROPS, 1);
		return NULL;
	}
	h->type = type;
	h->size = size;
	h->tid = tid;
	h->ts_ns = ts;
	cnt_add(CNT_CUDA_EVENTS, 1);
	return h;
}

/* ---- launches ---------------------------------------------------------- */

static __always_inline int cuda_launch(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx), now, pystack;
	__u32 stack_id, depth, op_id;
	struct cuda_lpending *lp;
	struct rec_launch *r;
	__u64 stk[4] = {};   /* return address, stack arguments 7..9 */

	if (!pid_ok(pid))
		return 0;
	bpf_probe_read_user(stk, sizeof(stk), (void *)sp);
	if (!cuda_enter_ra(sp, stk[0], api, tid))
		return 0;
	now = bpf_ktime_get_ns();
	op_id = cuda_top_op(tid, sp, &stack_id, &pystack, &depth);
	cuda_count_launch(pid, op_id, pystack);
	/* the record waits in the thread's slot for the return (in place
	 * when the thread has one: a hash update costs more) */
	lp = bpf_map_lookup_elem(&cuda_lpend, &tid);
	if (!lp) {
		struct cuda_lpending z = {};

		bpf_map_update_elem(&cuda_lpend, &tid, &z, BPF_ANY);
		lp = bpf_map_lookup_elem(&cuda_lpend, &tid);
		if (!lp)
			return 0;
	}
	lp->sp = sp;
	r = &lp->r;
	r->h.type = REC_LAUNCH;
	r->h.size = sizeof(*r);
	r->h.tid = tid;
	r->h.ts_ns = now;
	r->pid = pid;
	r->api = api;
	r->op_id = op_id;
	r->stack_id = stack_id;
	r->depth = depth;
	r->shmem = 0;
	r->stream = 0;
	r->dur_ns = 0;
	__builtin_memset(r->grid, 0, sizeof(r->grid));
	__builtin_memset(r->block, 0, sizeof(r->block));
	switch (api) {
	case CU_cudaLaunchKernel: case CU_cudaLaunchKernel_ptsz:
	case CU_cudaLaunchCooperativeKernel: case CU_cudaLaunchCooperativeKernel_ptsz: {
		/* (func, dim3 grid in rsi:rdx, dim3 block in rcx:r8, args,
		 *  size_t shmem on stack, stream on stack) */
		__u64 g = PT_REGS_PARM2(ctx), b = PT_REGS_PARM4(ctx);

		r->func = PT_REGS_PARM1(ctx);
		r->grid[0] = (__u32)g;
		r->grid[1] = g >> 32;
		r->grid[2] = (__u32)PT_REGS_PARM3(ctx);
		r->block[0] = (__u32)b;
		r->block[1] = b >> 32;
		r->block[2] = (__u32)PT_REGS_PARM5(ctx);
		r->shmem = (__u32)stk[1];
		r->stream = stk[2];
		break;
	}
	case CU_cudaLaunchKernelExC: case CU_cudaLaunchKernelExC_ptsz: {
		/* (const cudaLaunchConfig_t *cfg, func, args): grid @0,
		 * block @12, dynamicSmemBytes @24, stream @32 */
		__u32 cfg[10] = {};

		bpf_probe_read_user(cfg, sizeof(cfg), (void *)PT_REGS_PARM1(ctx));
		r->func = PT_REGS_PARM2(ctx);
		r->grid[0] = cfg[0]; r->grid[1] = cfg[1]; r->grid[2] = cfg[2];
		r->block[0] = cfg[3]; r->block[1] = cfg[4]; r->block[2] = cfg[5];
		r->shmem = cfg[6];
		r->stream = cfg[8] | (__u64)cfg[9] << 32;
		break;
	}
	case CU_cuLaunchKernel: case CU_cuLaunchKernel_ptsz:
		/* (f, gx, gy, gz, bx, by, [bz, shmem, stream, params, extra]) */
		r->func = PT_REGS_PARM1(ctx);
		r->grid[0] = (__u32)PT_REGS_PARM2(ctx);
		r->grid[1] = (__u32)PT_REGS_PARM3(ctx);
		r->grid[2] = (__u32)PT_REGS_PARM4(ctx);
		r->block[0] = (__u32)PT_REGS_PARM5(ctx);
		r->block[1] = (__u32)ctx->r9;
		r->block[2] = (__u32)stk[1];
		r->shmem = (__u32)stk[2];
		r->stream = stk[3];
		break;
	case CU_cuLaunchKernelEx: case CU_cuLaunchKernelEx_ptsz: {
		/* (const CUlaunchConfig *cfg, f, params, extra): 6 x u32 dims,
		 * u32 sharedMemBytes @24, hStream @32 */
		__u32 cfg[10] = {};

		bpf_probe_read_user(cfg, sizeof(cfg), (void *)PT_REGS_PARM1(ctx));
		r->func = PT_REGS_PARM2(ctx);
		r->grid[0] = cfg[0]; r->grid[1] = cfg[1]; r->grid[2] = cfg[2];
		r->block[0] = cfg[3]; r->block[1] = cfg[4]; r->block[2] = cfg[5];
		r->shmem = cfg[6];
		r->stream = cfg[8] | (__u64)cfg[9] << 32;
		break;
	}
	default: /* graph launches: (exec, stream) */
		r->func = PT_REGS_PARM1(ctx);
		r->stream = PT_REGS_PARM2(ctx);
		break;
	}
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_launch)
{
	return cuda_launch(ctx);
}

/* The launch's return: its record, with the time in the call. */
SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_launch_ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	struct cuda_lpending *lp;
	struct rec_launch *r;
	__u64 now;

	if (!pid_ok(pid))
		return 0;
	lp = bpf_map_lookup_elem(&cuda_lpend, &tid);
	/* ours: the same call (a skipped nested one left no entry) */
	if (!lp || !lp->sp || lp->sp + 8 != PT_REGS_SP(ctx) || lp->r.api != api)
		return 0;
	now = bpf_ktime_get_ns();
	lp->sp = 0;
	r = cuda_reserve(sizeof(*r), REC_LAUNCH, tid, lp->r.h.ts_ns);
	if (!r)
		return 0;
	__builtin_memcpy(r, &lp->r, sizeof(*r));
	r->dur_ns = now > lp->r.h.ts_ns ? now - lp->r.h.ts_ns : 1;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* ---- copies and sets ------------------------------------------------------ */

static __always_inline __u32 cuda_rt_dir(__u64 kind)
{
	switch (kind) {
	case 0: return CP_HTOH;
	case 1: return CP_HTOD;
	case 2: return CP_DTOH;
	case 3: return CP_DTOD;
	}
	return CP_UNKNOWN;    /* cudaMemcpyDefault: direction from UVA */
}

/* Fill bytes/dir/stream of a copy or set from the entry arguments. */
static __always_inline void cuda_memop_args(__u32 api, __u64 a1, __u64 a2, __u64 a3,
					    __u64 a4, __u64 *bytes, __u32 *dir, __u64 *stream)
{
	*stream = 0;
	switch (api) {
	case CU_cudaMemcpy:              /* (dst, src, n, kind) */
		*bytes = a2; *dir = cuda_rt_dir(a3);
		break;
	case CU_cudaMemcpyAsync: case CU_cudaMemcpyAsync_ptsz:
		*bytes = a2; *dir = cuda_rt_dir(a3); *stream = a4;
		break;
	case CU_cudaMemset:              /* (ptr, value, n) */
		*bytes = a2; *dir = CP_SET;
		break;
	case CU_cudaMemsetAsync: case CU_cudaMemsetAsync_ptsz:
		*bytes = a2; *dir = CP_SET; *stream = a3;
		break;
	case CU_cuMemcpyAsync:           /* (dst, src, n, stream) */
		*bytes = a2; *dir = CP_UNKNOWN; *stream = a3;
		break;
	case CU_cuMemcpyHtoDAsync:
		*bytes = a2; *dir = CP_HTOD; *stream = a3;
		break;
	case CU_cuMemcpyDtoHAsync:
		*bytes = a2; *dir = CP_DTOH; *stream = a3;
		break;
	case CU_cuMemcpyDtoDAsync:
		*bytes = a2; *dir = CP_DTOD; *stream = a3;
		break;
	case CU_cuMemsetD8Async:         /* (ptr, value, N elements, stream) */
		*bytes = a2; *dir = CP_SET; *stream = a3;
		break;
	case CU_cuMemsetD16Async:
		*bytes = a2 * 2; *dir = CP_SET; *stream = a3;
		break;
	case CU_cuMemsetD32Async:
		*bytes = a2 * 4; *dir = CP_SET; *stream = a3;
		break;
	default:
		*bytes = 0; *dir = CP_UNKNOWN;
	}
}

static __always_inline void cuda_emit_memop(__u32 tid, __u64 ts, __u32 pid, __u32 api,
					    __u64 a1, __u64 a2, __u64 a3, __u64 a4,
					    __u64 dur, __u32 op_id, __u32 stack_id)
{
	struct rec_memop *r = cuda_reserve(sizeof(*r), REC_MEMOP, tid, ts);
	__u64 bytes, stream;
	__u32 dir;

	if (!r)
		return;
	cuda_memop_args(api, a1, a2, a3, a4, &bytes, &dir, &stream);
	r->pid = pid;
	r->api = api;
	r->bytes = bytes;
	r->stream = stream;
	r->dur_ns = dur;
	r->dir = dir;
	r->op_id = op_id;
	r->stack_id = stack_id;
	r->flags = MEMOP_TIMED;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* Entry state for a call completed at return. */
static __always_inline void cuda_pend(__u32 tid, __u64 ts, __u64 sp, __u32 api, __u64 a0,
				      __u64 a1, __u64 a2, __u32 op_id, __u32 stack_id)
{
	struct cuda_pending p = {
		.ts = ts, .sp = sp, .a0 = a0, .a1 = a1, .a2 = a2,
		.api = api, .op_id = op_id, .stack_id = stack_id,
	};

	bpf_map_update_elem(&cuda_pending, &tid, &p, BPF_ANY);
}

/* The pending entry of this return, or NULL if it is not ours (the entry
 * was skipped as nested, or a different call is pending). */
static __always_inline struct cuda_pending *cuda_unpend(__u64 sp, __u32 tid, __u32 api)
{
	struct cuda_pending *p = bpf_map_lookup_elem(&cuda_pending, &tid);

	if (!p || p->api != api || p->sp + 8 != sp)
		return NULL;
	return p;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_memop)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx), now, pystack;
	__u32 stack_id, depth, op_id;

	if (!pid_ok(pid) || !cuda_enter(sp, api, tid))
		return 0;
	now = bpf_ktime_get_ns();
	op_id = cuda_top_op(tid, sp, &stack_id, &pystack, &depth);
	/* completed (with its duration) at return */
	cuda_pend(tid, now, sp, api, PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx),
		  PT_REGS_PARM5(ctx), op_id, stack_id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_memop_ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	struct cuda_pending *p;
	__u64 now;

	if (!pid_ok(pid))
		return 0;
	p = cuda_unpend(PT_REGS_SP(ctx), tid, api);
	if (!p)
		return 0;
	now = bpf_ktime_get_ns();
	cuda_emit_memop(tid, p->ts, pid, api, 0, p->a0, p->a1, p->a2,
			now > p->ts ? now - p->ts : 1, p->op_id, p->stack_id);
	bpf_map_delete_elem(&cuda_pending, &tid);
	return 0;
}

/* ---- synchronizations -------------------------------------------------- */

SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_sync)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx), pystack;
	__u32 stack_id, depth, op_id;

	if (!pid_ok(pid) || !cuda_enter(sp, api, tid))
		return 0;
	op_id = cuda_top_op(tid, sp, &stack_id, &pystack, &depth);
	/* device/context syncs take no handle; the first argument register
	 * is garbage for them */
	cuda_pend(tid, bpf_ktime_get_ns(), sp, api,
		  (api == CU_cudaDeviceSynchronize || api == CU_cuCtxSynchronize) ? 0 :
		  PT_REGS_PARM1(ctx), 0, 0, op_id, stack_id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_sync_ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	struct cuda_pending *p;
	struct rec_sync *r;
	__u64 now;

	if (!pid_ok(pid))
		return 0;
	p = cuda_unpend(PT_REGS_SP(ctx), tid, api);
	if (!p)
		return 0;
	now = bpf_ktime_get_ns();
	r = cuda_reserve(sizeof(*r), REC_SYNC, tid, p->ts);
	if (r) {
		r->pid = pid;
		r->api = api;
		r->dur_ns = now > p->ts ? now - p->ts : 1;
		r->handle = p->a0;
		r->op_id = p->op_id;
		r->stack_id = p->stack_id;
		r->ret = (__u32)PT_REGS_RC(ctx);
		r->pad = 0;
		bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	}
	bpf_map_delete_elem(&cuda_pending, &tid);
	return 0;
}

/* ---- allocations ------------------------------------------------------- */

static __always_inline void cuda_emit_alloc(__u32 tid, __u64 ts, __u32 pid, __u32 api,
					    __u64 ptr, __u64 bytes, __u32 ret,
					    __u32 op_id, __u32 stack_id, __u64 dur)
{
	struct rec_alloc *r = cuda_reserve(sizeof(*r), REC_ALLOC, tid, ts);

	if (!r)
		return;
	r->pid = pid;
	r->api = api;
	r->ptr = ptr;
	r->bytes = bytes;
	r->op_id = op_id;
	r->stack_id = stack_id;
	r->ret = ret;
	r->pad = 0;
	r->dur_ns = dur;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_alloc)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx), now, pystack;
	__u32 stack_id, depth, op_id;

	if (!pid_ok(pid) || !cuda_enter(sp, api, tid))
		return 0;
	now = bpf_ktime_get_ns();
	op_id = cuda_top_op(tid, sp, &stack_id, &pystack, &depth);
	/* (void **ptr, size_t bytes, ...): *ptr is read at return; frees
	 * (void *ptr): the pointer */
	cuda_pend(tid, now, sp, api, PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), 0,
		  op_id, stack_id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_cuda_alloc_ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	struct cuda_pending *p;
	__u32 ret = (__u32)PT_REGS_RC(ctx);
	__u64 ptr = 0, now = bpf_ktime_get_ns(), dur;

	if (!pid_ok(pid))
		return 0;
	p = cuda_unpend(PT_REGS_SP(ctx), tid, api);
	if (!p)
		return 0;
	dur = now > p->ts ? now - p->ts : 1;
	switch (api) {
	case CU_cudaFree: case CU_cudaFreeAsync: case CU_cuMemFree: case CU_cuMemFreeAsync:
		/* frees: the pointer; a failed free leaves the block live in
		 * the target, but the model ends it (the caller's next free
		 * of it would show it) */
		cuda_emit_alloc(tid, p->ts, pid, api, p->a0, 0, ret, p->op_id, p->stack_id, dur);
		bpf_map_delete_elem(&cuda_pending, &tid);
		return 0;
	}
	if (ret == 0)
		bpf_probe_read_user(&ptr, sizeof(ptr), (void *)p->a0);
	cuda_emit_alloc(tid, p->ts, pid, api, ptr, p->a1, ret, p->op_id, p->stack_id, dur);
	bpf_map_delete_elem(&cuda_pending, &tid);
	return 0;
}

#endif /* TBPF_CUDA_BPF_H */
