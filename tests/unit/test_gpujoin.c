/* test_gpujoin.c - the GPU join on fixtures generated from the real CUPTI
 * structs (tests/native/cupti/gen_fixtures.c, scenario in
 * tests/fixtures/cupti/README.md).  Every expected number below is worked
 * out by hand from that scenario, not copied from the join's output. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpujoin.h"

#define SHIFT 1763000000000000000ll
#define GEMM "void at::native::(anonymous namespace)::gemm_kernel<float, 128, 64, 8>" \
	     "(int, int, int, float const*, float const*, float*)"

struct fixture {
	char *buf;
	struct gj_host host[64];
	size_t nhost;
	struct rec_gpu gpu[64];
	size_t ngpu;
	struct rec_gpu_name names[8];
	size_t nnames;
	struct gj_op_span spans[32];
	size_t nspans;
};

static void load(struct fixture *f, const char *name)
{
	char path[512];
	const char *dir = getenv("TBPF_FIXTURES");
	snprintf(path, sizeof(path), "%s/cupti/%s", dir ? dir : "tests/fixtures", name);
	FILE *fp = fopen(path, "rb");
	if (!fp)
		fail_msg("cannot open %s (run from the repository root)", path);
	memset(f, 0, sizeof(*f));
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf), fp);
	fclose(fp);
	struct { uint32_t tid; struct rec_op op; } open[16];
	size_t nopen = 0;
	for (size_t off = 0; off + sizeof(struct rec_hdr) <= n;) {
		const struct rec_hdr *h = (const void *)(buf + off);
		assert_true(h->size >= sizeof(*h) && off + h->size <= n && h->size % 8 == 0);
		switch (h->type) {
		case REC_LAUNCH:
			gj_host_from_launch(&f->host[f->nhost++], (const void *)h);
			break;
		case REC_MEMOP:
			gj_host_from_memop(&f->host[f->nhost++], (const void *)h);
			break;
		case REC_OP_ENTER:
			open[nopen].tid = h->tid;
			memcpy(&open[nopen++].op, h, sizeof(struct rec_op));
			break;
		case REC_OP_EXIT: {
			const struct rec_op *x = (const void *)h;
			size_t k = nopen;
			while (k-- > 0)
				if (open[k].tid == h->tid && open[k].op.op_id == x->op_id)
					break;
			assert_true(k < nopen);
			f->spans[f->nspans++] = (struct gj_op_span){
				open[k].op.h.ts_ns, h->ts_ns, open[k].op.stack_id, h->tid, x->op_id };
			open[k] = open[--nopen];
			break;
		}
		case REC_GPU: {
			const struct rec_gpu *g = (const void *)h;
			if (g->kind == GPU_NAME)
				memcpy(&f->names[f->nnames++], h, sizeof(struct rec_gpu_name));
			else
				memcpy(&f->gpu[f->ngpu++], h, sizeof(struct rec_gpu));
			break;
		}
		default:
			fail_msg("unexpected record type %u", h->type);
		}
		off += h->size;
	}
	assert_int_equal(nopen, 0);
}

static struct gj_input input(const struct fixture *f)
{
	return (struct gj_input){ f->host, f->nhost, f->gpu, f->ngpu, f->names, f->nnames,
				  f->spans, f->nspans, 0, 0 };
}

/* The fixture itself: what the decoder made of the real structs. */
static void test_fixture_decoded(void **state)
{
	struct fixture f;
	load(&f, "join_mono.bin");
	assert_int_equal(f.nhost, 7);   /* 5 launches + 2 memops */
	assert_int_equal(f.ngpu, 16);   /* 8 device + 8 API; 2 invalid dropped */
	assert_int_equal(f.nnames, 1);  /* only the GEMM name is too long */
	assert_int_equal(f.nspans, 6);
	assert_string_equal(f.names[0].name, GEMM);
	assert_int_equal(f.names[0].len, strlen(GEMM));
	int seen = 0;
	for (size_t i = 0; i < f.ngpu; i++) {
		const struct rec_gpu *g = &f.gpu[i];
		assert_int_not_equal(g->correlation, 555); /* end < start: rejected */
		if (g->correlation == 101 && g->kind == GPU_KERNEL) {
			seen++;
			assert_int_equal(g->flags & GPUF_NAME_TRUNC, GPUF_NAME_TRUNC);
			assert_int_equal(g->name_id, f.names[0].name_id);
			assert_memory_equal(g->name, GEMM, TBPF_GPU_SHORT_NAME - 1);
			assert_int_equal(g->grid[0], 256);
			assert_int_equal(g->block[0], 128);
			assert_int_equal(g->start_ns, 1006000);
			assert_int_equal(g->end_ns, 1056000);
			assert_int_equal(g->stream, 7);
		}
		if (g->correlation == 103 && g->kind != GPU_API_RUNTIME) {
			seen++;
			assert_int_equal(g->kind, GPU_MEMCPY);
			assert_int_equal(g->bytes, 4096);
			assert_int_equal(g->copy_kind, 1); /* CUPTI_ACTIVITY_MEMCPY_KIND_HTOD */
		}
		if (g->correlation == 105 && g->kind == GPU_API_DRIVER) {
			seen++;
			assert_int_equal(g->h.tid, 1002);
			assert_int_equal(g->cbid, 307); /* cuLaunchKernel */
		}
	}
	assert_int_equal(seen, 3);
}

