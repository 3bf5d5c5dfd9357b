/* test_opsyms.c - unit tests of operator discovery: mangled-name parsing,
 * the struct-name -> (name, overload) map, a small C++ library built here
 * whose ops the test knows, and the real libtorch of torch 1.13 (Debian)
 * and 2.x (PyPI venv), checked against nm and against torch's own schema
 * list (torch._C._jit_get_all_schemas() run in that torch's python). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>

#include "libs/testutil.h"
#include "elfsym.h"
#include "opsyms.h"
#include "boxedop.h"
#include "argdesc.h"

/* ---- opsym_parse_mangled -------------------------------------------- */

static void test_parse_mangled(void **state)
{
	static const struct { const char *m; int rc; const char *sn; bool rd; } t[] = {
		{ "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE", 0, "add_Tensor", false },
		{ "_ZN2at4_ops10add_Tensor10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_RKNS2_6ScalarE", 0, "add_Tensor", true },
		{ "_ZN2at4_ops11add__Tensor4callERNS_6TensorERKS2_RKN3c106ScalarE", 0, "add__Tensor", false },
		{ "_ZN2at4_ops17_nnpack_available4callEv", 0, "_nnpack_available", false },
		{ "_ZN2at4_ops8some_str4callB5cxx11Ev", 0, "some_str", false },   /* ABI tag */
		{ "_ZN2at4_ops10add_Tensor6helperERKNS_6TensorE", -EINVAL, NULL, false },
		{ "_ZN2at6native10add_Tensor4callERKNS_6TensorE", -EINVAL, NULL, false },
		{ "_ZN2at4_ops10add_Tensor4name", -EINVAL, NULL, false },      /* no 'E' */
		{ "_ZN2at4_ops10add_Tensor4callE", -EINVAL, NULL, false },     /* no params */
		{ "_ZN2at4_ops99add_Tensor4callEv", -EINVAL, NULL, false },    /* length past end */
		{ "_ZN2at4_ops010add_Tensor4callEv", -EINVAL, NULL, false },   /* leading zero */
		{ "_ZN2at4_ops10add_Tensor5callsEv", -EINVAL, NULL, false },
		{ "_ZN2at4_ops4relu4call", -EINVAL, NULL, false },
		{ "_ZN2at4_ops", -EINVAL, NULL, false },
		{ "aten::add", -EINVAL, NULL, false },
		{ "", -EINVAL, NULL, false },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *sn = NULL;
		bool rd = !t[i].rd;
		int rc = opsym_parse_mangled(t[i].m, &sn, &rd);
		if (rc != t[i].rc)
			fail_msg("%s: rc %d, want %d", t[i].m, rc, t[i].rc);
		if (!rc) {
			assert_string_equal(sn, t[i].sn);
			assert_int_equal(rd, t[i].rd);
			free(sn);
		}
	}
}

/* ---- the name map --------------------------------------------------- */

struct want {
	const char *sn, *name, *ovl;
	int src;
};

static void check_split(const struct opname_map *m, const struct want *w)
{
	char *name, *ovl;
	int src = opname_map_split(m, w->sn, &name, &ovl);
	if (src != w->src || strcmp(name, w->name) || strcmp(ovl, w->ovl))
		fail_msg("%s -> %s + \"%s\" (%s), want %s + \"%s\" (%s)", w->sn, name, ovl,
			 opname_source_str(src), w->name, w->ovl, opname_source_str(w->src));
	free(name);
	free(ovl);
}

/* The strings fake_ops.cpp compiles in, and what each struct must become
 * (worked out by hand from PyTorch's naming rules). */
static const char *const fake_strings[] = {
	"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
	"add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
	"aten::div",
	"aten::div.Tensor_mode",
	"aten::div.Scalardiv_Scalar_mode_aten::div.Tensor",
	"aten::relu",
	"relu(Tensor self) -> Tensor",
	"aten::scatter_reduce",
	"aten::scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor",
	"scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor",
	"aten::sinc",
	"special_sinc.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
	"aten::mystery_fn",
	"aten::other.out",
	"aten::lonely_thing",
};

