/* export_bench.c - benchmark: synthetic N-event capture -> perfetto (and others),
 * wall time and peak RSS of the export in a child process.
 *
 *   export_bench [EVENTS] [DIR] [FORMAT...]    defaults: 10000000 /tmp perfetto
 *
 * The capture: 1 process, 4 threads, 200 op names, 100 Python stacks;
 * per iteration on a thread: a(b, c(d), b) = 5 ops, 10 records. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "capture.h"
#include "cmd_report.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int gen(const char *path, uint64_t events)
{
	int err;
	struct capture_writer *w = capture_writer_open(path, &err);
	if (!w)
		return err;
	uint32_t pid = 4242;
	struct capture_run_info ri = { .start_mono_ns = 1000, .start_real_ns = 1700000000000000000ULL,
				       .mode = TBPF_MODE_RECORD | TBPF_MODE_EXITS, .probes_attached = 400,
				       .pids = &pid, .npids = 1, .tbpf_version = "bench", .host = "bench" };
	err = capture_write_run(w, &ri);
	err = err ?: capture_write_process(w, pid, "python3", "python3 bench.py");
	for (uint32_t t = 0; t < 4 && !err; t++) {
		char name[32];
		snprintf(name, sizeof(name), "thread-%u", t);
		err = capture_write_thread(w, pid, pid + t, name);
	}
	for (uint32_t s = 1; s <= 100 && !err; s++) {
		char fn[32];
		snprintf(fn, sizeof(fn), "step_%u", s);
		struct capture_frame f[] = { { CF_LAYER, 0, "linear", "", "Linear", "net.linear" },
					     { CF_PYTHON, s, fn, "/bench/train.py", "", "" } };
		err = capture_write_stack(w, pid, s, f, 2);
	}
	uint64_t ts = 1000, n = 0, it = 0;
	static const struct { uint8_t type, depth, slot; } pat[10] = {
		{ REC_OP_ENTER, 0, 0 }, { REC_OP_ENTER, 1, 1 }, { REC_OP_EXIT, 1, 1 },
		{ REC_OP_ENTER, 1, 2 }, { REC_OP_ENTER, 2, 3 }, { REC_OP_EXIT, 2, 3 },
		{ REC_OP_EXIT, 1, 2 }, { REC_OP_ENTER, 1, 1 }, { REC_OP_EXIT, 1, 1 },
		{ REC_OP_EXIT, 0, 0 },
	};
	while (n < events && !err) {
		uint32_t tid = pid + it % 4;
		uint32_t base = (it * 7) % 196, stack = 1 + it % 100;
		for (int k = 0; k < 10 && n < events && !err; k++, n++) {
			struct rec_op r = { .h = { pat[k].type, sizeof(r), tid, ts += 100 }, .pid = pid,
					    .op_id = base + pat[k].slot, .depth = pat[k].depth, .stack_id = stack };
			err = capture_write_raw(w, &r, sizeof(r));
		}
		it++;
	}
	for (uint32_t o = 0; o < 200 && !err; o++) {
		char name[32];
		snprintf(name, sizeof(name), "aten::op_%u", o);
		err = capture_write_op(w, o, name, o % 3 ? "" : "Tensor");
	}
	uint64_t cnt[CNT_MAX] = { [CNT_ENTRIES] = events / 2 };
	struct capture_end_info ei = { .duration_ns = ts, .counters = cnt, .ncounters = CNT_MAX,
				       .exit_mode = "duration", .gpu_note = "" };
	err = err ?: capture_write_end(w, &ei);
	int cerr = capture_writer_close(w);
	return err ? err : cerr;
}

int main(int argc, char **argv)
{
	uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	char cap[512];
	snprintf(cap, sizeof(cap), "%s/export_bench.tbpf", dir);

	double t0 = now();
	int err = gen(cap, events);
	if (err) {
		fprintf(stderr, "export_bench: %s: %s\n", cap, strerror(-err));
		return 1;
	}
	double tw = now() - t0;
	struct stat st;
	stat(cap, &st);
	printf("capture: %llu events, %.1f MB, written in %.2f s (%.1f M events/s)\n",
	       (unsigned long long)events, st.st_size / 1e6, tw, events / tw / 1e6);

	const char *def[] = { "perfetto" };
	const char **fmts = argc > 3 ? (const char **)argv + 3 : def;
	int nf = argc > 3 ? argc - 3 : 1, rc = 0;
	for (int i = 0; i < nf; i++) {
		char out[600];
		snprintf(out, sizeof(out), "%s/export_bench.%s", dir, fmts[i]);
		double t1 = now();
		pid_t c = fork();
		if (c == 0) {
			char *msg = NULL;
			int e = export_capture(cap, fmts[i], out, NULL, &msg);
			if (e)
				fprintf(stderr, "export_bench: %s\n", msg ? msg : strerror(-e));
			_exit(e ? 1 : 0);
		}
		int status;
		struct rusage ru;
		if (c < 0 || wait4(c, &status, 0, &ru) < 0) {
			perror("export_bench: fork/wait");
			return 1;
		}
		double te = now() - t1;
		stat(out, &st);
		double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
			     ru.ru_stime.tv_usec / 1e6;
		printf("%-8s %.2f s wall, %.2f s CPU (%.1f M events/s), peak RSS %.1f MB, output %.1f MB%s\n",
		       fmts[i], te, cpu, events / te / 1e6, ru.ru_maxrss / 1024.0, st.st_size / 1e6,
		       WIFEXITED(status) && !WEXITSTATUS(status) ? "" : "  FAILED");
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			rc = 1;
		unlink(out);
	}
	unlink(cap);
	return rc;
}