struct exp_dev {
	uint32_t device, stream, corr, kind, op, stack, tid;
	uint64_t start, end, launch, flow;
};

/* Hand-worked attribution (see README): device, stream, start order. */
static const struct exp_dev expect[] = {
	{ 0, 7, 101, GPU_KERNEL, 7, 0xA1, 1001, 1006000, 1056000, 1000000, 101 },
	{ 0, 7, 103, GPU_MEMCPY, 7, 0xA1, 1001, 1056500, 1058500, 1010000, 103 },
	{ 0, 7, 104, GPU_KERNEL, 9, 0xA1, 1001, 1058600, 1061600, 1020000, 104 },
	{ 0, 7, 106, GPU_MEMSET, 7, 0xA1, 1001, 1061700, 1062200, 1030000, 106 },
	{ 0, 7, 107, GPU_KERNEL, 9, 0xA1, 1001, 1062300, 1066300, 1040000, 107 },
	{ 0, 7, 999, GPU_KERNEL, 0, 0, 0, 1070000, 1071000, 0, 0 },       /* API lost */
	{ 0, 13, 105, GPU_KERNEL, 11, 0xB2, 1002, 1017000, 1037000, 1015000, 105 },
	{ 1, 21, 108, GPU_KERNEL, 0, 0, 1002, 1052000, 1053000, 0, 0 },   /* no probe */
};

