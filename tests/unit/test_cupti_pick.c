/* test_cupti_pick.c - unit tests of the CUPTI agent's library choice
 * (agent/cupti_pick.h): which loaded objects are a libcupti, and the
 * order of the names tried when the process maps none. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../agent/cupti_pick.h"

static void test_is_lib(void **state)
{
	/* the wheels' and the toolkit's file names */
	assert_true(tbpf_cupti_is_lib("/venv/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12"));
	assert_true(tbpf_cupti_is_lib("/venv/site-packages/nvidia/cu13/lib/libcupti.so.13"));
	assert_true(tbpf_cupti_is_lib("/usr/local/cuda-13.0/extras/CUPTI/lib64/libcupti.so.2025.3.1"));
	assert_true(tbpf_cupti_is_lib("/opt/cuda/lib64/libcupti.so"));
	assert_true(tbpf_cupti_is_lib("libcupti.so.12"));
	/* CUPTI's siblings and look-alikes are not */
	assert_false(tbpf_cupti_is_lib("/x/libcupti_static.a"));
	assert_false(tbpf_cupti_is_lib("/x/libcupti.sox"));
	assert_false(tbpf_cupti_is_lib("/x/libnvperf_host.so"));
	assert_false(tbpf_cupti_is_lib("/x/libcheckpoint.so"));
	assert_false(tbpf_cupti_is_lib("/libcupti.so.12/libtorch.so"));
	assert_false(tbpf_cupti_is_lib(""));
	assert_false(tbpf_cupti_is_lib(NULL));
}

static size_t pick(int drv, char names[][TBPF_CUPTI_NAME_MAX], size_t max)
{
	memset(names, 0, max * TBPF_CUPTI_NAME_MAX);
	return tbpf_cupti_candidates(drv, names, max);
}

static void test_candidates(void **state)
{
	char n[8][TBPF_CUPTI_NAME_MAX];

	/* CUDA 12.8 driver: never CUPTI 13 (it does not initialize there) */
	assert_int_equal(pick(12080, n, 8), 4);
	assert_string_equal(n[0], "libcupti.so.12");
	assert_string_equal(n[1], "libcupti.so");
	assert_string_equal(n[2], "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
	assert_string_equal(n[3], "/usr/local/cuda/lib64/libcupti.so");
	/* CUDA 13 driver: its own release first, then the older one */
	assert_int_equal(pick(13000, n, 8), 5);
	assert_string_equal(n[0], "libcupti.so.13");
	assert_string_equal(n[1], "libcupti.so.12");
	assert_string_equal(n[2], "libcupti.so");
	/* a driver newer than any CUPTI here: its soname, then down */
	assert_int_equal(pick(14010, n, 8), 6);
	assert_string_equal(n[0], "libcupti.so.14");
	assert_string_equal(n[1], "libcupti.so.13");
	assert_string_equal(n[2], "libcupti.so.12");
	/* unknown driver: the oldest first, it runs on every supported driver */
	assert_int_equal(pick(0, n, 8), 5);
	assert_string_equal(n[0], "libcupti.so.12");
	assert_string_equal(n[1], "libcupti.so.13");
	/* a CUDA 11 driver: nothing the agent reads */
	assert_int_equal(pick(11080, n, 8), 0);
	/* never more than the room given */
	assert_int_equal(pick(13000, n, 2), 2);
	assert_string_equal(n[1], "libcupti.so.12");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_is_lib),
		cmocka_unit_test(test_candidates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
