/* test_cuda_model.c - unit tests of the CUDA aggregation stage (records ->
 * kernel/copy/sync/allocation tables, name cache) and its exporters (text
 * tables, JSON members checked by python's json module as an independent
 * reader), and of CUDA library naming. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "tbpf_abi.h"
#include "cuda_session.h"
#include "cuda_model.h"
#include "cuda_tables.h"

/* ---- record builders ---------------------------------------------------- */

static struct rec_launch launch(uint32_t pid, uint32_t api, uint64_t func, uint32_t gx,
				uint32_t bx, uint32_t shm, uint64_t stream, uint32_t op)
{
	struct rec_launch r = {
		.h = { .type = REC_LAUNCH, .size = sizeof(r), .tid = pid, .ts_ns = 1 },
		.pid = pid, .api = api, .func = func, .stream = stream,
		.grid = { gx, 1, 1 }, .block = { bx, 2, 1 }, .shmem = shm, .op_id = op,
	};
	return r;
}

static struct rec_memop memop(uint32_t api, uint32_t dir, uint64_t bytes, uint64_t dur)
{
	struct rec_memop r = {
		.h = { .type = REC_MEMOP, .size = sizeof(r), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = api, .bytes = bytes, .dur_ns = dur, .dir = dir,
	};
	return r;
}

static struct rec_sync sync_rec(uint32_t api, uint32_t op, uint64_t dur)
{
	struct rec_sync r = {
		.h = { .type = REC_SYNC, .size = sizeof(r), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = api, .dur_ns = dur, .op_id = op,
	};
	return r;
}

static struct rec_alloc alloc_rec(uint32_t api, uint64_t ptr, uint64_t bytes, uint32_t ret)
{
	struct rec_alloc r = {
		.h = { .type = REC_ALLOC, .size = sizeof(r), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = api, .ptr = ptr, .bytes = bytes, .ret = ret,
	};
	return r;
}

#define ADD(m, r) do { __typeof__(r) _r = (r); \
	assert_int_equal(cuda_model_add((m), &_r, sizeof(_r)), 0); } while (0)

/* Resolver: host stubs live at 0x1000..0x1fff ("k_<hex>"), 0x2000..0x2fff is
 * a file mapping without symbols, pid 3 has exited, anything else is not in
 * a file. */
static int resolves;

static char *resolve(void *ctx, uint32_t pid, uint64_t addr, int *where)
{
	resolves++;
	if (pid == 3) {
		*where = CUDA_ADDR_GONE;
		return NULL;
	}
	*where = addr >= 0x1000 && addr < 0x3000 ? CUDA_ADDR_FILE : CUDA_ADDR_NOFILE;
	return addr < 0x2000 && addr >= 0x1000 ? tu_printf("k_%lx", (unsigned long)addr) : NULL;
}

static const char *opname(void *ctx, uint32_t id)
{
	static const char *const n[] = { NULL, "aten::conv2d", "aten::add" };

	return id < 3 ? n[id] : NULL;
}

/* ---- tests ---------------------------------------------------------------- */

static void test_kernels(void **state)
{
	struct cuda_model m;
	const struct cuda_kernel **v;

	resolves = 0;
	cuda_model_init(&m, resolve, NULL);
	for (int i = 0; i < 3; i++)
		ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 4, 128, 0, 0, 1));
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 8, 128, 0, 0, 2));      /* 2nd config */
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 8, 128, 0, 0x50, 2));   /* other stream */
	ADD(&m, launch(2, CU_cudaLaunchKernel, 0x1100, 4, 128, 0, 0, 0));      /* other pid */
	ADD(&m, launch(1, CU_cudaLaunchKernelExC, 0x2200, 1, 32, 64, 0, 0));   /* no symbol */
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x7f0000001000, 1, 1, 0, 0, 0)); /* opaque */
	ADD(&m, launch(1, CU_cuLaunchKernel, 0xabc, 1, 1, 0, 0, 0));           /* CUfunction */
	ADD(&m, launch(1, CU_cudaGraphLaunch, 0xdef, 0, 0, 0, 0x60, 1));       /* graph */
	ADD(&m, launch(3, CU_cudaLaunchKernel, 0x1100, 1, 1, 0, 0, 0));        /* exited */
	assert_int_equal(m.nkernels, 7);
	/* names resolved once per runtime (pid, address); driver and graph
	 * handles never asked */
	assert_int_equal(resolves, 5);

	v = cuda_model_kernels(&m);
	assert_non_null(v);
	assert_string_equal(v[0]->name, "k_1100");
	assert_int_equal(v[0]->pid, 1);
	assert_int_equal(v[0]->launches, 5);
	assert_int_equal(v[0]->ndims, 3);
	assert_int_equal(v[0]->dims[0].launches, 3);
	assert_int_equal(v[0]->dims[0].grid[0], 4);
	assert_int_equal(v[0]->dims[0].block[1], 2);
	assert_int_equal(v[0]->dims[2].stream, 0x50);
	assert_int_equal(v[0]->nops, 2);
	assert_int_equal(v[0]->ops[0].op_id, 1);
	assert_int_equal(v[0]->ops[0].count, 3);
	assert_int_equal(v[0]->ops[1].count, 2);
	/* the rest have one launch each: sorted by name */
	assert_string_equal(v[1]->name, "<CUfunction 0xabc>; name from device records");
	assert_int_equal(v[1]->src, CUDA_NAME_DRIVER);
	assert_string_equal(v[2]->name, "<graph exec 0xdef>");
	assert_string_equal(v[3]->name, "<kernel 0x1100>; process exited before it was named");
	assert_int_equal(v[3]->src, CUDA_NAME_GONE);
	assert_int_equal(v[4]->src, CUDA_NAME_NOSYM);
	assert_string_equal(v[4]->name, "<no symbol at 0x2200>");
	assert_string_equal(v[5]->name,
			    "<opaque kernel handle 0x7f0000001000>; name from device records");
	assert_int_equal(v[5]->src, CUDA_NAME_OPAQUE);
	assert_string_equal(v[6]->name, "k_1100");
	assert_int_equal(v[6]->pid, 2);
	free(v);
	cuda_model_free(&m);
}

