/* abi/ops.h - op aggregation maps shared by BPF and user space: the
 * per-thread op stack (tbpf_thread, tbpf_frame), the op rows (opkey,
 * opstat), the boxed calls' operator rows, the kernel's hijacked return
 * addresses, global counters, latency histograms, the attach generation
 * and `tbpf run`'s hold.
 */
#ifndef TBPF_ABI_OPS_H
#define TBPF_ABI_OPS_H

#include "core.h"
#include "mem.h"

#define TBPF_PYSEEN_N 32          /* per-thread known stack ids (tbpf_thread) */
#define TBPF_ROWSEEN_N 32         /* per-thread rows known made (tbpf_thread) */

/* boxed_names map: FNV-1a 64 of an operator's "name\0overload" (its
 * c10::OperatorName, "aten::linear" "") in a process -> its row; the BPF
 * side keeps the OperatorDef* it read it from in boxed_defs */
struct tbpf_boxkey {
	__u32 pid;
	__u32 pad;
	__u64 key;        /* boxed_names: the hash; boxed_defs: the OperatorDef* */
};
struct tbpf_boxop {
	__u32 op_id;      /* 0: not an operator tbpf names (a SKIP frame) */
	__u32 name_id;    /* TBPF_COOKIE_NAMEID of its ::call */
};

#define TBPF_BOXED_NAME_MAX 64      /* name bytes hashed ("aten::...") */
#define TBPF_BOXED_OVL_MAX 32       /* overload bytes hashed */

/* The per-thread op stack: one frame per open op or scope. */
struct tbpf_frame {
	__u64 start_ns;
	__u64 child_ns;  /* time in nested (counted) ops */
	__u64 sp;        /* stack pointer at entry: address of the return slot */
	__u64 ra;        /* original return address read at entry; 0 in
			  * return mode unless the frame shares a slot
			  * (struct tbpf_retaddr has it then) */
	__u32 op_id;
	__u32 flags;
	__u32 name_id;
	__u32 nchild;    /* counted ops closed directly inside this one */
	__u32 dup_op;    /* the first such child when it has this op's name */
	__u32 pad;
	__u64 dup_self, dup_total;
	__u64 pystack;   /* Python stack id its row is keyed by */
	__u64 scope;     /* OPF_SCOPE: the at::RecordFunction's address */
	__u64 shape;     /* input shape id its row is keyed by */
	__u64 dup_shape; /* the folded child's */
	__u64 bwseq;     /* OPF_BWPEND: its sequence number at entry */
	/* --profile-memory: bytes (allocated - freed) per enum tbpf_mem_dev,
	 * by this op alone and with its children; the dup child's (folded) */
	__s64 mem_self[MEM_DEV_N], mem_total[MEM_DEV_N];
	__s64 dup_mem_self[MEM_DEV_N], dup_mem_total[MEM_DEV_N];
};

/* The kernel's own record of one hijacked return address (the uretprobe
 * return instance), as the `tbpf_ret_addrs` task iterator writes them for
 * one thread: a header (TBPF_RA_HEADER, stack and ret 0) that says the
 * kernel's layout was found, then one record per pending return, innermost
 * first.  In return mode op entry does not read the return address (a
 * user-memory read, ~95 ns of a ~260 ns program, bench/results_floor.md);
 * the guard takes it from here when it writes a slot back. */
#define TBPF_RA_HEADER 1u
#define TBPF_RA_MAX 64     /* the kernel's MAX_URETPROBE_DEPTH */
struct tbpf_retaddr {
	__u32 tid;
	__u32 flags;       /* TBPF_RA_HEADER */
	__u64 stack;       /* the return slot's address (the frame's sp) */
	__u64 ret;         /* the original return address */
};

struct tbpf_thread {
	__u32 pid;
	__u32 depth;      /* frames in use */
	__u32 vdepth;     /* counted (non-skip) frames in use */
	__u32 stack_id;   /* Python stack id of the outermost op */
	__u64 pystack_id; /* full 64-bit id */
	struct tbpf_frame frames[TBPF_MAX_DEPTH];
	__u32 gen;        /* pid_gen of its process when its frames were pushed */
	__u32 busy;       /* an op or scope probe is changing the frames: the infer
			   * sampler, which can interrupt it, keeps off */
	/* a name for the next RecordFunction(RecordScope::FUNCTION) this
	 * thread constructs below pend_sp (tbpf_scope_pend):
	 * TBPF_PEND_* kind, the pointer it reads, the caller's return slot
	 * and its content (the stash is stale once the slot changed) */
	__u32 pend_kind;
	__u32 pend_pad;
	__u64 pend_ptr, pend_sp, pend_ra;
	/* Python stack ids this thread already found in the `pystacks` map
	 * (direct-mapped by id): a hit skips the map lookup.  Valid for the
	 * thread's life: user space deletes a process's stacks only once it
	 * has exited, and the slots are cleared when the tid's process
	 * changes or its probes are re-attached. */
	__u64 pyseen[TBPF_PYSEEN_N];
	/* hashes of the (op, stack, shapes) whose rows this thread made at an
	 * op entry (rows_early, direct-mapped): a hit skips the lookups.
	 * Valid for the thread's life, as pyseen: user space deletes rows
	 * only of processes that exited. */
	__u64 rowseen[TBPF_ROWSEEN_N];
	__u32 bw_nodes;   /* backward node frames open (OPF_BWNODE) */
	__u32 bw_pad;
	/* the last (torch thread, sequence number + 1) it registered */
	__u64 bw_last_thread, bw_last_seq;
	/* 3.11+: the outermost Python frame of the run of frames in one data-
	 * stack chunk its last stack walk found from the innermost one (0:
	 * none): the next capture reads from there to its innermost frame at
	 * once (pystack.bpf.h); the next run's (another chunk) outermost and
	 * innermost frames (0: none), read at once when the walk gets there */
	__u64 py_lo, py_lo2, py_hi2;
};

