/* inproc_session.h - the --inproc feed: the RecordFunction agent in each
 * target (inject if needed, START, drain, STOP); its records are handed on
 * as REC_OP_ENTER/EXIT records and its names as op names (to a capture
 * writer, or to the model's feed: the caller's struct inproc_out), so the
 * one model builder makes the rows (docs/inproc.md). */
#ifndef TBPF_INPROC_SESSION_H
#define TBPF_INPROC_SESSION_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "tbpf_abi.h"
#include "bwstack.h"

struct inproc_session;

/* Where records and names go; each returns 0 or -errno (stops the drain). */
struct inproc_out {
	int (*op)(void *ctx, const struct rec_op *r);
	/* a name before the first record with its op id; once per id */
	int (*name)(void *ctx, uint32_t op_id, const char *name);
	/* a Python stack the agent walked, before the drain
	 * that follows it ends; NULL: the agent walks no stacks */
	int (*stack)(void *ctx, const struct rec_pystack *r);
	/* --record-shapes: a shape list before the first record with its
	 * id (REC_OP_ENTER as struct rec_op_shape, h.size says); once per id */
	int (*shape)(void *ctx, uint64_t shape_id, const struct tbpf_shape *s);
	/* --group-by-stack: a backward op's derived stack (model/bwstack.h),
	 * after the stacks it is made of were handed to stack, before the
	 * rows are built; its records carry d->id.  NULL: backward ops keep
	 * their own stacks and the agent reads no sequence numbers */
	int (*derive)(void *ctx, uint32_t pid, const struct bwstack_derived *d);
	/* with stack: the output takes no module calls (tbpf daemon's
	 * profiles): the agent does not count them, no REC_MODCALL */
	bool no_modcalls;
	/* CUDA records (join/cudaattr.h): begin before a target's rings are
	 * drained, mark after every read of a ring's
	 * head, before its records are handed to op; settled after a drain
	 * of pid that handed on every record up to its last head read (or
	 * found pid gone).  NULL: not called */
	void (*begin)(void *ctx);   /* a drain of one target's rings starts */
	/* just before an agent is asked to start (its first op may follow at
	 * once): no op was recorded before.  --inject: the CUDA calls made
	 * until here are cut and the BPF ring drained, the CUPTI records of
	 * the injection filled it and it dropped the first ops' records */
	void (*starting)(void *ctx);
	void (*mark)(void *ctx);
	int (*settled)(void *ctx, uint32_t pid);
	void *ctx;
};

struct inproc_totals {
	uint64_t records;    /* slots drained */
	uint64_t drops;      /* agent ring full */
	uint64_t unmatched;  /* ends without their start */
	uint64_t overflow;   /* starts deeper than TBPF_INPROC_STACK */
	uint64_t names_lost;
	uint64_t stacks;       /* Python stacks published by the agents */
	uint64_t stacks_lost;  /* new stacks their full tables could not take */
	uint64_t bad_frames;   /* walks stopped at a frame that was not Python's */
	uint64_t shapes_lost;  /* calls without shapes: the agent's table was full */
	uint64_t shapes_bad;   /* tensors whose sizes did not multiply to numel */
	uint64_t bw_lost;      /* backward nodes whose forward stack was not kept */
	uint64_t holds;        /* models' first calls held until named */
	uint64_t hold_ns;      /* ... their time held */
	uint64_t hold_timeouts;   /* holds that ran out (tbpf too slow) */
};

struct inproc_session *inproc_session_new(const struct inproc_out *out);
/* Load the agent into pid when it is not there (ptrace + dlopen), then
 * START with layout; 0, or -errno with *why (malloc'd): -EPERM ptrace not
 * permitted, -ESRCH the process exited, -EBUSY another tbpf owns the
 * agent, -EPROTO the agent refused (no symbols, ...). */
int inproc_session_add(struct inproc_session *s, pid_t pid, const char *agent_path,
		       unsigned layout, char **why);
/* The same, with input shapes read through iv (the target torch's,
 * torch_build_of; NULL: none).  *shapes_on: whether the agent reads
 * them (false with a NULL iv, or when the agent could not set them up). */
int inproc_session_add_shapes(struct inproc_session *s, pid_t pid, const char *agent_path,
			      unsigned layout, const struct tbpf_inproc_ivlayout *iv,
			      bool *shapes_on, char **why);
/* The same, with sequence numbers read through sl (the target torch's,
 * torch_build_of; NULL, or no out.derive: none).  *seq_on: whether
 * the agent writes them. */
int inproc_session_add_full(struct inproc_session *s, pid_t pid, const char *agent_path,
			    unsigned layout, const struct tbpf_inproc_ivlayout *iv,
			    const struct tbpf_inproc_seqlayout *sl, bool *shapes_on,
			    bool *seq_on, char **why);
/* Drain every target to the output; returns how many are alive, or the
 * output's -errno. */
int inproc_session_poll(struct inproc_session *s);
/* STOP every live target and drain what is left. */
void inproc_session_stop(struct inproc_session *s);
void inproc_session_totals(const struct inproc_session *s, struct inproc_totals *t);
/* Python stacks handed to out.stack so far (a poll that found new ones
 * polls again soon: they are named while the target lives). */
uint64_t inproc_session_stacks(const struct inproc_session *s);
/* Whether every target's agent counts nn.Module calls itself (REC_MODCALL
 * records to out.op): then no module-call uprobe is needed. */
bool inproc_session_modcalls(const struct inproc_session *s);
/* Module calls come from the uprobe after all: ignore the agents'. */
void inproc_session_drop_modcalls(struct inproc_session *s);
/* Whether pid is a target still alive (as of the last poll). */
bool inproc_session_live(const struct inproc_session *s, pid_t pid);
void inproc_session_free(struct inproc_session *s);

#endif
