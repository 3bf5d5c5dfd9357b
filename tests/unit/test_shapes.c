/* test_shapes.c - unit tests of input shapes: argument
 * placement from real demangled ::call signatures of torch 1.13 and 2.8
 * (and every op of the installed libtorch), schema return kinds, the
 * TensorImpl layout calibration on real TensorImpl bytes of both torch
 * versions (tests/fixtures/tensorimpl: accepted and rejected sets), the
 * shape text in torch.profiler's notation, the Input type classes of real
 * signatures (with each optional's flag read) and their text, and the
 * FLOPs formulas. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libs/testutil.h"
#include "argdesc.h"
#include "demangle.h"
#include "opsyms.h"
#include "shapes.h"
#include "tlayout.h"

/* ---- schema returns ------------------------------------------------- */

static void test_schema_ret(void **state)
{
	static const struct { const char *r; enum argdesc_ret want; } t[] = {
		{ "Tensor", ARGRET_MEMORY }, { "Tensor(a)", ARGRET_MEMORY },
		{ "Tensor(a!)", ARGRET_REG }, { "Tensor(a!) out", ARGRET_REG },
		{ "()", ARGRET_REG }, { "(Tensor, Tensor)", ARGRET_MEMORY },
		{ "(Tensor(a!) values, Tensor(b!) indices)", ARGRET_MEMORY },
		{ "Tensor[]", ARGRET_MEMORY }, { "Tensor(a)[]", ARGRET_MEMORY },
		{ "int", ARGRET_REG }, { "float", ARGRET_REG }, { "bool", ARGRET_REG },
		{ "ScalarType", ARGRET_REG }, { "Scalar", ARGRET_MEMORY },
		{ "SymInt", ARGRET_MEMORY }, { "SymBool", ARGRET_MEMORY }, { "int[]", ARGRET_MEMORY }, { "str", ARGRET_MEMORY },
		{ "QScheme", ARGRET_REG }, { "Storage", ARGRET_UNKNOWN }, { "", ARGRET_UNKNOWN },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (argdesc_schema_ret(t[i].r) != t[i].want)
			fail_msg("%s: %d, want %d", t[i].r, argdesc_schema_ret(t[i].r), t[i].want);
	}
}

/* ---- argument placement ---------------------------------------------- */

struct place { int argi, where, kind; };

static void check_place(const char *sig, bool rd, enum argdesc_ret ret, bool std_lib, bool ints,
			int nargs, const struct place *want, int nwant)
{
	struct tbpf_argdesc d;
	int err = argdesc_parse(sig, rd, ret, std_lib, ints, &d);

	if (nargs < 0) {
		if (err != -EINVAL)
			fail_msg("%s: placed, want -EINVAL", sig);
		return;
	}
	if (err)
		fail_msg("%s: %d", sig, err);
	if (d.nargs != nargs || d.ntensors != nwant)
		fail_msg("%s: nargs %u ntensors %u, want %d %d", sig, d.nargs, d.ntensors, nargs, nwant);
	for (int i = 0; i < nwant; i++)
		if (d.argi[i] != want[i].argi || d.where[i] != want[i].where ||
		    d.kind[i] != want[i].kind)
			fail_msg("%s: entry %d: arg %u where %u kind %u, want %d %d %d", sig, i,
				 d.argi[i], d.where[i], d.kind[i], want[i].argi, want[i].where,
				 want[i].kind);
}

#define T ARGK_TENSOR
#define O ARGK_OPT_TENSOR
#define STK(n) (TBPF_ARG_REGS + (n))

