/* test_exporters.c - every format read back by an independent reader, with
 * expected values computed by hand from the fixture (fixture_capture.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>
#include "calltree.h"
#include "capture.h"
#include "cmd_report.h"
#include "export.h"
#include "fixture_capture.h"
#include "mem_tables.h"
#include "memory.h"
#include "model.h"
#include "steps.h"
#include "pbwriter.h"
#include "profile.h"

static char dir[] = "/tmp/tbpf-test-export-XXXXXX";
static char cap[256], gohome[256];
static const char *src = "tests/formats";  /* run from the repository root (make unit) */

static int setup(void **state)
{
	if (getenv("TBPF_FORMATS"))
		src = getenv("TBPF_FORMATS");
	if (!mkdtemp(dir))
		return -1;
	snprintf(cap, sizeof(cap), "%s/run.tbpf", dir);
	snprintf(gohome, sizeof(gohome), "%s/go", dir);
	return fx_write(cap);
}

static int teardown(void **state)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* Run a shell command; return its stdout (malloc'd) and exit status. */
static char *run(int *status, const char *fmt, ...)
{
	char *cmd;
	va_list ap;
	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) > 0);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t cap_ = 4096, len = 0;
	char *buf = malloc(cap_);
	size_t got;
	while ((got = fread(buf + len, 1, cap_ - len - 1, p)) > 0) {
		len += got;
		if (cap_ - len < 2)
			buf = realloc(buf, cap_ *= 2);
	}
	buf[len] = 0;
	int st = pclose(p);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	free(cmd);
	return buf;
}