static const struct want fake_want[] = {
	{ "add_Tensor", "aten::add", "Tensor", OPNAME_SCHEMA },
	{ "add__Tensor", "aten::add_", "Tensor", OPNAME_SCHEMA_UNQ },
	{ "div_Tensor_mode", "aten::div", "Tensor_mode", OPNAME_QUALIFIED },
	{ "relu", "aten::relu", "", OPNAME_SCHEMA_UNQ },
	{ "scatter_reduce", "aten::scatter", "reduce", OPNAME_SCHEMA },
	{ "scatter_reduce_two", "aten::scatter_reduce", "two", OPNAME_SCHEMA_UNQ },
	{ "sinc_out", "aten::sinc", "out", OPNAME_TAIL },
	{ "mystery_fn_out", "aten::mystery_fn", "out", OPNAME_GUESS },
	{ "lonely_thing_xyz", "aten::lonely_thing", "xyz", OPNAME_GUESS },
	{ "zzz_unknown_op", "aten::zzz_unknown_op", "", OPNAME_NONE },
};
#define NFAKE (sizeof(fake_want) / sizeof(fake_want[0]))

static void test_name_map(void **state)
{
	struct opname_map *m = opname_map_new();
	assert_non_null(m);
	for (size_t i = 0; i < sizeof(fake_strings) / sizeof(fake_strings[0]); i++)
		opname_map_add(m, fake_strings[i]);
	/* noise that must not change anything */
	opname_map_add(m, "");
	opname_map_add(m, "aten::");
	opname_map_add(m, "aten::.x");
	opname_map_add(m, "aten::add.");
	opname_map_add(m, "expected(at least) one");
	opname_map_add(m, "quantized::add(Tensor qa) -> Tensor");
	for (size_t i = 0; i < NFAKE; i++)
		check_split(m, &fake_want[i]);
	opname_map_free(m);
}

/* Ranks: a qualified name beats an unqualified schema (which may come
 * from another namespace), and an unqualified schema beats a bare name;
 * order of arrival does not matter. */
static void test_name_map_ranks(void **state)
{
	for (int order = 0; order < 2; order++) {
		const char *s[] = {
			"aten::foo_bar",                 /* bare */
			"foo.bar(Tensor x) -> Tensor",    /* unqualified schema */
			"qq_a.b(Tensor x) -> Tensor",     /* unqualified schema */
			"aten::qq.a_b",                  /* qualified */
		};
		struct opname_map *m = opname_map_new();
		for (int i = 0; i < 4; i++)
			opname_map_add(m, s[order ? 3 - i : i]);
		check_split(m, &(struct want){ "foo_bar", "aten::foo", "bar", OPNAME_SCHEMA_UNQ });
		check_split(m, &(struct want){ "qq_a_b", "aten::qq", "a_b", OPNAME_QUALIFIED });
		opname_map_free(m);
	}
	/* a schema string the linker merged into a longer one ending the
	 * same way (torch 2.15's index.Tensor inside _unsafe_index.Tensor):
	 * the tail's return kind is its host's */
	struct opname_map *mt = opname_map_new();
	opname_map_add(mt, "_unsafe_index.Tensor(Tensor self, Tensor?[] indices) -> Tensor");
	opname_map_add(mt, "aten::index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)");
	opname_map_add(mt, "aten::index");
	opname_map_add(mt, "aten::softmax.Dimname");   /* a name string, its schema a tail */
	opname_map_add(mt, "_sparse_softmax.Dimname(Tensor self, Dimname dim, *, ScalarType? dtype=None) -> Tensor");
	check_split(mt, &(struct want){ "index_Tensor", "aten::index", "Tensor", OPNAME_TAIL });
	assert_int_equal(opname_map_ret(mt, "index_Tensor"), ARGRET_MEMORY);
	assert_int_equal(opname_map_ret(mt, "_unsafe_index_Tensor"), ARGRET_MEMORY);
	assert_int_equal(opname_map_ret(mt, "index_put_"), ARGRET_REG);
	assert_int_equal(opname_map_ret(mt, "softmax_Dimname"), ARGRET_MEMORY);
	assert_int_equal(opname_map_ret(mt, "index_put"), ARGRET_UNKNOWN);   /* no schema ends so */
	opname_map_free(mt);
	/* an empty map still names everything */
	struct opname_map *m = opname_map_new();
	check_split(m, &(struct want){ "add__Tensor", "aten::add__Tensor", "", OPNAME_NONE });
	char *n, *o;
	assert_int_equal(opname_map_split(m, "", &n, &o), -EINVAL);
	assert_null(n);
	assert_null(o);
	opname_map_free(m);
}

