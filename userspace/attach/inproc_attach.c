/* inproc_attach.c - the RecordFunction agent in a target: locate it, post
 * requests, drain its ring (docs/inproc.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "agent_attach.h"
#include "inject.h"
#include "inproc_attach.h"
#include "owner_chan.h"
#include "remote.h"

#define DRAIN_CHUNK 16384u   /* slots read at once */

size_t inproc_committed(const struct tbpf_inproc_rec *v, size_t n, uint64_t first)
{
	size_t k = 0;

	while (k < n && v[k].stamp == (uint32_t)(first + k + 1))
		k++;
	return k;
}

uint32_t inproc_op_id(uint32_t hash, unsigned flags)
{
	if (flags & INPROC_USER_SCOPE)
		return TBPF_SCOPE_ID_BASE | (hash & TBPF_SCOPE_ID_MASK);
	return TBPF_INPROC_ID_BASE | (hash & TBPF_INPROC_ID_MASK);
}

void inproc_to_rec_op(const struct tbpf_inproc_rec *r, uint32_t pid, struct rec_op *o)
{
	memset(o, 0, sizeof(*o));
	o->h.type = r->kind == INPROC_ENTER ? REC_OP_ENTER : REC_OP_EXIT;
	o->h.size = sizeof(*o);
	o->h.tid = r->tid;
	o->h.ts_ns = r->ts_ns;
	o->pid = pid;
	o->op_id = inproc_op_id(r->hash, r->flags);
	o->depth = r->depth;
	o->flags = (r->flags & INPROC_USER_SCOPE) ? OPF_SCOPE | OPF_USER : 0;
	o->stack_id = r->kind == INPROC_ENTER ? r->stack : 0;
}

uint64_t inproc_shape_id(uint32_t pid, uint32_t shape)
{
	/* never 0 for a shape; the uprobe mode's ids are hashes, these do
	 * not go in the same capture */
	return shape ? (uint64_t)pid << 32 | shape : 0;
}

void inproc_to_rec_op_shape(const struct tbpf_inproc_rec *r, uint32_t pid,
			    struct rec_op_shape *o)
{
	memset(o, 0, sizeof(*o));
	inproc_to_rec_op(r, pid, &o->op);
	o->op.h.size = sizeof(*o);
	o->shape_id = inproc_shape_id(pid, r->shape);
}

int inproc_locate(pid_t pid, struct inproc_loc *loc)
{
	char path[64], *rooted = NULL;
	uint64_t base = 0;
	FILE *f;
	int err;

	memset(loc, 0, sizeof(*loc));
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	err = agent_find_mapping(f, INPROC_LIB_NAME, &loc->path, &base);
	fclose(f);
	if (err)
		return err;
	if (asprintf(&rooted, "/proc/%d/root%s", pid, loc->path) < 0)
		return -ENOMEM;
	err = inject_elf_obj(rooted, "tbpf_inproc", base, &loc->ctl);
	if (!err)
		err = inject_elf_obj(rooted, "tbpf_inproc_ring", base, &loc->ring);
	if (!err)
		err = inject_elf_obj(rooted, "tbpf_inproc_names", base, &loc->names);
	if (!err)
		err = inject_elf_obj(rooted, "tbpf_inproc_py", base, &loc->py);
	if (!err)
		err = inject_elf_obj(rooted, "tbpf_inproc_stacks", base, &loc->stacks);
	if (!err)
		err = inject_elf_obj(rooted, "tbpf_inproc_shapes", base, &loc->shapes);
	/* version 8; an older agent lacks it and fails the version check */
	if (!err && inject_elf_obj(rooted, "tbpf_inproc_shard_ring", base, &loc->shard_rings))
		loc->shard_rings = 0;
	free(rooted);
	return err;
}

void inproc_loc_free(struct inproc_loc *loc)
{
	free(loc->path);
	loc->path = NULL;
}

int inproc_read_ctl(pid_t pid, const struct inproc_loc *loc, struct tbpf_inproc_ctl *c)
{
	int err = remote_read(pid, loc->ctl, c, sizeof(*c));

	if (err)
		return err;
	c->detail[sizeof(c->detail) - 1] = 0;
	return c->magic == TBPF_INPROC_MAGIC && c->version == TBPF_INPROC_VERSION ? 0 : -EPROTO;
}

