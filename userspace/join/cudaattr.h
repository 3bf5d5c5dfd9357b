/* cudaattr.h - join stage: the host CUDA records of BPF's libcudart/libcuda
 * probes (launches, copies, synchronizations, allocations) joined to the
 * op the in-process agent (--inproc) had open on the calling thread.
 *
 * In the uprobe mode BPF knows the thread's op stack when a CUDA call
 * enters and writes the op into the record.  With --inproc the ops come
 * from another stream (the agent's ring, read every few ms), so the CUDA
 * records are held here and put back into the op stream of their thread
 * by time: a record goes out just before the first op record of its
 * thread stamped after the call's midpoint (start + dur / 2), with op_id,
 * stack_id (and a launch's depth) of the op then on top, exactly where BPF
 * would have written it in the uprobe mode's ring.  Both streams stamp
 * CLOCK_MONOTONIC (bpf_ktime_get_ns; the agent's TSC converted to it,
 * docs/inproc.md); the midpoint keeps half the call's host time as margin
 * against the conversion's error.
 *
 * When is a held record safe to send with the op on top now?  Every op
 * record its thread wrote before the call was in the agent's ring before
 * the call's record was in BPF's ring (same thread, program order).  So
 * the caller marks each read of the agent ring's head (cudaattr_mark,
 * right before it drains BPF's ring) and says when a drain consumed
 * everything up to its last head read (cudaattr_settled): records that
 * arrived before that read are then complete.
 *
 *   a = cudaattr_new(emit, ctx)
 *   per drain of a target's rings: cudaattr_begin(a); then per ring
 *       head read -> cudaattr_mark(a) -> drain BPF's ring
 *       (cudaattr_cuda per CUDA record) -> cudaattr_op per op record, in
 *       ring order, before the caller passes the op record on ->
 *       cudaattr_settled(a, pid) when every ring caught up: the records
 *       held before cudaattr_begin (before any of its head reads) go out
 *   cudaattr_flush(a, end_ns) at the end; cudaattr_free(a)
 *
 * Pure: records in, records out (emit), unit-tested from fixtures. */
#ifndef TBPF_CUDAATTR_H
#define TBPF_CUDAATTR_H
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

/* A CUDA record with its op filled in; 0 or -errno (returned by the call
 * that emitted it). */
typedef int (*cudaattr_emit_fn)(void *ctx, const struct rec_hdr *h);

struct cudaattr_stats {
	uint64_t held;       /* CUDA records taken */
	uint64_t in_op;      /* emitted under an op */
	uint64_t no_op;      /* emitted with no op open on their thread */
	uint64_t too_deep;   /* op enters beyond CUDAATTR_DEPTH (not tracked) */
	uint64_t bad;        /* records of an unknown type or size (dropped) */
	uint64_t after_end;  /* made after the end cudaattr_flush was given (dropped) */
};

#define CUDAATTR_DEPTH 128

struct cudaattr;

struct cudaattr *cudaattr_new(cudaattr_emit_fn emit, void *ctx);
/* Whether h is a record cudaattr_cuda takes (a CUDA host record). */
int cudaattr_is_cuda(const struct rec_hdr *h, size_t size);
/* Hold a CUDA record (copied).  0 or -ENOMEM. */
int cudaattr_cuda(struct cudaattr *a, const struct rec_hdr *h, size_t size);
/* The agent ring's head was just read (records held from now on may be
 * later than it). */
void cudaattr_mark(struct cudaattr *a);
/* An op record (a start or an end; others are ignored) of the
 * in-process stream: first emits its thread's held records that came
 * before it, then applies it.  0 or emit's error. */
int cudaattr_op(struct cudaattr *a, const struct rec_op *r);
/* A drain of one target's rings (the agent's ring and its threads' own)
 * begins: a mark before any of their heads is read. */
void cudaattr_begin(struct cudaattr *a);
/* pid's op records up to each ring's last head read are all in: emit its
 * records held before the last cudaattr_begin, under the op now on top of
 * their thread. */
int cudaattr_settled(struct cudaattr *a, uint32_t pid);
/* The end (every stream drained): emit every held record up to end_ns
 * (the last op start recorded; UINT64_MAX: all), drop those after it.
 * The agents stopped after it: an op started before records its end, but
 * not the ops it runs after that, whose calls would be its self time (the
 * uprobe mode drops the calls after its end too). */
int cudaattr_flush(struct cudaattr *a, uint64_t end_ns);
void cudaattr_get_stats(const struct cudaattr *a, struct cudaattr_stats *st);
void cudaattr_free(struct cudaattr *a);

#endif /* TBPF_CUDAATTR_H */
