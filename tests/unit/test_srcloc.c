/* test_srcloc.c - torch.profiler's Source Location (--group-by-stack):
 * file-name cut, entry filter, frames -> entries (torch 1.13 and 2.8
 * module calls), module numbers, rows folded by N entries, the table
 * column, sys.path[0] from a command line.  Expected entries are what
 * torch.profiler printed for tests/workloads/stack_model.py. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "export.h"
#include "profile.h"
#include "pypaths.h"
#include "srcloc.h"
#include "stacks.h"

static void trim(void **state)
{
	const char *pre[] = { "/w/tests/workloads/" };

	assert_string_equal(srcloc_trim("/w/tests/workloads/stack_model.py", pre, 1),
			    "stack_model.py");
	assert_string_equal(srcloc_trim("/usr/lib/python3/dist-packages/torch/nn/modules/module.py",
					pre, 1), "torch/nn/modules/module.py");
	assert_string_equal(srcloc_trim("/v/lib/python3.11/site-packages/torch/nn/functional.py",
					NULL, 0), "torch/nn/functional.py");
	assert_string_equal(srcloc_trim("/usr/lib/python3.11/threading.py", NULL, 0),
			    "threading.py");
	/* a relative co_filename (python3 x.py run from its folder) stays */
	assert_string_equal(srcloc_trim("stack_model.py", pre, 1), "stack_model.py");
	assert_string_equal(srcloc_trim("/opt/app/x.py", pre, 1), "/opt/app/x.py");
}

static void keep(void **state)
{
	assert_true(srcloc_keep("stack_model.py(39): helper"));
	assert_false(srcloc_keep("torch/autograd/__init__.py(147): backward"));
	assert_false(srcloc_keep("torch/autograd/__init__.py(60): _make_grads"));
	assert_true(srcloc_keep("torch/autograd/grad_mode.py(27): decorate_context"));
}

#define M_NET 0x7000
#define M_B1 0x7100
#define M_B2 0x7200

/* Block_1's helper() on torch 2.8, innermost first as BPF walks it. */
static const struct pysym_frame frames_28[] = {
	{ .name = "helper", .file = "/w/stack_model.py", .firstline = 39 },
	{ .name = "forward", .file = "/w/stack_model.py", .firstline = 34, .cls = "Block",
	  .module = M_B2 },
	{ .name = "_call_impl", .file = "/v/lib/python3.11/site-packages/torch/nn/modules/module.py",
	  .firstline = 1777, .cls = "Block", .module = M_B2 },
	{ .name = "_wrapped_call_impl", .file = "/v/lib/python3.11/site-packages/torch/nn/modules/module.py",
	  .firstline = 1769, .cls = "Block", .module = M_B2 },
	{ .name = "forward", .file = "/w/stack_model.py", .firstline = 49, .cls = "Net",
	  .module = M_NET },
	{ .name = "_call_impl", .file = "/v/lib/python3.11/site-packages/torch/nn/modules/module.py",
	  .firstline = 1777, .cls = "Net", .module = M_NET },
	{ .name = "_wrapped_call_impl", .file = "/v/lib/python3.11/site-packages/torch/nn/modules/module.py",
	  .firstline = 1769, .cls = "Net", .module = M_NET },
	{ .name = NULL },   /* an entry shim: left out */
	{ .name = "site_a", .file = "/w/stack_model.py", .firstline = 57 },
};

/* The same on torch 1.13: Module.__call__ is _call_impl. */
static const struct pysym_frame frames_113[] = {
	{ .name = "helper", .file = "/w/stack_model.py", .firstline = 39 },
	{ .name = "forward", .file = "/w/stack_model.py", .firstline = 34, .cls = "Block",
	  .module = M_B1 },
	{ .name = "_call_impl", .file = "/usr/lib/python3/dist-packages/torch/nn/modules/module.py",
	  .firstline = 1188, .cls = "Block", .module = M_B1 },
	{ .name = "forward", .file = "/w/stack_model.py", .firstline = 49, .cls = "Net",
	  .module = M_NET },
	{ .name = "_call_impl", .file = "/usr/lib/python3/dist-packages/torch/nn/modules/module.py",
	  .firstline = 1188, .cls = "Net", .module = M_NET },
	{ .name = "site_a", .file = "/w/stack_model.py", .firstline = 57 },
};

static void build_28(void **state)
{
	const char *pre[] = { "/w/" };
	struct sym_stack s = { 0 };

	assert_int_equal(stack_src_build(frames_28, 9, pre, 1, &s), 0);
	assert_int_equal(s.nsrc, 8);
	assert_string_equal(s.src[0].text, "stack_model.py(39): helper");
	assert_string_equal(s.src[1].text, "stack_model.py(34): forward");
	assert_string_equal(s.src[2].text, "torch/nn/modules/module.py(1777): _call_impl");
	assert_null(s.src[3].text);
	assert_string_equal(s.src[3].cls, "Block");
	assert_int_equal(s.src[3].module, M_B2);
	assert_string_equal(s.src[4].text, "stack_model.py(49): forward");
	assert_string_equal(s.src[5].text, "torch/nn/modules/module.py(1777): _call_impl");
	assert_null(s.src[6].text);
	assert_string_equal(s.src[6].cls, "Net");
	assert_string_equal(s.src[7].text, "stack_model.py(57): site_a");
	sym_stack_clear(&s);
}

