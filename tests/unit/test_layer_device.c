/* test_layer_device.c - CUPTI device time per layer: the op
 * rows' Self CUDA summed on the layer of their stack (Self CUDA) and up the
 * tree (CUDA total, torchprof's self/total), work launched outside any op
 * on [no op] (profile_add_gpu -> profile_add_gpu_noop), through
 * model_layers (the one builder live runs, captures and --inproc share),
 * and the tree's Self CUDA / CUDA total columns, --sort keys and JSON.
 * Expected values are worked out by hand from the fixture below, not
 * copied from the program's output. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "gpujoin.h"
#include "layers.h"
#include "layers_json.h"
#include "model.h"
#include "profile.h"
#include "tree.h"
#include "libs/tree_text.h"

/* ---- fixture -------------------------------------------------------------
 * Stacks: 0x11 Net/enc/conv (Net, Encoder, Conv2d), 0x22 Net/enc,
 *         0x33 Net/head (Net, Linear).
 * Ops of pid 1 (self CPU ns; Self CUDA / CUDA total ns):
 *   aten::conv2d  0x11  2 calls  2500   40000 / 40000
 *   aten::relu    0x11  1 call    500       0 /     0
 *   aten::fkstep  0x22  1 call   1000   10000 / 80000  (encloses the others)
 *   aten::addmm   0x33  1 call   1000   30000 / 30000
 * and 20000 ns launched outside any op.  All device time: 100000 ns.
 * So: Net/enc/conv 40000 self and total; Net/enc 10000 self, 50000 total;
 * Net/head 30000; Net 0 self, 80000 total; [no op] 20000.  CPU: 5000 ns
 * in all (conv 3000, enc 1000 + 3000, head 1000). */
static const char *nconv[] = { "Net", "enc", "conv" }, *cconv[] = { "Net", "Encoder", "Conv2d" };
static const char *nenc[] = { "Net", "enc" }, *cenc[] = { "Net", "Encoder" };
static const char *nhead[] = { "Net", "head" }, *chead[] = { "Net", "Linear" };
static const struct layer_stack stacks[] = {
	{ 0x11, 3, nconv, cconv },
	{ 0x22, 2, nenc, cenc },
	{ 0x33, 2, nhead, chead },
};

static void add_row(struct profile *p, uint32_t pid, uint32_t op, const char *name,
		    uint64_t stack, uint64_t calls, uint64_t self, uint64_t total, uint64_t scuda,
		    uint64_t tcuda)
{
	struct prof_op o = { .pid = pid, .op_id = op, .name = name, .overload = "",
			     .stack_id = stack, .calls = calls, .self_ns = self, .total_ns = total,
			     .max_ns = total, .self_cuda_ns = scuda, .cuda_total_ns = tcuda };

	assert_int_equal(profile_add_op(p, &o), 0);
}

static void fill(struct profile *p, uint32_t pid)
{
	add_row(p, pid, 1, "aten::conv2d", 0x11, 2, 2500, 2500, 40000, 40000);
	add_row(p, pid, 2, "aten::relu", 0x11, 1, 500, 500, 0, 0);
	add_row(p, pid, 3, "aten::fkstep", 0x22, 1, 1000, 5000, 10000, 80000);
	add_row(p, pid, 4, "aten::addmm", 0x33, 1, 1000, 1000, 30000, 30000);
	assert_int_equal(profile_add_gpu_noop(p, pid, 20000), 0);
}

static struct layer_tree *tree_of(const struct profile *p)
{
	struct layer_tree *t = NULL;

	assert_int_equal(model_layers(p, stacks, 3, NULL, &t), 0);
	assert_non_null(t);
	return t;
}

static const struct layer_node *node(const struct layer_tree *t, const char *a, const char *b,
				     const char *c)
{
	const char *v[] = { a, b, c };
	unsigned n = c ? 3 : b ? 2 : 1;
	const struct layer_node *r = layers_find(t, v, n);

	assert_non_null(r);
	return r;
}

