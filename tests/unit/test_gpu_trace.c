/* test_gpu_trace.c - device times in reports and traces from recorded CUPTI
 * activity: the join fixtures (tests/fixtures/cupti, made from the real
 * cupti_activity.h structs) wrapped in a capture (fixture_gpu_capture.h),
 * reported as a profile (Self CUDA, CUDA total) and as Chrome and Perfetto
 * traces read back by the independent readers (check_chrome.py, protoc +
 * check_perfetto.py).  Every expected number is worked out here from the
 * scenario's inputs (tests/fixtures/cupti/README.md), not from tbpf's
 * output. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "capture.h"
#include "export.h"
#include "fixture_gpu_capture.h"
#include "gpucap.h"
#include "model.h"
#include "profile.h"

static char dir[] = "/tmp/tbpf-test-gputrace-XXXXXX";
static const char *src = "tests/formats";   /* run from the repository root */
static const char *fixtures = "tests/fixtures";

/* ---- the scenario's inputs (README.md), ns on CLOCK_MONOTONIC ------------ */
struct dev_in {
	unsigned corr, device, stream;
	unsigned long long start, end;
	const char *name;
	/* launch: host record (tid, ts) and its CUDA API call's end; tid 0 = none */
	unsigned tid;
	unsigned long long host_ts, api_end;
};
#define GEMM "void at::native::(anonymous namespace)::gemm_kernel<float, 128, 64, 8>" \
	     "(int, int, int, float const*, float const*, float*)"
static const struct dev_in devs[] = {
	{ 101, 0, 7, 1006000, 1056000, GEMM, 1001, 1000000, 1005000 },
	{ 103, 0, 7, 1056500, 1058500, "Memcpy HtoD 4096 B", 1001, 1010000, 1012000 },
	{ 104, 0, 7, 1058600, 1061600, "relu_kernel", 1001, 1020000, 1022000 },
	{ 105, 0, 13, 1017000, 1037000, "ampere_sgemm_128x64_nn", 1002, 1015000, 1016500 },
	{ 106, 0, 7, 1061700, 1062200, "Memset 1024 B", 1001, 1030000, 1031000 },
	{ 107, 0, 7, 1062300, 1066300, "relu_kernel", 1001, 1040000, 1041000 },
	{ 108, 1, 21, 1052000, 1053000, "orphan_kernel", 0, 0, 0 },     /* API record, no probe */
	{ 999, 0, 7, 1070000, 1071000, "lost_api_kernel", 0, 0, 0 },   /* no API record */
};
#define NDEV (sizeof(devs) / sizeof(*devs))

static unsigned long long dur(unsigned corr)
{
	for (size_t i = 0; i < NDEV; i++)
		if (devs[i].corr == corr)
			return devs[i].end - devs[i].start;
	fail_msg("no device record %u", corr);
	return 0;
}

static int setup(void **state)
{
	if (getenv("TBPF_FORMATS"))
		src = getenv("TBPF_FORMATS");
	if (getenv("TBPF_FIXTURES"))
		fixtures = getenv("TBPF_FIXTURES");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void capture_of(const char *bin, char *path, size_t n)
{
	char in[512];
	snprintf(in, sizeof(in), "%s/cupti/%s", fixtures, bin);
	snprintf(path, n, "%s/%s.tbpf", dir, bin);
	int err = fxg_write(path, in);
	if (err)
		fail_msg("fxg_write %s: %s", in, strerror(-err));
}

static char *run(int *status, const char *fmt, ...)
{
	char *cmd;
	va_list ap;
	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) > 0);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t cap = 1 << 16, len = 0, got;
	char *buf = malloc(cap);
	while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += got;
	buf[len] = 0;
	*status = pclose(p);
	free(cmd);
	return buf;
}

/* ---- profile: Self CUDA and CUDA total per op ------------------------------ */
static const struct prof_op *row(const struct prof_op *rows, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	fail_msg("no row %s", name);
	return NULL;
}