static void check_join(const struct gj_result *r, int64_t shift_back)
{
	assert_int_equal(r->ndev, 8);
	for (size_t i = 0; i < 8; i++) {
		const struct gj_dev *d = &r->dev[i];
		const struct exp_dev *e = &expect[i];
		assert_int_equal(d->device, e->device);
		assert_int_equal(d->stream, e->stream);
		assert_int_equal(d->correlation, e->corr);
		assert_int_equal(d->kind, e->kind);
		assert_int_equal(d->op_id, e->op);
		assert_int_equal(d->stack_id, e->stack);
		assert_int_equal(d->tid, e->tid);
		assert_int_equal(d->start_ns, e->start + shift_back);
		assert_int_equal(d->end_ns, e->end + shift_back);
		assert_int_equal(d->end_ns - d->start_ns, e->end - e->start);
		assert_int_equal(d->launch_ts_ns, e->launch);
		assert_int_equal(d->flow_id, e->flow);
		assert_int_equal(d->host_idx >= 0, e->op != 0);
	}
	assert_string_equal(r->dev[0].name, GEMM);
	assert_int_equal(r->dev[1].bytes, 4096);
	assert_null(r->dev[1].name);

	assert_int_equal(r->counts.device, 8);
	assert_int_equal(r->counts.api, 8);
	assert_int_equal(r->counts.attributed, 6);
	assert_int_equal(r->counts.no_api, 1);
	assert_int_equal(r->counts.no_host, 1);
	assert_int_equal(r->counts.unattributed_ns, 2000);

	/* op 7: 50000 (gemm) + 2000 (H2D) + 500 (memset); op 11: 20000;
	 * op 9: 3000 + 4000; op 3 (aten::linear) launches nothing itself but
	 * encloses the gemm and the copy: total 52000. */
	assert_int_equal(r->nops, 4);
	const struct { uint32_t op, stack; uint64_t self, total, k, c, s; } ops[] = {
		{ 7, 0xA1, 52500, 52500, 1, 1, 1 },
		{ 11, 0xB2, 20000, 20000, 1, 0, 0 },
		{ 9, 0xA1, 7000, 7000, 2, 0, 0 },
		{ 3, 0xA1, 0, 52000, 0, 0, 0 },
	};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(r->ops[i].op_id, ops[i].op);
		assert_int_equal(r->ops[i].stack_id, ops[i].stack);
		assert_int_equal(r->ops[i].self_cuda_ns, ops[i].self);
		assert_int_equal(r->ops[i].total_cuda_ns, ops[i].total);
		assert_int_equal(r->ops[i].kernels, ops[i].k);
		assert_int_equal(r->ops[i].memcpys, ops[i].c);
		assert_int_equal(r->ops[i].memsets, ops[i].s);
	}

	assert_int_equal(r->nkernels, 5);
	const struct { const char *name; uint64_t n, total, min, max; } ks[] = {
		{ GEMM, 1, 50000, 50000, 50000 },
		{ "ampere_sgemm_128x64_nn", 1, 20000, 20000, 20000 },
		{ "relu_kernel", 2, 7000, 3000, 4000 },
		{ "lost_api_kernel", 1, 1000, 1000, 1000 },   /* ties by name */
		{ "orphan_kernel", 1, 1000, 1000, 1000 },
	};
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(r->kernels[i].name, ks[i].name);
		assert_int_equal(r->kernels[i].count, ks[i].n);
		assert_int_equal(r->kernels[i].total_ns, ks[i].total);
		assert_int_equal(r->kernels[i].min_ns, ks[i].min);
		assert_int_equal(r->kernels[i].max_ns, ks[i].max);
	}
}

static void test_join_monotonic(void **state)
{
	struct fixture f;
	struct gj_result r;
	load(&f, "join_mono.bin");
	struct gj_input in = input(&f);
	assert_int_equal(gpujoin_run(&in, &r), 0);
	assert_int_equal(r.clock_offset_ns, 0);
	assert_int_equal(r.offset_estimated, 0);
	check_join(&r, 0);
	gpujoin_free(&r);
}

/* Same scenario stamped by CUPTI's default CLOCK_REALTIME (+SHIFT). The
 * true pairs give d = host - api.start = -SHIFT - delta with delta in
 * {400, 100, 300, 200, 100, 250, 300}: 7 pairs, estimate -SHIFT - 100, so
 * every device time lands 100 ns early and every duration is exact. */
static void test_join_realtime_estimated(void **state)
{
	struct fixture f;
	struct gj_result r;
	load(&f, "join_realtime.bin");
	struct gj_input in = input(&f);
	in.estimate_offset = 1;
	assert_int_equal(gpujoin_run(&in, &r), 0);
	assert_int_equal(r.offset_estimated, 1);
	assert_int_equal(r.clock_offset_ns, -SHIFT - 100);
	assert_int_equal(r.counts.offset_pairs, 7);
	check_join(&r, -100);
	gpujoin_free(&r);
}

static void test_join_realtime_given_offset(void **state)
{
	struct fixture f;
	struct gj_result r;
	load(&f, "join_realtime.bin");
	struct gj_input in = input(&f);
	in.clock_offset_ns = -SHIFT;
	assert_int_equal(gpujoin_run(&in, &r), 0);
	check_join(&r, 0);
	gpujoin_free(&r);
}