static void test_dims_overflow(void **state)
{
	struct cuda_model m;

	cuda_model_init(&m, resolve, NULL);
	for (uint32_t g = 1; g <= CUDA_MAX_DIMS + 3; g++)
		ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1000, g, 1, 0, 0, 0));
	assert_int_equal(m.kernels[0].ndims, CUDA_MAX_DIMS);
	assert_int_equal(m.kernels[0].other_dims, 3);
	assert_int_equal(m.kernels[0].launches, CUDA_MAX_DIMS + 3);
	cuda_model_free(&m);
}

static void test_many_kernels(void **state)
{
	struct cuda_model m;

	/* grows the address index past several rehashes */
	cuda_model_init(&m, NULL, NULL);
	for (int rep = 0; rep < 2; rep++)
		for (uint64_t f = 0; f < 5000; f++)
			ADD(&m, launch(1, CU_cudaLaunchKernel, 0x100000 + f * 16, 1, 1, 0, 0, 0));
	assert_int_equal(m.nkernels, 5000);
	for (size_t i = 0; i < m.nkernels; i++)
		assert_int_equal(m.kernels[i].launches, 2);
	cuda_model_free(&m);
}

/* The daemon's per-window model: reset empties it and keeps the resolver,
 * so a kernel seen again is named again, and counts start from zero. */
static void test_reset(void **state)
{
	struct cuda_model m;
	const struct cuda_kernel **v;

	resolves = 0;
	cuda_model_init(&m, resolve, NULL);
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 4, 128, 0, 0, 1));
	ADD(&m, memop(CU_cudaMemcpy, CP_HTOD, 10, 0));
	cuda_model_reset(&m);
	assert_true(cuda_model_empty(&m));
	assert_int_equal(m.nkernels, 0);
	assert_int_equal(m.npcopies, 0);
	assert_int_equal(m.copies[CP_HTOD].count, 0);
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 4, 128, 0, 0, 1));
	assert_int_equal(resolves, 2);
	v = cuda_model_kernels(&m);
	assert_non_null(v);
	assert_string_equal(v[0]->name, "k_1100");
	assert_int_equal(v[0]->launches, 1);
	free(v);
	cuda_model_free(&m);
}