static void check_profile(const char *bin)
{
	char path[512];
	capture_of(bin, path, sizeof(path));
	struct capture_reader *r = capture_reader_open(path);
	assert_non_null(r);
	assert_null(capture_reader_error(r));
	struct profile p;
	profile_init(&p);
	assert_int_equal(profile_from_capture(r, &p), 0);
	assert_true(p.has_gpu_times);
	struct prof_op *rows;
	size_t n;
	assert_int_equal(profile_fold(&p, PROF_BY_NAME, &rows, &n), 0);
	assert_int_equal(n, 4);
	/* addmm (op 7): launched the gemm (101), the copy (103) and the set (106) */
	const struct prof_op *o = row(rows, n, "aten::addmm");
	assert_int_equal(o->self_cuda_ns, dur(101) + dur(103) + dur(106));
	assert_int_equal(o->cuda_total_ns, dur(101) + dur(103) + dur(106));
	/* linear (op 3) launched nothing itself; its child addmm [999500,
	 * 1013000] launched 101 and 103 inside it; 106 ran from a later addmm */
	o = row(rows, n, "aten::linear");
	assert_int_equal(o->self_cuda_ns, 0);
	assert_int_equal(o->cuda_total_ns, dur(101) + dur(103));
	o = row(rows, n, "aten::relu");
	assert_int_equal(o->self_cuda_ns, dur(104) + dur(107));
	assert_int_equal(o->cuda_total_ns, dur(104) + dur(107));
	o = row(rows, n, "aten::mm");   /* thread 1002, driver launch */
	assert_int_equal(o->self_cuda_ns, dur(105));
	assert_int_equal(o->cuda_total_ns, dur(105));
	/* durations stay exact with the realtime-stamped records too */
	assert_int_equal(dur(101) + dur(103) + dur(106), 52500);
	free(rows);
	profile_free(&p);
	capture_reader_close(r);
}

static void test_profile_mono(void **state) { check_profile("join_mono.bin"); }
static void test_profile_realtime(void **state) { check_profile("join_realtime.bin"); }

/* ---- the roll-up alone: parent op, child op, one kernel --------------------- */
static void test_cuda_total_rollup(void **state)
{
	enum { PID = 77, TID = 78, PARENT = 1, CHILD = 2 };
	struct rec_op ops[4];
	const uint64_t t[4] = { 1000, 1100, 1400, 2000 };   /* P enter, C enter, C exit, P exit */
	const int type[4] = { REC_OP_ENTER, REC_OP_ENTER, REC_OP_EXIT, REC_OP_EXIT };
	const uint32_t op[4] = { PARENT, CHILD, CHILD, PARENT };
	const uint16_t depth[4] = { 0, 1, 1, 0 };
	struct rec_launch l;
	struct rec_gpu api, k;
	struct gpucap g;
	struct profile p;

	assert_int_equal(gpucap_init(&g, true), 0);
	for (int i = 0; i < 4; i++) {
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].h = (struct rec_hdr){ type[i], sizeof(ops[i]), TID, t[i] };
		ops[i].pid = PID;
		ops[i].op_id = op[i];
		ops[i].depth = depth[i];
		ops[i].stack_id = 5;
	}
	memset(&l, 0, sizeof(l));
	l.h = (struct rec_hdr){ REC_LAUNCH, sizeof(l), TID, 1200 };
	l.pid = PID;
	l.api = CU_cudaLaunchKernel;
	l.op_id = CHILD;
	l.stack_id = 5;
	memset(&api, 0, sizeof(api));
	api.h = (struct rec_hdr){ REC_GPU, sizeof(api), TID, 1210 };
	api.pid = PID;
	api.kind = GPU_API_RUNTIME;
	api.start_ns = 1210;
	api.end_ns = 1300;
	api.correlation = 9;
	k = api;
	k.h.tid = 0;
	k.kind = GPU_KERNEL;
	k.start_ns = 5000;
	k.end_ns = 5000 + 3333;   /* the kernel runs after both ops ended */
	k.device = 0;
	k.stream = 7;
	strcpy(k.name, "child_kernel");
	const struct rec_hdr *recs[] = { &ops[0].h, &ops[1].h, &l.h, &ops[2].h, &ops[3].h, &api.h, &k.h };
	for (size_t i = 0; i < sizeof(recs) / sizeof(*recs); i++)
		assert_int_equal(gpucap_feed(&g, recs[i]), 0);
	assert_int_equal(gpucap_join(&g), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.ndev, 1);

	profile_init(&p);
	struct prof_op parent = { .pid = PID, .op_id = PARENT, .name = "parent", .overload = "",
				  .stack_id = 5, .calls = 1 };
	struct prof_op child = { .pid = PID, .op_id = CHILD, .name = "child", .overload = "",
				 .stack_id = 5, .calls = 1 };
	assert_int_equal(profile_add_op(&p, &parent), 0);
	assert_int_equal(profile_add_op(&p, &child), 0);
	assert_int_equal(profile_add_gpu(&p, &g.v[0].res, PID, NULL, NULL), 1);
	assert_int_equal(p.nops, 2);
	for (size_t i = 0; i < p.nops; i++) {
		if (p.ops[i].op_id == PARENT) {
			assert_int_equal(p.ops[i].self_cuda_ns, 0);
			assert_int_equal(p.ops[i].cuda_total_ns, 3333);
		} else {
			assert_int_equal(p.ops[i].self_cuda_ns, 3333);
			assert_int_equal(p.ops[i].cuda_total_ns, 3333);
		}
	}
	/* the launch leads to the kernel by a flow */
	const struct gj_dev *d = gpucap_flow_of(&g, PID, TID, 1200, CU_cudaLaunchKernel);
	assert_non_null(d);
	assert_int_equal(d->correlation, 9);
	assert_int_equal(d->api_end_ns, 1300);
	assert_null(gpucap_flow_of(&g, PID, TID, 1201, CU_cudaLaunchKernel));
	profile_free(&p);
	gpucap_free(&g);
}