/* Unaligned clocks attribute nothing: the alignment is what makes it work. */
static void test_join_realtime_unaligned(void **state)
{
	struct fixture f;
	struct gj_result r;
	load(&f, "join_realtime.bin");
	struct gj_input in = input(&f);
	assert_int_equal(gpujoin_run(&in, &r), 0);
	assert_int_equal(r.counts.attributed, 0);
	assert_int_equal(r.counts.no_host, 7);
	assert_int_equal(r.nops, 0);
	gpujoin_free(&r);
}

/* Without op spans, CUDA total falls back to self. */
static void test_join_without_spans(void **state)
{
	struct fixture f;
	struct gj_result r;
	load(&f, "join_mono.bin");
	struct gj_input in = input(&f);
	in.nspans = 0;
	assert_int_equal(gpujoin_run(&in, &r), 0);
	assert_int_equal(r.nops, 3);
	assert_int_equal(r.ops[0].op_id, 7);
	assert_int_equal(r.ops[0].total_cuda_ns, 52500);
	assert_int_equal(r.ops[2].op_id, 9);
	assert_int_equal(r.ops[2].total_cuda_ns, 7000);
	gpujoin_free(&r);
}

/* Record order must not matter: reverse both inputs. */
static void test_join_order_independent(void **state)
{
	struct fixture f, g;
	struct gj_result r;
	load(&f, "join_mono.bin");
	g = f;
	for (size_t i = 0; i < f.nhost; i++)
		g.host[i] = f.host[f.nhost - 1 - i];
	for (size_t i = 0; i < f.ngpu; i++)
		g.gpu[i] = f.gpu[f.ngpu - 1 - i];
	struct gj_input in = input(&g);
	assert_int_equal(gpujoin_run(&in, &r), 0);
	check_join(&r, 0);
	gpujoin_free(&r);
}

/* ---- scenarios built call by call: what the match may pair ---- */
/* One event of a thread: 'p' tbpf's probe on cuLaunchKernel fired at ts
 * with op arg on top; 'c' CUPTI's records of one cuLaunchKernel: its
 * driver API record from ts (1 us long) and the kernel, arg ns, 50 us
 * later; 'd' the same with the API record dropped by CUPTI. */
struct ev {
	char what;
	uint32_t tid;
	uint64_t ts, arg;
};

/* what the join must give: counts, unattributed device ns, then Self
 * CUDA per op (op 0 ends the list; 0 ns: the op got nothing) */
struct want {
	uint64_t attributed, no_host, no_api, unattributed_ns;
	uint64_t self[6][2];
};

struct calls {
	struct gj_host host[32];
	size_t nhost;
	struct rec_gpu gpu[64];
	size_t ngpu;
};

static void build(struct calls *c, const struct ev *e, size_t n, int64_t shift)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		if (e[i].what == 'p') {
			c->host[c->nhost++] = (struct gj_host){ e[i].ts, e[i].tid, CU_cuLaunchKernel,
								(uint32_t)e[i].arg, 1 };
			continue;
		}
		uint32_t corr = 100 + (uint32_t)i;
		struct rec_gpu *g;
		if (e[i].what == 'c') {
			g = &c->gpu[c->ngpu++];
			g->h.tid = e[i].tid;
			g->kind = GPU_API_DRIVER;
			g->start_ns = e[i].ts + shift;
			g->end_ns = g->start_ns + 1000;
			g->correlation = corr;
		}
		g = &c->gpu[c->ngpu++];
		g->kind = GPU_KERNEL;
		g->start_ns = e[i].ts + shift + 50000;
		g->end_ns = g->start_ns + e[i].arg;
		g->correlation = corr;
		g->stream = 7;
	}
}

/* Self CUDA of op (0: no row) */
static uint64_t self_of(const struct gj_result *r, uint32_t op)
{
	for (size_t i = 0; i < r->nops; i++)
		if (r->ops[i].op_id == op)
			return r->ops[i].self_cuda_ns;
	return 0;
}