static void test_argdesc_real(void **state)
{
	(void)state;
	/* returns at::Tensor (sret): the arguments start at rsi */
	check_place("at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
		    false, ARGRET_MEMORY, false, false, 3,
		    (struct place[]){ { 0, 1, T }, { 1, 2, T } }, 2);
	/* redispatch: the DispatchKeySet is no schema argument */
	check_place("at::_ops::add_Tensor::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
		    true, ARGRET_MEMORY, false, false, 3,
		    (struct place[]){ { 0, 2, T }, { 1, 3, T } }, 2);
	/* in place: at::Tensor& back in rax, the arguments from rdi */
	check_place("at::_ops::add__Tensor::call(at::Tensor&, at::Tensor const&, c10::Scalar const&)",
		    false, ARGRET_REG, false, false, 3,
		    (struct place[]){ { 0, 0, T }, { 1, 1, T } }, 2);
	/* torch 1.13: a tuple back in memory; bool, long in rcx.. r9, then
	 * the stack: bool in slot 0, the optional tensor's reference in slot 1 */
	check_place("at::_ops::embedding_bag::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, bool, long, bool, c10::optional<at::Tensor> const&, bool)",
		    false, ARGRET_MEMORY, false, false, 8,
		    (struct place[]){ { 0, 1, T }, { 1, 2, T }, { 2, 3, T }, { 6, STK(1), O } }, 4);
	/* torch 2.8: OptionalArrayRef is 24 bytes, in memory (3 slots), and
	 * takes no register: the out tensor lands in rcx */
	check_place("at::_ops::nansum_out::call(at::Tensor const&, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>, at::Tensor&)",
		    false, ARGRET_REG, true, false, 5,
		    (struct place[]){ { 0, 0, T }, { 4, 3, T } }, 2);
	/* torch 1.13: c10's optional<ArrayRef> is 16 bytes, two registers */
	check_place("at::_ops::nansum_out::call(at::Tensor const&, c10::OptionalArrayRef<long>, bool, c10::optional<c10::ScalarType>, at::Tensor&)",
		    false, ARGRET_REG, false, false, 5,
		    (struct place[]){ { 0, 0, T }, { 4, 5, T } }, 2);
	/* conv2d with its FLOPs ints (2.8): stride takes r8 and r9, padding
	 * and dilation go to the stack whole, groups (a SymInt, by reference)
	 * after them */
	check_place("at::_ops::conv2d::call(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::SymInt)",
		    false, ARGRET_MEMORY, true, true, 7,
		    (struct place[]){ { 0, 1, T }, { 1, 2, T }, { 2, 3, O }, { 3, 4, ARGK_INTLIST },
				      { 4, STK(0), ARGK_INTLIST }, { 5, STK(2), ARGK_INTLIST },
				      { 6, STK(4), ARGK_SYMINT } }, 7);
	/* a two-register argument that no longer fits goes to the stack; a
	 * later one-register argument still takes the free register */
	check_place("at::_ops::z::call(at::Tensor const&, long, long, long, long, c10::ArrayRef<long>, at::Tensor const&)",
		    false, ARGRET_REG, false, false, 7,
		    (struct place[]){ { 0, 0, T }, { 6, 5, T } }, 2);
	/* doubles travel in xmm registers and take no integer register */
	check_place("at::_ops::layer_norm::call(at::Tensor const&, c10::ArrayRef<long>, c10::optional<at::Tensor> const&, c10::optional<at::Tensor> const&, double, bool)",
		    false, ARGRET_MEMORY, false, false, 6,
		    (struct place[]){ { 0, 1, T }, { 2, 4, O }, { 3, 5, O } }, 3);
	/* tensor lists are [] for torch.profiler: no entry */
	check_place("at::_ops::cat::call(c10::IListRef<at::Tensor> const&, long)", false, ARGRET_MEMORY,
		    true, false, 2, NULL, 0);
	/* an unknown type before a tensor: the tensor cannot be placed */
	check_place("at::_ops::x::call(c10::Weird, at::Tensor const&)", false, ARGRET_MEMORY, false,
		    false, -1, NULL, 0);
	/* unknown return: no placement at all */
	check_place("at::_ops::relu::call(at::Tensor const&)", false, ARGRET_UNKNOWN, false, false,
		    -1, NULL, 0);
	/* ... but after the last tensor it does not matter */
	check_place("at::_ops::y::call(at::Tensor const&, c10::Weird)", false, ARGRET_MEMORY, false,
		    false, 2, (struct place[]){ { 0, 1, T } }, 1);
}

/* ---- Input type classes and optional flags ------------------------------ */

struct optread { int argi, where, byte; };

/* sig's Input type classes (one char per argument: t tensor, s Scalar,
 * l ScalarList, L TensorList, - "", ? unknown; upper-case S and M: an
 * optional Scalar / ScalarList whose flag is read) and the flag reads. */
static void check_itype(const char *sig, enum argdesc_ret ret, bool std_lib, const char *classes,
			const struct optread *want, int nwant)
{
	struct tbpf_argdesc d;
	char got[TBPF_SHAPE_MAX_ARGS + 1];

	if (argdesc_parse(sig, false, ret, std_lib, false, &d))
		fail_msg("%s: not placed", sig);
	for (unsigned a = 0; a < d.nargs; a++) {
		static const char c[] = "-tslL?";
		unsigned it = d.itype[a];

		got[a] = it == (ITYPE_SCALAR | ITYPE_OPT) ? 'S' :
			 it == (ITYPE_SCALARLIST | ITYPE_OPT) ? 'M' : it <= ITYPE_UNKNOWN ? c[it] : '!';
	}
	got[d.nargs] = '\0';
	if (strcmp(got, classes))
		fail_msg("%s: classes %s, want %s", sig, got, classes);
	if (d.nopts != nwant)
		fail_msg("%s: %u flags read, want %d", sig, d.nopts, nwant);
	for (int i = 0; i < nwant; i++)
		if (d.opt_argi[i] != want[i].argi || d.opt_where[i] != want[i].where ||
		    d.opt_byte[i] != want[i].byte)
			fail_msg("%s: flag %d: arg %u word %u byte %#x, want %d %d %#x", sig, i,
				 d.opt_argi[i], d.opt_where[i], d.opt_byte[i], want[i].argi,
				 want[i].where, want[i].byte);
}

#define IND TBPF_OPT_INDIRECT

/* What torch.profiler recorded for these ops (tests/e2e/ops/test_shapes.sh
 * compares every call): the classes come from the real signatures of
 * libtorch 1.13 (c10::optional, flag first) and 2.8 (std::optional, flag
 * after the payload). */
