/* pystack.bpf.h - BPF stage: walk the calling thread's CPython stack at op
 * entry, without the GIL, and deduplicate it into the `pystacks` map.
 *
 * Include after defining `events` (ring buffer), `counters` (per-CPU
 * array of enum tbpf_counter) and `const volatile __u32 tbpf_mode`.
 * Needs vmlinux.h, bpf_helpers.h and bpf_core_read.h.
 *
 * The thread state is found through glibc's pthread TSD block (the
 * interpreter stores it under _PyRuntime's autoTSSkey), which stays valid
 * while the thread has released the GIL to run an op.  Only pointers and
 * integers are read here: names, files and lines are resolved in user
 * space (pysym.c), keyed by code object.
 */
#ifndef TBPF_PYSTACK_BPF_H
#define TBPF_PYSTACK_BPF_H

#include "tbpf_abi.h"

#ifndef TBPF_PYSTACKS_MAX
#define TBPF_PYSTACKS_MAX 8192
#endif
#ifndef TBPF_PYPROCS_MAX
#define TBPF_PYPROCS_MAX 64
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TBPF_PYPROCS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);                 /* tgid */
	__type(value, struct tbpf_pyproc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TBPF_PYSTACKS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);                 /* stack id */
	__type(value, struct rec_pystack);
} pystacks SEC(".maps");

#define PYSTACK_SELFCACHE 512
#define PYSTACK_TYPECACHE 256
#define PYSTACK_MRO_MAX 24

/* 3.11+: a thread's Python frames are consecutive in its data stack, a
 * caller below its callee, in chunks of 16 KB or more.  A capture reads
 * them at once where it can: from the outermost frame of the run of
 * frames in one chunk that its last walk found from the innermost one
 * (tbpf_thread.py_lo), when that span is at most PYWIN_MAX, else the page
 * the innermost frame starts in
 * (from the page's start to that frame's end, mapped since the frame is),
 * and takes the frames that lie there from it: one user-memory read
 * (~95 ns here, bench/results_floor.md) instead of one per frame. */
#define PYWIN_PAGE 4096
#define PYWIN_MAX (16384 - 2 * TBPF_PYFRAME_READ)
#define PYWIN_BUF (PYWIN_MAX + TBPF_PYFRAME_READ + 8)
/* frames further apart than this are taken for different chunks */
#define PYWIN_GAP 16384

struct pystack_scratch {
	struct rec_pystack rec;
	__u64 frame;             /* next frame to read */
	__u64 id;                /* running hash */
	__u32 n;                 /* frames stored */
	__u32 pad;
	__u8 fbuf[TBPF_PYFRAME_READ + 8];
	__u8 sbuf[16];
	/* direct-mapped cache: code object | 1 when its first local is an
	 * argument named "self", | 2 when not (code objects are aligned) */
	__u64 selfcache[PYSTACK_SELFCACHE];
	/* type object | 1 when "Module" is in its MRO, | 2 when not */
	__u64 typecache[PYSTACK_TYPECACHE];
	__u64 win_lo;            /* user address of win[0] */
	__u32 win_len;           /* bytes of win read (0: none) */
	/* runs of data-stack frames, innermost first: each frame below the
	 * last and near it (one chunk); run 0's outermost frame, run 1's
	 * innermost and outermost (tbpf_thread.py_lo, py_lo2, py_hi2) */
	__u32 run;               /* the run being walked; 2: past run 1 */
	__u32 refilled;          /* the window was read again for run 1 */
	__u64 lowest;            /* the last frame of the run being walked */
	__u64 run_lo[2], run_hi1;
	__u8 win[PYWIN_BUF];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pystack_scratch);
} pystack_scratch_map SEC(".maps");

