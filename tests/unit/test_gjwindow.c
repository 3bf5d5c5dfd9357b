/* test_gjwindow.c - the incremental join (join/gjwindow.c): records fed
 * one by one, joined in windows, must give what one join of all of them
 * gives (gpujoin_run, checked by hand in test_gpujoin.c), with the joined
 * records forgotten; late device records, calls crossing a window, and
 * records over the cap (counted) by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gjwindow.h"

#define MS 1000000ull
#define T0 (1000 * MS)

static struct rec_launch launch(uint32_t tid, uint64_t ts, uint32_t op)
{
	return (struct rec_launch){ .h = { REC_LAUNCH, sizeof(struct rec_launch), tid, ts },
				    .pid = 1, .api = CU_cuLaunchKernel, .op_id = op,
				    .stack_id = 1 };
}

static struct rec_gpu api(uint32_t tid, uint64_t start, uint32_t corr)
{
	return (struct rec_gpu){ .h = { REC_GPU, sizeof(struct rec_gpu), tid, start }, .pid = 1,
				 .kind = GPU_API_DRIVER, .start_ns = start, .end_ns = start + 1000,
				 .correlation = corr };
}

static struct rec_gpu kernel(uint64_t start, uint64_t dur, uint32_t corr)
{
	return (struct rec_gpu){ .h = { REC_GPU, sizeof(struct rec_gpu), 0, start }, .pid = 1,
				 .kind = GPU_KERNEL, .start_ns = start, .end_ns = start + dur,
				 .correlation = corr, .stream = 7 };
}

static struct rec_op op_rec(uint32_t tid, uint64_t ts)
{
	return (struct rec_op){ .h = { REC_OP_ENTER, sizeof(struct rec_op), tid, ts }, .pid = 1 };
}

#define FEED(p, r) do { __typeof__(r) r_ = (r); \
	assert_true(gj_pend_feed((p), &r_.h, r_.h.size) >= 0); } while (0)

static uint64_t self_of(const struct gj_acc *a, uint32_t op)
{
	for (size_t i = 0; i < a->nops; i++)
		if (a->ops[i].op_id == op)
			return a->ops[i].self_cuda_ns;
	return 0;
}

static void join_at(struct gj_pend *p, struct gj_acc *a, uint64_t now)
{
	struct gj_window w = { now, GJ_WINDOW_LAG_NS, UINT64_MAX, NULL, 0, NULL, NULL };

	assert_int_equal(gj_window_join(p, &w, a), 0);
}

/* A device record CUPTI hands over after a window: the call waits, its
 * time is counted once, when it comes; then everything is forgotten. */
static void test_late_device(void **state)
{
	struct gj_pend p = { 0 };
	struct gj_acc a = { 0 };

	FEED(&p, launch(10, T0, 5));
	FEED(&p, api(10, T0 + 2000, 100));
	FEED(&p, op_rec(10, T0 + 10000));          /* the thread went past the call */
	join_at(&p, &a, T0 + 20000);
	assert_int_equal(a.counts.device, 0);
	assert_int_equal(gj_pend_count(&p), 2);      /* launch + API wait */
	FEED(&p, kernel(T0 + 50000, 7000, 100));
	join_at(&p, &a, T0 + 60000);
	assert_int_equal(a.counts.device, 1);
	assert_int_equal(a.counts.attributed, 1);
	assert_int_equal(self_of(&a, 5), 7000);
	assert_int_equal(gj_pend_count(&p), 0);
	join_at(&p, &a, UINT64_MAX);
	assert_int_equal(self_of(&a, 5), 7000);      /* not twice */
	gj_pend_free(&p);
	gj_acc_free(&a);
}

/* A call whose thread did not go past it, inside the lag: it waits (its
 * launch record may still be held), then joins with the right launch
 * once the lag passed; a call of another thread joins meanwhile. */
