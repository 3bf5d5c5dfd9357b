/* test_oprec.c - capture/oprec: each record type is one event kind, op
 * starts, ends and module calls decode into their fields (the shape id
 * only from the larger start layout), short or other records are no op
 * event, and the latest op start moves only on starts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>
#include "oprec.h"

static void kinds_of_the_types(void **state)
{
	static const struct { uint16_t type; enum ev_kind k; } v[] = {
		{ REC_OP_ENTER, EV_OP_ENTER }, { REC_OP_EXIT, EV_OP_EXIT },
		{ REC_PYSTACK, EV_PYSTACK }, { REC_LAUNCH, EV_LAUNCH }, { REC_MEMOP, EV_MEMOP },
		{ REC_SYNC, EV_SYNC }, { REC_ALLOC, EV_ALLOC }, { REC_GPU, EV_GPU },
		{ REC_SCOPE_NAME, EV_SCOPE_NAME }, { REC_MEM, EV_MEM }, { REC_MODCALL, EV_MODCALL },
		{ REC_SHAPE, EV_SHAPE }, { REC_UNWIND, EV_OTHER }, { 0, EV_OTHER },
		{ REC_TYPE_MAX, EV_OTHER },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct rec_hdr h = { .type = v[i].type };

		assert_int_equal(rec_kind(&h), v[i].k);
	}
	assert_int_equal(EVS_OPS, BUS_TYPE(REC_OP_ENTER) | BUS_TYPE(REC_OP_EXIT));
	assert_true(EVS_CUDA_CALLS & BUS_TYPE(REC_ALLOC));
	assert_false(EVS_CUDA_CALLS & EVS_MEM);
}

static void op_fields(void **state)
{
	struct rec_op o = { .h = { .type = REC_OP_EXIT, .size = sizeof(o), .tid = 9, .ts_ns = 500 },
			    .pid = 42, .op_id = 3, .depth = 2, .flags = OPF_INFERRED,
			    .stack_id = 11 };
	struct op_ev e;

	(void)state;
	assert_true(op_ev_decode(&o.h, sizeof(o), &e));
	assert_int_equal(e.kind, EV_OP_EXIT);
	assert_int_equal(e.pid, 42);
	assert_int_equal(e.tid, 9);
	assert_int_equal(e.ts_ns, 500);
	assert_int_equal(e.op_id, 3);
	assert_int_equal(e.depth, 2);
	assert_int_equal(e.flags, OPF_INFERRED);
	assert_int_equal(e.stack_id, 11);
	assert_int_equal(e.shape_id, 0);
	o.h.type = REC_MODCALL;
	assert_true(op_ev_decode(&o.h, sizeof(o), &e));
	assert_int_equal(e.kind, EV_MODCALL);
	assert_int_equal(e.stack_id, 11);
}

static void shape_id_from_the_larger_start(void **state)
{
	struct rec_op_shape s = { .op = { .h = { .type = REC_OP_ENTER, .size = sizeof(s) },
					  .op_id = 4 },
				  .shape_id = 0x1234 };
	struct op_ev e;

	(void)state;
	assert_true(op_ev_decode(&s.op.h, sizeof(s), &e));
	assert_int_equal(e.kind, EV_OP_ENTER);
	assert_int_equal(e.shape_id, 0x1234);
	/* a plain op record: no shape, whatever follows it */
	assert_true(op_ev_decode(&s.op.h, sizeof(s.op), &e));
	assert_int_equal(e.shape_id, 0);
	/* an end never has one */
	s.op.h.type = REC_OP_EXIT;
	assert_true(op_ev_decode(&s.op.h, sizeof(s), &e));
	assert_int_equal(e.shape_id, 0);
}

static void short_and_other_records(void **state)
{
	struct rec_op o = { .h = { .type = REC_OP_ENTER, .size = sizeof(o) }, .op_id = 1 };
	struct op_ev e;

	(void)state;
	assert_false(op_ev_decode(&o.h, sizeof(o) - 1, &e));
	assert_int_equal(e.kind, EV_OTHER);
	o.h.type = REC_LAUNCH;
	assert_false(op_ev_decode(&o.h, sizeof(o), &e));
	assert_int_equal(e.kind, EV_OTHER);
	assert_int_equal(e.op_id, 0);
}

static void latest_start_moves_on_starts(void **state)
{
	struct rec_hdr h = { .type = REC_OP_ENTER, .ts_ns = 100 };

	(void)state;
	assert_true(rec_is_op(&h));
	assert_true(rec_is_op_enter(&h));
	assert_int_equal(op_latest_start(50, &h), 100);
	assert_int_equal(op_latest_start(200, &h), 200);   /* an earlier start: kept */
	h.type = REC_OP_EXIT;
	assert_true(rec_is_op(&h));
	assert_false(rec_is_op_enter(&h));
	assert_int_equal(op_latest_start(50, &h), 50);
	h.type = REC_LAUNCH;
	assert_false(rec_is_op(&h));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kinds_of_the_types),
		cmocka_unit_test(op_fields),
		cmocka_unit_test(shape_id_from_the_larger_start),
		cmocka_unit_test(short_and_other_records),
		cmocka_unit_test(latest_start_moves_on_starts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
