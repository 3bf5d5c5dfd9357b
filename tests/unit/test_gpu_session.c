/* test_gpu_session.c - the live GPU path without a GPU: the recorded CUPTI
 * fixture (tests/fixtures/cupti/join_mono.bin, made by
 * tests/native/cupti/gen_fixtures.c from the real CUpti_Activity structs)
 * is fed record by record through gpu_session_record, as session.c's
 * on_record does, then gpu_session_apply puts device times into profile
 * rows and the table shows them.  Expected numbers are worked out by hand
 * from the scenario in tests/fixtures/cupti/README.md:
 *   op 7 (addmm, stack 0xA1): gemm 50000 + memcpy 2000 + memset 500 = 52500
 *   op 9 (relu, stack 0xA1): 3000 + 4000 = 7000
 *   op 11 (mm, stack 0xB2, thread 1002): sgemm 20000
 *   op 3 (linear): launched nothing itself, 0
 * CUDA total (op enter/exit records reach the session: tbpf streams them
 * when the agent is on): op 3 [999000, 1015000] on thread 1001 encloses
 * the launches of the gemm and the memcpy by its child op 7: 50000 + 2000
 * = 52000; the others launched from no child op: CUDA total = Self CUDA.
 * The same records of a job in its own pid namespace (test_pidns_join). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "gpu_session.h"
#include "profile.h"

#define PID 4242

/* NS_NONE: the fixture as it is; NS_JOB: its CUPTI API records carry the
 * tids of a job in its own pid namespace (tests/fixtures/nstid/join: host
 * 1001, 1002 = 31, 32 there), fed as they are; NS_MAPPED: the same,
 * through gpu_session_host_tid first, as session.c's on_record does */
enum ns_feed { NS_NONE, NS_JOB, NS_MAPPED };
#define NS_TID(host) ((host) - 970)

static size_t feed_ns(struct gpu_session *gs, const char *name, size_t *total, enum ns_feed ns);

static size_t feed(struct gpu_session *gs, const char *name, size_t *total)
{
	return feed_ns(gs, name, total, NS_NONE);
}

static const struct rec_hdr *as_job(const struct rec_hdr *h, struct rec_gpu *g)
{
	const struct rec_gpu *r = (const void *)h;

	if (h->type != REC_GPU || h->size < sizeof(*r) ||
	    (r->kind != GPU_API_RUNTIME && r->kind != GPU_API_DRIVER))
		return h;
	*g = *r;
	g->h.tid = NS_TID(r->h.tid);
	return &g->h;
}

static size_t feed_ns(struct gpu_session *gs, const char *name, size_t *total, enum ns_feed ns)
{
	char path[512];
	const char *dir = getenv("TBPF_FIXTURES");
	static char buf[1 << 16];
	size_t n, kept = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/cupti/%s", dir ? dir : "tests/fixtures", name);
	fp = fopen(path, "rb");
	if (!fp)
		fail_msg("cannot open %s (run from the repository root)", path);
	n = fread(buf, 1, sizeof(buf), fp);
	fclose(fp);
	*total = 0;
	for (size_t off = 0; off + sizeof(struct rec_hdr) <= n;) {
		const struct rec_hdr *h = (const void *)(buf + off);

		struct rec_gpu job, mapped;
		const struct rec_hdr *r;

		assert_true(h->size >= sizeof(*h) && off + h->size <= n);
		r = ns == NS_NONE ? h : as_job(h, &job);
		if (ns == NS_MAPPED)
			r = gpu_session_host_tid(gs, r, r->size, &mapped);
		kept += (size_t)gpu_session_record(gs, r, r->size);
		(*total)++;
		off += h->size;
	}
	return kept;
}

static struct prof_op *row(struct profile *p, uint32_t op)
{
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].op_id == op && p->ops[i].pid == PID)
			return &p->ops[i];
	fail_msg("no row for op %u", op);
	return NULL;
}

static const char *names(void *ctx, uint32_t id, const char **ovl)
{
	(void)ctx;
	*ovl = "";
	switch (id) {
	case 3: return "aten::linear";
	case 7: return "aten::addmm";
	case 9: return "aten::relu";
	case 11: return "aten::mm";
	}
	return NULL;
}

