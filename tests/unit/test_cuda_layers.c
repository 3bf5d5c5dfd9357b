/* test_cuda_layers.c - CUDA per layer: cuda_model's per-stack
 * counts, their placement on the layer tree (layers_add_cuda), the kernel
 * table's Layers column and JSON "layers", the tree's # Launches / Host
 * sync columns, the layers JSON members, and layer stacks from a capture's
 * STACK records.  Expected values are worked out by hand from the fixture
 * below, not copied from the program's output. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "tbpf_abi.h"
#include "capture.h"
#include "cuda_model.h"
#include "model.h"
#include "cuda_tables.h"
#include "layers.h"
#include "layers_json.h"
#include "tree.h"

/* ---- fixture -------------------------------------------------------------
 * Stacks (pid 1; records carry the low 32 bits of the ids):
 *   0x100000011  Net/enc/conv  (Net, Encoder, Conv2d)
 *   0x22         Net/enc
 *   0x33         Net/head
 *   0x44         no module
 *   0x55         Net/enc/conv again (another line in the same forward)
 * Ops: conv2d under 0x100000011 (2 calls, 3000 ns), add under 0x22 (1000),
 *      mm under 0x33 (2000), relu under 0x44 (500): all self 6500 ns.
 * CUDA (kernel k_1000 at 0x1000, k_1100 at 0x1100):
 *   k_1000: 3x stack 0x11 (op 1), 2x stack 0x55 (op 1), 1x outside any op
 *   k_1100: 4x stack 0x33, 1x 0x44, 1x 0x99 (never named), 1x stack 0 (op 2)
 *   copies: 2x HtoD 1000 bytes under 0x22; syncs: 700 + 300 ns under 0x33
 * So: Net/enc/conv launches k_1000 5x; Net/head k_1100 4x and waits
 * 1000 ns twice; Net/enc copies 2000 bytes; [no module], [unresolved],
 * [no python] launch k_1100 once each; [no op] launches k_1000 once. */
static const char *nconv[] = { "Net", "enc", "conv" }, *cconv[] = { "Net", "Encoder", "Conv2d" };
static const char *nenc[] = { "Net", "enc" }, *cenc[] = { "Net", "Encoder" };
static const char *nhead[] = { "Net", "head" }, *chead[] = { "Net", "Head" };
static const struct layer_stack stacks[] = {
	{ 0x100000011ULL, 3, nconv, cconv },
	{ 0x22, 2, nenc, cenc },
	{ 0x33, 2, nhead, chead },
	{ 0x44, 0, NULL, NULL },
	{ 0x55, 3, nconv, cconv },
};
static const struct layer_opstat ops[] = {
	{ 0x100000011ULL, "aten::conv2d", 2, 3000, 3000 },
	{ 0x22, "aten::add", 1, 1000, 1000 },
	{ 0x33, "aten::mm", 1, 2000, 2000 },
	{ 0x44, "aten::relu", 1, 500, 500 },
};

static char *resolve(void *ctx, uint32_t pid, uint64_t addr, int *where)
{
	*where = CUDA_ADDR_FILE;
	return tu_printf("k_%lx", (unsigned long)addr);
}

static const char *opname(void *ctx, uint32_t id)
{
	return id == 1 ? "aten::conv2d" : id == 2 ? "aten::mm" : NULL;
}

static void add_launch(struct cuda_model *m, uint64_t func, uint32_t op, uint32_t stack, int n)
{
	for (int i = 0; i < n; i++) {
		struct rec_launch r = {
			.h = { .type = REC_LAUNCH, .size = sizeof(r), .tid = 1, .ts_ns = 1 },
			.pid = 1, .api = CU_cudaLaunchKernel, .func = func,
			.grid = { 1, 1, 1 }, .block = { 32, 1, 1 }, .op_id = op, .stack_id = stack,
		};
		assert_int_equal(cuda_model_add(m, &r, sizeof(r)), 0);
	}
}

