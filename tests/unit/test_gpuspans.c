/* test_gpuspans.c - the op spans behind CUDA total (join/gpucap.c):
 * gj_spans_window, the daemon's window join: a process's kept
 * spans (closed, a launch inside) and its frames still open that enclose
 * a launch, cut at the window's end; nothing of frames without a launch,
 * of other processes or of a NULL set; the open frames kept as usual once
 * they close; gj_spans_drop_before forgets what ended before a time. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpucap.h"

static void op(struct gj_spans *s, uint16_t type, uint32_t pid, uint32_t tid, uint64_t ts,
	       uint32_t op_id, uint16_t depth)
{
	struct rec_op r = { .h = { type, sizeof(r), tid, ts }, .pid = pid, .op_id = op_id,
			    .depth = depth, .stack_id = 0x51 };
	assert_int_equal(gj_spans_feed(s, &r.h), 0);
}

static void launch(struct gj_spans *s, uint32_t pid, uint32_t tid, uint64_t ts)
{
	struct rec_launch r = { .h = { REC_LAUNCH, sizeof(r), tid, ts }, .pid = pid,
				.api = CU_cuLaunchKernel };
	assert_int_equal(gj_spans_feed(s, &r.h), 0);
}

/* the span of op_id in v (NULL: none, fails when there are two) */
static const struct gj_op_span *find(const struct gj_op_span *v, size_t n, uint32_t op_id)
{
	const struct gj_op_span *f = NULL;
	for (size_t i = 0; i < n; i++)
		if (v[i].op_id == op_id) {
			assert_null(f);
			f = &v[i];
		}
	return f;
}

static void span_is(const struct gj_op_span *v, size_t n, uint32_t op_id, uint32_t tid,
		    uint64_t start, uint64_t end)
{
	const struct gj_op_span *f = find(v, n, op_id);
	assert_non_null(f);
	assert_int_equal(f->tid, tid);
	assert_int_equal(f->start_ns, start);
	assert_int_equal(f->end_ns, end);
}

/* pid 42: tid 7 op 10 open, op 11 in it closed around a launch, op 12
 * open above without one; tid 8 op 20 open around a launch; tid 9 op 30
 * open, no launch.  pid 43 (tid 7 too) op 40 open around a launch. */
static struct gj_spans *fed(void)
{
	struct gj_spans *s = gj_spans_new();
	assert_non_null(s);
	op(s, REC_OP_ENTER, 42, 7, 100, 10, 0);
	op(s, REC_OP_ENTER, 42, 7, 110, 11, 1);
	launch(s, 42, 7, 120);
	op(s, REC_OP_EXIT, 42, 7, 130, 11, 1);
	op(s, REC_OP_ENTER, 42, 7, 140, 12, 1);
	op(s, REC_OP_ENTER, 42, 8, 150, 20, 0);
	launch(s, 42, 8, 160);
	op(s, REC_OP_ENTER, 42, 9, 170, 30, 0);
	op(s, REC_OP_ENTER, 43, 7, 100, 40, 0);
	launch(s, 43, 7, 105);
	return s;
}

static void test_window_open_and_closed(void **state)
{
	(void)state;
	struct gj_spans *s = fed();
	struct gj_op_span *v;
	size_t n;
	assert_int_equal(gj_spans_window(s, 42, 1000, &v, &n), 0);
	assert_int_equal(n, 3);
	span_is(v, n, 11, 7, 110, 130);     /* closed, the launch inside */
	span_is(v, n, 10, 7, 100, 1000);    /* open, encloses 11's launch */
	span_is(v, n, 20, 8, 150, 1000);    /* open, its own launch */
	assert_null(find(v, n, 12));        /* open, no launch inside */
	assert_null(find(v, n, 30));
	free(v);
	assert_int_equal(gj_spans_window(s, 43, 2000, &v, &n), 0);
	assert_int_equal(n, 1);
	span_is(v, n, 40, 7, 100, 2000);
	free(v);
	assert_int_equal(gj_spans_window(s, 44, 1000, &v, &n), 0);
	assert_int_equal(n, 0);
	free(v);
	/* once closed, the open frames are kept as usual; 12 still not */
	op(s, REC_OP_EXIT, 42, 7, 200, 12, 1);
	op(s, REC_OP_EXIT, 42, 7, 210, 10, 0);
	gj_spans_finish(s);
	const struct gj_op_span *k = gj_spans_of(s, 42, &n);
	assert_int_equal(n, 3);
	span_is(k, n, 11, 7, 110, 130);
	span_is(k, n, 10, 7, 100, 210);
	span_is(k, n, 20, 8, 150, 160);     /* closed at its thread's last record */
	assert_null(find(k, n, 12));
	gj_spans_free(s);
}

/* The window after gj_spans_drop_before(135): op 11 (ended at 130) gone,
 * the open frames still there. */
static void test_window_after_drop(void **state)
{
	(void)state;
	struct gj_spans *s = fed();
	struct gj_op_span *v;
	size_t n;
	gj_spans_drop_before(s, 135);
	assert_int_equal(gj_spans_window(s, 42, 1000, &v, &n), 0);
	assert_int_equal(n, 2);
	assert_null(find(v, n, 11));
	span_is(v, n, 10, 7, 100, 1000);
	span_is(v, n, 20, 8, 150, 1000);
	free(v);
	gj_spans_free(s);
}

/* No span set (out of memory before): no spans, not an error. */
static void test_window_null(void **state)
{
	(void)state;
	struct gj_op_span *v = (void *)1;
	size_t n = 5;
	assert_int_equal(gj_spans_window(NULL, 42, 1000, &v, &n), 0);
	assert_int_equal(n, 0);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_open_and_closed),
		cmocka_unit_test(test_window_after_drop),
		cmocka_unit_test(test_window_null),
	};
	return cmocka_run_group_tests_name("gpuspans", tests, NULL, NULL);
}
