/* abi/core.h - record stage, shared by BPF and user space: the record
 * header and types every feature's records start with, the op records, the
 * settings (mode flags), the op probes' attach cookie, and the owner
 * channel both in-process agents use.
 *
 * Everything under bpf/abi/ is fixed-size, naturally aligned and a
 * multiple of 8 bytes so it can be copied between the kernel, memory and
 * the capture file without packing surprises.  bpf/tbpf_abi.h includes
 * every feature header; a feature header includes this one.
 */
#ifndef TBPF_ABI_CORE_H
#define TBPF_ABI_CORE_H

#ifdef __BPF__
/* vmlinux.h provides __u8 .. __u64 */
#else
#include <linux/types.h>
#endif

#define TBPF_ABI_VERSION 1

/* Per-thread op stack depth kept in BPF: 64 is also the kernel's uretprobe
 * nesting limit (MAX_URETPROBE_DEPTH), so every hijacked return address of
 * an op frame is recorded for the unwind guard. Deeper calls are counted as
 * overflow and neither timed nor counted.  Real PyTorch nesting seldom
 * exceeds 12. */
#define TBPF_MAX_DEPTH 64

/* The attach cookie of an op probe: op id in the low 32 bits, flags above. */
#define TBPF_COOKIE_REDISPATCH (1ULL << 32)
#define TBPF_COOKIE_OPID(c) ((__u32)(c))
/* Engine::evaluate_function: the row's op id is the node
 * class's, from `node_evals` (vtable of the Node* in rdx) */
#define TBPF_COOKIE_NODE_EVAL (1ULL << 33)
/* The boxed-call entry (TorchScript, torch.ops): the row is the
 * operator's whose OperatorHandle the call carries (boxed_names) */
#define TBPF_COOKIE_BOXED (1ULL << 34)
/* torch::autograd::PyNode::apply (libtorch_python): a custom
 * autograd.Function's backward node, one C++ class for every Python
 * Function; the row is named from the Python object (py_nodes) */
#define TBPF_COOKIE_PYNODE (1ULL << 35)
/* a node class's apply (OPSYM_NODE; `this` in rsi): a backward node, whose
 * ops take its forward op's stack with --group-by-stack (bwstack.bpf.h) */
#define TBPF_COOKIE_NODE (1ULL << 36)
/* an op without tensor arguments (a factory op, opsym_has_tensor_arg): no
 * sequence number in torch, so no forward op for backward stacks */
#define TBPF_COOKIE_NOTENSOR (1ULL << 37)
/* bits 40..63: the op's name id (same for every overload of a name), for
 * torch.profiler's rule that an op whose only child has its own name is
 * shown as one op (aten::sum -> aten::sum.dim_IntList) */
#define TBPF_COOKIE_NAME_SHIFT 40
#define TBPF_COOKIE_NAMEID(c) ((__u32)((c) >> TBPF_COOKIE_NAME_SHIFT))

/* ---- settings (BPF .rodata, set before load) ------------------------ */
enum tbpf_mode_flags {
	TBPF_MODE_RECORD = 1 << 0,   /* stream op records to the ring buffer */
	TBPF_MODE_EXITS = 1 << 1,    /* return probes attached: exact exits */
	TBPF_MODE_PYSTACK = 1 << 2,  /* walk Python stacks at outermost ops */
	TBPF_MODE_GUARD = 1 << 3,    /* ptrace unwind guard active */
	TBPF_MODE_MEMORY = 1 << 4,   /* --profile-memory: allocator probes,
				      * REC_MEM records, per-op bytes */
	TBPF_MODE_SHAPES = 1 << 5,   /* read input shapes at op entry */
	TBPF_MODE_INPROC = 1 << 6,   /* capture: ops from the RecordFunction agent */
	TBPF_MODE_BWSTACK = 1 << 7,  /* --group-by-stack: backward ops' stacks
				      * (bwstack.bpf.h, struct tbpf_bwproc) */
};