static void test_crossing_window(void **state)
{
	struct gj_pend p = { 0 };
	struct gj_acc a = { 0 };

	FEED(&p, api(11, T0 + 2000, 200));           /* its launch is not in yet */
	FEED(&p, kernel(T0 + 5000, 3000, 200));
	FEED(&p, launch(12, T0, 8));
	FEED(&p, api(12, T0 + 1000, 300));
	FEED(&p, kernel(T0 + 4000, 4000, 300));
	FEED(&p, op_rec(12, T0 + 9000));
	join_at(&p, &a, T0 + 100 * MS);               /* within the lag */
	assert_int_equal(a.counts.device, 1);
	assert_int_equal(self_of(&a, 8), 4000);
	assert_int_equal(gj_pend_count(&p), 2);
	FEED(&p, launch(11, T0 + 1500, 9));           /* held, handed on late */
	join_at(&p, &a, T0 + GJ_WINDOW_LAG_NS + 10 * MS);
	assert_int_equal(a.counts.device, 2);
	assert_int_equal(a.counts.attributed, 2);
	assert_int_equal(self_of(&a, 9), 3000);
	assert_int_equal(gj_pend_count(&p), 0);
	gj_pend_free(&p);
	gj_acc_free(&a);
}

/* A launch no API record took leaves once an API record of its thread
 * more than GJ_WINDOW_LAG_NS later was joined. */
static void test_stale_launch(void **state)
{
	struct gj_pend p = { .max = 1u << 16 };
	struct gj_acc a = { 0 };
	const uint64_t t2 = T0 + 2 * GJ_WINDOW_LAG_NS, t1 = t2 - GJ_WINDOW_LAG_NS / 2;

	FEED(&p, launch(12, T0, 7));        /* never reported */
	FEED(&p, launch(12, T0 + 10000, 6));
	FEED(&p, api(12, T0 + 11000, 100));
	FEED(&p, kernel(T0 + 14000, 2000, 100));
	FEED(&p, op_rec(12, T0 + 19000));
	join_at(&p, &a, T0 + 100 * MS);
	assert_int_equal(self_of(&a, 6), 2000);
	assert_int_equal(gj_pend_count(&p), 1);   /* 7: may still match */
	FEED(&p, launch(12, t1, 8));        /* never reported, within the gap */
	FEED(&p, launch(12, t2, 9));
	FEED(&p, api(12, t2 + 1000, 300));
	FEED(&p, kernel(t2 + 4000, 4000, 300));
	FEED(&p, op_rec(12, t2 + 9000));
	join_at(&p, &a, t2 + 100 * MS);
	assert_int_equal(a.counts.attributed, 2);
	assert_int_equal(self_of(&a, 9), 4000);
	assert_int_equal(gj_pend_count(&p), 1);   /* 7 went; 8 may still match */
	assert_int_equal(p.host[0].op_id, 8);
	assert_int_equal(p.expired + p.dropped, 0);
	gj_pend_free(&p);
	gj_acc_free(&a);
}

/* The next join comes before 3/4 of the cap, where one pushes records
 * out: a backlog that only waits doubles up to that line, not past it. */
static void test_next_join(void **state)
{
	struct gj_pend p = { .max = 1u << 16 };
	struct gj_acc a = { 0 };

	assert_int_equal(gj_pend_next_join(&p), GJ_JOIN_EVERY);
	for (uint32_t i = 0; i < 30000; i++)   /* device records whose API record is late */
		FEED(&p, kernel(T0 + i * 1000, 100, 1000 + i));
	assert_int_equal(gj_pend_next_join(&p), (1u << 16) / 4 * 3 - 1);   /* not 60,000 */
	join_at(&p, &a, T0 + 20 * MS);
	assert_int_equal(p.expired, 0);
	assert_int_equal(gj_pend_count(&p), 30000);   /* all still wait */
	for (uint32_t i = 30000; i < 49151; i++)
		FEED(&p, kernel(T0 + i * 1000, 100, 1000 + i));
	assert_int_equal(gj_pend_count(&p), 49151);
	join_at(&p, &a, T0 + 60 * MS);
	assert_int_equal(p.expired, 0);                /* below the line: nothing out */
	/* at or above the line the rule is the old one (no join per record) */
	FEED(&p, kernel(T0 + 50000 * 1000ull, 100, 99999));
	assert_true(gj_pend_next_join(&p) > gj_pend_count(&p));
	gj_pend_free(&p);
	gj_acc_free(&a);
}

