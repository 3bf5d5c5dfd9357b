/* shapes.bpf.h - probe stage: an op's input shapes at its entry
 * (--record-shapes; the layouts are in abi/shapes.h).
 *
 * Bounded cost: at most TBPF_SHAPE_MAX_TENSORS tensors of at most
 * TBPF_SHAPE_MAX_DIMS sizes, two or three user reads per tensor, one hash
 * lookup per call.  Included by tbpf.bpf.c. */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);   /* op id | TBPF_COOKIE_REDISPATCH */
	__type(value, struct tbpf_argdesc);
} op_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_tlayout);
} shape_layouts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TBPF_SHAPE_IDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct tbpf_shape);
} shapes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tbpf_shape);
} shape_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TBPF_TSAMPLES);
	__type(key, __u32);
	__type(value, struct tbpf_tsample);
} shape_samples SEC(".maps");

/* Continuations (sizes past the 8th, abi/shapes.h) of this call's
 * entries, and the hash of each one's sizes */
struct shape_more_scratch {
	struct tbpf_shape c[TBPF_SHAPE_MAX_TENSORS];
	__u64 h[TBPF_SHAPE_MAX_TENSORS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shape_more_scratch);
} shape_more_scratch SEC(".maps");

/* This call's argument registers and one tensor's header words, off the
 * stack: shape_capture and shape_more_all under op entry went over the
 * verifier's 512 bytes on a kernel that adds each call's stack
 * (6.18.44: "combined stack size of 3 calls is 672"). */
struct shape_tmp {
	__u64 regs[8];                        /* shape_capture fills it */
	__u64 hdr[1 + TBPF_SIZES_INLINE];     /* shape_tensor's */
	__s64 nd_dt[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shape_tmp);
} shape_tmp SEC(".maps");

__u32 shape_nsamples;   /* slots of shape_samples claimed */

static __always_inline void shape_sample(__u32 pid, __u64 impl)
{
	struct tbpf_tsample *s;
	__u32 i;

	if (shape_nsamples >= TBPF_TSAMPLES)
		return;
	/* racy claim: two CPUs may share a slot, which costs a sample */
	i = shape_nsamples;
	shape_nsamples = i + 1;
	s = bpf_map_lookup_elem(&shape_samples, &i);
	if (!s)
		return;
	s->pid = pid;
	s->ok = !bpf_probe_read_user(s->bytes, sizeof(s->bytes), (void *)impl);
}

/* The value of argument slot `where`: a register (regs, read from the
 * context once per call) or a stack slot. */
static __always_inline __u64 arg_word(struct pt_regs *ctx, const __u64 *regs, __u32 where)
{
	__u64 v = 0;

	if (where < TBPF_ARG_REGS)
		return regs[where & 7];
	bpf_probe_read_user(&v, sizeof(v),
			    (void *)(PT_REGS_SP(ctx) + 8 + 8 * (__u64)((where - TBPF_ARG_REGS) & 0xff)));
	return v;
}

/* Sizes 9 to nd (at most TBPF_SHAPE_ALL_DIMS) of entry i, out of line at
 * `sizes` (sizes then strides: 2 * nd words), into its continuation;
 * their product, or -1 (unreadable, or a negative size).  Runs only for
 * a tensor of more than TBPF_SHAPE_MAX_DIMS dims. */
static __noinline __s64 shape_more(__u64 sizes, __u32 nd, __u32 i)
{
	struct shape_more_scratch *m;
	struct tbpf_shape *c;
	__u32 zero = 0, n;
	__u64 h = 14695981039346656037ULL;
	__s64 prod = 1, *d;

	m = bpf_map_lookup_elem(&shape_more_scratch, &zero);
	if (!m)
		return -1;
	i &= TBPF_SHAPE_MAX_TENSORS - 1;
	c = &m->c[i];
	n = nd > TBPF_SHAPE_ALL_DIMS ? TBPF_SHAPE_MORE_DIMS : nd - TBPF_SHAPE_MAX_DIMS;
	if (n < 1 || n > TBPF_SHAPE_MORE_DIMS)
		return -1;
	__builtin_memset(c, 0, offsetof(struct tbpf_shape, dims));
	d = &c->dims[0][0];
	/* (n - 1) & 63: a bound the verifier sees on the register passed */
	if (bpf_probe_read_user(d, ((n - 1) & (TBPF_SHAPE_ALL_DIMS - 1)) * 8 + 8,
				(void *)(sizes + 8 * TBPF_SHAPE_MAX_DIMS)))
		return -1;
	for (int k = 0; k < TBPF_SHAPE_MORE_DIMS; k++) {
		if (k >= n)
			break;
		if (d[k] < 0)
			return -1;
		prod *= d[k];
		h = (h ^ (__u64)d[k]) * 1099511628211ULL;
	}
	c->argi[0] = i;
	c->ndim[0] = n;
	c->kind[0] = ARGK_MORE;
	m->h[i] = h;
	return prod;
}

