/* test_flamegraph.c - the flame graph's layout from folded stacks, its XML
 * text rules, and the SVG of a small call tree; every expected box worked
 * out by hand from the fixture (widths = self + children, siblings in the
 * folded lines' text order as flamegraph.pl draws them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "calltree.h"
#include "export.h"
#include "flamegraph.h"
#include "folded.h"

/* "a;b;c 30" lines -> folded_line array (kinds NULL: native) */
static struct folded_line *parse(const char *const *text, size_t n)
{
	struct folded_line *l = calloc(n, sizeof(*l));
	for (size_t i = 0; i < n; i++) {
		const char *sp = strrchr(text[i], ' ');
		l[i].text = strndup(text[i], (size_t)(sp - text[i]));
		l[i].value = strtoull(sp + 1, NULL, 10);
	}
	return l;
}

static void expect_box(const struct flame_layout *fl, size_t i, const char *name, uint32_t depth,
		       uint64_t x, uint64_t w)
{
	assert_true(i < fl->n);
	assert_string_equal(fl->boxes[i].name, name);
	assert_int_equal(fl->boxes[i].depth, depth);
	assert_int_equal(fl->boxes[i].x, x);
	assert_int_equal(fl->boxes[i].width, w);
}

/* out of order on purpose: the layout sorts by text */
static const char *const fixture[] = { "e 40", "a;d 20", "a;b;c 30", "a;b 10" };

static void test_layout_boxes(void **state)
{
	struct folded_line *l = parse(fixture, 4);
	struct flame_layout fl;

	assert_int_equal(flame_layout(l, 4, 0, &fl), 0);
	assert_int_equal(fl.total, 100);
	assert_int_equal(fl.n, 6);
	assert_int_equal(fl.max_depth, 3);
	expect_box(&fl, 0, "all", 0, 0, 100);
	expect_box(&fl, 1, "a", 1, 0, 60);     /* b 40 + d 20 */
	expect_box(&fl, 2, "b", 2, 0, 40);     /* self 10 + c 30 */
	expect_box(&fl, 3, "c", 3, 0, 30);
	expect_box(&fl, 4, "d", 2, 40, 20);    /* right of b */
	expect_box(&fl, 5, "e", 1, 60, 40);    /* right of a */
	flame_layout_free(&fl);
	folded_lines_free(l, 4);
}

static void test_layout_min_width(void **state)
{
	struct folded_line *l = parse(fixture, 4);
	struct flame_layout fl;

	/* 35 of 100: c (30) and d (20) go, b (40) stays */
	assert_int_equal(flame_layout(l, 4, 0.35, &fl), 0);
	assert_int_equal(fl.n, 4);
	assert_int_equal(fl.max_depth, 2);
	expect_box(&fl, 2, "b", 2, 0, 40);
	expect_box(&fl, 3, "e", 1, 60, 40);
	flame_layout_free(&fl);
	folded_lines_free(l, 4);
}

/* "P;a" and "P;a;x" sort apart ("P;a b" between them): still one frame a */
static void test_layout_merges_apart(void **state)
{
	static const char *const t[] = { "P;a;x 5", "P;a 1", "P;a b 2" };
	static unsigned char k_op[] = { CT_PYTHON, CT_OP, CT_OP };
	struct folded_line *l = parse(t, 3);
	struct flame_layout fl;

	l[1].kinds = malloc(2);
	memcpy(l[1].kinds, k_op, 2);
	l[1].depth = 2;
	assert_int_equal(flame_layout(l, 3, 0, &fl), 0);
	assert_int_equal(fl.n, 5);
	expect_box(&fl, 1, "P", 1, 0, 8);
	expect_box(&fl, 2, "a", 2, 0, 6);
	expect_box(&fl, 3, "x", 3, 0, 5);
	expect_box(&fl, 4, "a b", 2, 6, 2);
	assert_int_equal(fl.boxes[1].kind, CT_PYTHON);
	assert_int_equal(fl.boxes[2].kind, CT_OP);
	assert_int_equal(fl.boxes[4].kind, CT_OTHER);   /* its stack had no kinds */
	flame_layout_free(&fl);
	folded_lines_free(l, 3);
}

static char *xml(const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	flame_xml_put(f, s, len);
	fclose(f);
	return buf;
}

