/* test_stacks.c - symbolized Python stacks -> capture frames and layers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "stacks.h"

/* main() -> Net.forward -> Sequential.forward -> Block.forward -> Conv2d.forward,
 * innermost first as BPF captures them; layers outermost first. */
static void module_stack(void **state)
{
	struct pysym_frame pf[] = {
		{ .func = "Conv2d.forward", .file = "/t/conv.py", .line = 458, .cls = "Conv2d" },
		{ .func = "Block.forward", .file = "/w/train.py", .line = 12, .cls = "Block" },
		{ .func = "Sequential.forward", .file = "/t/container.py", .line = 217, .cls = "Sequential" },
		{ .func = "Net.forward", .file = "/w/train.py", .line = 20, .cls = "Net" },
		{ .func = "main", .file = "/w/train.py", .line = 30 },
		{ .func = "<module>", .file = "/w/train.py", .line = 33 },
	};
	const char *names[] = { "Net", "blocks", "0", "conv" };
	const char *classes[] = { "Net", "Sequential", "Block", "Conv2d" };
	struct pysym_layers l = { .depth = 4, .names = names, .classes = classes };
	struct sym_stack s = { 0 };

	assert_int_equal(stack_frames_build(pf, 6, &l, &s), 0);
	/* 4 layers innermost first, then the 2 frames outside Net */
	assert_int_equal(s.nframes, 6);
	assert_int_equal(s.frames[0].kind, CF_LAYER);
	assert_string_equal(s.frames[0].name, "conv");
	assert_string_equal(s.frames[0].module_path, "blocks.0.conv");
	assert_string_equal(s.frames[0].class_name, "Conv2d");
	assert_string_equal(s.frames[2].module_path, "blocks");
	assert_string_equal(s.frames[3].name, "Net");
	assert_string_equal(s.frames[3].module_path, "");
	assert_int_equal(s.frames[4].kind, CF_PYTHON);
	assert_string_equal(s.frames[4].name, "main");
	assert_int_equal(s.frames[4].line, 30);
	assert_string_equal(s.frames[5].name, "<module>");
	assert_int_equal(s.depth, 4);
	assert_string_equal(s.names[1], "blocks");
	assert_string_equal(s.classes[3], "Conv2d");
	sym_stack_clear(&s);
}

/* No module on the stack: every Python frame, innermost first. */
static void plain_stack(void **state)
{
	struct pysym_frame pf[] = {
		{ .func = "step", .file = "/w/a.py", .line = 5 },
		{ .func = "main", .file = "/w/a.py", .line = 9 },
	};
	struct pysym_layers l = { 0 };
	struct sym_stack s = { 0 };

	assert_int_equal(stack_frames_build(pf, 2, &l, &s), 0);
	assert_int_equal(s.nframes, 2);
	assert_int_equal(s.depth, 0);
	assert_string_equal(s.frames[0].name, "step");
	assert_string_equal(s.frames[1].file, "/w/a.py");
	sym_stack_clear(&s);
}

static void store_find(void **state)
{
	struct stackstore ss = { 0 };
	struct layer_stack *ls;
	size_t n;

	assert_null(stackstore_find(&ss, 1, 42));
	assert_int_equal(stackstore_layer_stacks(&ss, &ls, &n), 0);
	assert_int_equal(n, 0);
	free(ls);
	stackstore_free(&ss);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(module_stack),
		cmocka_unit_test(plain_stack),
		cmocka_unit_test(store_find),
	};
	return cmocka_run_group_tests_name("stacks", tests, NULL, NULL);
}
