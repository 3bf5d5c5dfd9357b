/* test_model_feed.c - model_feed (--inproc's rows, fed record by record)
 * gives exactly the rows a capture replay of the same records gives: the
 * fixture scenario (tests/unit/fixture_capture.h: nesting, unwound and
 * lost exits, an orphan exit, a never-closed op, two processes) plus a
 * thread where aten::sum's only child is aten::sum (torch.profiler's
 * same-name rule: one row, one folded call), with the names handed over
 * after the first records as the agent's drain may do. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "fixture_capture.h"
#include "bus.h"
#include "model.h"

#define OP_SUM 6
#define OP_SUM_DIM 7

static int sum_records(struct rec_op v[4])
{
	v[0] = fx_op(REC_OP_ENTER, 300, 300, 70000, OP_SUM, 0, 0, 0);
	v[1] = fx_op(REC_OP_ENTER, 300, 300, 71000, OP_SUM_DIM, 1, 0, 0);
	v[2] = fx_op(REC_OP_EXIT, 300, 300, 74000, OP_SUM_DIM, 1, 0, 0);
	v[3] = fx_op(REC_OP_EXIT, 300, 300, 75000, OP_SUM, 0, 0, 0);
	return 4;
}

static const struct { uint32_t id; const char *name, *ovl; } names[] = {
	{ OP_CONV2D, "aten::conv2d", "" }, { OP_CONVOLUTION, "aten::convolution", "" },
	{ OP_ADD, "aten::add", "Tensor" }, { OP_RELU, "aten::relu", "" }, { OP_MM, "aten::mm", "" },
	{ OP_SUM, "aten::sum", "" }, { OP_SUM_DIM, "aten::sum", "" },
};

static int cmp_row(const void *a, const void *b)
{
	const struct prof_op *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->op_id < y->op_id ? -1 : x->op_id > y->op_id;
}

static void sorted_rows(struct profile *p)
{
	qsort(p->ops, p->nops, sizeof(*p->ops), cmp_row);
}

static void same_rows_as_replay(void **state)
{
	char path[] = "/tmp/test_model_feed-XXXXXX";
	void *recs[FX_N_RECORDS];
	size_t lens[FX_N_RECORDS];
	struct rec_op sums[4];
	int n = fx_records(recs, lens), ns = sum_records(sums), fd = mkstemp(path);
	struct capture_writer *w;
	struct capture_reader *r;
	struct tbpf_model a, b;
	struct model_feed *f;
	uint32_t pids[] = { 100, 200, 300 };
	struct capture_run run = { .present = true, .mode = TBPF_MODE_EXITS | TBPF_MODE_INPROC,
				   .npids = 3, .pids = pids, .probes_attached = 6 };
	struct capture_end end = { .present = true, .duration_ns = 123456, .exit_mode = "duration",
				   .gpu_note = "none" };
	struct capture_run_info ri = { .mode = run.mode, .npids = 3, .pids = pids,
				       .probes_attached = 6, .tbpf_version = "t", .host = "h" };
	struct capture_end_info ei = { .duration_ns = 123456, .exit_mode = "duration",
				       .gpu_note = "none" };
	int err = 0;

	assert_true(fd >= 0);
	close(fd);
	/* the capture */
	w = capture_writer_open(path, &err);
	assert_non_null(w);
	assert_int_equal(capture_write_run(w, &ri), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(capture_write_raw(w, recs[i], lens[i]), 0);
	for (int i = 0; i < ns; i++)
		assert_int_equal(capture_write_raw(w, &sums[i], sizeof(sums[i])), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(capture_write_op(w, names[i].id, names[i].name, names[i].ovl), 0);
	assert_int_equal(capture_write_end(w, &ei), 0);
	assert_int_equal(capture_writer_close(w), 0);
	model_init(&a);
	r = capture_reader_open(path);
	assert_non_null(r);
	assert_int_equal(model_from_capture(r, 0, &a), 0);
	/* the feed: half the names first, the rest after some records */
	model_init(&b);
	f = model_feed_new(&b);
	assert_non_null(f);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(model_feed_name(f, names[i].id, names[i].name, names[i].ovl), 0);
	for (int i = 0; i < n; i++) {
		if (i == 5)
			for (size_t k = 3; k < sizeof(names) / sizeof(names[0]); k++)
				assert_int_equal(model_feed_name(f, names[k].id, names[k].name,
								 names[k].ovl), 0);
		assert_int_equal(model_feed_record(f, recs[i]), 0);
	}
	for (int i = 0; i < ns; i++)
		assert_int_equal(model_feed_record(f, &sums[i].h), 0);
	assert_int_equal(model_feed_finish(f, &run, &end), 0);

	assert_int_equal(a.prof.nops, b.prof.nops);
	sorted_rows(&a.prof);
	sorted_rows(&b.prof);
	for (size_t i = 0; i < a.prof.nops; i++) {
		const struct prof_op *x = &a.prof.ops[i], *y = &b.prof.ops[i];

		assert_string_equal(x->name, y->name);
		assert_string_equal(x->overload, y->overload);
		assert_int_equal(x->pid, y->pid);
		assert_int_equal(x->calls, y->calls);
		assert_int_equal(x->self_ns, y->self_ns);
		assert_int_equal(x->total_ns, y->total_ns);
		assert_int_equal(x->max_ns, y->max_ns);
		assert_int_equal(x->folded, y->folded);
		assert_int_equal(x->inferred, y->inferred);
	}
	/* the same-name rule applied on both sides: one aten::sum call shown */
	for (size_t i = 0; i < b.prof.nops; i++)
		if (b.prof.ops[i].pid == 300 && b.prof.ops[i].op_id == OP_SUM) {
			assert_int_equal(b.prof.ops[i].calls, 1);
			assert_int_equal(b.prof.ops[i].total_ns, 5000);
		}
	assert_int_equal(b.prof.duration_ns, 123456);
	assert_string_equal(b.prof.mode, "in-process RecordFunction callbacks");
	assert_int_equal(b.prof.npids, 3);
	assert_string_equal(b.op_name(b.op_name_ctx, OP_MM), "aten::mm");
	model_free(&b);
	model_feed_free(f);
	model_free(&a);
	capture_reader_close(r);
	unlink(path);
}

/* --inproc --record-shapes: shape lists handed to the feed (as the
 * agent's table is drained, after some records) give the rows, Input
 * Shapes text and FLOPs a capture with REC_SHAPE records gives. */
static void shapes_as_replay(void **state)
{
	char path[] = "/tmp/test_model_feed_sh-XXXXXX";
	struct tbpf_shape sh[2] = {
		{ .nargs = 2, .ntensors = 2, .argi = { 0, 1 }, .ndim = { 2, 2 },
		  .kind = { ARGK_TENSOR, ARGK_TENSOR }, .dims = { { 2, 3 }, { 3, 4 } } },
		{ .nargs = 3, .ntensors = 1, .argi = { 0 }, .ndim = { 6 }, .kind = { ARGK_TENSOR },
		  .dims = { { 1, 2, 1, 2, 1, 3 } } },
	};
	uint64_t ids[2] = { (uint64_t)300 << 32 | 1, (uint64_t)300 << 32 | 2 };
	struct rec_op_shape e[3];
	struct rec_op x[3];
	uint32_t pids[] = { 300 };
	struct capture_run run = { .present = true, .npids = 1, .pids = pids,
				   .mode = TBPF_MODE_EXITS | TBPF_MODE_INPROC | TBPF_MODE_SHAPES };
	struct capture_end end = { .present = true, .duration_ns = 1000, .exit_mode = "duration",
				   .gpu_note = "none" };
	struct capture_run_info ri = { .mode = run.mode, .npids = 1, .pids = pids,
				       .tbpf_version = "t", .host = "h" };
	struct capture_end_info ei = { .duration_ns = 1000, .exit_mode = "duration", .gpu_note = "none" };
	struct capture_writer *w;
	struct capture_reader *r;
	struct tbpf_model a, b;
	struct model_feed *f;
	int fd = mkstemp(path), err = 0;

	for (int i = 0; i < 3; i++) {
		uint32_t op = i < 2 ? OP_MM : OP_ADD;

		e[i].op = fx_op(REC_OP_ENTER, 300, 300, 1000 * i, op, 0, 0, 0);
		e[i].op.h.size = sizeof(e[i]);
		e[i].shape_id = ids[i < 2 ? 0 : 1];
		x[i] = fx_op(REC_OP_EXIT, 300, 300, 1000 * i + 500, op, 0, 0, 0);
	}
	assert_true(fd >= 0);
	close(fd);
	w = capture_writer_open(path, &err);
	assert_non_null(w);
	assert_int_equal(capture_write_run(w, &ri), 0);
	for (int i = 0; i < 2; i++) {
		struct rec_shape rs = { .h = { .type = REC_SHAPE, .size = sizeof(rs) }, .pid = 300,
					.shape_id = ids[i], .s = sh[i] };

		assert_int_equal(capture_write_raw(w, &rs, sizeof(rs)), 0);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(capture_write_raw(w, &e[i], sizeof(e[i])), 0);
		assert_int_equal(capture_write_raw(w, &x[i], sizeof(x[i])), 0);
	}
	assert_int_equal(capture_write_op(w, OP_MM, "aten::mm", ""), 0);
	assert_int_equal(capture_write_op(w, OP_ADD, "aten::add", "Tensor"), 0);
	assert_int_equal(capture_write_end(w, &ei), 0);
	assert_int_equal(capture_writer_close(w), 0);
	model_init(&a);
	r = capture_reader_open(path);
	assert_non_null(r);
	assert_int_equal(model_from_capture(r, 0, &a), 0);

	model_init(&b);
	f = model_feed_new(&b);
	assert_non_null(f);
	assert_int_equal(model_feed_name(f, OP_MM, "aten::mm", ""), 0);
	assert_int_equal(model_feed_name(f, OP_ADD, "aten::add", "Tensor"), 0);
	assert_int_equal(model_feed_shape(f, ids[0], &sh[0]), 0);
	for (int i = 0; i < 3; i++) {
		if (i == 2)   /* the second list arrives with a later drain */
			assert_int_equal(model_feed_shape(f, ids[1], &sh[1]), 0);
		assert_int_equal(model_feed_record(f, &e[i].op.h), 0);
		assert_int_equal(model_feed_record(f, &x[i].h), 0);
	}
	assert_int_equal(model_feed_finish(f, &run, &end), 0);

	assert_int_equal(a.prof.nops, 2);
	assert_int_equal(b.prof.nops, 2);
	sorted_rows(&a.prof);
	sorted_rows(&b.prof);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(a.prof.ops[i].shapes, b.prof.ops[i].shapes);
		assert_int_equal(a.prof.ops[i].calls, b.prof.ops[i].calls);
		assert_int_equal(a.prof.ops[i].flops, b.prof.ops[i].flops);
	}
	assert_string_equal(b.prof.ops[0].name, "aten::add");
	assert_string_equal(b.prof.ops[0].shapes, "[[1, 2, 1, 2, 1, 3], [], []]");
	assert_int_equal(b.prof.ops[0].flops, 12);       /* add: numel of the first */
	assert_string_equal(b.prof.ops[1].shapes, "[[2, 3], [3, 4]]");
	assert_int_equal(b.prof.ops[1].calls, 2);
	assert_int_equal(b.prof.ops[1].flops, 2 * 2 * 3 * 4 * 2);  /* mm: 2*m*k*n per call */
	model_free(&b);
	model_feed_free(f);
	model_free(&a);
	capture_reader_close(r);
	unlink(path);
}

