/* test_metrics.c - Prometheus exposition from hand-built window profiles;
 * every expected line written by hand (sums, le bounds as powers of two). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "metrics.h"
#include "profile.h"

static void row(struct profile *p, uint32_t pid, uint32_t op_id, const char *name,
		const char *ovl, uint64_t calls, uint64_t self, uint64_t total)
{
	struct prof_op o = { .pid = pid, .op_id = op_id, .name = name, .overload = ovl,
			     .calls = calls, .self_ns = self, .total_ns = total };

	assert_int_equal(profile_add_op(p, &o), 0);
}

static char *render(const struct metrics *m)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(metrics_write(m, f), 0);
	fclose(f);
	return buf;
}

/* Two windows, two jobs (two "train" processes, one "serve"), top 2 ops
 * per job, one process at half coverage in window 1, train's probe cost
 * known in window 2 (overhead ratio 2 ms / 400 ms = 0.005). */
static void test_two_windows(void **state)
{
	const char *keys[] = { "host" }, *vals[] = { "box-1" };
	struct metrics_config cfg = { .top_n = 2, .label_keys = keys, .label_vals = vals,
				      .nlabels = 1 };
	struct metrics m;
	struct profile p;
	uint64_t cnt[CNT_MAX] = { 0 };
	struct metrics_proc procs1[] = { { 100, "train", 1 }, { 200, "train", 0 },
					  { 300, "serve", 0.5 } };
	/* window 2: train budgeted, 2 ms of probe cost on 400 ms of its own CPU */
	struct metrics_proc procs2[] = { { 100, "train", 1, 2e6, 4e8 }, { 300, "serve", 1 } };
	struct metrics_hist_row h1 = { .pid = 100, .op_id = 1 }, h2 = { .pid = 100, .op_id = 1 };
	struct metrics_copy_row cp = { .pid = 100, .dir = 1, .count = 3, .bytes = 4096 };
	struct metrics_self self = { .user_ns = 1500000000, .sys_ns = 250000000,
				     .rss_bytes = 10485760, .targets = 2, .overhead = 0.004 };
	char *text;

	assert_int_equal(metrics_init(&m, &cfg), 0);

	/* window 1 */
	profile_init(&p);
	row(&p, 100, 1, "aten::add", "Tensor", 10, 1000000, 1500000);
	row(&p, 100, 2, "aten::mul", "Tensor", 5, 3000000, 3000000);
	row(&p, 100, 3, "aten::relu", "", 2, 500, 2500);
	row(&p, 200, 1, "aten::add", "Scalar", 1, 250000000, 250000000);
	row(&p, 300, 7, "aten::conv2d", "", 3, 2000000000, 2500000000ULL);
	h1.buckets[0] = 4;
	h1.buckets[3] = 6;
	cnt[CNT_ENTRIES] = 21;
	{
		struct metrics_window w = { .prof = &p, .procs = procs1, .nprocs = 3, .hist = &h1,
					    .nhist = 1, .counters = cnt };

		assert_int_equal(metrics_add_window(&m, &w), 0);
	}
	profile_free(&p);

	/* window 2: pid 200 gone; two ops that find the slots taken */
	profile_init(&p);
	row(&p, 100, 1, "aten::add", "Tensor", 1, 5000000000ULL, 5000000000ULL);
	row(&p, 100, 3, "aten::relu", "", 1, 100, 100);
	row(&p, 100, 4, "aten::sum", "", 4, 9000000, 9000000);
	row(&p, 300, 7, "aten::conv2d", "", 1, 1000000000, 1000000000);
	h2.buckets[23] = 1;
	memset(cnt, 0, sizeof(cnt));
	cnt[CNT_ENTRIES] = 10;
	cnt[CNT_DROPS] = 2;
	cnt[CNT_STAT_FULL] = 1;
	{
		struct metrics_window w = { .prof = &p, .procs = procs2, .nprocs = 2, .hist = &h2,
					    .nhist = 1, .copies = &cp, .ncopies = 1, .counters = cnt };

		assert_int_equal(metrics_add_window(&m, &w), 0);
	}
	profile_free(&p);
	metrics_set_self(&m, &self);

	text = render(&m);
	assert_string_equal(text,
"# HELP tbpf_op_calls_total PyTorch op calls seen by the probes.\n"
"# TYPE tbpf_op_calls_total counter\n"
"tbpf_op_calls_total{job=\"serve\",op=\"aten::conv2d\",device=\"cpu\",host=\"box-1\"} 7\n"
"tbpf_op_calls_total{job=\"train\",op=\"aten::add\",device=\"cpu\",host=\"box-1\"} 12\n"
"tbpf_op_calls_total{job=\"train\",op=\"aten::mul\",device=\"cpu\",host=\"box-1\"} 5\n"
"tbpf_op_calls_total{job=\"train\",op=\"other\",device=\"cpu\",host=\"box-1\"} 7\n"
"# HELP tbpf_op_self_seconds_total Time in the op itself, nested ops excluded.\n"
"# TYPE tbpf_op_self_seconds_total counter\n"
"tbpf_op_self_seconds_total{job=\"serve\",op=\"aten::conv2d\",device=\"cpu\",host=\"box-1\"} 5\n"
"tbpf_op_self_seconds_total{job=\"train\",op=\"aten::add\",device=\"cpu\",host=\"box-1\"} 5.251\n"
"tbpf_op_self_seconds_total{job=\"train\",op=\"aten::mul\",device=\"cpu\",host=\"box-1\"} 0.003\n"
"tbpf_op_self_seconds_total{job=\"train\",op=\"other\",device=\"cpu\",host=\"box-1\"} 0.0090006\n"
"# HELP tbpf_op_seconds_total Time in the op, nested ops included.\n"
"# TYPE tbpf_op_seconds_total counter\n"
"tbpf_op_seconds_total{job=\"serve\",op=\"aten::conv2d\",device=\"cpu\",host=\"box-1\"} 6\n"
"tbpf_op_seconds_total{job=\"train\",op=\"aten::add\",device=\"cpu\",host=\"box-1\"} 5.2515\n"
"tbpf_op_seconds_total{job=\"train\",op=\"aten::mul\",device=\"cpu\",host=\"box-1\"} 0.003\n"
"tbpf_op_seconds_total{job=\"train\",op=\"other\",device=\"cpu\",host=\"box-1\"} 0.0090026\n"
"# HELP tbpf_op_duration_seconds Duration of op calls, nested ops included.\n"
"# TYPE tbpf_op_duration_seconds histogram\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000001024\",host=\"box-1\"} 4\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000002048\",host=\"box-1\"} 4\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000004096\",host=\"box-1\"} 4\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000008192\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000016384\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000032768\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000065536\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000131072\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000262144\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.000524288\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.001048576\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.002097152\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.004194304\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.008388608\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.016777216\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.033554432\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.067108864\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.134217728\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.268435456\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"0.536870912\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"1.073741824\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"2.147483648\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"4.294967296\",host=\"box-1\"} 10\n"
"tbpf_op_duration_seconds_bucket{job=\"train\",op=\"aten::add\",device=\"cpu\",le=\"+Inf\",host=\"box-1\"} 11\n"
"tbpf_op_duration_seconds_sum{job=\"train\",op=\"aten::add\",device=\"cpu\",host=\"box-1\"} 5.0015\n"
"tbpf_op_duration_seconds_count{job=\"train\",op=\"aten::add\",device=\"cpu\",host=\"box-1\"} 11\n"
"# HELP tbpf_cuda_launches_total CUDA kernel launches issued while the op was on top of the stack.\n"
"# TYPE tbpf_cuda_launches_total counter\n"
"# HELP tbpf_cuda_copies_total CUDA memory copies and sets by direction.\n"
"# TYPE tbpf_cuda_copies_total counter\n"
"tbpf_cuda_copies_total{job=\"train\",device=\"cuda\",direction=\"HtoD\",host=\"box-1\"} 3\n"
"# HELP tbpf_cuda_copy_bytes_total Bytes of CUDA memory copies and sets by direction.\n"
"# TYPE tbpf_cuda_copy_bytes_total counter\n"
"tbpf_cuda_copy_bytes_total{job=\"train\",device=\"cuda\",direction=\"HtoD\",host=\"box-1\"} 4096\n"
"# HELP tbpf_job_processes Processes of the job seen in the last window.\n"
"# TYPE tbpf_job_processes gauge\n"
"tbpf_job_processes{job=\"serve\",host=\"box-1\"} 1\n"
"tbpf_job_processes{job=\"train\",host=\"box-1\"} 1\n"
"# HELP tbpf_job_coverage_ratio Share of the job's work in the last window that the op probes observed (1 = all).\n"
"# TYPE tbpf_job_coverage_ratio gauge\n"
"tbpf_job_coverage_ratio{job=\"serve\",host=\"box-1\"} 1\n"
"tbpf_job_coverage_ratio{job=\"train\",host=\"box-1\"} 1\n"
"# HELP tbpf_job_overhead_ratio Estimated probe cost added to the job in the last window, as a fraction of its own CPU time (budgeted jobs, --max-overhead).\n"
"# TYPE tbpf_job_overhead_ratio gauge\n"
"tbpf_job_overhead_ratio{job=\"train\",host=\"box-1\"} 0.005\n"
"# HELP tbpf_job_estimated 1 when the job's op counts include estimates scaled from partial coverage.\n"
"# TYPE tbpf_job_estimated gauge\n"
"tbpf_job_estimated{job=\"serve\",host=\"box-1\"} 1\n"
"tbpf_job_estimated{job=\"train\",host=\"box-1\"} 0\n"
"# HELP tbpf_probe_hits_total Op entry probe hits.\n"
"# TYPE tbpf_probe_hits_total counter\n"
"tbpf_probe_hits_total{host=\"box-1\"} 31\n"
"# HELP tbpf_events_dropped_total Records dropped: ring buffer full.\n"
"# TYPE tbpf_events_dropped_total counter\n"
"tbpf_events_dropped_total{host=\"box-1\"} 2\n"
"# HELP tbpf_ops_lost_total Op calls not counted, by reason.\n"
"# TYPE tbpf_ops_lost_total counter\n"
"tbpf_ops_lost_total{reason=\"depth\",host=\"box-1\"} 0\n"
"tbpf_ops_lost_total{reason=\"map_full\",host=\"box-1\"} 1\n"
"tbpf_ops_lost_total{reason=\"thread_slots\",host=\"box-1\"} 0\n"
"# HELP tbpf_windows_total Aggregation windows completed.\n"
"# TYPE tbpf_windows_total counter\n"
"tbpf_windows_total{host=\"box-1\"} 2\n"
"# HELP tbpf_cpu_seconds_total CPU time used by tbpf itself.\n"
"# TYPE tbpf_cpu_seconds_total counter\n"
"tbpf_cpu_seconds_total{mode=\"user\",host=\"box-1\"} 1.5\n"
"tbpf_cpu_seconds_total{mode=\"system\",host=\"box-1\"} 0.25\n"
"# HELP tbpf_resident_memory_bytes Resident memory of tbpf itself.\n"
"# TYPE tbpf_resident_memory_bytes gauge\n"
"tbpf_resident_memory_bytes{host=\"box-1\"} 10485760\n"
"# HELP tbpf_targets Processes with op probes attached.\n"
"# TYPE tbpf_targets gauge\n"
"tbpf_targets{host=\"box-1\"} 2\n"
"# HELP tbpf_overhead_ratio Estimated probe cost added to the targets, as a fraction of their CPU time.\n"
"# TYPE tbpf_overhead_ratio gauge\n"
"tbpf_overhead_ratio{host=\"box-1\"} 0.004\n");
	free(text);
	metrics_free(&m);
}

