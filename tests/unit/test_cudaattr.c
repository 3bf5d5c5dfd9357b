/* test_cudaattr.c - CUDA host records joined to the in-process op open on
 * their thread (join/cudaattr.c, --inproc): the op on top at the call's
 * midpoint, not the last op started (a nested op that ended before the
 * call); emitted just before the thread's next op record, in its stream;
 * held across a drain that did not catch up, released once one did; no
 * op open; two threads and two processes apart; stack ids (the op's own,
 * else the outermost op's) and a launch's depth; every kind of record;
 * lost ends; the end flush. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "cudaattr.h"

/* what came out, in order: op records (passed on by the test after
 * cudaattr_op, as live_inproc.c does) and CUDA records (emitted) */
struct out {
	int type[64];
	uint32_t op[64], stack[64], depth[64], tid[64];
	uint64_t ts[64];
	size_t n;
};

static int emit(void *ctx, const struct rec_hdr *h)
{
	struct out *o = ctx;
	const struct rec_launch *l = (const void *)h;
	const struct rec_memop *m = (const void *)h;
	const struct rec_sync *s = (const void *)h;
	const struct rec_alloc *a = (const void *)h;

	assert_true(o->n < 64);
	o->type[o->n] = h->type;
	o->tid[o->n] = h->tid;
	o->ts[o->n] = h->ts_ns;
	switch (h->type) {
	case REC_LAUNCH: o->op[o->n] = l->op_id; o->stack[o->n] = l->stack_id;
			 o->depth[o->n] = l->depth; break;
	case REC_MEMOP: o->op[o->n] = m->op_id; o->stack[o->n] = m->stack_id; break;
	case REC_SYNC: o->op[o->n] = s->op_id; o->stack[o->n] = s->stack_id; break;
	case REC_ALLOC: o->op[o->n] = a->op_id; o->stack[o->n] = a->stack_id; break;
	}
	o->n++;
	return 0;
}

static void op(struct cudaattr *a, struct out *o, int type, uint32_t pid, uint32_t tid,
	       uint64_t ts, uint32_t op_id, uint16_t depth, uint32_t stack)
{
	struct rec_op r = { .h = { .type = (uint16_t)type, .size = sizeof(r), .tid = tid,
				   .ts_ns = ts },
			    .pid = pid, .op_id = op_id, .depth = depth, .stack_id = stack };

	assert_int_equal(cudaattr_op(a, &r), 0);
	o->type[o->n] = type;   /* passed on after its thread's CUDA records */
	o->op[o->n] = op_id;
	o->tid[o->n] = tid;
	o->ts[o->n] = ts;
	o->n++;
}

static void launch(struct cudaattr *a, uint32_t pid, uint32_t tid, uint64_t ts, uint64_t dur)
{
	struct rec_launch r = { .h = { .type = REC_LAUNCH, .size = sizeof(r), .tid = tid,
				       .ts_ns = ts },
				.pid = pid, .api = CU_cudaLaunchKernel, .func = 0x1000,
				.dur_ns = dur };

	assert_int_equal(cudaattr_cuda(a, &r.h, sizeof(r)), 0);
}

static size_t find(const struct out *o, int type, uint64_t ts)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->type[i] == type && o->ts[i] == ts)
			return i;
	fail_msg("record %d at %llu not emitted", type, (unsigned long long)ts);
	return 0;
}

/* lkconv(100..1000) { empty(110..150) launch(200, 20) launch(300, 20) } */
static void innermost_open(void **state)
{
	struct out o = { .n = 0 };
	struct cudaattr *a = cudaattr_new(emit, &o);
	struct cudaattr_stats st;

	cudaattr_mark(a);
	launch(a, 7, 1, 200, 20);
	launch(a, 7, 1, 300, 20);
	op(a, &o, REC_OP_ENTER, 7, 1, 100, 10, 0, 55);
	op(a, &o, REC_OP_ENTER, 7, 1, 110, 11, 1, 0);
	op(a, &o, REC_OP_EXIT, 7, 1, 150, 11, 1, 0);
	assert_int_equal(o.n, 3);   /* not yet: nothing after them seen */
	op(a, &o, REC_OP_EXIT, 7, 1, 1000, 10, 0, 0);
	assert_int_equal(o.n, 6);
	size_t l1 = find(&o, REC_LAUNCH, 200), l2 = find(&o, REC_LAUNCH, 300);
	size_t ex = find(&o, REC_OP_EXIT, 1000);

	assert_true(l1 < l2 && l2 < ex);   /* before the op's end, in its stream */
	assert_int_equal(o.op[l1], 10);    /* the open op, not empty (11) */
	assert_int_equal(o.stack[l1], 55); /* the outermost op's stack */
	assert_int_equal(o.depth[l1], 1);
	assert_int_equal(o.op[l2], 10);
	cudaattr_get_stats(a, &st);
	assert_int_equal(st.held, 2);
	assert_int_equal(st.in_op, 2);
	assert_int_equal(st.no_op, 0);
	cudaattr_free(a);
}

