/* test_units.c - duration and size parsing (units.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <cmocka.h>
#include "units.h"

static void durations(void **state)
{
	uint64_t ns;

	assert_int_equal(parse_duration("10s", &ns), 0);
	assert_int_equal(ns, 10000000000ULL);
	assert_int_equal(parse_duration("500ms", &ns), 0);
	assert_int_equal(ns, 500000000ULL);
	assert_int_equal(parse_duration("1.5", &ns), 0);
	assert_int_equal(ns, 1500000000ULL);
	assert_int_equal(parse_duration("2m", &ns), 0);
	assert_int_equal(ns, 120000000000ULL);
	assert_int_equal(parse_duration("250us", &ns), 0);
	assert_int_equal(ns, 250000ULL);
	assert_int_equal(parse_duration("bogus", &ns), -EINVAL);
	assert_int_equal(parse_duration("10x", &ns), -EINVAL);
	assert_int_equal(parse_duration("-1s", &ns), -EINVAL);
	assert_int_equal(parse_duration("", &ns), -EINVAL);
}

static void sizes(void **state)
{
	uint64_t b;

	assert_int_equal(parse_size("64M", &b), 0);
	assert_int_equal(b, 64ULL << 20);
	assert_int_equal(parse_size("512k", &b), 0);
	assert_int_equal(b, 512ULL << 10);
	assert_int_equal(parse_size("4096", &b), 0);
	assert_int_equal(b, 4096);
	assert_int_equal(parse_size("1G", &b), 0);
	assert_int_equal(b, 1ULL << 30);
	assert_int_equal(parse_size("12Q", &b), -EINVAL);
	assert_int_equal(parse_size("-5M", &b), -EINVAL);
	assert_int_equal(ring_size_round(5000), 8192);
	assert_int_equal(ring_size_round(1), 4096);
	assert_int_equal(ring_size_round(1 << 20), 1 << 20);
}

static void ports(void **state)
{
	assert_int_equal(parse_port("9464", 4, 1), 9464);
	assert_int_equal(parse_port("0", 1, 0), 0);
	assert_int_equal(parse_port("0", 1, 1), -1);
	assert_int_equal(parse_port("65535", 5, 1), 65535);
	assert_int_equal(parse_port("65536", 5, 1), -1);
	assert_int_equal(parse_port("080/x", 3, 1), 80);   /* only the len given */
	assert_int_equal(parse_port("+80", 3, 1), -1);
	assert_int_equal(parse_port("", 0, 0), -1);
	assert_int_equal(parse_port("123456", 6, 0), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(durations),
		cmocka_unit_test(sizes),
		cmocka_unit_test(ports),
	};
	return cmocka_run_group_tests_name("options", tests, NULL, NULL);
}
