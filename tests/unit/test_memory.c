/* test_memory.c - --profile-memory: the memory model (live
 * allocations, peaks and their holders, frees of unseen memory) and the
 * capture replay's per-op CPU Mem / Self CPU Mem (profile_agg), from
 * hand-made records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "layers.h"
#include "mem_attach.h"
#include "memory.h"
#include "tree.h"
#include "profile.h"
#include "capture.h"
#include "replay.h"
#include "tbpf_abi.h"

static struct rec_mem mem(uint64_t ts, uint32_t tid, uint64_t ptr, int64_t bytes, uint32_t op,
			  uint32_t stack)
{
	struct rec_mem r = { .h = { .type = REC_MEM, .size = sizeof(r), .tid = tid, .ts_ns = ts },
			     .pid = 7, .dev_type = TBPF_C10_DEV_CPU, .dev_index = -1, .ptr = ptr,
			     .bytes = bytes, .op_id = op, .stack_id = stack };
	return r;
}

static struct rec_op op(uint16_t type, uint64_t ts, uint32_t id, uint16_t depth)
{
	struct rec_op r = { .h = { .type = type, .size = sizeof(r), .tid = 70, .ts_ns = ts },
			    .pid = 7, .op_id = id, .depth = depth, .stack_id = 5 };
	return r;
}

/* allocations live, freed, freed twice (second unseen), a peak and who held it */
static void test_model_live_and_peak(void **state)
{
	struct mem_model m;
	struct rec_mem v[] = {
		mem(1, 70, 0x1000, 100, 3, 5),   /* op 3 in stack 5: kept to the end */
		mem(2, 70, 0x2000, 1000, 4, 5),  /* op 4: freed after the peak */
		mem(3, 70, 0x3000, 50, 3, 5),
		mem(4, 70, 0x2000, -1000, 0, 0), /* peak (1150) before this free */
		mem(5, 70, 0x2000, -1000, 0, 0), /* unseen now: counted apart */
		mem(6, 70, 0x4000, 10, 0, 0),    /* outside any op */
	};
	struct mem_group *g;
	size_t n;
	uint64_t a, r;

	(void)state;
	mem_model_init(&m);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		assert_int_equal(mem_model_add(&m, &v[i]), 0);
		if (i == 2) {
			struct cuda_ev e;

			assert_true(cuda_ev_decode(&v[i].h, &e));
			mem_model_totals(&m, &e, &a, &r);
			assert_int_equal(a, 1150);   /* Total Allocated after it, CPU */
			assert_int_equal(r, 0);
		}
	}
	assert_int_equal(mem_model_finish(&m), 0);
	assert_int_equal(m.ndevs, 1);
	assert_int_equal(m.devs[0].peak, 1150);
	assert_int_equal(m.devs[0].peak_ts, 3);
	assert_int_equal(m.devs[0].live, 160);
	assert_int_equal(m.devs[0].allocs, 4);
	assert_int_equal(m.devs[0].frees, 1);
	assert_int_equal(m.devs[0].unknown_frees, 1);
	/* held at the peak: op 4 (1000), op 3 (2 allocations, 150) */
	assert_int_equal(m.devs[0].npeak_groups, 2);
	assert_int_equal(m.devs[0].peak_groups[0].op_id, 4);
	assert_int_equal(m.devs[0].peak_groups[0].bytes, 1000);
	assert_int_equal(m.devs[0].peak_groups[1].op_id, 3);
	assert_int_equal(m.devs[0].peak_groups[1].count, 2);
	assert_int_equal(m.devs[0].peak_groups[1].bytes, 150);
	/* live at the end: op 3 (150), outside ops (10) */
	assert_int_equal(mem_model_live_groups(&m, &g, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(g[0].op_id, 3);
	assert_int_equal(g[0].bytes, 150);
	assert_int_equal(g[0].stack_id, 5);
	assert_int_equal(g[1].op_id, 0);
	assert_int_equal(g[1].bytes, 10);
	free(g);
	mem_model_free(&m);
}

/* many allocations and frees in a shuffled order: the table stays right
 * (open addressing with backward-shift deletion) */
static void test_model_many(void **state)
{
	struct mem_model m;
	enum { N = 5000 };
	int64_t want = 0;

	(void)state;
	mem_model_init(&m);
	for (uint64_t i = 1; i <= N; i++) {
		struct rec_mem r = mem(i, 70, i * 4096 * 7919 % (1u << 30) + 64, (int64_t)i, 1, 1);

		assert_int_equal(mem_model_add(&m, &r), 0);
	}
	for (uint64_t i = 1; i <= N; i++) {
		uint64_t k = (i * 2654435761u) % N + 1;   /* a permutation of 1..N */
		struct rec_mem r = mem(N + i, 70, k * 4096 * 7919 % (1u << 30) + 64, -(int64_t)k, 0, 0);

		if (k % 3 == 0) {
			want += (int64_t)k;
			continue;
		}
		assert_int_equal(mem_model_add(&m, &r), 0);
	}
	assert_int_equal(m.devs[0].unknown_frees, 0);
	assert_int_equal(m.devs[0].live, want);
	assert_int_equal(m.nlive, N / 3);
	assert_int_equal(m.devs[0].peak, (int64_t)N * (N + 1) / 2);
	mem_model_free(&m);
}

/* outer(1) { alloc 100; inner(2) { alloc 40; free the 100 }; alloc 8 };
 * outside: free 8.  Self CPU Mem: outer 108, inner -60; CPU Mem: outer
 * 48, inner -60; "[memory]" -8.  And a same-name only child folded: dup(3)
 * { dup(4) { alloc 16 } } -> one row dup, self 16, total 16. */
static void test_capture_columns(void **state)
{
	struct rec_op e1 = op(REC_OP_ENTER, 10, 1, 0), e2 = op(REC_OP_ENTER, 20, 2, 1);
	struct rec_op x2 = op(REC_OP_EXIT, 40, 2, 1), x1 = op(REC_OP_EXIT, 60, 1, 0);
	struct rec_op e3 = op(REC_OP_ENTER, 70, 3, 0), e4 = op(REC_OP_ENTER, 71, 4, 1);
	struct rec_op x4 = op(REC_OP_EXIT, 74, 4, 1), x3 = op(REC_OP_EXIT, 75, 3, 0);
	struct rec_mem a = mem(11, 70, 0x10, 100, 1, 5), b = mem(21, 70, 0x20, 40, 2, 5);
	struct rec_mem c = mem(22, 70, 0x10, -100, 2, 5), d = mem(50, 70, 0x30, 8, 1, 5);
	struct rec_mem e = mem(65, 70, 0x30, -8, 0, 0), f = mem(72, 70, 0x40, 16, 4, 5);
	const struct rec_hdr *recs[] = { &e1.h, &a.h, &e2.h, &b.h, &c.h, &x2.h, &d.h, &x1.h, &e.h,
					 &e3.h, &e4.h, &f.h, &x4.h, &x3.h };
	struct capture_op names[] = { { .op_id = 1, .name = "outer" }, { .op_id = 2, .name = "inner" },
				      { .op_id = 3, .name = "dup" }, { .op_id = 4, .name = "dup" } };
	struct capture_meta meta = { 0 };
	struct profile p;
	struct profile_agg *agg;
	struct bus_sink s;
	int found = 0;

	(void)state;
	meta.ops = names;
	meta.nops = 4;
	profile_init(&p);
	agg = profile_agg_new(&p, &meta);
	assert_non_null(agg);
	s = profile_agg_sink(agg);
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++)
		assert_int_equal(s.record(s.ctx, recs[i], recs[i]->size), 0);
	if (s.finish)
		assert_int_equal(s.finish(s.ctx), 0);
	profile_agg_free(agg);
	for (size_t i = 0; i < p.nops; i++) {
		const struct prof_op *o = &p.ops[i];

		switch (o->op_id) {
		case 1:
			assert_int_equal(o->mem_self[0], 108);
			assert_int_equal(o->mem_total[0], 48);
			found++;
			break;
		case 2:
			assert_int_equal(o->mem_self[0], -60);
			assert_int_equal(o->mem_total[0], -60);
			found++;
			break;
		case 3:
			assert_int_equal(o->calls, 1);
			assert_int_equal(o->mem_self[0], 16);
			assert_int_equal(o->mem_total[0], 16);
			found++;
			break;
		case 4:   /* folded into its parent: calls and bytes back to 0 */
			assert_int_equal(o->calls + o->folded, 1);
			assert_int_equal(o->mem_self[0], 0);
			assert_int_equal(o->mem_total[0], 0);
			break;
		case TBPF_OPID_MEMORY:
			assert_int_equal(o->calls, 1);
			assert_int_equal(o->mem_self[0], -8);
			found++;
			break;
		}
	}
	assert_int_equal(found, 4);
	profile_free(&p);
}

