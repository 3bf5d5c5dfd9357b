/* test_steps.c - model/steps.c: step boundaries, schedules. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "steps.h"

static void test_label_match(void **state)
{
	(void)state;
	/* default: every optimizer's step scope */
	assert_true(steps_label_match(NULL, "Optimizer.step#SGD.step"));
	assert_true(steps_label_match(NULL, "Optimizer.step#AdamW.step"));
	assert_false(steps_label_match(NULL, "Optimizer.zero_grad#SGD.zero_grad"));
	assert_false(steps_label_match(NULL, NULL));
	/* a label: itself, or itself then '#' */
	assert_true(steps_label_match("train_step", "train_step"));
	assert_true(steps_label_match("train_step", "train_step#0"));
	assert_false(steps_label_match("train_step", "train_steps"));
	assert_true(steps_label_match("Optimizer.step#SGD.step", "Optimizer.step#SGD.step"));
	assert_false(steps_label_match("Optimizer.step#SGD.step", "Optimizer.step#AdamW.step"));
}

static void test_schedule_parse(void **state)
{
	struct step_schedule s;
	const char *bad;

	(void)state;
	assert_int_equal(steps_schedule_parse("skip_first=1,wait=2,warmup=3,active=4,repeat=5", &s, &bad), 0);
	assert_int_equal(s.skip_first, 1);
	assert_int_equal(s.wait, 2);
	assert_int_equal(s.warmup, 3);
	assert_int_equal(s.active, 4);
	assert_int_equal(s.repeat, 5);
	assert_true(s.set);
	assert_null(bad);
	/* torch.profiler.schedule's defaults for the rest: active 1, repeat 0 */
	assert_int_equal(steps_schedule_parse("wait=1", &s, &bad), 0);
	assert_int_equal(s.active, 1);
	assert_int_equal(s.repeat, 0);
	assert_int_equal(steps_schedule_parse("active=0", &s, &bad), -EINVAL);
	assert_int_equal(steps_schedule_parse("wait=1,bogus=2", &s, &bad), -EINVAL);
	assert_string_equal(bad, "bogus=2");
	assert_int_equal(steps_schedule_parse("wait=x", &s, &bad), -EINVAL);
	assert_int_equal(steps_schedule_parse("wait=1,", &s, &bad), -EINVAL);
	assert_int_equal(steps_schedule_parse("", &s, &bad), -EINVAL);
	assert_int_equal(steps_schedule_parse("wait", &s, &bad), -EINVAL);
}

/* torch.profiler.schedule(skip_first=1, wait=1, warmup=1, active=3,
 * repeat=2) records steps 3-5 and 8-10 (its docs: skip 1, then cycles of
 * wait + warmup + active = 5 steps); nothing after. */
static void test_cycles(void **state)
{
	struct step_schedule s = { .skip_first = 1, .wait = 1, .warmup = 1, .active = 3,
				   .repeat = 2, .set = true };
	uint32_t first, count;

	(void)state;
	assert_true(steps_cycle(&s, 0, &first, &count));
	assert_int_equal(first, 3);
	assert_int_equal(count, 3);
	assert_true(steps_cycle(&s, 1, &first, &count));
	assert_int_equal(first, 8);
	assert_false(steps_cycle(&s, 2, &first, &count));
	/* step 10 ends at boundary 11: 12 boundaries (0..11) */
	assert_int_equal(steps_bounds_needed(&s), 12);
	/* --steps 4: active=4, repeat=1 -> steps 0-3, boundaries 0..4 */
	s = (struct step_schedule){ .active = 4, .repeat = 1, .set = true };
	assert_int_equal(steps_bounds_needed(&s), 5);
	/* repeat 0: no end */
	s.repeat = 0;
	assert_int_equal(steps_bounds_needed(&s), 0);
	assert_true(steps_cycle(&s, 1000, &first, &count));
	assert_int_equal(first, 4000);
}

static struct rec_op exit_rec(uint32_t pid, uint32_t tid, uint64_t t, uint32_t id)
{
	struct rec_op r;

	memset(&r, 0, sizeof(r));
	r.h.type = REC_OP_EXIT;
	r.h.size = sizeof(r);
	r.h.tid = tid;
	r.h.ts_ns = t;
	r.pid = pid;
	r.op_id = id;
	r.flags = OPF_SCOPE;
	return r;
}

/* --inproc: names come from the agent's name table (steps_watch_name),
 * records as REC_OP_EXIT with the agent's depth */
