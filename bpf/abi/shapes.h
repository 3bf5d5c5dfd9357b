/* abi/shapes.h - input shapes (--record-shapes), shared by BPF
 * (bpf/shapes.bpf.h), the in-process agent and user space: argument
 * descriptors, the TensorImpl layout, shape lists (REC_SHAPE) and the raw
 * tensor samples the layout is checked with.
 */
#ifndef TBPF_ABI_SHAPES_H
#define TBPF_ABI_SHAPES_H

#include "core.h"

/* At op entry (TBPF_MODE_SHAPES) the BPF side reads the op's Tensor and
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

#endif /* TBPF_ABI_SHAPES_H */
