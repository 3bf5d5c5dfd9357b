/* tbpf_abi.h - the one header shared by BPF programs and user space.
 *
 * Record layouts (ring buffer and capture file), map keys and values, and
 * the constants both halves must agree on.  Everything here is fixed-size,
 * naturally aligned and a multiple of 8 bytes so it can be copied between
 * the kernel, memory and the capture file without packing surprises.
 */
#ifndef TBPF_ABI_H
#define TBPF_ABI_H

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
/* Python frames captured per stack. */
#define TBPF_MAX_PYFRAMES 32
/* Steps of a stack walk: 3.12+'s entry shims (a frame per call made from
 * C: each nn.Module call through tp_call and each f(*args) adds one, up to
 * three a module level) take steps but are not kept. */
#define TBPF_PYWALK_STEPS (2 * TBPF_MAX_PYFRAMES)
#define TBPF_PYSEEN_N 32          /* per-thread known stack ids (tbpf_thread) */
#define TBPF_ROWSEEN_N 32         /* per-thread rows known made (tbpf_thread) */

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

struct tbpf_pyframe {
	__u64 code;    /* PyCodeObject * in the target */
	__u64 self;    /* first local when it is `self`, else 0 */
	__u32 lasti;   /* instruction offset (bytes) for line numbers */
	__u32 flags;
};

struct rec_pystack {
	struct rec_hdr h;
	__u32 pid;
	__u32 nframes;
	__u64 stack_id;
	struct tbpf_pyframe frames[TBPF_MAX_PYFRAMES]; /* innermost first */
};

/* ==== BEGIN scopes (record_function) ==========================
 * A `record_function` scope (Python torch.profiler.record_function, and the
 * ones PyTorch opens itself: Optimizer.step#..., enumerate(DataLoader)#...)
 * is an at::RecordFunction constructed with RecordScope::USER_SCOPE.  The
 * BPF side opens it as a frame on the thread's op stack (flag OPF_SCOPE,
 * no return slot) at the constructor and closes it at RecordFunction::end
 * of the same object, so ops run inside it are its children, and its rows
 * and records are op rows and REC_OP_ENTER/EXIT records whose op id is in
 * the scope range: TBPF_SCOPE_ID_BASE | (FNV-1a 32 of the name & MASK).
 * The name reaches user space through the `scope_names` map (live) and a
 * REC_SCOPE_NAME record the first time the name is seen (captures). */
/* nn.Module calls (torchprof's Count): nn.Module._call_impl calls
 * torch._C._get_tracing_state() once per module call, which calls
 * torch::jit::tracer::getTracingState() in libtorch_cpu.  A probe there
 * whose innermost Python frame is `_call_impl` counts one call of the
 * module that frame's `self` is, in opstats rows with this op id keyed by
 * the Python stack (whose layers end at that module). */
#define TBPF_MODCALL_ID 0x7fffffffu
#define TBPF_MODCALL_FUNC "_call_impl"

#define TBPF_SCOPE_ID_BASE 0x80000000u
#define TBPF_SCOPE_ID_MASK 0x7fffffffu
#define TBPF_IS_SCOPE_ID(id) (((__u32)(id) & TBPF_SCOPE_ID_BASE) != 0)
#define TBPF_SCOPE_NAME_MAX 128   /* bytes with the NUL; longer names are cut */
#define TBPF_RECORD_SCOPE_USER 7  /* at::RecordScope::USER_SCOPE (1.13 .. 2.8) */

struct tbpf_scope_name {
	char name[TBPF_SCOPE_NAME_MAX];
};

struct rec_scope_name {
	struct rec_hdr h;
	__u32 pid;
	__u32 scope_id;   /* op id of the scope's rows and records */
	char name[TBPF_SCOPE_NAME_MAX];
};
/* node_evals map: a node class's vtable address in a process -> the op id
 * of its "autograd::engine::evaluate_function: <Node>" row */
struct tbpf_vtkey {
	__u32 pid;
	__u32 pad;
	__u64 vtable;
};
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
/* py_nodes map: pid -> where its PyNodes keep their Python object.  A
 * PyNode's row is Py_TYPE(obj)->tp_name ("MyFnBackward"), obj at
 * PyNode+obj_off (derived from PyNode::name()'s code, discover/pynode.h);
 * the evaluate_function of a Node whose vtable is `vtable` gets
 * TBPF_PYNODE_EVAL_PREFIX + that name.  Both rows are op rows with ids in
 * the scope range (named through scope_names like scopes), but their
 * frames are ordinary op frames (exits by return probe). */
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

struct tbpf_pynode {
	__u64 vtable;     /* PyNode's vtable in the process; 0: unknown */
	__u32 obj_off;
	__u32 pad;
};
#define TBPF_PYNODE_EVAL_PREFIX "autograd::engine::evaluate_function: "
#define TBPF_PYNODE_EVAL_PREFIX_LEN 37
#define TBPF_PYTYPE_TP_NAME 24    /* offsetof(PyTypeObject, tp_name), 3.8 .. 3.13 */
#define TBPF_PYOBJ_TYPE 8         /* offsetof(PyObject, ob_type) */
#define TBPF_BOXED_NAME_MAX 64      /* name bytes hashed ("aten::...") */
#define TBPF_BOXED_OVL_MAX 32       /* overload bytes hashed */
/* ==== END scopes ======================================================== */

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

/* ==== BEGIN inproc (RecordFunction agent; docs/inproc.md) =====
 * agent/inproc.c (libtbpf_inproc.so, loaded by --inproc) registers global
 * RecordFunction callbacks and writes one tbpf_inproc_rec per start and end
 * into a ring in its own memory; tbpf reads it with process_vm_readv and
 * turns each slot into a REC_OP_ENTER/EXIT record.  Op ids: user scopes
 * TBPF_SCOPE_ID_BASE | hash, every other RecordFunction
 * TBPF_INPROC_ID_BASE | hash (hash: agent/inproc.c name_hash(), 32 bits
 * of the name, an opaque id: names travel in the name table). */
