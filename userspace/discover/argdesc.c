/* argdesc.c - discovery stage: tensor argument locations of an op from
 * its demangled signature (see argdesc.h). */
#include "argdesc.h"

#include <errno.h>
#include <string.h>

/* How the ABI passes one parameter type. */
struct argclass {
	int ints;     /* INTEGER registers it needs (0: none) */
	int sse;      /* SSE registers */
	int mem;      /* 8-byte stack slots when passed in memory (MEMORY class) */
	int kind;     /* enum tbpf_arg_kind, 0 = other */
	bool known;
};

static bool starts(const char *s, size_t n, const char *p)
{
	size_t pl = strlen(p);

	return n >= pl && !memcmp(s, p, pl);
}

static bool is(const char *s, size_t n, const char *p)
{
	return strlen(p) == n && !memcmp(s, p, n);
}

static bool ends(const char *s, size_t n, const char *p)
{
	size_t pl = strlen(p);

	return n >= pl && !memcmp(s + n - pl, p, pl);
}

/* Small trivially copyable values: one INTEGER register. */
static bool small_scalar(const char *t, size_t n)
{
	static const char *const v[] = {
		"bool", "long", "int", "signed char", "unsigned char", "short",
		"unsigned long", "c10::ScalarType", "c10::Layout", "c10::MemoryFormat",
		"c10::Device", "c10::QScheme", "c10::DispatchKeySet", "at::Dimname",
		"c10::SymInt",        /* non-trivial: passed by invisible reference */
		"c10::Storage", "at::Generator",
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (is(t, n, v[i]))
			return true;
	return starts(t, n, "std::array<bool,");
}

static bool sixteen_bytes(const char *t, size_t n)
{
	return starts(t, n, "c10::ArrayRef<") || is(t, n, "c10::basic_string_view<char>") ||
	       starts(t, n, "std::basic_string_view<char") || is(t, n, "c10::Stream");
}

static struct argclass classify_optional(const char *in, size_t n, bool std_opt)
{
	struct argclass c = { .known = true };

	/* non-trivial payloads: by invisible reference */
	if (is(in, n, "c10::SymInt") || is(in, n, "at::Generator") || is(in, n, "at::Tensor")) {
		c.ints = 1;
		return c;
	}
	/* before small_scalar(), which has "long": optional<long> is a flag
	 * word and a value word, two registers */
	if (is(in, n, "long")) {
		c.ints = 2;
		return c;
	}
	if (small_scalar(in, n)) {   /* bool, enums, Device: <= 8 bytes */
		c.ints = 1;
		return c;
	}
	if (is(in, n, "double")) {
		/* c10::optional's storage is a union of a char and the double:
		 * INTEGER, so both words go in integer registers; std::optional's
		 * (an empty byte and the double) is SSE: the double in an SSE
		 * register, the flag word in an integer one */
		if (std_opt) {
			c.ints = 1;
			c.sse = 1;
		} else {
			c.ints = 2;
		}
		return c;
	}
	if (starts(in, n, "c10::ArrayRef<")) {
		/* c10's optional<ArrayRef> keeps the flag in the ArrayRef (16
		 * bytes); std::optional adds a bool (24 bytes: memory) */
		if (std_opt)
			c.mem = 3;
		else
			c.ints = 2;
		return c;
	}
	if (is(in, n, "c10::basic_string_view<char>") || starts(in, n, "std::basic_string_view<char")) {
		c.mem = 3;
		return c;
	}
	c.known = false;
	return c;
}

static struct argclass classify(const char *t, size_t n, bool std_lib)
{
	struct argclass c = { .known = true };

	if (ends(t, n, "&") || ends(t, n, "*")) {
		c.ints = 1;
		if (is(t, n, "at::Tensor const&") || is(t, n, "at::Tensor&"))
			c.kind = ARGK_TENSOR;
		else if (is(t, n, "c10::optional<at::Tensor> const&"))
			c.kind = ARGK_OPT_TENSOR;
		else if (is(t, n, "std::optional<at::Tensor> const&"))
			c.kind = ARGK_OPT_TENSOR;
		return c;
	}
	if (is(t, n, "double") || is(t, n, "float")) {
		c.sse = 1;
		return c;
	}
	if (small_scalar(t, n)) {
		c.ints = 1;
		return c;
	}
	if (sixteen_bytes(t, n)) {
		c.ints = 2;
		return c;
	}
	if (starts(t, n, "c10::OptionalArrayRef<"))
		return classify_optional("c10::ArrayRef<", 14, std_lib);
	if (starts(t, n, "c10::optional<") && ends(t, n, ">"))
		return classify_optional(t + 14, n - 15 - (t[n - 2] == ' '), false);
	if (starts(t, n, "std::optional<") && ends(t, n, ">"))
		return classify_optional(t + 14, n - 15 - (t[n - 2] == ' '), true);
	c.known = false;
	return c;
}

enum argdesc_ret argdesc_schema_ret(const char *r)
{
	size_t n;

	while (*r == ' ')
		r++;
	if (!strncmp(r, "()", 2))
		return ARGRET_REG;
	if (*r == '(')
		return ARGRET_MEMORY;   /* std::tuple: non-trivial, in memory */
	n = strcspn(r, " ");
	if (memchr(r, '[', n))
		return ARGRET_MEMORY;   /* std::vector */
	if (!strncmp(r, "Tensor", 6))
		return memchr(r, '!', n) ? ARGRET_REG : ARGRET_MEMORY;  /* Tensor& or Tensor */
	{
		static const char *const reg[] = { "int", "float", "bool", "ScalarType", "Layout",
			"Device", "QScheme", "MemoryFormat" };
		/* c10::SymInt / SymBool / SymFloat hold a SymNode: not trivially
		 * copyable, so returned through the hidden pointer */
		static const char *const mem[] = { "Scalar", "SymInt", "SymBool", "SymFloat", "str" };

		for (size_t i = 0; i < sizeof(reg) / sizeof(reg[0]); i++)
			if (is(r, n, reg[i]))
				return ARGRET_REG;
		for (size_t i = 0; i < sizeof(mem) / sizeof(mem[0]); i++)
			if (is(r, n, mem[i]))
				return ARGRET_MEMORY;
	}
	return ARGRET_UNKNOWN;
}

/* The next top-level parameter of a list: [*p, end of it). */
static size_t next_param(const char *p)
{
	int depth = 0;
	size_t i = 0;

	for (; p[i]; i++) {
		if (p[i] == '<' || p[i] == '(')
			depth++;
		else if (p[i] == '>' || p[i] == ')') {
			if (depth == 0)
				break;
			depth--;
		} else if (p[i] == ',' && depth == 0)
			break;
	}
	return i;
}

/* The int kinds FLOPs formulas read (want_ints). */
static int int_kind(const char *t, size_t n)
{
	if (is(t, n, "c10::ArrayRef<long>") || is(t, n, "c10::ArrayRef<c10::SymInt>"))
		return ARGK_INTLIST;
	if (is(t, n, "long"))
		return ARGK_INT;
	if (is(t, n, "c10::SymInt"))
		return ARGK_SYMINT;
	return 0;
}

/* ---- Input type (tbpf_abi.h, enum tbpf_itype) ---------------------------- */

/* The class of a non-optional type (t without " const&" / "&"). */
static int base_itype(const char *t, size_t n, bool std_lib)
{
	static const char *const scalar[] = {
		"c10::Scalar", "long", "int", "double", "float", "bool", "c10::SymInt",
		"c10::ScalarType", "c10::Layout", "c10::MemoryFormat", "c10::QScheme",
		"signed char", "unsigned char", "short", "unsigned long",
	};
	static const char *const none[] = {
		"c10::Device", "at::Dimname", "c10::basic_string_view<char>", "at::Generator",
		"c10::Storage", "c10::Stream", "c10::ArrayRef<at::Dimname>", "c10::DispatchKeySet",
		"c10::List<c10::optional<at::Tensor> >", "c10::List<std::optional<at::Tensor> >",
		"c10::List<c10::optional<at::Tensor>>", "c10::List<std::optional<at::Tensor>>",
	};
	static const char *const slist[] = {
		"c10::ArrayRef<long>", "c10::ArrayRef<c10::SymInt>", "c10::ArrayRef<double>",
		"c10::ArrayRef<c10::Scalar>", "c10::ArrayRef<bool>",
	};

	if (is(t, n, "at::Tensor"))
		return ITYPE_TENSOR;
	if (is(t, n, "c10::ArrayRef<at::Tensor>") || is(t, n, "c10::IListRef<at::Tensor>") ||
	    is(t, n, "c10::List<at::Tensor>"))
		return ITYPE_TENSORLIST;
	for (size_t i = 0; i < sizeof(scalar) / sizeof(scalar[0]); i++)
		if (is(t, n, scalar[i]))
			return ITYPE_SCALAR;
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		if (is(t, n, none[i]))
			return ITYPE_NONE;
	if (starts(t, n, "std::basic_string_view<char"))
		return ITYPE_NONE;
	/* int, float and bool lists: "ScalarList" from torch 2.x on (taken
	 * as the torches that spell optionals std::optional), "" in 1.13 */
	for (size_t i = 0; i < sizeof(slist) / sizeof(slist[0]); i++)
		if (is(t, n, slist[i]))
			return std_lib ? ITYPE_SCALARLIST : ITYPE_NONE;
	if (starts(t, n, "std::array<bool,"))
		return std_lib ? ITYPE_SCALARLIST : ITYPE_NONE;
	return ITYPE_UNKNOWN;
}

/* The bytes of a std::optional's payload (its engaged flag follows it);
 * 0: not known. */
static int payload_bytes(const char *t, size_t n)
{
	static const char *const one[] = { "bool", "c10::ScalarType", "c10::Layout",
		"c10::MemoryFormat", "c10::QScheme" };

	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
		if (is(t, n, one[i]))
			return 1;
	if (is(t, n, "long") || is(t, n, "double") || is(t, n, "c10::SymInt"))
		return 8;
	if (starts(t, n, "c10::ArrayRef<"))
		return 16;
	if (is(t, n, "c10::Scalar"))
		return 32;    /* Tag, then a union with c10::complex<double>,
			       * alignas(16): 32 bytes (1.13 .. 2.8) */
	return 0;
}

/* Where an argument's engaged flag is: delta words from the argument's
 * first word, byte in that word (| TBPF_OPT_INDIRECT: through the
 * pointer the word holds); and for a ScalarList (len) where its length
 * is: len_delta words on, that word or (len_byte | TBPF_OPT_INDIRECT)
 * 8 bytes through it. */
struct optflag {
	int delta, byte;
	bool len;
	int len_delta, len_byte;
};

/* An ArrayRef's length (pointer, then size_t): the argument's second
 * word when passed by value (registers or stack slots, 16 or 24 bytes),
 * its second word through the reference otherwise. */
static void list_len(struct optflag *f, bool ref)
{
	f->len = true;
	f->len_delta = ref ? 0 : 1;
	f->len_byte = ref ? TBPF_OPT_INDIRECT | 8 : 0;
}

/* The Input type class of one parameter type and, when ITYPE_OPT, where
 * its flag is (*f), given where the ABI put it (in_regs). */
static int param_itype(const char *t, size_t n, bool std_lib, bool in_regs, struct optflag *f)
{
	bool ref = ends(t, n, " const&") || ends(t, n, "&");
	size_t bn = ends(t, n, " const&") ? n - 7 : ends(t, n, "&") ? n - 1 : n;
	bool c10o = starts(t, bn, "c10::optional<"), stdo = starts(t, bn, "std::optional<");
	const char *in;
	size_t inn;
	int cls, pb;

	memset(f, 0, sizeof(*f));
	if (starts(t, bn, "c10::OptionalArrayRef<")) {
		if (!std_lib)
			return ITYPE_NONE;     /* 1.13: lists show "" */
		/* std::optional<ArrayRef>: 24 bytes in memory, flag after 16 */
		if (ref || in_regs)
			return ITYPE_UNKNOWN;
		f->delta = 2;
		list_len(f, false);
		return ITYPE_SCALARLIST | ITYPE_OPT;
	}
	if (!c10o && !stdo) {
		cls = base_itype(t, bn, std_lib);
		if (cls == ITYPE_SCALARLIST && starts(t, bn, "c10::ArrayRef<"))
			list_len(f, ref);
		return cls;
	}
	if (!ends(t, bn, ">"))
		return ITYPE_UNKNOWN;
	in = t + 14;
	inn = bn - 15 - (t[bn - 2] == ' ');
	cls = base_itype(in, inn, std_lib);
	if (cls == ITYPE_TENSOR || cls == ITYPE_NONE || cls == ITYPE_UNKNOWN)
		return cls;          /* optional tensors: read with the tensors */
	pb = stdo ? payload_bytes(in, inn) : 0;
	if (stdo && !pb)
		return ITYPE_UNKNOWN;
	/* by reference (or by invisible reference: SymInt, non-trivial) */
	if (ref || is(in, inn, "c10::SymInt")) {
		f->byte = TBPF_OPT_INDIRECT | pb;
		if (cls == ITYPE_SCALARLIST && starts(in, inn, "c10::ArrayRef<"))
			list_len(f, true);
		return cls | ITYPE_OPT;
	}
	if (cls == ITYPE_SCALARLIST) {
		/* std::optional<ArrayRef>: 24 bytes, in memory, flag after 16 */
		if (!stdo || in_regs)
			return ITYPE_UNKNOWN;
		f->delta = 2;
		if (starts(in, inn, "c10::ArrayRef<"))
			list_len(f, false);
		return cls | ITYPE_OPT;
	}
	/* by value: c10::optional keeps its flag first, std::optional after
	 * the payload: within the word (<= 7 bytes of payload), else the
	 * next word; an optional<double> passes its flag in an INTEGER
	 * register (the double in an SSE one), or both words on the stack */
	if (pb && pb < 8) {
		f->byte = pb;
	} else if (pb == 8 && !(is(in, inn, "double") && in_regs)) {
		f->delta = 1;
	}
	return cls | ITYPE_OPT;
}

/* d->itype[ai] of parameter (t, n) at `where` (-1: not placed), and
 * its flag's read when it is an optional. */
static void set_itype(struct tbpf_argdesc *d, int ai, const char *t, size_t n, bool std_lib,
		      int where)
{
	struct optflag f;
	int cls;

	if (ai < 0 || ai >= TBPF_SHAPE_MAX_ARGS)
		return;
	cls = param_itype(t, n, std_lib, where >= 0 && where < TBPF_ARG_REGS, &f);
	if ((cls & ITYPE_OPT) && (where < 0 || d->nopts >= TBPF_SHAPE_MAX_OPTS ||
				  where + f.delta > 255))
		cls = ITYPE_UNKNOWN;
	/* a list whose length cannot be read could be either class */
	if ((cls & ~ITYPE_OPT) == ITYPE_SCALARLIST && f.len &&
	    (where < 0 || d->nlens >= TBPF_SHAPE_MAX_LENS || where + f.len_delta > 255))
		cls = ITYPE_UNKNOWN;
	if ((cls & ~ITYPE_OPT) == ITYPE_SCALARLIST && f.len) {
		d->len_argi[d->nlens] = (__u8)ai;
		d->len_where[d->nlens] = (__u8)(where + f.len_delta);
		d->len_byte[d->nlens] = (__u8)f.len_byte;
		d->nlens++;
	}
	if (cls & ITYPE_OPT) {
		/* a register's next word is the next register; on the stack,
		 * the next slot (an argument is never split between them) */
		d->opt_argi[d->nopts] = (__u8)ai;
		d->opt_where[d->nopts] = (__u8)(where + f.delta);
		d->opt_byte[d->nopts] = (__u8)f.byte;
		d->nopts++;
	}
	d->itype[ai] = (__u8)cls;
}

int argdesc_parse(const char *dm, bool redispatch, enum argdesc_ret ret, bool std_lib,
		  bool want_ints, struct tbpf_argdesc *d)
{
	const char *p = strstr(dm, redispatch ? "::redispatch(" : "::call(");
	int ints = ret == ARGRET_MEMORY ? 1 : 0, sse = 0, slot = 0, argi = 0;
	bool sure = true;

	memset(d, 0, sizeof(*d));
	if (!p || ret == ARGRET_UNKNOWN)
		return -EINVAL;
	p = strchr(p, '(') + 1;
	while (*p && *p != ')') {
		size_t n = next_param(p);
		struct argclass c = classify(p, n, std_lib);
		bool first_ks = redispatch && argi == 0 && is(p, n, "c10::DispatchKeySet");
		int where = -1;

		if (!c.known)
			sure = false;   /* nothing after it can be placed */
		else if (c.ints && !c.mem && ints + c.ints <= TBPF_ARG_REGS && sse + c.sse <= 8) {
			where = ints;
			ints += c.ints;
			sse += c.sse;
		} else if (c.sse && !c.ints && sse < 8) {
			sse++;
		} else {
			/* memory class, or registers run out: the whole
			 * argument on the stack */
			where = TBPF_ARG_REGS + slot;
			slot += c.mem ? c.mem : c.ints + c.sse;
		}
		if (!(redispatch && argi == 0))
			set_itype(d, argi - (redispatch ? 1 : 0), p, n, std_lib, sure ? where : -1);
		if (!c.kind && want_ints && c.known)
			c.kind = int_kind(p, n);
		if (c.kind) {
			if (!sure || d->ntensors >= TBPF_SHAPE_MAX_TENSORS ||
			    where < 0 || where > 255)
				return -EINVAL;
			d->argi[d->ntensors] = (__u8)(argi - (redispatch ? 1 : 0));
			d->where[d->ntensors] = (__u8)where;
			d->kind[d->ntensors] = (__u8)c.kind;
			d->ntensors++;
		}
		if (redispatch && argi == 0 && !first_ks)
			return -EINVAL;
		argi++;
		p += n;
		if (*p == ',')
			p++;
		while (*p == ' ')
			p++;
	}
	if (*p != ')')
		return -EINVAL;
	argi -= redispatch ? 1 : 0;
	if (argi < 0 || argi > TBPF_SHAPE_MAX_ARGS)
		return -EINVAL;
	d->nargs = (__u8)argi;
	return 0;
}