/* Join the events (CUPTI's clock shift ns off, estimate: GJ_OFFSET_*)
 * and check the result against w; r is left for more checks. */
static void join(const struct ev *e, size_t n, int64_t shift, int estimate, const struct want *w,
		 struct gj_result *r)
{
	static struct calls c;
	build(&c, e, n, shift);
	struct gj_input in = { c.host, c.nhost, c.gpu, c.ngpu, NULL, 0, NULL, 0, estimate, 0 };
	assert_int_equal(gpujoin_run(&in, r), 0);
	assert_int_equal(r->counts.attributed, w->attributed);
	assert_int_equal(r->counts.no_host, w->no_host);
	assert_int_equal(r->counts.no_api, w->no_api);
	assert_int_equal(r->counts.unattributed_ns, w->unattributed_ns);
	for (size_t i = 0; i < 6 && w->self[i][0]; i++)
		assert_int_equal(self_of(r, (uint32_t)w->self[i][0]), w->self[i][1]);
}

#define NEV(ev) (sizeof(ev) / sizeof(ev[0]))

struct scenario {
	const struct ev *ev;
	size_t n;
	struct want w;
};

static void test_scenario(void **state)
{
	const struct scenario *sc = *state;
	struct gj_result r;
	join(sc->ev, sc->n, 0, GJ_OFFSET_GIVEN, &sc->w, &r);
	gpujoin_free(&r);
}

/* A call whose API record starts 45 us after its host probe (a uprobe's
 * first hit in a process: 13-37 us measured here) is still joined, and a
 * second launch 3 us after the first takes its own host record. */
static const struct ev slow_first_hit[] = {
	{ 'p', 7, 1000000, 5 }, { 'c', 7, 1045000, 1000 },
	{ 'p', 7, 1048000, 6 }, { 'c', 7, 1048500, 2000 },
	{ 'p', 7, 1051000, 6 }, { 'c', 7, 1051400, 3000 },
};

/* The thread is preempted for 4 ms between the probe and CUPTI's API
 * start (beside busy loops: up to 8-15 ms measured): the call still gets
 * its host record, its neighbours theirs. */
static const struct ev preempted[] = {
	{ 'p', 7, 1000000, 1 }, { 'c', 7, 1000500, 1000 },
	{ 'p', 7, 1010000, 2 }, { 'c', 7, 1010000 + 4000000, 2000 },
	{ 'p', 7, 5020000, 3 }, { 'c', 7, 5020400, 4000 },
	{ 'p', 7, 5030000, 3 }, { 'c', 7, 5030300, 4000 },
};

/* Two threads launching at once, one preempted 1.5 ms after its probe
 * while the other makes two calls: each call joins its own thread's
 * host record. */
static const struct ev interleaved[] = {
	{ 'p', 7, 1000000, 1 },
	{ 'p', 8, 1001000, 2 }, { 'c', 8, 1001300, 2000 },
	{ 'p', 8, 1003000, 2 }, { 'c', 8, 1003300, 2000 },
	{ 'c', 7, 2500000, 1000 },
	{ 'p', 7, 2600000, 3 }, { 'p', 8, 2600100, 4 },
	{ 'c', 8, 2600400, 8000 }, { 'c', 7, 2600500, 16000 },
};

/* CUPTI dropped the API record of op 2's launch: its kernel is not
 * attributed, and the later calls (one preempted 3 ms) keep their own
 * host records, none moves onto op 2's. */
static const struct ev dropped_api[] = {
	{ 'p', 7, 1000000, 1 }, { 'c', 7, 1000500, 1000 },
	{ 'p', 7, 1010000, 2 }, { 'd', 7, 1010500, 2000 },
	{ 'p', 7, 1020000, 3 }, { 'c', 7, 1020000 + 3000000, 4000 },
	{ 'p', 7, 4030000, 4 }, { 'c', 7, 4030500, 8000 },
};

/* The probe missed the second launch (op 5's host record is there, its
 * call's CUPTI records are not; then op 1's call, then one with no host
 * record, then op 3's): that call's kernel stays unattributed instead of
 * taking op 5's older host record, 20 us before, or op 3's after it. */