/* ---- the test library ----------------------------------------------- */

static char *tmpdir, *so;

/* Build the test library once; teardown removes it even after a failure. */
static int setup(void **state)
{
	char *libs = tu_libs_dir();

	tmpdir = tu_mkdtemp();
	if (!libs || !tmpdir)
		return -1;
	so = tu_printf("%s/libfake_ops.so", tmpdir);
	int rc = tu_sh("g++ -shared -fPIC -O2 -o '%s' '%s/fake_ops.cpp'", so, libs);
	free(libs);
	return rc ? -1 : 0;
}

static int teardown(void **state)
{
	tu_rmdir(tmpdir);
	free(tmpdir);
	free(so);
	return 0;
}

static void test_fake_library(void **state)
{
	struct opsym_set s;
	assert_int_equal(opsyms_discover(so, &s), 0);
	assert_int_equal(s.n, 2 * NFAKE);
	assert_int_equal(s.n_call, NFAKE);
	assert_int_equal(s.n_redispatch, NFAKE);
	assert_int_equal(s.n_ops, NFAKE);
	assert_string_equal(s.lib_path, so);

	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	int fd = open(so, O_RDONLY);
	assert_true(fd >= 0);
	for (size_t k = 0; k < NFAKE; k++) {
		const struct want *w = &fake_want[k];
		int found = 0;
		uint32_t idx = UINT32_MAX;
		for (size_t i = 0; i < s.n; i++) {
			const struct opsym *o = &s.v[i];
			if (strcmp(o->struct_name, w->sn))
				continue;
			found |= o->redispatch ? 2 : 1;
			assert_string_equal(o->name, w->name);
			assert_string_equal(o->overload, w->ovl);
			assert_int_equal(o->name_source, w->src);
			if (idx == UINT32_MAX)
				idx = o->op_index;
			assert_int_equal(o->op_index, idx);  /* shared by call and redispatch */
			/* file offset holds the loaded code */
			unsigned char fb[8];
			void *addr = dlsym(h, o->mangled);
			assert_non_null(addr);
			assert_int_equal(pread(fd, fb, sizeof(fb), (off_t)o->file_off), (ssize_t)sizeof(fb));
			assert_memory_equal(fb, addr, sizeof(fb));
		}
		assert_int_equal(found, 3);
	}
	/* sorted by name, overload; call before redispatch; op_index follows */
	for (size_t i = 1; i < s.n; i++) {
		int c = strcmp(s.v[i - 1].name, s.v[i].name);
		if (!c)
			c = strcmp(s.v[i - 1].overload, s.v[i].overload);
		assert_true(c < 0 || (c == 0 && !s.v[i - 1].redispatch && s.v[i].redispatch));
		assert_int_equal(s.v[i].op_index, s.v[i - 1].op_index + (c ? 1 : 0));
	}
	close(fd);
	dlclose(h);
	opsyms_free(&s);
	assert_null(s.v);

	assert_int_equal(opsyms_discover("/nonexistent.so", &s), -ENOENT);
}

/* ---- real libtorch -------------------------------------------------- */

struct truth {
	char **sn, **name, **ovl;
	size_t n;
};

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* torch's own schema list -> struct name -> (aten::name, overload). */
static bool load_truth(const char *python, struct truth *t)
{
	char *out = tu_capture("cd / && '%s' -c \"import torch\nfor s in torch._C._jit_get_all_schemas(): print(s.name + '\\t' + s.overload_name)\" 2>/dev/null",
			       python);
	if (!out)
		return false;
	memset(t, 0, sizeof(*t));
	size_t cap = 0;
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		char *tab = strchr(l, '\t');
		if (!tab || strncmp(l, "aten::", 6))
			continue;
		*tab = '\0';
		if (t->n == cap) {
			cap = cap ? cap * 2 : 4096;
			t->sn = realloc(t->sn, cap * sizeof(char *));
			t->name = realloc(t->name, cap * sizeof(char *));
			t->ovl = realloc(t->ovl, cap * sizeof(char *));
		}
		t->sn[t->n] = *(tab + 1) ? tu_printf("%s_%s", l + 6, tab + 1) : strdup(l + 6);
		t->name[t->n] = strdup(l);
		t->ovl[t->n] = strdup(tab + 1);
		t->n++;
	}
	free(out);
	return t->n > 0;
}

