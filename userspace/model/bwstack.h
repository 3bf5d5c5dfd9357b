/* bwstack.h - model stage: the Source Location torch.profiler gives
 * backward ops (EventList._set_backward_stacktraces).
 *
 * torch.profiler gives every event under a backward-function scope
 * (RecordScope::BACKWARD_FUNCTION: the autograd node, `MmBackward0`, and
 * the ops it runs) the stack of the first event, in start order, that is
 * not under such a scope and has the node's sequence number on the node's
 * forward thread: key (sequence_nr, thread), where sequence_nr is what the
 * RecordFunction peeked from the thread's autograd counter and thread is
 * torch's own thread id (RecordFunction::threadId(); the node's
 * forwardThreadId()).  No such event: an empty stack.
 *
 * This is that rule over a stream of records, thread by thread in start
 * order, as the in-process agent hands them on (docs/inproc.md):
 *   bwstack_fwd   a forward event's (thread, sequence number, stack);
 *                 the first of each key is kept
 *   bwstack_bwd   a backward node's (forward thread, sequence number):
 *                 the next enter on its kernel thread is the node
 *   bwstack_enter / bwstack_exit   every op, with its own Python stack
 * An enter inside a backward scope is keyed by a derived stack id: the
 * op's own stack (its layers) with the forward event's Source Location;
 * outside one its own stack id is kept.
 *
 * Bounded: the forward stacks of the last BWSTACK_WINDOW sequence numbers
 * per forward thread (a node whose forward event is older reads an empty
 * stack and is counted in `lost`), BWSTACK_THREADS forward threads per
 * process. */
#ifndef TBPF_BWSTACK_H
#define TBPF_BWSTACK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

#define BWSTACK_WINDOW (1u << 16)
#define BWSTACK_THREADS 64
#define BWSTACK_NEST 16         /* backward scopes open in one thread */

/* A derived stack's 64-bit id in stack stores and captures (rows carry
 * the low 32 bits, as for the agent's stacks). */
#define BWSTACK_STACK_ID(d) TBPF_BWSTACK_ID(d)   /* tbpf_abi.h */

struct bwstack;

struct bwstack *bwstack_new(void);
void bwstack_free(struct bwstack *b);

/* A forward event (not inside a backward scope) with sequence number seq
 * (-1: none) on torch thread fthread, keyed in the rows by stack (low 32
 * bits of its Python stack id, 0 none). */
void bwstack_fwd(struct bwstack *b, uint32_t pid, uint64_t fthread, int64_t seq, uint32_t stack);
/* The forward stack of (fthread, seq): true and *stack, or false. */
bool bwstack_lookup(const struct bwstack *b, uint32_t pid, uint64_t fthread, int64_t seq,
		    uint32_t *stack);
/* The next enter on kernel thread tid is a backward node of (fthread,
 * seq). */
void bwstack_bwd(struct bwstack *b, uint32_t pid, uint32_t tid, uint64_t fthread, int64_t seq);

/* A new derived stack: its rows' id, the op's own stack (layers) and the
 * forward event's (Source Location; found false: none, an empty one). */
struct bwstack_derived {
	uint32_t id, own, fwd;
	bool found;
};

/* An op enters at depth on (pid, tid) with its own stack: the stack id its
 * row is keyed by.  *fresh is set (and *d filled) the first time a
 * derived id is used in pid: its stack must be made before the rows are
 * built (stackstore_derive). */
uint32_t bwstack_enter(struct bwstack *b, uint32_t pid, uint32_t tid, unsigned depth,
		       uint32_t stack, bool *fresh, struct bwstack_derived *d);
/* The op at depth on (pid, tid) ended (deeper ones with it). */
void bwstack_exit(struct bwstack *b, uint32_t pid, uint32_t tid, unsigned depth);

/* Pure: the derived id of (own, fwd, found): never 0, never own. */
uint32_t bwstack_derive_id(uint32_t own, uint32_t fwd, bool found);

/* Backward nodes whose forward stack was not kept (older than the
 * window, or more forward threads than BWSTACK_THREADS). */
uint64_t bwstack_lost(const struct bwstack *b);

#endif /* TBPF_BWSTACK_H */