#define TBPF_INPROC_MAGIC 0x636f72706e696274ULL  /* "tbinproc" */
#define TBPF_INPROC_VERSION 11  /* 2: shapes (record 32 bytes, shape table);
				 * 3: records carry a Python stack id;
				 * 4: sequence numbers (INPROC_SEQ, want_seq);
				 * 5: module calls counted in-process (INPROC_MODCALL);
				 * 6: the input layout carries Input type's;
				 * 7: and where nested/symbolic tensors show
				 * 8: threads' own rings (tbpf_inproc_shard)
				 * 9: ops named by their schema pointer
				 * (INPROC_LAYOUT_RFCB10_FN, fn_on)
				 * 10: the owner channel (chan, INPROC_REQ_CHANNEL) */
#define TBPF_INPROC_ID_BASE 0x40000000u
#define TBPF_INPROC_ID_MASK 0x3fffffffu
#define TBPF_INPROC_SLOTS (1u << 18)     /* ring slots (8 MiB), also of each thread's ring */
#define TBPF_INPROC_SHARDS 4             /* rings one thread each owns (version 8) */
#define TBPF_INPROC_NAMES 8192           /* name table entries */
#define TBPF_INPROC_NAME_MAX 128         /* bytes with the NUL */
#define TBPF_INPROC_STACK 64             /* RecordFunctions open per thread */
#define TBPF_INPROC_SHAPES 8192          /* shape lists (struct tbpf_shape) kept */

/* INPROC_SEQ (--group-by-stack, want_seq): about the ENTER that follows
 * it on the same thread: ts_ns holds the RecordFunction's sequence number
 * (int64, -1 none), hash the low and shape the high 32 bits of a torch
 * thread id, flags enum tbpf_inproc_seq_kind:
 *   INPROC_SEQ_FWD  the first RecordFunction of this sequence number on
 *                   this thread outside a backward-function scope: thread =
 *                   its RecordFunction::threadId(), stack = its stack
 *   INPROC_SEQ_BWD  a backward-function scope (an autograd node): thread =
 *                   its forwardThreadId()
 * (torch.profiler's key for backward ops' stacks, model/bwstack.h) */
enum tbpf_inproc_kind { INPROC_ENTER = 1, INPROC_EXIT = 2, INPROC_SEQ = 3, INPROC_MODCALL = 4 };
/* INPROC_MODCALL (version 5): an nn.Module call counted by the agent's
 * hook on libtorch_python's call of getTracingState (agent/modcall.h):
 * stack = its _call_impl frame's stack id, hash and depth 0. */
enum tbpf_inproc_flags { INPROC_USER_SCOPE = 1 };
enum tbpf_inproc_seq_kind { INPROC_SEQ_FWD = 0, INPROC_SEQ_BWD = 1 };

struct tbpf_inproc_rec {
	__u32 stamp;      /* ring index + 1 (low 32 bits): written last */
	__u32 tid;        /* kernel thread id */
	__u64 ts_ns;      /* CLOCK_MONOTONIC (from the TSC, see inproc.c) */
	__u32 hash;       /* name_hash() of RecordFunction::name() */
	__u8 kind;        /* enum tbpf_inproc_kind */
	__u8 flags;       /* enum tbpf_inproc_flags */
	__u16 depth;      /* open RecordFunctions of this thread below it */
	__u32 shape;      /* ENTER with --record-shapes: index + 1 into the
			   * agent's tbpf_inproc_shapes[], 0 = none */
	__u32 stack;      /* ENTER: low 32 bits of its Python stack id (0:
			   * none), an entry of tbpf_inproc_stacks */
};

struct tbpf_inproc_name {
	__u32 hash;
	__u32 flags;      /* enum tbpf_inproc_flags of its first record */
	char name[TBPF_INPROC_NAME_MAX - 8];
};

enum tbpf_inproc_state {
	INPROC_LOADED = 1,     /* loaded, idle */
	INPROC_ACTIVE = 2,     /* callbacks registered */
	INPROC_STOPPED = 3,    /* callbacks removed on request */
	INPROC_ORPHANED = 4,   /* callbacks removed: the owner tbpf exited */
	INPROC_NO_SYMBOLS = 5, /* libtorch without the exported API */
	INPROC_REFUSED = 6,    /* bad request (layout, owner) */
};

enum tbpf_inproc_request { INPROC_REQ_NONE = 0, INPROC_REQ_START = 1, INPROC_REQ_STOP = 2,
			   INPROC_REQ_CHANNEL = 3 /* offer a fresh owner channel (version 10) */ };

/* Layouts of at::RecordFunctionCallback the agent can build (verified per
 * torch version by tbpf before it asks, docs/inproc.md); RFCB10_FN: the
 * same, and at::RecordFunction::fn_ as agent/rf_layout.h has it (RF_FN_*:
 * the agent names ops by their schema pointer, agent/fnname.h). */
enum tbpf_inproc_layout { INPROC_LAYOUT_NONE = 0, INPROC_LAYOUT_RFCB10 = 1, INPROC_LAYOUT_RFCB10_FN = 2 };

/* Where the agent finds a RecordFunction's inputs and their sizes
 * (--record-shapes), for one torch version: tbpf sends it before START
 * (userspace/attach/inproc_layouts.h, checked against each torch's own
 * headers by tests/unit/rf_layout.sh).  All offsets in bytes. */
