/* test_probeshare.c - the verdict on other tools' uprobe_multi links on a
 * file tbpf wants to probe (probeshare.h), cases worked out from the
 * kernel rule: a return link rewrites return addresses wherever any
 * breakpoint on the file is hit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "probeshare.h"

static void test_alone(void **state)
{
	size_t which = 99;

	assert_int_equal(probeshare_decide(NULL, 0, true, &which), PS_OK);
	assert_int_equal(probeshare_decide(NULL, 0, false, &which), PS_OK);
	assert_int_equal(which, 99);
}

/* Another tool's entry probes: harmless to our entry probes; our return
 * probes would act in its processes. */
static void test_foreign_entries(void **state)
{
	struct probeshare_link v[] = { { 7, 70, 1234, false }, { 8, 80, 0, false } };
	size_t which = 99;

	assert_int_equal(probeshare_decide(v, 2, false, &which), PS_OK);
	assert_int_equal(probeshare_decide(v, 2, true, &which), PS_NO_RETURNS);
	assert_int_equal(which, 0);
}

/* Another tool's return probes, after entry ones: refuse whatever we
 * want, naming the return link. */
static void test_foreign_returns(void **state)
{
	struct probeshare_link v[] = { { 7, 70, 1234, false }, { 9, 90, 4321, true } };
	size_t which = 99;

	assert_int_equal(probeshare_decide(v, 2, false, &which), PS_REFUSE);
	assert_int_equal(which, 1);
	assert_int_equal(probeshare_decide(v, 2, true, &which), PS_REFUSE);
	assert_int_equal(which, 1);
}

static void test_describe(void **state)
{
	struct probeshare_link a = { 7, 70, 1234, true }, b = { 8, 80, 0, false };
	char *s = probeshare_describe(&a), *t = probeshare_describe(&b);

	assert_string_equal(s, "BPF link 7 (program 70) with return probes for pid 1234");
	assert_string_equal(t, "BPF link 8 (program 80) with entry probes for every process");
	free(s);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alone),
		cmocka_unit_test(test_foreign_entries),
		cmocka_unit_test(test_foreign_returns),
		cmocka_unit_test(test_describe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