static const char *truth_find(const struct truth *t, const char *sn, const char **ovl)
{
	for (size_t i = 0; i < t->n; i++)  /* a few thousand: linear is fine */
		if (!strcmp(t->sn[i], sn)) {
			*ovl = t->ovl[i];
			return t->name[i];
		}
	return NULL;
}

static void truth_free(struct truth *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->sn[i]);
		free(t->name[i]);
		free(t->ovl[i]);
	}
	free(t->sn);
	free(t->name);
	free(t->ovl);
}

static int add_bare(const char *str, void *ctx)
{
	if (!strchr(str, '(') && !strchr(str, '.'))
		opname_map_add(ctx, str);
	return 0;
}

/* The fallback alone: a map fed only bare "aten::<name>" strings (no
 * schema, no overload names) must still split nearly every op right. */
static void check_heuristic(const char *lib, const struct opsym_set *s)
{
	struct elf_file *ef;
	struct opname_map *m = opname_map_new();
	size_t ok = 0;

	assert_int_equal(elf_file_open(lib, &ef), 0);
	assert_int_equal(elf_file_for_each_rostring(ef, "aten::", add_bare, m), 0);
	for (size_t i = 0; i < s->n; i++) {
		char *name, *ovl;
		assert_true(opname_map_split(m, s->v[i].struct_name, &name, &ovl) >= OPNAME_BARE);
		ok += !strcmp(name, s->v[i].name) && !strcmp(ovl, s->v[i].overload);
		free(name);
		free(ovl);
	}
	fprintf(stderr, "  heuristic alone (bare names only): %zu of %zu right\n", ok, s->n);
	assert_true(ok * 100 >= s->n * 99);
	opname_map_free(m);
	elf_file_close(ef);
}

/* one node row and one evaluate_function row per autograd node
 * class with an apply (as nm counts them), each with its vtable; one
 * Engine::evaluate_function probe.  Then s keeps the operators only, for
 * the checks that follow. */
static void check_autograd(const char *lib, struct opsym_set *s)
{
	char *nm = tu_capture("nm -D --defined-only '%s' | awk '$2==\"T\" && $3 ~ /^_ZN5torch8autograd(9generated)?[0-9]+[A-Za-z0-9_]+5applyEOSt6vectorIN2at6TensorE/ && $3 !~ /^_ZN5torch8autograd6Engine/' | wc -l", lib);
	size_t want = nm ? strtoul(nm, NULL, 10) : 0, nodes = 0, evals = 0, eng = 0, k = 0;
	size_t vt = 0, boxed = 0;
	bool accum = false;

	for (size_t i = 0; i < s->n; i++) {
		struct opsym *o = &s->v[i];

		boxed += o->kind == OPSYM_BOXED;
		nodes += o->kind == OPSYM_NODE;
		evals += o->kind == OPSYM_NODE_EVAL;
		eng += o->kind == OPSYM_EVAL;
		vt += o->kind == OPSYM_NODE_EVAL && o->vtable;
		if (o->kind == OPSYM_NODE && !strcmp(o->name, "torch::autograd::AccumulateGrad"))
			accum = true;
		if (o->kind == OPSYM_NODE_EVAL &&
		    !strcmp(o->name, "autograd::engine::evaluate_function: AddmmBackward0"))
			assert_true(o->vtable != 0);
	}
	fprintf(stderr, "  autograd: %zu node applies (nm: %zu), %zu with vtables, %zu evaluate_function\n",
		nodes, want, vt, eng);
	assert_true(want > 400);
	assert_int_equal(nodes, want);
	assert_int_equal(s->n_nodes, want);
	assert_int_equal(evals, want);
	assert_true(vt * 100 >= want * 95);
	assert_int_equal(eng, 1);
	assert_int_equal(boxed, 1);   /* the boxed-call entry */
	assert_true(accum);
	free(nm);
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].kind == OPSYM_OP) {
			s->v[k++] = s->v[i];
			continue;
		}
		free(s->v[i].mangled);
		free(s->v[i].struct_name);
		free(s->v[i].name);
		free(s->v[i].overload);
	}
	s->n = k;
	s->n_ops -= 2 * nodes + eng + boxed;
}