static void fill(struct cuda_model *m)
{
	struct rec_memop c = {
		.h = { .type = REC_MEMOP, .size = sizeof(c), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = CU_cudaMemcpyAsync, .bytes = 1000, .dir = CP_HTOD,
		.op_id = 2, .stack_id = 0x22,
	};
	struct rec_sync s = {
		.h = { .type = REC_SYNC, .size = sizeof(s), .tid = 1, .ts_ns = 1 },
		.pid = 1, .api = CU_cudaStreamSynchronize, .dur_ns = 700, .op_id = 2,
		.stack_id = 0x33,
	};

	cuda_model_init(m, resolve, NULL);
	add_launch(m, 0x1000, 1, 0x11, 3);
	add_launch(m, 0x1000, 1, 0x55, 2);
	add_launch(m, 0x1000, 0, 0x77, 1);   /* outside any op: the stack is ignored */
	add_launch(m, 0x1100, 2, 0x33, 4);
	add_launch(m, 0x1100, 2, 0x44, 1);
	add_launch(m, 0x1100, 2, 0x99, 1);
	add_launch(m, 0x1100, 2, 0, 1);
	assert_int_equal(cuda_model_add(m, &c, sizeof(c)), 0);
	assert_int_equal(cuda_model_add(m, &c, sizeof(c)), 0);
	assert_int_equal(cuda_model_add(m, &s, sizeof(s)), 0);
	s.dur_ns = 300;
	assert_int_equal(cuda_model_add(m, &s, sizeof(s)), 0);
}

static struct layer_tree *tree_with_cuda(const struct cuda_model *m)
{
	struct layer_tree *t = NULL;

	assert_int_equal(layers_build(stacks, 5, ops, 4, &t), 0);
	assert_int_equal(t->has_cuda, 0);
	assert_int_equal(cuda_model_to_layers(m, t), 0);
	assert_int_equal(t->has_cuda, 1);
	return t;
}

/* ---- cuda_model: per stack ------------------------------------------------ */

static void test_stackstats(void **state)
{
	struct cuda_model m;
	const struct cuda_stackstat **v;
	struct layer_cudastat *rows;
	size_t n, i;
	/* (stack, outside, launches, copies, copy bytes, syncs, sync ns) by
	 * (pid, stack, outside) */
	static const uint64_t want[][7] = {
		{ 0, 0, 1, 0, 0, 0, 0 },        /* k_1100 with stack 0 */
		{ 0, 1, 1, 0, 0, 0, 0 },        /* k_1000 outside any op */
		{ 0x11, 0, 3, 0, 0, 0, 0 },
		{ 0x22, 0, 0, 2, 2000, 0, 0 },
		{ 0x33, 0, 4, 0, 0, 2, 1000 },
		{ 0x44, 0, 1, 0, 0, 0, 0 },
		{ 0x55, 0, 2, 0, 0, 0, 0 },
		{ 0x99, 0, 1, 0, 0, 0, 0 },
	};

	fill(&m);
	v = cuda_model_stackstats(&m, &n);
	assert_non_null(v);
	assert_int_equal(n, 8);
	for (i = 0; i < n; i++) {
		assert_int_equal(v[i]->pid, 1);
		assert_int_equal(v[i]->stack_id, want[i][0]);
		assert_int_equal(v[i]->outside_op, want[i][1]);
		assert_int_equal(v[i]->launches, want[i][2]);
		assert_int_equal(v[i]->copies, want[i][3]);
		assert_int_equal(v[i]->copy_bytes, want[i][4]);
		assert_int_equal(v[i]->syncs, want[i][5]);
		assert_int_equal(v[i]->sync_ns, want[i][6]);
	}
	free(v);
	/* rows: 3 stacks of k_1000 + 4 of k_1100 + 2 with copies or syncs */
	assert_int_equal(cuda_model_layer_rows(&m, &rows, &n), 0);
	assert_int_equal(n, 9);
	{
		uint64_t launches = 0, copies = 0, syncs = 0;

		for (i = 0; i < n; i++) {
			launches += rows[i].launches;
			copies += rows[i].copies;
			syncs += rows[i].syncs;
			assert_true(!rows[i].kernel == !rows[i].launches);
		}
		assert_int_equal(launches, 13);
		assert_int_equal(copies, 2);
		assert_int_equal(syncs, 2);
	}
	free(rows);
	cuda_model_free(&m);
}

/* ---- layer tree ----------------------------------------------------------- */

static const struct layer_node *find(const struct layer_tree *t, int n, ...)
{
	const char *names[8];
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		names[i] = va_arg(ap, const char *);
	va_end(ap);
	return layers_find(t, names, n);
}

static void test_tree_cuda(void **state)
{
	struct cuda_model m;
	struct layer_tree *t;
	const struct layer_node *n;
	char *p;

	fill(&m);
	t = tree_with_cuda(&m);
	n = find(t, 3, "Net", "enc", "conv");
	assert_non_null(n);
	assert_int_equal(n->self_cuda.launches, 5);
	assert_int_equal(n->cuda.launches, 5);
	assert_int_equal(n->nkernels, 1);
	assert_string_equal(n->kernels[0].name, "k_1000");
	assert_int_equal(n->kernels[0].launches, 5);
	p = layers_node_path(n);
	assert_string_equal(p, "Net/enc/conv");
	free(p);
	n = find(t, 2, "Net", "enc");
	assert_int_equal(n->self_cuda.launches, 0);
	assert_int_equal(n->cuda.launches, 5);
	assert_int_equal(n->self_cuda.copies, 2);
	assert_int_equal(n->cuda.copy_bytes, 2000);
	assert_int_equal(n->nkernels, 0);
	n = find(t, 2, "Net", "head");
	assert_int_equal(n->self_cuda.launches, 4);
	assert_int_equal(n->cuda.syncs, 2);
	assert_int_equal(n->cuda.sync_ns, 1000);
	n = find(t, 1, "Net");
	assert_int_equal(n->self_cuda.launches, 0);
	assert_int_equal(n->cuda.launches, 9);
	assert_int_equal(n->cuda.copies, 2);
	assert_int_equal(n->cuda.syncs, 2);
	assert_int_equal(n->cuda.sync_ns, 1000);
	/* op times are untouched by CUDA rows */
	assert_int_equal(n->total_ns, 6000);
	assert_int_equal(t->total_ns, 6500);
	n = find(t, 1, LAYER_NOMODULE_NAME);
	assert_int_equal(n->cuda.launches, 1);
	n = find(t, 1, LAYER_UNRESOLVED_NAME);
	assert_int_equal(n->kind, LAYER_UNRESOLVED);
	assert_int_equal(n->cuda.launches, 1);
	n = find(t, 1, LAYER_NOPYTHON_NAME);
	assert_int_equal(n->kind, LAYER_NOPYTHON);
	assert_int_equal(n->cuda.launches, 1);
	n = find(t, 1, LAYER_NOOP_NAME);
	assert_int_equal(n->kind, LAYER_NOOP);
	assert_int_equal(n->cuda.launches, 1);
	assert_string_equal(n->kernels[0].name, "k_1000");
	/* stack paths: low 32 bits match the 64-bit id */
	assert_string_equal(layers_stack_path(t, 0x11, 0), "Net/enc/conv");
	assert_string_equal(layers_stack_path(t, 0x100000011ULL, 0), "Net/enc/conv");
	assert_string_equal(layers_stack_path(t, 0x44, 0), LAYER_NOMODULE_NAME);
	assert_string_equal(layers_stack_path(t, 0x99, 0), LAYER_UNRESOLVED_NAME);
	assert_string_equal(layers_stack_path(t, 0, 0), LAYER_NOPYTHON_NAME);
	assert_string_equal(layers_stack_path(t, 0x11, 1), LAYER_NOOP_NAME);
	/* kids in a fixed order: total time desc, kind, name */
	assert_string_equal(t->top.kids[0]->name, "Net");
	assert_string_equal(t->top.kids[1]->name, LAYER_NOMODULE_NAME);
	layers_free(t);
	cuda_model_free(&m);
}

/* Two kernels launched from the same layer: most launches first. */
static void test_layer_kernels_order(void **state)
{
	struct cuda_model m;
	struct layer_tree *t = NULL;
	const struct layer_node *n;

	cuda_model_init(&m, resolve, NULL);
	add_launch(&m, 0x1200, 1, 0x22, 1);
	add_launch(&m, 0x1300, 1, 0x22, 3);
	add_launch(&m, 0x1100, 1, 0x22, 1);
	assert_int_equal(layers_build(stacks, 5, ops, 4, &t), 0);
	assert_int_equal(cuda_model_to_layers(&m, t), 0);
	n = find(t, 2, "Net", "enc");
	assert_int_equal(n->nkernels, 3);
	assert_string_equal(n->kernels[0].name, "k_1300");
	assert_string_equal(n->kernels[1].name, "k_1100");
	assert_string_equal(n->kernels[2].name, "k_1200");
	layers_free(t);
	cuda_model_free(&m);
}

/* ---- exporters ------------------------------------------------------------ */

static void test_kernel_layers(void **state)
{
	struct cuda_model m;
	struct layer_tree *t;
	const struct cuda_kernel **kv;
	struct cuda_layercount *v;
	size_t n;

	fill(&m);
	t = tree_with_cuda(&m);
	kv = cuda_model_kernels(&m);
	/* k_1100 (7 launches) before k_1000 (6) */
	assert_string_equal(kv[0]->name, "k_1100");
	assert_int_equal(cuda_kernel_layers(kv[0], t, &v, &n), 0);
	assert_int_equal(n, 4);
	assert_string_equal(v[0].layer, "Net/head");
	assert_int_equal(v[0].launches, 4);
	assert_string_equal(v[1].layer, "[no module]");
	assert_string_equal(v[2].layer, "[no python]");
	assert_string_equal(v[3].layer, "[unresolved]");
	assert_int_equal(v[3].launches, 1);
	free(v);
	/* two stacks of one layer merged */
	assert_int_equal(cuda_kernel_layers(kv[1], t, &v, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].layer, "Net/enc/conv");
	assert_int_equal(v[0].launches, 5);
	assert_string_equal(v[1].layer, "[no op]");
	assert_int_equal(v[1].launches, 1);
	free(v);
	free(kv);
	layers_free(t);
	cuda_model_free(&m);
}

static char *memout(int (*fn)(FILE *, void *), void *arg)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);

	assert_non_null(f);
	assert_int_equal(fn(f, arg), 0);
	fclose(f);
	return s;
}

