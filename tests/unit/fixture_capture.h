/* fixture_capture.h - synthetic captures with hand-computed expectations (tests only).
 *
 * Scenario (times relative to T0):
 *  pid 100 "python3", tid 100 "python3":
 *    conv2d [1000, 10000) depth 0, Python stack 7
 *      convolution [2000, 7500) depth 1
 *    add [20000, 21234)
 *    add [30000, 32000) exit OPF_UNWOUND
 *    relu [40000, 50000)
 *      add [41000, ...) exit lost -> closed at 50000 (inferred)
 *  pid 100, tid 101 "worker":
 *    mm [5000, 9000) exit OPF_INFERRED, one launch at 6000
 *    add [60000, ...) never exits; an alloc at 62001 -> closed at 62001
 *  pid 200 "python3", tid 200 "bench":
 *    mm [3000, 4000); an exit of relu with no enter at 4500 (orphan)
 * Op meta records are written at the end of the file (after first use).
 */
#ifndef FIXTURE_CAPTURE_H
#define FIXTURE_CAPTURE_H
#include <string.h>
#include "capture.h"

#define T0 1000000000ULL
enum { OP_CONV2D = 1, OP_CONVOLUTION = 2, OP_ADD = 3, OP_RELU = 4, OP_MM = 5 };

static inline struct rec_op fx_op(int type, uint32_t pid, uint32_t tid, uint64_t t, uint32_t op,
				  uint16_t depth, uint16_t flags, uint32_t stack)
{
	struct rec_op r;
	memset(&r, 0, sizeof(r));
	r.h.type = type;
	r.h.size = sizeof(r);
	r.h.tid = tid;
	r.h.ts_ns = T0 + t;
	r.pid = pid;
	r.op_id = op;
	r.depth = depth;
	r.flags = flags;
	r.stack_id = stack;
	return r;
}

#define FX_N_RECORDS 20

/* The scenario's BPF records in ring-buffer order. */
static inline int fx_records(void *out[FX_N_RECORDS], size_t lens[FX_N_RECORDS])
{
	static struct rec_op ops[18];
	static struct rec_launch launch;
	static struct rec_alloc alloc;
	int n = 0, k = 0;
#define OP(...) do { ops[k] = fx_op(__VA_ARGS__); out[n] = &ops[k++]; lens[n++] = sizeof(struct rec_op); } while (0)
	OP(REC_OP_ENTER, 100, 100, 1000, OP_CONV2D, 0, 0, 7);
	OP(REC_OP_ENTER, 100, 100, 2000, OP_CONVOLUTION, 1, 0, 7);
	OP(REC_OP_ENTER, 200, 200, 3000, OP_MM, 0, 0, 0);
	OP(REC_OP_EXIT, 200, 200, 4000, OP_MM, 0, 0, 0);
	OP(REC_OP_EXIT, 200, 200, 4500, OP_RELU, 0, 0, 0);
	OP(REC_OP_ENTER, 100, 101, 5000, OP_MM, 0, 0, 0);
	memset(&launch, 0, sizeof(launch));
	launch.h = (struct rec_hdr){ REC_LAUNCH, sizeof(launch), 101, T0 + 6000 };
	launch.pid = 100;
	launch.api = CU_cudaLaunchKernel;
	launch.func = 0x7f0000001000ULL;
	launch.stream = 7;
	launch.grid[0] = 4, launch.grid[1] = 1, launch.grid[2] = 1;
	launch.block[0] = 256, launch.block[1] = 1, launch.block[2] = 1;
	launch.op_id = OP_MM;
	out[n] = &launch, lens[n++] = sizeof(launch);
	OP(REC_OP_EXIT, 100, 100, 7500, OP_CONVOLUTION, 1, 0, 7);
	OP(REC_OP_EXIT, 100, 101, 9000, OP_MM, 0, OPF_INFERRED, 0);
	OP(REC_OP_EXIT, 100, 100, 10000, OP_CONV2D, 0, 0, 7);
	OP(REC_OP_ENTER, 100, 100, 20000, OP_ADD, 0, 0, 0);
	OP(REC_OP_EXIT, 100, 100, 21234, OP_ADD, 0, 0, 0);
	OP(REC_OP_ENTER, 100, 100, 30000, OP_ADD, 0, 0, 0);
	OP(REC_OP_EXIT, 100, 100, 32000, OP_ADD, 0, OPF_UNWOUND, 0);
	OP(REC_OP_ENTER, 100, 100, 40000, OP_RELU, 0, 0, 0);
	OP(REC_OP_ENTER, 100, 100, 41000, OP_ADD, 1, 0, 0);
	OP(REC_OP_EXIT, 100, 100, 50000, OP_RELU, 0, 0, 0);
	OP(REC_OP_ENTER, 100, 101, 60000, OP_ADD, 0, 0, 0);
	memset(&alloc, 0, sizeof(alloc));
	alloc.h = (struct rec_hdr){ REC_ALLOC, sizeof(alloc), 101, T0 + 62001 };
	alloc.pid = 100;
	alloc.api = CU_cudaMalloc;
	alloc.ptr = 0x7f1000000000ULL;
	alloc.bytes = 1 << 20;
	out[n] = &alloc, lens[n++] = sizeof(alloc);
#undef OP
	return n;
}

