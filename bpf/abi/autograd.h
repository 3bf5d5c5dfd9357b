/* abi/autograd.h - backward (autograd) nodes, shared by BPF and user
 * space: evaluate_function rows of node classes (node_evals), custom
 * autograd.Function nodes (PyNode, py_nodes) and --group-by-stack's
 * backward stacks in the uprobe mode (bpf/bwstack.bpf.h).
 */
#ifndef TBPF_ABI_AUTOGRAD_H
#define TBPF_ABI_AUTOGRAD_H

#include "core.h"

/* node_evals map: a node class's vtable address in a process -> the op id
 * of its "autograd::engine::evaluate_function: <Node>" row */
struct tbpf_vtkey {
	__u32 pid;
	__u32 pad;
	__u64 vtable;
};

/* --group-by-stack in the uprobe mode (bwstack.bpf.h): what
 * torch.profiler's _set_backward_stacktraces needs, read from outside.
 * Per process: libtorch_cpu's TLS module id and where its thread_locals
 * sit in the module's block (discover/tlsvar.h: the autograd sequence
 * counter at::sequence_number::peek() reads, torch's thread id
 * RecordFunction::currentThreadId() reads), and a Node's sequence_nr_ and
 * thread_id_ (per torch version, checked by tests/unit/rf_layout.sh). */
struct tbpf_bwproc {
	__u64 modid;
	__u32 seq_off, tid_off;
	__u32 node_seq_off, node_tid_off;
	/* libc10's module id and where its thread's excluded dispatch keys
	 * sit (raw_local_dispatch_key_set.excluded_): an op entered with
	 * autograd_mask excluded (below autograd) has no sequence number */
	__u64 c10_modid;
	__u32 c10_excl_off, pad;
	__u64 autograd_mask;
	/* libc10's grad mode (c10::AutogradState, same block): an op entered
	 * with its guard set and (byte & grad_mask) == 0 (torch.no_grad())
	 * has no sequence number either */
	__u32 grad_guard_off, grad_off;
	__u64 grad_mask;
};
/* The first forward op of (pid, torch thread, sequence number): its stack */
struct tbpf_bwfwd_key {
	__u32 pid, pad;
	__u64 thread;
	__u64 seq;
};
/* A derived stack the BPF side keyed rows by (value: its parts, the low
 * 32 bits of the op's own stack and of the forward op's; found 0: no
 * forward op, an empty Source Location) */
struct tbpf_bwdkey {
	__u32 pid, id;   /* id: bwstack_derive_id; the stack's id is
			  * TBPF_BWSTACK_ID(id) */
};
struct tbpf_bwderived {
	__u32 own, fwd, found, pad;
};
#define TBPF_BWSTACK_ID(d) (0xbac7ULL << 48 | (__u64)(d))
/* glibc x86_64: tcbhead_t.dtv at fsbase + 8; 16-byte dtv_t entries,
 * dtv[-1].counter the number of slots, (void *)-1 an unallocated block */
#define TBPF_TCB_DTV 8
#define TBPF_DTV_ENTRY 16

/* bwstack_derive_id's hash (model/bwstack.h), shared with BPF: never 0,
 * never own */
static inline __u32 tbpf_bw_derive(__u32 own, __u32 fwd, __u32 found)
{
	__u64 h = 0x9e3779b97f4a7c15ULL ^ own;
	__u32 d;

	h = (h ^ ((__u64)fwd << 1 | (found ? 1 : 0))) * 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 31;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 29;
	d = (__u32)h;
	if (!d || d == own)
		d = (__u32)(h >> 32) | 1;
	return d == own ? own ^ 0x80000000u : d;
}

/* py_nodes map: pid -> where its PyNodes keep their Python object.  A
 * PyNode's row is Py_TYPE(obj)->tp_name ("MyFnBackward"), obj at
 * PyNode+obj_off (derived from PyNode::name()'s code, discover/pynode.h);
 * the evaluate_function of a Node whose vtable is `vtable` gets
 * TBPF_PYNODE_EVAL_PREFIX + that name.  Both rows are op rows with ids in
 * the scope range (named through scope_names like scopes), but their
 * frames are ordinary op frames (exits by return probe). */
struct tbpf_pynode {
	__u64 vtable;     /* PyNode's vtable in the process; 0: unknown */
	__u32 obj_off;
	__u32 pad;
};
#define TBPF_PYNODE_EVAL_PREFIX "autograd::engine::evaluate_function: "
#define TBPF_PYNODE_EVAL_PREFIX_LEN 37
#define TBPF_PYTYPE_TP_NAME 24    /* offsetof(PyTypeObject, tp_name), 3.8 .. 3.13 */
#define TBPF_PYOBJ_TYPE 8         /* offsetof(PyObject, ob_type) */

#endif /* TBPF_ABI_AUTOGRAD_H */
