/* test_timeline.c - pairing enter/exit records into slices; profile and call tree from a capture. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "calltree.h"
#include "capture.h"
#include "framespans.h"
#include "fixture_capture.h"
#include "model.h"
#include "profile.h"
#include "timeline.h"

struct got {
	struct tl_slice s[32];
	uint32_t path[32][8];  /* op ids outermost first */
	int n;
	int nbegin;
	int ncuda;
	uint32_t cuda_top[4];
	void *user_seen[32];
};

static void on_begin(void *ctx, const struct tl_slice *s)
{
	struct got *g = ctx;
	/* the consumer's slot: remember begin order, check it comes back at end */
	s->frames[s->depth].user = (void *)(uintptr_t)(++g->nbegin);
}

static void on_end(void *ctx, const struct tl_slice *s)
{
	struct got *g = ctx;
	g->s[g->n] = *s;
	for (uint32_t d = 0; d <= s->depth && d < 8; d++)
		g->path[g->n][d] = s->frames[d].op_id;
	g->user_seen[g->n] = s->frames[s->depth].user;
	g->n++;
}

static void on_cuda(void *ctx, const struct tl_cuda *c)
{
	struct got *g = ctx;
	g->cuda_top[g->ncuda++] = c->top ? c->top->op_id : 0;
}

static const struct tl_slice *find(struct got *g, uint32_t tid, uint64_t begin)
{
	for (int i = 0; i < g->n; i++)
		if (g->s[i].tid == tid && g->s[i].begin_ns == T0 + begin)
			return &g->s[i];
	fail_msg("no slice tid %u begin %llu", tid, (unsigned long long)begin);
	return NULL;
}

static void check(const struct tl_slice *s, uint32_t pid, uint32_t op, uint32_t depth, uint64_t end,
		  uint64_t self, uint32_t flags, uint64_t stack)
{
	assert_int_equal(s->pid, pid);
	assert_int_equal(s->op_id, op);
	assert_int_equal(s->depth, depth);
	assert_int_equal(s->end_ns, T0 + end);
	assert_int_equal(s->self_ns, self);
	assert_int_equal(s->flags, flags);
	assert_int_equal(s->stack_id, stack);
}

static void test_pairing(void **state)
{
	struct got g = { 0 };
	struct timeline_ops ops = { on_begin, on_end, on_cuda };
	struct timeline *tl = timeline_new(&ops, &g);
	void *recs[FX_N_RECORDS];
	size_t lens[FX_N_RECORDS];
	int n = fx_records(recs, lens);
	for (int i = 0; i < n; i++)
		assert_int_equal(timeline_feed(tl, recs[i]), 0);
	assert_int_equal(g.n, 8);  /* t101's add is still open */
	timeline_finish(tl, 0);
	assert_int_equal(g.n, 9);
	assert_int_equal(g.nbegin, 9);

	/*           pid  op              depth end    self  flags         stack */
	check(find(&g, 100, 1000), 100, OP_CONV2D, 0, 10000, 3500, 0, 7);
	check(find(&g, 100, 2000), 100, OP_CONVOLUTION, 1, 7500, 5500, 0, 7);
	check(find(&g, 100, 20000), 100, OP_ADD, 0, 21234, 1234, 0, 0);
	check(find(&g, 100, 30000), 100, OP_ADD, 0, 32000, 2000, OPF_UNWOUND, 0);
	check(find(&g, 100, 40000), 100, OP_RELU, 0, 50000, 1000, 0, 0);
	check(find(&g, 100, 41000), 100, OP_ADD, 1, 50000, 9000, OPF_INFERRED, 0);
	check(find(&g, 101, 5000), 100, OP_MM, 0, 9000, 4000, OPF_INFERRED, 0);
	check(find(&g, 101, 60000), 100, OP_ADD, 0, 62001, 2001, OPF_INFERRED, 0);
	check(find(&g, 200, 3000), 200, OP_MM, 0, 4000, 1000, 0, 0);
	assert_int_equal(find(&g, 101, 5000)->launches, 1);
	assert_int_equal(find(&g, 100, 1000)->launches, 0);

	/* children end before parents; paths outermost first */
	const struct tl_slice *conv = find(&g, 100, 2000);
	int ci = conv - g.s, pi = find(&g, 100, 1000) - g.s;
	assert_true(ci < pi);
	assert_int_equal(g.path[ci][0], OP_CONV2D);
	assert_int_equal(g.path[ci][1], OP_CONVOLUTION);
	/* the user slot set at begin comes back at end (2nd begin = convolution) */
	assert_ptr_equal(g.user_seen[ci], (void *)(uintptr_t)2);

	/* CUDA records see the op on top */
	assert_int_equal(g.ncuda, 2);
	assert_int_equal(g.cuda_top[0], OP_MM);
	assert_int_equal(g.cuda_top[1], OP_ADD);

	const struct timeline_stats *st = timeline_stats(tl);
	assert_int_equal(st->slices, 9);
	assert_int_equal(st->inferred_closes, 2);
	assert_int_equal(st->orphan_exits, 1);
	assert_int_equal(st->threads, 3);
	timeline_free(tl);
}