/* The midpoint decides: a call stamped 5 ns before the op's recorded
 * start (another clock's error) but lasting 100 ns is inside it. */
static void midpoint(void **state)
{
	struct out o = { .n = 0 };
	struct cudaattr *a = cudaattr_new(emit, &o);

	cudaattr_mark(a);
	launch(a, 7, 1, 995, 100);
	op(a, &o, REC_OP_ENTER, 7, 1, 1000, 10, 0, 0);
	op(a, &o, REC_OP_EXIT, 7, 1, 2000, 10, 0, 0);
	assert_int_equal(o.op[find(&o, REC_LAUNCH, 995)], 10);
	cudaattr_free(a);
}

/* A call whose thread wrote nothing after it waits for a drain that read
 * the ring's head after the call arrived and caught up. */
static void settled(void **state)
{
	struct out o = { .n = 0 };
	struct cudaattr *a = cudaattr_new(emit, &o);

	cudaattr_begin(a);                       /* drain 1 */
	cudaattr_mark(a);                        /* its head read */
	op(a, &o, REC_OP_ENTER, 7, 1, 100, 10, 0, 3);
	launch(a, 7, 1, 200, 10);                /* arrives after head 1 */
	assert_int_equal(cudaattr_settled(a, 7), 0);
	assert_int_equal(o.n, 1);                /* its op's enter may be past head 1 */
	cudaattr_begin(a);                       /* drain 2: after it arrived */
	cudaattr_mark(a);
	launch(a, 7, 1, 300, 10);                /* during drain 2: waits */
	assert_int_equal(cudaattr_settled(a, 8), 0);   /* another process */
	assert_int_equal(o.n, 1);
	assert_int_equal(cudaattr_settled(a, 7), 0);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.type[1], REC_LAUNCH);
	assert_int_equal(o.op[1], 10);
	assert_int_equal(o.stack[1], 3);
	cudaattr_begin(a);
	assert_int_equal(cudaattr_settled(a, 7), 0);
	assert_int_equal(o.n, 3);
	cudaattr_free(a);
}

/* Two threads, two processes: each record under its own thread's op; a
 * thread with no op open gives 0 and keeps the record's own stack. */
static void threads(void **state)
{
	struct out o = { .n = 0 };
	struct cudaattr *a = cudaattr_new(emit, &o);
	struct rec_sync s = { .h = { .type = REC_SYNC, .size = sizeof(s), .tid = 2, .ts_ns = 500 },
			      .pid = 7, .api = CU_cudaStreamSynchronize, .dur_ns = 50,
			      .stack_id = 99 };
	struct rec_memop m = { .h = { .type = REC_MEMOP, .size = sizeof(m), .tid = 1, .ts_ns = 500 },
			       .pid = 8, .api = CU_cudaMemcpyAsync, .bytes = 64,
			       .flags = MEMOP_TIMED, .dur_ns = 10 };
	struct rec_alloc al = { .h = { .type = REC_ALLOC, .size = sizeof(al), .tid = 1,
				       .ts_ns = 600 },
				.pid = 7, .api = CU_cudaMalloc, .bytes = 4096, .dur_ns = 10 };
	struct cudaattr_stats st;

	cudaattr_mark(a);
	op(a, &o, REC_OP_ENTER, 7, 1, 100, 10, 0, 0);
	op(a, &o, REC_OP_ENTER, 8, 1, 100, 20, 0, 0);   /* same tid, another pid */
	assert_int_equal(cudaattr_cuda(a, &s.h, sizeof(s)), 0);
	assert_int_equal(cudaattr_cuda(a, &m.h, sizeof(m)), 0);
	assert_int_equal(cudaattr_cuda(a, &al.h, sizeof(al)), 0);
	op(a, &o, REC_OP_EXIT, 7, 1, 1000, 10, 0, 0);
	op(a, &o, REC_OP_EXIT, 8, 1, 1000, 20, 0, 0);
	assert_int_equal(cudaattr_flush(a, UINT64_MAX), 0);
	assert_int_equal(o.op[find(&o, REC_ALLOC, 600)], 10);
	assert_int_equal(o.op[find(&o, REC_MEMOP, 500)], 20);
	size_t k = find(&o, REC_SYNC, 500);

	assert_int_equal(o.op[k], 0);
	assert_int_equal(o.stack[k], 99);
	cudaattr_get_stats(a, &st);
	assert_int_equal(st.in_op, 2);
	assert_int_equal(st.no_op, 1);
	cudaattr_free(a);
}

