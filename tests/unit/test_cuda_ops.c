/* test_cuda_ops.c - unit tests of the CUDA runtime call rows:
 * CUDA records -> per (pid, op, stack, api) counts in the cuda model ->
 * rows of the op table under their op, whose Self CPU loses their time.
 * Expected values by hand from the records built here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "tbpf_abi.h"
#include "cuda_model.h"
#include "cuda_ops.h"
#include "profile.h"

static struct rec_launch launch(uint32_t pid, uint32_t api, uint32_t op, uint32_t stack,
				uint64_t dur)
{
	struct rec_launch r = {
		.h = { .type = REC_LAUNCH, .size = sizeof(r), .tid = pid, .ts_ns = 1 },
		.pid = pid, .api = api, .func = 0x1100, .op_id = op, .stack_id = stack,
		.dur_ns = dur,
	};
	return r;
}

static struct rec_memop memop(uint32_t api, uint32_t op, uint32_t stack, uint64_t dur)
{
	struct rec_memop r = {
		.h = { .type = REC_MEMOP, .size = sizeof(r), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = api, .bytes = 64, .dur_ns = dur, .dir = CP_HTOD, .op_id = op,
		.stack_id = stack, .flags = MEMOP_TIMED,
	};
	return r;
}

static struct rec_sync sync_rec(uint32_t api, uint32_t op, uint64_t dur)
{
	struct rec_sync r = {
		.h = { .type = REC_SYNC, .size = sizeof(r), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = api, .dur_ns = dur, .op_id = op,
	};
	return r;
}

static struct rec_alloc alloc_rec(uint32_t api, uint32_t op, uint64_t dur)
{
	struct rec_alloc r = {
		.h = { .type = REC_ALLOC, .size = sizeof(r), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = api, .ptr = 0x10, .bytes = 8, .op_id = op, .dur_ns = dur,
	};
	return r;
}

#define ADD(m, r) do { __typeof__(r) _r = (r); \
	assert_int_equal(cuda_model_add((m), &_r, sizeof(_r)), 0); } while (0)

static const struct prof_op *row(const struct profile *p, uint32_t pid, const char *name,
				 uint64_t stack)
{
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].pid == pid && !strcmp(p->ops[i].name, name) &&
		    p->ops[i].stack_id == stack)
			return &p->ops[i];
	return NULL;
}

static void op(struct profile *p, uint32_t pid, uint32_t id, const char *name, uint64_t stack,
	       uint64_t calls, uint64_t self, uint64_t total)
{
	struct prof_op o = { .pid = pid, .op_id = id, .name = name, .overload = "",
			     .stack_id = stack, .calls = calls, .self_ns = self,
			     .total_ns = total, .max_ns = total };
	assert_int_equal(profile_add_op(p, &o), 0);
}

/* Launches, a copy, a sync and a malloc under two ops and outside any:
 * one row per (op, api), the parents' self time less their calls'. */