static void add_row(struct profile *p, uint32_t op, uint64_t stack, uint64_t calls)
{
	const char *ovl;
	struct prof_op o = { .pid = PID, .op_id = op, .stack_id = stack,
			     .name = names(NULL, op, &ovl), .overload = "", .calls = calls,
			     .self_ns = 1000 * calls, .total_ns = 2000 * calls };

	assert_int_equal(profile_add_op(p, &o), 0);
}

static void test_fixture_into_profile(void **state)
{
	struct gpu_session gs;
	struct profile p;
	size_t total, kept;

	(void)state;
	gpu_session_init(&gs, true);
	/* an untracked pid keeps nothing */
	assert_int_equal(feed(&gs, "join_mono.bin", &total), 0);
	assert_non_null(gpu_session_track(&gs, PID));
	kept = feed(&gs, "join_mono.bin", &total);
	/* 7 host records + 16 device/API + 1 name + 12 op enter/exit (spans) */
	assert_int_equal(kept, 7 + 16 + 1 + 12);
	assert_int_equal(total, kept);
	assert_int_equal(gpu_session_find(&gs, PID)->pend.nhost, 7);
	assert_int_equal(gpu_session_find(&gs, PID)->pend.ngpu, 16);
	assert_int_equal(gpu_session_find(&gs, PID)->pend.nnames, 1);
	/* the name record arrives once per start: a repeat is not kept twice */
	feed(&gs, "join_mono.bin", &total);
	assert_int_equal(gpu_session_find(&gs, PID)->pend.nnames, 1);
	gpu_session_free(&gs);

	gpu_session_init(&gs, true);
	gpu_session_track(&gs, PID);
	feed(&gs, "join_mono.bin", &total);
	profile_init(&p);
	/* rows as session_collect makes them: 64-bit stack ids whose low 32
	 * bits are what the launch records carry; op 11 ran before attach
	 * (no row): the join creates it, named by the callback */
	add_row(&p, 3, 0x5151515100000000ull | 0xA1, 2);
	add_row(&p, 7, 0x5151515100000000ull | 0xA1, 2);
	add_row(&p, 9, 0x5151515100000000ull | 0xA1, 2);
	add_row(&p, 7, 0x77, 1);   /* same op, other stack: untouched */
	assert_int_equal(gpu_session_apply(&gs, &p, names, NULL), 8);  /* device records */
	assert_true(p.has_gpu_times);
	assert_int_equal(row(&p, 3)->self_cuda_ns, 0);
	assert_int_equal(row(&p, 3)->cuda_total_ns, 50000 + 2000);
	assert_int_equal(row(&p, 7)->self_cuda_ns, 52500);
	assert_int_equal(row(&p, 7)->cuda_total_ns, 52500);
	assert_int_equal(row(&p, 7)->calls, 2);   /* CPU counters unchanged */
	assert_int_equal(row(&p, 9)->self_cuda_ns, 7000);
	assert_int_equal(row(&p, 9)->cuda_total_ns, 7000);
	assert_int_equal(row(&p, 11)->self_cuda_ns, 20000);
	assert_int_equal(row(&p, 11)->cuda_total_ns, 20000);
	assert_int_equal(row(&p, 11)->calls, 0);
	assert_int_equal(row(&p, 11)->stack_id, 0xB2);
	assert_string_equal(row(&p, 11)->name, "aten::mm");
	for (size_t i = 0; i < p.nops; i++)
		if (p.ops[i].stack_id == 0x77)
			assert_int_equal(p.ops[i].self_cuda_ns, 0);
	assert_int_equal(p.nops, 5);

	/* the table shows the columns, with torch.profiler's time format */
	char *txt = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&txt, &len);
	struct export_opts eo = { .sort = "self_cuda_time_total", .row_limit = -1 };

	assert_int_equal(export_table(out, &p, &eo), 0);
	fclose(out);
	assert_non_null(strstr(txt, "Self CUDA"));
	assert_non_null(strstr(txt, "CUDA total"));
	/* sorted by Self CUDA: addmm (52.5 us + 0) first, then mm, relu */
	char *a = strstr(txt, "aten::addmm"), *m = strstr(txt, "aten::mm"),
	     *r = strstr(txt, "aten::relu");
	assert_true(a && m && r && a < m && m < r);
	assert_non_null(strstr(a, "52.500us"));
	assert_non_null(strstr(m, "20.000us"));
	assert_non_null(strstr(r, "7.000us"));
	free(txt);
	profile_free(&p);
	gpu_session_free(&gs);
}