/* The end: step(100..) { conv(110..150) } with step's end never recorded
 * (the agents stopped at 150): a call at 160 is under step (it may still
 * run); at 400, after the end given, dropped. */
static void flush_end(void **state)
{
	struct out o = { .n = 0 };
	struct cudaattr *a = cudaattr_new(emit, &o);
	struct cudaattr_stats st;

	cudaattr_mark(a);
	op(a, &o, REC_OP_ENTER, 7, 1, 100, 10, 0, 0);
	op(a, &o, REC_OP_ENTER, 7, 1, 110, 11, 1, 0);
	op(a, &o, REC_OP_EXIT, 7, 1, 150, 11, 1, 0);
	launch(a, 7, 1, 160, 20);
	launch(a, 7, 1, 400, 20);
	assert_int_equal(cudaattr_flush(a, 300), 0);
	assert_int_equal(o.op[find(&o, REC_LAUNCH, 160)], 10);
	for (size_t i = 0; i < o.n; i++)
		assert_false(o.type[i] == REC_LAUNCH && o.ts[i] == 400);
	cudaattr_get_stats(a, &st);
	assert_int_equal(st.in_op, 1);
	assert_int_equal(st.no_op, 0);
	assert_int_equal(st.after_end, 1);
	cudaattr_free(a);
}

/* Ends that were lost: an enter at a lower depth closes the frames above
 * it; an end without its start changes nothing; an op's own stack id is
 * used when it has one. */
static void lost_ends(void **state)
{
	struct out o = { .n = 0 };
	struct cudaattr *a = cudaattr_new(emit, &o);

	cudaattr_mark(a);
	op(a, &o, REC_OP_ENTER, 7, 1, 100, 10, 0, 5);
	op(a, &o, REC_OP_ENTER, 7, 1, 110, 11, 1, 0);    /* its end is lost */
	op(a, &o, REC_OP_EXIT, 7, 1, 120, 99, 1, 0);     /* an end never started */
	launch(a, 7, 1, 130, 10);                        /* under 11 */
	op(a, &o, REC_OP_ENTER, 7, 1, 200, 12, 1, 6);    /* depth 1: 11 is closed */
	launch(a, 7, 1, 210, 10);                        /* under 12, its stack 6 */
	op(a, &o, REC_OP_EXIT, 7, 1, 300, 12, 1, 0);
	launch(a, 7, 1, 310, 10);                        /* under 10 again */
	op(a, &o, REC_OP_EXIT, 7, 1, 400, 10, 0, 0);
	assert_int_equal(o.op[find(&o, REC_LAUNCH, 130)], 11);
	assert_int_equal(o.stack[find(&o, REC_LAUNCH, 130)], 5);
	assert_int_equal(o.depth[find(&o, REC_LAUNCH, 130)], 2);
	assert_int_equal(o.op[find(&o, REC_LAUNCH, 210)], 12);
	assert_int_equal(o.stack[find(&o, REC_LAUNCH, 210)], 6);
	assert_int_equal(o.op[find(&o, REC_LAUNCH, 310)], 10);
	assert_int_equal(o.depth[find(&o, REC_LAUNCH, 310)], 1);
	cudaattr_free(a);
}

/* Records arriving out of time order on one thread go out in time order;
 * a record of another kind (or too short) is not taken. */
static void order_and_bad(void **state)
{
	struct out o = { .n = 0 };
	struct cudaattr *a = cudaattr_new(emit, &o);
	struct rec_op notcuda = { .h = { .type = REC_OP_ENTER, .size = sizeof(notcuda) } };
	struct rec_launch shortl = { .h = { .type = REC_LAUNCH, .size = 40 } };
	struct cudaattr_stats st;

	assert_false(cudaattr_is_cuda(&notcuda.h, sizeof(notcuda)));
	assert_false(cudaattr_is_cuda(&shortl.h, 40));
	assert_int_equal(cudaattr_cuda(a, &shortl.h, 40), 0);
	cudaattr_mark(a);
	launch(a, 7, 1, 300, 10);
	launch(a, 7, 1, 200, 10);
	op(a, &o, REC_OP_ENTER, 7, 1, 100, 10, 0, 0);
	op(a, &o, REC_OP_EXIT, 7, 1, 1000, 10, 0, 0);
	assert_true(find(&o, REC_LAUNCH, 200) < find(&o, REC_LAUNCH, 300));
	cudaattr_get_stats(a, &st);
	assert_int_equal(st.bad, 1);
	assert_int_equal(st.held, 2);
	cudaattr_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(innermost_open),
		cmocka_unit_test(midpoint),
		cmocka_unit_test(settled),
		cmocka_unit_test(threads),
		cmocka_unit_test(lost_ends),
		cmocka_unit_test(flush_end),
		cmocka_unit_test(order_and_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