/* autograd node applies -> torch.profiler's node names, vtables */
static void test_parse_node(void **state)
{
	static const struct {
		const char *mangled, *name, *vt;
	} ok[] = {
		{ "_ZN5torch8autograd9generated14AddmmBackward05applyEOSt6vectorIN2at6TensorESaIS5_EE",
		  "AddmmBackward0", "_ZTVN5torch8autograd9generated14AddmmBackward0E" },
		{ "_ZN5torch8autograd14AccumulateGrad5applyEOSt6vectorIN2at6TensorESaIS4_EE",
		  "torch::autograd::AccumulateGrad", "_ZTVN5torch8autograd14AccumulateGradE" },
		{ "_ZN5torch8autograd10CopySlices5applyEOSt6vectorIN2at6TensorESaIS4_EE",
		  "torch::autograd::CopySlices", "_ZTVN5torch8autograd10CopySlicesE" },
	};
	static const char *const bad[] = {
		"_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEE",
		"_ZN5torch8autograd9generated14AddmmBackward012release_variablesEv",
		"_ZN5torch8autograd9generated14AddmmBackward05applyERKSt6vector",  /* not && */
		"_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE",
		"_ZN5torch8autograd",
		"_ZN5torch8autograd9generated99Short5applyEOSt6vectorIN2at6TensorE",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char *name = NULL, *vt = NULL;
		assert_int_equal(opsym_parse_node(ok[i].mangled, &name, &vt), 0);
		assert_string_equal(name, ok[i].name);
		assert_string_equal(vt, ok[i].vt);
		free(name);
		free(vt);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *name = NULL, *vt = NULL;
		assert_int_equal(opsym_parse_node(bad[i], &name, &vt), -EINVAL);
	}
}