static char *out_path(const char *name)
{
	static char p[4][300];  /* a few at once in one call */
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static void export_ok(const char *fmt, const char *file, const struct export_opts *o)
{
	char *msg = NULL;
	int err = export_capture(cap, fmt, out_path(file), o, &msg);
	if (err)
		fail_msg("export %s: %s", fmt, msg ? msg : "?");
}

static void test_table_golden(void **state)
{
	/* both processes of the fixture in one table (sections:
	 * test_per_process) */
	struct export_opts o = { .merge = true };
	export_ok("table", "run.txt", &o);
	int st;
	/* the op table (the capture's CUDA tables follow it: test_cuda_layers) */
	char *got = run(&st, "sed -n '1,12p' %s", out_path("run.txt"));
	/* Values by hand: self ns add 1234+2000+9000+2001 = 14235 of a total
	 * 29235 (48.69%), avg 14235/4 = 3558.75 ns; conv2d total 9000 = 30.79%. */
	const char *want =
"---------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
"                 Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls    # Launches  \n"
"---------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
"            aten::add        48.69%      14.235us        48.69%      14.235us       3.559us             4             0  \n"
"    aten::convolution        18.81%       5.500us        18.81%       5.500us       5.500us             1             0  \n"
"             aten::mm        17.10%       5.000us        17.10%       5.000us       2.500us             2             1  \n"
"         aten::conv2d        11.97%       3.500us        30.79%       9.000us       9.000us             1             0  \n"
"           aten::relu         3.42%       1.000us        34.21%      10.000us      10.000us             1             0  \n"
/* the CUDA runtime calls (untimed in this fixture) */
"     cudaLaunchKernel         0.00%       0.000us         0.00%       0.000us       0.000us             1             0  \n"
"           cudaMalloc         0.00%       0.000us         0.00%       0.000us       0.000us             1             0  \n"
"---------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
"Self CPU time total: 29.235us\n";
	assert_string_equal(got, want);
	free(got);

	/* --sort count --row-limit 2: add (4), mm (2) */
	o.sort = "count";
	o.merge = true;
	o.row_limit = 2;
	export_ok("table", "run2.txt", &o);
	got = run(&st, "sed -n '4,5p' %s | awk '{print $1, $7}'", out_path("run2.txt"));
	assert_string_equal(got, "aten::add 4\naten::mm 2\n");
	free(got);

	/* by overload: the name column gains ".Tensor" */
	o = (struct export_opts){ .by_overload = true, .merge = true };
	export_ok("table", "run3.txt", &o);
	got = run(&st, "grep -c 'aten::add.Tensor ' %s", out_path("run3.txt"));
	assert_string_equal(got, "1\n");
	free(got);
}

/* Several processes: the fixture's pids 100 and 200 split into
 * one part each, by hand: pid 100 add 4, convolution 1, conv2d 1, relu 1,
 * mm 1 (8 calls); pid 200 mm 1.  Each op's calls over the parts add up to
 * the merged row.  The table has a section per process with its header. */
static void test_per_process(void **state)
{
	struct capture_reader *r = capture_reader_open(cap);
	struct tbpf_model m;
	struct prof_op *all = NULL;
	size_t nall = 0;
	int st;

	(void)state;
	assert_non_null(r);
	model_init(&m);
	assert_int_equal(model_from_capture(r, MODEL_CUDA | MODEL_LAYERS, &m), 0);
	assert_int_equal(model_split_capture(&m, capture_reader_meta(r)), 0);
	assert_int_equal(m.nprocs, 2);
	assert_int_equal(m.procs[0].pid, 100);
	assert_string_equal(m.procs[0].cmdline, "python3 train.py");
	assert_string_equal(m.procs[0].torch, "1.13.0");
	assert_int_equal(m.procs[1].pid, 200);
	assert_string_equal(m.procs[1].cmdline, "python3 bench.py");
	assert_string_equal(m.procs[1].torch, "");   /* written without one */
	assert_non_null(m.procs[0].m->tree);
	assert_int_equal(profile_fold(&m.prof, PROF_BY_NAME, &all, &nall), 0);
	uint64_t total[2] = { 0 };
	for (size_t i = 0; i < nall; i++) {
		uint64_t sum = 0;

		for (size_t p = 0; p < 2; p++) {
			const struct profile *pp = &m.procs[p].m->prof;

			assert_int_equal(pp->npids, 1);
			assert_int_equal(pp->pids[0], m.procs[p].pid);
			for (size_t k = 0; k < pp->nops; k++) {
				assert_int_equal(pp->ops[k].pid, m.procs[p].pid);
				if (!strcmp(pp->ops[k].name, all[i].name)) {
					sum += pp->ops[k].calls;
					total[p] += pp->ops[k].calls;
				}
			}
		}
		assert_int_equal(sum, all[i].calls);
	}
	assert_int_equal(total[0], 8 + 2);   /* + its cudaLaunchKernel and cudaMalloc rows */
	assert_int_equal(total[1], 1);
	/* CUDA tables per process: the fixture's launch and cudaMalloc are
	 * pid 100's; pid 200 made no CUDA call */
	assert_non_null(m.cuda);
	assert_non_null(m.procs[0].m->cuda);
	assert_null(m.procs[1].m->cuda);
	assert_int_equal(m.procs[0].m->cuda->records, m.cuda->records);
	assert_int_equal(m.procs[0].m->cuda->nkernels, 1);
	assert_int_equal(m.procs[0].m->cuda->kernels[0].launches, m.cuda->kernels[0].launches);
	assert_string_equal(m.procs[0].m->cuda->kernels[0].name, m.cuda->kernels[0].name);
	assert_int_equal(m.procs[0].m->cuda->peak_bytes, m.cuda->peak_bytes);
	free(all);
	model_free(&m);
	capture_reader_close(r);

	struct export_opts o = { .row_limit = -1 };
	export_ok("table", "procs.txt", &o);
	char *got = run(&st, "grep -c '^Self CPU time total' %s; grep -E '^(== |CUDA )' %s",
			out_path("procs.txt"), out_path("procs.txt"));
	/* the CUDA tables inside pid 100's section, none in pid 200's */
	assert_string_equal(got, "2\n"
			    "== pid 100: python3 train.py (torch 1.13.0): 8 op calls, 2 CUDA API calls ==\n"
			    "CUDA API calls (host side; Self CPU: time in the call, of the timed calls)\n"
			    "CUDA kernels (host-side launches)\n"
			    "CUDA allocations\n"
			    "== pid 200: python3 bench.py (torch unknown): 1 op calls ==\n");
	free(got);
	/* --merge: one table, today's */
	o.merge = true;
	export_ok("table", "merged.txt", &o);
	got = run(&st, "grep -c '^== ' %s; awk '$1 == \"aten::mm\" {print $7}' %s",
		  out_path("merged.txt"), out_path("merged.txt"));
	assert_string_equal(got, "0\n2\n");
	free(got);
}

/* A process's part of the memory tables (mem_pid): its live
 * allocations and its devices only; the whole run's without it. */
static void test_mem_per_process(void **state)
{
	struct mem_model mm;
	struct tbpf_model m;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	mem_model_init(&mm);
	for (uint32_t pid = 7; pid <= 8; pid++) {
		struct rec_mem r = { .h = { .type = REC_MEM, .size = sizeof(r), .tid = pid, .ts_ns = pid },
				     .pid = pid, .dev_type = TBPF_C10_DEV_CPU, .dev_index = -1,
				     .ptr = 0x1000 * pid, .bytes = 100 * pid };
		assert_int_equal(mem_model_add(&mm, &r), 0);
	}
	assert_int_equal(mem_model_finish(&mm), 0);
	model_init(&m);
	m.mem = &mm;
	m.mem_pid = 8;
	f = open_memstream(&buf, &len);
	assert_int_equal(mem_tables_print(f, &m), 0);
	assert_int_equal(mem_json_member(f, &m), 0);
	fclose(f);
	assert_non_null(strstr(buf, "Peak CPU memory of pid 8: 800 b"));
	assert_null(strstr(buf, "pid 7"));
	assert_null(strstr(buf, "\"pid\": 7"));
	assert_non_null(strstr(buf, "\"pid\": 8, \"device\": \"CPU\", \"device_index\": -1, \"op\""));
	free(buf);
	m.mem_pid = 0;   /* the whole run */
	f = open_memstream(&buf, &len);
	assert_int_equal(mem_tables_print(f, &m), 0);
	fclose(f);
	assert_non_null(strstr(buf, "pid 7"));
	assert_non_null(strstr(buf, "pid 8"));
	free(buf);
	m.mem = NULL;
	model_free(&m);
	mem_model_free(&mm);
}

static uint64_t self_cuda_of(const struct profile *p, const char *name)
{
	uint64_t ns = 0;

	for (size_t i = 0; i < p->nops; i++)
		if (!strcmp(p->ops[i].name, name))
			ns += p->ops[i].self_cuda_ns;
	return ns;
}

/* --steps / --schedule: a capture of pid 7, one thread; the
 * optimizer scope (Optimizer.step#SGD.step) ends steps at 110, 150, 190,
 * 230: step 0 [110,150) has op A, step 1 [150,190) A, B and the scope at
 * [180,190), step 2 [190,230) A.  schedule(wait=1, active=1, repeat=1)
 * records step 1 only: A 1, B 1, the scope 1, and ProfilerStep* one call
 * of 40 ns of which 40 - (10 + 3 + 10) = 17 outside its ops. */
static void test_steps_cut(void **state)
{
	enum { A = 1, B = 2, SC = TBPF_SCOPE_ID_BASE | 5 };
	static const struct { int type; uint64_t t; uint32_t op; } ev[] = {
		{ REC_OP_ENTER, 100, SC }, { REC_OP_EXIT, 110, SC },
		{ REC_OP_ENTER, 120, A }, { REC_OP_EXIT, 130, A },
		{ REC_OP_ENTER, 140, SC }, { REC_OP_EXIT, 150, SC },
		{ REC_OP_ENTER, 160, A }, { REC_OP_EXIT, 170, A },
		{ REC_OP_ENTER, 175, B }, { REC_OP_EXIT, 178, B },
		{ REC_OP_ENTER, 180, SC }, { REC_OP_EXIT, 190, SC },
		{ REC_OP_ENTER, 200, A }, { REC_OP_EXIT, 210, A },
		{ REC_OP_ENTER, 220, SC }, { REC_OP_EXIT, 230, SC },
	};
	char path[300];
	int err;
	uint32_t pid = 7;
	struct capture_run_info ri = { .start_mono_ns = T0, .start_real_ns = 1, .pids = &pid,
				       .npids = 1, .tbpf_version = "t", .host = "h" };
	struct step_schedule sched = { .wait = 1, .active = 1, .repeat = 1, .set = true };

	(void)state;
	snprintf(path, sizeof(path), "%s/steps.tbpf", dir);
	struct capture_writer *w = capture_writer_open(path, &err);
	assert_non_null(w);
	err = capture_write_run(w, &ri);
	err = err ?: capture_write_process(w, 7, "python3", "python3 train.py");
	/* a kernel launched by each aten::a (steps 0, 1, 2) and by aten::b
	 * (step 1) */
	static const uint64_t launch_t[] = { 125, 165, 176, 205 };
	static const uint64_t gpu_ns[] = { 100, 200, 400, 800 };
	size_t nl = 0;

	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]) && !err; i++) {
		struct rec_op r = fx_op(ev[i].type, 7, 7, ev[i].t, ev[i].op, 0, 0, 0);

		err = capture_write_raw(w, &r, sizeof(r));
		while (!err && nl < 4 && launch_t[nl] < (i + 1 < sizeof(ev) / sizeof(ev[0]) ?
							 ev[i + 1].t : UINT64_MAX)) {
			struct rec_launch l = { .h = { .type = REC_LAUNCH, .size = sizeof(l), .tid = 7,
						       .ts_ns = T0 + launch_t[nl] },
						.pid = 7, .api = CU_cudaLaunchKernel, .func = 0x1000,
						.op_id = launch_t[nl] == 176 ? B : A };

			err = capture_write_raw(w, &l, sizeof(l));
			nl++;
		}
	}
	assert_int_equal(nl, 4);
	/* each launch's kernel ran after the work, as CUPTI delivers it: its
	 * API record (same thread, 1 ns after the probe) and device record of
	 * gpu_ns[k] */
	for (size_t k = 0; k < nl && !err; k++) {
		struct rec_gpu api = { .h = { .type = REC_GPU, .size = sizeof(api), .tid = 7,
					      .ts_ns = T0 + launch_t[k] + 1 },
				       .pid = 7, .kind = GPU_API_RUNTIME, .start_ns = T0 + launch_t[k] + 1,
				       .end_ns = T0 + launch_t[k] + 2, .correlation = (uint32_t)k + 1 };
		struct rec_gpu dev = { .h = { .type = REC_GPU, .size = sizeof(dev),
					      .ts_ns = T0 + 1000 * (k + 1) },
				       .pid = 7, .kind = GPU_KERNEL, .start_ns = T0 + 1000 * (k + 1),
				       .end_ns = T0 + 1000 * (k + 1) + gpu_ns[k],
				       .correlation = (uint32_t)k + 1, .name = "k" };

		err = capture_write_raw(w, &api, sizeof(api));
		err = err ?: capture_write_raw(w, &dev, sizeof(dev));
	}
	err = err ?: capture_write_op(w, A, "aten::a", "");
	err = err ?: capture_write_op(w, B, "aten::b", "");
	err = err ?: capture_write_op(w, SC, "Optimizer.step#SGD.step", "");
	assert_int_equal(err, 0);
	assert_int_equal(capture_writer_close(w), 0);

	struct capture_reader *r = capture_reader_open(path);
	struct tbpf_model m;

	assert_non_null(r);
	assert_null(capture_reader_error(r));
	model_init(&m);
	assert_int_equal(model_from_capture_steps(r, 0, NULL, &sched, &m), 0);
	assert_non_null(m.steps);
	assert_int_equal(m.steps->n, 1);
	assert_int_equal(m.steps->v[0].k, 1);
	uint64_t a = 0, b = 0, sc = 0, st = 0;
	for (size_t i = 0; i < m.prof.nops; i++) {
		const struct prof_op *o = &m.prof.ops[i];

		if (!strcmp(o->name, "aten::a"))
			a += o->calls;
		else if (!strcmp(o->name, "aten::b"))
			b += o->calls;
		else if (!strcmp(o->name, "Optimizer.step#SGD.step"))
			sc += o->calls;
		else if (!strcmp(o->name, PROF_STEP_ROW)) {
			st += o->calls;
			assert_int_equal(o->total_ns, 40);
			assert_int_equal(o->self_ns, 17);
		} else {
			fail_msg("unexpected row %s", o->name);
		}
	}
	assert_int_equal(a, 1);
	assert_int_equal(b, 1);
	assert_int_equal(sc, 1);
	assert_int_equal(st, 1);
	/* device times of the work launched in step 1 only */
	assert_int_equal(self_cuda_of(&m.prof, "aten::a"), 200);
	assert_int_equal(self_cuda_of(&m.prof, "aten::b"), 400);
	model_free(&m);
	/* the CUDA tables too: step 1's two launches */
	model_init(&m);
	assert_int_equal(model_from_capture_steps(r, MODEL_CUDA, NULL, &sched, &m), 0);
	assert_non_null(m.cuda);
	assert_int_equal(m.cuda->records, 2);
	assert_int_equal(m.cuda->apis[CU_cudaLaunchKernel].calls, 2);
	assert_int_equal(cuda_model_of_pid(m.cuda, 7)->records, 2);
	model_free(&m);
	/* repeat=2 (active=1, steps 0 and 1): the last cycle's, step 1, as
	 * torch.profiler's key_averages() after the run */
	struct step_schedule rep = { .active = 1, .repeat = 2, .set = true };
	model_init(&m);
	assert_int_equal(model_from_capture_steps(r, MODEL_CUDA, NULL, &rep, &m), 0);
	assert_int_equal(m.steps->n, 1);
	assert_int_equal(m.steps->v[0].k, 1);
	assert_int_equal(m.cuda->records, 2);
	b = 0;
	for (size_t i = 0; i < m.prof.nops; i++) {
		if (!strcmp(m.prof.ops[i].name, "aten::b") || !strcmp(m.prof.ops[i].name, PROF_STEP_ROW))
			b += m.prof.ops[i].calls;
		else if (!strcmp(m.prof.ops[i].name, "aten::a"))
			assert_int_equal(m.prof.ops[i].calls, 1);
	}
	assert_int_equal(b, 2);
	assert_int_equal(self_cuda_of(&m.prof, "aten::a"), 200);
	model_free(&m);
	/* without a schedule: every op, no ProfilerStep* row */
	model_init(&m);
	assert_int_equal(model_from_capture(r, MODEL_CUDA, &m), 0);
	assert_int_equal(m.cuda->records, 4);
	a = 0;
	for (size_t i = 0; i < m.prof.nops; i++) {
		assert_string_not_equal(m.prof.ops[i].name, PROF_STEP_ROW);
		if (!strcmp(m.prof.ops[i].name, "aten::a"))
			a += m.prof.ops[i].calls;
	}
	assert_int_equal(a, 3);
	assert_int_equal(self_cuda_of(&m.prof, "aten::a"), 100 + 200 + 800);
	assert_int_equal(self_cuda_of(&m.prof, "aten::b"), 400);
	model_free(&m);
	capture_reader_close(r);
}