static void build_113(void **state)
{
	const char *pre[] = { "/w/" };
	struct sym_stack s = { 0 };

	assert_int_equal(stack_src_build(frames_113, 6, pre, 1, &s), 0);
	assert_int_equal(s.nsrc, 6);
	assert_string_equal(s.src[1].text, "stack_model.py(34): forward");
	assert_null(s.src[2].text);
	assert_string_equal(s.src[2].cls, "Block");
	assert_string_equal(s.src[3].text, "stack_model.py(49): forward");
	assert_null(s.src[4].text);
	assert_string_equal(s.src[4].cls, "Net");
	sym_stack_clear(&s);
}

/* Two stacks through Block_0 and Block_1 of one Net: rows of one op fold
 * by their first N entries, modules numbered in named_modules() order. */
static void rows_by_stack(void **state)
{
	const char *pre[] = { "/w/" };
	struct pysym_frame b1[6], b2[6];
	struct sym_stack s1 = { 0 }, s2 = { 0 };
	struct profile p;
	struct prof_op *rows;
	size_t n;

	memcpy(b1, frames_113, sizeof(b1));
	memcpy(b2, frames_113, sizeof(b2));
	b2[1].module = b2[2].module = M_B2;
	assert_int_equal(stack_src_build(b1, 6, pre, 1, &s1), 0);
	assert_int_equal(stack_src_build(b2, 6, pre, 1, &s2), 0);
	/* named_modules(): Net 1, b1 2, b2 4 (b1.act 3) */
	s1.src[2].order = 2;
	s2.src[2].order = 4;
	s1.src[4].order = s2.src[4].order = 1;
	profile_init(&p);
	assert_int_equal(profile_add_srcstack(&p, 9, 11, s2.src, s2.nsrc), 0);
	assert_int_equal(profile_add_srcstack(&p, 9, 10, s1.src, s1.nsrc), 0);
	struct prof_op o = { .pid = 9, .op_id = 1, .name = "aten::mul", .overload = "",
			     .stack_id = 10, .calls = 3, .self_ns = 3000, .total_ns = 3000 };
	assert_int_equal(profile_add_op(&p, &o), 0);
	o.stack_id = 11;
	o.calls = 2;
	assert_int_equal(profile_add_op(&p, &o), 0);
	o.stack_id = 12;   /* no stack */
	o.calls = 1;
	assert_int_equal(profile_add_op(&p, &o), 0);

	assert_int_equal(profile_apply_srcloc(&p, 5), 0);
	assert_int_equal(profile_fold(&p, PROF_BY_NAME | PROF_BY_SRCLOC, &rows, &n), 0);
	assert_int_equal(n, 3);
	profile_sort(rows, n, "count");
	assert_int_equal(rows[0].calls, 3);
	assert_string_equal(rows[0].srcloc, "stack_model.py(39): helper\n"
			    "stack_model.py(34): forward\nnn.Module: Block_0\n"
			    "stack_model.py(49): forward\nnn.Module: Net_0");
	assert_int_equal(rows[1].calls, 2);
	assert_string_equal(rows[1].srcloc, "stack_model.py(39): helper\n"
			    "stack_model.py(34): forward\nnn.Module: Block_1\n"
			    "stack_model.py(49): forward\nnn.Module: Net_0");
	assert_string_equal(rows[2].srcloc, "");
	free(rows);

	/* 2 entries: both stacks are one row */
	assert_int_equal(profile_apply_srcloc(&p, 2), 0);
	assert_int_equal(profile_fold(&p, PROF_BY_NAME | PROF_BY_SRCLOC, &rows, &n), 0);
	assert_int_equal(n, 2);
	free(rows);

	/* the table: _build_table's layout, entries under the row, a blank line */
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct export_opts eo = { .stack_n = 2, .sort = "count" };

	assert_int_equal(export_table(f, &p, &eo), 0);
	fclose(f);
	/* width: longest entry + 4, left-aligned, 2 spaces after */
	assert_non_null(strstr(buf, "# of Calls  Source Location" "                  \n"));
	assert_non_null(strstr(buf, "           5  stack_model.py(39): helper" "       \n"
			       "              "));
	assert_non_null(strstr(buf, "  stack_model.py(34): forward" "      \n" "      "));
	assert_non_null(strstr(buf, "           1  " "                                 \n"));
	free(buf);
	profile_free(&p);
	sym_stack_clear(&s1);
	sym_stack_clear(&s2);
}

static void cmdline(void **state)
{
	static const char a1[] = "python3\0-u\0tests/stack_model.py\0--iters\0003";
	static const char a2[] = "/usr/bin/python3\0-X\0dev\0/opt/x/run.py";
	static const char a3[] = "python\0-m\0pkg.main";
	static const char a4[] = "python3";
	char *out;

	assert_int_equal(pypaths_from_cmdline(a1, sizeof(a1), "/w", NULL, &out), 0);
	assert_string_equal(out, "/w/tests/");
	free(out);
	assert_int_equal(pypaths_from_cmdline(a2, sizeof(a2), "/w", NULL, &out), 0);
	assert_string_equal(out, "/opt/x/");
	free(out);
	assert_int_equal(pypaths_from_cmdline(a3, sizeof(a3), "/srv", NULL, &out), 0);
	assert_string_equal(out, "/srv/");
	free(out);
	assert_int_equal(pypaths_from_cmdline(a4, sizeof(a4), "/srv", NULL, &out), 0);
	assert_null(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(trim),
		cmocka_unit_test(keep),
		cmocka_unit_test(build_28),
		cmocka_unit_test(build_113),
		cmocka_unit_test(rows_by_stack),
		cmocka_unit_test(cmdline),
	};
	return cmocka_run_group_tests_name("srcloc", tests, NULL, NULL);
}