static void test_xml_escape(void **state)
{
	const char *in = "aten::add_ <module> & \"q\" 'a' \xc3\xbc\x01\xff";
	char *out = xml(in, strlen(in));

	assert_string_equal(out, "aten::add_ &lt;module&gt; &amp; &quot;q&quot; &apos;a&apos; "
				 "\xc3\xbc \xef\xbf\xbd");
	free(out);
	/* a UTF-16 surrogate, an overlong '/', U+FFFF: one U+FFFD per byte */
	out = xml("\xed\xa0\x80|\xc0\xaf|\xef\xbf\xbf", 10);
	assert_string_equal(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
				 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	free(out);
	/* a cut inside a sequence does not pass half of it */
	out = xml("\xc3\xbc", 1);
	assert_string_equal(out, "\xef\xbf\xbd");
	free(out);
}

static void test_fit(void **state)
{
	bool cut;

	assert_int_equal(flame_fit("aten::addmm", 4, &cut), 4);
	assert_true(cut);
	assert_int_equal(flame_fit("aten::addmm", 11, &cut), 11);
	assert_false(cut);
	assert_int_equal(flame_fit("\xc3\xbc\xc3\xbc\xc3\xbc", 2, &cut), 4);   /* "üü" of "üüü" */
	assert_true(cut);
}

/* A call tree of 1000 us: the SVG's frame for aten::add_ (250 us) is a
 * quarter of the 1180 px drawing width, right of <module>'s other child. */
static void test_svg_from_calltree(void **state)
{
	struct calltree ct;
	char *buf = NULL;
	size_t n = 0;

	assert_int_equal(calltree_init(&ct), 0);
	uint32_t fpy = calltree_frame(&ct, CT_PYTHON, "<module>", "/x/train \"q\".py", 1);
	uint32_t flin = calltree_frame(&ct, CT_OP, "aten::linear", "", 0);
	uint32_t fadd = calltree_frame(&ct, CT_OP, "aten::add_", "", 0);
	uint32_t npy = calltree_child(&ct, 0, fpy);
	uint32_t nlin = calltree_child(&ct, npy, flin), nadd = calltree_child(&ct, npy, fadd);
	calltree_add(&ct, nlin, 750000, 3);
	calltree_add(&ct, nadd, 250000, 1);
	FILE *f = open_memstream(&buf, &n);
	assert_int_equal(export_flamegraph(f, &ct, NULL), 0);
	fclose(f);
	assert_non_null(strstr(buf, "<title>train &quot;q&quot;.py:&lt;module&gt; (1000 us, 100.00%)</title>"));
	/* add_ sorts before linear: x 10 (the margin), width 295 */
	const char *add = strstr(buf, "<title>aten::add_ (250 us, 25.00%)</title>");
	assert_non_null(add);
	assert_non_null(strstr(add, "<rect x=\"10.00\""));
	assert_true(strstr(add, "width=\"295.00\"") < strstr(add, "</g>"));
	const char *lin = strstr(buf, "<title>aten::linear (750 us, 75.00%)</title>");
	assert_non_null(lin);
	assert_non_null(strstr(lin, "<rect x=\"305.00\""));
	assert_non_null(strstr(buf, "data-k=\"op\""));
	assert_non_null(strstr(buf, "data-k=\"python\""));
	assert_non_null(strstr(buf, "]]></script>\n</svg>\n"));
	free(buf);
	calltree_free(&ct);
}

/* Nothing recorded: still a picture, saying so, and no frame. */
static void test_svg_empty(void **state)
{
	struct calltree ct;
	char *buf = NULL;
	size_t n = 0;

	assert_int_equal(calltree_init(&ct), 0);
	FILE *f = open_memstream(&buf, &n);
	assert_int_equal(export_flamegraph(f, &ct, NULL), 0);
	fclose(f);
	assert_non_null(strstr(buf, "no stacks recorded"));
	assert_null(strstr(buf, "<g class=\"f\""));
	assert_non_null(strstr(buf, "</svg>\n"));
	free(buf);
	calltree_free(&ct);
}

static void test_format_names(void **state)
{
	assert_int_equal(export_format_parse("svg"), EXPORT_SVG);
	assert_int_equal(export_format_parse("flamegraph"), EXPORT_SVG);
	assert_string_equal(export_format_name(EXPORT_SVG), "svg");
	assert_int_equal(export_format_for_path("out/profile.svg"), EXPORT_SVG);
	assert_int_equal(export_format_for_path("PROFILE.SVG"), EXPORT_SVG);
	assert_true(export_format_for_path("profile.json") < 0);
	assert_true(export_format_for_path(".svg") < 0);
	assert_true(export_format_for_path(NULL) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_boxes),
		cmocka_unit_test(test_layout_min_width),
		cmocka_unit_test(test_layout_merges_apart),
		cmocka_unit_test(test_xml_escape),
		cmocka_unit_test(test_fit),
		cmocka_unit_test(test_svg_from_calltree),
		cmocka_unit_test(test_svg_empty),
		cmocka_unit_test(test_format_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
