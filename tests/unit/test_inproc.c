/* test_inproc.c - --inproc's pure parts: the torch version of a process
 * (torchver.c), the verified layouts, committed ring slots and the
 * conversion to REC_OP records (inproc_attach.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "inproc_attach.h"
#include "torch_builds.h"
#include "procmaps.h"
#include "torchver.h"

/* the lines of torch/version.py as the two installed wheels write them */
static void version_py(void **state)
{
	char *v;

	v = torchver_from_py("from typing import Optional\n\n__all__ = ['__version__', 'debug', "
			     "'cuda', 'git_version', 'hip', 'xpu']\n__version__ = '2.8.0+cu128'\n"
			     "debug = False\n");
	assert_string_equal(v, "2.8.0+cu128");
	free(v);
	v = torchver_from_py("__version__ = '1.13.0a0'\ndebug = False\ncuda = None\n");
	assert_string_equal(v, "1.13.0a0");
	free(v);
	v = torchver_from_py("__version__: str = \"2.5.1\"\n");
	assert_string_equal(v, "2.5.1");
	free(v);
	assert_null(torchver_from_py("__all__ = ['__version__']\n"));
	assert_null(torchver_from_py("version = '1.0'\n"));
	assert_null(torchver_from_py("__version__ = ''\n"));
}

static void soname(void **state)
{
	char *v = torchver_from_soname("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13");

	assert_string_equal(v, "1.13.0");
	free(v);
	v = torchver_from_soname("/x/libtorch_cpu.so.2.8.1");
	assert_string_equal(v, "2.8.1");
	free(v);
	assert_null(torchver_from_soname("/x/torch/lib/libtorch_cpu.so"));
	assert_null(torchver_from_soname("/x/libtorch.so.1.13"));
}

static void pkg_dir(void **state)
{
	static const char maps[] =
		"7f0000000000-7f0000001000 r--p 00000000 fe:01 11 /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
		"7f1000000000-7f1000001000 r--p 00000000 fe:01 12 /usr/lib/python3/dist-packages/torch/_C.cpython-311-x86_64-linux-gnu.so\n"
		"7f2000000000-7f2000001000 r--p 00000000 fe:01 13 /usr/lib/python3/dist-packages/torch/lib/x.so\n";
	static const char other[] =
		"7f1000000000-7f1000001000 r--p 00000000 fe:01 12 /opt/notorch/_C.so\n";
	struct pm_maps m = { 0 };
	FILE *f = fmemopen((void *)maps, sizeof(maps) - 1, "r");
	char *d;

	assert_int_equal(procmaps_parse(f, &m), 0);
	fclose(f);
	d = torchver_pkg_dir(&m);
	assert_string_equal(d, "/usr/lib/python3/dist-packages/torch");
	free(d);
	procmaps_free(&m);
	f = fmemopen((void *)other, sizeof(other) - 1, "r");
	assert_int_equal(procmaps_parse(f, &m), 0);
	fclose(f);
	assert_null(torchver_pkg_dir(&m));
	procmaps_free(&m);
}

/* the verified builds by version (a torch that ships no headers) */
static unsigned inproc_layout_for(const char *v)
{
	const struct torch_build *b = torch_build_by_version(v);

	return b ? b->rf_layout : INPROC_LAYOUT_NONE;
}

static const struct tbpf_inproc_ivlayout *inproc_ivlayout_for(const char *v)
{
	const struct torch_build *b = torch_build_by_version(v);

	return b ? &b->iv : NULL;
}

static const struct tbpf_inproc_seqlayout *inproc_seqlayout_for(const char *v)
{
	const struct torch_build *b = torch_build_by_version(v);

	return b ? &b->seq : NULL;
}

static void layouts(void **state)
{
	assert_int_equal(inproc_layout_for("2.11.0+cu130"), INPROC_LAYOUT_RFCB10_FN);
	assert_int_equal(inproc_layout_for("2.15.0+cu132"), INPROC_LAYOUT_RFCB10_FN);
	assert_int_equal(inproc_layout_for("2.9.0"), INPROC_LAYOUT_NONE);
	assert_int_equal(inproc_layout_for("2.1.0"), INPROC_LAYOUT_NONE);
	assert_int_equal(inproc_layout_for("1.13.0a0"), INPROC_LAYOUT_RFCB10_FN);
	assert_int_equal(inproc_layout_for("1.13.1"), INPROC_LAYOUT_RFCB10_FN);
	assert_int_equal(inproc_layout_for("2.8.0+cu128"), INPROC_LAYOUT_RFCB10_FN);
	assert_int_equal(inproc_layout_for("2.7.1"), INPROC_LAYOUT_NONE);
	assert_int_equal(inproc_layout_for("1.130.0"), INPROC_LAYOUT_NONE);
	assert_int_equal(inproc_layout_for("2.80.0"), INPROC_LAYOUT_NONE);
	assert_int_equal(inproc_layout_for(""), INPROC_LAYOUT_NONE);
	assert_int_equal(inproc_layout_for(NULL), INPROC_LAYOUT_NONE);
}