static void test_watch_names(void **state)
{
	struct steps_watch w = { .label = NULL };
	const uint32_t adam = TBPF_SCOPE_ID_BASE | 0x1234, op = TBPF_INPROC_ID_BASE | 0x1234;
	struct rec_op r;

	(void)state;
	assert_int_equal(steps_watch_name(&w, adam, "Optimizer.step#AdamW.step"), 0);
	/* an op (not a scope) of the same name is no boundary */
	assert_int_equal(steps_watch_name(&w, op, "Optimizer.step#AdamW.step"), 0);
	assert_int_equal(steps_watch_name(&w, TBPF_SCOPE_ID_BASE | 5, "forward"), 0);
	assert_int_equal(w.nids, 1);
	for (int i = 0; i < 4; i++) {
		r = exit_rec(7, 7, 100 + 10 * i, adam);
		assert_int_equal(steps_watch_feed(&w, &r.h, sizeof(r)), 0);
		r = exit_rec(7, 7, 101 + 10 * i, op);
		r.flags = 0;
		assert_int_equal(steps_watch_feed(&w, &r.h, sizeof(r)), 0);
	}
	assert_int_equal(steps_watch_count(&w, 7), 4);
	steps_watch_free(&w);
}

static void test_watch(void **state)
{
	struct steps_watch w = { .label = NULL };
	struct rec_scope_name sn;
	struct rec_op r;
	const uint32_t sgd = TBPF_SCOPE_ID_BASE | 7, zero = TBPF_SCOPE_ID_BASE | 9;
	uint64_t b, e;

	(void)state;
	memset(&sn, 0, sizeof(sn));
	sn.h.type = REC_SCOPE_NAME;
	sn.h.size = sizeof(sn);
	sn.scope_id = sgd;
	strcpy(sn.name, "Optimizer.step#SGD.step");
	assert_int_equal(steps_watch_feed(&w, &sn.h, sizeof(sn)), 0);
	sn.scope_id = zero;
	strcpy(sn.name, "Optimizer.zero_grad#SGD.zero_grad");
	assert_int_equal(steps_watch_feed(&w, &sn.h, sizeof(sn)), 0);
	for (int i = 0; i < 3; i++) {
		r = exit_rec(10, 10, 100 + 10 * i, zero);        /* not a boundary */
		steps_watch_feed(&w, &r.h, sizeof(r));
		r = exit_rec(10, 10, 105 + 10 * i, sgd);
		steps_watch_feed(&w, &r.h, sizeof(r));
		r = exit_rec(10, 11, 106 + 10 * i, sgd);         /* other thread: ignored */
		steps_watch_feed(&w, &r.h, sizeof(r));
		r = exit_rec(20, 20, 107 + 10 * i, sgd);         /* other process */
		steps_watch_feed(&w, &r.h, sizeof(r));
	}
	r = exit_rec(10, 10, 200, TBPF_SCOPE_ID_BASE | 8);      /* unnamed scope */
	steps_watch_feed(&w, &r.h, sizeof(r));
	assert_int_equal(steps_watch_count(&w, 10), 3);
	assert_int_equal(steps_watch_count(&w, 20), 3);
	assert_int_equal(steps_watch_count(&w, 30), 0);
	/* 3 boundaries: 2 whole steps */
	const struct step_proc *p = steps_proc(&w.seen, 10);
	assert_non_null(p);
	assert_true(steps_range(p, 0, &b, &e));
	assert_int_equal(b, 105);
	assert_int_equal(e, 115);
	assert_true(steps_range(p, 1, &b, &e));
	assert_int_equal(b, 115);
	assert_int_equal(e, 125);
	assert_false(steps_range(p, 2, &b, &e));
	assert_false(steps_range(NULL, 0, &b, &e));
	steps_watch_free(&w);
}

/* Step stats from slices: a step of 100 ns with outermost slices [110,
 * 130) and [150, 170) (a child inside), a scope, another thread's op. */
