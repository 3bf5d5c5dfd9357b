/* inproc_shapes.h - part of agent/inproc.c (included there, static):
 * --inproc --record-shapes.  The callbacks are registered with
 * needs_inputs, so torch hands each RecordFunction its inputs as IValues
 * (the op's boxed arguments; a node's input tensors); the start callback
 * turns them into the uprobe mode's struct tbpf_shape (bpf/tbpf_abi.h:
 * one entry per input, a tensor's sizes, [] for everything else, and each
 * input's Input type), as torch.profiler's record_shapes does
 * (InputOutputEncoder: Tensor -> sizes and dtype, undefined tensor ->
 * [] "", scalar -> [] "Scalar", tensor list -> [] "TensorList", in 2.x a
 * short scalar list -> [] "ScalarList", None and other -> [] "").
 *
 * Where things are comes from tbpf (struct tbpf_inproc_ivlayout in the
 * control block, per torch version: userspace/attach/inproc_layouts.h,
 * checked against the headers by tests/unit/rf_layout.sh).  tbpf sends a
 * layout only for a verified version; without one the agent reads no
 * inputs.  Each tensor is still checked: sizes whose product is not
 * numel_ are "[?]" (shapes_bad).
 *
 * A shape list is hashed while it is read; the first call of a hash
 * publishes the list in tbpf_inproc_shapes[] (under a mutex, before any
 * record refers to it) and records carry its index + 1.  A tensor of more
 * than 8 dims gets a continuation (kind[0] ARGK_MORE) published just
 * before its list; its dtype[0] says how many entries later the list
 * follows (tbpf files it under tbpf_shape_more_id of the list's id). */
#include <stdbool.h>

static volatile int shapes_on;
static struct tbpf_inproc_ivlayout L;
static const void *undef_impl;     /* &c10::UndefinedTensorImpl::_singleton */
static uint32_t conv2d_hash;       /* ints are read for its FLOPs only */
static pthread_mutex_t shape_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shape_keys[TBPF_INPROC_SHAPES * 2];
static uint32_t shape_slot[TBPF_INPROC_SHAPES * 2];
static __thread struct tbpf_shape cur_;
/* continuations (bpf/tbpf_abi.h: sizes past the 8th) of cur_'s entries */
static __thread struct tbpf_shape more_[TBPF_SHAPE_MAX_TENSORS];

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	h = (h ^ v) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 32);
}

static int find_c10(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *base = strrchr(info->dlpi_name, '/');

	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libc10.so", 9))
		return 0;
	*(void **)data = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	return 1;
}

/* At START (under ctl_lock): read inputs only when tbpf asked and sent a
 * layout, and the undefined tensor's singleton is found. */
static void shapes_setup(void)
{
	struct tbpf_inproc_ivlayout l = tbpf_inproc.iv;
	void *h = NULL;

	shapes_on = 0;
	tbpf_inproc.shapes_on = 0;
	if (!tbpf_inproc.want_shapes)
		return;
	if (l.iv_size < 16 || !l.rf_inputs_off || !l.ti_sizes_off || !l.ti_numel_off ||
	    !l.list_type_off || !l.type_kind_off || !l.scalar_tags || !l.ti_keyset_off ||
	    !l.ti_sym_off) {
		tbpf_inproc.want_shapes = 0;
		return;
	}
	dl_iterate_phdr(find_c10, &h);
	undef_impl = h ? dlsym(h, "_ZN3c1019UndefinedTensorImpl10_singletonE") : NULL;
	if (!undef_impl)
		return;
	L = l;
	conv2d_hash = name_hash("aten::conv2d");
	tbpf_inproc.shapes_bad = tbpf_inproc.shapes_lost = 0;
	shapes_on = 1;
	tbpf_inproc.shapes_on = 1;
}