static void test_copies_syncs(void **state)
{
	struct cuda_model m;
	const struct cuda_sync **s;

	cuda_model_init(&m, NULL, NULL);
	ADD(&m, memop(CU_cudaMemcpyAsync, CP_HTOD, 4096, 0));
	ADD(&m, memop(CU_cudaMemcpy, CP_HTOD, 100, 5000));
	ADD(&m, memop(CU_cuMemcpyDtoHAsync, CP_DTOH, 7, 0));
	ADD(&m, memop(CU_cudaMemsetAsync, CP_SET, 33, 0));
	ADD(&m, memop(CU_cudaMemcpyAsync, 99, 1, 0));   /* bad dir -> Default */
	assert_int_equal(m.copies[CP_HTOD].count, 2);
	assert_int_equal(m.copies[CP_HTOD].bytes, 4196);
	assert_int_equal(m.copies[CP_HTOD].host_ns, 5000);
	assert_int_equal(m.copies[CP_DTOH].bytes, 7);
	assert_int_equal(m.copies[CP_SET].bytes, 33);
	assert_int_equal(m.copies[CP_UNKNOWN].count, 1);
	/* per process (all pid 1 here), by direction */
	assert_int_equal(m.npcopies, 1);
	assert_int_equal(m.pcopies[0].pid, 1);
	assert_int_equal(m.pcopies[0].count[CP_HTOD], 2);
	assert_int_equal(m.pcopies[0].bytes[CP_HTOD], 4196);
	assert_int_equal(m.pcopies[0].count[CP_UNKNOWN], 1);
	{
		struct rec_memop r = memop(CU_cudaMemcpy, CP_DTOH, 50, 0);

		r.pid = 2;
		ADD(&m, r);
		assert_int_equal(m.npcopies, 2);
		assert_int_equal(m.pcopies[1].pid, 2);
		assert_int_equal(m.pcopies[1].bytes[CP_DTOH], 50);
		assert_int_equal(m.pcopies[0].bytes[CP_DTOH], 7);
	}

	ADD(&m, sync_rec(CU_cudaStreamSynchronize, 1, 100));
	ADD(&m, sync_rec(CU_cudaStreamSynchronize, 1, 300));
	ADD(&m, sync_rec(CU_cudaDeviceSynchronize, 1, 50));
	ADD(&m, sync_rec(CU_cudaStreamSynchronize, 0, 1000));
	assert_int_equal(m.nsyncs, 3);
	s = cuda_model_syncs(&m);
	assert_int_equal(s[0]->op_id, 0);
	assert_int_equal(s[0]->total_ns, 1000);
	assert_int_equal(s[1]->op_id, 1);
	assert_int_equal(s[1]->api, CU_cudaStreamSynchronize);
	assert_int_equal(s[1]->count, 2);
	assert_int_equal(s[1]->total_ns, 400);
	assert_int_equal(s[1]->max_ns, 300);
	assert_int_equal(s[2]->api, CU_cudaDeviceSynchronize);
	free(s);
	cuda_model_free(&m);
}

static void test_allocs(void **state)
{
	struct cuda_model m;
	const struct cuda_alloc **a;

	cuda_model_init(&m, NULL, NULL);
	ADD(&m, alloc_rec(CU_cudaMalloc, 0xa000, 100, 0));
	ADD(&m, alloc_rec(CU_cudaMalloc, 0xb000, 200, 0));
	assert_int_equal(m.live_bytes, 300);
	ADD(&m, alloc_rec(CU_cudaFree, 0xa000, 0, 0));
	assert_int_equal(m.live_bytes, 200);
	ADD(&m, alloc_rec(CU_cuMemAlloc, 0xc000, 50, 0));
	ADD(&m, alloc_rec(CU_cudaMalloc, 0, 1000, 2));          /* failed */
	ADD(&m, alloc_rec(CU_cudaFree, 0xdead, 0, 0));          /* unknown block */
	ADD(&m, alloc_rec(CU_cudaFree, 0xa000, 0, 0));          /* double free */
	assert_int_equal(m.live_bytes, 250);
	assert_int_equal(m.peak_bytes, 300);
	a = cuda_model_allocs(&m);
	assert_int_equal(m.nallocs, 3);
	assert_int_equal(a[0]->api, CU_cudaMalloc);
	assert_int_equal(a[0]->calls, 3);
	assert_int_equal(a[0]->failed, 1);
	assert_int_equal(a[0]->bytes, 1300);
	assert_int_equal(a[1]->api, CU_cuMemAlloc);
	assert_int_equal(a[2]->api, CU_cudaFree);
	assert_int_equal(a[2]->frees, 3);
	assert_int_equal(a[2]->freed_bytes, 100);
	free(a);
	cuda_model_free(&m);
}