/* Over the cap: records are dropped and counted; past 3/4 of it the
 * oldest quarter joins as it is (a device record without its API record:
 * unattributed), counted as expired. */
static void test_cap(void **state)
{
	struct gj_pend p = { .max = 8 };
	struct gj_acc a = { 0 };

	for (uint32_t i = 0; i < 10; i++)
		FEED(&p, kernel(T0 + i * 1000, 100, 500 + i));   /* no API record comes */
	assert_int_equal(gj_pend_count(&p), 8);
	assert_int_equal(p.dropped, 2);
	join_at(&p, &a, T0 + 20 * MS);
	assert_int_equal(p.expired, 2);
	assert_int_equal(a.counts.device, 2);
	assert_int_equal(a.counts.no_api, 2);
	assert_int_equal(gj_pend_count(&p), 6);
	join_at(&p, &a, UINT64_MAX);
	assert_int_equal(a.counts.device, 8);
	assert_int_equal(gj_pend_count(&p), 0);
	gj_pend_free(&p);
	gj_acc_free(&a);
}

/* The CUPTI fixture (tests/fixtures/cupti), fed in ring order with a join
 * after every record: the same ops and counts as one join of all. */
/* CUPTI's clock 3 s ahead of the host's (no timestamp callback): the
 * offset is estimated at the first join that has host and API records and
 * kept; calls of later windows are ready by it (their thread went past
 * them on the host's clock) and join to their own launches. */
static void test_offset(void **state)
{
	const uint64_t off = 3000 * MS;
	struct gj_pend p = { 0 };
	struct gj_acc a = { 0 };

	(void)state;
	FEED(&p, launch(10, T0, 5));
	FEED(&p, api(10, T0 + off + 2000, 100));
	FEED(&p, kernel(T0 + off + 50000, 7000, 100));
	FEED(&p, op_rec(10, T0 + 10000));
	join_at(&p, &a, T0 + 20000);
	assert_true(p.offset_done);
	assert_true(p.offset_ns <= -(int64_t)off && p.offset_ns > -(int64_t)off - 10000);
	assert_int_equal(self_of(&a, 5), 7000);
	FEED(&p, launch(10, T0 + MS, 6));
	FEED(&p, api(10, T0 + off + MS + 2000, 101));
	FEED(&p, kernel(T0 + off + MS + 50000, 4000, 101));
	FEED(&p, op_rec(10, T0 + MS + 10000));
	join_at(&p, &a, T0 + MS + 20000);           /* within the lag: by its thread */
	assert_int_equal(self_of(&a, 6), 4000);
	assert_int_equal(a.counts.attributed, 2);
	assert_true(a.counts.offset_pairs > 0);
	assert_int_equal(gj_pend_count(&p), 0);
	gj_pend_free(&p);
	gj_acc_free(&a);
}

/* The offset decided only once host and API records overlap:
 * CUPTI reports 600 iterations of three launches (ops 1, 2, 3; 1, 5, 9 us
 * kernels) on the host's clock, 100 us apart give or take 12 us; the
 * launch probes saw the last 200.  At the first join CUPTI has handed
 * over its records up to iteration 300 only and the probes' first 20
 * (from 400): no pair overlaps, and an estimate then (over 10 ms: taken
 * as another clock) shifted every match by whole iterations for the rest
 * of the run.  It must wait; then offset 0 explains the records. */