/* ---- record types ---------------------------------------------------- */
enum tbpf_rec_type {
	REC_OP_ENTER = 1,
	REC_OP_EXIT = 2,
	REC_PYSTACK = 3,    /* a new Python stack (deduplicated by id) */
	REC_LAUNCH = 4,     /* CUDA kernel / graph launch */
	REC_MEMOP = 5,      /* CUDA copy or set */
	REC_SYNC = 6,       /* host blocked in a CUDA synchronization */
	REC_ALLOC = 7,      /* CUDA allocation or free */
	REC_UNWIND = 8,     /* frames closed by an exception unwind */
	REC_GPU = 9,        /* CUPTI device activity (kernel/memcpy/memset) */
	REC_SCOPE_NAME = 10,/* a record_function scope's name, once per name */
	REC_MEM = 11,       /* an allocation or free torch.profiler would report */
	REC_MODCALL = 12,   /* an nn.Module call (struct rec_op, op_id
			     * TBPF_MODCALL_ID, stack_id: the module's stack) */
	REC_SHAPE = 13,     /* an input-shape list, once per shape id */
	REC_TYPE_MAX
};

/* Exit flags (rec_op.flags and frame flags). */
enum tbpf_op_flags {
	OPF_INFERRED = 1 << 0,  /* exit time inferred from the stack pointer */
	OPF_UNWOUND = 1 << 1,   /* closed by an exception unwind */
	OPF_SKIP = 1 << 2,      /* redispatch nested directly in its own call */
	OPF_REDISPATCH = 1 << 3,/* entered through ::redispatch */
	OPF_HIJACKED = 1 << 4,  /* return address replaced by uretprobe */
	OPF_SCOPE = 1 << 5,     /* a record_function scope, not an op call */
	OPF_USER = 1 << 6,      /* with OPF_SCOPE: a USER_SCOPE RecordFunction
				 * (Kineto's user_annotation; else cpu_op) */
	OPF_BWNODE = 1 << 7,    /* a backward node's frame: its ops are keyed
				 * by a derived stack (bwstack.bpf.h) */
	OPF_BWPEND = 1 << 8,    /* a forward op entered before its thread had
				 * a torch thread id: registered at its exit */
};

struct rec_hdr {
	__u16 type;
	__u16 size;  /* whole record, bytes, multiple of 8 */
	__u32 tid;
	__u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
};

struct rec_op {
	struct rec_hdr h;
	__u32 pid;
	__u32 op_id;
	__u16 depth;   /* visible nesting depth, 0 = outermost */
	__u16 flags;   /* enum tbpf_op_flags */
	__u32 stack_id; /* low 32 bits of the Python stack id (0 = none) */
};

/* REC_OP_ENTER with input shapes (--record-shapes): h.size is
 * sizeof(struct rec_op_shape), the rec_op followed by the shape id of its
 * REC_SHAPE record.  Without shapes every op record is a plain rec_op. */
struct rec_op_shape {
	struct rec_op op;
	__u64 shape_id;   /* 0 = none read */
};

/* The owner channel: how an in-process agent (the RecordFunction
 * agent, the CUPTI agent) knows that the tbpf that started it is gone, in
 * any pid namespace, with no pid.  On a CHANNEL request the agent makes a
 * pipe (O_CLOEXEC) and offers its write end here; tbpf takes a copy with
 * pidfd_getfd(2), checks the inode, writes the fd number into `taken` and
 * sends START; the agent then closes its own write end and polls the read
 * end, which reports POLLHUP exactly when tbpf's copy is closed: tbpf
 * stopped, exited, was killed or crashed (agent/owner_watch.h,
 * userspace/attach/owner_chan.c). */
struct tbpf_owner_chan {
	__s32 wfd;     /* (agent) the write end offered, -1: none */
	__s32 taken;   /* (tbpf) the write end it holds a copy of, before START */
	__u64 ino;     /* (agent) the pipe's inode, for tbpf's check */
};

_Static_assert(sizeof(struct rec_op_shape) % 8 == 0, "record ABI");

#endif /* TBPF_ABI_CORE_H */