static void test_bad_records(void **state)
{
	struct cuda_model m;
	struct rec_launch r = launch(1, CU_cudaLaunchKernel, 0x1000, 1, 1, 0, 0, 0);
	struct rec_op op = { .h = { .type = REC_OP_ENTER, .size = sizeof(op) } };

	cuda_model_init(&m, NULL, NULL);
	assert_int_equal(cuda_model_add(&m, &r, REC_LAUNCH_V1_SIZE - 8), -EINVAL);
	r.h.size = 16;
	assert_int_equal(cuda_model_add(&m, &r, sizeof(r)), -EINVAL);
	assert_int_equal(cuda_model_add(&m, &r, 4), -EINVAL);
	assert_int_equal(cuda_model_add(&m, &op, sizeof(op)), 0);  /* not ours: ignored */
	assert_int_equal(m.nkernels, 0);
	assert_int_equal(m.bad_records, 2);
	assert_int_equal(m.records, 0);
	cuda_model_free(&m);
}

static char *render(const struct cuda_model *m, bool json)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	assert_non_null(f);
	if (json) {
		fputc('{', f);
		assert_int_equal(cuda_json_members(f, m, opname, NULL), 0);
		fputc('}', f);
	} else {
		assert_int_equal(cuda_tables_print(f, m, opname, NULL, "no device timings"), 0);
	}
	fclose(f);
	return s;
}

static void fill(struct cuda_model *m)
{
	cuda_model_init(m, resolve, NULL);
	for (int i = 0; i < 3; i++)
		ADD(m, launch(1, CU_cudaLaunchKernel, 0x1100, 4, 128, 0, 0, 1));
	ADD(m, launch(1, CU_cudaLaunchKernel, 0x1100, 4, 128, 0, 0, 2));
	ADD(m, launch(1, CU_cudaLaunchKernel, 0x1200, 2, 64, 16, 0x5000, 0));
	ADD(m, memop(CU_cudaMemcpyAsync, CP_DTOH, 1000, 0));
	ADD(m, sync_rec(CU_cudaStreamSynchronize, 2, 2500000));
	ADD(m, alloc_rec(CU_cudaMalloc, 0xa000, 1 << 20, 0));
}

static void test_text_tables(void **state)
{
	struct cuda_model m;
	char *s;

	cuda_model_init(&m, NULL, NULL);
	s = render(&m, false);
	assert_string_equal(s, "");   /* nothing seen: nothing printed */
	free(s);
	cuda_model_free(&m);

	fill(&m);
	s = render(&m, false);
	assert_non_null(strstr(s, "k_1100                4  (4,1,1)             (128,2,1)             0  0x0             aten::conv2d (3), aten::add (1)\n"));
	assert_non_null(strstr(s, "k_1200                1  (2,1,1)             (64,2,1)             16  0x5000          (no op) (1)\n"));
	assert_true(strstr(s, "k_1100") < strstr(s, "k_1200"));
	assert_non_null(strstr(s, "DtoH                 1              1000               -\n"));
	assert_non_null(strstr(s, "aten::add                         cudaStreamSynchronize          1       2.500ms"));
	assert_non_null(strstr(s, "Peak live bytes: 1048576"));
	assert_non_null(strstr(s, "no device timings\n"));
	free(s);
	cuda_model_free(&m);
}

