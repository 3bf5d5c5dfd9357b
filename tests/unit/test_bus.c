/* test_bus.c - bus/bus: each record reaches the sinks that take its type,
 * in the order they were added; BUS_TAKEN hides it from later sinks; the
 * first error stops the feed and is sticky; finish runs once, in order,
 * only after a feed without error. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "bus.h"

struct probe {
	int id;
	int ret;            /* what record returns */
	int seen[REC_TYPE_MAX];
	int finished;
	int *log, *nlog;    /* the order of calls, by id */
};

static int on_rec(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct probe *p = ctx;

	assert_int_equal(size, h->size);
	p->seen[h->type]++;
	p->log[(*p->nlog)++] = p->id;
	return p->ret;
}

static int on_finish(void *ctx)
{
	struct probe *p = ctx;

	p->finished++;
	p->log[(*p->nlog)++] = 100 + p->id;
	return p->ret < 0 ? p->ret : 0;
}

static struct rec_hdr rec(uint16_t type)
{
	return (struct rec_hdr){ .type = type, .size = sizeof(struct rec_hdr) };
}

static void by_type_in_order(void **state)
{
	int log[32], nlog = 0;
	struct probe a = { 1, 0, { 0 }, 0, log, &nlog }, b = { 2, 0, { 0 }, 0, log, &nlog };
	struct rec_bus bus;
	struct rec_hdr op = rec(REC_OP_ENTER), mem = rec(REC_MEM), gpu = rec(REC_GPU);

	(void)state;
	bus_init(&bus);
	assert_int_equal(bus_add(&bus, (struct bus_sink){ BUS_TYPE(REC_OP_ENTER) | BUS_TYPE(REC_MEM),
							  on_rec, on_finish, &a }), 0);
	assert_int_equal(bus_add(&bus, (struct bus_sink){ BUS_ALL, on_rec, on_finish, &b }), 0);
	/* a sink that takes nothing is not added */
	assert_int_equal(bus_add(&bus, (struct bus_sink){ 0, on_rec, NULL, &b }), 0);
	assert_int_equal(bus.n, 2);
	assert_true(bus_wants(&bus, REC_GPU));
	assert_int_equal(bus_feed(&bus, &op, op.size), 0);
	assert_int_equal(bus_feed(&bus, &gpu, gpu.size), 0);
	assert_int_equal(bus_feed(&bus, &mem, mem.size), 0);
	assert_int_equal(bus_finish(&bus), 0);
	assert_int_equal(a.seen[REC_OP_ENTER], 1);
	assert_int_equal(a.seen[REC_MEM], 1);
	assert_int_equal(a.seen[REC_GPU], 0);
	assert_int_equal(b.seen[REC_GPU], 1);
	int want[] = { 1, 2, 2, 1, 2, 101, 102 };
	assert_int_equal(nlog, 7);
	assert_memory_equal(log, want, sizeof(want));
	assert_int_equal(bus.fed, 3);
}

static void taken_hides_it(void **state)
{
	int log[32], nlog = 0;
	struct probe a = { 1, BUS_TAKEN, { 0 }, 0, log, &nlog }, b = { 2, 0, { 0 }, 0, log, &nlog };
	struct rec_bus bus;
	struct rec_hdr op = rec(REC_OP_EXIT), mem = rec(REC_MEM);

	(void)state;
	bus_init(&bus);
	bus_add(&bus, (struct bus_sink){ BUS_TYPE(REC_OP_EXIT), on_rec, NULL, &a });
	bus_add(&bus, (struct bus_sink){ BUS_ALL, on_rec, NULL, &b });
	assert_int_equal(bus_feed(&bus, &op, op.size), 0);
	assert_int_equal(bus_feed(&bus, &mem, mem.size), 0);
	assert_int_equal(a.seen[REC_OP_EXIT], 1);
	assert_int_equal(b.seen[REC_OP_EXIT], 0);
	assert_int_equal(b.seen[REC_MEM], 1);
	assert_int_equal(bus_finish(&bus), 0);
}

static void first_error_sticks(void **state)
{
	int log[32], nlog = 0;
	struct probe a = { 1, -ENOMEM, { 0 }, 0, log, &nlog }, b = { 2, 0, { 0 }, 0, log, &nlog };
	struct rec_bus bus;
	struct rec_hdr op = rec(REC_OP_ENTER);

	(void)state;
	bus_init(&bus);
	bus_add(&bus, (struct bus_sink){ BUS_ALL, on_rec, on_finish, &a });
	bus_add(&bus, (struct bus_sink){ BUS_ALL, on_rec, on_finish, &b });
	assert_int_equal(bus_feed(&bus, &op, op.size), -ENOMEM);
	assert_int_equal(bus_feed(&bus, &op, op.size), -ENOMEM);
	assert_int_equal(a.seen[REC_OP_ENTER], 1);   /* nothing after the error */
	assert_int_equal(b.seen[REC_OP_ENTER], 0);
	assert_int_equal(bus_finish(&bus), -ENOMEM);
	assert_int_equal(a.finished + b.finished, 0);
}

static void full_bus(void **state)
{
	int log[4], nlog = 0;
	struct probe a = { 1, 0, { 0 }, 0, log, &nlog };
	struct rec_bus bus;

	(void)state;
	bus_init(&bus);
	for (int i = 0; i < BUS_MAX_SINKS; i++)
		assert_int_equal(bus_add(&bus, (struct bus_sink){ BUS_ALL, on_rec, NULL, &a }), 0);
	assert_int_equal(bus_add(&bus, (struct bus_sink){ BUS_ALL, on_rec, NULL, &a }), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(by_type_in_order),
		cmocka_unit_test(taken_hides_it),
		cmocka_unit_test(first_error_sticks),
		cmocka_unit_test(full_bus),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