/* --label job=NAME merges every process into one job; label values are
 * escaped; jobs past max_jobs go to job="other"; no labels, no braces. */
static void test_job_label_and_limits(void **state)
{
	struct metrics_config cfg = { .top_n = 1, .job = "a\"b\\c\nd" };
	struct metrics_config cfg2 = { .top_n = 1, .max_jobs = 1 };
	struct metrics_proc procs[] = { { 1, "x", 1 }, { 2, "y", 1 } };
	struct metrics m;
	struct profile p;
	char *text;

	profile_init(&p);
	row(&p, 1, 1, "aten::add", "", 2, 10, 10);
	row(&p, 2, 1, "aten::add", "", 3, 10, 10);
	{
		struct metrics_window w = { .prof = &p, .procs = procs, .nprocs = 2 };

		assert_int_equal(metrics_init(&m, &cfg), 0);
		assert_int_equal(metrics_add_window(&m, &w), 0);
		text = render(&m);
		assert_non_null(strstr(text, "tbpf_op_calls_total{job=\"a\\\"b\\\\c\\nd\","
					     "op=\"aten::add\",device=\"cpu\"} 5\n"));
		assert_non_null(strstr(text, "\ntbpf_windows_total 1\n"));
		free(text);
		metrics_free(&m);

		assert_int_equal(metrics_init(&m, &cfg2), 0);
		assert_int_equal(metrics_add_window(&m, &w), 0);
		text = render(&m);
		assert_non_null(strstr(text, "tbpf_op_calls_total{job=\"x\",op=\"aten::add\","
					     "device=\"cpu\"} 2\n"));
		assert_non_null(strstr(text, "tbpf_op_calls_total{job=\"other\",op=\"other\","
					     "device=\"cpu\"} 3\n"));
		assert_null(strstr(text, "job=\"y\""));
		free(text);
		metrics_free(&m);
	}
	profile_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_windows),
		cmocka_unit_test(test_job_label_and_limits),
	};

	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