static void test_argdesc_itype(void **state)
{
	(void)state;
	/* tensors, a Scalar by reference: no flag */
	check_itype("at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
		    ARGRET_MEMORY, false, "tts", NULL, 0);
	/* int lists: "" in 1.13, ScalarList in 2.8; TensorList */
	check_itype("at::_ops::view::call(at::Tensor const&, c10::ArrayRef<long>)", ARGRET_MEMORY,
		    false, "t-", NULL, 0);
	check_itype("at::_ops::view::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>)",
		    ARGRET_MEMORY, true, "tl", NULL, 0);
	check_itype("at::_ops::cat::call(c10::IListRef<at::Tensor> const&, long)", ARGRET_MEMORY,
		    true, "Ls", NULL, 0);
	/* strings, devices: "" */
	check_itype("at::_ops::gelu::call(at::Tensor const&, c10::basic_string_view<char>)",
		    ARGRET_MEMORY, false, "t-", NULL, 0);
	/* optional ScalarType by value: c10 flag in byte 0, std in byte 1 */
	check_itype("at::_ops::softmax_int::call(at::Tensor const&, long, c10::optional<c10::ScalarType>)",
		    ARGRET_MEMORY, false, "tsS", (struct optread[]){ { 2, 3, 0 } }, 1);
	check_itype("at::_ops::softmax_int::call(at::Tensor const&, long, std::optional<c10::ScalarType>)",
		    ARGRET_MEMORY, true, "tsS", (struct optread[]){ { 2, 3, 1 } }, 1);
	/* optional Scalar by reference: c10 flag at +0, std after the
	 * 32-byte Scalar */
	check_itype("at::_ops::clamp::call(at::Tensor const&, c10::optional<c10::Scalar> const&, c10::optional<c10::Scalar> const&)",
		    ARGRET_MEMORY, false, "tSS", (struct optread[]){ { 1, 2, IND | 0 }, { 2, 3, IND | 0 } }, 2);
	check_itype("at::_ops::clamp::call(at::Tensor const&, std::optional<c10::Scalar> const&, std::optional<c10::Scalar> const&)",
		    ARGRET_MEMORY, true, "tSS", (struct optread[]){ { 1, 2, IND | 32 }, { 2, 3, IND | 32 } }, 2);
	/* optional<double>: c10 takes two integer registers (flag first),
	 * so the second goes to the stack; std passes the flag alone in an
	 * integer register (the double in xmm) */
	check_itype("at::_ops::upsample_nearest2d::call(at::Tensor const&, c10::ArrayRef<long>, c10::optional<double>, c10::optional<double>)",
		    ARGRET_MEMORY, false, "t-SS", (struct optread[]){ { 2, 4, 0 }, { 3, STK(0), 0 } }, 2);
	check_itype("at::_ops::upsample_nearest2d::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<double>, std::optional<double>)",
		    ARGRET_MEMORY, true, "tlSS", (struct optread[]){ { 2, 4, 0 }, { 3, 5, 0 } }, 2);
	/* 2.8: OptionalArrayRef and optional<ArrayRef> are 24 bytes in
	 * memory, the flag in their third word */
	check_itype("at::_ops::upsample_nearest2d_vec::call(at::Tensor const&, c10::OptionalArrayRef<c10::SymInt>, std::optional<c10::ArrayRef<double> >)",
		    ARGRET_MEMORY, true, "tMM", (struct optread[]){ { 1, STK(2), 0 }, { 2, STK(5), 0 } }, 2);
	/* 1.13: optional int lists are "" whatever they hold: no read */
	check_itype("at::_ops::upsample_nearest2d_vec::call(at::Tensor const&, c10::OptionalArrayRef<long>, c10::optional<c10::ArrayRef<double> >)",
		    ARGRET_MEMORY, false, "t--", NULL, 0);
	/* optional<long>: two words; 2.8's flag in the second; the SymInt
	 * optional goes by invisible reference (non-trivial), flag after 8 */
	check_itype("at::_ops::x::call(at::Tensor const&, std::optional<long>, std::optional<c10::ScalarType>)",
		    ARGRET_MEMORY, true, "tSS", (struct optread[]){ { 1, 3, 0 }, { 2, 4, 1 } }, 2);
	check_itype("at::_ops::slice_Tensor::call(at::Tensor const&, long, std::optional<c10::SymInt>, std::optional<c10::SymInt>, c10::SymInt)",
		    ARGRET_MEMORY, true, "tsSSs", (struct optread[]){ { 2, 3, IND | 8 }, { 3, 4, IND | 8 } }, 2);
	/* 1.13 embedding_bag.padding_idx: its optional<long> on the stack,
	 * after the optional tensor's reference and a bool */
	check_itype("at::_ops::embedding_bag_padding_idx::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, bool, long, bool, c10::optional<at::Tensor> const&, bool, c10::optional<long>)",
		    ARGRET_MEMORY, false, "tttssstsS", (struct optread[]){ { 8, STK(3), 0 } }, 1);
	/* 2.8 aten::empty: the device is "" given or not, its others read */
	check_itype("at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
		    ARGRET_MEMORY, true, "lSS-SS",
		    (struct optread[]){ { 1, 3, 1 }, { 2, 4, 1 }, { 4, STK(0), 1 }, { 5, STK(1), 1 } }, 4);
	/* a type tbpf does not know: "?", and nothing after it is read */
	check_itype("at::_ops::y::call(at::Tensor const&, c10::Weird, c10::optional<bool>, long)",
		    ARGRET_MEMORY, false, "t??s", NULL, 0);
}

/* The ScalarList lengths read (torch 2.x: "" beyond SCALAR_LIST_LENGTH_LIMIT):
 * sig's i-th list length read from word want[i].where, byte want[i].byte. */