/* --record-shapes: a layout only for the versions inproc_layouts.h has
 * (checked against their headers by rf_layout.sh) */
static void ivlayouts(void **state)
{
	const struct tbpf_inproc_ivlayout *a = inproc_ivlayout_for("1.13.0a0");
	const struct tbpf_inproc_ivlayout *b = inproc_ivlayout_for("2.8.0+cpu");

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->ti_sizes_off, 72);    /* intrusive_ptr_target: 2 x size_t */
	assert_int_equal(b->ti_sizes_off, 64);    /* 2.x: 2 x uint32 refcounts */
	assert_int_equal(a->tag_list, 12);
	assert_int_equal(b->tag_list, 13);        /* 2.x added a tag before it */
	assert_int_equal(a->iv_size, 16);
	/* Input type: 1.13 shows every list but a tensor list as "" and
	 * never looks into a tensor list; 2.x has ScalarList (up to 30) and
	 * SymBool among the scalars */
	assert_int_equal(a->scalarlist_max, 0);
	assert_int_equal(a->tlist_undef, 0);
	assert_int_equal(b->scalarlist_max, 30);
	assert_int_equal(b->tlist_undef, 1);
	assert_int_equal(a->kind_tensor, b->kind_tensor);
	assert_int_equal(a->list_type_off, a->list_vec_off + 24);  /* after the vector */
	assert_int_equal(b->list_type_off, b->list_vec_off + 24);
	assert_true(a->scalar_tags & 1u << a->tag_int);
	assert_true(b->scalar_tags & 1u << b->tag_int);
	assert_false(a->scalar_tags & (1u << a->tag_tensor | 1u << a->tag_none | 1u << a->tag_list));
	assert_false(b->scalar_tags & (1u << b->tag_tensor | 1u << b->tag_none | 1u << b->tag_list));
	assert_int_equal(__builtin_popcount(a->scalar_tags) + 1, __builtin_popcount(b->scalar_tags));
	assert_ptr_equal(inproc_ivlayout_for("1.13.1"), a);
	assert_null(inproc_ivlayout_for("2.7.1"));
	assert_null(inproc_ivlayout_for("2.80.0"));
	assert_null(inproc_ivlayout_for(""));
	assert_null(inproc_ivlayout_for(NULL));
}

/* --group-by-stack's sequence number and thread ids per version (checked
 * against their headers by rf_layout.sh) */
static void seqlayouts(void **state)
{
	const struct tbpf_inproc_seqlayout *a = inproc_seqlayout_for("1.13.0a0");
	const struct tbpf_inproc_seqlayout *b = inproc_seqlayout_for("2.8.0+cpu");

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->rf_seq_off, 200);
	assert_int_equal(a->rf_fwd_tid_off, 248);
	assert_int_equal(b->rf_fwd_tid_off, 304);   /* 2.x: kwinputs_ before it */
	assert_int_equal(b->rf_tid_off, 88);
	assert_null(inproc_seqlayout_for("2.7.1"));
	assert_null(inproc_seqlayout_for(NULL));
}

/* an ENTER slot with a shape: the uprobe mode's REC_OP_ENTER + shape id,
 * ids distinct per process and table entry */
static void to_rec_op_shape(void **state)
{
	struct tbpf_inproc_rec r = { .stamp = 1, .tid = 77, .ts_ns = 5, .hash = 0x1234,
				     .kind = INPROC_ENTER, .depth = 2, .shape = 9 };
	struct rec_op_shape o;

	inproc_to_rec_op_shape(&r, 42, &o);
	assert_int_equal(o.op.h.type, REC_OP_ENTER);
	assert_int_equal(o.op.h.size, sizeof(o));
	assert_int_equal(o.op.pid, 42);
	assert_int_equal(o.op.depth, 2);
	assert_int_equal(o.op.op_id, inproc_op_id(0x1234, 0));
	assert_int_equal(o.shape_id, inproc_shape_id(42, 9));
	assert_true(o.shape_id != 0);
	assert_true(inproc_shape_id(42, 9) != inproc_shape_id(43, 9));
	assert_true(inproc_shape_id(42, 9) != inproc_shape_id(42, 10));
	assert_int_equal(inproc_shape_id(42, 0), 0);
}

static void committed(void **state)
{
	struct tbpf_inproc_rec v[4] = { { .stamp = 11 }, { .stamp = 12 }, { .stamp = 0 },
					{ .stamp = 14 } };

	assert_int_equal(inproc_committed(v, 4, 10), 2);   /* slot 12 not yet written */
	assert_int_equal(inproc_committed(v, 4, 9), 0);    /* stamps of another lap */
	v[2].stamp = 13;
	assert_int_equal(inproc_committed(v, 4, 10), 4);
	/* the 32-bit stamp wraps with the 64-bit index */
	v[0].stamp = 0xffffffffu;
	v[1].stamp = 0;
	assert_int_equal(inproc_committed(v, 2, 0x1fffffffeull), 2);
}