/* One tensor's sizes into s (slot i); impl is its TensorImpl*.  1 for
 * a tensor of more than 8 dims (its first 8 sizes read, its bit set in
 * s->more, the rest and the numel check left to shape_more_all after the
 * loop: no call here, which would cost every call spills), else 0. */
static __always_inline __u32 shape_tensor(struct tbpf_shape *s, __u32 i, __u64 impl,
					  const struct tbpf_tlayout *l, __u32 pid,
					  struct shape_tmp *tmp)
{
	__u64 *hdr = tmp->hdr;
	/* numel_, then data_type_ (dtype_off = numel_off + 8) and the bit
	 * fields, then key_set_ (abi/shapes.h, struct tbpf_tlayout) */
	__s64 *nd_dt = tmp->nd_dt;
	__s64 prod = 1;
	__u32 nd;

	if (i >= TBPF_SHAPE_MAX_TENSORS)
		return 0;
	nd_dt[0] = -1;
	nd_dt[1] = nd_dt[2] = 0;
	s->ndim[i] = TBPF_SHAPE_BAD;
	if (impl && impl == l->undef_impl) {
		s->ndim[i] = TBPF_SHAPE_NONE;
		return 0;
	}
	/* numel_ and data_type_ in one read: the calibration derives
	 * dtype_off as numel_off + 8 (discover/tlayout.c) */
	if (!impl || bpf_probe_read_user(hdr, sizeof(tmp->hdr), (void *)(impl + l->sizes_off)) ||
	    bpf_probe_read_user(nd_dt, sizeof(tmp->nd_dt), (void *)(impl + l->numel_off)))
		return 0;

	shape_sample(pid, impl);
	/* nested, or symbolic sizes: torch.profiler records [] and "" */
	if (((__u64)nd_dt[2] & l->nested_mask) || ((__u64)nd_dt[1] >> 48 & l->sym_mask)) {
		s->ndim[i] = TBPF_SHAPE_NONE;
		return 0;
	}
	nd = (__u32)hdr[0];
	if (hdr[0] >= TBPF_SHAPE_BAD)
		goto bad;
	if (nd == 0 && nd_dt[0] == 0) {     /* c10::UndefinedTensorImpl: [] */
		s->ndim[i] = TBPF_SHAPE_NONE;
		return 0;
	}
	if (nd > TBPF_SIZES_INLINE) {
		/* out of line: sizes then strides, 2 * nd >= 12 words */
		if (bpf_probe_read_user(s->dims[i], sizeof(s->dims[i]), (void *)hdr[1]))
			goto bad;
	} else {
		for (int k = 0; k < TBPF_SIZES_INLINE; k++)
			s->dims[i][k] = k < nd ? (__s64)hdr[1 + k] : 0;
	}
	for (int k = 0; k < TBPF_SHAPE_MAX_DIMS; k++) {
		if (k >= nd)
			break;
		if (s->dims[i][k] < 0)
			goto bad;
		prod *= s->dims[i][k];
	}
	s->dtype[i] = (__u8)nd_dt[1];
	if (nd > TBPF_SHAPE_MAX_DIMS) {
		s->ndim[i] = nd;    /* checked by shape_more_all */
		s->more |= 1u << i;
		return 1;
	}
	/* sizes must multiply to numel: a wrong layout does not */
	if (prod != nd_dt[0])
		goto bad;
	s->ndim[i] = nd;
	return 0;
bad:
	cnt_add(CNT_SHAPE_BAD, 1);
	return 0;
}

/* The entries in mask (tensors of more than 8 dims, their first 8 sizes
 * read by shape_tensor): the rest of their sizes into continuations
 * (shape_more), all of them checked against numel_; the mask of those
 * read (the others are TBPF_SHAPE_BAD). */