static uint32_t shape_publish(uint64_t h, uint32_t i, const struct tbpf_shape *s)
{
	uint32_t mask = TBPF_INPROC_SHAPES * 2 - 1, n, r = 0;
	struct tbpf_shape *e;

	unsigned nmore = 0, j = 0;

	for (unsigned k = 0; k < s->ntensors; k++)
		nmore += s->ndim[k] > TBPF_SHAPE_MAX_DIMS && s->ndim[k] < TBPF_SHAPE_BAD;
	pthread_mutex_lock(&shape_lock);
	while (shape_keys[i] && shape_keys[i] != h)
		i = (i + 1) & mask;
	if (shape_keys[i]) {
		r = shape_slot[i];
	} else if ((n = tbpf_inproc.nshapes_used) + nmore >= TBPF_INPROC_SHAPES) {
		tbpf_inproc.shapes_lost++;   /* table full: this call has no shapes */
	} else {
		for (unsigned k = 0; k < s->ntensors; k++) {
			if (s->ndim[k] <= TBPF_SHAPE_MAX_DIMS || s->ndim[k] >= TBPF_SHAPE_BAD)
				continue;
			e = &tbpf_inproc_shapes[n + j];
			*e = more_[k];
			e->dtype[0] = (uint8_t)(nmore - j++);
		}
		n += nmore;
		e = &tbpf_inproc_shapes[n];
		memset(e, 0, sizeof(*e));
		e->nargs = s->nargs;
		e->ntensors = s->ntensors;
		memcpy(e->itype, s->itype, sizeof(e->itype));
		for (unsigned k = 0; k < s->ntensors; k++) {
			unsigned nd = s->ndim[k] < TBPF_SHAPE_BAD ? s->ndim[k] : 0;

			e->argi[k] = s->argi[k];
			e->ndim[k] = s->ndim[k];
			e->dtype[k] = s->dtype[k];
			e->kind[k] = s->kind[k];
			memcpy(e->dims[k], s->dims[k],
			       (nd < TBPF_SHAPE_MAX_DIMS ? nd : TBPF_SHAPE_MAX_DIMS) * sizeof(__s64));
		}
		r = n + 1;
		shape_slot[i] = r;
		__atomic_store_n(&tbpf_inproc.nshapes_used, n + 1, __ATOMIC_RELEASE);
		__atomic_store_n(&shape_keys[i], h, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&shape_lock);
	return r;
}

static inline uint32_t shape_index(uint64_t h, const struct tbpf_shape *s)
{
	uint32_t mask = TBPF_INPROC_SHAPES * 2 - 1, i = (uint32_t)h & mask;
	uint64_t v;

	while ((v = __atomic_load_n(&shape_keys[i], __ATOMIC_ACQUIRE))) {
		if (v == h)
			return shape_slot[i];
		i = (i + 1) & mask;
	}
	return shape_publish(h, i, s);
}

/* The readers below take the layout as `l`, a copy on shape_of's stack:
 * the record is written with byte stores, which may alias any global,
 * so reading L (or undef_impl) after each would be reloaded every time. */
struct rd {
	struct tbpf_inproc_ivlayout l;
	const void *undef;
};

/* An undefined tensor, or one InputOutputEncoder::push records as such
 * ([] and ""; 2.8's rule, seen on 1.13 for nested ones): a nested tensor
 * or one with symbolic sizes. */
static inline bool as_undefined(const struct rd *r, const char *impl)
{
	return !impl || impl == r->undef ||
	       (*(const uint64_t *)(impl + r->l.ti_keyset_off) & r->l.nested_mask) ||
	       (*(const uint8_t *)(impl + r->l.ti_sym_off) & r->l.sym_mask);
}

/* A tensor of nd > 8 sizes d: the 9th to the TBPF_SHAPE_ALL_DIMS-th into
 * entry k's continuation; the ndim its entry keeps. */
static uint64_t read_more(const int64_t *d, uint64_t nd, unsigned k)
{
	struct tbpf_shape *c = &more_[k];
	uint64_t n = nd > TBPF_SHAPE_ALL_DIMS ? TBPF_SHAPE_MORE_DIMS : nd - TBPF_SHAPE_MAX_DIMS;

	memset(c, 0, sizeof(*c));
	memcpy(&c->dims[0][0], d + TBPF_SHAPE_MAX_DIMS, n * sizeof(*d));
	c->argi[0] = (uint8_t)k;
	c->ndim[0] = (uint8_t)n;
	c->kind[0] = ARGK_MORE;
	return nd > TBPF_SHAPE_ALL_DIMS ? TBPF_SHAPE_ALL_DIMS + 1 : nd;
}

/* One tensor argument into entry k: sizes, or NONE (undefined), or BAD. */
static inline uint64_t read_tensor(const struct rd *r, const char *impl, struct tbpf_shape *s,
				   unsigned k, uint64_t h)
{
	const char *ss;
	const int64_t *d;
	uint64_t nd;
	int64_t p = 1;

	s->kind[k] = ARGK_TENSOR;
	s->dtype[k] = 0;
	if (as_undefined(r, impl)) {
		s->ndim[k] = TBPF_SHAPE_NONE;
		return mix(h, TBPF_SHAPE_NONE);
	}
	ss = impl + r->l.ti_sizes_off;
	nd = *(const uint64_t *)ss;
	d = nd <= TBPF_SIZES_INLINE ? (const int64_t *)(ss + 8) : *(const int64_t *const *)(ss + 8);
	if (nd >= TBPF_SHAPE_BAD || !d)
		goto bad;
	for (uint64_t i = 0; i < nd; i++) {
		p *= d[i];
		if (i < TBPF_SHAPE_MAX_DIMS)
			s->dims[k][i] = d[i];
		h = mix(h, (uint64_t)d[i]);
	}
	if (p != *(const int64_t *)(impl + r->l.ti_numel_off))
		goto bad;
	if (nd > TBPF_SHAPE_MAX_DIMS)
		nd = read_more(d, nd, k);
	s->ndim[k] = (uint8_t)nd;
	s->dtype[k] = (uint8_t)*(const uint16_t *)(impl + r->l.ti_dtype_off);
	return mix(h, nd << 8 | s->dtype[k]);
bad:
	__atomic_fetch_add(&tbpf_inproc.shapes_bad, 1, __ATOMIC_RELAXED);
	s->ndim[k] = TBPF_SHAPE_BAD;
	return mix(h, TBPF_SHAPE_BAD);
}

/* An int list (conv2d's stride, padding, dilation) into entry k; false
 * when it holds anything but ints (a tensor list: shown []). */
static inline bool read_ints(const struct rd *r, const char *list, struct tbpf_shape *s,
			     unsigned k, uint64_t *h)
{
	const char *b = *(const char *const *)(list + r->l.list_vec_off);
	const char *e = *(const char *const *)(list + r->l.list_vec_off + 8);
	unsigned n = 0;

	for (; b && b < e && n < TBPF_SHAPE_MAX_DIMS; b += r->l.iv_size, n++) {
		if (*(const uint32_t *)(b + r->l.iv_tag_off) != r->l.tag_int)
			return false;
		s->dims[k][n] = *(const int64_t *)b;
		*h = mix(*h, (uint64_t)s->dims[k][n]);
	}
	s->kind[k] = ARGK_INTLIST;
	s->ndim[k] = (uint8_t)n;
	return true;
}

/* IValue::isScalar() of a tag: Double, ComplexDouble, Int, SymInt,
 * SymFloat, (2.x) SymBool, Bool */
static inline bool is_scalar(const struct rd *r, uint32_t tag)
{
	return tag < 32 && (r->l.scalar_tags >> tag & 1);
}

/* Input type of a GenericList, as torch.profiler's InputOutputEncoder
 * (torch/csrc/profiler/collection.cpp) classifies it: a list whose element
 * type is TensorType is "TensorList" (2.x: "" when it holds an undefined
 * tensor); any other list is "" in 1.13, and in 2.x "ScalarList" when it
 * is empty, or its first element is a scalar and it has at most
 * SCALAR_LIST_LENGTH_LIMIT elements (isSupportedScalarList). */
static inline uint8_t list_itype(const struct rd *r, const char *list)
{
	const char *b, *e, *type;

	if (!list)
		return ITYPE_NONE;
	b = *(const char *const *)(list + r->l.list_vec_off);
	e = *(const char *const *)(list + r->l.list_vec_off + 8);
	type = *(const char *const *)(list + r->l.list_type_off);
	if (type && *(const int32_t *)(type + r->l.type_kind_off) == r->l.kind_tensor) {
		if (r->l.tlist_undef)
			for (; b && b < e; b += r->l.iv_size)
				if (as_undefined(r, *(const char *const *)b))
					return ITYPE_NONE;
		return ITYPE_TENSORLIST;
	}
	if (!r->l.scalarlist_max)
		return ITYPE_NONE;
	if (b == e)
		return ITYPE_SCALARLIST;       /* empty (begin and end NULL or equal) */
	if (!b || (size_t)(e - b) > (size_t)r->l.scalarlist_max * r->l.iv_size)
		return ITYPE_NONE;
	return is_scalar(r, *(const uint32_t *)(b + r->l.iv_tag_off)) ? ITYPE_SCALARLIST : ITYPE_NONE;
}

/* The RecordFunction's inputs as a shape list; its index + 1, or 0.
 * Every argument gets its Input type (s->itype, the first
 * TBPF_SHAPE_MAX_ARGS); tensors' sizes and dtypes go into the first
 * TBPF_SHAPE_MAX_TENSORS entries (a tensor past them has no entry: its
 * type reads "?", its shape []). */
static uint32_t shape_of(const void *rf, uint32_t name_hash)
{
	const struct rd r = { L, undef_impl };
	struct tbpf_shape *s = &cur_;
	const char *in = (const char *)rf + r.l.rf_inputs_off;
	const char *iv = *(const char *const *)in;
	size_t n = *(const size_t *)(in + 8);
	bool ints = name_hash == conv2d_hash;
	uint64_t h = 0x51ed270b27e5a5c9ull, ty = 0;
	unsigned k = 0;

	if (!iv)
		n = 0;
	if (n > 255)
		n = 255;
	memset(s->itype, ITYPE_NONE, sizeof(s->itype));
	for (unsigned a = 0; a < n; a++, iv += r.l.iv_size) {
		uint32_t tag = *(const uint32_t *)(iv + r.l.iv_tag_off);
		const char *p = *(const char *const *)iv;
		uint8_t t = ITYPE_NONE;

		if (tag == r.l.tag_tensor) {
			t = ITYPE_TENSOR;
			if (k < TBPF_SHAPE_MAX_TENSORS) {
				s->argi[k] = (uint8_t)a;
				h = mix(h, a);
				h = read_tensor(&r, p, s, k++, h);
			}
		} else if (is_scalar(&r, tag)) {
			t = ITYPE_SCALAR;
			if (ints && tag == r.l.tag_int && k < TBPF_SHAPE_MAX_TENSORS) {
				s->argi[k] = (uint8_t)a;
				s->kind[k] = ARGK_INT;
				s->ndim[k] = 1;
				s->dims[k][0] = (int64_t)p;
				h = mix(mix(h, a | 1u << 16), (uint64_t)p);
				k++;
			}
		} else if (tag == r.l.tag_list) {
			t = list_itype(&r, p);
			if (ints && p && k < TBPF_SHAPE_MAX_TENSORS) {
				s->argi[k] = (uint8_t)a;
				h = mix(h, a | 2u << 16);
				k += read_ints(&r, p, s, k, &h);
			}
		}
		if (a < TBPF_SHAPE_MAX_ARGS) {
			s->itype[a] = t;
			/* 3 bits a type, in a register: reading back the
			 * bytes just stored would stall on store forwarding */
			ty = (ty << 3 | ty >> 61) ^ t;
		}
	}
	s->nargs = (uint8_t)n;
	s->ntensors = (uint8_t)k;
	/* the types join the last mix (not a mix of their own: one more
	 * step in the chain the table lookup waits for) */
	h = mix(h, (n << 8 | k) ^ ty * 0x9e3779b97f4a7c15ull);
	return shape_index(h ? h : 1, s);
}
