/* test_opstream.c - op rows from a record stream, window by window
 * (model/opstream.c, tbpf daemon --inproc): nesting and self time, an op
 * open across a take, an exit without its enter, an enter deeper than the
 * frames seen, two threads, the histogram buckets (bpf/hist.bpf.h's);
 * rows apart per call site (the enter's Python stack, the daemon's
 * profiles), the exit's stack field ignored. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "opstream.h"

static struct rec_op rec(int type, uint32_t tid, uint64_t ts, uint32_t op, uint16_t depth)
{
	struct rec_op r = { .h = { .type = (uint16_t)type, .size = sizeof(r), .tid = tid, .ts_ns = ts },
			    .pid = 7, .op_id = op, .depth = depth };
	return r;
}

static const struct opstream_row *find(const struct opstream_row *v, size_t n, uint32_t op)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].op_id == op)
			return &v[i];
	return NULL;
}

static void add(struct opstream *s, struct rec_op r)
{
	assert_int_equal(opstream_add(s, &r), 0);
}

static void buckets(void **state)
{
	assert_int_equal(opstream_bucket(0), 0);
	assert_int_equal(opstream_bucket(1023), 0);       /* < 2^10 ns */
	assert_int_equal(opstream_bucket(1024), 1);       /* [2^10, 2^11) */
	assert_int_equal(opstream_bucket(2047), 1);
	assert_int_equal(opstream_bucket(2048), 2);
	assert_int_equal(opstream_bucket(1ull << 40), TBPF_HIST_BUCKETS - 1);
}

static void windows(void **state)
{
	struct opstream *s = opstream_new();
	struct opstream_row *v;
	const struct opstream_row *r;
	size_t n;

	/* thread 1: A(0..10000) { B(1000..3000) B(4000..5000) }, A closes after a take */
	add(s, rec(REC_OP_ENTER, 1, 0, 1, 0));
	add(s, rec(REC_OP_ENTER, 1, 1000, 2, 1));
	add(s, rec(REC_OP_EXIT, 1, 3000, 2, 1));
	add(s, rec(REC_OP_ENTER, 1, 4000, 2, 1));
	add(s, rec(REC_OP_EXIT, 1, 5000, 2, 1));
	/* thread 2: an exit whose enter came before the records: ignored */
	add(s, rec(REC_OP_EXIT, 2, 500, 3, 0));
	v = opstream_take(s, &n);
	assert_int_equal(n, 1);
	r = find(v, n, 2);
	assert_non_null(r);
	assert_int_equal(r->calls, 2);
	assert_int_equal(r->total_ns, 3000);
	assert_int_equal(r->self_ns, 3000);
	assert_int_equal(r->max_ns, 2000);
	assert_int_equal(r->buckets[1], 1);   /* 1000 ns: bucket 0; 2000: bucket 1 */
	assert_int_equal(r->buckets[0], 1);
	free(v);
	/* the next window: A ends, its self time without B's */
	add(s, rec(REC_OP_EXIT, 1, 10000, 1, 0));
	/* thread 2: an enter at depth 2 (two frames began before the records) */
	add(s, rec(REC_OP_ENTER, 2, 20000, 4, 2));
	add(s, rec(REC_OP_EXIT, 2, 20500, 4, 2));
	add(s, rec(REC_OP_EXIT, 2, 21000, 0, 1));   /* the unknown frame: op 0, never a row */
	v = opstream_take(s, &n);
	assert_int_equal(n, 2);
	r = find(v, n, 1);
	assert_non_null(r);
	assert_int_equal(r->calls, 1);
	assert_int_equal(r->total_ns, 10000);
	assert_int_equal(r->self_ns, 7000);
	r = find(v, n, 4);
	assert_non_null(r);
	assert_int_equal(r->calls, 1);
	assert_null(find(v, n, 0));
	assert_null(find(v, n, 2));   /* counted in the first window only */
	free(v);
	/* an exit closing a frame below the top: those above are dropped */
	add(s, rec(REC_OP_ENTER, 1, 30000, 5, 0));
	add(s, rec(REC_OP_ENTER, 1, 30100, 6, 1));
	add(s, rec(REC_OP_EXIT, 1, 31000, 5, 0));
	add(s, rec(REC_OP_EXIT, 1, 31100, 6, 1));
	v = opstream_take(s, &n);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].op_id, 5);
	free(v);
	assert_null(opstream_take(s, &n));
	assert_int_equal(n, 0);
	/* a process gone: its open frames with it */
	add(s, rec(REC_OP_ENTER, 1, 40000, 8, 0));
	opstream_forget_pid(s, 7);
	add(s, rec(REC_OP_EXIT, 1, 41000, 8, 0));
	assert_null(opstream_take(s, &n));
	opstream_free(s);
}

static void many_rows(void **state)
{
	struct opstream *s = opstream_new();
	struct opstream_row *v;
	size_t n;

	for (uint32_t op = 1; op <= 5000; op++) {
		add(s, rec(REC_OP_ENTER, 1, op * 10, op, 0));
		add(s, rec(REC_OP_EXIT, 1, op * 10 + 5, op, 0));
		add(s, rec(REC_OP_ENTER, 1, op * 10, op, 0));
		add(s, rec(REC_OP_EXIT, 1, op * 10 + 5, op, 0));
	}
	v = opstream_take(s, &n);
	assert_int_equal(n, 5000);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i].calls, 2);
	free(v);
	opstream_free(s);
}

static struct rec_op at(struct rec_op r, uint32_t stack)
{
	r.stack_id = stack;
	return r;
}

static void call_sites(void **state)
{
	struct opstream *s = opstream_new();
	struct opstream_row *v;
	size_t n, a = 0, b = 0;

	/* op 5 from stack 11 (100 ns), then stack 12 twice (200, 300 ns); the
	 * exits carry no stack: the enter's keys the row */
	add(s, at(rec(REC_OP_ENTER, 1, 0, 5, 0), 11));
	add(s, rec(REC_OP_EXIT, 1, 100, 5, 0));
	add(s, at(rec(REC_OP_ENTER, 1, 1000, 5, 0), 12));
	add(s, rec(REC_OP_EXIT, 1, 1200, 5, 0));
	add(s, at(rec(REC_OP_ENTER, 1, 2000, 5, 0), 12));
	add(s, at(rec(REC_OP_EXIT, 1, 2300, 5, 0), 11));
	v = opstream_take(s, &n);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(v[i].op_id, 5);
		if (v[i].stack_id == 11) {
			a++;
			assert_int_equal(v[i].calls, 1);
			assert_int_equal(v[i].self_ns, 100);
		} else {
			b++;
			assert_int_equal(v[i].stack_id, 12);
			assert_int_equal(v[i].calls, 2);
			assert_int_equal(v[i].self_ns, 500);
		}
	}
	assert_int_equal(a, 1);
	assert_int_equal(b, 1);
	free(v);
	opstream_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(buckets),
		cmocka_unit_test(windows),
		cmocka_unit_test(many_rows),
		cmocka_unit_test(call_sites),
	};
	return cmocka_run_group_tests_name("opstream", tests, NULL, NULL);
}
