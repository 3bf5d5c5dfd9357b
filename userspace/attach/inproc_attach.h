/* inproc_attach.h - the RecordFunction agent (libtbpf_inproc.so, --inproc)
 * in a target: where its control block, ring and name table are, requests,
 * and draining the ring (docs/inproc.md). */
#ifndef TBPF_INPROC_ATTACH_H
#define TBPF_INPROC_ATTACH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tbpf_abi.h"

#define INPROC_LIB_NAME "libtbpf_inproc.so"

struct inproc_loc {
	char *path;         /* agent file as the target mapped it (malloc'd) */
	uint64_t ctl;       /* struct tbpf_inproc_ctl tbpf_inproc */
	uint64_t ring;      /* struct tbpf_inproc_rec tbpf_inproc_ring[] */
	uint64_t names;     /* struct tbpf_inproc_name tbpf_inproc_names[] */
	uint64_t py;        /* struct tbpf_inproc_py tbpf_inproc_py */
	uint64_t stacks;    /* struct tbpf_inproc_stack tbpf_inproc_stacks[] */
	uint64_t shapes;    /* struct tbpf_shape tbpf_inproc_shapes[] */
	uint64_t shard_rings; /* tbpf_inproc_shard_ring[TBPF_INPROC_SHARDS][] (version 7) */
};


/* Pure: how many slots from v[0] (ring index `first`) are committed. */
size_t inproc_committed(const struct tbpf_inproc_rec *v, size_t n, uint64_t first);
/* Pure: the op id of a record or name (user scope or op range). */
uint32_t inproc_op_id(uint32_t hash, unsigned flags);
/* Pure: a ring slot as the uprobe mode's REC_OP_ENTER/EXIT record. */
void inproc_to_rec_op(const struct tbpf_inproc_rec *r, uint32_t pid, struct rec_op *out);

/* /proc/PID/maps + ELF: -ENOENT when the agent is not loaded. */
int inproc_locate(pid_t pid, struct inproc_loc *loc);
void inproc_loc_free(struct inproc_loc *loc);
/* Read the control block: -EPROTO when magic or version differ. */
int inproc_read_ctl(pid_t pid, const struct inproc_loc *loc, struct tbpf_inproc_ctl *c);
/* Post a request and wait (timeout_ms) until the agent served it; *c
 * gets the control block afterwards.  -ETIMEDOUT, -ESRCH, ... */
int inproc_request(pid_t pid, const struct inproc_loc *loc, uint32_t req, pid_t owner,
		   uint32_t layout, int timeout_ms, struct tbpf_inproc_ctl *c);
/* START watched by an owner channel (owner_chan.h): CHANNEL, take the
 * offered write end, START.  *chan_fd gets tbpf's end when the agent is
 * active (close it with owner_chan_close after STOP: the agent removes its
 * callbacks itself once it closes), else -1.  Errors as inproc_request;
 * c->state tells a refusal. */
struct inproc_hook {
	void (*fn)(void *ctx);
	void *ctx;
};
/* starting (may be NULL): called right before the START request, after
 * the channel's (the agent answers it at its slow idle poll, up to 50 ms) */
int inproc_start(pid_t pid, const struct inproc_loc *loc, uint32_t layout, int timeout_ms,
		 struct tbpf_inproc_ctl *c, int *chan_fd, const struct inproc_hook *starting);

/* Ask for input shapes at the next START (iv), or for none (NULL). */
int inproc_set_shapes(pid_t pid, const struct inproc_loc *loc,
		      const struct tbpf_inproc_ivlayout *iv);
/* Ask for sequence numbers at the next START (sl), or for none (NULL). */
int inproc_set_seq(pid_t pid, const struct inproc_loc *loc,
		   const struct tbpf_inproc_seqlayout *sl);
/* Pure: an ENTER slot with a shape as the uprobe mode's REC_OP_ENTER with
 * a shape id (struct rec_op_shape): shape_id = inproc_shape_id(pid, slot). */