struct both { const struct cuda_model *m; const struct layer_tree *t; };

static int print_tables(FILE *f, void *arg)
{
	const struct both *b = arg;

	return cuda_tables_print_ex(f, b->m, opname, NULL, b->t, NULL);
}

static int print_json(FILE *f, void *arg)
{
	const struct both *b = arg;
	int err;

	fputc('{', f);
	err = cuda_json_members_ex(f, b->m, opname, NULL, b->t);
	fputs(",\n", f);
	if (!err)
		err = layers_json(f, b->t);
	fputc('}', f);
	return err;
}

static void test_kernel_table_layers(void **state)
{
	struct cuda_model m;
	struct layer_tree *t;
	struct both b;
	char *s;

	fill(&m);
	t = tree_with_cuda(&m);
	b = (struct both){ &m, t };
	s = memout(print_tables, &b);
	/* "Launched by" is padded to its widest cell, "aten::conv2d (5), (no op) (1)"
	 * (29 columns), then two spaces */
	assert_non_null(strstr(s, "Launched by                    Layers\n"));
	assert_non_null(strstr(s, "aten::mm (7)                   Net/head (4), [no module] (1), "
				  "[no python] (1), +1 more\n"));
	assert_non_null(strstr(s, "aten::conv2d (5), (no op) (1)  Net/enc/conv (5), [no op] (1)\n"));
	free(s);
	/* without layers: the table as before */
	b.t = NULL;
	s = memout(print_tables, &b);
	assert_null(strstr(s, "Layers"));
	free(s);
	layers_free(t);
	cuda_model_free(&m);
	/* a program without Python (every launch has stack 0): no column */
	cuda_model_init(&m, resolve, NULL);
	add_launch(&m, 0x1000, 1, 0, 2);
	add_launch(&m, 0x1100, 0, 0, 1);
	t = tree_with_cuda(&m);
	b = (struct both){ &m, t };
	s = memout(print_tables, &b);
	assert_null(strstr(s, "Layers"));
	assert_non_null(strstr(s, "aten::conv2d (2)\n"));
	free(s);
	layers_free(t);
	cuda_model_free(&m);
}

