/* test_cudarec.c - capture/cudarec: each host CUDA and allocator record
 * decodes into its event's fields, its host time taken only where the
 * record version measured it (launches and allocs of the sizes before
 * return timing, asynchronous copies without MEMOP_TIMED: untimed), and
 * any other or short record is no event. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>
#include "cudarec.h"

static void launch_fields_and_versions(void **state)
{
	struct rec_launch l = { .h = { .type = REC_LAUNCH, .size = sizeof(l), .tid = 7, .ts_ns = 1000 },
				.pid = 42, .api = CU_cudaLaunchKernel, .func = 0xabc, .stream = 3,
				.grid = { 4, 5, 6 }, .block = { 32, 1, 1 }, .shmem = 128, .dur_ns = 250 };
	struct cuda_ev e;

	(void)state;
	assert_true(cuda_ev_decode(&l.h, &e));
	assert_int_equal(e.kind, CEV_LAUNCH);
	assert_int_equal(e.pid, 42);
	assert_int_equal(e.tid, 7);
	assert_int_equal(e.ts_ns, 1000);
	assert_int_equal(e.api, CU_cudaLaunchKernel);
	assert_int_equal(e.func, 0xabc);
	assert_int_equal(e.stream, 3);
	assert_int_equal(e.grid[2], 6);
	assert_int_equal(e.block[0], 32);
	assert_int_equal(e.shmem, 128);
	assert_true(e.timed);
	assert_int_equal(e.host_ns, 250);
	/* a record written before return timing: no host time */
	l.h.size = REC_LAUNCH_V1_SIZE;
	assert_true(cuda_ev_decode(&l.h, &e));
	assert_false(e.timed);
	assert_int_equal(e.host_ns, 0);
}

static void copies_timed_when_measured(void **state)
{
	struct rec_memop m = { .h = { .type = REC_MEMOP, .size = sizeof(m), .ts_ns = 5 }, .pid = 1,
			       .api = CU_cudaMemcpyAsync, .bytes = 4096, .stream = 9, .dur_ns = 70,
			       .dir = 1 };
	struct cuda_ev e;

	(void)state;
	assert_true(cuda_ev_decode(&m.h, &e));
	assert_int_equal(e.kind, CEV_MEMOP);
	assert_int_equal(e.bytes, 4096);
	assert_int_equal(e.dir, 1);
	assert_false(e.timed);             /* asynchronous, not flagged */
	assert_int_equal(e.host_ns, 70);   /* as recorded: the exporters' slice */
	m.flags = MEMOP_TIMED;
	assert_true(cuda_ev_decode(&m.h, &e));
	assert_true(e.timed);
	m.flags = 0;
	m.api = CU_cudaMemcpy;             /* synchronous: timed before the flag too */
	assert_true(cuda_ev_decode(&m.h, &e));
	assert_true(e.timed);
}

static void sync_alloc_mem(void **state)
{
	struct rec_sync s = { .h = { .type = REC_SYNC, .size = sizeof(s) }, .pid = 2, .api = 1,
			      .dur_ns = 900, .handle = 0x55 };
	struct rec_alloc a = { .h = { .type = REC_ALLOC, .size = sizeof(a) }, .pid = 3,
			       .api = CU_cudaMalloc, .ptr = 0x1000, .bytes = 64, .dur_ns = 0 };
	struct rec_mem m = { .h = { .type = REC_MEM, .size = sizeof(m) }, .pid = 4, .dev_type = 1,
			     .dev_index = 0, .ptr = 0x2000, .bytes = -512 };
	struct cuda_ev e;

	(void)state;
	assert_true(cuda_ev_decode(&s.h, &e));
	assert_int_equal(e.kind, CEV_SYNC);
	assert_int_equal(e.handle, 0x55);
	assert_true(e.timed);
	assert_int_equal(e.host_ns, 900);
	assert_true(cuda_ev_decode(&a.h, &e));
	assert_int_equal(e.kind, CEV_ALLOC);
	assert_int_equal(e.ptr, 0x1000);
	assert_int_equal(e.bytes, 64);
	assert_false(e.timed);             /* dur 0: not measured */
	assert_true(cuda_ev_decode(&m.h, &e));
	assert_int_equal(e.kind, CEV_MEM);
	assert_int_equal(e.pid, 4);
	assert_int_equal(e.mem_bytes, -512);
	assert_int_equal(e.dev_type, 1);
	m.h.size = sizeof(m) - 8;          /* short: no event */
	assert_false(cuda_ev_decode(&m.h, &e));
	assert_int_equal(e.kind, CEV_NONE);
}

static void op_and_stack_of_each_call(void **state)
{
	struct rec_launch l = { .h = { .type = REC_LAUNCH, .size = sizeof(l) }, .op_id = 5,
				.stack_id = 77 };
	struct rec_memop m = { .h = { .type = REC_MEMOP, .size = sizeof(m) }, .op_id = 6,
			       .stack_id = 78 };
	struct rec_sync s = { .h = { .type = REC_SYNC, .size = sizeof(s) }, .op_id = 7,
			      .stack_id = 79 };
	struct rec_alloc a = { .h = { .type = REC_ALLOC, .size = sizeof(a) }, .op_id = 0,
			       .stack_id = 80 };
	struct cuda_ev e;

	(void)state;
	assert_true(cuda_ev_decode(&l.h, &e));
	assert_int_equal(e.op_id, 5);
	assert_int_equal(e.stack_id, 77);
	assert_true(cuda_ev_decode(&m.h, &e));
	assert_int_equal(e.op_id, 6);
	assert_int_equal(e.stack_id, 78);
	assert_true(cuda_ev_decode(&s.h, &e));
	assert_int_equal(e.op_id, 7);
	assert_int_equal(e.stack_id, 79);
	/* no op: no stack either (the rows key on both) */
	assert_true(cuda_ev_decode(&a.h, &e));
	assert_int_equal(e.op_id, 0);
	assert_int_equal(e.stack_id, 0);
}

static void min_sizes_of_the_versions(void **state)
{
	struct rec_hdr h = { 0 };

	(void)state;
	h.type = REC_LAUNCH;
	assert_int_equal(cuda_rec_min_size(&h), REC_LAUNCH_V1_SIZE);
	h.type = REC_ALLOC;
	assert_int_equal(cuda_rec_min_size(&h), REC_ALLOC_V1_SIZE);
	h.type = REC_MEMOP;
	assert_int_equal(cuda_rec_min_size(&h), sizeof(struct rec_memop));
	h.type = REC_SYNC;
	assert_int_equal(cuda_rec_min_size(&h), sizeof(struct rec_sync));
	h.type = REC_MEM;            /* an allocator event, not a CUDA call */
	assert_int_equal(cuda_rec_min_size(&h), 0);
	h.type = REC_OP_ENTER;
	assert_int_equal(cuda_rec_min_size(&h), 0);
}

static void other_records_are_none(void **state)
{
	struct rec_op o = { .h = { .type = REC_OP_ENTER, .size = sizeof(o) } };
	struct cuda_ev e;

	(void)state;
	assert_false(cuda_ev_decode(&o.h, &e));
	assert_int_equal(e.kind, CEV_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(launch_fields_and_versions),
		cmocka_unit_test(copies_timed_when_measured),
		cmocka_unit_test(sync_alloc_mem),
		cmocka_unit_test(op_and_stack_of_each_call),
		cmocka_unit_test(min_sizes_of_the_versions),
		cmocka_unit_test(other_records_are_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
