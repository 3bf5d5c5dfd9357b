/* test_elfsym.c - unit tests of the symbols stage (elfsym, demangle,
 * procmaps address translation) on small libraries built here with gcc,
 * ld.bfd and ld.lld in several layouts, loaded with dlopen, and checked
 * against the loaded code bytes, dlsym/dlvsym, nm, readelf and c++filt. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "libs/testutil.h"
#include "demangle.h"
#include "elfsym.h"
#include "procmaps.h"

struct variant {
	const char *tag;
	const char *flags;  /* extra gcc flags */
	bool strip;         /* strip --strip-all: only .dynsym left */
	bool text_moved;    /* text PT_LOAD must have p_vaddr != p_offset */
	bool need_lld;
};

static const struct variant variants[] = {
	{ "bfd", "", false, false, false },
	{ "separate", "-Wl,-z,separate-code", false, false, false },
	{ "noseparate", "-Wl,-z,noseparate-code", false, false, false },
	{ "lld", "-fuse-ld=lld", false, true, true },
	{ "textseg", "-Wl,-Ttext-segment=0x10000000", false, true, false },
	{ "stripped", "", true, false, false },
	{ "lld-stripped", "-fuse-ld=lld", true, true, true },
};
#define NVAR (sizeof(variants) / sizeof(variants[0]))

static char *tmpdir, *libsdir;
static char *built[NVAR];
static bool have_lld;

static int setup(void **state)
{
	libsdir = tu_libs_dir();
	tmpdir = tu_mkdtemp();
	if (!libsdir || !tmpdir)
		return -1;
	have_lld = tu_sh("command -v ld.lld >/dev/null 2>&1") == 0;
	for (size_t i = 0; i < NVAR; i++) {
		const struct variant *v = &variants[i];
		if (v->need_lld && !have_lld)
			continue;
		char *out = tu_printf("%s/libsym-%s.so", tmpdir, v->tag);
		if (tu_sh("gcc -shared -fPIC -O2 -g %s -o '%s' '%s/symlib.c' "
			  "-Wl,--version-script='%s/symlib.map'",
			  v->flags, out, libsdir, libsdir) ||
		    (v->strip && tu_sh("strip --strip-all '%s'", out))) {
			fprintf(stderr, "building %s failed\n", out);
			free(out);
			return -1;
		}
		built[i] = out;
	}
	return 0;
}

static int teardown(void **state)
{
	for (size_t i = 0; i < NVAR; i++)
		free(built[i]);
	tu_rmdir(tmpdir);
	free(tmpdir);
	free(libsdir);
	return 0;
}

static void read_file_at(const char *path, uint64_t off, void *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, n, (off_t)off), (ssize_t)n);
	close(fd);
}

/* The bytes at the symbol's file offset equal the loaded code. */
static void check_bytes(const char *path, const struct elf_sym *s, const void *loaded)
{
	unsigned char fb[16];
	size_t n = s->size < sizeof(fb) ? s->size : sizeof(fb);

	assert_true(n >= 4);
	read_file_at(path, s->file_off, fb, n);
	assert_memory_equal(fb, loaded, n);
}

/* Text PT_LOAD (R E) as readelf prints it: p_offset, p_vaddr. */
static void readelf_text_load(const char *path, uint64_t *off, uint64_t *vaddr)
{
	char *out = tu_capture("readelf -lW '%s'", path);
	assert_non_null(out);
	bool found = false;
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		unsigned long long o, va, pa, fs, ms;
		char f1[8], f2[8] = "";
		if (sscanf(l, " LOAD 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx %7s %7s", &o, &va, &pa,
			   &fs, &ms, f1, f2) >= 6 && (strchr(f1, 'E') || strchr(f2, 'E'))) {
			*off = o;
			*vaddr = va;
			found = true;
		}
	}
	free(out);
	assert_true(found);
}

static const char *const exported[] = { "sym_alpha", "sym_beta", "sym_gamma",
	"sym_local_helper_addr", "sym_local_other_addr", "sym_strings" };

