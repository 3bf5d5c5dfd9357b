/* test_info.c - `tbpf info`'s readers of kernel text: the lockdown file's
 * bracketed mode, ptrace_scope values, CapEff bits, CUDA version numbers
 * (inputs as the kernel and the CUDA driver write them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include "cmd_info.h"

static void test_lockdown(void **state)
{
	assert_string_equal(info_lockdown_mode("[none] integrity confidentiality"), "none");
	assert_string_equal(info_lockdown_mode("none integrity [confidentiality]\n"),
			    "confidentiality");
	assert_null(info_lockdown_mode("none integrity confidentiality"));
	assert_null(info_lockdown_mode("[] x"));
	assert_null(info_lockdown_mode("[an overly long mode name that does not fit]"));
}

static void test_ptrace_scope(void **state)
{
	assert_non_null(strstr(info_ptrace_scope(0), "classic"));
	assert_non_null(strstr(info_ptrace_scope(2), "CAP_SYS_PTRACE"));
	assert_non_null(strstr(info_ptrace_scope(3), "no attach"));
	assert_string_equal(info_ptrace_scope(7), "unknown value");
}

static void test_caps(void **state)
{
	char buf[128];

	/* root's full set (CapEff 000001ffffffffff on 6.x) */
	assert_string_equal(info_caps(0x1ffffffffffULL, buf, sizeof(buf)),
			    "all needed (CAP_BPF CAP_PERFMON CAP_SYS_PTRACE)");
	assert_string_equal(info_caps(0, buf, sizeof(buf)),
			    "missing CAP_BPF CAP_PERFMON CAP_SYS_PTRACE");
	/* CAP_BPF and CAP_PERFMON only, as a minimal unit might grant */
	assert_string_equal(info_caps(3ULL << 38, buf, sizeof(buf)), "missing CAP_SYS_PTRACE");
}

static void test_cuda_version(void **state)
{
	char buf[16];

	assert_string_equal(info_cuda_version(12040, buf, sizeof(buf)), "12.4");
	assert_string_equal(info_cuda_version(13000, buf, sizeof(buf)), "13.0");
	assert_string_equal(info_cuda_version(11080, buf, sizeof(buf)), "11.8");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lockdown),
		cmocka_unit_test(test_ptrace_scope),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_cuda_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
