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
	if (small_scalar(in, n)) {   /* bool, enums, Device: <= 8 bytes */
		c.ints = 1;
		return c;
	}
	if (is(in, n, "long")) {
		c.ints = 2;
		return c;
	}
	if (is(in, n, "double")) {
		c.ints = 1;
		c.sse = 1;
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
		static const char *const mem[] = { "Scalar", "SymInt", "str" };

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
