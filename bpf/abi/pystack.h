/* abi/pystack.h - Python stacks, shared by BPF and user space: the
 * frames a stack walk keeps (REC_PYSTACK) and the per-process interpreter
 * description the walker (bpf/pystack.bpf.h) and the symbolizer read.
 */
#ifndef TBPF_ABI_PYSTACK_H
#define TBPF_ABI_PYSTACK_H

#include "core.h"

/* Python frames captured per stack. */
#define TBPF_MAX_PYFRAMES 32
/* Steps of a stack walk: 3.12+'s entry shims (a frame per call made from
 * C: each nn.Module call through tp_call and each f(*args) adds one, up to
 * three a module level) take steps but are not kept. */
#define TBPF_PYWALK_STEPS (2 * TBPF_MAX_PYFRAMES)

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

#endif /* TBPF_ABI_PYSTACK_H */