struct tbpf_inproc_ivlayout {
	__u16 rf_inputs_off;  /* RecordFunction -> inputs_ (ArrayRef: data, size) */
	__u16 iv_size;        /* sizeof(c10::IValue) */
	__u16 iv_tag_off;     /* IValue -> tag (uint32 enum IValue::Tag) */
	__u16 list_vec_off;   /* c10::detail::ListImpl -> list (std::vector<IValue>) */
	__u16 ti_sizes_off;   /* TensorImpl -> sizes_and_strides_.size_; the inline
			       * sizes (TBPF_SIZES_INLINE) or the out-of-line pointer
			       * follow it */
	__u16 ti_numel_off;   /* TensorImpl -> numel_ */
	__u16 ti_dtype_off;   /* TensorImpl -> data_type_ (TypeMeta: u16 index) */
	__u8 tag_none, tag_tensor, tag_int, tag_list; /* IValue::Tag None, Tensor,
						       * Int, GenericList */
	/* Input type (version 4), as torch.profiler's InputOutputEncoder
	 * classifies an IValue: a tensor (its dtype, "" when undefined), a
	 * scalar ("Scalar": the tags isScalar() accepts), a tensor list
	 * (the list's element type is TensorType: "TensorList"), another
	 * list ("ScalarList" when scalarlist_max, else ""), anything else "" */
	__u16 list_type_off;  /* ListImpl -> elementType (TypePtr: the Type* first) */
	__u16 type_kind_off;  /* c10::Type -> kind_ (enum TypeKind, 32 bits) */
	__u8 kind_tensor;     /* TypeKind::TensorType */
	__u8 scalarlist_max;  /* 0: no ScalarList, such lists are "" (1.13); else
			       * SCALAR_LIST_LENGTH_LIMIT (2.x): a list that is empty,
			       * or at most this long with a scalar first, is
			       * "ScalarList", a longer one "" */
	__u8 tlist_undef;     /* 1: a tensor list holding an undefined tensor is ""
			       * (2.x reads the list's tensors; 1.13 does not) */
	__u8 pad[3];
	__u32 scalar_tags;    /* bit t set: IValue::Tag t is a scalar (Double,
			       * ComplexDouble, Int, SymInt, SymFloat, [SymBool,] Bool) */
	/* (version 7) tensors the profiler records as undefined ([] and
	 * ""): nested (TensorImpl::is_nested(): key_set_ has NestedTensor)
	 * or with symbolic sizes (has_symbolic_sizes_strides_, a bit field) */
	__u16 ti_keyset_off;  /* TensorImpl -> key_set_ (DispatchKeySet, u64) */
	__u16 ti_sym_off;     /* the byte holding has_symbolic_sizes_strides_ */
	__u8 sym_mask;        /* its bit in that byte */
	__u8 pad2[3];
	__u64 nested_mask;    /* DispatchKeySet(DispatchKey::NestedTensor).raw_repr() */
};
_Static_assert(sizeof(struct tbpf_inproc_ivlayout) == 48, "inproc ABI");

/* Where a RecordFunction keeps its sequence number and thread ids, for
 * one torch version (--group-by-stack; inproc_layouts.h, checked by
 * tests/unit/rf_layout.sh).  Offsets in bytes from the RecordFunction. */
struct tbpf_inproc_seqlayout {
	__u16 rf_seq_off;      /* sequence_nr_ (int64) */
	__u16 rf_fwd_tid_off;  /* fwd_thread_id_ (uint64) */
	__u16 rf_tid_off;      /* step_callbacks_.thread_id_ (uint64, threadId()) */
	__u16 pad;
};

/* A ring one thread owns (version 8): its records need no reservation,
 * the owner writes a slot, its stamp, then head (a plain store).  The
 * first TBPF_INPROC_SHARDS threads that record take one each (released
 * when the thread exits); later threads, and every thread while sequence
 * numbers are on (tbpf pairs them across threads in ring order), share
 * the ring of `tbpf_inproc_ring` with a compare-and-swap per record.
 * Slots and stamps are as in that ring; the slots of ring i are
 * tbpf_inproc_shard_ring[i]. */
struct tbpf_inproc_shard {
	__u64 tail;           /* (tbpf) slots consumed */
	__u8 pad0[56];
	__u64 head;           /* (agent: the owner) slots written */
	__u32 owner;          /* (agent) tid of the owning thread, 0 = free */
	__u8 pad1[52];
};

/* The agent's exported `tbpf_inproc` (process_vm_readv/writev). */
struct tbpf_inproc_ctl {
	__u64 magic;          /* TBPF_INPROC_MAGIC (agent) */
	__u32 version;        /* TBPF_INPROC_VERSION (agent) */
	__u32 state;          /* enum tbpf_inproc_state (agent) */
	/* tbpf writes these four, then bumps seq */
	__u32 request;        /* enum tbpf_inproc_request */
	__u32 seq;
	__s32 owner;          /* tbpf's pid in its own pid namespace: shown in
			       * messages only (the watch is `chan`) */
	__u32 layout;         /* enum tbpf_inproc_layout */
	__u32 served_seq;     /* (agent) last seq acted on */
	__u32 generation;     /* (agent) bumps at every start */
	__u64 ring;           /* (agent) address of the slots */
	__u64 names;          /* (agent) address of the name table */
	__u32 nslots, nnames; /* (agent) capacities */
	__u64 drops;          /* (agent) records lost: ring full */
	__u64 unmatched;      /* (agent) ends without their start */
	__u64 overflow;       /* (agent) starts deeper than TBPF_INPROC_STACK */
	__u64 names_lost;     /* (agent) records whose name the full table could not take */
	char detail[64];      /* (agent) one-line reason */
	__u64 tail;           /* (tbpf) slots consumed */
	__u8 pad0[56];
	__u64 head;           /* (agent) slots reserved; own cache line */
	__u8 pad1[56];
	__u32 nnames_used;    /* (agent) name entries published */
	__u32 pad2;
	/* --record-shapes (version 2): tbpf writes want_shapes and iv before
	 * START; the agent reads inputs only when want_shapes and iv is set */
	__u32 want_shapes;
	__u32 shapes_on;      /* (agent) 1 while callbacks read inputs */
	struct tbpf_inproc_ivlayout iv;
	__u64 shapes;         /* (agent) address of tbpf_inproc_shapes[] */
	__u32 nshapes;        /* (agent) capacity */
	__u32 nshapes_used;   /* (agent) shape lists published */
	__u64 shapes_lost;    /* (agent) calls whose shape list the full table could not take */
	__u64 shapes_bad;     /* (agent) tensors whose sizes did not multiply to numel */
	/* --group-by-stack (version 4): tbpf writes want_seq and sl before
	 * START; the agent then registers a third callback for the
	 * backward-function scope and writes INPROC_SEQ slots */
	__u32 want_seq;
	__u32 seq_on;         /* (agent) 1 while callbacks write INPROC_SEQ */
	struct tbpf_inproc_seqlayout sl;
	/* version 8: the threads' own rings */
	__u64 shard_rings;    /* (agent) address of tbpf_inproc_shard_ring[][] */
	__u32 nshards, pad3;  /* (agent) TBPF_INPROC_SHARDS */
	struct tbpf_inproc_shard shard[TBPF_INPROC_SHARDS];
	/* version 9: ops named by their schema pointer (INPROC_LAYOUT_RFCB10_FN) */
	__u32 fn_on;          /* (agent) 1 while ops are named by their schema */
	__u32 pad4;
	__u64 fn_flushes;     /* (agent) operators removed from torch's dispatcher
			       * while active: every thread's schema cache dropped */
	struct tbpf_owner_chan chan;   /* version 10: the owner channel */
};
/* ==== END inproc ========================================================= */