/* A containerized job: CUPTI's thread ids are the job's, the
 * launch probes' the host's.  As they are, the join finds no launch; through
 * gpu_session_host_tid (the map read from the fixture tree), the same
 * device times as test_fixture_into_profile. */
static void test_pidns_join(void **state)
{
	char *root = getenv("TBPF_FIXTURES") ? strdup(getenv("TBPF_FIXTURES"))
					      : strdup("tests/fixtures");
	char *tree = NULL;
	struct gpu_session gs;
	struct profile p;
	size_t total;

	(void)state;
	assert_true(asprintf(&tree, "%s/nstid/join", root) > 0);
	for (int mapped = 0; mapped < 2; mapped++) {
		struct gpu_target *t;

		gpu_session_init(&gs, true);
		t = gpu_session_track(&gs, PID);
		nstid_free(t->tids);   /* the shared map, read from the fixture tree */
		assert_int_equal(nstid_init(t->tids, tree, PID), 0);
		assert_true(t->tids->other);
		feed_ns(&gs, "join_mono.bin", &total, mapped ? NS_MAPPED : NS_JOB);
		profile_init(&p);
		add_row(&p, 7, 0x5151515100000000ull | 0xA1, 2);
		assert_int_equal(gpu_session_apply(&gs, &p, names, NULL), 8);
		if (!mapped) {
			assert_false(p.has_gpu_times);
			assert_int_equal(t->dev_attributed, 0);
		} else {
			assert_true(p.has_gpu_times);
			assert_int_equal(row(&p, 7)->self_cuda_ns, 52500);
			assert_int_equal(row(&p, 3)->cuda_total_ns, 50000 + 2000);
			assert_int_equal(row(&p, 9)->self_cuda_ns, 7000);
			assert_int_equal(row(&p, 11)->self_cuda_ns, 20000);
			assert_int_equal(t->tids->reads, 1);   /* at attach only */
			assert_int_equal(t->tids->unmapped, 0);
		}
		profile_free(&p);
		gpu_session_free(&gs);
	}
	free(tree);
	free(root);
}

/* No device records: the note is the agent's own status line. */
static void test_note_from_status(void **state)
{
	struct gpu_session gs;
	struct profile p;
	struct rec_gpu_status st = { .h = { .type = REC_GPU, .size = sizeof(st) }, .pid = PID,
				     .kind = GPU_STATUS, .state = AGENT_NO_DRIVER,
				     .magic = TBPF_AGENT_MAGIC };
	struct gpu_target *t;

	(void)state;
	snprintf(st.detail, sizeof(st.detail), "libcuda.so.1 not found: no NVIDIA driver");
	gpu_session_init(&gs, true);
	t = gpu_session_track(&gs, PID);
	t->mode = GPU_AGENT_INJECT;
	assert_string_equal(gpu_session_status(&gs),
			    "no CUDA device timings: CUPTI agent status unknown");
	assert_int_equal(gpu_session_record(&gs, &st, sizeof(st)), 1);
	assert_string_equal(gpu_session_status(&gs),
			    "no CUDA device timings: CUPTI agent reports no-driver "
			    "(libcuda.so.1 not found: no NVIDIA driver)");
	profile_init(&p);
	add_row(&p, 7, 0xA1, 1);
	assert_int_equal(gpu_session_apply(&gs, &p, names, NULL), 0);
	assert_false(p.has_gpu_times);
	profile_free(&p);

	/* tbpf run, the driver never loaded the agent: no status at all */
	t->mode = GPU_AGENT_RUN;
	t->have_status = false;
	assert_non_null(strstr(gpu_session_status(&gs), "never loaded the CUPTI agent"));
	/* a refusal wins over everything */
	t->note = strdup("--inject refused: x");
	assert_string_equal(gpu_session_status(&gs), "no CUDA device timings: --inject refused: x");
	/* two targets: each named */
	gpu_session_track(&gs, PID + 1)->mode = GPU_AGENT_INJECT;
	assert_string_equal(gpu_session_status(&gs),
			    "no CUDA device timings: pid 4242: --inject refused: x; "
			    "pid 4243: CUPTI agent status unknown");
	gpu_session_free(&gs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_into_profile),
		cmocka_unit_test(test_note_from_status),
		cmocka_unit_test(test_pidns_join),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