/* ---- traces ----------------------------------------------------------------- */
/* The lines both readers print (--gpu-dump), from the scenario; shift: ns
 * added to CUPTI times (the realtime file's offset estimate is 100 ns short:
 * the smallest probe-to-API gap). */
static char *expected_dump(long long shift)
{
	char *lines[2 * NDEV], *buf = NULL;
	size_t n = 0, len = 0;
	for (size_t i = 0; i < NDEV; i++) {
		const struct dev_in *d = &devs[i];
		char *s;
		assert_true(asprintf(&s, "gpu GPU_%u stream_%u %llu %llu %u %s\n", d->device, d->stream,
				     d->start + shift, d->end - d->start, d->corr, d->name) > 0);
		lines[n++] = s;
		if (!d->tid)
			continue;
		assert_true(asprintf(&s, "flow %u %u %u %llu %llu -> GPU_%u stream_%u %llu\n", d->corr,
				     FXG_PID, d->tid, d->host_ts, d->api_end + shift, d->device, d->stream,
				     d->start + shift) > 0);
		lines[n++] = s;
	}
	/* sorted like the readers' output (byte order) */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(lines[j], lines[i]) < 0) {
				char *x = lines[i];
				lines[i] = lines[j];
				lines[j] = x;
			}
	FILE *f = open_memstream(&buf, &len);
	for (size_t i = 0; i < n; i++) {
		fputs(lines[i], f);
		free(lines[i]);
	}
	fclose(f);
	return buf;
}

static void export_to(const char *cap, int fmt, const char *out)
{
	struct capture_reader *r = capture_reader_open(cap);
	assert_non_null(r);
	FILE *f = fopen(out, "wb");
	assert_non_null(f);
	int err = fmt == EXPORT_CHROME ? export_chrome(f, r, NULL) : export_perfetto(f, r, NULL);
	assert_int_equal(err, 0);
	assert_int_equal(fclose(f), 0);
	capture_reader_close(r);
}

static void check_traces(const char *bin, long long shift)
{
	char cap[512], out[600];
	int st;
	capture_of(bin, cap, sizeof(cap));
	char *want = expected_dump(shift);

	snprintf(out, sizeof(out), "%s.json", cap);
	export_to(cap, EXPORT_CHROME, out);
	char *got = run(&st, "python3 %s/check_chrome.py --gpu-dump %s 2>&1", src, out);
	if (st)
		fail_msg("check_chrome.py: %s", got);
	assert_string_equal(got, want);
	free(got);
	got = run(&st, "python3 %s/check_chrome.py %s 2>&1", src, out);   /* nesting etc. */
	if (st)
		fail_msg("check_chrome.py: %s", got);
	/* 6 flows: one "s" and one "f" each */
	assert_non_null(strstr(got, " f=6 "));
	assert_non_null(strstr(got, " s=6"));
	free(got);

	snprintf(out, sizeof(out), "%s.pftrace", cap);
	export_to(cap, EXPORT_PERFETTO, out);
	got = run(&st, "protoc --proto_path=%s --decode=perfetto.protos.Trace perfetto_trace.proto "
		  "< %s > %s.txt 2>&1 && python3 %s/check_perfetto.py --gpu-dump %s.txt 2>&1",
		  src, out, out, src, out);
	if (st)
		fail_msg("perfetto: %s", got);
	assert_string_equal(got, want);
	free(got);
	/* one GPU process track per device and one stream track per stream */
	got = run(&st, "grep -c 'process_name: \"GPU [01]\"' %s.txt; grep -c 'name: \"stream "
		  "\\(7\\|13\\|21\\)\"' %s.txt", out, out);
	assert_string_equal(got, "2\n3\n");
	free(got);
	free(want);
}