static __noinline __u32 shape_more_all(struct pt_regs *ctx, const struct tbpf_argdesc *a,
				       const struct tbpf_tlayout *l, struct tbpf_shape *s,
				       __u32 mask)
{
	struct shape_tmp *tmp;
	__u32 zero = 0;
	const __u64 *regs;

	tmp = bpf_map_lookup_elem(&shape_tmp, &zero);   /* regs: shape_capture's */
	if (!tmp)
		return 0;
	regs = tmp->regs;
	for (int i = 0; i < TBPF_SHAPE_MAX_TENSORS; i++) {
		__u64 p, impl = 0, hdr[2] = {};
		__s64 prod, numel = -1;
		__u32 nd;

		if (!(mask & (1u << i)))
			continue;
		p = arg_word(ctx, regs, a->where[i]);
		if (a->kind[i] == ARGK_OPT_TENSOR)
			p += l->opt_value_off;
		nd = s->ndim[i];
		prod = -1;
		if (!bpf_probe_read_user(&impl, sizeof(impl), (void *)p) && impl &&
		    !bpf_probe_read_user(hdr, sizeof(hdr), (void *)(impl + l->sizes_off)) &&
		    hdr[0] == nd &&
		    !bpf_probe_read_user(&numel, sizeof(numel), (void *)(impl + l->numel_off)))
			prod = shape_more(hdr[1], nd, i);
		for (int k = 0; k < TBPF_SHAPE_MAX_DIMS && prod >= 0; k++) {
			if (s->dims[i][k] < 0)
				prod = -1;
			else
				prod *= s->dims[i][k];
		}
		/* a tensor of more than TBPF_SHAPE_ALL_DIMS: not all read */
		if (prod < 0 || (nd <= TBPF_SHAPE_ALL_DIMS && prod != numel)) {
			s->ndim[i] = TBPF_SHAPE_BAD;
			mask &= ~(1u << i);
			cnt_add(CNT_SHAPE_BAD, 1);
			continue;
		}
		if (nd > TBPF_SHAPE_ALL_DIMS)
			s->ndim[i] = TBPF_SHAPE_ALL_DIMS + 1;
	}
	return mask;
}

/* The Input type of each argument (abi/shapes.h, enum tbpf_itype): the
 * classes the op's signature gives, each optional's engaged flag read
 * where the ABI put it (a register byte, a stack word, or one byte read
 * through the reference it was passed by). */
static __always_inline void shape_itypes(struct pt_regs *ctx, const __u64 *regs,
					 const struct tbpf_argdesc *a, struct tbpf_shape *s)
{
	__builtin_memcpy(s->itype, a->itype, sizeof(s->itype));
	for (int j = 0; j < TBPF_SHAPE_MAX_OPTS; j++) {
		__u32 b = a->opt_byte[j], ai = a->opt_argi[j];
		__u8 on = 0;
		__u64 w;

		if (j >= a->nopts)
			break;
		if (ai >= TBPF_SHAPE_MAX_ARGS)
			continue;
		w = arg_word(ctx, regs, a->opt_where[j]);
		if (b & TBPF_OPT_INDIRECT) {
			if (bpf_probe_read_user(&on, 1, (void *)(w + (b & 0x3f)))) {
				s->itype[ai] = ITYPE_UNKNOWN;
				continue;
			}
		} else {
			on = (__u8)(w >> (8 * (b & 7)));
		}
		s->itype[ai] = on ? (__u8)(s->itype[ai] & ~ITYPE_OPT) : ITYPE_NONE;
	}
	/* a ScalarList longer than SCALAR_LIST_LENGTH_LIMIT is "" (after
	 * the flags: a None list has no length to read) */
	for (int j = 0; j < TBPF_SHAPE_MAX_LENS; j++) {
		__u32 b = a->len_byte[j], ai = a->len_argi[j];
		__u64 len;

		if (j >= a->nlens)
			break;
		if (ai >= TBPF_SHAPE_MAX_ARGS || s->itype[ai] != ITYPE_SCALARLIST)
			continue;
		len = arg_word(ctx, regs, a->len_where[j]);
		if ((b & TBPF_OPT_INDIRECT) &&
		    bpf_probe_read_user(&len, sizeof(len), (void *)(len + (b & 0x3f)))) {
			s->itype[ai] = ITYPE_UNKNOWN;
			continue;
		}
		if (len > TBPF_SCALARLIST_MAX)
			s->itype[ai] = ITYPE_NONE;
	}
}

/* Shape list `id` into `shapes` (and, new in record mode, a REC_SHAPE
 * record); 0, or -1 when the full map could not take it. */