/* CUDA API ids (rec_launch.api, rec_memop.api, ...). */
enum tbpf_cuda_api {
	CU_API_NONE = 0,
	CU_cudaLaunchKernel, CU_cudaLaunchKernel_ptsz, CU_cudaLaunchKernelExC,
	CU_cudaLaunchKernelExC_ptsz, CU_cudaLaunchCooperativeKernel,
	CU_cudaLaunchCooperativeKernel_ptsz, CU_cudaGraphLaunch,
	CU_cudaGraphLaunch_ptsz, CU_cuLaunchKernel, CU_cuLaunchKernel_ptsz,
	CU_cuLaunchKernelEx, CU_cuLaunchKernelEx_ptsz, CU_cuGraphLaunch,
	CU_cuGraphLaunch_ptsz,
	CU_cudaMemcpy, CU_cudaMemcpyAsync, CU_cudaMemcpyAsync_ptsz,
	CU_cudaMemsetAsync, CU_cudaMemsetAsync_ptsz, CU_cudaMemset,
	CU_cuMemcpyAsync, CU_cuMemcpyHtoDAsync, CU_cuMemcpyDtoHAsync,
	CU_cuMemcpyDtoDAsync, CU_cuMemsetD8Async, CU_cuMemsetD16Async,
	CU_cuMemsetD32Async,
	CU_cudaStreamSynchronize, CU_cudaDeviceSynchronize,
	CU_cudaEventSynchronize, CU_cuStreamSynchronize, CU_cuCtxSynchronize,
	CU_cuEventSynchronize,
	CU_cudaMalloc, CU_cudaFree, CU_cudaMallocAsync, CU_cudaFreeAsync,
	CU_cuMemAlloc, CU_cuMemFree, CU_cuMemAllocAsync, CU_cuMemFreeAsync,
	CU_API_MAX
};

struct rec_launch {
	struct rec_hdr h;
	__u32 pid;
	__u32 api;       /* enum tbpf_cuda_api */
	__u64 func;      /* host stub, CUfunction, or graph exec */
	__u64 stream;
	__u32 grid[3];
	__u32 block[3];
	__u32 shmem;
	__u32 op_id;     /* op on top of the thread's stack, 0 = none */
	__u32 stack_id;  /* Python stack of the outermost op */
	__u32 depth;
	__u64 dur_ns;    /* host time in the call (written at its
			  * return; 0 = not timed); absent in records of
			  * REC_LAUNCH_V1_SIZE */
};
/* Records before return timing (older captures): no dur_ns, not timed. */
#define REC_LAUNCH_V1_SIZE 80

/* rec_memop.flags */
enum tbpf_memop_flags {
	MEMOP_TIMED = 1 << 0,   /* dur_ns is the call's host time (every copy and set since return timing;
				 * before it only cudaMemcpy and cudaMemset) */
};

enum tbpf_copy_dir { CP_UNKNOWN = 0, CP_HTOD, CP_DTOH, CP_DTOD, CP_HTOH, CP_SET };

struct rec_memop {
	struct rec_hdr h;
	__u32 pid;
	__u32 api;
	__u64 bytes;
	__u64 stream;
	__u64 dur_ns;    /* host time in the call (MEMOP_TIMED) */
	__u32 dir;       /* enum tbpf_copy_dir */
	__u32 op_id;
	__u32 stack_id;
	__u32 flags;     /* enum tbpf_memop_flags */
};

struct rec_sync {
	struct rec_hdr h;  /* ts_ns = start of the wait */
	__u32 pid;
	__u32 api;
	__u64 dur_ns;
	__u64 handle;      /* stream or event */
	__u32 op_id;
	__u32 stack_id;
	__u32 ret;         /* the API's return code */
	__u32 pad;
};

struct rec_alloc {
	struct rec_hdr h;
	__u32 pid;
	__u32 api;
	__u64 ptr;
	__u64 bytes;       /* 0 for frees */
	__u32 op_id;
	__u32 stack_id;
	__u32 ret;         /* the API's return code */
	__u32 pad;
	__u64 dur_ns;      /* host time in the call (0 = not
			    * timed); absent in records of REC_ALLOC_V1_SIZE */
};
#define REC_ALLOC_V1_SIZE 56

/* ==== BEGIN REC_GPU (CUPTI agent) ==============================
 * Records the in-process agent (agent/tbpf_agent.c) builds from CUPTI
 * activity and hands to the BPF side through probed no-op functions
 * (bpf/agent.bpf.h).  One REC_GPU header type, three layouts told apart by
 * `kind` (same offset in all three). */
enum tbpf_gpu_kind {
	GPU_KERNEL = 1,
	GPU_MEMCPY = 2,
	GPU_MEMSET = 3,
	GPU_API_RUNTIME = 4,  /* cudaXxx call: tid, correlation, cbid */
	GPU_API_DRIVER = 5,   /* cuXxx call */
	GPU_NAME = 6,         /* struct rec_gpu_name: name_id -> full name */
	GPU_STATUS = 7,       /* struct rec_gpu_status */
};

#define TBPF_GPU_SHORT_NAME 48   /* inline kernel name prefix */
#define TBPF_GPU_NAME_MAX 512    /* full name in a GPU_NAME record */
#define TBPF_GPU_BATCH 32        /* records per tbpf_agent_emit_batch call */

struct rec_gpu {
	struct rec_hdr h;  /* ts_ns = start_ns; tid = API thread (API kinds), else 0 */
	__u32 pid;
	__u16 kind;        /* enum tbpf_gpu_kind */
	__u16 copy_kind;   /* CUpti_ActivityMemcpyKind (GPU_MEMCPY) */
	__u64 start_ns;    /* CLOCK_MONOTONIC (agent timestamp callback) */
	__u64 end_ns;
	__u64 bytes;       /* memcpy/memset */
	__u64 name_id;     /* kernel: FNV-1a 64 of the full name, see GPU_NAME */
	__u32 correlation; /* CUPTI correlationId */
	__u32 device;
	__u32 context;
	__u32 stream;
	__u32 grid[3];
	__u32 block[3];
	__u32 cbid;        /* API kinds: CUPTI callback id */
	__u32 flags;       /* enum tbpf_gpu_flags */
	char name[TBPF_GPU_SHORT_NAME]; /* kernel name prefix, NUL-terminated */
};