static void test_sums(void **state)
{
	struct profile p;
	struct layer_tree *t;
	const struct layer_node *n;

	profile_init(&p);
	fill(&p, 1);
	t = tree_of(&p);
	assert_true(t->has_dev);
	assert_int_equal(t->dev_ns, 100000);
	n = node(t, "Net", "enc", "conv");
	assert_int_equal(n->self_dev_ns, 40000);
	assert_int_equal(n->dev_ns, 40000);
	assert_int_equal(n->nops, 2);
	for (size_t i = 0; i < n->nops; i++)
		if (!strcmp(n->ops[i].name, "aten::conv2d")) {
			assert_int_equal(n->ops[i].self_cuda_ns, 40000);
			assert_int_equal(n->ops[i].cuda_total_ns, 40000);
		}
	n = node(t, "Net", "enc", NULL);
	assert_int_equal(n->self_dev_ns, 10000);
	assert_int_equal(n->dev_ns, 50000);
	assert_int_equal(n->ops[0].cuda_total_ns, 80000);   /* the op's own total */
	n = node(t, "Net", "head", NULL);
	assert_int_equal(n->self_dev_ns, 30000);
	assert_int_equal(n->dev_ns, 30000);
	n = node(t, "Net", NULL, NULL);
	assert_int_equal(n->self_dev_ns, 0);
	assert_int_equal(n->dev_ns, 80000);
	n = node(t, LAYER_NOOP_NAME, NULL, NULL);
	assert_int_equal(n->kind, LAYER_NOOP);
	assert_int_equal(n->self_dev_ns, 20000);
	assert_int_equal(n->dev_ns, 20000);
	assert_int_equal(n->calls, 0);
	layers_free(t);
	profile_free(&p);
}

/* No device time anywhere: no columns, no JSON members (as before). */
static void test_none(void **state)
{
	struct profile p;
	struct layer_tree *t;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	profile_init(&p);
	add_row(&p, 1, 1, "aten::conv2d", 0x11, 2, 2500, 2500, 0, 0);
	assert_int_equal(profile_add_gpu_noop(&p, 1, 0), 0);
	t = tree_of(&p);
	assert_false(t->has_dev);
	assert_null(layers_find(t, (const char *[]){ LAYER_NOOP_NAME }, 1));
	f = open_memstream(&buf, &len);
	assert_int_equal(tree_render(f, t, &(struct tree_opts){ 0 }), 0);
	assert_int_equal(layers_json(f, t), 0);
	fclose(f);
	assert_null(strstr(buf, "CUDA"));
	assert_null(strstr(buf, "cuda"));
	free(buf);
	layers_free(t);
	profile_free(&p);
}

static void test_render(void **state)
{
	static const char want[] =
		"+-----------+---------+-------------+--------------+--------------+--------------+-------+\n"
		"| Node      | Class   |    Self CPU |    CPU total |    Self CUDA |   CUDA total | Count |\n"
		"|-----------+---------+-------------+--------------+--------------+--------------+-------|\n"
		"| Net       | Net     |             | 5.0us (100%) |              | 80.0us (80%) |     5 |\n"
		"| ├──enc    | Encoder | 1.0us (20%) |  4.0us (80%) | 10.0us (10%) | 50.0us (50%) |     4 |\n"
		"| │ └──conv | Conv2d  | 3.0us (60%) |  3.0us (60%) | 40.0us (40%) | 40.0us (40%) |     3 |\n"
		"| └──head   | Linear  | 1.0us (20%) |  1.0us (20%) | 30.0us (30%) | 30.0us (30%) |     1 |\n"
		"| [no op]   |         |             |     0ns (0%) | 20.0us (20%) | 20.0us (20%) |     0 |\n"
		"+-----------+---------+-------------+--------------+--------------+--------------+-------+\n";
	struct profile p;
	struct layer_tree *t;
	char *got;

	profile_init(&p);
	fill(&p, 1);
	t = tree_of(&p);
	got = tree_text(t, &(struct tree_opts){ 0 });
	assert_string_equal(got, want);
	free(got);
	/* --ops: an op row shows its own Self CUDA and CUDA total */
	got = tree_text(t, &(struct tree_opts){ .ops = 1 });
	assert_non_null(strstr(got, "| │ ├──aten::fkstep "));
	assert_non_null(strstr(got, "| 10.0us (10%) | 80.0us (80%) |     1 |\n"));
	assert_non_null(strstr(got, "| 40.0us (40%) | 40.0us (40%) |     2 |\n"));
	free(got);
	layers_free(t);
	profile_free(&p);
}

static void test_sort_minpct(void **state)
{
	struct profile p;
	struct layer_tree *t;
	enum tree_sort s;
	char *got;

	assert_int_equal(tree_sort_parse("self_cuda_time_total", &s), 0);
	assert_int_equal(s, TREE_SORT_SELF_CUDA);
	assert_int_equal(tree_sort_parse("cuda_time_total", &s), 0);
	assert_int_equal(s, TREE_SORT_CUDA);
	profile_init(&p);
	fill(&p, 1);
	t = tree_of(&p);
	/* Self CUDA: [no op] (20us) before Net (0); head (30us) before enc (10us) */
	got = tree_text(t, &(struct tree_opts){ .sort = TREE_SORT_SELF_CUDA });
	assert_true(strstr(got, "[no op]") < strstr(got, "| Net "));
	assert_true(strstr(got, "head") < strstr(got, "enc"));
	free(got);
	/* CUDA total: Net (80us) first, enc (50us) before head (30us) */
	got = tree_text(t, &(struct tree_opts){ .sort = TREE_SORT_CUDA });
	assert_true(strstr(got, "| Net ") < strstr(got, "[no op]"));
	assert_true(strstr(got, "enc") < strstr(got, "head"));
	free(got);
	/* --min-pct 25: head has 20% of CPU but 30% of device time: stays;
	 * [no op] (0% CPU, 20% device) goes */
	got = tree_text(t, &(struct tree_opts){ .min_pct = 25 });
	assert_non_null(strstr(got, "head"));
	assert_null(strstr(got, "[no op]"));
	free(got);
	layers_free(t);
	profile_free(&p);
}