/* Our table and torch.profiler's own _build_table for the same totals. */
static void compare_with_torch(const struct profile *p, const char *sort, long limit)
{
	char *json = out_path("torch_in.json");
	FILE *f = fopen(json, "w");
	fprintf(f, "{\"sort\": %s%s%s, \"row_limit\": %ld, \"rows\": [", sort ? "\"" : "", sort ? sort : "null",
		sort ? "\"" : "", limit);
	for (size_t i = 0; i < p->nops; i++)
		fprintf(f, "%s{\"name\": \"%s\", \"calls\": %llu, \"self_ns\": %llu, \"total_ns\": %llu}",
			i ? ", " : "", p->ops[i].name, (unsigned long long)p->ops[i].calls,
			(unsigned long long)p->ops[i].self_ns, (unsigned long long)p->ops[i].total_ns);
	fputs("]}\n", f);
	fclose(f);
	int st;
	char *want = run(&st, "/usr/bin/python3 %s/torch_table.py < %s 2>&1", src, json);
	if (st)
		fail_msg("torch_table.py: %s", want);
	struct export_opts o = { .sort = sort, .row_limit = limit };
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	assert_int_equal(export_table(m, p, &o), 0);
	fclose(m);
	assert_string_equal(buf, want);
	free(buf);
	free(want);
}