static void test_json(void **state)
{
	struct cuda_model m;
	struct layer_tree *t;
	struct both b;
	char *s, *dir, *path;
	int rc;

	fill(&m);
	t = tree_with_cuda(&m);
	b = (struct both){ &m, t };
	s = memout(print_json, &b);
	dir = tu_mkdtemp();
	path = tu_printf("%s/out.json", dir);
	{
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs(s, f);
		fclose(f);
	}
	/* python's json as the independent reader */
	rc = tu_sh("python3 - %s <<'PY'\n"
		   "import json, sys\n"
		   "j = json.load(open(sys.argv[1]))\n"
		   "k = {x['name']: x['layers'] for x in j['kernels']}\n"
		   "assert k == {'k_1100': [{'layer': 'Net/head', 'launches': 4},\n"
		   "  {'layer': '[no module]', 'launches': 1}, {'layer': '[no python]', 'launches': 1},\n"
		   "  {'layer': '[unresolved]', 'launches': 1}],\n"
		   "  'k_1000': [{'layer': 'Net/enc/conv', 'launches': 5},\n"
		   "  {'layer': '[no op]', 'launches': 1}]}, k\n"
		   "l = {x['path']: x for x in j['layers']}\n"
		   "e = l['Net/enc']\n"
		   "assert (e['launches'], e['self_launches'], e['copies'], e['copy_bytes'], e['kernels']) == (5, 0, 2, 2000, []), e\n"
		   "h = l['Net/head']\n"
		   "assert (h['launches'], h['syncs'], h['sync_ns'], h['self_sync_ns']) == (4, 2, 1000, 1000), h\n"
		   "assert h['kernels'] == [{'name': 'k_1100', 'launches': 4}], h\n"
		   "assert l['Net']['launches'] == 9 and l['Net']['self_sync_ns'] == 0\n"
		   "assert l['[no op]']['kind'] == 'no_op'\n"
		   "PY", path);
	assert_int_equal(rc, 0);
	tu_rmdir(dir);
	free(dir);
	free(path);
	free(s);
	layers_free(t);
	cuda_model_free(&m);
}