static void test_json(void **state)
{
	struct profile p;
	struct layer_tree *t;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	profile_init(&p);
	fill(&p, 1);
	t = tree_of(&p);
	f = open_memstream(&buf, &len);
	assert_int_equal(layers_json(f, t), 0);
	fclose(f);
	/* layers: self_cuda_ns / cuda_total_ns after total_ns */
	assert_non_null(strstr(buf, "{\"path\": \"Net/enc\", \"name\": \"enc\""));
	assert_non_null(strstr(buf, "\"calls\": 4, \"self_ns\": 1000, \"total_ns\": 4000, "
				    "\"self_cuda_ns\": 10000, \"cuda_total_ns\": 50000"));
	assert_non_null(strstr(buf, "\"calls\": 5, \"self_ns\": 0, \"total_ns\": 5000, "
				    "\"self_cuda_ns\": 0, \"cuda_total_ns\": 80000"));
	assert_non_null(strstr(buf, "\"path\": \"[no op]\""));
	assert_non_null(strstr(buf, "\"self_cuda_ns\": 20000, \"cuda_total_ns\": 20000"));
	/* ops: their own */
	assert_non_null(strstr(buf, "{\"name\": \"aten::fkstep\", \"calls\": 1, \"self_ns\": 1000, "
				    "\"total_ns\": 5000, \"self_cuda_ns\": 10000, "
				    "\"cuda_total_ns\": 80000}"));
	free(buf);
	layers_free(t);
	profile_free(&p);
}

/* The join's result into the rows: op 0 (launched outside any op) is no
 * row but the process's [no op] device time; one process's part keeps
 * its own (model_split's profile_of_pid). */
static void test_add_gpu_split(void **state)
{
	struct gj_opstat ops[] = {
		{ .op_id = 1, .stack_id = 0x11, .self_cuda_ns = 40000, .total_cuda_ns = 40000,
		  .kernels = 4 },
		{ .op_id = 0, .stack_id = 0x22, .self_cuda_ns = 7000, .total_cuda_ns = 7000,
		  .kernels = 1 },
		{ .op_id = 0, .stack_id = 0, .self_cuda_ns = 3000, .total_cuda_ns = 3000,
		  .memcpys = 1 },
	};
	struct gj_result res = { .ops = ops, .nops = 3 };
	struct profile p, one;
	struct layer_tree *t;

	profile_init(&p);
	add_row(&p, 1, 1, "aten::conv2d", 0x11, 2, 2500, 2500, 0, 0);
	add_row(&p, 2, 1, "aten::conv2d", 0x11, 1, 1000, 1000, 0, 0);
	assert_int_equal(profile_add_gpu(&p, &res, 1, NULL, NULL), 4);
	assert_int_equal(profile_add_gpu_noop(&p, 2, 500), 0);
	assert_int_equal(p.nops, 2);   /* no row for op 0 */
	assert_int_equal(profile_gpu_noop_ns(&p), 10500);
	t = tree_of(&p);
	assert_int_equal(t->dev_ns, 50500);
	assert_int_equal(node(t, "Net", "enc", "conv")->self_dev_ns, 40000);
	assert_int_equal(node(t, LAYER_NOOP_NAME, NULL, NULL)->self_dev_ns, 10500);
	layers_free(t);
	profile_init(&one);
	assert_int_equal(profile_of_pid(&p, 1, &one), 0);
	assert_int_equal(profile_gpu_noop_ns(&one), 10000);
	t = tree_of(&one);
	assert_int_equal(t->dev_ns, 50000);
	layers_free(t);
	profile_free(&one);
	profile_init(&one);
	assert_int_equal(profile_of_pid(&p, 2, &one), 0);
	assert_int_equal(profile_gpu_noop_ns(&one), 500);
	t = tree_of(&one);
	assert_int_equal(node(t, "Net", NULL, NULL)->dev_ns, 0);
	assert_int_equal(t->dev_ns, 500);
	layers_free(t);
	profile_free(&one);
	profile_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sums),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_sort_minpct),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_add_gpu_split),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
