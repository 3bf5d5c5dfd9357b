/* test_layers.c - layer tree building (layers.c) and the `--format tree`
 * table (exporters/tree.c).  Expected tables were written by hand from
 * the small tree below, not copied from the program's output. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "layers.h"
#include "tree.h"
#include "libs/tree_text.h"

/* Net (Net)
 *   stem (Conv2d)          aten::conv2d     2 calls, self 3000, total 3000
 *   blocks (Sequential)
 *     0 (ReLU)             aten::relu       2 calls, self 1000, total 1500
 *                          aten::clamp_min  2 calls, self  500, total  500
 * [no module]              aten::add        1 call,  self  500, total  500
 * [no python]              aten::mm         1 call,  self 5000, total 5000
 * all self time: 10000 ns */
static const char *s1n[] = { "Net", "stem" }, *s1c[] = { "Net", "Conv2d" };
static const char *s2n[] = { "Net", "blocks", "0" },
		  *s2c[] = { "Net", "Sequential", "ReLU" };
static const struct layer_stack stacks[] = {
	{ 0x22, 3, s2n, s2c },
	{ 0x11, 2, s1n, s1c },
	{ 0x33, 0, NULL, NULL },
};
static const struct layer_opstat ops[] = {
	{ 0x11, "aten::conv2d", 1, 1000, 1000 },
	{ 0x22, "aten::relu", 2, 1000, 1500 },
	{ 0x22, "aten::clamp_min", 2, 500, 500 },
	{ 0x33, "aten::add", 1, 500, 500 },
	{ 0, "aten::mm", 1, 5000, 5000 },
	{ 0x11, "aten::conv2d", 1, 2000, 2000 },  /* same op again: summed */
};

static struct layer_tree *build(void)
{
	struct layer_tree *t = NULL;

	assert_int_equal(layers_build(stacks, 3, ops, 6, &t), 0);
	assert_non_null(t);
	return t;
}

static void test_build(void **state)
{
	struct layer_tree *t = build();
	const char *p_net[] = { "Net" }, *p_blk[] = { "Net", "blocks" },
		   *p_0[] = { "Net", "blocks", "0" }, *p_stem[] = { "Net", "stem" },
		   *p_nm[] = { LAYER_NOMODULE_NAME }, *p_np[] = { LAYER_NOPYTHON_NAME };
	const struct layer_node *n;

	assert_int_equal(t->total_ns, 10000);
	assert_int_equal(t->top.nkids, 3);
	n = layers_find(t, p_net, 1);
	assert_non_null(n);
	assert_int_equal(n->self_ns, 0);
	assert_int_equal(n->total_ns, 4500);
	assert_int_equal(n->calls, 6);
	n = layers_find(t, p_stem, 2);
	assert_string_equal(n->cls, "Conv2d");
	assert_int_equal(n->self_ns, 3000);
	assert_int_equal(n->nops, 1);
	assert_int_equal(n->ops[0].calls, 2);
	n = layers_find(t, p_blk, 2);
	assert_string_equal(n->cls, "Sequential");
	assert_int_equal(n->self_ns, 0);
	assert_int_equal(n->total_ns, 1500);
	n = layers_find(t, p_0, 3);
	assert_string_equal(n->cls, "ReLU");
	assert_int_equal(n->self_ns, 1500);
	assert_int_equal(n->nops, 2);
	n = layers_find(t, p_nm, 1);
	assert_int_equal(n->kind, LAYER_NOMODULE);
	assert_int_equal(n->total_ns, 500);
	n = layers_find(t, p_np, 1);
	assert_int_equal(n->kind, LAYER_NOPYTHON);
	assert_int_equal(n->total_ns, 5000);
	layers_free(t);
}

