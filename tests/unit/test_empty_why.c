/* test_empty_why.c - an empty result names its cause (report.c:
 * export_empty_why): steps asked and none whole, rows per input shape and
 * no shapes, a --layer-filter matching no layer path; nothing when the
 * output holds what was asked. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "model.h"
#include "report.h"
#include "steps.h"

static void add_op(struct tbpf_model *m, const char *name, const char *shapes)
{
	struct prof_op o = { .pid = 1, .op_id = 1, .name = name, .overload = "", .calls = 1,
			     .self_ns = 10, .total_ns = 10, .max_ns = 10, .shapes = shapes,
			     .shape_id = shapes && *shapes ? 7 : 0 };

	assert_int_equal(profile_add_op(&m->prof, &o), 0);
}

static void no_step(void **state)
{
	struct tbpf_model m;
	struct export_opts o = { 0 };
	char *why;

	model_init(&m);
	/* one end of Optimizer.step#: no step runs from one end to a next */
	assert_int_equal(steps_add(&m.steps_bounds, 1, 1, 100), 0);
	why = export_empty_why(&m, EXPORT_TABLE, &o, NULL, true);
	assert_non_null(why);
	assert_string_equal(why, "no whole training step recorded: Optimizer.step# ended 1 times "
			    "(a step runs from one end to the next); --step-on names another label");
	free(why);
	o.step_label = "train_step";
	why = export_empty_why(&m, EXPORT_JSON, &o, NULL, true);
	assert_non_null(strstr(why, "train_step ended 1 times"));
	free(why);
	/* steps not asked: an empty table is the "no op" case, said elsewhere */
	assert_null(export_empty_why(&m, EXPORT_TABLE, &o, NULL, false));
	/* the steps' rows are there */
	add_op(&m, "aten::add", NULL);
	assert_null(export_empty_why(&m, EXPORT_TABLE, &o, NULL, true));
	model_free(&m);
}

static void no_shapes(void **state)
{
	struct tbpf_model m;
	struct export_opts o = { .by_shape = true };
	char *why;

	model_init(&m);
	add_op(&m, "aten::add", NULL);
	add_op(&m, "aten::mm", "");
	why = export_empty_why(&m, EXPORT_TABLE, &o, NULL, false);
	assert_non_null(why);
	assert_string_equal(why, "--group-by-input-shape: no input shapes were recorded "
			    "(record with --record-shapes)");
	free(why);
	o.by_shape = false;
	assert_null(export_empty_why(&m, EXPORT_TABLE, &o, NULL, false));
	o.by_shape = true;
	add_op(&m, "aten::mul", "[[2, 3], [2, 3]]");   /* one row with shapes is enough */
	assert_null(export_empty_why(&m, EXPORT_TABLE, &o, NULL, false));
	model_free(&m);
}

static void layer_filter(void **state)
{
	/* Net.blocks.0, built by hand */
	struct layer_node zero = { .name = "0" }, *bk[] = { &zero };
	struct layer_node blocks = { .name = "blocks", .kids = bk, .nkids = 1 }, *nk[] = { &blocks };
	struct layer_node net = { .name = "Net", .kids = nk, .nkids = 1 }, *tk[] = { &net };
	struct layer_tree t = { .top = { .kids = tk, .nkids = 1 } };
	struct tbpf_model m;
	struct tree_opts to = { .filter = "features" };
	char *why;

	model_init(&m);
	m.tree = &t;
	why = export_empty_why(&m, EXPORT_TREE, NULL, &to, false);
	assert_non_null(why);
	assert_string_equal(why, "--layer-filter 'features' matches no layer path (paths as "
			    "Net.blocks.0)");
	free(why);
	/* substrings of a path, at any depth */
	to.filter = "blocks.0";
	assert_null(export_empty_why(&m, EXPORT_TREE, NULL, &to, false));
	to.filter = "Net";
	assert_null(export_empty_why(&m, EXPORT_TREE, NULL, &to, false));
	to.filter = "Net.0";
	why = export_empty_why(&m, EXPORT_TREE, NULL, &to, false);
	assert_non_null(why);
	free(why);
	/* only the tree filters layers */
	assert_null(export_empty_why(&m, EXPORT_TABLE, NULL, &to, false));
	m.tree = NULL;
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_step),
		cmocka_unit_test(no_shapes),
		cmocka_unit_test(layer_filter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