enum tbpf_gpu_flags {
	GPUF_NAME_TRUNC = 1 << 0,  /* name[] holds a prefix; see GPU_NAME */
	GPUF_GRAPH = 1 << 1,       /* launched as part of a CUDA graph */
};

struct rec_gpu_name {
	struct rec_hdr h;
	__u32 pid;
	__u16 kind;        /* GPU_NAME */
	__u16 len;         /* bytes in name, without the NUL */
	__u64 name_id;
	char name[TBPF_GPU_NAME_MAX];
};

/* Agent state (rec_gpu_status.state and the exported tbpf_agent_status). */
enum tbpf_agent_state {
	AGENT_LOADED = 1,      /* library loaded, idle: nothing enabled */
	AGENT_NO_DRIVER = 2,   /* libcuda.so.1 not found: no NVIDIA driver */
	AGENT_NO_DEVICE = 3,   /* cuInit/cuDeviceGetCount failed or 0 devices */
	AGENT_NO_CUPTI = 4,    /* libcupti could not be loaded */
	AGENT_CONFLICT = 5,    /* another CUPTI subscriber (torch.profiler) */
	AGENT_CUPTI_ERROR = 6, /* other CUPTI failure, see cupti_err */
	AGENT_ACTIVE = 7,      /* collecting and emitting */
	AGENT_STOPPED = 8,     /* was active, now disabled */
	AGENT_ORPHANED = 9,    /* tbpf exited without STOP: CUPTI released by the agent */
};

#define TBPF_AGENT_MAGIC 0x74627066676e7431ULL /* "1tngfpbt" */

struct rec_gpu_status {
	struct rec_hdr h;
	__u32 pid;
	__u16 kind;        /* GPU_STATUS */
	__u16 state;       /* enum tbpf_agent_state */
	__u64 magic;       /* TBPF_AGENT_MAGIC */
	__u32 version;     /* TBPF_ABI_VERSION of the agent */
	__s32 cupti_err;   /* last CUptiResult/CUresult, 0 = none */
	__u32 devices;     /* device count when known */
	__u32 generation;  /* bumps at every start request served */
	__u64 records;     /* records emitted */
	__u64 dropped;     /* cuptiActivityGetNumDroppedRecords sum */
	__u64 invalid;     /* records with bad times or unknown kinds */
	__u64 ratelimited; /* records discarded by the agent's rate limit */
	__u64 buffers;     /* CUPTI buffers completed */
	__u32 served_seq;  /* last tbpf_agent_ctl.seq the agent acted on */
	__u32 ctl_thread;  /* 1 while its control thread runs (0: it ended after
			    * releasing CUPTI; tbpf_agent_restart() starts it) */
	char detail[56];   /* short human-readable reason */
};

/* Control word the tool writes into the agent (exported symbol
 * tbpf_agent_ctl; process_vm_writev).  The agent polls it. */
enum tbpf_agent_request { AGENT_REQ_NONE = 0, AGENT_REQ_START = 1, AGENT_REQ_STOP = 2,
			  AGENT_REQ_CHANNEL = 3 /* offer a fresh owner channel in the
						 * exported tbpf_agent_chan */ };

struct tbpf_agent_ctl {
	__u64 magic;        /* TBPF_AGENT_MAGIC, set by the agent */
	__u32 request;      /* enum tbpf_agent_request, written by tbpf */
	__u32 seq;          /* tbpf bumps it with every request */
	__u32 max_rate;     /* records per second, 0 = agent default */
	__s32 owner;        /* tbpf's pid in its own pid namespace, for messages;
			     * the agent watches its owner through the channel
			     * in its exported `struct tbpf_owner_chan
			     * tbpf_agent_chan` and releases CUPTI when it closes */
};
/* ==== END REC_GPU ======================================================= */

/* ==== BEGIN memory (--profile-memory) =========================
 * What torch.profiler's profile_memory=True counts, seen from outside:
 *  - CPU: c10::ProfiledCPUMemoryReporter::New(this, ptr, nbytes) and
 *    ::Delete(this, ptr) in libc10, which the default CPU allocator calls
 *    for every allocation and free, profiler on or off (they report to the
 *    profiler only while it runs);
 *  - CUDA (and any other device): c10::reportMemoryUsageToProfiler(ptr,
 *    alloc_size, total_allocated, total_reserved, Device), which the CUDA
 *    caching allocator calls for every block it hands out (+size) and takes
 *    back (-size), with its own totals.  CPU reports there are skipped
 *    (they come from New/Delete, when torch.profiler runs in the target).
 * An allocation or free is charged to the op open on the calling thread
 * (its Self and its ancestors' inclusive bytes), as torch.profiler does;
 * outside any op to the `[memory]` row (TBPF_OPID_MEMORY).  A free needs
 * the allocation's size: CPU allocations are kept in the bounded hash
 * `mem_live` ((pid, ptr) -> struct tbpf_memval); a free of an address not
 * in it (allocated before attach, or the map was full) is counted apart
 * (CNT_MEM_UNKNOWN_FREES) and charged nowhere, as torch.profiler skips
 * frees of memory allocated before it started. */
#define TBPF_OPID_MEMORY 0x7ffffff0u  /* the "[memory]" row */
#define TBPF_MEM_MAP_DEFAULT 262144   /* mem_live entries (--mem-map-size) */

enum tbpf_mem_dev { MEM_DEV_CPU = 0, MEM_DEV_CUDA = 1, MEM_DEV_N = 2 };

/* c10::DeviceType values (1.13 .. 2.8) used by the records */
#define TBPF_C10_DEV_CPU 0
#define TBPF_C10_DEV_CUDA 1

enum tbpf_mem_flags {
	MEMF_FREE = 1 << 0,       /* bytes < 0 */
	MEMF_NO_OP = 1 << 1,      /* no op open on the thread: "[memory]" */
	MEMF_UNTRACKED = 1 << 2,  /* allocation not kept (mem_live full) */
};