static void check_lens(const char *sig, enum argdesc_ret ret, bool std_lib,
		       const struct optread *want, int nwant)
{
	struct tbpf_argdesc d;

	if (argdesc_parse(sig, false, ret, std_lib, false, &d))
		fail_msg("%s: not placed", sig);
	if (d.nlens != nwant)
		fail_msg("%s: %u lengths read, want %d", sig, d.nlens, nwant);
	for (int i = 0; i < nwant; i++)
		if (d.len_argi[i] != want[i].argi || d.len_where[i] != want[i].where ||
		    d.len_byte[i] != want[i].byte)
			fail_msg("%s: length %d: arg %u word %u byte %#x, want %d %d %#x", sig, i,
				 d.len_argi[i], d.len_where[i], d.len_byte[i], want[i].argi,
				 want[i].where, want[i].byte);
}

static void test_argdesc_lens(void **state)
{
	(void)state;
	/* an ArrayRef by value: its second register (the result in
	 * memory: rdi; the tensor rsi; the list rdx, rcx) */
	check_lens("at::_ops::view::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>)",
		   ARGRET_MEMORY, true, (struct optread[]){ { 1, 3, 0 } }, 1);
	check_lens("at::_ops::split_with_sizes::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>, long)",
		   ARGRET_MEMORY, true, (struct optread[]){ { 1, 3, 0 } }, 1);
	/* 1.13: int lists are "" at any length: nothing read */
	check_lens("at::_ops::split_with_sizes::call(at::Tensor const&, c10::ArrayRef<long>, long)",
		   ARGRET_MEMORY, false, NULL, 0);
	/* lists in stack slots: the slot after the pointer; the optional
	 * ones (24 bytes in memory) too, their flag in the third */
	check_lens("at::_ops::upsample_nearest2d_vec::call(at::Tensor const&, c10::OptionalArrayRef<c10::SymInt>, std::optional<c10::ArrayRef<double> >)",
		   ARGRET_MEMORY, true, (struct optread[]){ { 1, STK(1), 0 }, { 2, STK(4), 0 } }, 2);
	check_lens("at::_ops::max_pool2d::call(at::Tensor const&, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, bool)",
		   ARGRET_MEMORY, true,
		   (struct optread[]){ { 1, 3, 0 }, { 2, 5, 0 }, { 3, STK(1), 0 }, { 4, STK(3), 0 } }, 4);
	/* by reference: 8 bytes after the pointer it holds */
	check_lens("at::_ops::x::call(at::Tensor const&, std::optional<c10::ArrayRef<long> > const&)",
		   ARGRET_MEMORY, true, (struct optread[]){ { 1, 2, IND | 8 } }, 1);
	/* a fixed bool array: no length */
	check_lens("at::_ops::x::call(at::Tensor const&, std::array<bool, 3ul>)",
		   ARGRET_MEMORY, true, NULL, 0);
}

/* Every op of a real libtorch: most are placed, none wrongly typed. */
static void check_lib(const char *lib, size_t want_min_pct)
{
	struct opsym_set s;
	size_t ops = 0, placed = 0, tensors = 0, noret = 0, untyped = 0, lens = 0, maxlens = 0;
	bool std_lib = false;

	if (!tu_exists(lib)) {
		fprintf(stderr, "  skipped: %s not installed\n", lib);
		skip();
	}
	assert_int_equal(opsyms_discover(lib, &s), 0);
	for (size_t i = 0; i < s.n; i++)
		if (s.v[i].kind == OPSYM_OP && strstr(s.v[i].mangled, "St8optional"))
			std_lib = true;
	for (size_t i = 0; i < s.n; i++) {
		const struct opsym *o = &s.v[i];
		struct tbpf_argdesc d;
		char *dm;

		if (o->kind != OPSYM_OP || o->redispatch)
			continue;
		ops++;
		noret += o->ret == ARGRET_UNKNOWN;
		dm = tbpf_demangle(o->mangled);
		assert_non_null(dm);
		if (!argdesc_parse(dm, false, o->ret, std_lib, false, &d)) {
			bool unk = false;

			placed++;
			tensors += d.ntensors;
			lens += d.nlens;
			if (d.nlens > maxlens)
				maxlens = d.nlens;
			for (unsigned a = 0; a < d.nargs; a++)
				unk |= d.itype[a] == ITYPE_UNKNOWN;
			untyped += unk;
			for (unsigned k = 0; k < d.ntensors; k++)
				assert_true(d.where[k] < TBPF_ARG_REGS + 32);
		}
		free(dm);
	}
	fprintf(stderr, "  %s: %zu of %zu ::call placed (%zu tensor arguments), %zu without a "
			"schema return, %zu placed with an Input type \"?\", %zu list lengths "
			"read (at most %zu an op)\n", lib, placed, ops, tensors, noret, untyped,
		lens, maxlens);
	assert_true(placed * 100 >= ops * want_min_pct);
	/* nearly every placed op has every argument's Input type */
	assert_true(untyped * 100 <= placed * 2);
	opsyms_free(&s);
}

static void test_argdesc_lib_113(void **state)
{
	(void)state;
	check_lib("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0", 90);
}

static void test_argdesc_lib_2(void **state)
{
	(void)state;
	check_lib("/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", 90);
}

/* ---- TensorImpl layout ------------------------------------------------ */

struct fix {
	struct tbpf_tsample s[64];
	long long sizes[64][8];
	int ndim[64];          /* -1: unknown (BPF samples, storages) */
	long long numel[64];
	int dtype[64];         /* c10::ScalarType, -1: not given */
	bool storage[64];
	size_t n;
};