static __always_inline int shape_put(__u64 id, const struct tbpf_shape *s, __u32 pid,
				     __u32 tid, __u64 now)
{
	if (!bpf_map_update_elem(&shapes, &id, s, BPF_NOEXIST)) {
		if (tbpf_mode & TBPF_MODE_RECORD) {
			struct rec_shape *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

			if (r) {
				r->h.type = REC_SHAPE;
				r->h.size = sizeof(*r);
				r->h.tid = tid;
				r->h.ts_ns = now;
				r->pid = pid;
				r->pad = 0;
				r->shape_id = id;
				__builtin_memcpy(&r->s, s, sizeof(r->s));
				bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
			} else {
				cnt_add(CNT_DROPS, 1);
			}
		}
	} else if (!bpf_map_lookup_elem(&shapes, &id)) {
		cnt_add(CNT_SHAPE_FULL, 1);
		return -1;
	}
	return 0;
}

/* The hash so far with the sizes past the 8th (shape_more's) of the
 * entries in mask */
static __noinline __u64 shape_more_hash(__u64 h, __u32 mask)
{
	struct shape_more_scratch *m;
	__u32 zero = 0;

	m = bpf_map_lookup_elem(&shape_more_scratch, &zero);
	if (!m)
		return h;
	for (int i = 0; i < TBPF_SHAPE_MAX_TENSORS; i++)
		if (mask & (1u << i))
			h = (h ^ m->h[i]) * 1099511628211ULL;
	return h;
}

/* The continuations of list `id`'s entries in mask (shape_put); 0 or -1 */
static __noinline int shape_more_put(__u64 id, __u32 mask, __u32 pid, __u32 tid, __u64 now)
{
	struct shape_more_scratch *m;
	__u32 zero = 0;

	m = bpf_map_lookup_elem(&shape_more_scratch, &zero);
	if (!m)
		return -1;
	for (int i = 0; i < TBPF_SHAPE_MAX_TENSORS; i++)
		if ((mask & (1u << i)) && shape_put(tbpf_shape_more_id(id, i), &m->c[i], pid, tid, now))
			return -1;
	return 0;
}

/* A list not in `shapes` yet: its continuations first (a list in the
 * map has them), then the list; its id, or 0 when the map is full */
static __noinline __u64 shape_new(__u64 h, const struct tbpf_shape *s, __u32 pid, __u32 tid,
				  __u64 now)
{
	if (s->more && shape_more_put(h, s->more, pid, tid, now))
		return 0;
	if (shape_put(h, s, pid, tid, now))
		return 0;
	return h;
}

/* This call's inputs read into shape_scratch (the registers into
 * shape_tmp); 0, or -1 when the op has no argument list or no layout. */
static __noinline int shape_read(struct pt_regs *ctx, __u32 pid, __u64 argkey)
{
	const struct tbpf_argdesc *a = bpf_map_lookup_elem(&op_args, &argkey);
	const struct tbpf_tlayout *l;
	struct tbpf_shape *s;
	struct shape_tmp *tmp;
	__u32 zero = 0;
	__u64 *regs;

	if (!a)
		return -1;
	l = bpf_map_lookup_elem(&shape_layouts, &pid);
	s = bpf_map_lookup_elem(&shape_scratch, &zero);
	tmp = bpf_map_lookup_elem(&shape_tmp, &zero);
	if (!l || !s || !tmp)
		return -1;
	regs = tmp->regs;
	regs[0] = PT_REGS_PARM1(ctx);
	regs[1] = PT_REGS_PARM2(ctx);
	regs[2] = PT_REGS_PARM3(ctx);
	regs[3] = PT_REGS_PARM4(ctx);
	regs[4] = PT_REGS_PARM5(ctx);
	regs[5] = ctx->r9;
	regs[6] = regs[7] = 0;
	__builtin_memset(s, 0, sizeof(*s));
	s->nargs = a->nargs;
	s->ntensors = a->ntensors;
	for (int i = 0; i < TBPF_SHAPE_MAX_TENSORS; i++) {
		__u64 p, impl = 0;
		__u8 engaged = 0;

		if (i >= a->ntensors)
			break;
		s->argi[i] = a->argi[i];
		s->kind[i] = a->kind[i];
		p = arg_word(ctx, regs, a->where[i]);
		if (a->kind[i] == ARGK_INT || a->kind[i] == ARGK_SYMINT) {
			__s64 v = (__s64)p;

			if (a->kind[i] == ARGK_SYMINT && bpf_probe_read_user(&v, sizeof(v), (void *)p))
				v = -1;
			s->ndim[i] = 1;
			s->dims[i & (TBPF_SHAPE_MAX_TENSORS - 1)][0] = v;
			continue;
		}
		if (a->kind[i] == ARGK_INTLIST) {
			__u64 len = arg_word(ctx, regs, a->where[i] + 1);

			if (len > TBPF_SHAPE_MAX_DIMS)
				len = TBPF_SHAPE_MAX_DIMS;
			s->ndim[i] = (__u8)len;
			/* exactly len values: the list may end at a page's end */
			if (len && bpf_probe_read_user(s->dims[i & (TBPF_SHAPE_MAX_TENSORS - 1)],
						       ((len - 1) & (TBPF_SHAPE_MAX_DIMS - 1)) * 8 + 8,
						       (void *)p))
				s->ndim[i] = TBPF_SHAPE_BAD;
			continue;
		}
		if (a->kind[i] == ARGK_OPT_TENSOR) {
			if (bpf_probe_read_user(&engaged, 1, (void *)(p + l->opt_flag_off)) ||
			    !engaged) {
				s->ndim[i] = TBPF_SHAPE_NONE;
				continue;
			}
			p += l->opt_value_off;
		}
		if (bpf_probe_read_user(&impl, sizeof(impl), (void *)p)) {
			s->ndim[i] = TBPF_SHAPE_BAD;
			cnt_add(CNT_SHAPE_BAD, 1);
			continue;
		}
		shape_tensor(s, i, impl, l, pid, tmp);
	}
	return 0;
}