static void test_unresolved(void **state)
{
	struct layer_opstat o = { 0x99, "aten::add", 3, 10, 10 };
	const char *p[] = { LAYER_UNRESOLVED_NAME };
	struct layer_tree *t = NULL;
	const struct layer_node *n;

	assert_int_equal(layers_build(stacks, 3, &o, 1, &t), 0);
	n = layers_find(t, p, 1);
	assert_non_null(n);
	assert_int_equal(n->kind, LAYER_UNRESOLVED);
	assert_int_equal(n->calls, 3);
	layers_free(t);
}

static void test_render_plain(void **state)
{
	static const char want[] =
		"+-------------+------------+-------------+-------------+-------+\n"
		"| Node        | Class      |    Self CPU |   CPU total | Count |\n"
		"|-------------+------------+-------------+-------------+-------|\n"
		"| [no python] |            | 5.0us (50%) | 5.0us (50%) |     1 |\n"
		"| Net         | Net        |             | 4.5us (45%) |     6 |\n"
		"| ├──stem     | Conv2d     | 3.0us (30%) | 3.0us (30%) |     2 |\n"
		"| └──blocks   | Sequential |             | 1.5us (15%) |     4 |\n"
		"|   └──0      | ReLU       | 1.5us (15%) | 1.5us (15%) |     4 |\n"
		"| [no module] |            |  500ns (5%) |  500ns (5%) |     1 |\n"
		"+-------------+------------+-------------+-------------+-------+\n";
	struct tree_opts o = { 0 };
	struct layer_tree *t = build();
	char *got = tree_text(t, &o);

	assert_string_equal(got, want);
	free(got);
	layers_free(t);
}

static void test_render_ops_minpct(void **state)
{
	static const char want[] =
		"+-------------------+------------+-------------+-------------+-------+\n"
		"| Node              | Class      |    Self CPU |   CPU total | Count |\n"
		"|-------------------+------------+-------------+-------------+-------|\n"
		"| [no python]       |            | 5.0us (50%) | 5.0us (50%) |     1 |\n"
		"| └──aten::mm       |            | 5.0us (50%) | 5.0us (50%) |     1 |\n"
		"| Net               | Net        |             | 4.5us (45%) |     6 |\n"
		"| ├──stem           | Conv2d     | 3.0us (30%) | 3.0us (30%) |     2 |\n"
		"| │ └──aten::conv2d |            | 3.0us (30%) | 3.0us (30%) |     2 |\n"
		"| └──blocks         | Sequential |             | 1.5us (15%) |     4 |\n"
		"|   └──0            | ReLU       | 1.5us (15%) | 1.5us (15%) |     4 |\n"
		"|     └──aten::relu |            | 1.0us (10%) | 1.5us (15%) |     2 |\n"
		"+-------------------+------------+-------------+-------------+-------+\n";
	struct tree_opts o = { .ops = 1, .min_pct = 10 };
	struct layer_tree *t = build();
	char *got = tree_text(t, &o);

	assert_string_equal(got, want);
	free(got);
	layers_free(t);
}

/* first column of every row, in order */
static void names_of(const char *table, char *out, size_t len)
{
	const char *p = table;
	int line = 0;

	out[0] = 0;
	while ((p = strchr(p, '\n'))) {
		p++;
		if (++line < 3 || *p != '|')
			continue;
		const char *e = strstr(p + 2, " | ");

		while (e > p + 2 && e[-1] == ' ')
			e--;
		strncat(out, p + 2, e - (p + 2));
		strncat(out, ",", len - strlen(out) - 1);
	}
}

static void test_render_sort(void **state)
{
	struct tree_opts o = { 0 };
	struct layer_tree *t = build();
	char names[512], *got;

	assert_int_equal(tree_sort_parse("self_cpu_time_total", &o.sort), 0);
	got = tree_text(t, &o);
	names_of(got, names, sizeof(names));
	/* self: [no python] 5000, [no module] 500, Net 0; stem 3000, blocks 0 */
	assert_string_equal(names, "[no python],[no module],Net,├──stem,└──blocks,  └──0,");
	assert_non_null(strstr(got, "| [no python] |"));
	assert_true(strstr(got, "[no module]") < strstr(got, "| Net "));
	free(got);

	assert_int_equal(tree_sort_parse("name", &o.sort), 0);
	got = tree_text(t, &o);
	names_of(got, names, sizeof(names));
	assert_string_equal(names, "Net,├──blocks,│ └──0,└──stem,[no module],[no python],");
	assert_true(strstr(got, "[no module]") < strstr(got, "[no python]"));
	free(got);

	assert_int_equal(tree_sort_parse("count", &o.sort), 0);
	assert_int_equal(tree_sort_parse("bogus", &o.sort), -22);
	layers_free(t);
}