static void test_json(void **state)
{
	struct cuda_model m;
	char *s, *dir, *path, *cmd;
	FILE *f;
	int rc;

	fill(&m);
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1300, 1, 1, 0, 0, 0));
	m.kernels[m.nkernels - 1].name[0] = '"';   /* quoting */
	s = render(&m, true);
	dir = tu_printf("/tmp/test_cuda_model.XXXXXX");
	assert_non_null(mkdtemp(dir));
	path = tu_printf("%s/out.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(s, f);
	fclose(f);
	/* python's json module as the independent reader */
	cmd = tu_printf("python3 -c '\n"
			"import json, sys\n"
			"j = json.load(open(\"%s\"))\n"
			"k = j[\"kernels\"]\n"
			"assert [x[\"name\"] for x in k] == [\"k_1100\", \"\\\"_1300\", \"k_1200\"], k\n"
			"assert k[0][\"launches\"] == 4 and k[0][\"configs\"] == [{\"grid\": [4, 1, 1], \"block\": [128, 2, 1], \"shared\": 0, \"stream\": \"0x0\", \"launches\": 4}], k[0]\n"
			"assert sorted((o[\"op\"], o[\"launches\"]) for o in k[0][\"ops\"]) == [(\"aten::add\", 1), (\"aten::conv2d\", 3)]\n"
			"assert k[2][\"ops\"] == [{\"op\": None, \"launches\": 1}] and k[2][\"address\"] == \"0x1200\"\n"
			"assert j[\"copies\"] == [{\"direction\": \"DtoH\", \"count\": 1, \"bytes\": 1000, \"host_ns\": 0}]\n"
			"assert j[\"syncs\"] == [{\"op\": \"aten::add\", \"api\": \"cudaStreamSynchronize\", \"count\": 1, \"total_ns\": 2500000, \"max_ns\": 2500000}]\n"
			"assert j[\"allocations\"][0][\"api\"] == \"cudaMalloc\" and j[\"allocation_peak_bytes\"] == 1048576\n"
			"'", path);
	rc = system(cmd);
	assert_int_equal(rc, 0);
	unlink(path);
	rmdir(dir);
	free(cmd);
	free(path);
	free(dir);
	free(s);
	cuda_model_free(&m);
}

/* one row per API, every record a call, host time only for the
 * calls probed at return (synchronous copies/sets, syncs); table and JSON */
static void test_api_calls(void **state)
{
	struct cuda_model m;
	const struct cuda_apistat **v;
	size_t n;
	char *s;

	cuda_model_init(&m, resolve, NULL);
	for (int i = 0; i < 5; i++)
		ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 1, 1, 0, 0, 0));
	ADD(&m, launch(1, CU_cuLaunchKernel, 0x1200, 1, 1, 0, 0, 0));
	ADD(&m, memop(CU_cudaMemcpy, CP_HTOD, 100, 700));
	ADD(&m, memop(CU_cudaMemcpy, CP_DTOH, 100, 300));
	ADD(&m, memop(CU_cudaMemcpyAsync, CP_HTOD, 100, 0));
	ADD(&m, sync_rec(CU_cudaDeviceSynchronize, 0, 2000));
	ADD(&m, alloc_rec(CU_cudaMalloc, 0, 64, 2));
	ADD(&m, alloc_rec(CU_cudaFree, 0, 0, 0));
	v = cuda_model_apis(&m, &n);
	assert_non_null(v);
	assert_int_equal(n, 7);
	/* by host time, then calls, then name */
	assert_int_equal(v[0]->api, CU_cudaDeviceSynchronize);
	assert_int_equal(v[1]->api, CU_cudaMemcpy);
	assert_int_equal(v[1]->calls, 2);
	assert_int_equal(v[1]->timed, 2);
	assert_int_equal(v[1]->total_ns, 1000);
	assert_int_equal(v[1]->max_ns, 700);
	assert_int_equal(v[2]->api, CU_cudaLaunchKernel);
	assert_int_equal(v[2]->calls, 5);
	assert_int_equal(v[2]->timed, 0);
	assert_string_equal(cuda_model_api_name(v[3]->api), "cuLaunchKernel");
	assert_string_equal(cuda_model_api_name(v[4]->api), "cudaFree");
	assert_string_equal(cuda_model_api_name(v[5]->api), "cudaMalloc");
	assert_string_equal(cuda_model_api_name(v[6]->api), "cudaMemcpyAsync");
	assert_int_equal(v[6]->timed, 0);
	free(v);
	s = render(&m, false);
	assert_non_null(strstr(s, "cudaMemcpy                                   2         2       1.000us       0.500us       0.700us\n"));
	assert_non_null(strstr(s, "cudaLaunchKernel                             5         0             -             -             -\n"));
	assert_true(strstr(s, "CUDA API calls") < strstr(s, "CUDA kernels"));
	free(s);
	s = render(&m, true);
	assert_non_null(strstr(s, "{\"name\": \"cudaMemcpy\", \"calls\": 2, \"timed_calls\": 2, \"total_ns\": 1000, \"max_ns\": 700}"));
	free(s);
	cuda_model_reset(&m);
	v = cuda_model_apis(&m, &n);
	assert_int_equal(n, 0);
	free(v);
	cuda_model_free(&m);
}