static void to_rec_op(void **state)
{
	struct tbpf_inproc_rec r = { .stamp = 1, .tid = 77, .ts_ns = 123456789, .hash = 0xdeadbeef,
				     .kind = INPROC_ENTER, .flags = 0, .depth = 3 };
	struct rec_op o;

	inproc_to_rec_op(&r, 42, &o);
	assert_int_equal(o.h.type, REC_OP_ENTER);
	assert_int_equal(o.h.size, sizeof(o));
	assert_int_equal(o.h.tid, 77);
	assert_int_equal(o.h.ts_ns, 123456789);
	assert_int_equal(o.pid, 42);
	assert_int_equal(o.op_id, TBPF_INPROC_ID_BASE | (0xdeadbeef & TBPF_INPROC_ID_MASK));
	assert_false(TBPF_IS_SCOPE_ID(o.op_id));
	assert_int_equal(o.depth, 3);
	assert_int_equal(o.flags, 0);
	assert_int_equal(o.stack_id, 0);
	r.kind = INPROC_EXIT;
	r.flags = INPROC_USER_SCOPE;
	inproc_to_rec_op(&r, 42, &o);
	assert_int_equal(o.h.type, REC_OP_EXIT);
	assert_true(TBPF_IS_SCOPE_ID(o.op_id));
	assert_int_equal(o.op_id, inproc_op_id(0xdeadbeef, INPROC_USER_SCOPE));
	assert_int_equal(o.flags, OPF_SCOPE | OPF_USER);
	/* the Python stack id rides on the enter record only */
	r.stack = 0x89abcdefu;
	inproc_to_rec_op(&r, 42, &o);
	assert_int_equal(o.stack_id, 0);
	r.kind = INPROC_ENTER;
	inproc_to_rec_op(&r, 42, &o);
	assert_int_equal(o.stack_id, 0x89abcdefu);
}

/* An agent's module call (agent/modcall.h) as the uprobe mode's
 * REC_MODCALL: the module-call row id and the module's stack id. */
static void to_rec_modcall(void **state)
{
	struct tbpf_inproc_rec r = { .tid = 7, .ts_ns = 555, .kind = INPROC_MODCALL,
				     .stack = 0x13572468u };
	struct rec_op o;

	memset(&o, 0xff, sizeof(o));
	inproc_to_rec_modcall(&r, 31, &o);
	assert_int_equal(o.h.type, REC_MODCALL);
	assert_int_equal(o.h.size, sizeof(o));
	assert_int_equal(o.h.tid, 7);
	assert_int_equal(o.h.ts_ns, 555);
	assert_int_equal(o.pid, 31);
	assert_int_equal(o.op_id, TBPF_MODCALL_ID);
	assert_int_equal(o.stack_id, 0x13572468u);
	assert_int_equal(o.depth, 0);
	assert_int_equal(o.flags, 0);
}

/* An agent's published stack as the BPF walker's REC_PYSTACK record:
 * the size counts only the frames it has; a bad count is clamped. */
static void stack_to_rec(void **state)
{
	static struct tbpf_inproc_stack e;
	struct rec_pystack r;

	e.stack_id = 0x1122334455667788ull;
	e.nframes = 2;
	e.frames[0] = (struct tbpf_pyframe){ .code = 0x1000, .self = 0x2000, .lasti = 12,
					     .flags = PYF_SELF };
	e.frames[1] = (struct tbpf_pyframe){ .code = 0x3000, .lasti = 4, .flags = PYF_TRUNC };
	inproc_stack_to_rec(&e, 99, &r);
	assert_int_equal(r.h.type, REC_PYSTACK);
	assert_int_equal(r.h.size, sizeof(r) - sizeof(r.frames) + 2 * sizeof(r.frames[0]));
	assert_int_equal(r.h.size % 8, 0);
	assert_int_equal(r.pid, 99);
	assert_int_equal(r.nframes, 2);
	assert_int_equal(r.stack_id, 0x1122334455667788ull);
	assert_int_equal(r.frames[0].self, 0x2000);
	assert_int_equal(r.frames[0].flags, PYF_SELF);
	assert_int_equal(r.frames[1].code, 0x3000);
	assert_int_equal(r.frames[1].flags, PYF_TRUNC);
	e.nframes = 1000;
	inproc_stack_to_rec(&e, 99, &r);
	assert_int_equal(r.nframes, TBPF_MAX_PYFRAMES);
	assert_int_equal(r.h.size, sizeof(r));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(version_py),
		cmocka_unit_test(soname),
		cmocka_unit_test(pkg_dir),
		cmocka_unit_test(layouts),
		cmocka_unit_test(ivlayouts), cmocka_unit_test(seqlayouts),
		cmocka_unit_test(to_rec_op_shape),
		cmocka_unit_test(committed),
		cmocka_unit_test(to_rec_op),
		cmocka_unit_test(stack_to_rec),
		cmocka_unit_test(to_rec_modcall),
	};
	return cmocka_run_group_tests_name("inproc", tests, NULL, NULL);
}