static void test_offsets_and_symbolize(void **state)
{
	for (size_t i = 0; i < NVAR; i++) {
		const struct variant *v = &variants[i];
		const char *path = built[i];
		struct elf_file *ef;
		struct elf_sym s;

		if (!path) {
			fprintf(stderr, "  [%s] skipped: ld.lld not installed\n", v->tag);
			continue;
		}
		uint64_t toff, tva;
		readelf_text_load(path, &toff, &tva);
		if (v->text_moved)
			assert_true(toff != tva);
		fprintf(stderr, "  [%s] text PT_LOAD offset 0x%llx vaddr 0x%llx%s\n", v->tag,
			(unsigned long long)toff, (unsigned long long)tva,
			v->strip ? ", stripped" : "");

		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		assert_non_null(h);
		assert_int_equal(elf_file_open(path, &ef), 0);

		struct pm_maps maps;
		assert_int_equal(procmaps_read(getpid(), &maps), 0);

		for (size_t k = 0; k < sizeof(exported) / sizeof(exported[0]); k++) {
			void *addr = dlsym(h, exported[k]);
			assert_non_null(addr);
			assert_int_equal(elf_file_find_sym(ef, exported[k], &s), 0);
			assert_true(s.dynamic);
			assert_true(s.defined);
			assert_int_equal(s.type, STT_FUNC);
			assert_string_equal(s.version, "VERS_2");
			check_bytes(path, &s, addr);
			uint64_t off2;
			assert_int_equal(elf_file_vaddr_to_off(ef, s.value, &off2), 0);
			assert_int_equal(off2, s.file_off);

			/* runtime address -> maps -> ELF vaddr -> symbol */
			const struct pm_entry *e = procmaps_find(&maps, (uint64_t)addr + 3);
			assert_non_null(e);
			assert_non_null(e->path);
			assert_string_equal(e->path, path);
			assert_true(e->prot & PROT_EXEC);
			uint64_t va, in;
			const char *name;
			assert_int_equal(procmaps_addr_to_elf_vaddr(e, ef, (uint64_t)addr + 3, &va), 0);
			assert_int_equal(va, s.value + 3);
			assert_int_equal(elf_file_symbolize(ef, va, &name, &in), 0);
			assert_string_equal(name, exported[k]);
			assert_int_equal(in, 3);
			/* and back: file offset -> runtime address */
			uint64_t back;
			assert_int_equal(procmaps_file_off_to_addr(e, s.file_off, &back), 0);
			assert_int_equal(back, (uint64_t)addr);
		}

		/* Local (static) functions: .symtab only. */
		void *(*get_helper)(void) = (void *(*)(void))dlsym(h, "sym_local_helper_addr");
		void *(*get_other)(void) = (void *(*)(void))dlsym(h, "sym_local_other_addr");
		const char *locals[] = { "local_helper", "local_other" };
		void *laddr[] = { get_helper(), get_other() };
		for (int k = 0; k < 2; k++) {
			const struct pm_entry *e = procmaps_find(&maps, (uint64_t)laddr[k]);
			uint64_t va, in;
			const char *name = NULL;
			assert_non_null(e);
			assert_int_equal(procmaps_addr_to_elf_vaddr(e, ef, (uint64_t)laddr[k] + 1, &va), 0);
			int r = elf_file_symbolize(ef, va, &name, &in);
			if (v->strip) {
				assert_int_equal(elf_file_find_sym(ef, locals[k], &s), -ENOENT);
				assert_true(r == -ENOENT || strcmp(name, locals[k]));
				continue;
			}
			assert_int_equal(r, 0);
			assert_string_equal(name, locals[k]);
			assert_int_equal(in, 1);
			assert_int_equal(elf_file_find_sym(ef, locals[k], &s), 0);
			assert_false(s.dynamic);
			assert_int_equal(s.bind, STB_LOCAL);
			check_bytes(path, &s, laddr[k]);
		}

		/* Versioned dynsym: default @@VERS_2, hidden @VERS_1. */
		void *v2 = dlsym(h, "ver_fn");
		void *v1 = dlvsym(h, "ver_fn", "VERS_1");
		assert_non_null(v1);
		assert_non_null(v2);
		assert_ptr_not_equal(v1, v2);
		assert_int_equal(elf_file_find_sym(ef, "ver_fn", &s), 0);
		assert_string_equal(s.version, "VERS_2");
		assert_false(s.version_hidden);
		check_bytes(path, &s, v2);
		assert_int_equal(elf_file_find_sym(ef, "ver_fn@@VERS_2", &s), 0);
		check_bytes(path, &s, v2);
		assert_int_equal(elf_file_find_sym(ef, "ver_fn@VERS_1", &s), 0);
		assert_true(s.version_hidden);
		assert_string_equal(s.version, "VERS_1");
		check_bytes(path, &s, v1);
		assert_int_equal(elf_file_find_sym(ef, "ver_fn@VERS_3", &s), -ENOENT);
		assert_int_equal(elf_file_find_sym(ef, "ver_fn@@VERS_1", &s), -ENOENT);
		assert_int_equal(elf_file_find_sym(ef, "no_such_symbol", &s), -ENOENT);

		procmaps_free(&maps);
		elf_file_close(ef);
		dlclose(h);
	}
}