struct rec_mem {
	struct rec_hdr h;
	__u32 pid;
	__u16 dev_type;      /* c10::DeviceType (0 CPU, 1 CUDA, ...) */
	__s16 dev_index;     /* -1 = none (CPU) */
	__u64 ptr;
	__s64 bytes;         /* + allocated, - freed */
	__u64 total_alloc;   /* the allocator's allocated bytes after it
			      * (CUDA: its own; CPU: 0, computed by the model) */
	__u64 total_reserved;/* CUDA: reserved (segments); CPU: 0 */
	__u32 op_id;         /* op charged (top of the thread's stack), 0 none */
	__u32 stack_id;      /* its Python stack (low 32 bits) */
	__u32 flags;         /* enum tbpf_mem_flags */
	__u32 depth;
};

struct tbpf_memkey {
	__u32 pid;
	__u32 pad;
	__u64 ptr;
};

struct tbpf_memval {
	__s64 bytes;
};
/* ==== END memory ======================================================== */

/* ---- maps shared with user space -------------------------------------- */

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
/* Who names a FUNCTION-scope RecordFunction without the profiler on (the
 * attach cookie of tbpf_scope_pend) */
enum tbpf_pend_kind {
	TBPF_PEND_NONE = 0,
	TBPF_PEND_CSTR,     /* rdi: const char* (torch._dynamo's C shim
			     * _pytorch_record_function_enter(name):
			     * "TorchDynamo Cache Lookup",
			     * "Torch-Compiled Region: 0/0") */
	TBPF_PEND_PYTYPE,   /* rdi: PyTypeObject*, its tp_name (THPFunction_apply(cls,
			     * inputs): a custom autograd.Function's forward row,
			     * "CompiledFunction") */
};
#define TBPF_RECORD_SCOPE_FUNCTION 0   /* at::RecordScope::FUNCTION */

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

/* ==== BEGIN pystack (Python stacks) =========================== */

/* How the BPF walker finds frames (struct tbpf_pyproc.kind). */
enum tbpf_py_kind {
	PYK_NONE = 0,
	PYK_FRAMEOBJ = 1,  /* 3.10: PyFrameObject chain from tstate->frame */
	PYK_IFRAME = 2,    /* 3.11+: _PyInterpreterFrame chain */
};

/* tbpf_pyframe.flags */
enum tbpf_pyframe_flags {
	PYF_SELF = 1 << 0,    /* `self` is the code's first local: .self valid */
	PYF_SHIM = 1 << 1,    /* C-stack shim frame (3.12+ owner 3): no code */
	PYF_TRUNC = 1 << 2,   /* last frame kept: older frames were cut off */
};

/* Per-process interpreter description, BPF map `py_procs` (pid -> this),
 * filled by pyproc_detect().  Offsets are bytes into the named object;
 * 0xffff means "absent in this version". */
#define TBPF_PYOFF_NONE 0xffff
#define TBPF_PYFRAME_READ 80  /* bytes of a frame read at once */
struct tbpf_pyproc {
	__u64 runtime;        /* address of _PyRuntime in the target */
	__u32 version;        /* major << 8 | minor: 0x030b for 3.11 */
	__u32 kind;           /* enum tbpf_py_kind */
	__u32 tss_key;        /* pthread key of _PyRuntime's autoTSSkey */
	__u32 tsd_block;      /* glibc struct pthread .specific_1stblock */
	/* walker (BPF) */
	__u16 ts_frame;       /* tstate -> frame (3.10), cframe (3.11/12),
	                       * current_frame (3.13) */
	__u16 cf_frame;       /* cframe -> current_frame, NONE when direct */
	__u16 fr_code;        /* frame -> code object */
	__u16 fr_previous;    /* frame -> previous / f_back */
	__u16 fr_instr;       /* prev_instr/instr_ptr (ptr), f_lasti (int) */
	__u16 fr_owner;       /* owner byte, NONE before 3.12 */
	__u16 fr_localsplus;  /* first local */
	__u16 co_code;        /* first code unit, from the code object */
	__u16 co_argcount;
	__u16 co_varnames;    /* tuple of local names (localsplusnames) */
	/* symbolizer (user space) */
	__u16 co_filename;
	__u16 co_name;
	__u16 co_qualname;    /* NONE before 3.11 */
	__u16 co_firstlineno;
	__u16 co_linetable;
	__u16 tp_name;
	__u16 tp_mro;
	__u16 tp_dictoffset;
	__u16 tp_basicsize;
	__u16 tp_flags;
	__u16 ht_cached_keys;
	__u16 str_ascii_data; /* sizeof(PyASCIIObject) */
	__u16 str_compact_data; /* sizeof(PyCompactUnicodeObject) */
	__u16 pad0;
	__u64 cell_type;      /* &PyCell_Type: `self` captured by a closure */
};
/* ==== END pystack ======================================================= */

/* ==== BEGIN inproc Python stacks (docs/inproc.md) =====
 * With --inproc the agent walks the calling thread's Python stack itself
 * (the walk of bpf/pystack.bpf.h, in its own memory) when a RecordFunction
 * starts at depth 0, directly in a user scope, or under a Python frame
 * other than its parent's; it publishes each new stack once in
 * `tbpf_inproc_stacks` before a record refers to it.  tbpf writes the
 * interpreter's offsets (pyproc_detect) into `tbpf_inproc_py` before
 * START; `on` = 0 walks nothing. */
#define TBPF_INPROC_STACKS 8192
struct tbpf_inproc_stack {
	__u64 stack_id;
	__u32 nframes;
	__u32 pad;
	struct tbpf_pyframe frames[TBPF_MAX_PYFRAMES]; /* innermost first */
};