void inproc_to_rec_op_shape(const struct tbpf_inproc_rec *r, uint32_t pid,
			    struct rec_op_shape *out);
/* Pure: the capture's shape id of the agent's shape table entry r->shape
 * of pid (unique per process and entry; 0 when r->shape is 0). */
uint64_t inproc_shape_id(uint32_t pid, uint32_t shape);

/* Drain what the producers committed: names and shape lists first
 * (fn_name, fn_shape: may be NULL), then the records of the shared ring
 * and of each thread's ring, each in ring order (a thread's records are
 * all in one ring, in its order; threads' records interleave by ring, not
 * by time); tails written back.  Returns records read or -errno. */
/* a shape list of the agent's table, entry index + 1 (as r->shape) */
typedef int (*inproc_shape_fn_t)(void *ctx, uint32_t shape, const struct tbpf_shape *s);
struct inproc_reader {
	uint64_t tail;        /* next ring index to read */
	uint64_t shard_tail[TBPF_INPROC_SHARDS];   /* the same, of the threads' rings */
	uint32_t names_seen;  /* name entries already passed on */
	uint32_t shapes_seen; /* shape entries already passed on */
	struct tbpf_inproc_rec *buf;
	struct tbpf_inproc_name *nbuf;
	struct tbpf_shape *sbuf;
	inproc_shape_fn_t fn_shape;   /* set by the caller, or NULL */
	/* after each read of the ring's head, before its slots are handed
	 * on (--inproc's CUDA records: join/cudaattr.h); NULL: none */
	void (*fn_head)(void *ctx);
	bool caught_up;       /* the last drain read every slot up to its last head */
};
typedef int (*inproc_rec_fn)(void *ctx, const struct tbpf_inproc_rec *r);
typedef int (*inproc_name_fn)(void *ctx, const struct tbpf_inproc_name *n);
/* From the control block read after START: where each ring is read from. */
int inproc_reader_init(struct inproc_reader *rd, const struct tbpf_inproc_ctl *c);
void inproc_reader_free(struct inproc_reader *rd);
long inproc_drain(pid_t pid, const struct inproc_loc *loc, struct inproc_reader *rd,
		  inproc_rec_fn fn_rec, inproc_name_fn fn_name, void *ctx);

/* Python stacks: the interpreter's offsets for the
 * agent's walker (on = false: no walk) before START; after it, *py gets
 * the agent's side (state, detail, counters). */
int inproc_set_python(pid_t pid, const struct inproc_loc *loc, const struct tbpf_pyproc *pp,
		      bool on);
/* Ask the agent to count nn.Module calls itself from the next START
 * (agent/modcall.h; with Python stacks on), and with hold to hold a
 * model's first call until tbpf has named its stack (stacks_named,
 * written by inproc_drain_stacks once fn has named them). */
int inproc_set_modcalls(pid_t pid, const struct inproc_loc *loc, bool want, bool hold);
/* An INPROC_MODCALL slot as the uprobe mode's REC_MODCALL record. */
void inproc_to_rec_modcall(const struct tbpf_inproc_rec *r, uint32_t pid, struct rec_op *o);
int inproc_read_py(pid_t pid, const struct inproc_loc *loc, struct tbpf_inproc_py *py);
/* Pure: a published stack as the BPF walker's REC_PYSTACK record. */
void inproc_stack_to_rec(const struct tbpf_inproc_stack *e, uint32_t pid, struct rec_pystack *r);
/* Stacks published since *seen, to fn in order (which names them), then
 * *seen into the agent's stacks_named; returns how many or -errno. */
typedef int (*inproc_stack_fn)(void *ctx, const struct rec_pystack *r);
long inproc_drain_stacks(pid_t pid, const struct inproc_loc *loc, uint32_t *seen,
			 inproc_stack_fn fn, void *ctx);

#endif