#define CTL_OFF(f) (loc->ctl + offsetof(struct tbpf_inproc_ctl, f))

int inproc_request(pid_t pid, const struct inproc_loc *loc, uint32_t req, pid_t owner,
		   uint32_t layout, int timeout_ms, struct tbpf_inproc_ctl *c)
{
	struct { uint32_t request, seq; int32_t owner; uint32_t layout; } w;
	int err = inproc_read_ctl(pid, loc, c);

	if (err)
		return err;
	w.request = req;
	w.owner = owner;
	w.layout = layout;
	w.seq = c->seq + 1;
	/* request, owner and layout first, then seq (the agent acts on seq) */
	err = remote_write(pid, CTL_OFF(owner), &w.owner, 8);
	if (!err)
		err = remote_write(pid, CTL_OFF(request), &w.request, 4);
	if (!err)
		err = remote_write(pid, CTL_OFF(seq), &w.seq, 4);
	for (int waited = 0; !err; waited += 5) {
		err = inproc_read_ctl(pid, loc, c);
		if (err || c->served_seq == w.seq)
			break;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		usleep(5000);
	}
	return err;
}

int inproc_start(pid_t pid, const struct inproc_loc *loc, uint32_t layout, int timeout_ms,
		 struct tbpf_inproc_ctl *c, int *chan_fd, const struct inproc_hook *starting)
{
	int32_t taken;
	int err, fd;

	*chan_fd = -1;
	err = inproc_request(pid, loc, INPROC_REQ_CHANNEL, getpid(), layout, timeout_ms, c);
	if (err)
		return err;
	fd = owner_chan_take(pid, &c->chan);
	if (fd < 0)
		return fd;
	taken = c->chan.wfd;
	err = remote_write(pid, CTL_OFF(chan.taken), &taken, sizeof(taken));
	if (!err && starting && starting->fn)
		starting->fn(starting->ctx);
	if (!err)
		err = inproc_request(pid, loc, INPROC_REQ_START, getpid(), layout, timeout_ms, c);
	if (err || c->state != INPROC_ACTIVE)
		owner_chan_close(fd);
	else
		*chan_fd = fd;
	return err;
}

int inproc_set_shapes(pid_t pid, const struct inproc_loc *loc,
		      const struct tbpf_inproc_ivlayout *iv)
{
	struct tbpf_inproc_ivlayout none = { 0 };
	uint32_t want = iv != NULL;
	int err = remote_write(pid, CTL_OFF(iv), iv ? iv : &none, sizeof(none));

	return err ? err : remote_write(pid, CTL_OFF(want_shapes), &want, sizeof(want));
}

int inproc_set_seq(pid_t pid, const struct inproc_loc *loc,
		   const struct tbpf_inproc_seqlayout *sl)
{
	struct tbpf_inproc_seqlayout none = { 0 };
	uint32_t want = sl != NULL;
	int err = remote_write(pid, CTL_OFF(sl), sl ? sl : &none, sizeof(none));

	return err ? err : remote_write(pid, CTL_OFF(want_seq), &want, sizeof(want));
}

int inproc_reader_init(struct inproc_reader *rd, const struct tbpf_inproc_ctl *c)
{
	memset(rd, 0, sizeof(*rd));
	rd->tail = c->tail;
	for (int k = 0; k < TBPF_INPROC_SHARDS; k++)
		rd->shard_tail[k] = c->shard[k].tail;
	rd->buf = malloc(DRAIN_CHUNK * sizeof(*rd->buf));
	rd->nbuf = malloc(256 * sizeof(*rd->nbuf));
	rd->sbuf = malloc(64 * sizeof(*rd->sbuf));
	return rd->buf && rd->nbuf && rd->sbuf ? 0 : -ENOMEM;
}

void inproc_reader_free(struct inproc_reader *rd)
{
	free(rd->buf);
	free(rd->nbuf);
	free(rd->sbuf);
	memset(rd, 0, sizeof(*rd));
}

/* Slots [first, first + n) (n <= DRAIN_CHUNK) of the ring at `ring`,
 * wrapping at its end. */
static int read_slots(pid_t pid, uint64_t ring, uint64_t first, size_t n,
		      struct tbpf_inproc_rec *out)
{
	size_t at = first & (TBPF_INPROC_SLOTS - 1), n1 = n;
	int err;