static void test_offset_waits_for_overlap(void **state)
{
	static const uint64_t at[3] = { 0, 10000, 30000 }, dur[3] = { 1000, 5000, 9000 };
	struct gj_pend p = { 0 };
	struct gj_acc a = { 0 };

	(void)state;
	for (int phase = 0; phase < 2; phase++) {
		for (uint32_t i = 0; i < 600; i++) {
			bool cupti = phase ? i > 300 : i <= 300;
			bool host = i >= 400 && (phase ? i >= 420 : i < 420);

			for (uint32_t k = 0; k < 3; k++) {
				uint64_t t = T0 + i * 100000ull + (i * 7919 % 13) * 1000 + at[k];
				uint32_t corr = i * 3 + k + 1;

				if (host)
					FEED(&p, launch(10, t - 1500, k + 1));
				if (cupti) {
					FEED(&p, api(10, t, corr));
					FEED(&p, kernel(t + 50000, dur[k], corr));
				}
			}
		}
		if (!phase) {
			join_at(&p, &a, T0 + 42 * MS);
			assert_false(p.offset_done);
		}
	}
	join_at(&p, &a, UINT64_MAX);
	assert_int_equal(p.offset_ns, 0);
	for (uint32_t k = 0; k < 3; k++)
		assert_int_equal(self_of(&a, k + 1), 200 * dur[k]);
	gj_pend_free(&p);
	gj_acc_free(&a);
}

/* gj_before_drop: calls made before the in-process ops began go (host
 * calls and API records by their start, device records by their API
 * record's correlation, whenever they ran on the GPU); later calls and op
 * records stay; since_ns 0 drops nothing. */
static void test_before(void **state)
{
	struct gj_before b = { 0 };
	struct rec_launch l_old = launch(5, T0 - 2 * MS, 1), l_new = launch(5, T0 + MS, 1);
	struct rec_gpu a_old = api(5, T0 - 2 * MS, 10), a_old2 = api(6, T0 - MS, 12);
	struct rec_gpu a_new = api(5, T0 + MS, 13);
	struct rec_gpu k_old = kernel(T0 + 5 * MS, MS, 12), k_new = kernel(T0 + 6 * MS, MS, 13);
	struct rec_op o = op_rec(5, T0 - 3 * MS);

	(void)state;
	assert_false(gj_before_drop(&b, &a_old.h, sizeof(a_old)));   /* no since: all stay */
	b.since_ns = T0;
	assert_true(gj_before_drop(&b, &l_old.h, sizeof(l_old)));
	assert_false(gj_before_drop(&b, &l_new.h, sizeof(l_new)));
	assert_true(gj_before_drop(&b, &a_old.h, sizeof(a_old)));
	assert_true(gj_before_drop(&b, &a_old2.h, sizeof(a_old2)));
	assert_false(gj_before_drop(&b, &a_new.h, sizeof(a_new)));
	/* its API record began before since: goes, though it ran after */
	assert_true(gj_before_drop(&b, &k_old.h, sizeof(k_old)));
	assert_false(gj_before_drop(&b, &k_new.h, sizeof(k_new)));
	assert_false(gj_before_drop(&b, &o.h, sizeof(o)));          /* ops are not its */
	assert_false(gj_before_drop(&b, &a_old.h, 8));              /* short: left alone */
	assert_int_equal(b.dropped, 4);
}

/* gj_before_drop after until_ns (the measurement's end): host calls and
 * API records that began after it go, and the device records of each
 * process's calls from its first API record dropped on (by correlation,
 * so another process's calls are not taken with them); earlier ones
 * stay, whenever they ran on the GPU. */