struct name_list {
	char **v;
	size_t n;
};

static int collect_dyn_funcs(const struct elf_sym *s, void *ctx)
{
	struct name_list *l = ctx;
	if (!s->dynamic || !s->defined || s->type != STT_FUNC)
		return 0;
	l->v = realloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = tu_printf("%llx %s%s%s", (unsigned long long)s->value, s->name,
				 s->version ? (s->version_hidden ? "@" : "@@") : "",
				 s->version ? s->version : "");
	return 0;
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The defined dynamic functions we list equal nm -D's, versions included. */
static void test_symbols_match_nm(void **state)
{
	for (size_t i = 0; i < NVAR; i++) {
		if (!built[i])
			continue;
		struct elf_file *ef;
		struct name_list l = { 0 };
		assert_int_equal(elf_file_open(built[i], &ef), 0);
		assert_int_equal(elf_file_for_each_sym(ef, collect_dyn_funcs, &l), 0);
		qsort(l.v, l.n, sizeof(*l.v), strp_cmp);
		char *mine = NULL;
		size_t ml = 0;
		FILE *m = open_memstream(&mine, &ml);
		for (size_t k = 0; k < l.n; k++) {
			fprintf(m, "%s\n", l.v[k]);
			free(l.v[k]);
		}
		fclose(m);
		free(l.v);
		char *nm = tu_capture("nm -D --defined-only '%s' | awk '$2==\"T\" {sub(/^0+/, \"\", $1); print $1\" \"$3}' | LC_ALL=C sort",
				      built[i]);
		assert_non_null(nm);
		assert_true(l.n >= 8);
		assert_string_equal(mine, nm);
		free(nm);
		free(mine);
		elf_file_close(ef);
	}
}

struct strs {
	char *v[8];
	int n;
};

static int collect_str(const char *s, void *ctx)
{
	struct strs *st = ctx;
	if (st->n < 8)
		st->v[st->n] = strdup(s);
	st->n++;
	return 0;
}

static void test_rostrings(void **state)
{
	for (size_t i = 0; i < NVAR; i++) {
		if (!built[i])
			continue;
		struct elf_file *ef;
		struct strs st = { 0 };
		assert_int_equal(elf_file_open(built[i], &ef), 0);
		assert_int_equal(elf_file_for_each_rostring(ef, "tbpfmark:", collect_str, &st), 0);
		assert_int_equal(st.n, 2);
		qsort(st.v, 2, sizeof(char *), strp_cmp);
		assert_string_equal(st.v[0], "tbpfmark:alpha");
		assert_string_equal(st.v[1], "tbpfmark:beta(x) -> y");
		for (int k = 0; k < st.n && k < 8; k++)
			free(st.v[k]);
		/* strings containing a needle: whole strings, each once, not
		 * the writable one */
		memset(&st, 0, sizeof(st));
		assert_int_equal(elf_file_for_each_rostring_with(ef, ") -> ", collect_str, &st), 0);
		assert_int_equal(st.n, 1);
		assert_string_equal(st.v[0], "tbpfmark:beta(x) -> y");
		free(st.v[0]);
		memset(&st, 0, sizeof(st));
		assert_int_equal(elf_file_for_each_rostring_with(ef, "mark:", collect_str, &st), 0);
		assert_int_equal(st.n, 2);
		qsort(st.v, 2, sizeof(char *), strp_cmp);
		assert_string_equal(st.v[0], "tbpfmark:alpha");
		assert_string_equal(st.v[1], "tbpfmark:beta(x) -> y");
		for (int k = 0; k < st.n && k < 8; k++)
			free(st.v[k]);
		assert_int_equal(elf_file_for_each_rostring_with(ef, "", collect_str, &st), -EINVAL);
		/* "" visits every string, the markers among them */
		memset(&st, 0, sizeof(st));
		assert_int_equal(elf_file_for_each_rostring(ef, "", collect_str, &st), 0);
		assert_true(st.n >= 2);
		for (int k = 0; k < st.n && k < 8; k++)
			free(st.v[k]);
		elf_file_close(ef);
	}
}

static void test_open_errors(void **state)
{
	struct elf_file *ef = (void *)1;
	char *txt = tu_printf("%s/symlib.map", libsdir);

	assert_int_equal(elf_file_open("/nonexistent/libx.so", &ef), -ENOENT);
	assert_null(ef);
	assert_int_equal(elf_file_open(txt, &ef), -EINVAL);
	assert_null(ef);
	free(txt);
}

static void test_demangle(void **state)
{
	char *d = tbpf_demangle("_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE");
	assert_non_null(d);
	assert_string_equal(d, "at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)");
	free(d);
	d = tbpf_demangle("_Z3fooi@@VERS_2");
	assert_non_null(d);
	assert_string_equal(d, "foo(int)");
	free(d);
	assert_null(tbpf_demangle("cudaLaunchKernel"));
	assert_null(tbpf_demangle("i"));       /* a type encoding, not a symbol */
	assert_null(tbpf_demangle("_Zinvalid"));
	assert_null(tbpf_demangle(NULL));
}

/* CUDA kernels' host-side functions in PyTorch 2.x's libtorch_cuda.so
 * (what cudaLaunchKernel gets as func: local .symtab functions) symbolize
 * to themselves and demangle as c++filt does. */
static void test_torch_cuda_stubs(void **state)
{
	const char *lib = "/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so";
	if (!tu_exists(lib)) {
		fprintf(stderr, "  skipped: %s not installed (PyTorch 2.x venv)\n", lib);
		skip();
	}
	/* independent list: local text symbols that are kernel stubs */
	char *nm = tu_capture("nm --defined-only '%s' | awk '$2==\"t\" && $3 ~ /vectorized_elementwise_kernel/ {print $1\" \"$3}' | LC_ALL=C sort -k2 | head -n 5", lib);
	assert_non_null(nm);
	struct elf_file *ef;
	assert_int_equal(elf_file_open(lib, &ef), 0);
	int n = 0;
	for (char *l = strtok(nm, "\n"); l; l = strtok(NULL, "\n")) {
		char *sp = strchr(l, ' ');
		*sp = '\0';
		uint64_t va = strtoull(l, NULL, 16);
		const char *want = sp + 1, *name;
		uint64_t in;
		assert_int_equal(elf_file_symbolize(ef, va + 2, &name, &in), 0);
		assert_string_equal(name, want);
		assert_int_equal(in, 2);
		char *d = tbpf_demangle(name);
		char *filt = tu_capture("c++filt '%s'", name);
		assert_non_null(d);
		assert_non_null(filt);
		filt[strcspn(filt, "\n")] = '\0';
		assert_string_equal(d, filt);
		static const char kpfx[] = "void at::native::vectorized_elementwise_kernel<";
		assert_true(!strncmp(d, kpfx, sizeof(kpfx) - 1));
		if (n < 3)
			fprintf(stderr, "  kernel 0x%llx -> %.110s...\n", (unsigned long long)va, d);
		free(d);
		free(filt);
		n++;
	}
	assert_int_equal(n, 5);
	free(nm);
	elf_file_close(ef);
}

/* libcudart copies: the versioned launch entry points resolve. */
static void test_cudart_versioned(void **state)
{
	const char *libs[] = {
		"/usr/local/cuda/lib64/libcudart.so.13",
		"/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
	};
	int seen = 0;
	for (size_t i = 0; i < 2; i++) {
		if (!tu_exists(libs[i])) {
			fprintf(stderr, "  skipped %s: not installed\n", libs[i]);
			continue;
		}
		seen++;
		struct elf_file *ef;
		struct elf_sym s;
		assert_int_equal(elf_file_open(libs[i], &ef), 0);
		assert_int_equal(elf_file_find_sym(ef, "cudaLaunchKernel", &s), 0);
		assert_non_null(s.version);
		char *want = tu_capture("nm -D --defined-only '%s' | awk '$3 ~ /^cudaLaunchKernel@@/ {print $1\" \"$3}'", libs[i]);
		char *got = tu_printf("%016llx cudaLaunchKernel@@%s\n", (unsigned long long)s.value, s.version);
		assert_string_equal(got, want);
		fprintf(stderr, "  %s: %s", libs[i], got);
		free(want);
		free(got);
		elf_file_close(ef);
	}
	if (!seen)
		skip();
}

/* pm_symbolizer on this process: a library loaded after the symbolizer
 * read the maps, and a deleted one (read through map_files). */
static void test_symbolizer_live(void **state)
{
	struct pm_symbolizer *sz;
	const char *name, *path;
	uint64_t in;

	assert_int_equal(pm_symbolizer_new(getpid(), &sz), 0);
	/* loaded later */
	void *h = dlopen(built[0], RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	void *beta = dlsym(h, "sym_beta");
	assert_int_equal(pm_symbolize(sz, (uint64_t)beta + 2, &name, &in, &path), 0);
	assert_string_equal(name, "sym_beta");
	assert_int_equal(in, 2);
	assert_string_equal(path, built[0]);
	void *(*get)(void) = (void *(*)(void))dlsym(h, "sym_local_other_addr");
	assert_int_equal(pm_symbolize(sz, (uint64_t)get(), &name, &in, NULL), 0);
	assert_string_equal(name, "local_other");
	assert_int_equal(in, 0);
	/* not a file mapping: the stack */
	int local;
	assert_int_equal(pm_symbolize(sz, (uint64_t)&local, &name, &in, NULL), -ENOENT);

	/* deleted after loading */
	char *copy = tu_printf("%s/libsym-deleted.so", tmpdir);
	assert_int_equal(tu_sh("cp '%s' '%s'", built[0], copy), 0);
	void *h2 = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h2);
	assert_int_equal(unlink(copy), 0);
	void *gamma = dlsym(h2, "sym_gamma");
	assert_int_equal(pm_symbolize(sz, (uint64_t)gamma + 1, &name, &in, &path), 0);
	assert_string_equal(name, "sym_gamma");
	assert_string_equal(path, copy);
	struct pm_maps m;
	assert_int_equal(procmaps_read(getpid(), &m), 0);
	const struct pm_entry *e = procmaps_find(&m, (uint64_t)gamma);
	assert_non_null(e);
	assert_true(e->flags & PM_DELETED);
	procmaps_free(&m);
	dlclose(h2);
	dlclose(h);
	pm_symbolizer_free(sz);
	free(copy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offsets_and_symbolize),
		cmocka_unit_test(test_symbols_match_nm),
		cmocka_unit_test(test_rostrings),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_torch_cuda_stubs),
		cmocka_unit_test(test_cudart_versioned),
		cmocka_unit_test(test_symbolizer_live),
	};
	return cmocka_run_group_tests_name("elfsym", tests, setup, teardown);
}
