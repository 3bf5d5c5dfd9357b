/* test_kineto.c - model/kineto.c: op rows from torch.profiler traces. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kineto.h"

/* What torch.profiler writes for: ProfilerStep#3 { aten::linear { aten::t,
 * aten::addmm }, aten::sum { aten::sum (the only same-name child) } } on
 * thread 10, aten::mm on thread 11, a python_function, an instant, a
 * flow, and a GPU kernel (not ops). */
static const char kineto[] =
"{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"x\"}],\n"
" \"traceEvents\": [\n"
"  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", \"pid\": 7, \"tid\": 10, \"ts\": 100.0, \"dur\": 100.0, \"args\": {\"External id\": 1}},\n"
"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": 7, \"tid\": 10, \"ts\": 110.5, \"dur\": 20.25,\n"
"   \"args\": {\"Input Dims\": [[16, 32], [64, 32]], \"Input type\": [\"float\", \"\\\"q\\u00e9\"], \"Concrete Inputs\": [\"\", null, true]}},\n"
"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::t\", \"pid\": 7, \"tid\": 10, \"ts\": 111, \"dur\": 2},\n"
"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::addmm\", \"pid\": 7, \"tid\": 10, \"ts\": 115, \"dur\": 10.001},\n"
"  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 7, \"tid\": 10, \"ts\": 116, \"dur\": 3, \"args\": {\"correlation\": 5}},\n"
"  {\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernel\", \"pid\": 7, \"tid\": 10, \"ts\": 120, \"dur\": 1},\n"
"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::sum\", \"pid\": 7, \"tid\": 10, \"ts\": 140, \"dur\": 10},\n"
"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::sum\", \"pid\": 7, \"tid\": 10, \"ts\": 141, \"dur\": 8},\n"
"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 7, \"tid\": \"11\", \"ts\": 120, \"dur\": 5},\n"
"  {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"train.py(3): step\", \"pid\": 7, \"tid\": 10, \"ts\": 100, \"dur\": 90},\n"
"  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": 130, \"dur\": 3, \"args\": {\"stream\": 7}},\n"
"  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"pid\": 7, \"tid\": 10, \"ts\": 112, \"s\": \"t\"},\n"
"  {\"ph\": \"s\", \"id\": 7, \"pid\": 7, \"tid\": 10, \"ts\": 111, \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"},\n"
"  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 7, \"tid\": 0, \"args\": {\"name\": \"python\"}}\n"
" ],\n"
" \"traceName\": \"x.json\", \"displayTimeUnit\": \"ms\"}\n";

static const struct prof_op *row(const struct profile *p, const char *name)
{
	const struct prof_op *r = NULL;
	for (size_t i = 0; i < p->nops; i++)
		if (!strcmp(p->ops[i].name, name)) {
			assert_null(r);   /* one row per name here */
			r = &p->ops[i];
		}
	return r;
}

static void test_kineto_rows(void **state)
{
	struct profile p;
	char *why = NULL;
	const struct prof_op *r;

	(void)state;
	profile_init(&p);
	assert_true(kineto_is_json(kineto, strlen(kineto)));
	assert_int_equal(profile_from_kineto(kineto, strlen(kineto), &p, &why), 0);
	assert_null(why);
	/* ops only: no ProfilerStep, python_function, kernel, instant, flow */
	assert_null(row(&p, "ProfilerStep#3"));
	assert_null(row(&p, "train.py(3): step"));
	assert_null(row(&p, "gemm"));
	r = row(&p, "aten::linear");
	assert_non_null(r);
	assert_int_equal(r->calls, 1);
	assert_int_equal(r->pid, 7);
	assert_int_equal(r->total_ns, 20250);
	assert_int_equal(r->self_ns, 20250 - 2000 - 10001);
	r = row(&p, "aten::addmm");
	/* its cudaLaunchKernel (Kineto's cuda_runtime event inside it, issue
	 * 18) is a row of its own, out of its self; driver calls are none */
	assert_int_equal(r->self_ns, 10001 - 3000);
	assert_int_equal(r->total_ns, 10001);
	r = row(&p, "cudaLaunchKernel");
	assert_non_null(r);
	assert_int_equal(r->calls, 1);
	assert_int_equal(r->self_ns, 3000);
	assert_null(row(&p, "cuLaunchKernel"));
	assert_int_equal(row(&p, "aten::mm")->calls, 1);
	/* the only same-name child: folded, as tbpf's rows count it */
	struct prof_op *rows;
	size_t n;
	assert_int_equal(profile_fold(&p, PROF_BY_NAME, &rows, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].name, "aten::sum")) {
			assert_int_equal(rows[i].calls, 1);
			assert_int_equal(rows[i].folded, 1);
			assert_int_equal(rows[i].total_ns, 18000);
		}
	free(rows);
	profile_free(&p);
}