static int render_tree(FILE *f, void *arg)
{
	struct tree_opts o = { 0 };

	return tree_render(f, arg, &o);
}

static void test_tree_columns(void **state)
{
	struct cuda_model m;
	struct layer_tree *t;
	char *s;
	/* by hand: percentages of 6500 ns; Net's total 6000 = 92%, enc self
	 * 1000 = 15%, total 4000 = 62%, conv 3000 = 46%, head 2000 = 31%,
	 * relu 500 = 8%; launches and sync time are the layer's and below */
	const char *want =
"+--------------+---------+-------------+-------------+-------+------------+-----------+\n"
"| Node         | Class   |    Self CPU |   CPU total | Count | # Launches | Host sync |\n"
"|--------------+---------+-------------+-------------+-------+------------+-----------|\n"
"| Net          | Net     |             | 6.0us (92%) |     4 |          9 |     1.0us |\n"
"| ├──enc       | Encoder | 1.0us (15%) | 4.0us (62%) |     3 |          5 |           |\n"
"| │ └──conv    | Conv2d  | 3.0us (46%) | 3.0us (46%) |     2 |          5 |           |\n"
"| └──head      | Head    | 2.0us (31%) | 2.0us (31%) |     1 |          4 |     1.0us |\n"
"| [no module]  |         |  500ns (8%) |  500ns (8%) |     1 |          1 |           |\n"
"| [no op]      |         |             |    0ns (0%) |     0 |          1 |           |\n"
"| [no python]  |         |             |    0ns (0%) |     0 |          1 |           |\n"
"| [unresolved] |         |             |    0ns (0%) |     0 |          1 |           |\n"
"+--------------+---------+-------------+-------------+-------+------------+-----------+\n";
	enum tree_sort k;

	fill(&m);
	t = tree_with_cuda(&m);
	s = memout(render_tree, t);
	assert_string_equal(s, want);
	free(s);
	assert_int_equal(tree_sort_parse("launches", &k), 0);
	assert_int_equal(k, TREE_SORT_LAUNCHES);
	layers_free(t);
	cuda_model_free(&m);
	/* no CUDA: the five torchprof columns only */
	assert_int_equal(layers_build(stacks, 5, ops, 4, &t), 0);
	s = memout(render_tree, t);
	assert_null(strstr(s, "Launches"));
	assert_non_null(strstr(s, "| Count |\n"));
	free(s);
	layers_free(t);
}