struct tbpf_inproc_py {
	struct tbpf_pyproc pp;   /* (tbpf) the interpreter's offsets */
	__u32 on;                /* (tbpf) walk stacks from the next START */
	__u32 pid;               /* (tbpf) the target's pid as tbpf sees it (ids) */
	__u64 code_type;         /* (agent) &PyCode_Type: every frame's code is checked */
	__u32 nstacks_used;      /* (agent) entries published */
	__u32 state;             /* (agent) 0 off, 1 walking, 2 refused (detail) */
	__u64 stacks_lost;       /* (agent) new stacks the full table could not take */
	__u64 bad_frames;        /* (agent) walks stopped at a frame that was not Python's */
	char detail[64];         /* (agent) why not walking */
	/* module calls (version 4): with want_modcalls (and `on`) the agent
	 * counts nn.Module calls itself (INPROC_MODCALL records) instead of
	 * tbpf's module-call uprobe */
	__u32 want_modcalls;     /* (tbpf) count module calls from the next START */
	__u32 modcalls;          /* (agent) 0 off, 1 counting, 2 refused (mc_detail) */
	char mc_detail[64];      /* (agent) why not counting */
	/* version 11: with hold_roots (and module calls counted here) the
	 * thread of a root module's call on a new stack (a model's first
	 * forward) waits until tbpf has named that stack (stacks_named
	 * reaches it), at most TBPF_INPROC_HOLD_MS, so the model's module
	 * tree is read while the model lives (a short job frees it within
	 * milliseconds of its last op) */
	__u32 hold_roots;        /* (tbpf) hold from the next START */
	__u32 stacks_named;      /* (tbpf) entries tbpf has read and named */
	__u32 holds;             /* (agent) calls held */
	__u32 hold_timeouts;     /* (agent) holds that ran out (then no more) */
	__u64 hold_ns;           /* (agent) time held, all threads */
};
#define TBPF_INPROC_HOLD_MS 250
/* ==== END inproc Python stacks ========================================== */

/* ==== BEGIN shapes (input shapes) ============================
 * At op entry (TBPF_MODE_SHAPES) the BPF side reads the op's Tensor and
 * optional Tensor arguments where the x86-64 ABI put them, as the op's
 * `tbpf_argdesc` (map `op_args`, op id -> descriptor, computed in user
 * space from the demangled ::call signature, discover/argdesc.c) says,
 * and each tensor's sizes through the TensorImpl layout of its process
 * (map `shape_layouts`, pid -> struct tbpf_tlayout, discover/tlayout.c).
 * Every other argument is `[]`, as torch.profiler shows scalars, int
 * lists and tensor lists.  The shape list is hashed to a shape id; the
 * map `shapes` holds id -> list, and the first call of an id emits a
 * REC_SHAPE record (captures). */
#define TBPF_SHAPE_MAX_ARGS 24    /* schema arguments an op may have */
#define TBPF_SHAPE_MAX_TENSORS 8  /* tensor (or FLOPs int) arguments read per call */
#define TBPF_SHAPE_MAX_DIMS 8     /* sizes a shape list keeps per tensor */
/* A tensor of more than TBPF_SHAPE_MAX_DIMS dims (torch has no limit and
 * torch.profiler records every size): its sizes past the 8th go to a
 * continuation, a struct tbpf_shape of its own under the id
 * tbpf_shape_more_id(list's id, tensor entry) with kind[0] = ARGK_MORE,
 * argi[0] the entry, ndim[0] the sizes it holds and dims[][] those sizes
 * in a row (dims[0][0] is the 9th), nargs = ntensors = 0.  It goes where
 * lists go (map `shapes`, REC_SHAPE, the agent's table) and is made only
 * for such a tensor.  At most TBPF_SHAPE_ALL_DIMS sizes are kept a
 * tensor; ndim of a tensor with more is TBPF_SHAPE_ALL_DIMS + 1 (shown
 * with "..." after the 64th). */
#define TBPF_SHAPE_ALL_DIMS 64
#define TBPF_SHAPE_MORE_DIMS (TBPF_SHAPE_ALL_DIMS - TBPF_SHAPE_MAX_DIMS)
#define TBPF_ARG_REGS 6           /* rdi rsi rdx rcx r8 r9; then stack slots */
#define TBPF_SHAPE_IDS 16384      /* distinct shape lists kept (map `shapes`) */

enum tbpf_arg_kind {
	ARGK_TENSOR = 1,      /* at::Tensor const& / at::Tensor& */
	ARGK_OPT_TENSOR = 2,  /* c10::optional<at::Tensor> const& (or std::) */
	/* values the FLOPs of conv2d need (stride, padding, dilation, groups),
	 * shown as [] like every non-tensor argument */
	ARGK_INTLIST = 3,     /* c10::ArrayRef<long> / <c10::SymInt>: ptr, len */
	ARGK_INT = 4,         /* long */
	ARGK_SYMINT = 5,      /* c10::SymInt by value: a pointer to it */
	ARGK_MORE = 6,        /* a continuation: sizes past the 8th of one
			       * tensor (TBPF_SHAPE_ALL_DIMS) */
};

/* The id of the continuation of entry i of shape list `id` */
static inline __u64 tbpf_shape_more_id(__u64 id, __u32 i)
{
	__u64 h = (id ^ (0x9e3779b97f4a7c15ULL * (i + 1))) * 1099511628211ULL;

	return h ? h : 1;
}

/* torch.profiler's "Input type" of each argument (Kineto's trace arg,
 * _KinetoEvent.dtypes()): a tensor's dtype name, "Scalar" (int, float,
 * bool, Scalar and the enums kept as ints: ScalarType, Layout,
 * MemoryFormat), "ScalarList" (int/float/bool lists, torch 2.x; 1.13
 * shows ""), "TensorList", or "" (None, undefined tensors, Device,
 * strings, generators, lists of optional tensors...).  tbpf_argdesc.itype
 * holds the class its C++ type gives each argument, ITYPE_OPT set when
 * it is an optional whose presence decides it ("" when None); the BPF
 * side resolves ITYPE_OPT per call into tbpf_shape.itype. */
enum tbpf_itype {
	ITYPE_NONE = 0,       /* "" */
	ITYPE_TENSOR = 1,     /* the dtype of the tensor entry of that
			       * argument ("" when None or undefined) */
	ITYPE_SCALAR = 2,     /* "Scalar" */
	ITYPE_SCALARLIST = 3, /* "ScalarList" */
	ITYPE_TENSORLIST = 4, /* "TensorList" */
	ITYPE_UNKNOWN = 5,    /* a type tbpf cannot classify or place: "?" */
	ITYPE_OPT = 0x80,     /* (argdesc only) shown only when engaged */
};
#define TBPF_SHAPE_MAX_OPTS 8     /* optional arguments whose flag is read */
#define TBPF_OPT_INDIRECT 0x80    /* opt_byte: the word points to the optional */
/* ScalarList lengths: torch 2.x's InputOutputEncoder records an int,
 * float or bool list as "ScalarList" only when it is empty or has at most
 * SCALAR_LIST_LENGTH_LIMIT entries (torch/csrc/profiler/collection.h,
 * 30 in 2.8, checked by tests/unit/rf_layout.sh); a longer one is "".
 * The BPF side reads the length of each such argument (len_*). */
