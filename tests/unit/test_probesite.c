/* test_probesite.c - attach/probesite: the probe site past a function's
 * prologue, on the real first bytes of the functions tbpf probes (objdump of
 * libtorch_cpu 1.13 (Debian) and 2.8 (PyPI), libc10, libcudart 13). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "probesite.h"

/* at::RecordFunction::end(), both torches: cmpb $0x0,0x68(%rdi); je; push %r14 */
static const uint8_t rf_end[] = { 0x80, 0x7f, 0x68, 0x00, 0x74, 0x5a, 0x41, 0x56, 0x41, 0x55 };
/* torch::jit::tracer::getTracingState() 2.8: sub $8,%rsp; lea disp(%rip),%rdi; call */
static const uint8_t tracing_28[] = { 0x48, 0x83, 0xec, 0x08, 0x48, 0x8d, 0x3d, 0x1d, 0xa0, 0x97,
				      0x0e, 0xe8, 0x00, 0x00, 0x00, 0x00 };
/* the same in 1.13: a different displacement, the call to __tls_get_addr@plt */
static const uint8_t tracing_113[] = { 0x48, 0x83, 0xec, 0x08, 0x48, 0x8d, 0x3d, 0x4d, 0xd6, 0x5f,
				       0x03, 0xe8, 0x90, 0x9d, 0xbe, 0xfc };
/* at::RecordFunction::RecordFunction(RecordScope): push %rbp; push %rbx */
static const uint8_t rf_ctor[] = { 0x55, 0x53, 0x48, 0x89, 0xfb };
/* c10::ProfiledCPUMemoryReporter::New 2.8: push %r15 */
static const uint8_t mem_new[] = { 0x41, 0x57, 0x41, 0x56 };

static void entry_already_emulated(void **state)
{
	(void)state;
	assert_int_equal(probe_site_offset(rf_ctor, sizeof(rf_ctor), 0), 0);
	assert_int_equal(probe_site_offset(mem_new, sizeof(mem_new), 0), 0);
	assert_true(probe_site_emulated(rf_ctor, sizeof(rf_ctor)));
	assert_false(probe_site_emulated(rf_end, sizeof(rf_end)));
}

static void record_function_end_moves_to_jcc(void **state)
{
	(void)state;
	/* cmpb writes only the flags: rdi (this) is still the argument at the je */
	assert_int_equal(probe_site_offset(rf_end, sizeof(rf_end), 0), 4);
}

static void tracing_state_moves_to_call(void **state)
{
	(void)state;
	/* the module-call probe reads no register: sub rsp and lea rdi may go */
	assert_int_equal(probe_site_offset(tracing_28, sizeof(tracing_28), PS_RSP | PS_RDI), 11);
	assert_int_equal(probe_site_offset(tracing_113, sizeof(tracing_113), PS_RSP | PS_RDI), 11);
	/* a probe that reads rsp or rdi must stay at the entry */
	assert_int_equal(probe_site_offset(tracing_28, sizeof(tracing_28), PS_RDI), -1);
	assert_int_equal(probe_site_offset(tracing_28, sizeof(tracing_28), PS_RSP), -1);
}

static void unknown_or_truncated_stays(void **state)
{
	/* mov 0x10(%rdi),%rax: not in the table; ret; a call cut short */
	static const uint8_t unknown[] = { 0x48, 0x8b, 0x47, 0x10, 0x55 };
	static const uint8_t ret[] = { 0xc3 };
	static const uint8_t cut[] = { 0x48, 0x83, 0xec, 0x08, 0xe8, 0x00 };

	(void)state;
	assert_int_equal(probe_site_offset(unknown, sizeof(unknown), ~0u), -1);
	assert_int_equal(probe_site_offset(ret, sizeof(ret), ~0u), -1);
	assert_int_equal(probe_site_offset(cut, sizeof(cut), ~0u), -1);
	assert_int_equal(probe_site_offset(rf_end, 0, ~0u), -1);
}

static void endbr_and_movs(void **state)
{
	/* endbr64; mov %rdi,%rbx; push %rbp */
	static const uint8_t c[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xfb, 0x55 };
	/* mov %rsi,%rdi (48 89 f7) writes rdi */
	static const uint8_t d[] = { 0x48, 0x89, 0xf7, 0x55 };

	(void)state;
	assert_int_equal(probe_site_offset(c, sizeof(c), PS_RBX), 7);
	assert_int_equal(probe_site_offset(c, sizeof(c), 0), -1);
	assert_int_equal(probe_site_offset(d, sizeof(d), PS_RBX), -1);
	assert_int_equal(probe_site_offset(d, sizeof(d), PS_RDI), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(entry_already_emulated),
		cmocka_unit_test(record_function_end_moves_to_jcc),
		cmocka_unit_test(tracing_state_moves_to_call),
		cmocka_unit_test(unknown_or_truncated_stays),
		cmocka_unit_test(endbr_and_movs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