static void test_traces_mono(void **state) { check_traces("join_mono.bin", 0); }
static void test_traces_realtime(void **state) { check_traces("join_realtime.bin", -100); }

/* Two processes with the same correlation ids: a device process track per
 * (process, device) named with the pid, flow ids that carry the pid, and
 * each flow still one launch -> one device slice (the readers refuse
 * repeated ids). */
static void test_two_processes(void **state)
{
	char in[512], cap[600], out[700];
	const uint32_t pids[] = { FXG_PID, 5151 };
	int st;
	snprintf(in, sizeof(in), "%s/cupti/join_mono.bin", fixtures);
	snprintf(cap, sizeof(cap), "%s/two.tbpf", dir);
	assert_int_equal(fxg_write_pids(cap, in, pids, 2), 0);

	snprintf(out, sizeof(out), "%s.json", cap);
	export_to(cap, EXPORT_CHROME, out);
	char *chrome = run(&st, "python3 %s/check_chrome.py --gpu-dump %s 2>&1", src, out);
	if (st)
		fail_msg("check_chrome.py: %s", chrome);
	char *ids = run(&st, "python3 -c 'import json,sys; print(sorted({e[\"id\"] for e in "
			"json.load(open(sys.argv[1]))[\"traceEvents\"] if e[\"ph\"] == \"s\"})"
			"[:2])' %s", out);
	assert_string_equal(ids, "['4242:101', '4242:103']\n");
	free(ids);
	snprintf(out, sizeof(out), "%s.pftrace", cap);
	export_to(cap, EXPORT_PERFETTO, out);
	char *pf = run(&st, "protoc --proto_path=%s --decode=perfetto.protos.Trace perfetto_trace.proto "
		       "< %s > %s.txt 2>&1 && python3 %s/check_perfetto.py --gpu-dump %s.txt 2>&1",
		       src, out, out, src, out);
	if (st)
		fail_msg("perfetto: %s", pf);
	assert_string_equal(chrome, pf);
	/* 8 device records and 6 flows per process; flows from each pid's own
	 * threads (tids + 100 in the copy) to its own "GPU N (pid P)" */
	size_t ngpu = 0, nflow = 0;
	for (char *l = chrome; *l; l = strchr(l, '\n') + 1) {
		ngpu += !strncmp(l, "gpu ", 4);
		nflow += !strncmp(l, "flow ", 5);
	}
	assert_int_equal(ngpu, 16);
	assert_int_equal(nflow, 12);
	assert_non_null(strstr(chrome, "flow 101 4242 1001 1000000 1005000 -> GPU_0_(pid_4242) stream_7 1006000\n"));
	assert_non_null(strstr(chrome, "flow 101 5151 1101 1000000 1005000 -> GPU_0_(pid_5151) stream_7 1006000\n"));
	assert_non_null(strstr(chrome, "flow 105 5151 1102 1015000 1016500 -> GPU_0_(pid_5151) stream_13 1017000\n"));
	assert_non_null(strstr(chrome, "gpu GPU_1_(pid_5151) stream_21 1052000 1000 108 orphan_kernel\n"));
	free(chrome);
	free(pf);
}

/* The suite's script on the GPU capture: every format read back, and the
 * GPU slices and flows the same in Chrome and Perfetto. */
static void test_check_all_gpu(void **state)
{
	char cap[512];
	int st;
	capture_of("join_mono.bin", cap, sizeof(cap));
	char *got = run(&st, "%s/check_all.sh %s build/tests/tbpf-report %s/all 2>&1", src, cap, dir);
	if (st)
		fail_msg("check_all.sh: %s", got);
	assert_non_null(strstr(got, "gpu       ok (8 device slices, 6 flows, same in chrome and perfetto)"));
	assert_non_null(strstr(got, "check_all: all formats read back"));
	free(got);
	/* the table shows torch.profiler's CUDA columns */
	got = run(&st, "grep -c 'Self CUDA  *Self CUDA %%  *CUDA total  *CUDA time avg' %s/all/run.txt", dir);
	assert_string_equal(got, "1\n");
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cuda_total_rollup),
		cmocka_unit_test(test_profile_mono),
		cmocka_unit_test(test_profile_realtime),
		cmocka_unit_test(test_traces_mono),
		cmocka_unit_test(test_traces_realtime),
		cmocka_unit_test(test_two_processes),
		cmocka_unit_test(test_check_all_gpu),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