static const struct ev missing_host[] = {
	{ 'p', 7, 990000, 5 },
	{ 'p', 7, 1000000, 1 }, { 'c', 7, 1000500, 1000 },
	{ 'c', 7, 1010000, 2000 },
	{ 'p', 7, 1020000, 3 }, { 'c', 7, 1020500, 4000 },
};

static const struct scenario scenarios[] = {
	{ slow_first_hit, NEV(slow_first_hit), { 3, 0, 0, 0, { { 5, 1000 }, { 6, 5000 } } } },
	{ preempted, NEV(preempted), { 4, 0, 0, 0, { { 1, 1000 }, { 2, 2000 }, { 3, 8000 } } } },
	{ interleaved, NEV(interleaved),
	  { 5, 0, 0, 0, { { 1, 1000 }, { 2, 4000 }, { 3, 16000 }, { 4, 8000 } } } },
	{ dropped_api, NEV(dropped_api),
	  { 3, 0, 1, 2000, { { 1, 1000 }, { 2, 0 }, { 3, 4000 }, { 4, 8000 } } } },
	{ missing_host, NEV(missing_host), { 2, 1, 0, 2000, { { 5, 0 }, { 1, 1000 }, { 3, 4000 } } } },
};

/* The preempted thread with CUPTI's clock 1.76e18 ns off and the offset
 * estimated: the preempted pair lies outside the densest window (deltas
 * 500, 4000000, 400, 300 give -SHIFT - 300 from 3 pairs), the join is the
 * same. */
static void test_join_preempted_estimated(void **state)
{
	(void)state;
	struct gj_result r;
	join(preempted, NEV(preempted), SHIFT, GJ_OFFSET_ESTIMATE, &scenarios[1].w, &r);
	assert_int_equal(r.clock_offset_ns, -SHIFT - 300);
	assert_int_equal(r.counts.offset_pairs, 3);
	gpujoin_free(&r);
}

/* CUDA total with a span whose op's exit was lost (it ends after a span
 * that began inside it): once over, it must not take later launches,
 * nor keep the spans under it open.  Op 1 [0, 100 us) holds the launch
 * at 50 us; op 2 [10, 500 us) holds both; op 3 [300, 400 us) the one at
 * 350 us. */
static uint64_t total_of(const struct gj_result *r, uint32_t op)
{
	for (size_t i = 0; i < r->nops; i++)
		if (r->ops[i].op_id == op)
			return r->ops[i].total_cuda_ns;
	return 0;
}

static void test_total_overlapping_spans(void **state)
{
	static const struct ev e[] = {
		{ 'p', 1, 50000, 2 }, { 'c', 1, 50000, 7000 },
		{ 'p', 1, 350000, 3 }, { 'c', 1, 350000, 9000 },
	};
	static const struct gj_op_span sp[] = {
		{ 0, 100000, 1, 1, 1 }, { 10000, 500000, 1, 1, 2 }, { 300000, 400000, 1, 1, 3 },
	};
	static struct calls c;
	struct gj_result r;

	build(&c, e, NEV(e), 0);
	struct gj_input in = { c.host, c.nhost, c.gpu, c.ngpu, NULL, 0, sp, 3, GJ_OFFSET_GIVEN, 0 };
	assert_int_equal(gpujoin_run(&in, &r), 0);
	assert_int_equal(r.counts.attributed, 2);
	assert_int_equal(total_of(&r, 1), 7000);
	assert_int_equal(total_of(&r, 2), 16000);
	assert_int_equal(total_of(&r, 3), 9000);
	gpujoin_free(&r);
}

/* The clock offset on a periodic job: CUPTI reports 600
 * iterations of three launches (ops 1, 2, 3; 1, 5 and 9 us kernels) on the
 * host's own clock, but the launch probes saw only the last 200 (attached
 * later).  The first records of the two sides do not overlap in time, and
 * the estimate from them alone lands on a multiple of the 100 us period
 * (10 ms and more is taken as another clock): every launch then gets the
 * kernel of a launch in another iteration.  Offset 0 explains the records,
 * so every op gets its own kernels' time. */