/* Slots of the per-process attach generation (bpf: pid_gen[pid & mask]).
 * The overhead budget detaches and re-attaches op probes; frames a thread
 * left open at a detach (in infer mode, closed only by its next probed
 * entry) must not be closed and counted inside the next on phase. */
#define TBPF_GEN_SLOTS 4096

/* `tbpf run` holds the command once libtorch_cpu is mapped (runhold.bpf.h):
 * bss run_hold goes ARMED (user space) -> MAPPED -> STOPPED (BPF).
 * `tbpf run --inproc` then sets FIRSTOP and continues it: the
 * next stop (STOPPED) is its first RecordFunction check. */
enum tbpf_run_hold { RUN_HOLD_OFF, RUN_HOLD_ARMED, RUN_HOLD_MAPPED, RUN_HOLD_STOPPED,
		     RUN_HOLD_FIRSTOP };

struct tbpf_opkey {
	__u32 pid;
	__u32 op_id;
	__u64 stack_id;  /* Python stack of the outermost op, 0 = none */
	__u64 shape_id;  /* input shapes (struct tbpf_shape), 0 = none */
};

struct tbpf_opstat {
	__u64 calls;
	__u64 self_ns;
	__u64 total_ns;
	__u64 launches;  /* CUDA launches issued while this op was on top */
	__u64 inferred;  /* exits inferred (entry-only mode or unwinds) */
	__u64 max_ns;
	__u64 folded;    /* of `calls`: the only child of a same-name op, which
			  * torch.profiler's table shows as part of its parent */
	/* --profile-memory: torch.profiler's self_cpu_memory_usage,
	 * cpu_memory_usage, self_cuda_memory_usage, cuda_memory_usage */
	__s64 mem_self[MEM_DEV_N], mem_total[MEM_DEV_N];
};

/* Global counters (per-CPU array index). */
enum tbpf_counter {
	CNT_ENTRIES = 0,
	CNT_EXITS,
	CNT_DROPS,            /* ring buffer full */
	CNT_DEPTH_OVERFLOW,
	CNT_STACK_UNDERFLOW,  /* exit without a matching frame */
	CNT_STALE_POPS,       /* frames closed by the stack-pointer rule */
	CNT_UNWIND_POPS,      /* frames closed at an exception catch */
	CNT_GUARD_SIGNALS,    /* repairs requested from the unwind guard */
	CNT_GUARD_UNSAFE,     /* unwind with hijacked frames and no guard */
	CNT_NO_THREAD_SLOT,   /* thread map full */
	CNT_STAT_FULL,        /* opstats map full */
	CNT_PYSTACK_FAIL,
	CNT_PYSTACK_TRUNC,
	CNT_CUDA_EVENTS,
	CNT_CUDA_NESTED,      /* driver calls made inside a runtime call, skipped */
	CNT_SAMPLE_POPS,      /* infer mode: frames closed by a sample or switch-out */
	CNT_SCOPE_HITS,       /* RecordFunction constructor / end() probe hits */
	CNT_MEM_ALLOCS,       /* allocations seen (--profile-memory) */
	CNT_MEM_FREES,        /* frees charged */
	CNT_MEM_UNKNOWN_FREES,/* frees of memory allocated before attach (or untracked) */
	CNT_MEM_MAP_FULL,     /* allocations not kept: mem_live full */
	CNT_MEM_NO_OP,        /* allocations/frees outside any op ("[memory]") */
	CNT_MODCALLS,         /* nn.Module calls counted (TBPF_MODCALL_ID rows) */
	CNT_SHAPE_BAD,        /* tensors whose sizes did not multiply to numel */
	CNT_SHAPE_FULL,       /* shape table full: calls counted without shapes */
	CNT_BOXED_DEFS,       /* boxed calls' operators looked up by name (once
			       * per OperatorDef, boxed_defs) */
	CNT_SAMPLE_DEFERRED,  /* infer mode: returned frames a sample or switch-out
			       * left to the next op probe, a row of theirs
			       * missing (rows_early) */
	CNT_PY_CAPTURES,      /* Python stacks walked */
	CNT_PY_FRAME_READS,   /* their frames read one by one (not in the window) */
	CNT_MAX
};

/* Op latency histogram (bpf/hist.bpf.h, map `ophist`): per (pid, op) the
 * inclusive duration of every counted call in log2 buckets.  Bucket 0
 * holds calls under 2^TBPF_HIST_MIN_SHIFT ns; bucket i (0 < i < last)
 * holds [2^(MIN_SHIFT+i-1), 2^(MIN_SHIFT+i)) ns; the last one everything
 * from 2^(MIN_SHIFT+BUCKETS-2) ns up.  So the upper bound of bucket i
 * (i < last) is 2^(MIN_SHIFT+i) ns: 1.024 us .. 4.29 s. */
#define TBPF_HIST_MIN_SHIFT 10
#define TBPF_HIST_BUCKETS 24

struct tbpf_histkey {
	__u32 pid;
	__u32 op_id;
};

struct tbpf_hist {
	__u64 buckets[TBPF_HIST_BUCKETS];
};

#endif /* TBPF_ABI_OPS_H */