static void check_libtorch(const char *lib, const char *python, size_t want_each)
{
	if (!tu_exists(lib)) {
		fprintf(stderr, "  skipped: %s not installed\n", lib);
		skip();
	}
	/* independent count and addresses: nm */
	char *nm = tu_capture("nm -D --defined-only '%s' | awk '$2==\"T\" && $3 ~ /^_ZN2at4_ops[0-9]+[A-Za-z0-9_]+(4call|10redispatch)E/ {print $3\" \"$1}' | LC_ALL=C sort", lib);
	assert_non_null(nm);
	size_t nm_lines = 0;
	for (char *c = nm; *c; c++)
		nm_lines += *c == '\n';

	double t0 = tu_now_ms();
	struct opsym_set s;
	assert_int_equal(opsyms_discover(lib, &s), 0);
	double ms = tu_now_ms() - t0;
	fprintf(stderr, "  %s: %zu ::call, %zu ::redispatch, %zu ops in %.1f ms\n", lib,
		s.n_call, s.n_redispatch, s.n_ops, ms);
	check_autograd(lib, &s);
	if (want_each) {
		assert_int_equal(s.n_call, want_each);
		assert_int_equal(s.n_redispatch, want_each);
	}
	assert_int_equal(s.n_call, s.n_redispatch);
	assert_int_equal(s.n_ops, s.n_call);
	assert_int_equal(s.n, nm_lines);
	assert_true(ms < 2000);

	/* same symbols at the same addresses as nm says */
	char **mine = malloc(s.n * sizeof(char *));
	for (size_t i = 0; i < s.n; i++)
		mine[i] = tu_printf("%s %016llx", s.v[i].mangled, (unsigned long long)s.v[i].vaddr);
	qsort(mine, s.n, sizeof(char *), strp_cmp);
	char *line = nm;
	for (size_t i = 0; i < s.n; i++) {
		char *nl = strchr(line, '\n');
		*nl = '\0';
		assert_string_equal(mine[i], line);
		line = nl + 1;
		free(mine[i]);
	}
	free(mine);
	free(nm);

	/* every op named, no heuristic needed, and as torch itself names it */
	struct truth t = { 0 };
	if (!load_truth(python, &t)) {
		fprintf(stderr, "  schema comparison skipped: %s cannot import torch\n", python);
		opsyms_free(&s);
		skip();
	}
	int by_src[OPNAME_NONE + 1] = { 0 };
	size_t bad = 0, no_ret = 0;
	for (size_t i = 0; i < s.n; i++) {
		const struct opsym *o = &s.v[i];
		const char *ovl, *name = truth_find(&t, o->struct_name, &ovl);
		assert_true(o->name_source >= 0 && o->name_source <= OPNAME_NONE);
		by_src[o->name_source]++;
		if (!name || strcmp(name, o->name) || strcmp(ovl, o->overload)) {
			if (bad++ < 10)
				fprintf(stderr, "  MISMATCH %s: %s + \"%s\", torch says %s + \"%s\"\n",
					o->struct_name, o->name, o->overload, name ? name : "(none)",
					name ? ovl : "");
		}
		assert_true(o->name_source <= OPNAME_TAIL);
		if (o->kind == OPSYM_OP && o->ret == ARGRET_UNKNOWN && no_ret++ < 10)
			fprintf(stderr, "  NO RETURN KIND %s\n", o->struct_name);
	}
	assert_int_equal(bad, 0);
	/* every op's return kind known: --record-shapes places arguments by it */
	assert_int_equal(no_ret, 0);
	fprintf(stderr, "  names agree with torch._C._jit_get_all_schemas() (%zu aten schemas) for all %zu symbols; by source:",
		t.n, s.n);
	for (int k = 0; k <= OPNAME_NONE; k++)
		if (by_src[k])
			fprintf(stderr, " %s %d", opname_source_str(k), by_src[k]);
	fprintf(stderr, "\n");
	truth_free(&t);
	check_heuristic(lib, &s);
	opsyms_free(&s);
}

static void test_libtorch_113(void **state)
{
	check_libtorch("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0", "/usr/bin/python3", 2952);
}

static void test_libtorch_2(void **state)
{
	check_libtorch("/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
		       "/var/cache/tbpf/venv-torch2/bin/python", 0);
}

static void test_libtorch_215(void **state)
{
	check_libtorch("/var/cache/tbpf/venv-torch2.15/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
		       "/var/cache/tbpf/venv-torch2.15/bin/python", 0);
}

/* The boxed-call entry: the pure scanners on bytes, then both
 * installed libtorch builds; on torch 2.x (with .symtab) the typeinfo
 * route must find the symbol's address. */
static void test_boxedop_scan(void **state)
{
	/* push %r12; push %rbp; mov g(%rip),%rbp; push %rbx; mov (%rdi),%r12 */
	static const uint8_t inv[] = { 0x41, 0x54, 0x55, 0x48, 0x8b, 0x2d, 1, 2, 3, 4,
				       0x53, 0x4c, 0x8b, 0x27, 0x48, 0x89, 0xf3 };
	/* lea 0x10(%rip),%rax ; nop ; lea -0x20(%rip),%rcx */
	static const uint8_t code[] = { 0x48, 0x8d, 0x05, 0x10, 0, 0, 0, 0x90,
					0x48, 0x8d, 0x0d, 0xe0, 0xff, 0xff, 0xff };
	uint64_t site[4], tgt[4];

	assert_true(boxedop_invoke_shape(inv, sizeof(inv)));
	assert_false(boxedop_invoke_shape(inv + 3, sizeof(inv) - 3));   /* no push */
	assert_int_equal(boxedop_leas(code, sizeof(code), 0x1000, 0, ~0ull, site, tgt, 4), 2);
	assert_int_equal(site[0], 0x1000);
	assert_int_equal(tgt[0], 0x1000 + 7 + 0x10);
	assert_int_equal(site[1], 0x1008);
	assert_int_equal(tgt[1], 0x1008 + 7 - 0x20);
	assert_int_equal(boxedop_leas(code, sizeof(code), 0x1000, 0x1010, 0x1020, site, tgt, 4), 1);
	/* FNV-1a 64 of "name\0overload", computed independently in Python */
	assert_int_equal(boxedop_key("aten::linear", ""), 0xdc47cc560264b502ull);
	assert_int_equal(boxedop_key("aten::add", "Tensor"), 0xcf882e102123c933ull);
}

