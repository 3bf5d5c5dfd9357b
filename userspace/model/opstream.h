/* opstream.h - model stage: op rows from a stream of enter/exit records,
 * window by window (tbpf daemon --inproc).
 *
 * profile_agg (the capture replay) pairs enters and exits in one pass
 * over a whole run.  The daemon's windows need rows for the calls that
 * ended in each window while ops still open at its end stay open into the
 * next one: this keeps each thread's open frames across takes, and the
 * rows of the calls ended since the last take (calls, self and total
 * time, longest call, the latency histogram in the BPF side's buckets).
 * Records are those of the in-process agent: every enter has a depth (the
 * RecordFunctions open below it on its thread) and its exit the same
 * depth; frames above an exit's depth ended elsewhere and are dropped.
 * Pure (no I/O), unit-tested from fixtures. */
#ifndef TBPF_OPSTREAM_H
#define TBPF_OPSTREAM_H
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

/* Rows are keyed by (pid, op, stack): stack_id is the enter record's
 * Python stack (low 32 bits; 0 none), the call site that ran the op. */
struct opstream_row {
	uint32_t pid, op_id, stack_id;
	uint64_t calls, self_ns, total_ns, max_ns;
	uint64_t buckets[TBPF_HIST_BUCKETS];
};

struct opstream;

struct opstream *opstream_new(void);
void opstream_free(struct opstream *s);
/* An op start or end record (other types are ignored).  0 or
 * -ENOMEM. */
int opstream_add(struct opstream *s, const struct rec_op *r);
/* The rows of the calls that ended since the last take (malloc'd, *n
 * rows; NULL when none), and start over; open frames are kept. */
struct opstream_row *opstream_take(struct opstream *s, size_t *n);
/* Forget a process's threads (it exited). */
void opstream_forget_pid(struct opstream *s, uint32_t pid);
/* Pure: the histogram bucket of a duration, as bpf/hist.bpf.h's. */
unsigned opstream_bucket(uint64_t ns);

#endif