static __always_inline void pystack_count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline __u64 pystack_rd(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* A field out of the frame buffer; offsets come from user space, so they
 * are bounded here for the verifier. */
static __always_inline __u64 pystack_fld(const __u8 *buf, __u16 off, int size)
{
	__u64 v = 0;

	if (off > TBPF_PYFRAME_READ - 8)
		return 0;
	if (size == 8)
		v = *(const __u64 *)(buf + (off & 0x7f));
	else if (size == 4)
		v = *(const __u32 *)(buf + (off & 0x7f));
	else
		v = *(const __u8 *)(buf + (off & 0x7f));
	return v;
}

/* Is local 0 of this code object an argument called "self"?  Returns
 * PYSELF_NO, PYSELF_YES, or on 3.11+ once seen PYSELF_PLAIN / PYSELF_CELL
 * (whether the slot holds the object or a cell: fixed per code object,
 * as MAKE_CELL runs before any call the frame can make). */
enum { PYSELF_NO = 2, PYSELF_YES = 1, PYSELF_PLAIN = 3, PYSELF_CELL = 5 };
static __always_inline int pystack_is_self(const struct tbpf_pyproc *pp,
					   struct pystack_scratch *s, __u64 code)
{
	__u32 slot = (code >> 4) & (PYSTACK_SELFCACHE - 1);
	__u64 known = s->selfcache[slot];
	/* user addresses fit in 47 bits: tag entries with the pid above */
	__u64 tag = code ^ ((__u64)(s->rec.pid & 0xffff) << 48);
	__u64 res = PYSELF_NO, names, name0;
	__u32 argc = 0;

	if ((known & ~7ULL) == tag)
		return known & 7;
	if (bpf_probe_read_user(&argc, sizeof(argc),
				(const void *)(code + pp->co_argcount)))
		return PYSELF_NO; /* unreadable: do not cache */
	if (argc >= 1) {
		names = pystack_rd(code + pp->co_varnames);
		/* PyTupleObject: ob_item at +24 */
		name0 = names ? pystack_rd(names + 24) : 0;
		/* PyASCIIObject: length at +16, compact ASCII data after it */
		if (name0 &&
		    !bpf_probe_read_user(s->sbuf, 8, (const void *)(name0 + 16)) &&
		    *(__u64 *)s->sbuf == 4 &&
		    !bpf_probe_read_user(s->sbuf + 8, 5,
					 (const void *)(name0 + pp->str_ascii_data)) &&
		    s->sbuf[8] == 's' && s->sbuf[9] == 'e' && s->sbuf[10] == 'l' &&
		    s->sbuf[11] == 'f' && s->sbuf[12] == 0)
			res = PYSELF_YES;
	}
	s->selfcache[slot] = tag | res;
	return res;
}

/* Is `self`'s class an nn.Module subclass ("Module" in its MRO, the
 * symbolizer's test)?  1 yes, 0 no, -1 unreadable (not cached).  Asked
 * while the frame runs and holds the object: tbpf names the stack later,
 * when a short-lived `self` (the loss in Tensor.backward) may be freed and
 * its memory reused, and a type read then can be any other object's. */
static __always_inline int pystack_module_self(const struct tbpf_pyproc *pp,
					       struct pystack_scratch *s, __u64 self)
{
	__u64 type = pystack_rd(self + 8), mro, n = 0, tag, known;
	__u32 slot;
	int res = 0;

	if (!type)
		return -1;
	slot = (type >> 4) & (PYSTACK_TYPECACHE - 1);
	tag = type ^ ((__u64)(s->rec.pid & 0xffff) << 48);
	known = s->typecache[slot];
	if ((known & ~3ULL) == tag)
		return (known & 3) == 1;
	mro = pystack_rd(type + pp->tp_mro);
	if (!mro || bpf_probe_read_user(&n, sizeof(n), (const void *)(mro + 16)))
		return -1;
	for (int i = 0; i < PYSTACK_MRO_MAX; i++) {
		__u64 base, name;

		if (i >= n)
			break;
		base = pystack_rd(mro + 24 + 8 * i);
		name = base ? pystack_rd(base + pp->tp_name) : 0;
		if (!name || bpf_probe_read_user(s->sbuf, 7, (const void *)name))
			return -1;
		if (s->sbuf[0] == 'M' && s->sbuf[1] == 'o' && s->sbuf[2] == 'd' &&
		    s->sbuf[3] == 'u' && s->sbuf[4] == 'l' && s->sbuf[5] == 'e' &&
		    s->sbuf[6] == 0) {
			res = 1;
			break;
		}
	}
	if (!res && n > PYSTACK_MRO_MAX)
		return -1;   /* not all of it read: let the symbolizer decide */
	s->typecache[slot] = tag | (res ? 1 : 2);
	return res;
}

/* Remember that code's `self` slot holds the object (or a cell). */
static __always_inline void pystack_self_learn(struct pystack_scratch *s, __u64 code,
					       int kind)
{
	__u32 slot = (code >> 4) & (PYSTACK_SELFCACHE - 1);
	__u64 tag = code ^ ((__u64)(s->rec.pid & 0xffff) << 48);

	if ((s->selfcache[slot] & ~7ULL) == tag)
		s->selfcache[slot] = tag | kind;
}

static __always_inline __u64 pystack_mix(__u64 h, __u64 v)
{
	h ^= v;
	h *= 0x100000001b3ULL;
	h ^= h >> 29;
	return h;
}

/* Read the frames from `lo` (the thread's py_lo, 0: unknown) or from the
 * start of the innermost frame's page up to that frame's end (PYWIN_MAX
 * above).  No window when the reads fail. */
static __always_inline void pystack_win_read(struct pystack_scratch *s,
					     const struct tbpf_pyproc *pp, __u64 frame, __u64 lo)
{
	__u64 end = frame + TBPF_PYFRAME_READ, len;

	s->win_len = 0;
	if (pp->kind != PYK_IFRAME)
		return;
	len = end - lo;
	if (lo && lo < frame && len <= PYWIN_BUF &&
	    !bpf_probe_read_user(s->win, len, (const void *)lo)) {
		s->win_lo = lo;
		s->win_len = len;
		return;
	}
	lo = frame & ~(__u64)(PYWIN_PAGE - 1);
	len = end - lo;
	if (len > PYWIN_BUF || bpf_probe_read_user(s->win, len, (const void *)lo))
		return;
	s->win_lo = lo;
	s->win_len = len;
}

/* The frame at `frame` into fbuf from the window when it lies there. */
static __always_inline bool pystack_from_win(struct pystack_scratch *s, __u64 frame)
{
	__u64 o = frame - s->win_lo;

	if (!s->win_len || frame < s->win_lo || o + TBPF_PYFRAME_READ > s->win_len ||
	    o > PYWIN_BUF - TBPF_PYFRAME_READ)
		return false;
	for (int k = 0; k < TBPF_PYFRAME_READ / 8; k++)
		*(__u64 *)(s->fbuf + 8 * k) = *(__u64 *)(s->win + o + 8 * k);
	return true;
}

/* One frame per bpf_loop() step: verified once, whatever the depth.  The
 * scratch and the process's config (the py_procs value, not a copy) reach
 * each step through the loop's context: no map lookup or copy per frame. */
struct pystack_loop {
	struct pystack_scratch *s;
	const struct tbpf_pyproc *pp;
	const struct tbpf_thread *t;   /* its runs of the last walk (NULL: none) */
};

/* A frame outside the window that lies in run 1 of the thread's last
 * walk (another data-stack chunk): read that run at once too. */
static __always_inline bool pystack_refill(struct pystack_scratch *s,
					   const struct tbpf_pyproc *pp,
					   const struct tbpf_thread *t, __u64 frame)
{
	if (!t || s->refilled || !t->py_lo2 || frame < t->py_lo2 || frame > t->py_hi2)
		return false;
	s->refilled = 1;
	pystack_win_read(s, pp, frame, t->py_lo2);
	return pystack_from_win(s, frame);
}

/* Follow the runs (struct pystack_scratch) with data-stack frame `frame`. */
static __always_inline void pystack_run_step(struct pystack_scratch *s, __u64 frame)
{
	if (s->run > 1)
		return;
	if (frame < s->lowest && s->lowest - frame <= PYWIN_GAP) {
		s->lowest = frame;
		return;
	}
	/* a frame above the last one, or far below it: another chunk
	 * (3.12+'s shims live on the C stack and are not counted) */
	s->run_lo[s->run & 1] = s->lowest;
	s->run++;
	s->lowest = frame;
	if (s->run == 1)
		s->run_hi1 = frame;
}

static long pystack_step(__u32 i, void *ctx)
{
	__u32 flags = 0, lasti = 0, n;
	int sk;
	struct pystack_scratch *s = ((struct pystack_loop *)ctx)->s;
	const struct tbpf_pyproc *pp = ((struct pystack_loop *)ctx)->pp;
	struct tbpf_pyframe *f;
	__u64 frame, code, instr, self;

	if (!s || !pp)
		return 1;
	frame = s->frame;
	if (!frame)
		return 1;
	if (!pystack_from_win(s, frame) &&
	    !pystack_refill(s, pp, ((struct pystack_loop *)ctx)->t, frame) &&
	    (pystack_count(CNT_PY_FRAME_READS),
	     bpf_probe_read_user(s->fbuf, TBPF_PYFRAME_READ, (const void *)frame))) {
		pystack_count(CNT_PYSTACK_FAIL);
		s->frame = 0;
		return 1;
	}
	s->frame = pystack_fld(s->fbuf, pp->fr_previous, 8);
	code = pystack_fld(s->fbuf, pp->fr_code, 8);
	/* FRAME_OWNED_BY_CSTACK (3.12+): an entry shim, not Python code */
	if (pp->fr_owner != TBPF_PYOFF_NONE &&
	    pystack_fld(s->fbuf, pp->fr_owner, 1) == 3)
		return 0;
	pystack_run_step(s, frame);
	if (pp->kind == PYK_IFRAME) {
		instr = pystack_fld(s->fbuf, pp->fr_instr, 8);
		if (instr > code + pp->co_code)
			lasti = instr - (code + pp->co_code);
		self = pystack_fld(s->fbuf, pp->fr_localsplus, 8);
	} else {
		__u32 li = 0;

		/* 3.10 f_lasti counts code units and lies past the read */
		bpf_probe_read_user(&li, sizeof(li), (const void *)(frame + pp->fr_instr));
		lasti = 2 * li;
		self = pystack_rd(frame + pp->fr_localsplus);
	}
	sk = code ? pystack_is_self(pp, s, code) : PYSELF_NO;
	if (sk != PYSELF_NO) {
		flags |= PYF_SELF;
		/* a closure captured `self`: the slot holds a cell that dies
		 * with the call, so store the object inside it */
		if (sk == PYSELF_CELL) {
			self = self ? pystack_rd(self + 16) : 0;
		} else if (sk == PYSELF_YES && self && pp->cell_type) {
			if (pystack_rd(self + 8) == pp->cell_type) {
				self = pystack_rd(self + 16);
				sk = PYSELF_CELL;
			} else {
				sk = PYSELF_PLAIN;
			}
			/* 3.10 empties an argument's slot when it moves
			 * it into a cell: learn only where the slot holds it */
			if (pp->kind == PYK_IFRAME)
				pystack_self_learn(s, code, sk);
		}
		/* only a module's `self` names a layer: keep no other
		 * object's address for a later read to misname */
		if (self && !pystack_module_self(pp, s, self))
			self = 0;
	} else {
		self = 0;
	}
	n = s->n;
	if (n >= TBPF_MAX_PYFRAMES)
		return 1;
	f = &s->rec.frames[n & (TBPF_MAX_PYFRAMES - 1)];
	f->code = code;
	f->self = self;
	f->lasti = lasti;
	f->flags = flags;
	s->n = n + 1;
	s->id = pystack_mix(pystack_mix(pystack_mix(s->id, code), lasti), self);
	return s->n >= TBPF_MAX_PYFRAMES;
}

/* The calling thread's innermost Python frame (0: not a Python thread).
 * Its TLS base is a plain load from the current task's BTF pointer. */
static __always_inline __u64 pystack_top_frame(const struct tbpf_pyproc *pp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 fsbase, tstate, frame, slot;

	fsbase = task->thread.fsbase;
	if (!fsbase)
		return 0;
	/* glibc: struct pthread_key_data { uintptr_t seq; void *data; } */
	if (pp->tss_key < 32) {
		slot = fsbase + pp->tsd_block + 16 * pp->tss_key + 8;
	} else {
		__u64 blk = pystack_rd(fsbase + pp->tsd_block + 16 * 32 +
				       8 * ((pp->tss_key / 32) & 31));
		if (!blk)
			return 0;
		slot = blk + 16 * (pp->tss_key % 32) + 8;
	}
	tstate = pystack_rd(slot);
	if (!tstate)
		return 0; /* not a Python thread */
	frame = pystack_rd(tstate + pp->ts_frame);
	if (frame && pp->cf_frame != TBPF_PYOFF_NONE)
		frame = pystack_rd(frame + pp->cf_frame);
	return frame;
}

/* The innermost Python frame when it runs nn.Module._call_impl, else 0.
 * Its code object's co_name, an ASCII str, is compared with
 * TBPF_MODCALL_FUNC. */
static __always_inline __u64 pystack_top_call_impl(const struct tbpf_pyproc *pp)
{
	static const char want[] = TBPF_MODCALL_FUNC;
	struct pystack_scratch *s;
	char name[sizeof(want)];
	__u64 frame, code, str;
	__u32 zero = 0;

	if (!pp || pp->kind == PYK_NONE || pp->co_name == TBPF_PYOFF_NONE)
		return 0;
	frame = pystack_top_frame(pp);
	s = bpf_map_lookup_elem(&pystack_scratch_map, &zero);
	/* one read for the owner byte and the code object */
	if (!frame || !s || bpf_probe_read_user(s->fbuf, TBPF_PYFRAME_READ, (const void *)frame))
		return 0;
	if (pp->fr_owner != TBPF_PYOFF_NONE && pystack_fld(s->fbuf, pp->fr_owner, 1) == 3)
		return 0;   /* a C-stack shim, not Python code */
	code = pystack_fld(s->fbuf, pp->fr_code, 8);
	str = code ? pystack_rd(code + pp->co_name) : 0;
	if (!str || bpf_probe_read_user(name, sizeof(name), (const void *)(str + pp->str_ascii_data)))
		return 0;
	for (int i = 0; i < (int)sizeof(want); i++)
		if (name[i] != want[i])
			return 0;
	return frame;
}

/* The stack of Python frames from `frame` (the thread's innermost) out;
 * returns its id, 0 when there is none. */
static __always_inline __u64 pystack_capture_from(const struct tbpf_pyproc *pp, __u32 pid,
						 __u64 frame, struct tbpf_thread *t)
{
	struct pystack_scratch *s;
	struct rec_pystack *r;
	__u32 zero = 0, n, seen;
	__u64 id;

	if (!pp || pp->kind == PYK_NONE || !frame)
		return 0;
	s = bpf_map_lookup_elem(&pystack_scratch_map, &zero);
	if (!s)
		return 0;

	s->rec.pid = pid;
	s->frame = frame;
	s->n = 0;
	s->id = pystack_mix(0xcbf29ce484222325ULL, pid);
	s->run = 0;
	s->refilled = 0;
	s->lowest = frame + 1;
	s->run_lo[0] = 0;
	s->run_lo[1] = 0;
	s->run_hi1 = 0;
	pystack_count(CNT_PY_CAPTURES);
	pystack_win_read(s, pp, frame, t ? t->py_lo : 0);
	/* shim frames take steps too (TBPF_PYWALK_STEPS) */
	{
		/* the scratch reaches each step through the loop's context:
		 * no map lookup per frame */
		struct pystack_loop lc = { .s = s, .pp = pp, .t = t };

		bpf_loop(TBPF_PYWALK_STEPS, pystack_step, &lc, 0);
	}
	n = s->n;
	id = s->id;
	/* the next capture reads runs 0 and 1 at once */
	if (s->run <= 1)
		s->run_lo[s->run & 1] = s->lowest;
	if (t) {
		t->py_lo = s->run_lo[0] <= frame ? s->run_lo[0] : 0;
		t->py_lo2 = s->run >= 1 ? s->run_lo[1] : 0;
		t->py_hi2 = s->run_hi1;
	}
	if (n == 0)
		return 0;
	if (s->frame) {
		pystack_count(CNT_PYSTACK_TRUNC);
		s->rec.frames[(n - 1) & (TBPF_MAX_PYFRAMES - 1)].flags |= PYF_TRUNC;
	}
	if (!id)
		id = 1;

	seen = (id ^ (id >> 32)) & (TBPF_PYSEEN_N - 1);
	if (t && t->pyseen[seen] == id)
		return id;
	if (bpf_map_lookup_elem(&pystacks, &id)) {
		if (t)
			t->pyseen[seen] = id;
		return id;
	}
	r = &s->rec;
	r->h.type = REC_PYSTACK;
	r->h.size = sizeof(*r) - sizeof(r->frames) +
		    (n & (2 * TBPF_MAX_PYFRAMES - 1)) * sizeof(struct tbpf_pyframe);
	r->h.tid = (__u32)bpf_get_current_pid_tgid();
	r->h.ts_ns = bpf_ktime_get_ns();
	r->pid = pid;
	r->nframes = n;
	r->stack_id = id;
	if (bpf_map_update_elem(&pystacks, &id, r, BPF_NOEXIST)) {
		pystack_count(CNT_PYSTACK_FAIL); /* map full (or a racing insert) */
		return id;
	}
	if (t)
		t->pyseen[seen] = id;
	/* always (not only when recording): user space names stacks from
	 * these records, in table mode too */
	{
		__u32 sz = r->h.size;

		if (sz > sizeof(*r))
			sz = sizeof(*r);
		/* new stacks are rare and must be symbolized while the target
		 * lives: wake the reader even behind unread no-wakeup records
		 * (flag 0 wakes only an idle ring's reader, so a short recorded
		 * job could exit before its last stacks were named) */
		if (bpf_ringbuf_output(&events, r, sz, BPF_RB_FORCE_WAKEUP))
			pystack_count(CNT_DROPS);
	}
	return id;
}

/* The calling thread's Python stack; its id, 0 when there is none.  t:
 * the thread's state (its known ids), or NULL. */
static __always_inline __u64 pystack_capture(__u32 pid, struct tbpf_thread *t)
{
	struct tbpf_pyproc *pp = bpf_map_lookup_elem(&py_procs, &pid);

	if (!pp || pp->kind == PYK_NONE)
		return 0;
	return pystack_capture_from(pp, pid, pystack_top_frame(pp), t);
}

#endif /* TBPF_PYSTACK_BPF_H */
