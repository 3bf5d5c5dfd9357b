// SPDX-License-Identifier: GPL-2.0
/* tbpf.bpf.c - probe stage: op entry/exit on at::_ops::*::call/redispatch,
 * per-thread op stacks, aggregation in maps, optional record stream, and
 * the exception-unwind hooks that keep return probes safe.
 *
 * Exits are observed in one of two ways (see docs/exception-safety.md):
 *  - return mode: a uretprobe link on every op; before any unwinder walks a
 *    thread's stack the unwind hook asks the ptrace guard (user space) to
 *    put the original return addresses back;
 *  - infer mode: entry probes only; a frame is closed when the thread next
 *    enters an op (or catches an exception) at or above its stack slot.
 * Both modes also close frames by the stack-pointer rule, so a frame that
 * an exception unwound is never left open to corrupt later timings.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "tbpf_abi.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 tbpf_mode = 0;      /* enum tbpf_mode_flags */
const volatile __u32 targ_tgid = 0;      /* one target; 0 = see pid_filter */
const volatile __u32 pid_filter = 0;     /* 1: only pids in `pids` */
const volatile __u32 guard_sig = 23;     /* SIGURG: default action ignore */
const volatile __u64 tramp_page = 0x7fffffffe000ULL; /* [uprobes] page */
/* 1: per-thread state in task-local storage (`thread_tls`), found from the
 * current task without hashing; 0: in the `threads` hash keyed by tid.
 * User space reads a thread's state by tid (the unwind guard), which for
 * task storage needs a pidfd of that thread: pidfd_open(PIDFD_THREAD),
 * Linux 6.9+ (guard_thread_store_ok()). */
const volatile __u32 thread_store = 0;

/* Bumped by user space (the mmapped .bss) when a process's op probes are
 * re-attached: a thread whose frames are older drops them uncounted. */
__u32 pid_gen[TBPF_GEN_SLOTS];

/* Return mode: 1 while every op return probe of the process is attached
 * (set by its unwind guard after attaching them, cleared before it
 * detaches them).  Before and after, an op's exit may not be seen, so the
 * op is entered transparent (OPF_SKIP): no row, no record, no time of its
 * own, instead of a frame closed late as unwound. */
__u8 pid_exits_live[TBPF_GEN_SLOTS];

/* 8 MiB: its data pages are mapped twice into tbpf (32 MB of RSS at 16 MiB);
 * traces with shapes and memory of a dispatch-bound job at ~1 M ops/s drop
 * nothing at 8 MiB and drop at 4 MiB (bench/history.md, the ring-size runs). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tbpf_thread);
} thread_tls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tbpf_thread);
} thread_zero SEC(".maps");

/* The op rows.  Every hash map here is allocated as rows are made
 * (BPF_F_NO_PREALLOC): preallocated, this one alone took
 * 65,536 x 88 B per possible CPU, 370 MB of kernel memory on a 64-CPU
 * host, for the few thousand rows a job makes.  A row is made once per
 * (pid, op, stack, shapes) key; the op path only looks it up, so the run-
 * time allocation is off the per-op cost (docs/benchmark.md, *tbpf's own memory*).
 * Sessions that may infer exits make a row at the op's entry, not at its
 * close (rows_early).
 * Full: CNT_STAT_FULL ("BPF maps full" at the end of a run). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tbpf_opkey);
	__type(value, struct tbpf_opstat);
} opstats SEC(".maps");

/* The zeroed value new rows of opstats and ophist are made from: never
 * written.  As stack copies (tbpf_hist 192 bytes, tbpf_opstat 88) they
 * put pop_frame's bpf_loop() steps over the verifier's 512-byte stack once
 * a kernel adds a callback's stack to its caller's (seen on 6.18.44:
 * "combined stack size of 2 calls is 624"). */
union tbpf_zero_row {
	struct tbpf_opstat stat;
	struct tbpf_hist hist;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, union tbpf_zero_row);
} zero_row SEC(".maps");

/* zero_row's value (NULL never happens: an array's one slot). */
static __always_inline const void *zero_value(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&zero_row, &k);
}

/* The target processes (pid_filter) and, per CPU, each one's op-probe
 * hits: the overhead budget estimates every target's probe cost from its
 * own hits (userspace/fleet/budget.c), not from the global CNT_ENTRIES. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u64);
} pids SEC(".maps");

/* Threads the ptrace guard has seized (tid -> 1) and repairs requested. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u8);
} guard_tids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u64);
} guard_req SEC(".maps");

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

#include "hist.bpf.h"
#include "bwstack.bpf.h"
#define HAVE_BWSTACK 1

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

#include "shapes.bpf.h"
#include "retaddr.bpf.h"

#if __has_include("pystack.bpf.h")
#include "pystack.bpf.h"
#define HAVE_PYSTACK 1
#endif

/* ==== scope names: record_function scopes, PyNodes ======== */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_scope_name);
} scope_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tbpf_scope_name);
} scope_scratch SEC(".maps");