static void test_rows_and_self(void **state)
{
	struct cuda_model m;
	struct profile p;
	const struct prof_op *r;

	(void)state;
	cuda_model_init(&m, NULL, NULL);
	profile_init(&p);
	/* aten::mm (op 5, stack 0x1_0000_0007: a 64-bit live stack id whose
	 * low 32 bits the records carry) 2 calls, 10 us total, 10 us self */
	op(&p, 1, 5, "aten::mm", 0x100000007ull, 2, 10000, 10000);
	/* aten::copy_ (op 6, no Python) 1 call 4 us; aten::linear (op 7)
	 * above mm: its self stays */
	op(&p, 1, 6, "aten::copy_", 0, 1, 4000, 4000);
	op(&p, 1, 7, "aten::linear", 0x100000007ull, 2, 1000, 11000);
	ADD(&m, launch(1, CU_cudaLaunchKernel, 5, 7, 300));
	ADD(&m, launch(1, CU_cudaLaunchKernel, 5, 7, 500));
	ADD(&m, launch(1, CU_cudaLaunchKernel, 5, 7, 0));      /* untimed: counted */
	ADD(&m, memop(CU_cudaMemcpyAsync, 6, 0, 1500));
	ADD(&m, sync_rec(CU_cudaStreamSynchronize, 6, 2000));
	ADD(&m, alloc_rec(CU_cudaMalloc, 0, 700));             /* outside any op */
	ADD(&m, launch(1, CU_cuLaunchKernel, 5, 7, 900));      /* driver: no row */
	assert_int_equal(cuda_ops_to_profile(&p, &m), 0);

	r = row(&p, 1, "cudaLaunchKernel", 0x100000007ull);    /* in mm's layer */
	assert_non_null(r);
	assert_int_equal(r->calls, 3);
	assert_int_equal(r->self_ns, 800);
	assert_int_equal(r->total_ns, 800);
	assert_int_equal(r->max_ns, 500);
	assert_true(cuda_ops_is_row(r->op_id));
	assert_int_equal(row(&p, 1, "aten::mm", 0x100000007ull)->self_ns, 10000 - 800);
	assert_int_equal(row(&p, 1, "aten::mm", 0x100000007ull)->total_ns, 10000);
	assert_int_equal(row(&p, 1, "aten::linear", 0x100000007ull)->self_ns, 1000);

	assert_int_equal(row(&p, 1, "cudaMemcpyAsync", 0)->total_ns, 1500);
	assert_int_equal(row(&p, 1, "cudaStreamSynchronize", 0)->calls, 1);
	/* copy_: 4000 - 1500 - 2000; self + its calls = its total */
	r = row(&p, 1, "aten::copy_", 0);
	assert_int_equal(r->self_ns, 500);
	assert_int_equal(r->self_ns + row(&p, 1, "cudaMemcpyAsync", 0)->total_ns +
			 row(&p, 1, "cudaStreamSynchronize", 0)->total_ns, r->total_ns);

	r = row(&p, 1, "cudaMalloc", 0);
	assert_non_null(r);
	assert_int_equal(r->calls, 1);
	assert_int_equal(r->self_ns, 700);
	assert_null(row(&p, 1, "cuLaunchKernel", 0x100000007ull));
	assert_int_equal(p.nops, 3 + 4);

	profile_free(&p);
	cuda_model_free(&m);
}

/* Calls longer than their op's self (clock skew between the probes):
 * the parent's self stops at 0; and the same op in two processes. */
static void test_clamp_and_pids(void **state)
{
	struct cuda_model m;
	struct profile p;

	(void)state;
	cuda_model_init(&m, NULL, NULL);
	profile_init(&p);
	op(&p, 1, 5, "aten::mm", 0, 1, 100, 100);
	op(&p, 2, 5, "aten::mm", 0, 1, 1000, 1000);
	ADD(&m, launch(1, CU_cudaLaunchKernel, 5, 0, 150));
	ADD(&m, launch(2, CU_cudaLaunchKernel, 5, 0, 400));
	assert_int_equal(cuda_ops_to_profile(&p, &m), 0);
	assert_int_equal(row(&p, 1, "aten::mm", 0)->self_ns, 0);
	assert_int_equal(row(&p, 2, "aten::mm", 0)->self_ns, 600);
	assert_int_equal(row(&p, 1, "cudaLaunchKernel", 0)->total_ns, 150);
	assert_int_equal(row(&p, 2, "cudaLaunchKernel", 0)->total_ns, 400);
	/* no model: nothing to add */
	assert_int_equal(cuda_ops_to_profile(&p, NULL), 0);
	assert_int_equal(p.nops, 4);
	profile_free(&p);
	cuda_model_free(&m);
}

/* Many (op, api) pairs: the per-model index grows and keeps counting. */
static void test_many_ops(void **state)
{
	struct cuda_model m;

	(void)state;
	cuda_model_init(&m, NULL, NULL);
	for (uint32_t i = 1; i <= 1000; i++)
		for (int k = 0; k < 3; k++)
			ADD(&m, launch(1, CU_cudaLaunchKernel, i, i * 7, 10));
	assert_int_equal(m.nopapis, 1000);
	for (size_t i = 0; i < m.nopapis; i++) {
		assert_int_equal(m.opapis[i].calls, 3);
		assert_int_equal(m.opapis[i].total_ns, 30);
	}
	cuda_model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows_and_self),
		cmocka_unit_test(test_clamp_and_pids),
		cmocka_unit_test(test_many_ops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
