/* test_guard.c - which return slots the unwind guard writes back. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "tbpf_abi.h"
#include "guard.h"
#include "retaddr.h"

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

/* Return mode leaves ra 0 unless a frame shares its slot; the kernel's
 * records (innermost first, as the iterator writes them) fill the rest. */
static void fill_from_kernel(void **state)
{
	struct tbpf_frame f[5] = {
		{ .sp = 0x7ffc1000, .ra = 0, .flags = OPF_HIJACKED },
		/* read at entry (shared slot): kept */
		{ .sp = 0x7ffc0f00, .ra = 0x7f0000005678, .flags = OPF_HIJACKED },
		/* not hijacked (entered before return probes): left 0 */
		{ .sp = 0x7ffc0e00, .ra = 0, .flags = 0 },
		/* chained: shares the slot of the frame below; both records
		 * carry the first frame's original address */
		{ .sp = 0x7ffc0d00, .ra = 0, .flags = OPF_HIJACKED },
		/* no record for its slot (a return the kernel already took) */
		{ .sp = 0x7ffc0c00, .ra = 0, .flags = OPF_HIJACKED | OPF_REDISPATCH },
	};
	const struct tbpf_retaddr r[] = {
		{ .tid = 7, .stack = 0x7ffc0d00, .ret = 0x7f00000011aa },
		{ .tid = 7, .stack = 0x7ffc0d00, .ret = 0x7f00000011aa },
		{ .tid = 7, .stack = 0x7ffc0f00, .ret = 0x7f0000009999 },
		{ .tid = 7, .stack = 0x7ffc1000, .ret = 0x7f0000001234 },
		{ .tid = 7, .stack = 0x7ffc0b00, .ret = 0 },
	};

	/* a failed read leaves these three unknown (not the one read at
	 * entry, not the one that was never hijacked) */
	assert_int_equal(retaddr_missing(f, 5), 3);
	assert_int_equal(retaddr_fill(f, 5, r, 5), 2);
	assert_int_equal(retaddr_missing(f, 5), 1);   /* the slot without a record */
	assert_int_equal(f[0].ra, 0x7f0000001234);
	assert_int_equal(f[1].ra, 0x7f0000005678);
	assert_int_equal(f[2].ra, 0);
	assert_int_equal(f[3].ra, 0x7f00000011aa);
	assert_int_equal(f[4].ra, 0);
	/* filled frames are then planned like ones read at entry */
	{
		uint64_t slot[5] = { TRAMP, TRAMP, TRAMP, TRAMP + 0x10, TRAMP };
		size_t out[5];

		assert_int_equal(guard_plan_repair(f, 5, slot, TRAMP, out), 3);
		assert_int_equal(out[0], 0);
		assert_int_equal(out[1], 1);
		assert_int_equal(out[2], 3);
	}
	assert_int_equal(retaddr_fill(f, 5, NULL, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(plan),
					    cmocka_unit_test(fill_from_kernel) };
	return cmocka_run_group_tests_name("guard", tests, NULL, NULL);
}
