/* test_grow.c - base/grow: appending and indexed growth keep the contents,
 * zero new index slots and leave the array untouched on failure. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <cmocka.h>
#include "grow.h"

static void append_doubles(void **state)
{
	int *v = NULL;
	size_t n = 0, cap = 0;

	(void)state;
	for (int i = 0; i < 100; i++) {
		assert_int_equal(GROW(v, n, cap, 4), 0);
		v[n++] = i;
	}
	assert_int_equal(cap, 128);   /* 4, 8, ..., 128 */
	for (int i = 0; i < 100; i++)
		assert_int_equal(v[i], i);
	free(v);
}

static void index_zeroes_new_slots(void **state)
{
	uint32_t *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(GROW_INDEX(v, cap, 3, 256), 0);
	assert_int_equal(cap, 256);
	v[3] = 7;
	assert_int_equal(GROW_INDEX(v, cap, 1000, 256), 0);
	assert_int_equal(cap, 1024);
	assert_int_equal(v[3], 7);
	for (size_t i = 256; i < 1024; i++)
		assert_int_equal(v[i], 0);
	assert_int_equal(GROW_INDEX(v, cap, 5, 256), 0);   /* already there */
	assert_int_equal(cap, 1024);
	free(v);
}

static void failure_leaves_array(void **state)
{
	char *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(GROW_INDEX(v, cap, 10, 16), 0);
	v[10] = 'x';
	/* sizes no allocator gives, and one whose slot count would overflow */
	assert_int_equal(GROW_INDEX(v, cap, SIZE_MAX / 4, 16), -12);
	assert_int_equal(GROW_INDEX(v, cap, SIZE_MAX - 1, 16), -12);
	assert_int_equal(cap, 16);
	assert_int_equal(v[10], 'x');
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(append_doubles),
		cmocka_unit_test(index_zeroes_new_slots),
		cmocka_unit_test(failure_leaves_array),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