static void test_offset_periodic_late_probes(void **state)
{
	enum { IT = 600, FROM = 400, PER = 3 };
	static const uint64_t at[PER] = { 0, 10000, 30000 }, dur[PER] = { 1000, 5000, 9000 };
	struct gj_host *host = calloc(IT * PER, sizeof(*host));
	struct rec_gpu *gpu = calloc(IT * PER * 2, sizeof(*gpu));
	size_t nh = 0, ng = 0;
	struct gj_result r;

	assert_non_null(host);
	assert_non_null(gpu);
	for (size_t i = 0; i < IT; i++)
		for (size_t k = 0; k < PER; k++) {
			/* 100 us apart, give or take 0..12 us */
			uint64_t t = 1000000000ull + i * 100000 + (i * 7919 % 13) * 1000 + at[k];
			uint32_t corr = (uint32_t)(i * PER + k + 1);
			if (i >= FROM)   /* the probe fires 1.5 us before CUPTI's start */
				host[nh++] = (struct gj_host){ t - 1500, 1, CU_cuLaunchKernel,
							       (uint32_t)k + 1, 1 };
			gpu[ng].h.tid = 1;
			gpu[ng].kind = GPU_API_DRIVER;
			gpu[ng].start_ns = t;
			gpu[ng].end_ns = t + 1000;
			gpu[ng++].correlation = corr;
			gpu[ng].kind = GPU_KERNEL;
			gpu[ng].start_ns = t + 50000;
			gpu[ng].end_ns = t + 50000 + dur[k];
			gpu[ng].stream = 7;
			gpu[ng++].correlation = corr;
		}
	struct gj_input in = { host, nh, gpu, ng, NULL, 0, NULL, 0, GJ_OFFSET_AUTO, 0 };
	assert_int_equal(gpujoin_run(&in, &r), 0);
	assert_int_equal(r.counts.attributed, (IT - FROM) * PER);
	for (uint32_t k = 0; k < PER; k++)
		assert_int_equal(self_of(&r, k + 1), (IT - FROM) * dur[k]);
	gpujoin_free(&r);
	free(host);
	free(gpu);
}

static void test_api_family(void **state)
{
	assert_int_equal(gj_api_family(CU_cudaLaunchKernel), 1);
	assert_int_equal(gj_api_family(CU_cudaMemsetAsync), 1);
	assert_int_equal(gj_api_family(CU_cuLaunchKernel), 2);
	assert_int_equal(gj_api_family(CU_cuMemsetD32Async), 2);
	assert_int_equal(gj_api_family(CU_API_NONE), 0);
	assert_int_equal(gj_api_family(CU_API_MAX), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_decoded),
		cmocka_unit_test(test_join_monotonic),
		cmocka_unit_test(test_join_realtime_estimated),
		cmocka_unit_test(test_join_realtime_given_offset),
		cmocka_unit_test(test_join_realtime_unaligned),
		cmocka_unit_test(test_join_without_spans),
		cmocka_unit_test(test_join_order_independent),
		{ "test_join_slow_first_hit", test_scenario, NULL, NULL, (void *)&scenarios[0] },
		{ "test_join_preempted", test_scenario, NULL, NULL, (void *)&scenarios[1] },
		{ "test_join_interleaved_threads", test_scenario, NULL, NULL, (void *)&scenarios[2] },
		{ "test_join_dropped_api", test_scenario, NULL, NULL, (void *)&scenarios[3] },
		{ "test_join_missing_host", test_scenario, NULL, NULL, (void *)&scenarios[4] },
		cmocka_unit_test(test_join_preempted_estimated),
		cmocka_unit_test(test_api_family),
		cmocka_unit_test(test_total_overlapping_spans),
		cmocka_unit_test(test_offset_periodic_late_probes),
	};
	return cmocka_run_group_tests_name("gpujoin", tests, NULL, NULL);
}
