/* test_budget.c - the overhead-budget planner: on/off windows from hit
 * rate, per-hit cost and budget, expected values worked out by hand. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "budget.h"

#define S 1000000000ULL
#define MS 1000000ULL

static void plan(double rate, double ns, double base, double budget, struct budget_plan *p)
{
	assert_int_equal(budget_plan(rate, ns, base, budget, 1 * S, 100 * MS, 10 * S, p), 0);
}

/* 100k hits/s x 500 ns = 50 ms/s on a target using 1 CPU: 5% when always
 * on; a 1% budget allows 1/5 of the time: 200 ms on, 800 ms off. */
static void test_duty_fraction(void **state)
{
	struct budget_plan p;

	plan(100000, 500, 1.0, 0.01, &p);
	assert_int_equal(p.on_ns, 200 * MS);
	assert_int_equal(p.off_ns, 800 * MS);
	assert_float_equal(p.duty, 0.2, 1e-9);
	assert_float_equal(p.full_overhead, 0.05, 1e-9);
	assert_float_equal(p.overhead, 0.01, 1e-9);
	/* the same hits on a target using half a CPU cost twice as much */
	plan(100000, 500, 0.5, 0.01, &p);
	assert_int_equal(p.on_ns, 100 * MS);
	assert_int_equal(p.off_ns, 900 * MS);
}

/* 1k hits/s x 500 ns = 0.05%: always on. */
static void test_within_budget(void **state)
{
	struct budget_plan p;

	plan(1000, 500, 1.0, 0.01, &p);
	assert_int_equal(p.on_ns, 1 * S);
	assert_int_equal(p.off_ns, 0);
	assert_float_equal(p.duty, 1, 1e-12);
	assert_float_equal(p.overhead, 0.0005, 1e-12);
	plan(0, 500, 1.0, 0.01, &p);   /* no hits: nothing to save */
	assert_int_equal(p.off_ns, 0);
}

/* 1M hits/s x 1 us = 100%: duty 1% -> 10 ms on is below the 100 ms
 * minimum, so the period stretches to 10 s: 100 ms on, 9.9 s off. */
static void test_min_on_stretches_period(void **state)
{
	struct budget_plan p;

	plan(1000000, 1000, 1.0, 0.01, &p);
	assert_int_equal(p.on_ns, 100 * MS);
	assert_int_equal(p.off_ns, 9900 * MS);
	assert_float_equal(p.duty, 0.01, 1e-9);
	assert_float_equal(p.overhead, 0.01, 1e-9);
}

/* 10M hits/s x 1 us: the stretched period would be 100 s; capped at 10 s
 * the duty is 1% and the expected overhead 10%, over budget: the plan says
 * so instead of pretending. */
static void test_period_cap(void **state)
{
	struct budget_plan p;

	plan(10000000, 1000, 1.0, 0.01, &p);
	assert_int_equal(p.on_ns, 100 * MS);
	assert_int_equal(p.off_ns, 9900 * MS);
	assert_float_equal(p.overhead, 0.1, 1e-9);
}

/* An idle target counts as at least 1% of a CPU. */
static void test_idle_target_floor(void **state)
{
	struct budget_plan p;

	/* 1000 hits/s x 500 ns = 0.5 ms/s; against 0.01 CPU = 5% -> duty 0.2 */
	plan(1000, 500, 0.0001, 0.01, &p);
	assert_int_equal(p.on_ns, 200 * MS);
	assert_float_equal(p.full_overhead, 0.05, 1e-9);
}

static void test_invalid(void **state)
{
	struct budget_plan p;

	assert_int_equal(budget_plan(1, 1, 1, 0, S, MS, S, &p), -EINVAL);
	assert_int_equal(budget_plan(-1, 1, 1, 0.01, S, MS, S, &p), -EINVAL);
	assert_int_equal(budget_plan(1, 1, 1, 0.01, 0, 0, S, &p), -EINVAL);
	assert_int_equal(budget_plan(1, 1, 1, 0.01, S, 2 * S, 4 * S, &p), -EINVAL);
	assert_int_equal(budget_plan(1, 1, 1, 0.01, 2 * S, MS, S, &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duty_fraction),
		cmocka_unit_test(test_within_budget),
		cmocka_unit_test(test_min_on_stretches_period),
		cmocka_unit_test(test_period_cap),
		cmocka_unit_test(test_idle_target_floor),
		cmocka_unit_test(test_invalid),
	};

	return cmocka_run_group_tests_name("budget", tests, NULL, NULL);
}
