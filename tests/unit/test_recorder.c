/* test_recorder.c - the recorder a live run uses (recorder.c): named,
 * pinned by $TBPF_RECORDER, or chosen from the options asked. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "recorder.h"

static pid_t one_pid[1] = { 42 };

static struct live_opts with_pid(void)
{
	return (struct live_opts){ .sel = { .pids = one_pid, .npids = 1 }, .cuda = true,
				   .python = true };
}

static void parses(void **state)
{
	enum recorder r = RECORDER_INPROC;

	assert_int_equal(recorder_parse("auto", &r), 0);
	assert_int_equal(r, RECORDER_AUTO);
	assert_int_equal(recorder_parse("uprobes", &r), 0);
	assert_int_equal(r, RECORDER_UPROBES);
	assert_int_equal(recorder_parse("inproc", &r), 0);
	assert_int_equal(r, RECORDER_INPROC);
	assert_int_equal(recorder_parse("bpf", &r), -EINVAL);
	assert_int_equal(recorder_parse("", &r), -EINVAL);
	assert_int_equal(recorder_parse(NULL, &r), -EINVAL);
}

/* each option the in-process recorder cannot serve, with its reason */
static void uprobes_only(void **state)
{
	struct live_opts o = with_pid();

	assert_null(recorder_uprobes_only(&o, false));
	o.record_shapes = o.with_flops = true;
	o.stack_n = 5;
	o.steps.sched.set = true;
	assert_null(recorder_uprobes_only(&o, false));   /* the agent serves these */
	o = with_pid();
	o.sel.npids = 0;
	assert_non_null(strstr(recorder_uprobes_only(&o, false), "system-wide"));
	assert_null(recorder_uprobes_only(&o, true));    /* tbpf run names its command */
	o = with_pid();
	o.redispatch = true;
	assert_non_null(strstr(recorder_uprobes_only(&o, false), "--redispatch"));
	o = with_pid();
	o.memory = true;
	assert_non_null(strstr(recorder_uprobes_only(&o, false), "--profile-memory"));
	o = with_pid();
	o.sel.exits = EXITS_INFER;
	assert_non_null(strstr(recorder_uprobes_only(&o, false), "--exits"));
	o = with_pid();
	o.inject = true;
	assert_null(recorder_uprobes_only(&o, false));
	o.cuda = false;
	assert_non_null(strstr(recorder_uprobes_only(&o, false), "--no-cuda"));
}

static void resolves(void **state)
{
	struct live_opts o = with_pid();
	const char *why = NULL;

	unsetenv("TBPF_RECORDER");
	assert_int_equal(recorder_resolve(&o, false, &why), 0);
	assert_true(o.inproc && o.recorder_auto);
	o = with_pid();
	o.memory = true;
	assert_int_equal(recorder_resolve(&o, false, &why), 0);
	assert_false(o.inproc || o.recorder_auto);
	o = with_pid();
	o.recorder = RECORDER_UPROBES;
	assert_int_equal(recorder_resolve(&o, false, &why), 0);
	assert_false(o.inproc || o.recorder_auto);
	o = with_pid();
	o.recorder = RECORDER_INPROC;
	assert_int_equal(recorder_resolve(&o, false, &why), 0);
	assert_true(o.inproc);
	assert_false(o.recorder_auto);   /* named: no fallback on ptrace */
	o.memory = true;
	assert_int_equal(recorder_resolve(&o, false, &why), -EINVAL);
	assert_non_null(strstr(why, "drop --inproc"));
	/* the environment pins the uprobe recorder, never the other */
	o = with_pid();
	setenv("TBPF_RECORDER", "uprobes", 1);
	assert_int_equal(recorder_resolve(&o, false, &why), 0);
	assert_false(o.inproc);
	o = with_pid();
	o.recorder = RECORDER_INPROC;   /* the command line wins */
	assert_int_equal(recorder_resolve(&o, false, &why), 0);
	assert_true(o.inproc);
	o = with_pid();
	setenv("TBPF_RECORDER", "inproc", 1);
	assert_int_equal(recorder_resolve(&o, false, &why), -EINVAL);
	setenv("TBPF_RECORDER", "nonsense", 1);
	assert_int_equal(recorder_resolve(&o, false, &why), -EINVAL);
	assert_non_null(strstr(why, "TBPF_RECORDER"));
	unsetenv("TBPF_RECORDER");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses),
		cmocka_unit_test(uprobes_only),
		cmocka_unit_test(resolves),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