static void test_enter_shallower_closes_and_backwards(void **state)
{
	struct got g = { 0 };
	struct timeline_ops ops = { on_begin, on_end, NULL };
	struct timeline *tl = timeline_new(&ops, &g);
	/* a(0) b(1) c(2), then a new d at depth 1: b and c lost their exits */
	struct rec_op r[] = {
		fx_op(REC_OP_ENTER, 1, 1, 100, 10, 0, 0, 5),
		fx_op(REC_OP_ENTER, 1, 1, 200, 11, 1, 0, 5),
		fx_op(REC_OP_ENTER, 1, 1, 300, 12, 2, 0, 5),
		fx_op(REC_OP_ENTER, 1, 1, 400, 13, 1, 0, 5),
		fx_op(REC_OP_EXIT, 1, 1, 350, 13, 1, 0, 5),   /* earlier than its enter */
		fx_op(REC_OP_EXIT, 1, 1, 1000, 10, 0, 0, 5),
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		assert_int_equal(timeline_feed(tl, &r[i].h), 0);
	assert_int_equal(g.n, 4);
	check(&g.s[0], 1, 12, 2, 400, 100, OPF_INFERRED, 5);
	check(&g.s[1], 1, 11, 1, 400, 100, OPF_INFERRED, 5);  /* 200 minus child 100 */
	check(&g.s[2], 1, 13, 1, 400, 0, 0, 5);               /* clamped to its begin */
	check(&g.s[3], 1, 10, 0, 1000, 900 - 200, 0, 5);
	assert_int_equal(timeline_stats(tl)->backwards, 1);
	assert_int_equal(timeline_stats(tl)->inferred_closes, 2);
	timeline_free(tl);
}

static void test_skip_records(void **state)
{
	struct got g = { 0 };
	struct timeline_ops ops = { on_begin, on_end, NULL };
	struct timeline *tl = timeline_new(&ops, &g);
	/* add::call, then add::redispatch directly inside it (OPF_SKIP), then
	 * a real child at visible depth 1 */
	struct rec_op r[] = {
		fx_op(REC_OP_ENTER, 1, 1, 100, 3, 0, 0, 0),
		fx_op(REC_OP_ENTER, 1, 1, 110, 3, 1, OPF_SKIP | OPF_REDISPATCH, 0),
		fx_op(REC_OP_ENTER, 1, 1, 120, 8, 1, 0, 0),
		fx_op(REC_OP_EXIT, 1, 1, 150, 8, 1, 0, 0),
		fx_op(REC_OP_EXIT, 1, 1, 160, 3, 1, OPF_SKIP | OPF_REDISPATCH, 0),
		fx_op(REC_OP_EXIT, 1, 1, 200, 3, 0, 0, 0),
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		assert_int_equal(timeline_feed(tl, &r[i].h), 0);
	assert_int_equal(g.n, 2);
	check(&g.s[0], 1, 8, 1, 150, 30, 0, 0);
	check(&g.s[1], 1, 3, 0, 200, 70, 0, 0);
	assert_int_equal(timeline_stats(tl)->skipped, 2);
	assert_int_equal(timeline_stats(tl)->inferred_closes, 0);
	timeline_free(tl);
}

static void test_deep_nesting(void **state)
{
	struct got g = { 0 };
	struct timeline_ops ops = { NULL, NULL, NULL };
	struct timeline *tl = timeline_new(&ops, &g);
	for (int d = 0; d < TL_MAX_DEPTH + 10; d++) {
		struct rec_op r = fx_op(REC_OP_ENTER, 1, 1, d, 1, d < 65535 ? d : 0, 0, 0);
		assert_int_equal(timeline_feed(tl, &r.h), 0);
	}
	for (int d = TL_MAX_DEPTH + 9; d >= 0; d--) {
		struct rec_op r = fx_op(REC_OP_EXIT, 1, 1, 1000 + d, 1, d, 0, 0);
		assert_int_equal(timeline_feed(tl, &r.h), 0);
	}
	const struct timeline_stats *st = timeline_stats(tl);
	assert_int_equal(st->too_deep, 10);
	assert_int_equal(st->slices, TL_MAX_DEPTH);
	assert_int_equal(st->inferred_closes, 0);
	assert_int_equal(st->orphan_exits, 0);
	timeline_free(tl);
}

/* What the cuda callback saw of each event. */
struct cuda_seen {
	int n;
	enum cuda_ev_kind kind[8];
	uint32_t pid[8], tid[8], top[8];
	uint64_t ts[8];
	const struct rec_hdr *rec[8];
};

static void on_cuda_ev(void *ctx, const struct tl_cuda *c)
{
	struct cuda_seen *g = ctx;

	assert_true(g->n < 8);
	g->kind[g->n] = c->ev.kind;
	/* the callback's own pid and tid are the decoded event's */
	assert_int_equal(c->pid, c->ev.pid);
	assert_int_equal(c->tid, c->ev.tid);
	g->pid[g->n] = c->ev.pid;
	g->tid[g->n] = c->ev.tid;
	g->ts[g->n] = c->ev.ts_ns;
	g->top[g->n] = c->top ? c->top->op_id : 0;
	g->rec[g->n] = c->rec;
	g->n++;
}

static void hdr(struct rec_hdr *h, int type, size_t size, uint32_t tid, uint64_t t)
{
	h->type = type;
	h->size = size;
	h->tid = tid;
	h->ts_ns = T0 + t;
}

/* Every record cuda_ev_decode decodes reaches the cuda callback, decoded,
 * with the op on top of its own thread (pid and tid from the record, not
 * from a thread seen before); launches count on that op only; records it
 * does not decode (a module call, a REC_MEM shorter than its layout)
 * neither call back nor open a thread. */
static void test_cuda_events(void **state)
{
	struct cuda_seen g = { 0 };
	struct got slices = { 0 };
	struct timeline_ops ops = { NULL, NULL, on_cuda_ev };
	struct timeline *tl = timeline_new(&ops, &g);
	struct rec_op enter = fx_op(REC_OP_ENTER, 7, 70, 100, OP_MM, 0, 0, 0);
	struct rec_op exit = fx_op(REC_OP_EXIT, 7, 70, 900, OP_MM, 0, 0, 0);
	struct rec_op modcall = fx_op(REC_MODCALL, 9, 90, 150, 0, 0, 0, 3);
	struct rec_launch l = { .pid = 7, .api = CU_cudaLaunchKernel, .func = 0x1234 };
	struct rec_memop mo = { .pid = 7, .api = CU_cudaMemcpy, .bytes = 4096 };
	struct rec_sync sy = { .pid = 8, .api = CU_cudaDeviceSynchronize };
	struct rec_alloc al = { .pid = 7, .api = CU_cudaMalloc, .bytes = 512 };
	struct rec_mem mem = { .pid = 7, .bytes = 64 }, short_mem = mem;
	const struct rec_hdr *in[] = { &enter.h, &l.h, &modcall.h, &mo.h, &sy.h, &al.h,
				       &short_mem.h, &mem.h, &exit.h };
	const struct timeline_stats *st;

	hdr(&l.h, REC_LAUNCH, sizeof(l), 70, 200);
	hdr(&mo.h, REC_MEMOP, sizeof(mo), 70, 300);
	hdr(&sy.h, REC_SYNC, sizeof(sy), 80, 400);   /* another process: no op open */
	hdr(&al.h, REC_ALLOC, sizeof(al), 70, 500);
	hdr(&short_mem.h, REC_MEM, sizeof(short_mem) - 8, 60, 550);
	hdr(&mem.h, REC_MEM, sizeof(mem), 70, 600);
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		assert_int_equal(timeline_feed(tl, in[i]), 0);
	assert_int_equal(g.n, 5);
	enum cuda_ev_kind kinds[] = { CEV_LAUNCH, CEV_MEMOP, CEV_SYNC, CEV_ALLOC, CEV_MEM };
	uint32_t pids[] = { 7, 7, 8, 7, 7 }, tids[] = { 70, 70, 80, 70, 70 };
	uint32_t tops[] = { OP_MM, OP_MM, 0, OP_MM, OP_MM };
	const struct rec_hdr *recs[] = { &l.h, &mo.h, &sy.h, &al.h, &mem.h };
	uint64_t ts[] = { 200, 300, 400, 500, 600 };

	for (int i = 0; i < 5; i++) {
		assert_int_equal(g.kind[i], kinds[i]);
		assert_int_equal(g.pid[i], pids[i]);
		assert_int_equal(g.tid[i], tids[i]);
		assert_int_equal(g.top[i], tops[i]);
		assert_int_equal(g.ts[i], T0 + ts[i]);
		assert_ptr_equal(g.rec[i], recs[i]);
	}
	st = timeline_stats(tl);
	assert_int_equal(st->threads, 2);   /* (7, 70) and (8, 80) only */
	assert_int_equal(st->slices, 1);
	timeline_free(tl);

	/* the launch counted on the op it ran under, the other calls not */
	ops = (struct timeline_ops){ NULL, on_end, NULL };
	tl = timeline_new(&ops, &slices);
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		assert_int_equal(timeline_feed(tl, in[i]), 0);
	assert_int_equal(slices.n, 1);
	assert_int_equal(slices.s[0].launches, 1);
	timeline_free(tl);
}

struct spans_got { char log[2048]; };

static void sp_open(void *ctx, const struct fspan *s)
{
	struct spans_got *g = ctx;
	char n[64];
	snprintf(g->log + strlen(g->log), sizeof(g->log) - strlen(g->log), "open %s@%u %llu\n",
		 fspan_frame_name(s->frame, n, sizeof(n)), s->depth, (unsigned long long)(s->begin_ns - T0));
}

static void sp_close(void *ctx, const struct fspan *s)
{
	struct spans_got *g = ctx;
	char n[64];
	snprintf(g->log + strlen(g->log), sizeof(g->log) - strlen(g->log), "close %s@%u %llu-%llu\n",
		 fspan_frame_name(s->frame, n, sizeof(n)), s->depth, (unsigned long long)(s->begin_ns - T0),
		 (unsigned long long)(s->end_ns - T0));
}

struct both { struct fspans *fs; };
static void fb(void *ctx, const struct tl_slice *s) { fspans_slice_begin(((struct both *)ctx)->fs, s); }
static void fe(void *ctx, const struct tl_slice *s) { fspans_slice_end(((struct both *)ctx)->fs, s); }

static void test_frame_spans(void **state)
{
	/* stack 1: main(line 5) > Net > a ; stack 2: main(line 6) > Net > b ;
	 * stack 3: main(line 7) only.  Ops: s1 [0,10) s1 [20,30) s2 [40,50)
	 * (with a nested op) s3 [60,70) s0 [80,90) */
	struct capture_meta m;
	capture_meta_init(&m);
	struct capture_frame s1[] = { { CF_LAYER, 0, "a", "", "A", "net.a" }, { CF_LAYER, 0, "Net", "", "Net", "" },
				      { CF_PYTHON, 5, "main", "/t/x.py", "", "" } };
	struct capture_frame s2[] = { { CF_LAYER, 0, "b", "", "B", "net.b" }, { CF_LAYER, 0, "Net", "", "Net", "" },
				      { CF_PYTHON, 6, "main", "/t/x.py", "", "" } };
	struct capture_frame s3[] = { { CF_PYTHON, 7, "main", "/t/x.py", "", "" } };
	assert_int_equal(capture_meta_add_stack(&m, 1, 1, s1, 3), 0);
	assert_int_equal(capture_meta_add_stack(&m, 1, 2, s2, 3), 0);
	assert_int_equal(capture_meta_add_stack(&m, 1, 3, s3, 1), 0);
	capture_meta_finish(&m);
	struct spans_got g = { "" };
	struct fspan_ops sops = { sp_open, sp_close };
	struct both b = { fspans_new(&m, &sops, &g) };
	struct timeline_ops ops = { fb, fe, NULL };
	struct timeline *tl = timeline_new(&ops, &b);
	struct rec_op r[] = {
		fx_op(REC_OP_ENTER, 1, 1, 0, 1, 0, 0, 1), fx_op(REC_OP_EXIT, 1, 1, 10, 1, 0, 0, 1),
		fx_op(REC_OP_ENTER, 1, 1, 20, 1, 0, 0, 1), fx_op(REC_OP_EXIT, 1, 1, 30, 1, 0, 0, 1),
		fx_op(REC_OP_ENTER, 1, 1, 40, 2, 0, 0, 2), fx_op(REC_OP_ENTER, 1, 1, 42, 3, 1, 0, 2),
		fx_op(REC_OP_EXIT, 1, 1, 44, 3, 1, 0, 2), fx_op(REC_OP_EXIT, 1, 1, 50, 2, 0, 0, 2),
		fx_op(REC_OP_ENTER, 1, 1, 60, 2, 0, 0, 3), fx_op(REC_OP_EXIT, 1, 1, 70, 2, 0, 0, 3),
		fx_op(REC_OP_ENTER, 1, 1, 80, 2, 0, 0, 0), fx_op(REC_OP_EXIT, 1, 1, 90, 2, 0, 0, 0),
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		assert_int_equal(timeline_feed(tl, &r[i].h), 0);
	timeline_finish(tl, 0);
	fspans_finish(b.fs);
	assert_string_equal(g.log,
		"open x.py:main@0 0\nopen Net@1 0\nopen a@2 0\n"
		"close a@2 0-30\nopen b@2 40\n"
		"close b@2 40-50\nclose Net@1 0-50\n"
		"close x.py:main@0 0-70\n");
	timeline_free(tl);
	fspans_free(b.fs);
	capture_meta_free(&m);
}

static char dir[] = "/tmp/tbpf-test-timeline-XXXXXX";
static char path[256];

static int setup(void **state)
{
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/run.tbpf", dir);
	return fx_write(path);
}

static int teardown(void **state)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static const struct prof_op *row(const struct prof_op *rows, size_t n, uint32_t pid, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].pid == pid && !strcmp(rows[i].name, name))
			return &rows[i];
	fail_msg("no row %u %s", pid, name);
	return NULL;
}

static void test_profile_from_capture(void **state)
{
	struct capture_reader *r = capture_reader_open(path);
	struct profile p;
	profile_init(&p);
	assert_int_equal(profile_from_capture(r, &p), 0);
	assert_int_equal(p.npids, 2);
	assert_int_equal(p.duration_ns, 70000);
	assert_int_equal(p.events_dropped, 5);
	assert_int_equal(p.probes_attached, 5904);
	assert_string_equal(p.exit_mode, "duration");
	assert_false(p.has_gpu_times);
	assert_string_equal(p.gpu_note, "no CUPTI activity (no GPU)");

	/* by (pid, name, overload) */
	struct prof_op *rows;
	size_t n;
	assert_int_equal(profile_fold(&p, PROF_BY_PID | PROF_BY_OVERLOAD, &rows, &n), 0);
	assert_int_equal(n, 6);
	const struct prof_op *o = row(rows, n, 100, "aten::add");
	assert_string_equal(o->overload, "Tensor");
	assert_int_equal(o->calls, 4);
	assert_int_equal(o->total_ns, 1234 + 2000 + 9000 + 2001);
	assert_int_equal(o->self_ns, 1234 + 2000 + 9000 + 2001);
	assert_int_equal(o->max_ns, 9000);
	assert_int_equal(o->inferred, 3);
	o = row(rows, n, 100, "aten::mm");
	assert_int_equal(o->calls, 1);
	assert_int_equal(o->launches, 1);
	assert_int_equal(o->inferred, 1);
	o = row(rows, n, 200, "aten::mm");
	assert_int_equal(o->total_ns, 1000);
	o = row(rows, n, 100, "aten::conv2d");
	assert_int_equal(o->self_ns, 3500);
	assert_int_equal(o->total_ns, 9000);
	free(rows);

	/* by name: the table's rows; sort orders */
	assert_int_equal(profile_fold(&p, PROF_BY_NAME, &rows, &n), 0);
	assert_int_equal(n, 5);
	assert_int_equal(profile_sort(rows, n, "self_cpu_time_total"), 0);
	const char *by_self[] = { "aten::add", "aten::convolution", "aten::mm", "aten::conv2d", "aten::relu" };
	for (size_t i = 0; i < n; i++)
		assert_string_equal(rows[i].name, by_self[i]);
	assert_int_equal(rows[2].calls, 2);
	assert_int_equal(rows[2].total_ns, 5000);
	assert_int_equal(rows[0].overload[0], 0);
	assert_int_equal(profile_sort(rows, n, "cpu_time_total"), 0);
	const char *by_total[] = { "aten::add", "aten::relu", "aten::conv2d", "aten::convolution", "aten::mm" };
	for (size_t i = 0; i < n; i++)
		assert_string_equal(rows[i].name, by_total[i]);
	/* averages: relu 10000, conv2d 9000, convolution 5500, add 3558.75, mm 2500 */
	assert_int_equal(profile_sort(rows, n, "cpu_time"), 0);
	const char *by_avg[] = { "aten::relu", "aten::conv2d", "aten::convolution", "aten::add", "aten::mm" };
	for (size_t i = 0; i < n; i++)
		assert_string_equal(rows[i].name, by_avg[i]);
	/* count, ties by name */
	assert_int_equal(profile_sort(rows, n, "count"), 0);
	const char *by_count[] = { "aten::add", "aten::mm", "aten::conv2d", "aten::convolution", "aten::relu" };
	for (size_t i = 0; i < n; i++)
		assert_string_equal(rows[i].name, by_count[i]);
	assert_int_equal(profile_sort(rows, n, "bogus"), -EINVAL);
	free(rows);
	profile_free(&p);
	capture_reader_close(r);
}

static void test_profile_add_merges(void **state)
{
	struct profile p;
	profile_init(&p);
	char name[32];
	strcpy(name, "aten::add");
	struct prof_op a = { .pid = 1, .op_id = 3, .name = name, .overload = "Tensor", .calls = 2,
			     .self_ns = 10, .total_ns = 20, .max_ns = 15 };
	assert_int_equal(profile_add_op(&p, &a), 0);
	strcpy(name, "changed");  /* names are copied */
	a.max_ns = 12;
	assert_int_equal(profile_add_op(&p, &a), 0);
	a.stack_id = 9;
	assert_int_equal(profile_add_op(&p, &a), 0);
	for (int i = 0; i < 5000; i++) {  /* force rehashing */
		struct prof_op b = { .pid = 2, .op_id = i, .name = "x", .calls = 1 };
		assert_int_equal(profile_add_op(&p, &b), 0);
	}
	assert_int_equal(p.nops, 5002);
	assert_string_equal(p.ops[0].name, "aten::add");
	assert_int_equal(p.ops[0].calls, 4);
	assert_int_equal(p.ops[0].total_ns, 40);
	assert_int_equal(p.ops[0].max_ns, 15);
	struct prof_op b = { .pid = 2, .op_id = 4999, .name = "x", .calls = 1 };
	assert_int_equal(profile_add_op(&p, &b), 0);
	assert_int_equal(p.nops, 5002);
	assert_int_equal(p.ops[5001].calls, 2);
	profile_free(&p);
}

static void test_profile_from_map_entries(void **state)
{
	/* the live table mode: two map entries of one op (two Python stacks) */
	struct profile p;
	profile_init(&p);
	struct tbpf_opkey k1 = { .pid = 7, .op_id = 3, .stack_id = 1 }, k2 = { .pid = 7, .op_id = 3, .stack_id = 2 };
	struct tbpf_opstat v1 = { .calls = 10, .self_ns = 100, .total_ns = 300, .launches = 1, .inferred = 2, .max_ns = 50 };
	struct tbpf_opstat v2 = { .calls = 5, .self_ns = 40, .total_ns = 60, .max_ns = 70 };
	assert_int_equal(profile_add_opstat(&p, &k1, &v1, "aten::add", "Tensor"), 0);
	assert_int_equal(profile_add_opstat(&p, &k2, &v2, "aten::add", "Tensor"), 0);
	assert_int_equal(p.nops, 2);
	struct prof_op *rows;
	size_t n;
	assert_int_equal(profile_fold(&p, PROF_BY_NAME, &rows, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].calls, 15);
	assert_int_equal(rows[0].self_ns, 140);
	assert_int_equal(rows[0].total_ns, 360);
	assert_int_equal(rows[0].max_ns, 70);
	assert_int_equal(rows[0].launches, 1);
	assert_int_equal(rows[0].inferred, 2);
	assert_int_equal(rows[0].op_id, 3);
	free(rows);
	profile_free(&p);
}

static void path_str(const struct calltree *ct, uint32_t node, char *out, size_t len)
{
	uint32_t fr[64];
	calltree_path(ct, node, fr);
	out[0] = 0;
	for (uint32_t d = 0; d < ct->nodes[node].depth; d++) {
		const struct ct_frame *f = &ct->frames[fr[d]];
		snprintf(out + strlen(out), len - strlen(out), "%s%s", d ? ";" : "", f->name);
	}
}

static void test_calltree_from_capture(void **state)
{
	struct capture_reader *r = capture_reader_open(path);
	struct calltree ct;
	assert_int_equal(calltree_init(&ct), 0);
	assert_int_equal(calltree_from_capture(r, &ct), 0);
	struct { const char *path; uint64_t self, calls; } want[] = {
		{ "main;Net;blocks.0;conv;aten::conv2d", 3500, 1 },
		{ "main;Net;blocks.0;conv;aten::conv2d;aten::convolution", 5500, 1 },
		{ "aten::add", 1234 + 2000 + 2001, 3 },
		{ "aten::relu", 1000, 1 },
		{ "aten::relu;aten::add", 9000, 1 },
		{ "aten::mm", 5000, 2 },
		/* intermediate nodes of the Python stack carry nothing */
		{ "main", 0, 0 }, { "main;Net", 0, 0 }, { "main;Net;blocks.0", 0, 0 },
		{ "main;Net;blocks.0;conv", 0, 0 },
	};
	size_t nw = sizeof(want) / sizeof(want[0]);
	assert_int_equal(ct.nnodes, 1 + nw);
	for (size_t i = 1; i < ct.nnodes; i++) {
		char p[512];
		path_str(&ct, i, p, sizeof(p));
		size_t k;
		for (k = 0; k < nw; k++)
			if (!strcmp(want[k].path, p))
				break;
		if (k == nw)
			fail_msg("unexpected stack %s", p);
		assert_int_equal(ct.nodes[i].self_ns, want[k].self);
		assert_int_equal(ct.nodes[i].calls, want[k].calls);
	}
	/* the Python frame keeps file and line */
	uint32_t py = calltree_frame(&ct, CT_PYTHON, "main", "/home/u/train.py", 10);
	assert_int_equal(ct.frames[py].line, 10);
	assert_int_equal(ct.nframes, 9);  /* 4 stack frames + 5 ops: no new frame was made */
	calltree_free(&ct);
	capture_reader_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pairing),
		cmocka_unit_test(test_enter_shallower_closes_and_backwards),
		cmocka_unit_test(test_skip_records),
		cmocka_unit_test(test_frame_spans),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_cuda_events),
		cmocka_unit_test(test_profile_from_capture),
		cmocka_unit_test(test_profile_add_merges),
		cmocka_unit_test(test_profile_from_map_entries),
		cmocka_unit_test(test_calltree_from_capture),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