/* The scope id of the name n holds (len bytes, NUL excluded). */
static __always_inline __u32 scope_hash_buf(const struct tbpf_scope_name *n, long len)
{
	__u32 h = 2166136261u;

	for (int i = 0; i < TBPF_SCOPE_NAME_MAX; i++) {
		if (i >= len)
			break;
		h = (h ^ (__u8)n->name[i]) * 16777619u;
	}
	return TBPF_SCOPE_ID_BASE | (h & TBPF_SCOPE_ID_MASK);
}

/* Read the C string at p into n and hash it: the scope id, 0 when it is
 * empty or unreadable, or when want_len >= 0 and the string's length is
 * not want_len (a std::string's own length: the NUL exactly at its end). */
static __always_inline __u32 scope_hash_name(__u64 p, long want_len, struct tbpf_scope_name *n)
{
	long got;

	got = bpf_probe_read_user_str(n->name, sizeof(n->name), (void *)p);
	if (got <= 1)
		return 0;
	if (want_len >= 0 &&
	    (want_len < TBPF_SCOPE_NAME_MAX - 1 ? got != want_len + 1 : got != TBPF_SCOPE_NAME_MAX))
		return 0;
	return scope_hash_buf(n, got - 1);
}

/* The first time the name `id` is seen: into scope_names (live) and a
 * REC_SCOPE_NAME record (captures). */
static __always_inline void scope_name_note(__u32 pid, __u32 tid, __u64 now, __u32 id,
					    const struct tbpf_scope_name *n)
{
	struct rec_scope_name *r;

	if (bpf_map_update_elem(&scope_names, &id, n, BPF_NOEXIST) ||
	    !(tbpf_mode & TBPF_MODE_RECORD))
		return;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		cnt_add(CNT_DROPS, 1);
		return;
	}
	r->h.type = REC_SCOPE_NAME;
	r->h.size = sizeof(*r);
	r->h.tid = tid;
	r->h.ts_ns = now;
	r->pid = pid;
	r->scope_id = id;
	__builtin_memcpy(r->name, n->name, sizeof(r->name));
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tbpf_vtkey);
	__type(value, __u32);
} node_evals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_pynode);
} py_nodes SEC(".maps");

/* The row of a custom autograd.Function's backward node (a PyNode at
 * `node`; tbpf_pynode in abi/autograd.h): Py_TYPE(obj)->tp_name, with `eval`
 * the evaluate_function row of it.  0 when the process has no PyNode
 * layout, or the object does not read. */
static __always_inline __u32 pynode_row(const struct tbpf_pynode *pn, __u32 pid, __u32 tid,
					__u64 now, __u64 node, bool eval)
{
	struct tbpf_scope_name *n;
	__u64 obj = 0, type = 0, name = 0;
	__u32 zero = 0, id;
	long got;

	if (bpf_probe_read_user(&obj, sizeof(obj), (void *)(node + pn->obj_off)) || !obj ||
	    bpf_probe_read_user(&type, sizeof(type), (void *)(obj + TBPF_PYOBJ_TYPE)) || !type ||
	    bpf_probe_read_user(&name, sizeof(name), (void *)(type + TBPF_PYTYPE_TP_NAME)) || !name)
		return 0;
	n = bpf_map_lookup_elem(&scope_scratch, &zero);
	if (!n)
		return 0;
	if (eval) {
		__builtin_memcpy(n->name, TBPF_PYNODE_EVAL_PREFIX, TBPF_PYNODE_EVAL_PREFIX_LEN);
		got = bpf_probe_read_user_str(n->name + TBPF_PYNODE_EVAL_PREFIX_LEN,
					      TBPF_SCOPE_NAME_MAX - TBPF_PYNODE_EVAL_PREFIX_LEN,
					      (void *)name);
		if (got <= 1)
			return 0;
		got += TBPF_PYNODE_EVAL_PREFIX_LEN;
	} else {
		got = bpf_probe_read_user_str(n->name, TBPF_SCOPE_NAME_MAX, (void *)name);
		if (got <= 1)
			return 0;
	}
	id = scope_hash_buf(n, got - 1);
	scope_name_note(pid, tid, now, id, n);
	return id;
}

/* The evaluate_function row of the node `node` (its class, from its
 * vtable pointer; a PyNode's from its Python object), else `dflt`. */