static void test_stats(void **state)
{
	struct steps st = { 0 };
	struct step_stats ss;
	struct step_schedule sched = { .skip_first = 1, .wait = 0, .warmup = 1, .active = 1,
				       .repeat = 0, .set = true };

	(void)state;
	assert_int_equal(steps_add(&st, 5, 5, 100), 0);
	assert_int_equal(steps_add(&st, 5, 5, 200), 0);
	assert_int_equal(steps_add(&st, 5, 5, 300), 0);
	assert_int_equal(step_stats_init(&ss, &st), 0);
	assert_int_equal(ss.n, 2);
	step_stats_add(&ss, 5, 5, 1, 0, 110, 130);
	step_stats_add(&ss, 5, 5, 2, 1, 155, 160);                       /* child */
	step_stats_add(&ss, 5, 5, TBPF_SCOPE_ID_BASE | 3, 0, 150, 170);  /* scope */
	step_stats_add(&ss, 5, 6, 1, 0, 120, 140);                       /* other thread */
	step_stats_add(&ss, 5, 5, 1, 0, 90, 99);                         /* before step 0 */
	step_stats_add(&ss, 5, 5, 1, 0, 250, 260);                       /* step 1 */
	step_stats_finish(&ss);
	assert_int_equal(ss.v[0].k, 0);
	assert_int_equal(ss.v[0].dur_ns, 100);
	assert_int_equal(ss.v[0].ops, 3);          /* 1, 2, the other thread's; not the scope */
	assert_int_equal(ss.v[0].op_ns, 40);       /* [110,130) + [150,170) */
	assert_int_equal(ss.v[0].gap_ns, 60);      /* 10 + 20 + 30 */
	assert_int_equal(ss.v[0].max_gap_ns, 30);
	assert_int_equal(ss.v[1].ops, 1);
	assert_int_equal(ss.v[1].op_ns, 10);
	assert_int_equal(ss.v[1].gap_ns, 90);
	/* skip_first=1, warmup=1, active=1: steps 2, 4, ... are recorded */
	assert_false(steps_is_active(&sched, 0));
	assert_false(steps_is_active(&sched, 1));
	assert_true(steps_is_active(&sched, 2));
	assert_false(steps_is_active(&sched, 3));
	assert_true(steps_is_active(&sched, 4));
	step_stats_keep_active(&ss, &sched, NULL);
	assert_int_equal(ss.n, 0);
	step_stats_free(&ss);
	steps_free(&st);
}

/* A boundary scope nested in a user scope (record_function("train_step")
 * around the optimizer): the step ends where the outermost frame of that
 * thread ends, not inside it; a boundary at depth 0 ends it at once;
 * other threads' exits do not end a pending step. */
static struct rec_op nest_exit(uint32_t pid, uint32_t tid, uint16_t depth)
{
	struct rec_op o = { .h = { .type = REC_OP_EXIT, .size = sizeof(o), .tid = tid },
			    .pid = pid, .op_id = 1, .depth = depth };
	return o;
}

/* The table's window: a time is in an active step of its
 * process, steps numbered from the first boundary; before the first and
 * from the last boundary on, in none; another process, its own steps. */
static void test_window(void **state)
{
	struct steps st = { 0 };
	struct step_schedule s = { .wait = 1, .warmup = 1, .active = 2, .repeat = 1, .set = true };

	(void)state;
	for (uint64_t t = 100; t <= 600; t += 100)   /* steps 0..4: [100,200) ... [500,600) */
		assert_int_equal(steps_add(&st, 7, 7, t), 0);
	assert_int_equal(steps_add(&st, 8, 8, 1000), 0);
	assert_int_equal(steps_add(&st, 8, 8, 2000), 0);
	assert_false(steps_window_has(&st, &s, 7, 99));    /* before boundary 0 */
	assert_false(steps_window_has(&st, &s, 7, 150));   /* step 0: wait */
	assert_false(steps_window_has(&st, &s, 7, 299));   /* step 1: warmup */
	assert_true(steps_window_has(&st, &s, 7, 300));    /* step 2: active */
	assert_true(steps_window_has(&st, &s, 7, 499));    /* step 3: active */
	assert_false(steps_window_has(&st, &s, 7, 500));   /* step 4: after the cycle */
	assert_false(steps_window_has(&st, &s, 7, 600));   /* from the last boundary on */
	assert_false(steps_window_has(&st, &s, 8, 1500));  /* pid 8's step 0: wait */
	assert_false(steps_window_has(&st, &s, 9, 300));   /* no boundaries */
	s = (struct step_schedule){ .active = 1, .repeat = 1, .set = true };
	assert_true(steps_window_has(&st, &s, 8, 1999));
	steps_free(&st);
}

/* A repeating schedule: schedule(wait=1, warmup=1, active=2,
 * repeat=2) records steps 2-3 and 6-7; torch.profiler's key_averages()
 * after the run is the last cycle's, so the window is steps 6-7 for a
 * process that showed them, 2-3 for one that stopped before step 6, the
 * whole step 6 of one stopped inside the second cycle, and nothing for one
 * with no whole active step.  The per-step stats keep the same steps. */
