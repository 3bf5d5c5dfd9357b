/* timeline.h - pairing stage: op enter/exit records -> per-thread slices.
 *
 * Feed BPF records in file (ring buffer) order; the timeline keeps one op
 * stack per (pid, tid) and calls back at each slice begin and end with the
 * full context, and for each CUDA record with the op on top of the
 * thread's stack.  Memory: the open frames of live threads only.
 *
 * Repairs (counted in struct timeline_stats):
 *  - an exit whose op is not on top closes the frames above it first, at
 *    the exit's time, flagged OPF_INFERRED (their exits were lost);
 *  - an exit matching no open frame (the op began before recording) is
 *    ignored;
 *  - an enter at a depth shallower than the open stack closes the deeper
 *    frames at the enter's time, flagged OPF_INFERRED;
 *  - timeline_finish() closes what is still open at the given time, flagged
 *    OPF_INFERRED.
 * Enter/exit records flagged OPF_SKIP (a redispatch nested directly in its
 * own call) are not slices: they are counted and dropped.
 */
#ifndef TBPF_TIMELINE_H
#define TBPF_TIMELINE_H

#include <stdint.h>
#include "tbpf_abi.h"
#include "cudarec.h"

/* Cap on the depth the timeline tracks (deeper enters are counted and
 * ignored, with their exits). */
#define TL_MAX_DEPTH 256

struct tl_frame {
	uint32_t op_id;
	uint16_t depth_rec;    /* depth field of the enter record */
	uint16_t flags;        /* flags of the enter record */
	uint64_t begin_ns;
	uint64_t child_ns;     /* total of the closed children */
	uint64_t launches;     /* CUDA launches while this frame was on top */
	void *user;            /* for the consumer: set in slice_begin */
	uint32_t stack_id;     /* the enter record's Python stack: the
				* outermost op's, or its own inside a
				* record_function scope */
	uint64_t shape_id;     /* input shapes of the enter record, 0 = none */
};

struct tl_slice {
	uint32_t pid, tid;
	uint32_t op_id;
	uint32_t depth;        /* nesting depth in the timeline, 0 = outermost */
	uint32_t flags;        /* enum tbpf_op_flags: of the exit (end), enter (begin) */
	uint64_t begin_ns, end_ns;   /* end_ns = 0 in slice_begin */
	uint64_t self_ns;      /* end: duration minus closed children */
	uint64_t launches;     /* end: launches with this op on top */
	uint64_t stack_id;     /* Python stack id of the outermost op (rec_op.stack_id) */
	uint64_t shape_id;     /* its input shapes (capture_meta_shape), 0 = none */
	/* Open op frames, outermost first; frames[depth] is this slice. */
	struct tl_frame *frames;
};

struct tl_cuda {
	uint32_t pid, tid;
	struct cuda_ev ev;           /* the call or allocator event, decoded:
				      * what the exporters read */
	const struct rec_hdr *rec;   /* its record (consumers read ev) */
	const struct tl_slice *top;  /* op on top of the thread's stack, or NULL */
};

struct timeline_ops {
	void (*slice_begin)(void *ctx, const struct tl_slice *s);
	void (*slice_end)(void *ctx, const struct tl_slice *s);
	void (*cuda)(void *ctx, const struct tl_cuda *c);
};

struct timeline_stats {
	uint64_t slices;
	uint64_t inferred_closes;   /* frames closed without their exit record */
	uint64_t orphan_exits;      /* exits with no open frame */
	uint64_t too_deep;          /* enters beyond TL_MAX_DEPTH */
	uint64_t backwards;         /* exits earlier than their enter (clamped) */
	uint64_t threads;
	uint64_t skipped;           /* records flagged OPF_SKIP (not slices) */
};

struct timeline;

struct timeline *timeline_new(const struct timeline_ops *ops, void *ctx);
/* 0, or -ENOMEM.  Records other than ops and those cuda_ev_decode
 * decodes (cudarec.h) are ignored. */
int timeline_feed(struct timeline *tl, const struct rec_hdr *rec);
/* Close all open frames at end_ns (or at their thread's last timestamp if
 * end_ns is 0), deepest first, flagged OPF_INFERRED. */
void timeline_finish(struct timeline *tl, uint64_t end_ns);
/* The frames still open, thread by thread, each thread's innermost first
 * (slices with end_ns 0; frames[depth].user as the consumer set it). */
void timeline_each_open(const struct timeline *tl, void (*fn)(void *ctx, const struct tl_slice *s),
			void *ctx);
const struct timeline_stats *timeline_stats(const struct timeline *tl);
void timeline_free(struct timeline *tl);

/* tl as a replay sink (replay.h): every record into timeline_feed, then
 * timeline_finish(tl, 0) after the last.  The replay stops at the first
 * timeline error or once *err (the consumer's sticky error, may be NULL)
 * is set.  c must outlive the replay. */
struct bus_sink;
struct timeline_sink_ctx {
	struct timeline *tl;
	const int *err;
};
struct bus_sink timeline_sink(struct timeline_sink_ctx *c);

#endif /* TBPF_TIMELINE_H */
