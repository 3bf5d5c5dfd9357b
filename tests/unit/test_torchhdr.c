/* test_torchhdr.c - discover/torchhdr and attach/torch_builds: the header
 * fingerprint of a small tree made here (a changed byte changes the hash
 * of exactly its file's part, FNV-1a's published test vector), and every
 * torch header tree installed on this machine (Debian's libtorch-dev, the
 * test venvs' wheels) matched to its own version's verified build: the
 * build whose layouts rf_layout.sh compiled against that same tree. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <glob.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "torchhdr.h"
#include "torch_builds.h"

static void fnv_vector(void **state)
{
	(void)state;
	/* FNV-1a 64 of "a" and "foobar" (Fowler/Noll/Vo's test vectors) */
	assert_int_equal(torchhdr_fnv(TORCHHDR_FNV_INIT, "a", 1), 0xaf63dc4c8601ec8cull);
	assert_int_equal(torchhdr_fnv(TORCHHDR_FNV_INIT, "foobar", 6), 0x85944171f73967e8ull);
}

static void write_file(const char *dir, const char *rel, const char *text)
{
	char *p = tu_printf("%s/%s", dir, rel), *cmd = tu_printf("mkdir -p \"$(dirname '%s')\"", p);
	FILE *f;

	assert_int_equal(system(cmd), 0);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	free(cmd);
	free(p);
}

static void small_tree(void **state)
{
	char *d = tu_mkdtemp();
	struct torchhdr_fp a, b;

	(void)state;
	assert_int_equal(torchhdr_fingerprint(d, &a), -ENOENT);   /* no headers */
	for (int i = 0; i < TORCHHDR_NKEY; i++)
		write_file(d, torchhdr_keys[i], torchhdr_keys[i]);
	write_file(d, "c10/util/Other.h", "struct other { int x; };\n");
	write_file(d, "ATen/core/More.h", "struct more;\n");
	assert_int_equal(torchhdr_fingerprint(d, &a), 0);
	assert_int_equal(torchhdr_fingerprint(d, &b), 0);
	assert_int_equal(torchhdr_first_diff(&a, &b), -1);
	/* a key header changed: that key */
	write_file(d, "c10/core/TensorImpl.h", "c10/core/TensorImpl.h ");
	assert_int_equal(torchhdr_fingerprint(d, &b), 0);
	assert_string_equal(torchhdr_keys[torchhdr_first_diff(&a, &b)], "c10/core/TensorImpl.h");
	write_file(d, "c10/core/TensorImpl.h", "c10/core/TensorImpl.h");
	/* another header changed, added or renamed: the rest */
	write_file(d, "c10/util/Other.h", "struct other { long x; };\n");
	assert_int_equal(torchhdr_fingerprint(d, &b), 0);
	assert_int_equal(torchhdr_first_diff(&a, &b), TORCHHDR_NKEY);
	write_file(d, "c10/util/Other.h", "struct other { int x; };\n");
	write_file(d, "ATen/core/Added.h", "");
	assert_int_equal(torchhdr_fingerprint(d, &b), 0);
	assert_int_equal(torchhdr_first_diff(&a, &b), TORCHHDR_NKEY);
	/* headers outside c10/ and ATen/core/ do not count */
	write_file(d, "ATen/core/Added.h", "");
	write_file(d, "torch/csrc/api/x.h", "x");
	assert_int_equal(torchhdr_fingerprint(d, &a), 0);
	write_file(d, "torch/csrc/api/x.h", "y");
	assert_int_equal(torchhdr_fingerprint(d, &b), 0);
	assert_int_equal(torchhdr_first_diff(&a, &b), -1);
	assert_int_equal(tu_sh("rm -rf %s", d), 0);
	free(d);
}

/* The version a header tree declares: TORCH_VERSION_MAJOR and _MINOR in
 * its version.h (torch/csrc/api/include/torch/ up to 2.8, then
 * torch/headeronly/), as "M.m.0". */
static char *tree_version(const char *inc)
{
	static const char *const at[] = { "torch/csrc/api/include/torch/version.h",
					  "torch/headeronly/version.h" };
	int major = -1, minor = -1;

	for (size_t i = 0; i < 2 && minor < 0; i++) {
		char *p = tu_printf("%s/%s", inc, at[i]), line[512];
		FILE *f = fopen(p, "r");

		free(p);
		while (f && fgets(line, sizeof(line), f)) {
			sscanf(line, "#define TORCH_VERSION_MAJOR %d", &major);
			sscanf(line, "#define TORCH_VERSION_MINOR %d", &minor);
		}
		if (f)
			fclose(f);
	}
	return major < 0 || minor < 0 ? NULL : tu_printf("%d.%d.0", major, minor);
}

static void check_tree(const char *inc, int *n)
{
	struct torchhdr_fp fp;
	const struct torch_build *byv, *byh;
	char *v;

	if (torchhdr_fingerprint(inc, &fp))
		return;
	v = tree_version(inc);
	assert_non_null(v);
	byv = torch_build_by_version(v);
	byh = torch_build_by_headers(&fp, v, NULL);
	if (!byv || byh != byv) {
		print_message("%s (torch %s) matches no verified build; its fingerprint:\n"
			      "{ .key = {", inc, v);
		for (int i = 0; i < TORCHHDR_NKEY; i++)
			print_message(" 0x%016llxull,", (unsigned long long)fp.key[i]);
		print_message(" }, .rest = 0x%016llxull }\n", (unsigned long long)fp.rest);
		fail();
	}
	print_message("%s: torch %s, the build verified as %s\n", inc, v, byh->label);
	free(v);
	(*n)++;
}

static void installed_trees(void **state)
{
	glob_t g;
	int n = 0;

	(void)state;
	check_tree("/usr/include", &n);
	if (!glob("/var/cache/tbpf/venv-torch2*/lib/python3*/site-packages/torch/include", 0, NULL, &g)) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			check_tree(g.gl_pathv[i], &n);
		globfree(&g);
	}
	if (!n)
		skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fnv_vector),
		cmocka_unit_test(small_tree),
		cmocka_unit_test(installed_trees),
	};
	return cmocka_run_group_tests_name("torchhdr", tests, NULL, NULL);
}