static void test_last_cycle(void **state)
{
	struct steps st = { 0 };
	struct step_schedule s = { .wait = 1, .warmup = 1, .active = 2, .repeat = 2, .set = true };
	struct step_stats ss = { 0 };

	(void)state;
	for (uint64_t t = 100; t <= 1000; t += 100)   /* pid 7: steps 0..8 */
		assert_int_equal(steps_add(&st, 7, 7, t), 0);
	for (uint64_t t = 100; t <= 600; t += 100)    /* pid 8: steps 0..4 */
		assert_int_equal(steps_add(&st, 8, 8, t), 0);
	for (uint64_t t = 100; t <= 800; t += 100)    /* pid 9: steps 0..6 */
		assert_int_equal(steps_add(&st, 9, 9, t), 0);
	for (uint64_t t = 100; t <= 300; t += 100)    /* pid 10: steps 0..1 */
		assert_int_equal(steps_add(&st, 10, 10, t), 0);
	assert_true(steps_window_has(&st, &s, 7, 350));     /* before: every cycle */
	steps_last_cycle(&st, &s);
	assert_false(steps_window_has(&st, &s, 7, 350));    /* step 2: first cycle */
	assert_false(steps_window_has(&st, &s, 7, 450));    /* step 3 */
	assert_false(steps_window_has(&st, &s, 7, 650));    /* step 5: warmup */
	assert_true(steps_window_has(&st, &s, 7, 700));     /* step 6 */
	assert_true(steps_window_has(&st, &s, 7, 899));     /* step 7 */
	assert_false(steps_window_has(&st, &s, 7, 950));    /* step 8: after */
	assert_true(steps_window_has(&st, &s, 8, 350));     /* pid 8: its only cycle */
	assert_true(steps_window_has(&st, &s, 8, 450));
	assert_true(steps_window_has(&st, &s, 9, 750));     /* pid 9: step 6 of 6-7 */
	assert_false(steps_window_has(&st, &s, 9, 350));
	assert_false(steps_window_has(&st, &s, 10, 150));   /* pid 10: none active */
	assert_false(steps_window_has(&st, &s, 10, 250));
	assert_int_equal(step_stats_init(&ss, &st), 0);
	step_stats_finish(&ss);
	step_stats_keep_active(&ss, &s, &st);
	uint32_t want[][2] = { { 7, 6 }, { 7, 7 }, { 8, 2 }, { 8, 3 }, { 9, 6 } };
	assert_int_equal(ss.n, 5);
	for (size_t i = 0; i < ss.n; i++) {
		assert_int_equal(ss.v[i].pid, want[i][0]);
		assert_int_equal(ss.v[i].k, want[i][1]);
	}
	step_stats_free(&ss);
	steps_free(&st);
}

static void test_nested_boundary(void **state)
{
	struct steps st = { 0 };
	struct rec_op o;

	(void)state;
	o = nest_exit(5, 5, 1);                    /* Optimizer.step#, inside train_step */
	assert_int_equal(steps_exit(&st, &o, 100, true), 0);
	assert_null(steps_proc(&st, 5));
	o = nest_exit(5, 6, 0);                    /* another thread's outermost op */
	assert_int_equal(steps_exit(&st, &o, 110, false), 0);
	assert_null(steps_proc(&st, 5));
	o = nest_exit(5, 5, 1);                    /* a sibling op, still nested */
	assert_int_equal(steps_exit(&st, &o, 120, false), 0);
	assert_null(steps_proc(&st, 5));
	o = nest_exit(5, 5, 0);                    /* train_step ends: the boundary */
	assert_int_equal(steps_exit(&st, &o, 130, false), 0);
	assert_non_null(steps_proc(&st, 5));
	assert_int_equal(steps_proc(&st, 5)->n, 1);
	assert_int_equal(steps_proc(&st, 5)->t[0], 130);
	o = nest_exit(5, 5, 0);                    /* an outermost op, no step pending */
	assert_int_equal(steps_exit(&st, &o, 140, false), 0);
	assert_int_equal(steps_proc(&st, 5)->n, 1);
	o = nest_exit(5, 5, 0);                    /* a boundary at depth 0 */
	assert_int_equal(steps_exit(&st, &o, 150, true), 0);
	assert_int_equal(steps_proc(&st, 5)->n, 2);
	assert_int_equal(steps_proc(&st, 5)->t[1], 150);
	/* a frame that never closes: nested boundaries end at their own time
	 * when the next one comes, and steps_flush adds the last */
	o = nest_exit(5, 5, 2);
	assert_int_equal(steps_exit(&st, &o, 200, true), 0);
	assert_int_equal(steps_proc(&st, 5)->n, 2);
	assert_int_equal(steps_exit(&st, &o, 300, true), 0);
	assert_int_equal(steps_proc(&st, 5)->n, 3);
	assert_int_equal(steps_proc(&st, 5)->t[2], 200);
	assert_int_equal(steps_flush(&st), 0);
	assert_int_equal(steps_proc(&st, 5)->n, 4);
	assert_int_equal(steps_proc(&st, 5)->t[3], 300);
	steps_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label_match),
		cmocka_unit_test(test_schedule_parse),
		cmocka_unit_test(test_cycles),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_nested_boundary),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_last_cycle),
		cmocka_unit_test(test_watch_names),
	};
	return cmocka_run_group_tests_name("steps", tests, NULL, NULL);
}
