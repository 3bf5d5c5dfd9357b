/* gen_fixtures.c - fixture generator for the GPU join: fills the real
 * CUpti_Activity* structs of the toolkit's cupti_activity.h, converts them
 * with the agent's own decoder (agent/cupti_convert.h) and writes the
 * record stream tbpf would read (rec_launch, rec_memop, rec_op, rec_gpu,
 * rec_gpu_name) to tests/fixtures/cupti/.
 *
 * The scenario (all times ns, CLOCK_MONOTONIC) is spelled out in
 * tests/fixtures/cupti/README.md; tests/unit/test_gpujoin.c checks the join
 * against values computed by hand from it.
 *
 * usage: gen_fixtures OUTDIR
 *   OUTDIR/join_mono.bin      CUPTI stamped CLOCK_MONOTONIC (agent default)
 *   OUTDIR/join_realtime.bin  CUPTI stamps + REALTIME_SHIFT (CUPTI default clock)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>
#include "tbpf_abi.h"
#include "cupti_convert.h"

#define PID 4242
#define T_MAIN 1001
#define T_BWD 1002
#define REALTIME_SHIFT 1763000000000000000ll

static FILE *out;
static long long shift;
static int invalid;

static void put(const void *rec, size_t size)
{
	if (fwrite(rec, size, 1, out) != 1) {
		perror("gen_fixtures: write");
		exit(1);
	}
}

static void emit(const CUpti_Activity *a)
{
	struct rec_gpu r;
	const char *long_name;
	size_t len;
	if (tbpf_cupti_convert(a, PID, &r, &long_name, &len) < 0) {
		invalid++;
		return;
	}
	if (long_name) {
		struct rec_gpu_name n;
		memset(&n, 0, sizeof(n));
		n.h.type = REC_GPU;
		n.h.size = sizeof(n);
		n.pid = PID;
		n.kind = GPU_NAME;
		n.len = len;
		n.name_id = r.name_id;
		memcpy(n.name, long_name, len);
		put(&n, sizeof(n));
	}
	put(&r, sizeof(r));
}

static void api(int runtime, unsigned cbid, unsigned tid, unsigned corr, long long s, long long e)
{
	CUpti_ActivityAPI a;
	memset(&a, 0, sizeof(a));
	a.kind = runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
	a.cbid = cbid;
	a.start = s + shift;
	a.end = e + shift;
	a.processId = PID;
	a.threadId = tid;
	a.correlationId = corr;
	emit((CUpti_Activity *)&a);
}

static void kernel(unsigned corr, unsigned dev, unsigned stream, long long s, long long e,
		   const char *name, int gx, int bx)
{
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = s + shift;
	k.end = e + shift;
	k.completed = k.end;
	k.deviceId = dev;
	k.contextId = 1;
	k.streamId = stream;
	k.gridX = gx; k.gridY = 1; k.gridZ = 1;
	k.blockX = bx; k.blockY = 1; k.blockZ = 1;
	k.correlationId = corr;
	k.name = name;
	emit((CUpti_Activity *)&k);
}

static void memcpy_rec(unsigned corr, unsigned stream, long long s, long long e,
		       unsigned long long bytes, int copy_kind)
{
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = copy_kind;
	m.bytes = bytes;
	m.start = s + shift;
	m.end = e + shift;
	m.deviceId = 0;
	m.contextId = 1;
	m.streamId = stream;
	m.correlationId = corr;
	emit((CUpti_Activity *)&m);
}

static void memset_rec(unsigned corr, unsigned stream, long long s, long long e,
		       unsigned long long bytes)
{
	CUpti_ActivityMemset4 m;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	m.bytes = bytes;
	m.start = s + shift;
	m.end = e + shift;
	m.deviceId = 0;
	m.contextId = 1;
	m.streamId = stream;
	m.correlationId = corr;
	emit((CUpti_Activity *)&m);
}

static void launch(unsigned tid, long long ts, unsigned api_id, unsigned op, unsigned stack)
{
	struct rec_launch l;
	memset(&l, 0, sizeof(l));
	l.h.type = REC_LAUNCH;
	l.h.size = sizeof(l);
	l.h.tid = tid;
	l.h.ts_ns = ts;
	l.pid = PID;
	l.api = api_id;
	l.op_id = op;
	l.stack_id = stack;
	put(&l, sizeof(l));
}

static void memop(unsigned tid, long long ts, unsigned api_id, unsigned op, unsigned stack,
		  unsigned long long bytes, unsigned dir)
{
	struct rec_memop m;
	memset(&m, 0, sizeof(m));
	m.h.type = REC_MEMOP;
	m.h.size = sizeof(m);
	m.h.tid = tid;
	m.h.ts_ns = ts;
	m.pid = PID;
	m.api = api_id;
	m.bytes = bytes;
	m.dir = dir;
	m.op_id = op;
	m.stack_id = stack;
	put(&m, sizeof(m));
}

static void op(int enter, unsigned tid, long long ts, unsigned op_id, unsigned depth, unsigned stack)
{
	struct rec_op o;
	memset(&o, 0, sizeof(o));
	o.h.type = enter ? REC_OP_ENTER : REC_OP_EXIT;
	o.h.size = sizeof(o);
	o.h.tid = tid;
	o.h.ts_ns = ts;
	o.pid = PID;
	o.op_id = op_id;
	o.depth = depth;
	o.stack_id = stack;
	put(&o, sizeof(o));
}

static const char GEMM[] =
	"void at::native::(anonymous namespace)::gemm_kernel<float, 128, 64, 8>"
	"(int, int, int, float const*, float const*, float*)";

static void scenario(void)
{
	/* Device records first and API records in scrambled order: the join
	 * must not depend on arrival order (CUPTI delivers per buffer). */
	kernel(101, 0, 7, 1006000, 1056000, GEMM, 256, 128);
	memcpy_rec(103, 7, 1056500, 1058500, 4096, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
	kernel(107, 0, 7, 1062300, 1066300, "relu_kernel", 64, 256);
	kernel(105, 0, 13, 1017000, 1037000, "ampere_sgemm_128x64_nn", 32, 128);
	kernel(104, 0, 7, 1058600, 1061600, "relu_kernel", 64, 256);
	memset_rec(106, 7, 1061700, 1062200, 1024);
	kernel(108, 1, 21, 1052000, 1053000, "orphan_kernel", 1, 32);
	kernel(999, 0, 7, 1070000, 1071000, "lost_api_kernel", 1, 32);
	/* invalid: end before start, and a kind the agent does not take */
	kernel(555, 0, 7, 1080000, 1079000, "broken_kernel", 1, 1);
	{
		CUpti_ActivityMarker2 mk;
		memset(&mk, 0, sizeof(mk));
		mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
		emit((CUpti_Activity *)&mk);
	}

	api(1, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T_MAIN, 107, 1040300, 1041000);
	api(1, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T_MAIN, 101, 1000400, 1005000);
	api(0, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, T_MAIN, 102, 1001000, 1004000);
	api(1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, T_MAIN, 103, 1010300, 1012000);
	api(1, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T_MAIN, 104, 1020200, 1022000);
	api(0, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, T_BWD, 105, 1015100, 1016500);
	api(1, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, T_MAIN, 106, 1030250, 1031000);
	api(1, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T_BWD, 108, 1050000, 1051000);

	/* host side (tbpf's probes, always CLOCK_MONOTONIC) */
	op(1, T_MAIN, 999000, 3, 0, 0xA1);        /* aten::linear */
	op(1, T_MAIN, 999500, 7, 1, 0xA1);        /* aten::addmm */
	launch(T_MAIN, 1000000, CU_cudaLaunchKernel, 7, 0xA1);
	launch(T_MAIN, 1000900, CU_cuLaunchKernel, 7, 0xA1);
	memop(T_MAIN, 1010000, CU_cudaMemcpyAsync, 7, 0xA1, 4096, CP_HTOD);
	op(0, T_MAIN, 1013000, 7, 1, 0xA1);
	op(0, T_MAIN, 1015000, 3, 0, 0xA1);
	op(1, T_BWD, 1014000, 11, 0, 0xB2);       /* aten::mm (backward thread) */
	launch(T_BWD, 1015000, CU_cuLaunchKernel, 11, 0xB2);
	op(0, T_BWD, 1018000, 11, 0, 0xB2);
	op(1, T_MAIN, 1019000, 9, 0, 0xA1);       /* aten::relu */
	launch(T_MAIN, 1020000, CU_cudaLaunchKernel, 9, 0xA1);
	op(0, T_MAIN, 1023000, 9, 0, 0xA1);
	op(1, T_MAIN, 1029000, 7, 0, 0xA1);       /* aten::addmm again */
	memop(T_MAIN, 1030000, CU_cudaMemsetAsync, 7, 0xA1, 1024, CP_SET);
	op(0, T_MAIN, 1032000, 7, 0, 0xA1);
	op(1, T_MAIN, 1039000, 9, 0, 0xA1);
	launch(T_MAIN, 1040000, CU_cudaLaunchKernel, 9, 0xA1);
	op(0, T_MAIN, 1042000, 9, 0, 0xA1);
}

static int write_file(const char *dir, const char *name, long long sh)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	out = fopen(path, "wb");
	if (!out) {
		fprintf(stderr, "gen_fixtures: %s: %s\n", path, strerror(errno));
		return 1;
	}
	shift = sh;
	invalid = 0;
	scenario();
	if (fclose(out)) {
		fprintf(stderr, "gen_fixtures: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (invalid != 2) {
		fprintf(stderr, "gen_fixtures: expected 2 rejected records, got %d\n", invalid);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_fixtures OUTDIR\n");
		return 2;
	}
	return write_file(argv[1], "join_mono.bin", 0) ||
	       write_file(argv[1], "join_realtime.bin", REALTIME_SHIFT);
}