static uint64_t modcalls_of(const struct profile *p, uint32_t pid, uint64_t stack)
{
	for (size_t i = 0; i < p->nmodcalls; i++)
		if (p->modcalls[i].pid == pid && p->modcalls[i].stack_id == stack)
			return p->modcalls[i].calls;
	return 0;
}

/* --inproc's module calls come by two buses: the feed's own and the BPF
 * session's ring (model_feed_modcall_sink).  Either way they count into
 * the rows as a capture's replay counts the same records; a record
 * shorter than a module call is not counted. */
static void modcalls_one_sink(void **state)
{
	char path[] = "/tmp/test_model_feed_mc-XXXXXX";
	/* (pid, stack): (100, 5) 3 calls, (100, 6) 1, (200, 5) 2 */
	struct rec_op mc[] = {
		fx_op(REC_MODCALL, 100, 100, 10, 0, 0, 0, 5),
		fx_op(REC_MODCALL, 100, 101, 20, 0, 0, 0, 6),
		fx_op(REC_MODCALL, 200, 200, 30, 0, 0, 0, 5),
		fx_op(REC_MODCALL, 100, 100, 40, 0, 0, 0, 5),
		fx_op(REC_MODCALL, 200, 200, 50, 0, 0, 0, 5),
		fx_op(REC_MODCALL, 100, 100, 60, 0, 0, 0, 5),
	};
	struct rec_op cut = fx_op(REC_MODCALL, 300, 300, 70, 0, 0, 0, 5);
	const size_t n = sizeof(mc) / sizeof(mc[0]);
	uint32_t pids[] = { 100, 200 };
	struct capture_run run = { .present = true, .npids = 2, .pids = pids,
				   .mode = TBPF_MODE_EXITS | TBPF_MODE_INPROC };
	struct capture_end end = { .present = true, .duration_ns = 100, .exit_mode = "duration",
				   .gpu_note = "none" };
	struct capture_run_info ri = { .mode = run.mode, .npids = 2, .pids = pids,
				       .tbpf_version = "t", .host = "h" };
	struct capture_end_info ei = { .duration_ns = 100, .exit_mode = "duration", .gpu_note = "none" };
	struct capture_writer *w;
	struct capture_reader *r;
	struct tbpf_model a, b;
	struct model_feed *f;
	struct rec_bus ring;
	int fd = mkstemp(path), err = 0;

	assert_true(fd >= 0);
	close(fd);
	w = capture_writer_open(path, &err);
	assert_non_null(w);
	assert_int_equal(capture_write_run(w, &ri), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(capture_write_raw(w, &mc[i], sizeof(mc[i])), 0);
	assert_int_equal(capture_write_end(w, &ei), 0);
	assert_int_equal(capture_writer_close(w), 0);
	model_init(&a);
	r = capture_reader_open(path);
	assert_non_null(r);
	assert_int_equal(model_from_capture(r, 0, &a), 0);

	model_init(&b);
	f = model_feed_new(&b);
	assert_non_null(f);
	bus_init(&ring);
	assert_int_equal(bus_add(&ring, model_feed_modcall_sink(f)), 0);
	for (size_t i = 0; i < n; i++)   /* every other one by the session's ring */
		assert_int_equal(i % 2 ? bus_feed(&ring, &mc[i].h, sizeof(mc[i]))
				       : model_feed_record(f, &mc[i].h), 0);
	assert_int_equal(bus_feed(&ring, &cut.h, sizeof(cut) - 4), 0);
	assert_int_equal(bus_finish(&ring), 0);
	assert_int_equal(model_feed_finish(f, &run, &end), 0);

	for (int k = 0; k < 2; k++) {
		const struct profile *p = k ? &b.prof : &a.prof;

		assert_int_equal(p->nmodcalls, 3);
		assert_int_equal(modcalls_of(p, 100, 5), 3);
		assert_int_equal(modcalls_of(p, 100, 6), 1);
		assert_int_equal(modcalls_of(p, 200, 5), 2);
		assert_int_equal(modcalls_of(p, 300, 5), 0);
	}
	model_free(&b);
	model_feed_free(f);
	model_free(&a);
	capture_reader_close(r);
	unlink(path);
}

/* A feed given up before its finish (an error in the run) frees what it
 * built so far, an op still open among it. */
static void freed_unfinished(void **state)
{
	struct rec_op e = fx_op(REC_OP_ENTER, 1, 1, 0, OP_MM, 0, 0, 0);
	struct tbpf_model m;
	struct model_feed *f;

	model_init(&m);
	f = model_feed_new(&m);
	assert_non_null(f);
	assert_int_equal(model_feed_name(f, OP_MM, "aten::mm", ""), 0);
	assert_int_equal(model_feed_record(f, &e.h), 0);
	model_feed_free(f);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(same_rows_as_replay),
		cmocka_unit_test(shapes_as_replay),
		cmocka_unit_test(modcalls_one_sink),
		cmocka_unit_test(freed_unfinished),
	};
	return cmocka_run_group_tests_name("model_feed", tests, NULL, NULL);
}
