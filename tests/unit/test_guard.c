/* test_guard.c - which return slots the unwind guard writes back. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "tbpf_abi.h"
#include "guard.h"

#define TRAMP 0x7fffffffe000ULL

static void plan(void **state)
{
	struct tbpf_frame f[5] = {
		/* hijacked, slot still holds the trampoline: fix */
		{ .sp = 0x7ffc1000, .ra = 0x7f0000001234, .flags = OPF_HIJACKED },
		/* hijacked but already returned or repaired: leave */
		{ .sp = 0x7ffc0f00, .ra = 0x7f0000005678, .flags = OPF_HIJACKED },
		/* entered before return probes existed: never hijacked */
		{ .sp = 0x7ffc0e00, .ra = 0, .flags = 0 },
		/* chained (tail call) frame whose recorded ra is the trampoline */
		{ .sp = 0x7ffc0d00, .ra = TRAMP, .flags = OPF_HIJACKED },
		/* another live hijack */
		{ .sp = 0x7ffc0c00, .ra = 0x7f00000099aa, .flags = OPF_HIJACKED | OPF_REDISPATCH },
	};
	uint64_t slot[5] = { TRAMP, 0x7f0000005678, TRAMP, TRAMP, TRAMP + 0 };
	size_t out[5];
	size_t n = guard_plan_repair(f, 5, slot, TRAMP, out);

	assert_int_equal(n, 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 4);
	assert_int_equal(guard_plan_repair(f, 0, slot, TRAMP, out), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(plan) };
	return cmocka_run_group_tests_name("guard", tests, NULL, NULL);
}