static void load_fix(const char *rel, struct fix *f)
{
	char *path = tu_repo_path(rel), line[1024];
	FILE *fp;

	assert_non_null(path);
	fp = fopen(path, "r");
	assert_non_null(fp);
	memset(f, 0, sizeof(*f));
	while (fgets(line, sizeof(line), fp) && f->n < 64) {
		char shape[128], numel[32], hex[600];
		size_t i = f->n;
		int dt = -1;

		if (line[0] == '#' || sscanf(line, "%127s %31s %599s %d", shape, numel, hex, &dt) < 3)
			continue;
		f->dtype[i] = dt;
		assert_int_equal(strlen(hex), 2 * TBPF_TSAMPLE_BYTES);
		for (int k = 0; k < TBPF_TSAMPLE_BYTES; k++) {
			unsigned v;

			sscanf(hex + 2 * k, "%2x", &v);
			f->s[i].bytes[k] = (unsigned char)v;
		}
		f->s[i].ok = 1;
		f->storage[i] = !strcmp(shape, "storage");
		f->ndim[i] = -1;
		if (shape[0] != '?' && !f->storage[i]) {
			char *p = shape;

			f->ndim[i] = 0;
			while (*p && *p != '-') {
				f->sizes[i][f->ndim[i]++] = strtoll(p, &p, 10);
				if (*p == ',')
					p++;
			}
			f->numel[i] = atoll(numel);
		}
		f->n++;
	}
	fclose(fp);
	free(path);
}

/* the tensors of f (no storages) */
static size_t tensors_of(const struct fix *f, struct tbpf_tsample *out)
{
	size_t n = 0;

	for (size_t i = 0; i < f->n; i++)
		if (!f->storage[i])
			out[n++] = f->s[i];
	return n;
}

static void check_accept(const char *rel, unsigned so, unsigned no, bool std_lib)
{
	struct fix *f = malloc(sizeof(*f));
	struct tbpf_tsample v[64];
	struct tbpf_tlayout l = { 0 };
	const char *why = NULL;
	size_t n;

	assert_non_null(f);
	load_fix(rel, f);
	n = tensors_of(f, v);
	assert_true(n >= 10);
	if (tlayout_calibrate(v, n, 2, &l, &why))
		fail_msg("%s: rejected: %s", rel, why);
	/* and with the reader's layout, which also reads key_set_ (nested
	 * tensors): every sample's word after data_type_ is a DispatchKeySet,
	 * no sample is nested nor has symbolic sizes */
	tlayout_initial(std_lib, &l);
	if (tlayout_calibrate(v, n, 2, &l, &why))
		fail_msg("%s: rejected with key_set_ read: %s", rel, why);
	for (size_t i = 0; i < n; i++) {
		unsigned long long ks;

		memcpy(&ks, v[i].bytes + l.numel_off + 16, 8);
		assert_false(ks & l.nested_mask);
		assert_false(v[i].bytes[l.numel_off + 14] & l.sym_mask);
	}
	assert_int_equal(l.sizes_off, so);
	assert_int_equal(l.numel_off, no);
	assert_int_equal(l.dtype_off, no + 8);
	/* and the layout reads every tensor of known sizes right */
	for (size_t i = 0; i < f->n; i++) {
		long long sizes[8], numel;
		int d;

		if (f->ndim[i] < 0)
			continue;
		d = tlayout_decode(f->s[i].bytes, TBPF_TSAMPLE_BYTES, &l, sizes, 8, &numel);
		if (f->ndim[i] > TBPF_SIZES_INLINE) {
			assert_int_equal(d, -1);   /* out of line: the BPF side reads them */
			continue;
		}
		assert_int_equal(d, f->ndim[i]);
		assert_int_equal(numel, f->numel[i]);
		/* and its dtype, at the offset the calibration derived */
		if (f->dtype[i] >= 0)
			assert_int_equal(f->s[i].bytes[l.dtype_off] | f->s[i].bytes[l.dtype_off + 1] << 8,
					 f->dtype[i]);
		for (int k = 0; k < d; k++)
			assert_int_equal(sizes[k], f->sizes[i][k]);
	}
	free(f);
}

static void test_calibrate_113(void **state)
{
	(void)state;
	check_accept("tests/fixtures/tensorimpl/torch-1.13.txt", 72, 168, false);
}

static void test_calibrate_28(void **state)
{
	(void)state;
	check_accept("tests/fixtures/tensorimpl/torch-2.8.txt", 64, 160, true);
	/* the samples the BPF reader itself took on a running torch 2.8 */
	check_accept("tests/fixtures/tensorimpl/bpf-samples-2.8.txt", 64, 160, true);
}

static void expect_reject(const struct tbpf_tsample *v, size_t n, int err, const char *what)
{
	struct tbpf_tlayout l = { 0 };
	const char *why = NULL;
	int got = tlayout_calibrate(v, n, 2, &l, &why);

	if (got != err)
		fail_msg("%s: %d (%u/%u), want %d", what, got, l.sizes_off, l.numel_off, err);
	assert_non_null(why);
}