/* Return timing: a launch, async copy, allocation or free
 * timed at its return carries its host time; records of captures made
 * before it (the shorter launch and allocation layouts, copies without
 * MEMOP_TIMED other than cudaMemcpy/cudaMemset) count as untimed calls. */
static void test_host_times(void **state)
{
	struct cuda_model m;
	struct rec_launch l = launch(1, CU_cudaLaunchKernel, 0x1100, 1, 1, 0, 0, 0);
	struct rec_memop mo = memop(CU_cudaMemcpyAsync, CP_HTOD, 100, 0);
	struct rec_alloc a = alloc_rec(CU_cudaFree, 0x10, 0, 1);
	uint64_t ns;

	(void)state;
	cuda_model_init(&m, resolve, NULL);
	l.dur_ns = 300;
	ADD(&m, l);
	l.dur_ns = 500;
	ADD(&m, l);
	assert_true(cuda_rec_host_ns(&l.h, &ns));
	assert_int_equal(ns, 500);
	/* an older capture's launch: 80 bytes, no dur_ns */
	l.h.size = REC_LAUNCH_V1_SIZE;
	assert_false(cuda_rec_host_ns(&l.h, &ns));
	assert_int_equal(cuda_model_add(&m, &l, REC_LAUNCH_V1_SIZE), 0);
	ADD(&m, mo);                         /* async copy, untimed (old) */
	assert_false(cuda_rec_host_ns(&mo.h, &ns));
	mo.flags = MEMOP_TIMED;
	mo.dur_ns = 40;
	ADD(&m, mo);
	a.dur_ns = 900;
	ADD(&m, a);
	a.h.size = REC_ALLOC_V1_SIZE;
	assert_int_equal(cuda_model_add(&m, &a, REC_ALLOC_V1_SIZE), 0);
	assert_int_equal(m.apis[CU_cudaLaunchKernel].calls, 3);
	assert_int_equal(m.apis[CU_cudaLaunchKernel].timed, 2);
	assert_int_equal(m.apis[CU_cudaLaunchKernel].total_ns, 800);
	assert_int_equal(m.apis[CU_cudaLaunchKernel].max_ns, 500);
	assert_int_equal(m.kernels[0].launches, 3);
	assert_int_equal(m.apis[CU_cudaMemcpyAsync].calls, 2);
	assert_int_equal(m.apis[CU_cudaMemcpyAsync].timed, 1);
	assert_int_equal(m.apis[CU_cudaMemcpyAsync].total_ns, 40);
	assert_int_equal(m.apis[CU_cudaFree].calls, 2);
	assert_int_equal(m.apis[CU_cudaFree].timed, 1);
	assert_int_equal(m.apis[CU_cudaFree].total_ns, 900);
	cuda_model_free(&m);
}

/* One model per process: each holds its pid's records only,
 * with kernel names from the parent (resolved once); the parent sums. */