static void test_table_matches_torch(void **state)
{
	struct profile p;
	profile_init(&p);
	/* magnitudes across us/ms/s, a name long enough to be cut, no ties */
	struct prof_op rows[] = {
		{ .name = "aten::add", .calls = 7, .self_ns = 123456, .total_ns = 234567 },
		{ .name = "aten::convolution", .calls = 3, .self_ns = 2500001, .total_ns = 9876543 },
		{ .name = "aten::_some_extremely_long_operator_name_that_needs_trimming_x", .calls = 1,
		  .self_ns = 999, .total_ns = 1999 },
		{ .name = "aten::mm", .calls = 11, .self_ns = 1234567891, .total_ns = 2345678912 },
		{ .name = "aten::relu", .calls = 2, .self_ns = 42, .total_ns = 43 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rows[i].op_id = i + 1;
		assert_int_equal(profile_add_op(&p, &rows[i]), 0);
	}
	compare_with_torch(&p, "self_cpu_time_total", 100);
	compare_with_torch(&p, "cpu_time_total", 100);
	compare_with_torch(&p, "cpu_time", 3);
	compare_with_torch(&p, "count", 100);
	profile_free(&p);
}

/* No op seen: header and footer, not torch's "". */
static void test_table_empty(void **state)
{
	struct profile p;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	profile_init(&p);
	assert_int_equal(export_table(m, &p, NULL), 0);
	fclose(m);
	assert_string_equal(buf,
"--------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
"    Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  \n"
"--------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
"--------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
"Self CPU time total: 0.000us\n");
	free(buf);
	profile_free(&p);
}

static void test_json(void **state)
{
	export_ok("json", "run.json", NULL);
	int st;
	char *got = run(&st, "python3 %s/dump_profile_json.py %s 2>&1", src, out_path("run.json"));
	assert_int_equal(st, 0);
	const char *want =
"run pids=100,200 duration_ns=70000 probes_attached=5904 events_dropped=5 exit_mode=duration "
"mode=return probes gpu_times=False\n"
"op 100 aten::add Tensor calls=4 self_ns=14235 total_ns=14235 max_ns=9000 inferred=3 launches=0 folded=0\n"
"op 100 aten::convolution - calls=1 self_ns=5500 total_ns=5500 max_ns=5500 inferred=0 launches=0 folded=0\n"
"op 100 aten::mm - calls=1 self_ns=4000 total_ns=4000 max_ns=4000 inferred=1 launches=1 folded=0\n"
"op 100 aten::conv2d - calls=1 self_ns=3500 total_ns=9000 max_ns=9000 inferred=0 launches=0 folded=0\n"
"op 200 aten::mm - calls=1 self_ns=1000 total_ns=1000 max_ns=1000 inferred=0 launches=0 folded=0\n"
"op 100 aten::relu - calls=1 self_ns=1000 total_ns=10000 max_ns=10000 inferred=0 launches=0 folded=0\n"
/* the fixture's launch and cudaMalloc as CUDA runtime call rows
 * (records without return timing: a call each, no time) */
"op 100 cudaLaunchKernel - calls=1 self_ns=0 total_ns=0 max_ns=0 inferred=0 launches=0 folded=0\n"
"op 100 cudaMalloc - calls=1 self_ns=0 total_ns=0 max_ns=0 inferred=0 launches=0 folded=0\n";
	assert_string_equal(got, want);
	free(got);
}

static void test_json_escapes(void **state)
{
	struct profile p;
	profile_init(&p);
	p.exit_mode = "sig\"nal\n";
	struct prof_op o = { .name = "we\\ird\x01 \xff name \xc3\xa9", .overload = "", .calls = 1 };
	assert_int_equal(profile_add_op(&p, &o), 0);
	FILE *f = fopen(out_path("esc.json"), "w");
	assert_int_equal(export_json(f, &p, NULL), 0);
	fclose(f);
	int st;
	char *got = run(&st, "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
			"print(repr(d[\"run\"][\"exit_mode\"]), repr(d[\"ops\"][0][\"name\"]))' %s", out_path("esc.json"));
	assert_int_equal(st, 0);
	assert_string_equal(got, "'sig\"nal\\n' 'we\\\\ird\\x01 \xef\xbf\xbd name é'\n");
	free(got);
	profile_free(&p);
}

static void test_chrome(void **state)
{
	export_ok("chrome", "run.json.trace", NULL);
	int st;
	char *got = run(&st, "python3 %s/check_chrome.py --dump %s 2>&1", src, out_path("run.json.trace"));
	/* base = run start T0; ts/dur exact to the ns; conv2d's Python stack
	 * gives spans around it in Kineto's names, each 1 ns past
	 * the one it holds (readers add ts + dur in floating point) */
	const char *want =
"100 100 1.000 9.004 /home/u/train.py(10): main - -\n"
"100 100 1.000 9.003 nn.Module: Net_0 - -\n"
"100 100 1.000 9.002 nn.Module: Block_0 - -\n"
"100 100 1.000 9.001 nn.Module: Conv2d_0 - -\n"
"100 100 1.000 9.000 aten::conv2d 0 -\n"
"100 100 2.000 5.500 aten::convolution 1 -\n"
"100 100 20.000 1.234 aten::add 0 -\n"
"100 100 30.000 2.000 aten::add 0 unwound\n"
"100 100 40.000 10.000 aten::relu 0 -\n"
"100 100 41.000 9.000 aten::add 1 inferred\n"
"100 101 5.000 4.000 aten::mm 0 inferred\n"
"100 101 60.000 2.001 aten::add 0 inferred\n"
"200 200 3.000 1.000 aten::mm 0 -\n"
"ok 25 events: M=10 X=13 i=2\n";
	assert_int_equal(st, 0);
	assert_string_equal(got, want);
	free(got);
	/* names and base in metadata */
	got = run(&st, "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		  "print(d[\"otherData\"][\"tbpf_base_ns\"], d[\"displayTimeUnit\"], "
		  "sorted((e[\"pid\"], e[\"tid\"], e[\"args\"][\"name\"]) for e in d[\"traceEvents\"] if e[\"name\"] == \"thread_name\"))' %s",
		  out_path("run.json.trace"));
	assert_string_equal(got, "1000000000 ns [(100, 100, 'python3'), (100, 101, 'worker'), (200, 200, 'bench')]\n");
	free(got);
}

static void test_chrome_checker_rejects_overlap(void **state)
{
	/* the checker itself must fail on bad nesting (a test that cannot fail is no test) */
	FILE *f = fopen(out_path("bad.json"), "w");
	fputs("{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0.000,\"dur\":5.000},"
	      "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":4.000,\"dur\":5.000}]}", f);
	fclose(f);
	int st;
	free(run(&st, "python3 %s/check_chrome.py %s 2>/dev/null", src, out_path("bad.json")));
	assert_int_not_equal(st, 0);
}

static void test_perfetto(void **state)
{
	export_ok("perfetto", "run.perfetto-trace", NULL);
	int st;
	char *got = run(&st, "protoc --proto_path=%s --decode=perfetto.protos.Trace perfetto_trace.proto < %s > %s 2>&1; echo $?",
			src, out_path("run.perfetto-trace"), out_path("perfetto.txt"));
	assert_string_equal(got, "0\n");
	free(got);
	/* unknown fields print as bare numbers */
	got = run(&st, "grep -cE '^\\s*[0-9]+:' %s", out_path("perfetto.txt"));
	assert_string_equal(got, "0\n");
	free(got);
	got = run(&st, "grep -o 'type: TYPE_[A-Z_]*' %s | sort | uniq -c | awk '{print $1, $3}'", out_path("perfetto.txt"));
	/* 9 ops + 4 frame spans */
	assert_string_equal(got, "2 TYPE_INSTANT\n13 TYPE_SLICE_BEGIN\n13 TYPE_SLICE_END\n");
	free(got);
	/* tracks described, names interned before use, slices balanced */
	got = run(&st, "python3 %s/check_perfetto.py %s 2>&1", src, out_path("perfetto.txt"));
	assert_int_equal(st, 0);
	/* 1 snapshot + 2 processes + 3 threads + 13 begins + 13 ends + 2 instants */
	assert_string_equal(got, "ok 34 packets, 13 slices, 5 tracks\n");
	free(got);
	/* and the checker fails on a slice end without a begin */
	free(run(&st, "sed '0,/TYPE_SLICE_BEGIN/s//TYPE_SLICE_END/' %s > %s", out_path("perfetto.txt"),
		 out_path("perfetto-bad.txt")));
	free(run(&st, "python3 %s/check_perfetto.py %s 2>/dev/null", src, out_path("perfetto-bad.txt")));
	assert_int_not_equal(st, 0);
	/* interned names: each op once, iid = op id + 1 */
	got = run(&st, "python3 - %s <<'EOF'\n"
"import re, sys\n"
"t = open(sys.argv[1]).read()\n"
"names = re.findall(r'event_names \\{\\s*iid: (\\d+)\\s*name: \"([^\"]*)\"', t)\n"
"print(sorted(names))\n"
"EOF", out_path("perfetto.txt"));
	/* ops: iid = op id + 1; CUDA APIs: 1 << 30 | api; frame spans: 1 << 32 + n */
	assert_string_equal(got, "[('1073741825', 'cudaLaunchKernel'), ('1073741858', 'cudaMalloc'), ('2', 'aten::conv2d'), "
			    "('3', 'aten::convolution'), ('4', 'aten::add'), ('4294967296', 'train.py:main'), "
			    "('4294967297', 'Net'), ('4294967298', 'blocks.0'), ('4294967299', 'conv'), "
			    "('5', 'aten::relu'), ('6', 'aten::mm')]\n");
	free(got);
	/* the first op slice: conv2d at T0 + 1000 on thread 100, after the
	 * spans of its Python stack (outermost first) at the same time */
	got = run(&st, "python3 - %s <<'EOF'\n"
"import re, sys\n"
"for p in open(sys.argv[1]).read().split('packet {')[1:]:\n"
"    if 'TYPE_SLICE_BEGIN' in p:\n"
"        f = dict(re.findall(r'(timestamp|name_iid|track_uuid): (\\S+)', p))\n"
"        f.update(re.findall(r'(?m)^    (name): (\\S+)', p))  # the TrackEvent's own name\n"
"        print(f['timestamp'], f.get('name_iid', '-'), f['track_uuid'], f.get('name', '-'))\n"
"EOF", out_path("perfetto.txt"));
	/* thread uuid = tid */
	const char *want =
"1000001000 4294967296 100 -\n"
"1000001000 4294967297 100 -\n"
"1000001000 4294967298 100 -\n"
"1000001000 4294967299 100 -\n"
"1000001000 2 100 -\n";
	assert_memory_equal(got, want, strlen(want));
	free(got);
}

static void test_folded(void **state)
{
	export_ok("folded", "run.folded", NULL);
	int st;
	char *got = run(&st, "python3 %s/check_folded.py %s 2>&1", src, out_path("run.folded"));
	/* self us rounded: add 1234+2000+2001 ns at the root = 5 us */
	const char *want =
"aten::add 5\n"
"aten::mm 5\n"
"aten::relu 1\n"
"aten::relu;aten::add 9\n"
"train.py:main;Net;blocks.0;conv;aten::conv2d 4\n"
"train.py:main;Net;blocks.0;conv;aten::conv2d;aten::convolution 6\n";
	assert_int_equal(st, 0);
	assert_string_equal(got, want);
	free(got);
}

static void test_folded_escaping(void **state)
{
	struct calltree ct;
	assert_int_equal(calltree_init(&ct), 0);
	uint32_t a = calltree_frame(&ct, CT_OTHER, "a;b\nc", "", 0);
	uint32_t b = calltree_frame(&ct, CT_OTHER, "leaf 123", "", 0);
	uint32_t c = calltree_frame(&ct, CT_PYTHON, "f", "/x/y.py", 3);
	uint32_t c2 = calltree_frame(&ct, CT_PYTHON, "f", "/x/y.py", 4);  /* same text, other line */
	uint32_t na = calltree_child(&ct, 0, a);
	calltree_add(&ct, calltree_child(&ct, na, b), 2000, 1);
	calltree_add(&ct, calltree_child(&ct, 0, c), 1000, 1);
	calltree_add(&ct, calltree_child(&ct, 0, c2), 1400, 1);
	calltree_add(&ct, calltree_child(&ct, 0, b), 400, 1);  /* rounds to 0: left out */
	FILE *f = fopen(out_path("esc.folded"), "w");
	assert_int_equal(export_folded(f, &ct, NULL), 0);
	fclose(f);
	int st;
	char *got = run(&st, "python3 %s/check_folded.py %s 2>&1", src, out_path("esc.folded"));
	assert_int_equal(st, 0);
	assert_string_equal(got, "a:b c;leaf_123 2\ny.py:f 2\n");
	free(got);
	calltree_free(&ct);
}

static char *pprof_top(const char *index, const char *unit)
{
	int st;
	char *got = run(&st, "mkdir -p %s && HOME=%s GOPATH=%s/gopath GOCACHE=%s/cache GOFLAGS= "
			"go tool pprof -top %s -sample_index=%s %s 2>/dev/null | "
			"awk '/^ *flat  *flat%%/ { t = 1; next } t { print $1, $4, $6 }'",
			gohome, gohome, gohome, gohome, unit, index, out_path("run.pb.gz"));
	assert_int_equal(st, 0);
	return got;
}

static void test_pprof(void **state)
{
	export_ok("pprof", "run.pb.gz", NULL);
	/* flat = self, cum = with children; by hand from the fixture */
	char *got = pprof_top("cpu", "-unit=ns");
	assert_string_equal(got,
"14235ns 14235ns aten::add\n"
"5500ns 5500ns aten::convolution\n"
"5000ns 5000ns aten::mm\n"
"3500ns 9000ns aten::conv2d\n"
"1000ns 10000ns aten::relu\n"
"0 9000ns Net\n"
"0 9000ns blocks.0\n"
"0 9000ns conv\n"
"0 9000ns main\n");
	free(got);
	got = pprof_top("calls", "");
	assert_string_equal(got,
"4 4 aten::add\n"
"2 2 aten::mm\n"
"1 2 aten::conv2d\n"
"1 1 aten::convolution\n"
"1 2 aten::relu\n"
"0 2 Net\n"
"0 2 blocks.0\n"
"0 2 conv\n"
"0 2 main\n");
	free(got);
	/* second reader: protoc with our profile.proto; file and line of the Python frame */
	int st;
	got = run(&st, "gzip -dc %s | protoc --proto_path=%s --decode=perftools.profiles.Profile profile.proto | "
		  "grep -cE '^\\s*[0-9]+:'", out_path("run.pb.gz"), src);
	assert_string_equal(got, "0\n");
	free(got);
	got = run(&st, "HOME=%s GOPATH=%s/gopath GOCACHE=%s/cache go tool pprof -raw %s 2>/dev/null | grep train.py",
		  gohome, gohome, gohome, out_path("run.pb.gz"));
	/* "()": Go's -raw shows a system_name that differs from the name in
	 * brackets; tbpf writes none (test_pprof_module_frame says why) */
	assert_string_equal(got, "     5: 0x0 M=1 main /home/u/train.py:10 s=0()\n");
	free(got);
	/* junk is rejected by the reader (it is a real check) */
	FILE *f = fopen(out_path("junk.pb.gz"), "w");
	fputs("not a profile", f);
	fclose(f);
	free(run(&st, "HOME=%s GOPATH=%s/gopath GOCACHE=%s/cache go tool pprof -top %s >/dev/null 2>&1",
		 gohome, gohome, gohome, out_path("junk.pb.gz")));
	assert_int_not_equal(st, 0);
}

/* Python's "<module>" frame as Go's pprof reads it: by its name, as in
 * the folded output, not stripped as C++ template arguments. */
static void test_pprof_module_frame(void **state)
{
	struct calltree ct;
	int st;

	assert_int_equal(calltree_init(&ct), 0);
	uint32_t mod = calltree_frame(&ct, CT_PYTHON, "<module>", "/x/train.py", 3);
	uint32_t op = calltree_frame(&ct, CT_OTHER, "aten::mm", "", 0);
	calltree_add(&ct, calltree_child(&ct, calltree_child(&ct, 0, mod), op), 5000, 1);
	FILE *f = fopen(out_path("module.pb.gz"), "w");
	assert_int_equal(export_pprof(f, &ct, NULL), 0);
	fclose(f);
	char *got = run(&st, "mkdir -p %s && HOME=%s GOPATH=%s/gopath GOCACHE=%s/cache GOFLAGS= "
			"go tool pprof -top -unit=ns %s 2>/dev/null | "
			"awk '/^ *flat  *flat%%/ { t = 1; next } t { print $1, $4, $6 }'",
			gohome, gohome, gohome, gohome, out_path("module.pb.gz"));
	assert_int_equal(st, 0);
	assert_string_equal(got, "5000ns 5000ns aten::mm\n0 5000ns <module>\n");
	free(got);
	calltree_free(&ct);
}

static void test_pbwriter_widening(void **state)
{
	struct pbw w;
	pbw_init(&w);
	size_t outer = pb_begin(&w, 1);
	size_t inner = pb_begin(&w, 2);
	char big[300];
	memset(big, 'z', sizeof(big));
	pb_bytes(&w, 3, big, sizeof(big));  /* 300 bytes: lengths need 2 varint bytes */
	pb_end(&w, inner);
	pb_varint(&w, 4, 1ULL << 63);
	pb_fixed64(&w, 5, 0x0102030405060708ULL);
	pb_end(&w, outer);
	assert_int_equal(w.err, 0);
	/* 1 tag + 2 len + [1 tag + 2 len + (1 + 2 + 300)] + (1 + 10) + (1 + 8) */
	assert_int_equal(w.len, 3 + 3 + 303 + 11 + 9);
	FILE *f = fopen(out_path("pb.bin"), "wb");
	fwrite(w.buf, 1, w.len, f);
	fclose(f);
	int st;
	char *got = run(&st, "protoc --decode_raw < %s | grep -v zzz | tr -d ' '", out_path("pb.bin"));
	assert_string_equal(got, "1{\n2{\n}\n4:9223372036854775808\n5:0x0102030405060708\n}\n");
	free(got);
	pbw_free(&w);
}

static void test_report_errors(void **state)
{
	char *msg = NULL;
	/* a truncated copy of the capture, in version 1 where the cut
	 * falls in a record whose size is known */
	int st;
	assert_int_equal(fx_write_codec(out_path("v1.tbpf"), CAPTURE_CODEC_V1), 0);
	free(run(&st, "head -c 77 %s > %s", out_path("v1.tbpf"), out_path("cut.tbpf")));
	assert_int_equal(export_capture(out_path("cut.tbpf"), "json", out_path("x.json"), NULL, &msg), -EINVAL);
	char want[400];
	/* the RUN record at byte 32: 16 header + 8 + 8 + 4 + 4 + 4 + 2 pids * 4
	 * + (4 + 8) "0.1-test" + (4 + 8) "testhost" = 76, padded to 80 */
	snprintf(want, sizeof(want), "%s: truncated record (type 256, 80 bytes) at byte 32", out_path("cut.tbpf"));
	assert_string_equal(msg, want);
	free(msg);
	assert_int_equal(export_capture(cap, "png", NULL, NULL, &msg), -EINVAL);
	assert_string_equal(msg, "unknown format 'png' (table, tree, json, chrome, perfetto, folded, pprof, svg)");
	free(msg);
	struct export_opts o = { .sort = "speed" };
	assert_int_equal(export_capture(cap, "table", NULL, &o, &msg), -EINVAL);
	assert_string_equal(msg, "unknown sort key 'speed'");
	free(msg);
	assert_int_equal(export_capture(cap, "json", "/nonexistent/out.json", NULL, &msg), -ENOENT);
	assert_string_equal(msg, "/nonexistent/out.json: No such file or directory");
	free(msg);
	/* the command: exit codes and one-line errors */
	char *args1[] = { "report", out_path("cut.tbpf"), "--format", "json", NULL };
	assert_int_equal(cmd_report(4, args1), 1);
	char *args2[] = { "report", cap, "--format", "nope", NULL };
	assert_int_equal(cmd_report(4, args2), 2);
	char *args3[] = { "report", NULL };
	assert_int_equal(cmd_report(1, args3), 2);
	char *args4[] = { "report", cap, "--row-limit", "x", NULL };
	assert_int_equal(cmd_report(4, args4), 2);
	char *args5[] = { "report", cap, "-f", "folded", "-o", out_path("ok.folded"), NULL };
	assert_int_equal(cmd_report(6, args5), 0);
	/* notes on stderr: the fixture's end record counts 3 + 2 dropped records */
	char *got = run(&st, "build/tests/tbpf-report report %s -f json -o %s 2>&1 >/dev/null", cap, out_path("n.json"));
	assert_int_equal(st, 0);
	assert_string_equal(got, "tbpf report: 5 events were dropped while recording (ring buffer full); "
			    "rerun with a larger --ring-size\n");
	free(got);
	got = run(&st, "build/tests/tbpf-report report %s -f pprof 2>&1 | head -c 2 | od -An -tx1", cap);
	assert_string_equal(got, " 1f 8b\n");  /* gzip magic, to a pipe is fine */
	free(got);
}

static void test_check_all_script(void **state)
{
	/* the script the end-to-end suite runs on real captures */
	int st;
	char *got = run(&st, "%s/check_all.sh %s build/tests/tbpf-report %s/all 2>&1", src, cap, dir);
	if (st)
		fail_msg("check_all.sh: %s", got);
	assert_non_null(strstr(got, "check_all: all formats read back"));
	/* 9 op calls + the launch and cudaMalloc rows */
	assert_non_null(strstr(got, "json      ok (11 calls, same as the table)"));
	free(got);
	/* and it fails on a capture it cannot read */
	free(run(&st, "head -c 100 %s > %s/cut2.tbpf", cap, dir));
	free(run(&st, "%s/check_all.sh %s/cut2.tbpf build/tests/tbpf-report %s/all2 >/dev/null 2>&1", src, dir, dir));
	assert_int_not_equal(st, 0);
}

static void test_no_run_record(void **state)
{
	/* only op records and names: pids come from the ops, duration from the records */
	char p[300];
	int err;
	snprintf(p, sizeof(p), "%s/bare.tbpf", dir);
	struct capture_writer *w = capture_writer_open(p, &err);
	struct rec_op a = fx_op(REC_OP_ENTER, 9, 9, 100, 1, 0, 0, 0);
	struct rec_op b = fx_op(REC_OP_EXIT, 9, 9, 350, 1, 0, 0, 0);
	assert_int_equal(capture_write_raw(w, &a, sizeof(a)), 0);
	assert_int_equal(capture_write_raw(w, &b, sizeof(b)), 0);
	assert_int_equal(capture_writer_close(w), 0);
	export_capture(p, "json", out_path("bare.json"), NULL, NULL);
	int st;
	char *got = run(&st, "python3 %s/dump_profile_json.py %s 2>&1", src, out_path("bare.json"));
	assert_string_equal(got, "run pids=9 duration_ns=250 probes_attached=0 events_dropped=0 "
			    "exit_mode=incomplete (no end record) mode=- gpu_times=False\n"
			    "op 9 op#1 - calls=1 self_ns=250 total_ns=250 max_ns=250 inferred=0 folded=0\n");
	free(got);
}

static void test_cuda_runtime_events(void **state)
{
	/* a sync and a copy inside an op: nested in Chrome, balanced in Perfetto */
	char p[300];
	int err;
	snprintf(p, sizeof(p), "%s/cuda.tbpf", dir);
	struct capture_writer *w = capture_writer_open(p, &err);
	struct rec_op a = fx_op(REC_OP_ENTER, 9, 10, 100, 1, 0, 0, 0);
	struct rec_sync sy = { .h = { REC_SYNC, sizeof(sy), 10, T0 + 150 }, .pid = 9,
			       .api = CU_cudaStreamSynchronize, .dur_ns = 50, .handle = 3 };
	struct rec_memop mo = { .h = { REC_MEMOP, sizeof(mo), 10, T0 + 250 }, .pid = 9,
				.api = CU_cudaMemcpyAsync, .bytes = 4096, .dur_ns = 30, .dir = CP_DTOH };
	struct rec_op b = fx_op(REC_OP_EXIT, 9, 10, 400, 1, 0, 0, 0);
	assert_int_equal(capture_write_raw(w, &a, sizeof(a)), 0);
	assert_int_equal(capture_write_raw(w, &sy, sizeof(sy)), 0);
	assert_int_equal(capture_write_raw(w, &mo, sizeof(mo)), 0);
	assert_int_equal(capture_write_raw(w, &b, sizeof(b)), 0);
	assert_int_equal(capture_write_op(w, 1, "aten::item", ""), 0);
	assert_int_equal(capture_writer_close(w), 0);
	assert_int_equal(export_capture(p, "chrome", out_path("cuda.json"), NULL, NULL), 0);
	int st;
	char *got = run(&st, "python3 %s/check_chrome.py --dump %s 2>&1", src, out_path("cuda.json"));
	assert_string_equal(got,
"9 10 0.000 0.300 aten::item 0 -\n"
"9 10 0.050 0.050 cudaStreamSynchronize - -\n"
"9 10 0.150 0.030 cudaMemcpyAsync - -\n"
"ok 3 events: X=3\n");
	free(got);
	assert_int_equal(export_capture(p, "perfetto", out_path("cuda.pf"), NULL, NULL), 0);
	got = run(&st, "protoc --proto_path=%s --decode=perfetto.protos.Trace perfetto_trace.proto < %s | "
		  "grep -E 'TYPE_|timestamp: 1|string_value|int_value' | tr -d ' '", src, out_path("cuda.pf"));
	/* first: the clock snapshot at the first record (no run record) */
	assert_string_equal(got,
"timestamp:1000000100\n"
"timestamp:1000000100\ntype:TYPE_SLICE_BEGIN\n"
"timestamp:1000000150\nint_value:3\ntype:TYPE_SLICE_BEGIN\n"
"timestamp:1000000200\ntype:TYPE_SLICE_END\n"
"timestamp:1000000250\nint_value:4096\ntype:TYPE_SLICE_BEGIN\n"
"timestamp:1000000280\ntype:TYPE_SLICE_END\n"
"timestamp:1000000400\ntype:TYPE_SLICE_END\n");
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_golden),
		cmocka_unit_test(test_per_process),
		cmocka_unit_test(test_steps_cut),
		cmocka_unit_test(test_mem_per_process),
		cmocka_unit_test(test_table_matches_torch),
		cmocka_unit_test(test_table_empty),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_json_escapes),
		cmocka_unit_test(test_chrome),
		cmocka_unit_test(test_chrome_checker_rejects_overlap),
		cmocka_unit_test(test_perfetto),
		cmocka_unit_test(test_folded),
		cmocka_unit_test(test_folded_escaping),
		cmocka_unit_test(test_pprof),
		cmocka_unit_test(test_pprof_module_frame),
		cmocka_unit_test(test_pbwriter_widening),
		cmocka_unit_test(test_report_errors),
		cmocka_unit_test(test_check_all_script),
		cmocka_unit_test(test_no_run_record),
		cmocka_unit_test(test_cuda_runtime_events),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