static __always_inline __u32 node_eval_id(__u32 pid, __u32 tid, __u64 now, __u64 node, __u32 dflt)
{
	struct tbpf_vtkey k = { .pid = pid };
	struct tbpf_pynode *pn;
	__u32 *id, py;

	if (!node || bpf_probe_read_user(&k.vtable, sizeof(k.vtable), (void *)node))
		return dflt;
	id = bpf_map_lookup_elem(&node_evals, &k);
	if (id)
		return *id;
	pn = bpf_map_lookup_elem(&py_nodes, &pid);
	if (!pn || !pn->vtable || pn->vtable != k.vtable)
		return dflt;
	py = pynode_row(pn, pid, tid, now, node, true);
	return py ? py : dflt;
}

/* ==== boxed calls (TorchScript, torch.ops; boxedop.h) ================= */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tbpf_boxkey);
	__type(value, struct tbpf_boxop);
} boxed_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct tbpf_boxkey);
	__type(value, struct tbpf_boxop);
} boxed_defs SEC(".maps");

struct boxed_scratch {
	char name[TBPF_BOXED_NAME_MAX];
	char ovl[TBPF_BOXED_OVL_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct boxed_scratch);
} boxed_scratch_map SEC(".maps");

/* Read a libstdc++ std::string at p into buf (size bytes); its length,
 * or -1 when it does not read as one. */
static __always_inline long boxed_str(__u64 p, char *buf, __u32 size)
{
	__u64 str[2] = {};
	long got;

	if (bpf_probe_read_user(str, sizeof(str), (void *)p))
		return -1;
	if ((long)str[1] < 0 || (long)str[1] > 1 << 20)
		return -1;
	if (str[1] == 0)
		return 0;
	got = bpf_probe_read_user_str(buf, size, (void *)str[0]);
	if (got <= 0)
		return -1;
	return got - 1;
}

/* The operator of a boxed call: _M_invoke(const _Any_data &f, Stack &s):
 * *f is the lambda, whose first word is the OperatorHandle's OperatorDef*;
 * the OperatorDef begins with the OperatorEntry's c10::OperatorName
 * {std::string name, overload_name}.  Cached per OperatorDef*; op_id 0 when
 * it is no operator of tbpf's table. */
static __always_inline struct tbpf_boxop boxed_op(__u32 pid, __u64 any)
{
	struct tbpf_boxkey k = { .pid = pid };
	struct tbpf_boxop none = {}, *v;
	struct boxed_scratch *b;
	__u64 lambda = 0, h = 14695981039346656037ULL;
	__u32 zero = 0;
	long nl, ol;

	if (bpf_probe_read_user(&lambda, sizeof(lambda), (void *)any) || !lambda ||
	    bpf_probe_read_user(&k.key, sizeof(k.key), (void *)lambda) || !k.key)
		return none;
	v = bpf_map_lookup_elem(&boxed_defs, &k);
	if (v)
		return *v;
	b = bpf_map_lookup_elem(&boxed_scratch_map, &zero);
	if (!b)
		return none;
	nl = boxed_str(k.key, b->name, sizeof(b->name));
	ol = boxed_str(k.key + 32, b->ovl, sizeof(b->ovl));
	if (nl > 0 && ol >= 0) {
		struct tbpf_boxkey nk = { .pid = pid };

		for (int i = 0; i < TBPF_BOXED_NAME_MAX - 1; i++) {
			if (i >= nl)
				break;
			h = (h ^ (__u8)b->name[i]) * 1099511628211ULL;
		}
		h = (h ^ 0) * 1099511628211ULL;
		for (int i = 0; i < TBPF_BOXED_OVL_MAX - 1; i++) {
			if (i >= ol)
				break;
			h = (h ^ (__u8)b->ovl[i]) * 1099511628211ULL;
		}
		nk.key = h;
		v = bpf_map_lookup_elem(&boxed_names, &nk);
		if (v)
			none = *v;
	}
	cnt_add(CNT_BOXED_DEFS, 1);
	bpf_map_update_elem(&boxed_defs, &k, &none, BPF_ANY);
	return none;
}

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

/* ==== scopes (record_function; see abi/scope.h) ============== */

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

/* TBPF_FLOOR (measurement only, bench/probe_cost.py): empty op and
 * module-call programs, so a run measures what the traps alone cost. */
SEC("uprobe")
int BPF_KPROBE(tbpf_op_entry)
{
#ifdef TBPF_FLOOR
	return 0;
#endif
	return op_enter(ctx);
}

SEC("uprobe")
int BPF_KPROBE(tbpf_op_exit)
{
#ifdef TBPF_FLOOR
	return 0;
#endif
	return op_exit(ctx);
}

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

#include "runhold.bpf.h"
#include "mem.bpf.h"
#if __has_include("cuda.bpf.h")
#include "cuda.bpf.h"
#endif
#if __has_include("agent.bpf.h")
#include "agent.bpf.h"
#endif
