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
#include <unistd.h>
#include <sys/stat.h>
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

/* the selection part, which the daemon asks too */
static void selection_only(void **state)
{
	struct session_select sel = { .pids = one_pid, .npids = 1 };

	assert_null(recorder_selection_only(&sel, false));
	sel.cgroup = "/sys/fs/cgroup/job";
	assert_non_null(strstr(recorder_selection_only(&sel, false), "--cgroup"));
	sel = (struct session_select){ 0 };
	assert_non_null(strstr(recorder_selection_only(&sel, false), "system-wide"));
	assert_null(recorder_selection_only(&sel, true));
}

/* each option the in-process recorder cannot serve, with its reason */
static void uprobes_only(void **state)
{
	struct live_opts o = with_pid();

	assert_null(recorder_uprobes_only(&o, false, false));
	o.record_shapes = o.with_flops = true;
	o.stack_n = 5;
	o.steps.sched.set = true;
	assert_null(recorder_uprobes_only(&o, false, false));   /* the agent serves these */
	o = with_pid();
	o.sel.npids = 0;
	assert_non_null(strstr(recorder_uprobes_only(&o, false, false), "system-wide"));
	assert_null(recorder_uprobes_only(&o, true, true));    /* tbpf run names its command */
	o.sel.comm = "python3";   /* ... but no filter is served in-process */
	assert_non_null(strstr(recorder_uprobes_only(&o, true, true), "--comm"));
	o = with_pid();
	o.redispatch = true;
	assert_non_null(strstr(recorder_uprobes_only(&o, false, false), "--redispatch"));
	o = with_pid();
	o.memory = true;
	assert_non_null(strstr(recorder_uprobes_only(&o, false, false), "--profile-memory"));
	o = with_pid();
	o.sel.exits = EXITS_INFER;
	assert_non_null(strstr(recorder_uprobes_only(&o, false, false), "--exits"));
	o = with_pid();
	o.inject = true;
	assert_null(recorder_uprobes_only(&o, false, false));
	o.cuda = false;
	assert_non_null(strstr(recorder_uprobes_only(&o, false, false), "--no-cuda"));
}

static void resolves(void **state)
{
	struct live_opts o = with_pid();
	const char *why = NULL;

	unsetenv("TBPF_RECORDER");
	assert_int_equal(recorder_resolve(&o, NULL, &why), 0);
	assert_true(o.inproc && o.recorder_auto);
	o = with_pid();
	o.memory = true;
	assert_int_equal(recorder_resolve(&o, NULL, &why), 0);
	assert_false(o.inproc || o.recorder_auto);
	o = with_pid();
	o.recorder = RECORDER_UPROBES;
	assert_int_equal(recorder_resolve(&o, NULL, &why), 0);
	assert_false(o.inproc || o.recorder_auto);
	o = with_pid();
	o.recorder = RECORDER_INPROC;
	assert_int_equal(recorder_resolve(&o, NULL, &why), 0);
	assert_true(o.inproc);
	assert_false(o.recorder_auto);   /* named: no fallback on ptrace */
	o.memory = true;
	assert_int_equal(recorder_resolve(&o, NULL, &why), -EINVAL);
	assert_non_null(strstr(why, "drop --inproc"));
	/* the environment pins the uprobe recorder, never the other */
	o = with_pid();
	setenv("TBPF_RECORDER", "uprobes", 1);
	assert_int_equal(recorder_resolve(&o, NULL, &why), 0);
	assert_false(o.inproc);
	o = with_pid();
	o.recorder = RECORDER_INPROC;   /* the command line wins */
	assert_int_equal(recorder_resolve(&o, NULL, &why), 0);
	assert_true(o.inproc);
	o = with_pid();
	setenv("TBPF_RECORDER", "inproc", 1);
	assert_int_equal(recorder_resolve(&o, NULL, &why), -EINVAL);
	setenv("TBPF_RECORDER", "nonsense", 1);
	assert_int_equal(recorder_resolve(&o, NULL, &why), -EINVAL);
	assert_non_null(strstr(why, "TBPF_RECORDER"));
	unsetenv("TBPF_RECORDER");
}

/* tbpf run: a Python program, or the uprobe recorder */
static void run_commands(void **state)
{
	struct live_opts o = with_pid();
	char dir[] = "/tmp/test_recorder.XXXXXX", file[64];
	FILE *f;

	o.sel.npids = 0;
	assert_non_null(strstr(recorder_uprobes_only(&o, true, false), "no Python program"));
	assert_true(recorder_shebang_is_python("#!/usr/bin/env python3\n"));
	assert_true(recorder_shebang_is_python("#!/opt/venv/bin/python3.11 -u\nimport torch"));
	assert_false(recorder_shebang_is_python("#!/bin/sh\npython3 train.py"));
	assert_false(recorder_shebang_is_python("import torch  # python\n"));
	assert_true(recorder_cmd_is_python("python3", NULL));
	assert_true(recorder_cmd_is_python("/usr/bin/python3.11", NULL));
	assert_non_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/torchrun", dir);
	assert_non_null(f = fopen(file, "w"));
	fputs("#!/usr/bin/python3\nimport sys\n", f);
	fclose(f);
	assert_int_equal(chmod(file, 0755), 0);
	assert_true(recorder_cmd_is_python("torchrun", dir));   /* on path, by its #! */
	assert_true(recorder_cmd_is_python(file, NULL));
	assert_false(recorder_cmd_is_python("torchrun", "/usr/share"));   /* not on that path */
	snprintf(file, sizeof(file), "%s/cuda_app", dir);
	assert_non_null(f = fopen(file, "w"));
	fputs("\x7f" "ELF\2\1\1", f);
	fclose(f);
	assert_int_equal(chmod(file, 0755), 0);
	assert_false(recorder_cmd_is_python("cuda_app", dir));
	unlink(file);
	snprintf(file, sizeof(file), "%s/torchrun", dir);
	unlink(file);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses),
		cmocka_unit_test(selection_only),
		cmocka_unit_test(uprobes_only),
		cmocka_unit_test(resolves),
		cmocka_unit_test(run_commands),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