	if (at + n1 > TBPF_INPROC_SLOTS)
		n1 = TBPF_INPROC_SLOTS - at;
	err = remote_read(pid, ring + at * sizeof(*out), out, n1 * sizeof(*out));
	if (!err && n1 < n)
		err = remote_read(pid, ring, out + n1, (n - n1) * sizeof(*out));
	return err;
}

static int drain_names(pid_t pid, const struct inproc_loc *loc, struct inproc_reader *rd,
		       inproc_name_fn fn, void *ctx)
{
	uint32_t used;
	int err = remote_read(pid, CTL_OFF(nnames_used), &used, sizeof(used));

	if (used > TBPF_INPROC_NAMES)
		used = TBPF_INPROC_NAMES;
	while (!err && rd->names_seen < used) {
		uint32_t n = used - rd->names_seen;

		if (n > 256)
			n = 256;
		err = remote_read(pid, loc->names + (uint64_t)rd->names_seen * sizeof(*rd->nbuf),
				  rd->nbuf, n * sizeof(*rd->nbuf));
		for (uint32_t i = 0; !err && i < n; i++) {
			rd->nbuf[i].name[sizeof(rd->nbuf[i].name) - 1] = 0;
			err = fn(ctx, &rd->nbuf[i]);
		}
		rd->names_seen += n;
	}
	return err;
}

/* Shape lists are published before the records that use them, like names. */
static int drain_shapes(pid_t pid, const struct inproc_loc *loc, struct inproc_reader *rd,
			void *ctx)
{
	uint32_t used;
	int err;

	if (!rd->fn_shape || !loc->shapes)
		return 0;
	err = remote_read(pid, CTL_OFF(nshapes_used), &used, sizeof(used));
	if (used > TBPF_INPROC_SHAPES)
		used = TBPF_INPROC_SHAPES;
	while (!err && rd->shapes_seen < used) {
		uint32_t n = used - rd->shapes_seen;

		if (n > 64)
			n = 64;
		err = remote_read(pid, loc->shapes + (uint64_t)rd->shapes_seen * sizeof(*rd->sbuf),
				  rd->sbuf, n * sizeof(*rd->sbuf));
		for (uint32_t i = 0; !err && i < n; i++)
			err = rd->fn_shape(ctx, rd->shapes_seen + i + 1, &rd->sbuf[i]);
		rd->shapes_seen += n;
	}
	return err;
}

/* One ring: its slots at `ring`, head and tail in the control block at
 * head_at and tail_at, *tail the reader's copy. */
static long drain_ring(pid_t pid, const struct inproc_loc *loc, struct inproc_reader *rd,
		       uint64_t ring, uint64_t head_at, uint64_t tail_at, uint64_t *tail,
		       inproc_rec_fn fn_rec, inproc_name_fn fn_name, void *ctx)
{
	long total = 0;

	for (;;) {
		uint64_t head;
		size_t n, k;
		int err = remote_read(pid, head_at, &head, sizeof(head));

		if (err)
			return err;
		if (rd->fn_head)
			rd->fn_head(ctx);
		n = head - *tail > DRAIN_CHUNK ? DRAIN_CHUNK : (size_t)(head - *tail);
		if (!n)
			break;
		err = read_slots(pid, ring, *tail, n, rd->buf);
		k = err ? 0 : inproc_committed(rd->buf, n, *tail);
		/* again: a slot whose stamp was seen is complete by now */
		if (!err && k)
			err = read_slots(pid, ring, *tail, k, rd->buf);
		/* names are published before the records that use them */
		if (!err)
			err = drain_names(pid, loc, rd, fn_name, ctx);
		if (!err)
			err = drain_shapes(pid, loc, rd, ctx);
		for (size_t i = 0; !err && i < k; i++)
			err = fn_rec(ctx, &rd->buf[i]);
		if (err)
			return err;
		*tail += k;
		total += (long)k;
		err = remote_write(pid, tail_at, tail, sizeof(*tail));
		if (err)
			return err;
		if (k < n) {
			rd->caught_up = false;   /* a slot not committed yet */
			break;
		}
	}
	return total;
}