#define TBPF_SHAPE_MAX_LENS 8     /* list lengths read per call */
#define TBPF_SCALARLIST_MAX 30    /* SCALAR_LIST_LENGTH_LIMIT */

struct tbpf_argdesc {
	__u8 nargs;           /* the schema's arguments (the list's length) */
	__u8 ntensors;        /* entries used below */
	__u8 nopts;           /* optional-argument flags read (opt_*) */
	__u8 nlens;           /* ScalarList lengths read (len_*) */
	__u8 argi[TBPF_SHAPE_MAX_TENSORS];  /* argument index */
	__u8 where[TBPF_SHAPE_MAX_TENSORS]; /* < 6: register, else stack slot
					     * where-6 at rsp+8+8*(where-6) */
	__u8 kind[TBPF_SHAPE_MAX_TENSORS];  /* enum tbpf_arg_kind */
	__u8 pad2[4];
	/* Input type (see enum tbpf_itype) */
	__u8 itype[TBPF_SHAPE_MAX_ARGS];    /* per argument, ITYPE_OPT maybe set */
	__u8 opt_argi[TBPF_SHAPE_MAX_OPTS]; /* the optional's argument index */
	__u8 opt_where[TBPF_SHAPE_MAX_OPTS];/* the word holding its engaged flag
					     * (register or stack slot, as where) */
	__u8 opt_byte[TBPF_SHAPE_MAX_OPTS]; /* the flag's byte in that word, or
					     * TBPF_OPT_INDIRECT | byte offset
					     * from the address the word holds
					     * (an optional passed by reference) */
	__u8 len_argi[TBPF_SHAPE_MAX_LENS]; /* a ScalarList argument's index */
	__u8 len_where[TBPF_SHAPE_MAX_LENS];/* the word holding its length
					     * (register or stack slot, as where) */
	__u8 len_byte[TBPF_SHAPE_MAX_LENS]; /* 0: that word is the length;
					     * TBPF_OPT_INDIRECT | byte offset:
					     * 8 bytes at the address it holds
					     * (a list passed by reference) */
};

/* Where a process's torch keeps what the reader needs (bytes into the
 * object).  sizes_off: c10::SizesAndStrides (size_t size_, then inline
 * sizes[5] or the out-of-line pointer). */
#define TBPF_SIZES_INLINE 5
struct tbpf_tlayout {
	__u16 sizes_off;      /* TensorImpl -> sizes_and_strides_.size_ */
	__u16 numel_off;      /* TensorImpl -> numel_ */
	__u16 dtype_off;      /* TensorImpl -> data_type_ (u16 ScalarType); the
			       * reader needs numel_off + 8 (one read of both) */
	__u16 opt_value_off;  /* optional<Tensor> -> the TensorImpl* */
	__u16 opt_flag_off;   /* optional<Tensor> -> engaged byte */
	/* tensors torch.profiler records as undefined ([] and ""): nested
	 * ones (key_set_ has DispatchKey::NestedTensor) and ones with
	 * symbolic sizes (has_symbolic_sizes_strides_).  The reader reads
	 * numel_, data_type_ .. and key_set_ as three words from numel_off:
	 * key_set_ is the third (numel_off + 16), the flag a bit of byte 6
	 * of the second (numel_off + 14), as in torch 1.13 and 2.8 */
	__u8 sym_mask;        /* has_symbolic_sizes_strides_'s bit; 0: not read */
	__u8 backend_bits;    /* DispatchKeySet: the low bits are backends (the
			       * calibration's check of key_set_) */
	__u16 pad[2];
	__u64 undef_impl;     /* &c10::UndefinedTensorImpl::_singleton in the
			       * process: an undefined tensor, shown as [] */
	__u64 nested_mask;    /* DispatchKeySet(NestedTensor); 0: not read */
};

#define TBPF_SHAPE_NONE 0xff  /* not a tensor, None, or undefined: [] */
#define TBPF_SHAPE_BAD 0xfe   /* unreadable or inconsistent sizes */
struct tbpf_shape {
	__u8 nargs;
	__u8 ntensors;
	__u8 more;            /* (BPF side) a bit per entry with a continuation
			       * (may be 0 where a writer does not set it:
			       * readers go by ndim) */
	__u8 pad;
	__u8 argi[TBPF_SHAPE_MAX_TENSORS];
	__u8 ndim[TBPF_SHAPE_MAX_TENSORS];   /* or TBPF_SHAPE_NONE / _BAD; int
					      * kinds: the values in dims[] */
	__u8 dtype[TBPF_SHAPE_MAX_TENSORS];  /* c10::ScalarType */
	__u8 kind[TBPF_SHAPE_MAX_TENSORS];   /* enum tbpf_arg_kind */
	__u8 pad2[4];
	/* Input type of each argument: enum tbpf_itype, ITYPE_OPT resolved
	 * (ITYPE_NONE when the optional was None).  A writer that knows the
	 * arguments (the in-process agent) fills it directly; all zero
	 * (every "") when nothing filled it. */
	__u8 itype[TBPF_SHAPE_MAX_ARGS];
	__s64 dims[TBPF_SHAPE_MAX_TENSORS][TBPF_SHAPE_MAX_DIMS];
};

struct rec_shape {
	struct rec_hdr h;
	__u32 pid;
	__u32 pad;
	__u64 shape_id;
	struct tbpf_shape s;
};

_Static_assert(sizeof(struct tbpf_shape) % 8 == 0, "record ABI");
_Static_assert(sizeof(struct rec_shape) % 8 == 0, "record ABI");
_Static_assert(sizeof(struct rec_op_shape) % 8 == 0, "record ABI");
_Static_assert(sizeof(struct tbpf_argdesc) % 4 == 0, "map ABI");

/* Raw TensorImpl bytes of the first tensors read (map `shape_samples`):
 * user space re-derives the layout from them (tlayout_calibrate) and
 * shows no shapes when it is not the one the reader used. */
#define TBPF_TSAMPLE_BYTES 256
#define TBPF_TSAMPLES 48
struct tbpf_tsample {
	__u32 pid;
	__u32 ok;             /* bytes read */
	__u8 bytes[TBPF_TSAMPLE_BYTES];
};
/* ==== END shapes ======================================================== */

#endif /* TBPF_ABI_H */