/* --ops: op rows carry the launches counted with the op on top */
static int render_tree_ops(FILE *f, void *arg)
{
	struct tree_opts o = { .ops = 1 };

	return tree_render(f, arg, &o);
}

/* The line of s holding needle (malloc'd). */
static char *line_of(const char *s, const char *needle)
{
	const char *p = strstr(s, needle), *b, *e;

	assert_non_null(p);
	for (b = p; b > s && b[-1] != '\n'; b--)
		;
	e = strchr(p, '\n');
	return strndup(b, e ? (size_t)(e - b) : strlen(b));
}

static void test_tree_op_launches(void **state)
{
	struct layer_opstat o2[4];
	struct cuda_model m;
	struct layer_tree *t = NULL;
	char *s, *l;

	memcpy(o2, ops, sizeof(o2));
	o2[0].launches = 5;   /* conv2d: k_1000 under 0x11 and 0x55 */
	o2[2].launches = 4;   /* mm: k_1100 under 0x33 */
	fill(&m);
	assert_int_equal(layers_build(stacks, 5, o2, 4, &t), 0);
	assert_int_equal(cuda_model_to_layers(&m, t), 0);
	s = memout(render_tree_ops, t);
	l = line_of(s, "aten::conv2d");
	assert_non_null(strstr(l, "|     2 |          5 |           |"));
	free(l);
	l = line_of(s, "aten::mm");
	assert_non_null(strstr(l, "|     1 |          4 |           |"));
	free(l);
	l = line_of(s, "aten::relu");
	assert_non_null(strstr(l, "|     1 |          0 |           |"));
	free(l);
	free(s);
	layers_free(t);
	cuda_model_free(&m);
}

/* ---- from a capture's STACK records ---------------------------------------- */

static void test_capture_layer_stacks(void **state)
{
	struct capture_meta cm;
	struct layer_stack *v;
	size_t n;
	/* innermost first, as recorded: layers innermost first, then Python */
	const struct capture_frame fr[] = {
		{ CF_LAYER, 0, "conv", "", "Conv2d", "enc.conv" },
		{ CF_LAYER, 0, "enc", "", "Encoder", "enc" },
		{ CF_LAYER, 0, "Net", "", "Net", "" },
		{ CF_PYTHON, 12, "main", "train.py", "", "" },
	};
	const struct capture_frame py[] = { { CF_PYTHON, 3, "main", "train.py", "", "" } };

	capture_meta_init(&cm);
	assert_int_equal(capture_meta_add_stack(&cm, 1, 0x500000011ULL, fr, 4), 0);
	assert_int_equal(capture_meta_add_stack(&cm, 1, 0x44, py, 1), 0);
	capture_meta_finish(&cm);
	assert_int_equal(capture_layer_stacks(&cm, &v, &n), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		if (v[i].stack_id == 0x44) {
			assert_int_equal(v[i].depth, 0);
			continue;
		}
		assert_int_equal(v[i].stack_id, 0x11);   /* cut to the low 32 bits */
		assert_int_equal(v[i].depth, 3);
		assert_string_equal(v[i].names[0], "Net");
		assert_string_equal(v[i].names[1], "enc");
		assert_string_equal(v[i].names[2], "conv");
		assert_string_equal(v[i].classes[2], "Conv2d");
	}
	capture_layer_stacks_free(v, n);
	capture_meta_free(&cm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stackstats),
		cmocka_unit_test(test_tree_cuda),
		cmocka_unit_test(test_layer_kernels_order),
		cmocka_unit_test(test_kernel_layers),
		cmocka_unit_test(test_kernel_table_layers),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_tree_columns),
		cmocka_unit_test(test_tree_op_launches),
		cmocka_unit_test(test_capture_layer_stacks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