static void test_calibrate_reject(void **state)
{
	struct fix *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct tbpf_tsample v[128];
	size_t n = 0;

	(void)state;
	assert_true(a && b);
	load_fix("tests/fixtures/tensorimpl/torch-1.13.txt", a);
	load_fix("tests/fixtures/tensorimpl/torch-2.8.txt", b);
	/* both versions' tensors at once: no one layout holds them */
	n = tensors_of(a, v);
	n += tensors_of(b, v + n);
	expect_reject(v, n, -ENOENT, "1.13 + 2.8 tensors");
	/* a 2.8 tensor set with one other c10 object (a StorageImpl) in it */
	n = tensors_of(b, v);
	for (size_t i = 0; i < b->n; i++)
		if (b->storage[i]) {
			v[n++] = b->s[i];
			break;
		}
	expect_reject(v, n, -ENOENT, "2.8 tensors + a StorageImpl");
	/* StorageImpls alone */
	n = 0;
	for (size_t i = 0; i < a->n; i++)
		if (a->storage[i])
			v[n++] = a->s[i];
	expect_reject(v, n, -ENOENT, "StorageImpls");
	/* tensors that cannot tell a layout: 0-dim, one element, empty */
	n = 0;
	for (size_t i = 0; i < b->n; i++)
		if (b->ndim[i] >= 0 && b->numel[i] <= 1)
			v[n++] = b->s[i];
	assert_true(n >= 3);
	expect_reject(v, n, -ENOENT, "0-dim, 1-element and empty tensors");
	/* one shape, many times: not enough either */
	for (size_t i = 0; i < 8; i++)
		v[i] = b->s[0];
	expect_reject(v, 8, -ENOENT, "one shape");
	/* no samples */
	expect_reject(v, 0, -ENOENT, "no samples");
	/* sizes fit, but what follows numel_ is no dtype (a ScalarType
	 * beyond the last), or no device (device_opt_ disengaged in a
	 * tensor with elements), or the two optional spellings mixed */
	for (int c = 0; c < 3; c++) {
		static const char *const what[] = { "no ScalarType after numel_",
			"no device after the dtype", "c10 and std optional<Device> mixed" };
		unsigned char *d;

		n = tensors_of(b, v);
		d = v[0].bytes + 160 + 8;   /* 2.8: numel_ at 160 */
		if (c == 0) {
			d[0] = TLAYOUT_DTYPES;
			d[1] = 0;
		} else if (c == 1) {
			d[2] = d[3] = d[4] = 0;
		} else {
			d[2] = 1;        /* c10::optional<Device>: flag, type, index */
			d[3] = 0;
			d[4] = 0xff;
		}
		expect_reject(v, n, -EINVAL, what[c]);
	}
	/* the reader's layout (key_set_ read): a sample whose word 16 bytes
	 * after numel_ has two backend bits, or no functionality bit, is no
	 * DispatchKeySet */
	for (int c = 0; c < 2; c++) {
		static const char *const what[] = { "two backends in key_set_",
			"no functionality in key_set_" };
		struct tbpf_tlayout l;
		const char *why = NULL;
		unsigned long long ks = c == 0 ? 0x10003ULL : 0x1ULL;

		n = tensors_of(b, v);
		tlayout_initial(true, &l);
		memcpy(v[1].bytes + 160 + 16, &ks, 8);
		if (tlayout_calibrate(v, n, 2, &l, &why) != -EINVAL)
			fail_msg("%s: accepted", what[c]);
		assert_non_null(why);
	}
	/* an undefined tensor's TensorImpl (0-dim, no elements, no device)
	 * among real ones is passed over */
	n = tensors_of(b, v);
	memset(v[n].bytes, 0, sizeof(v[n].bytes));
	memcpy(v[n].bytes, v[0].bytes, 64);
	v[n].ok = 1;
	{
		struct tbpf_tlayout l = { 0 };
		const char *why = NULL;

		if (tlayout_calibrate(v, n + 1, 2, &l, &why))
			fail_msg("with an undefined tensor: %s", why);
		assert_int_equal(l.dtype_off, 168);
	}
	free(a);
	free(b);
}

/* ---- text and FLOPs ----------------------------------------------------- */

static struct tbpf_shape mk(int nargs)
{
	struct tbpf_shape s;

	memset(&s, 0, sizeof(s));
	s.nargs = (__u8)nargs;
	return s;
}

static void put_t(struct tbpf_shape *s, int argi, int kind, int nd, const long long *d)
{
	int i = s->ntensors++;

	s->argi[i] = (__u8)argi;
	s->kind[i] = (__u8)kind;
	s->ndim[i] = (__u8)nd;
	for (int k = 0; d && k < nd && k < TBPF_SHAPE_MAX_DIMS; k++)
		s->dims[i][k] = d[k];
}

static void test_format(void **state)
{
	struct tbpf_shape s = mk(3);
	char buf[256];

	(void)state;
	put_t(&s, 0, T, 2, (long long[]){ 2, 3 });
	put_t(&s, 1, T, 2, (long long[]){ 2, 3 });
	shape_format(&s, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "[[2, 3], [2, 3], []]");
	s = mk(2);
	put_t(&s, 0, T, 0, NULL);                          /* 0-dim */
	put_t(&s, 1, O, TBPF_SHAPE_NONE, NULL);            /* None */
	shape_format(&s, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "[[], []]");
	s = mk(2);
	put_t(&s, 0, T, 6, (long long[]){ 1, 2, 1, 2, 1, 3 });
	put_t(&s, 1, T, TBPF_SHAPE_BAD, NULL);
	shape_format(&s, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "[[1, 2, 1, 2, 1, 3], [?]]");
	s = mk(0);
	shape_format(&s, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "[]");
	/* int entries (conv2d's) print as [] */
	s = mk(4);
	put_t(&s, 0, T, 1, (long long[]){ 0 });
	put_t(&s, 3, ARGK_INTLIST, 2, (long long[]){ 1, 1 });
	shape_format(&s, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "[[0], [], [], []]");
	/* cut to fit, NUL-terminated, full length returned */
	assert_int_equal(shape_format(&s, NULL, buf, 5), strlen("[[0], [], [], []]"));
	assert_string_equal(buf, "[[0]");
}