static inline const struct capture_frame *fx_stack7(uint32_t *n)
{
	static const struct capture_frame f[] = {  /* innermost first */
		{ CF_LAYER, 0, "conv", "", "Conv2d", "blocks.0.conv" },
		{ CF_LAYER, 0, "blocks.0", "", "Block", "blocks.0" },
		{ CF_LAYER, 0, "Net", "", "Net", "" },
		{ CF_PYTHON, 10, "main", "/home/u/train.py", "", "" },
	};
	*n = 4;
	return f;
}

/* Write the scenario to path in the given layout; 0 or -errno. */
static inline int fx_write_codec(const char *path, enum capture_codec codec)
{
	int err;
	struct capture_writer *w = capture_writer_open_codec(path, codec, &err);
	if (!w)
		return err;
	uint32_t pids[] = { 100, 200 };
	struct capture_run_info ri = {
		.start_mono_ns = T0, .start_real_ns = 1700000000000000000ULL,
		.mode = TBPF_MODE_RECORD | TBPF_MODE_EXITS, .probes_attached = 5904,
		.pids = pids, .npids = 2, .tbpf_version = "0.1-test", .host = "testhost",
	};
	err = capture_write_run(w, &ri);
	/* pid 100 with its torch version, 200 in the older layout */
	err = err ?: capture_write_process_torch(w, 100, "python3", "python3 train.py", "1.13.0");
	err = err ?: capture_write_process(w, 200, "python3", "python3 bench.py");
	err = err ?: capture_write_thread(w, 100, 100, "python3");
	err = err ?: capture_write_thread(w, 100, 101, "worker");
	err = err ?: capture_write_thread(w, 200, 200, "bench");
	void *recs[FX_N_RECORDS];
	size_t lens[FX_N_RECORDS];
	int n = fx_records(recs, lens);
	for (int i = 0; i < n && !err; i++)
		err = capture_write_raw(w, recs[i], lens[i]);
	uint32_t nf;
	const struct capture_frame *f = fx_stack7(&nf);
	err = err ?: capture_write_stack(w, 100, 0x00ABCDEF00000007ULL, f, nf);
	err = err ?: capture_write_kernel(w, 100, 0x7f0000001000ULL, "void gemm_kernel<float>(int)");
	err = err ?: capture_write_op(w, OP_CONV2D, "aten::conv2d", "");
	err = err ?: capture_write_op(w, OP_CONVOLUTION, "aten::convolution", "");
	err = err ?: capture_write_op(w, OP_ADD, "aten::add", "Tensor");
	err = err ?: capture_write_op(w, OP_RELU, "aten::relu", "");
	err = err ?: capture_write_op(w, OP_MM, "aten::mm", "");
	uint64_t drops[REC_TYPE_MAX] = { [REC_OP_ENTER] = 3, [REC_OP_EXIT] = 2 };
	uint64_t cnt[CNT_MAX] = { [CNT_ENTRIES] = 9, [CNT_DROPS] = 5 };
	struct capture_end_info ei = {
		.duration_ns = 70000, .drops = drops, .ndrops = REC_TYPE_MAX,
		.counters = cnt, .ncounters = CNT_MAX, .exit_mode = "duration",
		.gpu_note = "no CUPTI activity (no GPU)",
	};
	err = err ?: capture_write_end(w, &ei);
	int cerr = capture_writer_close(w);
	return err ? err : cerr;
}

/* ... as the recorder writes it (version 2, zstd blocks) */
static inline int fx_write(const char *path)
{
	return fx_write_codec(path, CAPTURE_CODEC_ZSTD);
}
#endif