/* --layer-filter: the matching layer, what runs under it, its parents */
static void test_render_filter(void **state)
{
	struct tree_opts o = { .ops = 1, .filter = "blocks" };
	struct layer_tree *t = build();
	char names[512], *got = tree_text(t, &o);

	names_of(got, names, sizeof(names));
	assert_string_equal(names, "Net,└──blocks,  └──0,    ├──aten::relu,    └──aten::clamp_min,");
	free(got);
	/* a deeper path keeps its parents; a parent's own ops are hidden */
	o.filter = "Net.stem";
	got = tree_text(t, &o);
	names_of(got, names, sizeof(names));
	assert_string_equal(names, "Net,└──stem,  └──aten::conv2d,");
	free(got);
	/* special rows match by their name */
	o.filter = "no python";
	o.ops = 0;
	got = tree_text(t, &o);
	names_of(got, names, sizeof(names));
	assert_string_equal(names, "[no python],");
	free(got);
	o.filter = "nothing";
	got = tree_text(t, &o);
	names_of(got, names, sizeof(names));
	assert_string_equal(names, "");
	free(got);
	layers_free(t);
}

/* colour by depth: one escape per row, reset before the closing bar;
 * the plain text is unchanged once the escapes are taken out */
static void test_render_color(void **state)
{
	struct tree_opts o = { 0 };
	struct layer_tree *t = build();
	char *plain = tree_text(t, &o), *got, *p, *q;

	o.color = 1;
	got = tree_text(t, &o);
	assert_non_null(strstr(got, "| \033[1;36mNet "));
	assert_non_null(strstr(got, "| \033[32m├──stem "));
	assert_non_null(strstr(got, "| \033[33m  └──0 "));
	assert_null(strstr(plain, "\033"));
	for (p = q = got; *p; ) {
		if (*p == '\033') {
			p = strchr(p, 'm') + 1;
			continue;
		}
		*q++ = *p++;
	}
	*q = 0;
	assert_string_equal(got, plain);
	free(got);
	free(plain);
	layers_free(t);
}

static void test_want_color(void **state)
{
	FILE *f = tmpfile();

	/* a file is never coloured */
	setenv("NO_COLOR", "", 1);
	assert_false(tree_want_color(f));
	fclose(f);
	f = fopen("/dev/tty", "w");
	if (f) {   /* a terminal: coloured unless NO_COLOR is set and not empty */
		assert_true(tree_want_color(f));
		setenv("NO_COLOR", "1", 1);
		assert_false(tree_want_color(f));
		fclose(f);
	}
	unsetenv("NO_COLOR");
}

static void test_fmt_time(void **state)
{
	char b[32];

	assert_string_equal(tree_fmt_time(b, sizeof(b), 999), "999ns");
	assert_string_equal(tree_fmt_time(b, sizeof(b), 92100), "92.1us");
	assert_string_equal(tree_fmt_time(b, sizeof(b), 3000000), "3.0ms");
	assert_string_equal(tree_fmt_time(b, sizeof(b), 1250000000), "1.2s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build),
		cmocka_unit_test(test_unresolved),
		cmocka_unit_test(test_render_plain),
		cmocka_unit_test(test_render_ops_minpct),
		cmocka_unit_test(test_render_sort),
		cmocka_unit_test(test_render_filter),
		cmocka_unit_test(test_render_color),
		cmocka_unit_test(test_want_color),
		cmocka_unit_test(test_fmt_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