/* A lookup of continuations for test_format_more: by id */
struct more_tab {
	uint64_t id[4];
	struct tbpf_shape c[4];
	unsigned n;
};

static const struct tbpf_shape *more_tab_get(void *ctx, uint64_t id)
{
	struct more_tab *t = ctx;

	for (unsigned i = 0; i < t->n; i++)
		if (t->id[i] == id)
			return &t->c[i];
	return NULL;
}

static void more_tab_add(struct more_tab *t, uint64_t list, unsigned entry, unsigned n,
			 long long first)
{
	struct tbpf_shape *c = &t->c[t->n];

	memset(c, 0, sizeof(*c));
	c->kind[0] = ARGK_MORE;
	c->argi[0] = (__u8)entry;
	c->ndim[0] = (__u8)n;
	for (unsigned k = 0; k < n; k++)
		(&c->dims[0][0])[k] = first + k;
	t->id[t->n++] = tbpf_shape_more_id(list, entry);
}

/* Tensors of more than 8 dims: the sizes past the 8th from continuations
 * (bpf/tbpf_abi.h), filed under tbpf_shape_more_id(list, entry) */
static void test_format_more(void **state)
{
	static const long long d8[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct tbpf_shape s = mk(3);
	struct more_tab t = { .n = 0 };
	struct shape_more more;
	char buf[1024], want[1024];
	size_t w;

	(void)state;
	put_t(&s, 0, T, 9, d8);
	put_t(&s, 1, T, 2, (long long[]){ 2, 3 });
	put_t(&s, 2, T, 12, d8);
	more_tab_add(&t, 77, 0, 1, 9);
	more_tab_add(&t, 77, 2, 4, 10);
	more_tab_add(&t, 78, 1, 3, 50);     /* another list's: not used */
	shape_more_find(77, &s, more_tab_get, &t, &more);
	assert_non_null(more.e[0]);
	assert_null(more.e[1]);
	assert_non_null(more.e[2]);
	shape_format(&s, &more, buf, sizeof(buf));
	assert_string_equal(buf, "[[1, 2, 3, 4, 5, 6, 7, 8, 9], [2, 3], "
			    "[1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13]]");
	/* no continuation (a capture cut short): "..." for the rest */
	shape_format(&s, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "[[1, 2, 3, 4, 5, 6, 7, 8, ...], [2, 3], "
			    "[1, 2, 3, 4, 5, 6, 7, 8, ...]]");
	/* an entry's continuation under another entry's id is not taken */
	shape_more_find(78, &s, more_tab_get, &t, &more);
	assert_null(more.e[0]);
	assert_null(more.e[2]);
	/* 64 sizes kept; more: "..." after the 64th */
	s = mk(1);
	put_t(&s, 0, T, TBPF_SHAPE_ALL_DIMS + 1, d8);
	t.n = 0;
	more_tab_add(&t, 5, 0, TBPF_SHAPE_MORE_DIMS, 9);
	shape_more_find(5, &s, more_tab_get, &t, &more);
	shape_format(&s, &more, buf, sizeof(buf));
	w = (size_t)snprintf(want, sizeof(want), "[[");
	for (int k = 1; k <= TBPF_SHAPE_ALL_DIMS; k++)
		w += (size_t)snprintf(want + w, sizeof(want) - w, "%d, ", k);
	snprintf(want + w, sizeof(want) - w, "...]]");
	assert_string_equal(buf, want);
	/* FLOPs of add / mul of more than 8 dims: every size's product */
	s = mk(3);
	put_t(&s, 0, T, 12, d8);
	put_t(&s, 1, T, 12, d8);
	t.n = 0;
	more_tab_add(&t, 9, 0, 4, 2);
	shape_more_find(9, &s, more_tab_get, &t, &more);
	assert_int_equal(shape_flops("aten::add", &s, &more), 40320ULL * 2 * 3 * 4 * 5);
	assert_int_equal(shape_flops("aten::add", &s, NULL), 0);
	/* the id of a continuation: per list and entry, never 0 */
	assert_true(tbpf_shape_more_id(77, 0) != tbpf_shape_more_id(77, 1));
	assert_true(tbpf_shape_more_id(77, 0) != tbpf_shape_more_id(78, 0));
	assert_true(tbpf_shape_more_id(77, 0) != 77);
}

static void test_types(void **state)
{
	struct tbpf_shape s = mk(6);
	char buf[256];
	size_t n;

	(void)state;
	/* a float tensor, a bool one, None, a Scalar, a list, a string */
	put_t(&s, 0, T, 2, (long long[]){ 2, 3 });
	s.dtype[0] = 6;
	put_t(&s, 1, T, 1, (long long[]){ 3 });
	s.dtype[1] = 11;
	put_t(&s, 2, O, TBPF_SHAPE_NONE, NULL);
	s.itype[0] = s.itype[1] = s.itype[2] = ITYPE_TENSOR;
	s.itype[3] = ITYPE_SCALAR;
	s.itype[4] = ITYPE_SCALARLIST;
	s.itype[5] = ITYPE_NONE;
	n = shape_types(&s, buf, sizeof(buf));
	assert_int_equal(n, strlen(buf));
	assert_string_equal(buf, "[\"float\", \"bool\", \"\", \"Scalar\", \"ScalarList\", \"\"]");
	/* a tensor list; an unreadable tensor and an unknown type: "?" */
	s = mk(3);
	put_t(&s, 1, T, TBPF_SHAPE_BAD, NULL);
	s.itype[0] = ITYPE_TENSORLIST;
	s.itype[1] = ITYPE_TENSOR;
	s.itype[2] = ITYPE_UNKNOWN;
	shape_types(&s, buf, sizeof(buf));
	assert_string_equal(buf, "[\"TensorList\", \"?\", \"?\"]");
	/* the dtype names torch.profiler writes, 1.13 and 2.8 */
	assert_string_equal(shape_dtype_name(4), "long int");
	assert_string_equal(shape_dtype_name(5), "c10::Half");
	assert_string_equal(shape_dtype_name(15), "c10::BFloat16");
	assert_string_equal(shape_dtype_name(27), "short unsigned int");
	assert_string_equal(shape_dtype_name(45), "c10::Float4_e2m1fn_x2");
	assert_string_equal(shape_dtype_name(46), "");
	assert_int_equal(shape_dtype_count(), TLAYOUT_DTYPES);
	/* a capture from before Input type (every class unknown): none */
	s = mk(2);
	memset(s.itype, ITYPE_UNKNOWN, sizeof(s.itype));
	assert_int_equal(shape_types(&s, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	s = mk(0);
	shape_types(&s, buf, sizeof(buf));
	assert_string_equal(buf, "[]");
}

static void test_flops(void **state)
{
	struct tbpf_shape s = mk(2);

	(void)state;
	/* values torch.profiler's with_flops gave (1.13 and 2.8) */
	put_t(&s, 0, T, 2, (long long[]){ 2, 3 });
	put_t(&s, 1, T, 2, (long long[]){ 3, 4 });
	assert_int_equal(shape_flops("aten::mm", &s, NULL), 48);
	assert_int_equal(shape_flops("aten::matmul", &s, NULL), 0);
	s = mk(5);
	put_t(&s, 0, T, 1, (long long[]){ 10 });
	put_t(&s, 1, T, 2, (long long[]){ 4, 8 });
	put_t(&s, 2, T, 2, (long long[]){ 8, 10 });
	assert_int_equal(shape_flops("aten::addmm", &s, NULL), 640);
	s = mk(2);
	put_t(&s, 0, T, 3, (long long[]){ 3, 2, 4 });
	put_t(&s, 1, T, 3, (long long[]){ 3, 4, 5 });
	assert_int_equal(shape_flops("aten::bmm", &s, NULL), 240);
	s = mk(3);
	put_t(&s, 0, T, 2, (long long[]){ 7, 5 });
	assert_int_equal(shape_flops("aten::add", &s, NULL), 35);
	s = mk(2);
	put_t(&s, 0, T, 0, NULL);
	assert_int_equal(shape_flops("aten::mul", &s, NULL), 1);
	/* conv2d [4,3,16,16] * [8,3,3,3], padding 1: 442368; stride 2, no
	 * padding, [4,8,16,16] * [8,8,3,3]: 225792 */
	s = mk(7);
	put_t(&s, 0, T, 4, (long long[]){ 4, 3, 16, 16 });
	put_t(&s, 1, T, 4, (long long[]){ 8, 3, 3, 3 });
	put_t(&s, 3, ARGK_INTLIST, 2, (long long[]){ 1, 1 });
	put_t(&s, 4, ARGK_INTLIST, 2, (long long[]){ 1, 1 });
	put_t(&s, 5, ARGK_INTLIST, 2, (long long[]){ 1, 1 });
	put_t(&s, 6, ARGK_SYMINT, 1, (long long[]){ 1 });
	assert_int_equal(shape_flops("aten::conv2d", &s, NULL), 442368);
	s = mk(7);
	put_t(&s, 0, T, 4, (long long[]){ 4, 8, 16, 16 });
	put_t(&s, 1, T, 4, (long long[]){ 8, 8, 3, 3 });
	put_t(&s, 3, ARGK_INTLIST, 2, (long long[]){ 2, 2 });
	put_t(&s, 4, ARGK_INTLIST, 2, (long long[]){ 0, 0 });
	put_t(&s, 5, ARGK_INTLIST, 2, (long long[]){ 1, 1 });
	put_t(&s, 6, ARGK_INT, 1, (long long[]){ 1 });
	assert_int_equal(shape_flops("aten::conv2d", &s, NULL), 225792);
	/* torch.profiler counts no FLOPs for conv1d, conv3d, convolution */
	assert_int_equal(shape_flops("aten::convolution", &s, NULL), 0);
	assert_int_equal(shape_flops("aten::conv3d", &s, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schema_ret),
		cmocka_unit_test(test_argdesc_real),
		cmocka_unit_test(test_argdesc_itype),
		cmocka_unit_test(test_argdesc_lens),
		cmocka_unit_test(test_argdesc_lib_113),
		cmocka_unit_test(test_argdesc_lib_2),
		cmocka_unit_test(test_calibrate_113),
		cmocka_unit_test(test_calibrate_28),
		cmocka_unit_test(test_calibrate_reject),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_more),
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_flops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