long inproc_drain(pid_t pid, const struct inproc_loc *loc, struct inproc_reader *rd,
		  inproc_rec_fn fn_rec, inproc_name_fn fn_name, void *ctx)
{
	long total;

	rd->caught_up = true;   /* unless a ring stops before its head */
	total = drain_ring(pid, loc, rd, loc->ring, CTL_OFF(head), CTL_OFF(tail), &rd->tail,
				fn_rec, fn_name, ctx);

	for (int k = 0; total >= 0 && loc->shard_rings && k < TBPF_INPROC_SHARDS; k++) {
		long n = drain_ring(pid, loc, rd,
				    loc->shard_rings + (uint64_t)k * TBPF_INPROC_SLOTS *
				    sizeof(struct tbpf_inproc_rec),
				    CTL_OFF(shard[k].head), CTL_OFF(shard[k].tail), &rd->shard_tail[k],
				    fn_rec, fn_name, ctx);

		total = n < 0 ? n : total + n;
	}
	if (total < 0)
		rd->caught_up = false;
	return total;
}

/* ---- Python stacks ------------------------------------- */

#define PY_OFF(f) (loc->py + offsetof(struct tbpf_inproc_py, f))

int inproc_set_python(pid_t pid, const struct inproc_loc *loc, const struct tbpf_pyproc *pp,
		      bool on)
{
	struct { uint32_t on, pid; } w = { on, (uint32_t)pid };
	int err = 0;

	if (on)
		err = remote_write(pid, PY_OFF(pp), pp, sizeof(*pp));
	if (!err)
		err = remote_write(pid, PY_OFF(on), &w, sizeof(w));
	return err;
}

int inproc_set_modcalls(pid_t pid, const struct inproc_loc *loc, bool want, bool hold)
{
	uint32_t w = want;
	/* hold_roots, stacks_named: none named yet by this tbpf */
	uint32_t h[2] = { want && hold, 0 };
	int err = remote_write(pid, PY_OFF(want_modcalls), &w, sizeof(w));

	return err ? err : remote_write(pid, PY_OFF(hold_roots), h, sizeof(h));
}

void inproc_to_rec_modcall(const struct tbpf_inproc_rec *r, uint32_t pid, struct rec_op *o)
{
	memset(o, 0, sizeof(*o));
	o->h.type = REC_MODCALL;
	o->h.size = sizeof(*o);
	o->h.tid = r->tid;
	o->h.ts_ns = r->ts_ns;
	o->pid = pid;
	o->op_id = TBPF_MODCALL_ID;
	o->stack_id = r->stack;
}

int inproc_read_py(pid_t pid, const struct inproc_loc *loc, struct tbpf_inproc_py *py)
{
	int err = remote_read(pid, loc->py, py, sizeof(*py));

	if (!err) {
		py->detail[sizeof(py->detail) - 1] = 0;
		py->mc_detail[sizeof(py->mc_detail) - 1] = 0;
	}
	return err;
}

void inproc_stack_to_rec(const struct tbpf_inproc_stack *e, uint32_t pid, struct rec_pystack *r)
{
	uint32_t n = e->nframes > TBPF_MAX_PYFRAMES ? TBPF_MAX_PYFRAMES : e->nframes;

	memset(r, 0, sizeof(*r));
	r->h.type = REC_PYSTACK;
	r->h.size = (uint16_t)(sizeof(*r) - sizeof(r->frames) + n * sizeof(r->frames[0]));
	r->pid = pid;
	r->nframes = n;
	r->stack_id = e->stack_id;
	memcpy(r->frames, e->frames, n * sizeof(r->frames[0]));
}

long inproc_drain_stacks(pid_t pid, const struct inproc_loc *loc, uint32_t *seen,
			 inproc_stack_fn fn, void *ctx)
{
	struct tbpf_inproc_stack e;
	struct rec_pystack r;
	uint32_t used;
	long n = 0;
	int err = remote_read(pid, PY_OFF(nstacks_used), &used, sizeof(used));

	if (used > TBPF_INPROC_STACKS)
		used = TBPF_INPROC_STACKS;
	for (; !err && *seen < used; (*seen)++, n++) {
		err = remote_read(pid, loc->stacks + (uint64_t)*seen * sizeof(e), &e, sizeof(e));
		if (!err) {
			inproc_stack_to_rec(&e, (uint32_t)pid, &r);
			err = fn(ctx, &r);
		}
	}
	/* fn named them: a model's first call held for them goes on */
	if (!err && n)
		err = remote_write(pid, PY_OFF(stacks_named), seen, sizeof(*seen));
	return err ? err : n;
}
