/* shapes.c - model stage: input shapes as torch.profiler writes them
 * (see shapes.h). */
#include "shapes.h"
#include "capture.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>

struct out {
	char *buf;
	size_t n, len;
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(o->len < o->n ? o->buf + o->len : NULL,
		      o->len < o->n ? o->n - o->len : 0, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->len += (size_t)w;
}

void shape_more_find(uint64_t id, const struct tbpf_shape *s,
		     const struct tbpf_shape *(*get)(void *ctx, uint64_t id), void *ctx,
		     struct shape_more *more)
{
	memset(more, 0, sizeof(*more));
	for (unsigned i = 0; i < s->ntensors && i < TBPF_SHAPE_MAX_TENSORS; i++) {
		const struct tbpf_shape *c;

		if (s->ndim[i] <= TBPF_SHAPE_MAX_DIMS || s->ndim[i] >= TBPF_SHAPE_BAD)
			continue;
		c = get(ctx, tbpf_shape_more_id(id, i));
		if (c && c->kind[0] == ARGK_MORE && c->argi[0] == i &&
		    c->ndim[0] <= TBPF_SHAPE_MORE_DIMS)
			more->e[i] = c;
	}
}

static const struct tbpf_shape *meta_get(void *ctx, uint64_t id)
{
	return capture_meta_shape(ctx, id);
}

void shape_more_of_meta(const struct capture_meta *m, uint64_t id,
			const struct tbpf_shape *s, struct shape_more *more)
{
	shape_more_find(id, s, meta_get, (void *)m, more);
}

/* Size d of tensor entry t, or false when it is not kept */
static bool size_at(const struct tbpf_shape *s, const struct shape_more *more, unsigned t,
		    unsigned d, long long *v)
{
	const struct tbpf_shape *c = more ? more->e[t] : NULL;

	if (d < TBPF_SHAPE_MAX_DIMS) {
		*v = s->dims[t][d];
		return true;
	}
	if (!c || d - TBPF_SHAPE_MAX_DIMS >= c->ndim[0])
		return false;
	*v = (&c->dims[0][0])[d - TBPF_SHAPE_MAX_DIMS];
	return true;
}

size_t shape_format(const struct tbpf_shape *s, const struct shape_more *more, char *buf,
		    size_t n)
{
	struct out o = { buf, n, 0 };

	if (n)
		buf[0] = '\0';
	put(&o, "[");
	for (unsigned a = 0; a < s->nargs; a++) {
		int t = -1;

		for (unsigned i = 0; i < s->ntensors && i < TBPF_SHAPE_MAX_TENSORS; i++)
			if (s->argi[i] == a && (s->kind[i] == ARGK_TENSOR ||
						s->kind[i] == ARGK_OPT_TENSOR))
				t = (int)i;
		put(&o, a ? ", [" : "[");
		if (t >= 0 && s->ndim[t] == TBPF_SHAPE_BAD) {
			put(&o, "?");
		} else if (t >= 0 && s->ndim[t] != TBPF_SHAPE_NONE) {
			for (unsigned d = 0; d < s->ndim[t]; d++) {
				long long v;

				if (!size_at(s, more, (unsigned)t, d, &v)) {
					put(&o, ", ...");
					break;
				}
				put(&o, d ? ", %lld" : "%lld", v);
			}
		}
		put(&o, "]");
	}
	put(&o, "]");
	if (n && o.len >= n)
		buf[n - 1] = '\0';
	return o.len;
}

const char *shape_dtype_name(unsigned st)
{
	/* c10::ScalarType order (c10/core/ScalarType.h, 1.13 is a prefix of
	 * 2.8's); names as torch.profiler writes them (TypeMeta::name(), the
	 * demangled type), checked on both torches */
	static const char *const v[] = {
		"unsigned char", "signed char", "short int", "int", "long int", "c10::Half",
		"float", "double", "c10::complex<c10::Half>", "c10::complex<float>",
		"c10::complex<double>", "bool", "c10::qint8", "c10::quint8", "c10::qint32",
		"c10::BFloat16", "c10::quint4x2", "c10::quint2x4", "c10::bits1x8", "c10::bits2x4",
		"c10::bits4x2", "c10::bits8", "c10::bits16", "c10::Float8_e5m2",
		"c10::Float8_e4m3fn", "c10::Float8_e5m2fnuz", "c10::Float8_e4m3fnuz",
		"short unsigned int", "unsigned int", "long unsigned int",
		"c10::dummy_uint1_7_t<1>", "c10::dummy_uint1_7_t<2>", "c10::dummy_uint1_7_t<3>",
		"c10::dummy_uint1_7_t<4>", "c10::dummy_uint1_7_t<5>", "c10::dummy_uint1_7_t<6>",
		"c10::dummy_uint1_7_t<7>", "c10::dummy_int1_7_t<1>", "c10::dummy_int1_7_t<2>",
		"c10::dummy_int1_7_t<3>", "c10::dummy_int1_7_t<4>", "c10::dummy_int1_7_t<5>",
		"c10::dummy_int1_7_t<6>", "c10::dummy_int1_7_t<7>", "c10::Float8_e8m0fnu",
		"c10::Float4_e2m1fn_x2",
	};

	return st < sizeof(v) / sizeof(v[0]) ? v[st] : "";
}

unsigned shape_dtype_count(void)
{
	unsigned n = 0;

	while (shape_dtype_name(n)[0])
		n++;
	return n;
}

/* The Input type of argument a. */
static const char *arg_type(const struct tbpf_shape *s, unsigned a)
{
	unsigned c = a < TBPF_SHAPE_MAX_ARGS ? s->itype[a] : ITYPE_UNKNOWN;

	switch (c) {
	case ITYPE_NONE:
		return "";
	case ITYPE_SCALAR:
		return "Scalar";
	case ITYPE_SCALARLIST:
		return "ScalarList";
	case ITYPE_TENSORLIST:
		return "TensorList";
	case ITYPE_TENSOR:
		for (unsigned i = 0; i < s->ntensors && i < TBPF_SHAPE_MAX_TENSORS; i++) {
			if (s->argi[i] != a || (s->kind[i] != ARGK_TENSOR &&
						s->kind[i] != ARGK_OPT_TENSOR))
				continue;
			if (s->ndim[i] == TBPF_SHAPE_NONE)
				return "";     /* None or undefined */
			if (s->ndim[i] == TBPF_SHAPE_BAD || !shape_dtype_name(s->dtype[i])[0])
				return "?";
			return shape_dtype_name(s->dtype[i]);
		}
		return "?";
	default:
		return "?";
	}
}

size_t shape_types(const struct tbpf_shape *s, char *buf, size_t n)
{
	struct out o = { buf, n, 0 };
	unsigned known = 0;

	if (n)
		buf[0] = '\0';
	for (unsigned a = 0; a < s->nargs && a < TBPF_SHAPE_MAX_ARGS; a++)
		known += s->itype[a] != ITYPE_UNKNOWN;
	if (s->nargs && !known)
		return 0;   /* a capture from before Input type */
	put(&o, "[");
	for (unsigned a = 0; a < s->nargs; a++)
		put(&o, a ? ", \"%s\"" : "\"%s\"", arg_type(s, a));
	put(&o, "]");
	if (n && o.len >= n)
		buf[n - 1] = '\0';
	return o.len;
}

/* The sizes of argument a when it is a tensor read (or the values of an
 * int argument), else NULL. */
static const __s64 *arg_vals(const struct tbpf_shape *s, unsigned a, bool tensor, unsigned *n)
{
	for (unsigned i = 0; i < s->ntensors && i < TBPF_SHAPE_MAX_TENSORS; i++) {
		bool is_t = s->kind[i] == ARGK_TENSOR || s->kind[i] == ARGK_OPT_TENSOR;

		if (s->argi[i] != a || is_t != tensor || s->ndim[i] >= TBPF_SHAPE_BAD ||
		    s->ndim[i] > TBPF_SHAPE_MAX_DIMS)
			continue;
		*n = s->ndim[i];
		return s->dims[i];
	}
	return NULL;
}

static uint64_t prod(const __s64 *v, unsigned n)
{
	uint64_t p = 1;

	for (unsigned k = 0; k < n; k++)
		p *= (uint64_t)v[k];
	return p;
}

/* torch/csrc/profiler/util.cpp computeFlops, torch 1.13 .. 2.8 */
static uint64_t mm_flops(const struct tbpf_shape *s, unsigned a)
{
	unsigned n1, n2;
	const __s64 *m1 = arg_vals(s, a, true, &n1), *m2 = arg_vals(s, a + 1, true, &n2);

	if (!m1 || !m2 || n1 != 2 || n2 != 2)
		return 0;
	return prod(m1, n1) * (uint64_t)m2[n2 - 1] * 2;
}

static uint64_t bmm_flops(const struct tbpf_shape *s, unsigned a)
{
	unsigned n1, n2;
	const __s64 *m1 = arg_vals(s, a, true, &n1), *m2 = arg_vals(s, a + 1, true, &n2);

	if (!m1 || !m2 || n1 != 3 || n2 != 3)
		return 0;
	return (uint64_t)m1[0] * m1[1] * m1[2] * m2[2] * 2;
}

static uint64_t conv2d_flops(const struct tbpf_shape *s)
{
	unsigned ni, nw, ns, np, nd, ng;
	const __s64 *in = arg_vals(s, 0, true, &ni), *w = arg_vals(s, 1, true, &nw);
	const __s64 *st = arg_vals(s, 3, false, &ns), *pad = arg_vals(s, 4, false, &np);
	const __s64 *dil = arg_vals(s, 5, false, &nd), *g = arg_vals(s, 6, false, &ng);
	uint64_t oh, ow;

	if (!in || !w || !st || !pad || !dil || !g || ni != 4 || nw != 4 || ns < 2 || np < 2 ||
	    nd < 2 || ng != 1 || st[0] <= 0 || st[1] <= 0 || g[0] <= 0)
		return 0;
	/* sizes from a capture are data: keep the arithmetic in range */
	for (int k = 0; k < 4; k++)
		if (in[k] < 0 || in[k] >= (1LL << 31) || w[k] < 0 || w[k] >= (1LL << 31))
			return 0;
	for (int k = 0; k < 2; k++)
		if (st[k] >= (1LL << 31) || pad[k] < 0 || pad[k] >= (1LL << 31) || dil[k] < 0 ||
		    dil[k] >= (1LL << 31))
			return 0;
	if (in[2] + 2 * pad[0] < dil[0] * (w[2] - 1) + 1 || in[3] + 2 * pad[1] < dil[1] * (w[3] - 1) + 1)
		return 0;
	oh = (uint64_t)((in[2] + 2 * pad[0] - dil[0] * (w[2] - 1) - 1) / st[0] + 1);
	ow = (uint64_t)((in[3] + 2 * pad[1] - dil[1] * (w[3] - 1) - 1) / st[1] + 1);
	return 2 * (uint64_t)in[0] * oh * ow * (uint64_t)w[2] * (uint64_t)w[3] * (uint64_t)in[1] *
	       (uint64_t)w[0] / (uint64_t)g[0];
}

/* The numel of tensor argument a of more than 8 dims (all its sizes
 * kept), else 0 */
static uint64_t numel_more(const struct tbpf_shape *s, const struct shape_more *more, unsigned a)
{
	for (unsigned i = 0; i < s->ntensors && i < TBPF_SHAPE_MAX_TENSORS; i++) {
		long long v;
		uint64_t p = 1;

		if (s->argi[i] != a || (s->kind[i] != ARGK_TENSOR && s->kind[i] != ARGK_OPT_TENSOR) ||
		    s->ndim[i] <= TBPF_SHAPE_MAX_DIMS || s->ndim[i] > TBPF_SHAPE_ALL_DIMS)
			continue;
		for (unsigned d = 0; d < s->ndim[i]; d++) {
			if (!size_at(s, more, i, d, &v))
				return 0;
			p *= (uint64_t)v;
		}
		return p;
	}
	return 0;
}

uint64_t shape_flops(const char *name, const struct tbpf_shape *s, const struct shape_more *more)
{
	unsigned n;
	const __s64 *v;

	if (!s || !name)
		return 0;
	if (!strcmp(name, "aten::mm"))
		return mm_flops(s, 0);
	if (!strcmp(name, "aten::addmm"))
		return mm_flops(s, 1);
	if (!strcmp(name, "aten::bmm"))
		return bmm_flops(s, 0);
	if (!strcmp(name, "aten::baddbmm"))
		return bmm_flops(s, 1);
	if (!strcmp(name, "aten::conv2d"))
		return conv2d_flops(s);
	if (!strcmp(name, "aten::mul") || !strcmp(name, "aten::add"))
		return (v = arg_vals(s, 0, true, &n)) ? prod(v, n) : numel_more(s, more, 0);
	return 0;
}
