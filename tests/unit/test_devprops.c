/* test_devprops.c - Kineto's "deviceProperties" from a fixture:
 * the member's keys in Kineto's order (libkineto's
 * createDevicePropertiesJson with CUPTI) and values, read back by python's
 * json module; and the device query where there is no GPU (none here): no
 * libcuda.so.1, or the toolkit's stub libcuda whose cuInit fails, gives no
 * devices and no member.  With a GPU the query itself was never run here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "devprops.h"
#include "gpudev.h"

/* an A100-SXM4-40GB as cudaGetDeviceProperties reports it */
static const struct export_devprop a100 = {
	.id = 0, .name = "NVIDIA A100-SXM4-40GB", .total_global_mem = 42505273344ULL,
	.compute_major = 8, .compute_minor = 0, .max_threads_per_block = 1024,
	.max_threads_per_sm = 2048, .regs_per_block = 65536, .warp_size = 32,
	.shared_mem_per_block = 49152, .num_sms = 108, .regs_per_sm = 65536,
	.shared_mem_per_block_optin = 166912, .shared_mem_per_sm = 167936,
};

static char *render(const struct export_devprop *v, size_t n)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);

	assert_non_null(f);
	fputs("{\"schemaVersion\": 1", f);
	devprops_json(f, v, n);
	fputs("}\n", f);
	fclose(f);
	return s;
}

static void test_kineto_keys(void **state)
{
	struct export_devprop v[2] = { a100, a100 };
	char *s, *dir, *path, *cmd;
	FILE *f;

	v[1].id = 1;
	strcpy(v[1].name, "GPU \"quoted\"");
	s = render(v, 2);
	dir = tu_printf("/tmp/test_devprops.XXXXXX");
	assert_non_null(mkdtemp(dir));
	path = tu_printf("%s/t.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(s, f);
	fclose(f);
	cmd = tu_printf("python3 -c '\n"
		"import json\n"
		"j = json.load(open(\"%s\"))\n"
		"d = j[\"deviceProperties\"]\n"
		"keys = [\"id\", \"name\", \"totalGlobalMem\", \"computeMajor\", \"computeMinor\",\n"
		"        \"maxThreadsPerBlock\", \"maxThreadsPerMultiprocessor\", \"regsPerBlock\",\n"
		"        \"warpSize\", \"sharedMemPerBlock\", \"numSms\", \"regsPerMultiprocessor\",\n"
		"        \"sharedMemPerBlockOptin\", \"sharedMemPerMultiprocessor\"]\n"
		"assert [list(x) for x in d] == [keys, keys], d\n"
		"assert d[0] == {\"id\": 0, \"name\": \"NVIDIA A100-SXM4-40GB\", \"totalGlobalMem\": 42505273344,\n"
		"  \"computeMajor\": 8, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024,\n"
		"  \"maxThreadsPerMultiprocessor\": 2048, \"regsPerBlock\": 65536, \"warpSize\": 32,\n"
		"  \"sharedMemPerBlock\": 49152, \"numSms\": 108, \"regsPerMultiprocessor\": 65536,\n"
		"  \"sharedMemPerBlockOptin\": 166912, \"sharedMemPerMultiprocessor\": 167936}, d[0]\n"
		"assert d[1][\"id\"] == 1 and d[1][\"name\"] == \"GPU \\\"quoted\\\"\", d[1]\n"
		"'", path);
	assert_int_equal(system(cmd), 0);
	unlink(path);
	rmdir(dir);
	free(cmd);
	free(path);
	free(dir);
	free(s);
	s = render(NULL, 0);   /* no GPU: no member */
	assert_string_equal(s, "{\"schemaVersion\": 1}\n");
	free(s);
}

/* No GPU on this machine: the query finds none, whether libcuda.so.1 is
 * missing or is the toolkit's stub (cuInit fails); run in a child so the
 * loader path can be set first. */
static void test_query_no_gpu(void **state)
{
	struct export_devprop *v = (void *)1;
	size_t n = 7;

	if (getenv("TBPF_DEVPROPS_CHILD") == NULL) {
		char *root = tu_repo_path("build/tests/native/cuda/stublib/libcuda.so.1");
		char *cmd;

		if (tu_exists(root)) {
			*strrchr(root, '/') = '\0';
			cmd = tu_printf("TBPF_DEVPROPS_CHILD=1 LD_LIBRARY_PATH=%s /proc/%d/exe "
					"> /dev/null", root, (int)getpid());
			assert_int_equal(system(cmd), 0);
			free(cmd);
		}
		free(root);
	}
	assert_int_equal(gpudev_query(&v, &n), -ENOENT);
	assert_null(v);
	assert_int_equal(n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kineto_keys),
		cmocka_unit_test(test_query_no_gpu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