static void check_boxed(const char *lib, uint64_t want)
{
	struct elf_file *ef;
	uint64_t a = 0, b = 0;

	if (access(lib, R_OK)) {
		fprintf(stderr, "  %s not installed: skipped\n", lib);
		return;
	}
	assert_int_equal(elf_file_open(lib, &ef), 0);
	assert_int_equal(boxedop_find(ef, true, &a), 0);
	assert_int_equal(boxedop_find(ef, false, &b), 0);
	assert_int_equal(a, b);
	if (want)
		assert_int_equal(a, want);
	fprintf(stderr, "  %s: boxed-call entry at 0x%llx\n", lib, (unsigned long long)a);
	elf_file_close(ef);
}

static void test_boxedop_libtorch(void **state)
{
	struct elf_file *ef;
	struct elf_sym s;
	const char *t2 = "/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so";

	/* Debian 1.13 is stripped: checked by objdump, 0x42e05b0 */
	check_boxed("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0", 0x42e05b0);
	if (!access(t2, R_OK)) {
		assert_int_equal(elf_file_open(t2, &ef), 0);
		assert_int_equal(elf_file_find_sym(ef, BOXEDOP_INVOKE_SYM, &s), 0);
		elf_file_close(ef);
		check_boxed(t2, s.value);
	}
}

/* Factory ops (no at::Tensor argument) against ops with one, on real
 * mangled names of both libtorch builds (nm -D; 73 of 2.8's ::call
 * entries have none). */
static void test_has_tensor_arg(void **state)
{
	static const char *with[] = {
		"_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE",
		"_ZN2at4_ops3cat4callERKN3c108IListRefINS_6TensorEEEl",
		"_ZN2at4_ops7mul_out4callERKNS_6TensorES4_RS2_",
		"_ZN2at4_ops10add_Tensor10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_RKNS2_6ScalarE",
	};
	static const char *without[] = {
		"_ZN2at4_ops4ones4callEN3c108ArrayRefINS2_6SymIntEEESt8optionalINS2_10ScalarTypeEES6_INS2_6LayoutEES6_INS2_6DeviceEES6_IbE",
		"_ZN2at4_ops6arange4callERKN3c106ScalarENS2_8optionalINS2_10ScalarTypeEEENS6_INS2_6LayoutEEENS6_INS2_6DeviceEEENS6_IbEE",
		"_ZN2at4_ops13scalar_tensor4callERKN3c106ScalarESt8optionalINS2_10ScalarTypeEES6_INS2_6LayoutEES6_INS2_6DeviceEES6_IbE",
		"_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEENS2_8optionalINS2_10ScalarTypeEEENS6_INS2_6LayoutEEENS6_INS2_6DeviceEEENS6_IbEE",
		"_ZN2at4_ops17_nnpack_available4callEv",
		"_ZN2at4_ops6Tensor",   /* no argument list at all */
	};

	for (size_t i = 0; i < sizeof(with) / sizeof(*with); i++)
		assert_true(opsym_has_tensor_arg(with[i]));
	for (size_t i = 0; i < sizeof(without) / sizeof(*without); i++)
		assert_false(opsym_has_tensor_arg(without[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_mangled),
		cmocka_unit_test(test_has_tensor_arg),
		cmocka_unit_test(test_parse_node),
		cmocka_unit_test(test_name_map),
		cmocka_unit_test(test_name_map_ranks),
		cmocka_unit_test(test_fake_library),
		cmocka_unit_test(test_libtorch_113),
		cmocka_unit_test(test_libtorch_2),
		cmocka_unit_test(test_libtorch_215),
		cmocka_unit_test(test_boxedop_scan),
		cmocka_unit_test(test_boxedop_libtorch),
	};
	return cmocka_run_group_tests_name("opsyms", tests, setup, teardown);
}
