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
 *
 * One compilation unit: this file holds the settings, the maps every part
 * shares and the op programs; each feature is a *.bpf.h part included
 * below, in this order (a part uses what the parts above it define):
 *   common.bpf.h   counters, pid filter, thread state, op records and rows
 *   hist.bpf.h     op latency histograms
 *   bwstack.bpf.h  backward ops' forward stacks (--group-by-stack)
 *   frames.bpf.h   closing op frames (pop_frame, pop_below, pop_returned)
 *   shapes.bpf.h   input shapes at op entry (--record-shapes)
 *   retaddr.bpf.h  the kernel's hijacked return addresses, for the guard
 *   pystack.bpf.h  the Python stack walker
 *   opnames.bpf.h  rows named at run time: scopes, PyNodes, boxed calls
 *   ops.bpf.h      op entry and exit
 *   scopes.bpf.h   record_function scopes
 *   modcall.bpf.h  nn.Module calls
 *   unwind.bpf.h   exception unwinds, infer mode's samples, thread exit
 *   runhold.bpf.h  `tbpf run`'s hold once libtorch is mapped
 *   mem.bpf.h      --profile-memory's allocator probes
 *   cuda.bpf.h     CUDA runtime and driver host probes
 *   agent.bpf.h    the CUPTI agent's record transport
 * The records and map layouts shared with user space: tbpf_abi.h (abi/).
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

#include "common.bpf.h"

#include "hist.bpf.h"
#include "bwstack.bpf.h"
#define HAVE_BWSTACK 1

#include "frames.bpf.h"

#include "shapes.bpf.h"
#include "retaddr.bpf.h"

#if __has_include("pystack.bpf.h")
#include "pystack.bpf.h"
#define HAVE_PYSTACK 1
#endif

#include "opnames.bpf.h"
#include "ops.bpf.h"
#include "scopes.bpf.h"
#include "modcall.bpf.h"

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

#include "unwind.bpf.h"

#include "runhold.bpf.h"
#include "mem.bpf.h"
#if __has_include("cuda.bpf.h")
#include "cuda.bpf.h"
#endif
#if __has_include("agent.bpf.h")
#include "agent.bpf.h"
#endif