static void test_legacy_list(void **state)
{
	static const char legacy[] =
		"[{\"name\": \"aten::zeros\", \"ph\": \"X\", \"ts\": 157, \"dur\": 13, \"tid\": 1, "
		"\"pid\": \"CPU functions\", \"args\": {}},\n"
		" {\"name\": \"aten::empty\", \"ph\": \"X\", \"ts\": 158, \"dur\": 2, \"tid\": 1, "
		"\"pid\": \"CPU functions\", \"args\": {}}]";
	struct profile p;
	char *why = NULL;

	(void)state;
	profile_init(&p);
	assert_int_equal(profile_from_kineto(legacy, strlen(legacy), &p, &why), 0);
	assert_int_equal(p.nops, 2);
	assert_int_equal(row(&p, "aten::zeros")->self_ns, 11000);
	profile_free(&p);
}

static void test_bad_json(void **state)
{
	static const char *const bad[] = {
		"{\"x\": 1}",                                  /* no traceEvents */
		"{\"traceEvents\": [{\"ph\": \"X\"",            /* cut */
		"{\"traceEvents\": [{\"ph\" \"X\"}]}",          /* no colon */
		"{\"traceEvents\": {}}",
	};
	struct profile p;
	char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		profile_init(&p);
		why = NULL;
		assert_int_equal(profile_from_kineto(bad[i], strlen(bad[i]), &p, &why), -EINVAL);
		assert_non_null(why);
		assert_non_null(strstr(why, "not a torch.profiler trace"));
		free(why);
		profile_free(&p);
	}
	assert_false(kineto_is_json("TBPF\0", 5));
	assert_true(kineto_is_json("  \n[", 4));
}

static void test_unicode_escapes(void **state)
{
	/* record_function labels as torch.profiler's json.dump writes them
	 * (ensure_ascii): é as \u00e9, an emoji as a surrogate pair, a lone
	 * high surrogate, and a raw UTF-8 byte run passed through */
	static const char trace[] =
		"[{\"name\": \"caf\\u00e9\", \"ph\": \"X\", \"ts\": 1, \"dur\": 1, \"tid\": 1, \"pid\": 1},\n"
		" {\"name\": \"s\\ud83d\\ude00e\", \"ph\": \"X\", \"ts\": 3, \"dur\": 1, \"tid\": 1, \"pid\": 1},\n"
		" {\"name\": \"l\\ud83dx\", \"ph\": \"X\", \"ts\": 5, \"dur\": 1, \"tid\": 1, \"pid\": 1},\n"
		" {\"name\": \"\\u20ac\\u0041\xc3\xa9\", \"ph\": \"X\", \"ts\": 7, \"dur\": 1, \"tid\": 1, \"pid\": 1}]";
	static const char *const bad[] = {
		"[{\"name\": \"\\u00g9\", \"ph\": \"X\", \"ts\": 1, \"dur\": 1, \"tid\": 1, \"pid\": 1}]",
		"[{\"name\": \"\\u00e",
	};
	struct profile p;
	char *why = NULL;

	(void)state;
	profile_init(&p);
	assert_int_equal(profile_from_kineto(trace, strlen(trace), &p, &why), 0);
	assert_int_equal(p.nops, 4);
	assert_non_null(row(&p, "caf\xc3\xa9"));
	assert_non_null(row(&p, "s\xf0\x9f\x98\x80" "e"));
	assert_non_null(row(&p, "l\xef\xbf\xbdx"));
	assert_non_null(row(&p, "\xe2\x82\xac" "A\xc3\xa9"));
	profile_free(&p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		profile_init(&p);
		why = NULL;
		assert_int_equal(profile_from_kineto(bad[i], strlen(bad[i]), &p, &why), -EINVAL);
		free(why);
		profile_free(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kineto_rows),
		cmocka_unit_test(test_legacy_list),
		cmocka_unit_test(test_bad_json),
		cmocka_unit_test(test_unicode_escapes),
	};
	return cmocka_run_group_tests_name("kineto", tests, NULL, NULL);
}