static void test_lib_candidates(void **state)
{
	(void)state;
	assert_true(mem_lib_candidate("libc10.so"));
	assert_true(mem_lib_candidate("libc10.so.1.13"));
	assert_true(mem_lib_candidate("libc10-a1b2c3d4.so"));
	assert_false(mem_lib_candidate("libc10_cuda.so"));
	assert_false(mem_lib_candidate("libc10.sox"));
	assert_false(mem_lib_candidate("libtorch_cpu.so"));
}

/* the layer tree: Self CPU Mem of the ops whose innermost module it is,
 * CPU Mem with the layers below; both columns in --format tree */
static void test_layer_memory(void **state)
{
	const char *n1[] = { "Net" }, *c1[] = { "Net" };
	const char *n2[] = { "Net", "keep" }, *c2[] = { "Net", "Keep" };
	struct layer_stack st[] = { { 11, 1, n1, c1 }, { 12, 2, n2, c2 } };
	struct layer_opstat ops[] = {
		{ .stack_id = 11, .op = "aten::addmm", .calls = 2, .self_ns = 10, .total_ns = 10,
		  .mem_self = { 512, 0 }, .mem_total = { 512, 0 } },
		{ .stack_id = 12, .op = "aten::empty", .calls = 3, .self_ns = 5, .total_ns = 5,
		  .mem_self = { 3 * 40960, 0 }, .mem_total = { 3 * 40960, 0 } },
	};
	struct layer_tree *t = NULL;
	struct tree_opts o = { .sort = TREE_SORT_SELF_MEM };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(layers_build(st, 2, ops, 2, &t), 0);
	t->has_memory = 1;
	assert_int_equal(t->top.nkids, 1);
	assert_int_equal(t->top.kids[0]->self_mem[0], 512);
	assert_int_equal(t->top.kids[0]->mem[0], 512 + 3 * 40960);
	assert_int_equal(t->top.kids[0]->kids[0]->mem[0], 3 * 40960);
	f = open_memstream(&buf, &len);
	assert_int_equal(tree_render(f, t, &o), 0);
	fclose(f);
	assert_non_null(strstr(buf, "Self CPU Mem"));
	assert_non_null(strstr(buf, "120.50 Kb"));   /* Net: 512 + 122880 */
	assert_non_null(strstr(buf, "120.00 Kb"));   /* keep */
	assert_non_null(strstr(buf, "512 b"));
	assert_null(strstr(buf, "CUDA Mem"));
	free(buf);
	layers_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_live_and_peak),
		cmocka_unit_test(test_model_many),
		cmocka_unit_test(test_capture_columns),
		cmocka_unit_test(test_lib_candidates),
		cmocka_unit_test(test_layer_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