/* shape_more_all on what shape_read left (the more bits in the list). */
static __noinline void shape_read_more(struct pt_regs *ctx, __u32 pid, __u64 argkey)
{
	const struct tbpf_argdesc *a = bpf_map_lookup_elem(&op_args, &argkey);
	const struct tbpf_tlayout *l = bpf_map_lookup_elem(&shape_layouts, &pid);
	__u32 zero = 0;
	struct tbpf_shape *s = bpf_map_lookup_elem(&shape_scratch, &zero);

	if (a && l && s && s->more)
		s->more = shape_more_all(ctx, a, l, s, s->more);
}

/* The Input types, then the list's id: a lookup, or the list stored
 * (shape_new); 0 when the map is full. */
static __noinline __u64 shape_id(struct pt_regs *ctx, __u32 pid, __u32 tid, __u64 argkey,
				 __u64 now)
{
	const struct tbpf_argdesc *a = bpf_map_lookup_elem(&op_args, &argkey);
	__u32 zero = 0;
	struct tbpf_shape *s = bpf_map_lookup_elem(&shape_scratch, &zero);
	struct shape_tmp *tmp = bpf_map_lookup_elem(&shape_tmp, &zero);
	__u64 h = 14695981039346656037ULL;

	if (!a || !s || !tmp)
		return 0;
	shape_itypes(ctx, tmp->regs, a, s);
	/* FNV-1a over the shape (64-bit words): the header, then the dims
	 * of the entries used (the others are zero) */
	{
		__u64 *w = (__u64 *)s;

		for (int k = 0; k < (int)(offsetof(struct tbpf_shape, dims) / 8); k++)
			h = (h ^ w[k]) * 1099511628211ULL;
		for (int i = 0; i < TBPF_SHAPE_MAX_TENSORS; i++) {
			if (i >= s->ntensors)
				break;
			for (int k = 0; k < TBPF_SHAPE_MAX_DIMS; k++)
				h = (h ^ (__u64)s->dims[i][k]) * 1099511628211ULL;
		}
	}
	if (s->more)
		h = shape_more_hash(h, s->more);
	if (!h)
		h = 1;
	/* a known list: a lookup, no bucket lock */
	if (bpf_map_lookup_elem(&shapes, &h))
		return h;
	return shape_new(h, s, pid, tid, now);
}

/* The shape id of this call's inputs (0: none read), stored in `shapes`
 * (and, for a new id in record mode, a REC_SHAPE record).  Three calls
 * side by side, not nested: on a kernel that adds a bpf_loop callback's
 * and each nested call's stack to op entry's (6.18.44), shape_capture
 * calling shape_more_all calling shape_more was 560 bytes of the
 * verifier's 512. */
static __always_inline __u64 shape_capture(struct pt_regs *ctx, __u32 pid, __u32 tid,
					   __u64 argkey, __u64 now)
{
	if (shape_read(ctx, pid, argkey))
		return 0;
	shape_read_more(ctx, pid, argkey);
	return shape_id(ctx, pid, tid, argkey, now);
}