static void test_after(void **state)
{
	struct gj_before b = { .until_ns = T0 };
	struct rec_launch l_in = launch(5, T0 - MS, 1), l_late = launch(5, T0 + MS, 1);
	struct rec_gpu a_in = api(5, T0 - MS, 20), a_late = api(5, T0 + MS, 21);
	struct rec_gpu k_in = kernel(T0 + 2 * MS, MS, 20), k_late = kernel(T0 + 3 * MS, MS, 21);
	struct rec_gpu k_late2 = kernel(T0 + 4 * MS, MS, 22), k_other = kernel(T0 + 4 * MS, MS, 30);

	(void)state;
	k_other.pid = 2;   /* another process: its own numbering, no late call */
	assert_false(gj_before_drop(&b, &l_in.h, sizeof(l_in)));
	assert_true(gj_before_drop(&b, &l_late.h, sizeof(l_late)));
	assert_false(gj_before_drop(&b, &a_in.h, sizeof(a_in)));
	assert_false(gj_before_drop(&b, &k_late.h, sizeof(k_late)));   /* its API record not seen yet */
	assert_true(gj_before_drop(&b, &a_late.h, sizeof(a_late)));
	assert_false(gj_before_drop(&b, &k_in.h, sizeof(k_in)));       /* ran after, called before */
	assert_true(gj_before_drop(&b, &k_late2.h, sizeof(k_late2)));
	assert_false(gj_before_drop(&b, &k_other.h, sizeof(k_other)));
	assert_int_equal(b.dropped, 3);
}

static void test_fixture_stream(void **state)
{
	static char buf[1 << 16];
	const char *dir = getenv("TBPF_FIXTURES");
	char path[512];
	struct gj_pend p = { 0 }, all = { 0 };
	struct gj_acc a = { 0 };
	struct gj_result whole;
	uint64_t now = 0;
	FILE *fp;
	size_t n;

	snprintf(path, sizeof(path), "%s/cupti/join_mono.bin", dir ? dir : "tests/fixtures");
	assert_non_null(fp = fopen(path, "rb"));
	n = fread(buf, 1, sizeof(buf), fp);
	fclose(fp);
	for (size_t off = 0; off + sizeof(struct rec_hdr) <= n;) {
		const struct rec_hdr *h = (const void *)(buf + off);

		assert_true(h->size >= sizeof(*h) && off + h->size <= n);
		assert_true(gj_pend_feed(&p, h, h->size) >= 0);
		assert_true(gj_pend_feed(&all, h, h->size) >= 0);
		if (h->type != REC_GPU && h->ts_ns > now)
			now = h->ts_ns;
		join_at(&p, &a, now);
		off += h->size;
	}
	join_at(&p, &a, UINT64_MAX);
	struct gj_input in = { all.host, all.nhost, all.gpu, all.ngpu, all.names, all.nnames,
			       NULL, 0, GJ_OFFSET_AUTO, 0 };
	assert_int_equal(gpujoin_run(&in, &whole), 0);
	assert_true(whole.counts.device > 0 && whole.nops > 1);
	assert_int_equal(a.counts.device, whole.counts.device);
	assert_int_equal(a.counts.attributed, whole.counts.attributed);
	assert_int_equal(a.counts.unattributed_ns, whole.counts.unattributed_ns);
	assert_int_equal(a.nops, whole.nops);
	for (size_t i = 0; i < whole.nops; i++) {
		const struct gj_opstat *o = &whole.ops[i], *w = NULL;

		for (size_t k = 0; k < a.nops; k++)
			if (a.ops[k].op_id == o->op_id && a.ops[k].stack_id == o->stack_id)
				w = &a.ops[k];
		assert_non_null(w);
		assert_int_equal(w->self_cuda_ns, o->self_cuda_ns);
		assert_int_equal(w->total_cuda_ns, o->total_cuda_ns);
		assert_int_equal(w->kernels + w->memcpys + w->memsets,
				 o->kernels + o->memcpys + o->memsets);
	}
	assert_int_equal(gj_pend_count(&p), 0);
	gj_pend_free(&p);
	gj_pend_free(&all);
	gj_acc_free(&a);
	gpujoin_free(&whole);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_late_device),
		cmocka_unit_test(test_crossing_window),
		cmocka_unit_test(test_stale_launch), cmocka_unit_test(test_next_join), cmocka_unit_test(test_cap),
		cmocka_unit_test(test_fixture_stream),
		cmocka_unit_test(test_before),
		cmocka_unit_test(test_after),
		cmocka_unit_test(test_offset_waits_for_overlap),
		cmocka_unit_test(test_offset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
