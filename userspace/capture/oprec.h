/* oprec.h - capture stage: what a record is, told from its type once.
 *
 * The model, the joins and the exporters name the events they take
 * (`EVS_OPS`, `rec_kind(h) == EV_LAUNCH`) and read op records through
 * op_ev_decode, so which record type carries which event, and how long
 * each layout is, is known here and in the decoders beside it (cudarec.h),
 * not in every consumer.  The record layouts themselves are bpf/abi/. */
#ifndef TBPF_OPREC_H
#define TBPF_OPREC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"
#include "bus.h"

enum ev_kind {
	EV_OTHER = 0,   /* one the consumers never take (metadata, unknown) */
	EV_OP_ENTER,
	EV_OP_EXIT,
	EV_PYSTACK,     /* a new Python stack */
	EV_LAUNCH,      /* host CUDA calls: a kernel or graph launch */
	EV_MEMOP,       /*   a copy or set */
	EV_SYNC,        /*   the host waiting on the device */
	EV_ALLOC,       /*   a CUDA allocation or free */
	EV_GPU,         /* CUPTI device activity (kernel, copy, set, API, name) */
	EV_SCOPE_NAME,  /* a record_function scope's name */
	EV_MEM,         /* an allocation or free torch.profiler reports */
	EV_MODCALL,     /* an nn.Module call */
	EV_SHAPE,       /* an input-shape list, once per shape id */
};

/* The event kind of a record, from its type alone. */
enum ev_kind rec_kind(const struct rec_hdr *h);

/* The record types of each kind of event, as bus sinks take them. */
#define EVS_OP_ENTER   BUS_TYPE(REC_OP_ENTER)
#define EVS_OP_EXIT    BUS_TYPE(REC_OP_EXIT)
#define EVS_OPS        (EVS_OP_ENTER | EVS_OP_EXIT)
#define EVS_LAUNCH     BUS_TYPE(REC_LAUNCH)
#define EVS_MEMOP      BUS_TYPE(REC_MEMOP)
#define EVS_CUDA_CALLS (EVS_LAUNCH | EVS_MEMOP | BUS_TYPE(REC_SYNC) | BUS_TYPE(REC_ALLOC))
#define EVS_GPU        BUS_TYPE(REC_GPU)
#define EVS_SCOPE_NAME BUS_TYPE(REC_SCOPE_NAME)
#define EVS_MEM        BUS_TYPE(REC_MEM)
#define EVS_MODCALL    BUS_TYPE(REC_MODCALL)

/* Records of each type a count array (capture_stats, the end record's
 * drops) has room for. */
#define EV_TYPE_SLOTS  REC_TYPE_MAX

/* An op's start or end, or a module call, as the model reads it. */
struct op_ev {
	enum ev_kind kind;    /* EV_OP_ENTER, EV_OP_EXIT or EV_MODCALL */
	uint32_t pid, tid;
	uint64_t ts_ns;
	uint32_t op_id;       /* MODCALL: the module's call site */
	uint32_t stack_id;    /* low 32 bits of the Python stack id, 0 = none */
	uint16_t depth;       /* visible nesting depth, 0 = outermost */
	uint16_t flags;       /* enum tbpf_op_flags */
	uint64_t shape_id;    /* ENTER with --record-shapes; 0 = none */
};

/* h (size bytes) decoded into ev; false (ev->kind EV_OTHER) for any other
 * or a short record. */
bool op_ev_decode(const struct rec_hdr *h, size_t size, struct op_ev *ev);
/* h is an op's start or end (the model's op records); its start. */
static inline bool rec_is_op(const struct rec_hdr *h)
{
	return h->type == REC_OP_ENTER || h->type == REC_OP_EXIT;
}
static inline bool rec_is_op_enter(const struct rec_hdr *h)
{
	return h->type == REC_OP_ENTER;
}

/* The latest op start seen, for a run that stops once its ops have: ts
 * moved on by an op's start in h, unchanged by anything else. */
static inline uint64_t op_latest_start(uint64_t ts, const struct rec_hdr *h)
{
	return rec_is_op_enter(h) && h->ts_ns > ts ? h->ts_ns : ts;
}

#endif /* TBPF_OPREC_H */
