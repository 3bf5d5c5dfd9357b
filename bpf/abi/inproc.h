/* abi/inproc.h - the in-process RecordFunction agent (--inproc,
 * agent/inproc.c, docs/inproc.md), shared with user space: its control
 * block, ring records, name table, input and sequence layouts, and the
 * Python stacks it walks itself.
 */
#ifndef TBPF_ABI_INPROC_H
#define TBPF_ABI_INPROC_H

#include "core.h"
#include "pystack.h"

/* agent/inproc.c (libtbpf_inproc.so, loaded by --inproc) registers global
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

/* Python stacks: with --inproc the agent walks the calling thread's
 * Python stack itself (the walk of bpf/pystack.bpf.h, in its own memory)
 * when a RecordFunction starts at depth 0, directly in a user scope, or
 * under a Python frame other than its parent's; it publishes each new
 * stack once in `tbpf_inproc_stacks` before a record refers to it.  tbpf writes the
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

#endif /* TBPF_ABI_INPROC_H */
