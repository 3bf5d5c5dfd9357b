/* test_budget.c - the overhead-budget planner: on/off windows from hit
 * rate, per-hit cost and budget, expected values worked out by hand. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include "budget.h"
#include "profile.h"

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

/* Discovery: 1% budget, a quarter of it (0.25%) for discoveries every
 * 60 s = 150 ms of budget; at 300% always-on cost that buys 50 ms on. */
static void test_discovery_on(void **state)
{
	double ov;

	assert_int_equal(budget_discovery_on(3.0, 0.0025, 60 * S, 20 * MS, 15 * S, &ov), 50 * MS);
	assert_float_equal(ov, 0.0025, 1e-12);
	/* 3000% always on: 5 ms, below the 20 ms floor, which then costs
	 * 20 ms x 30 / 60 s = 1% */
	assert_int_equal(budget_discovery_on(30.0, 0.0025, 60 * S, 20 * MS, 15 * S, &ov), 20 * MS);
	assert_float_equal(ov, 0.01, 1e-12);
	/* 1% always on: 15 s allowed, capped at 15 s */
	assert_int_equal(budget_discovery_on(0.01, 0.0025, 60 * S, 20 * MS, 15 * S, &ov), 15 * S);
	assert_float_equal(ov, 0.0025, 1e-12);
}

static struct prof_op row(uint32_t id, uint64_t stack, uint64_t calls)
{
	struct prof_op o = { 0 };

	o.op_id = id;
	o.stack_id = stack;
	o.calls = calls;
	o.self_ns = calls * 100;
	return o;
}

/* Discovery rows (sorted by op): op 3 in two stacks.  1,000 calls: op 2
 * (4 calls) is below the 10-call floor, op 5 (40 = 4%) is the rarest
 * frequent op and fits within 5%; op 7 (60) would make 10%. */
static void test_sets_choose(void **state)
{
	struct prof_op d[] = { row(2, 0, 4), row(3, 1, 300), row(3, 2, 296), row(5, 0, 40),
			       row(7, 0, 60), row(9, 0, 300) };
	uint32_t *hot, *light;
	size_t nh, nl;

	assert_int_equal(budget_sets(d, 6, NULL, 0, &hot, &nh, &light, &nl), 0);
	assert_int_equal(nh, 5);
	assert_int_equal(hot[0], 2);
	assert_int_equal(hot[1], 3);
	assert_int_equal(hot[2], 5);
	assert_int_equal(hot[3], 7);
	assert_int_equal(hot[4], 9);
	assert_int_equal(nl, 1);
	assert_int_equal(light[0], 5);
	free(hot);
	free(light);
}

/* A light set still seen is kept (the yardstick must not change between
 * windows), and stays in the hot set even when a discovery missed one of
 * its ops; a light set no longer seen is replaced. */
static void test_sets_keep_light(void **state)
{
	struct prof_op d[] = { row(3, 0, 500), row(5, 0, 20), row(9, 0, 480) };
	uint32_t old[] = { 4, 5 }, gone[] = { 11 };
	uint32_t *hot, *light;
	size_t nh, nl;

	assert_int_equal(budget_sets(d, 3, old, 2, &hot, &nh, &light, &nl), 0);
	assert_int_equal(nl, 2);
	assert_int_equal(light[0], 4);
	assert_int_equal(light[1], 5);
	assert_int_equal(nh, 4);
	assert_int_equal(hot[0], 3);
	assert_int_equal(hot[1], 4);
	assert_int_equal(hot[2], 5);
	assert_int_equal(hot[3], 9);
	free(hot);
	free(light);
	/* 20 of 1,000 calls (2%) for op 5: the new light set */
	assert_int_equal(budget_sets(d, 3, gone, 1, &hot, &nh, &light, &nl), 0);
	assert_int_equal(nl, 1);
	assert_int_equal(light[0], 5);
	assert_int_equal(nh, 3);
	free(hot);
	free(light);
}

/* No calls at all (an idle target): keep the old sets. */
static void test_sets_idle(void **state)
{
	struct prof_op d[] = { row(3, 0, 0) };
	uint32_t *hot = NULL, *light = NULL;
	size_t nh = 0, nl = 0;

	assert_int_equal(budget_sets(d, 1, NULL, 0, &hot, &nh, &light, &nl), -ENODATA);
	assert_int_equal(budget_sets(d, 0, NULL, 0, &hot, &nh, &light, &nl), -ENODATA);
	assert_null(hot);
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
		cmocka_unit_test(test_discovery_on),
		cmocka_unit_test(test_sets_choose),
		cmocka_unit_test(test_sets_keep_light),
		cmocka_unit_test(test_sets_idle),
	};

	return cmocka_run_group_tests_name("budget", tests, NULL, NULL);
}