static void test_per_process(void **state)
{
	struct cuda_model m;
	const struct cuda_model *p1, *p2;

	(void)state;
	resolves = 0;
	cuda_model_init(&m, resolve, NULL);
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 1, 1, 0, 0, 0));
	ADD(&m, launch(1, CU_cudaLaunchKernel, 0x1100, 1, 1, 0, 0, 0));
	ADD(&m, launch(2, CU_cudaLaunchKernel, 0x1100, 1, 1, 0, 0, 0));
	ADD(&m, memop(CU_cudaMemcpy, CP_HTOD, 100, 700));      /* pid 1 */
	struct rec_sync sy = sync_rec(CU_cudaDeviceSynchronize, 0, 2000);
	sy.pid = 2;
	ADD(&m, sy);
	struct rec_alloc al = alloc_rec(CU_cudaMalloc, 0x10, 64, 0);
	al.pid = 2;
	ADD(&m, al);
	assert_int_equal(resolves, 2);     /* (1, 0x1100), (2, 0x1100) */
	p1 = cuda_model_of_pid(&m, 1);
	p2 = cuda_model_of_pid(&m, 2);
	assert_non_null(p1);
	assert_non_null(p2);
	assert_null(cuda_model_of_pid(&m, 3));
	assert_int_equal(m.nprocs, 2);
	assert_int_equal(p1->records, 3);
	assert_int_equal(p2->records, 3);
	assert_int_equal(p1->nkernels, 1);
	assert_int_equal(p1->kernels[0].launches, 2);
	assert_string_equal(p1->kernels[0].name, m.kernels[0].name);
	assert_int_equal(p2->kernels[0].launches, 1);
	assert_int_equal(p1->copies[CP_HTOD].count, 1);
	assert_int_equal(p2->copies[CP_HTOD].count, 0);
	assert_int_equal(p1->nsyncs, 0);
	assert_int_equal(p2->nsyncs, 1);
	assert_int_equal(p2->peak_bytes, 64);
	assert_int_equal(p1->peak_bytes, 0);
	assert_int_equal(m.apis[CU_cudaLaunchKernel].calls, 3);
	assert_int_equal(p1->apis[CU_cudaLaunchKernel].calls + p2->apis[CU_cudaLaunchKernel].calls, 3);
	cuda_model_reset(&m);
	assert_int_equal(m.nprocs, 0);
	cuda_model_free(&m);
}

static void test_lib_kind(void **state)
{
	assert_int_equal(cuda_lib_kind("/usr/local/cuda/lib64/libcudart.so.13"), CUDA_LIB_RUNTIME);
	assert_int_equal(cuda_lib_kind("/x/nvidia/cuda_runtime/lib/libcudart.so.12"), CUDA_LIB_RUNTIME);
	assert_int_equal(cuda_lib_kind("/x/torch/lib/libcudart-9335f6a2.so.12"), CUDA_LIB_RUNTIME);
	assert_int_equal(cuda_lib_kind("/usr/lib/x86_64-linux-gnu/libcuda.so.1"), CUDA_LIB_DRIVER);
	assert_int_equal(cuda_lib_kind("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"), CUDA_LIB_DRIVER);
	assert_int_equal(cuda_lib_kind("/x/libcudnn.so.9"), CUDA_LIB_NONE);
	assert_int_equal(cuda_lib_kind("/x/libcudart_static.a"), CUDA_LIB_NONE);
	assert_int_equal(cuda_lib_kind("/x/libcuda_fake.so"), CUDA_LIB_NONE);
}

static void test_api_table(void **state)
{
	/* every API id has a name, and every table entry maps to a named id */
	for (uint32_t api = 1; api < CU_API_MAX; api++)
		assert_string_not_equal(cuda_model_api_name(api), "?");
	for (size_t i = 0; i < cuda_api_nsyms; i++) {
		const char *n = cuda_model_api_name(cuda_api_syms[i].api);

		/* the table's name starts with the id's name (_ptsz, _v2 ...) */
		assert_int_equal(strncmp(cuda_api_syms[i].name, n, strlen(n)), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernels),
		cmocka_unit_test(test_dims_overflow),
		cmocka_unit_test(test_many_kernels),
		cmocka_unit_test(test_copies_syncs),
		cmocka_unit_test(test_allocs),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test(test_text_tables),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_lib_kind),
		cmocka_unit_test(test_api_calls),
		cmocka_unit_test(test_api_table),
		cmocka_unit_test(test_host_times),
		cmocka_unit_test(test_per_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
