/* test_options.c - the options the live command and the daemon share
 * (options.c: select_opt). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "options.h"

static void takes_shared(void **state)
{
	pid_t pids[2];
	struct session_select sel = { .pids = pids };
	char *why = NULL;

	assert_int_equal(select_opt('p', "42", &sel, 2, &why), 1);
	assert_int_equal(sel.npids, 1);
	assert_int_equal(pids[0], 42);
	assert_int_equal(select_opt(OPT_SEL_COMM, "python3", &sel, 2, &why), 1);
	assert_string_equal(sel.comm, "python3");
	assert_int_equal(select_opt(OPT_SEL_CGROUP, "/sys/fs/cgroup/x", &sel, 2, &why), 1);
	assert_string_equal(sel.cgroup, "/sys/fs/cgroup/x");
	assert_int_equal(select_opt(OPT_SEL_EXITS, "infer", &sel, 2, &why), 1);
	assert_int_equal(sel.exits, EXITS_INFER);
	assert_int_equal(select_opt(OPT_SEL_EXITS, "return", &sel, 2, &why), 1);
	assert_int_equal(sel.exits, EXITS_RETURN);
	assert_int_equal(select_opt(OPT_SEL_RING, "8M", &sel, 2, &why), 1);
	assert_int_equal(sel.ring_size, 8u << 20);
	/* not one of them: left to the command */
	assert_int_equal(select_opt('d', "10s", &sel, 2, &why), 0);
	assert_null(why);
}

static void rejects(void **state)
{
	pid_t pids[1];
	struct session_select sel = { .pids = pids };
	char *why = NULL;

	assert_int_equal(select_opt('p', "0", &sel, 1, &why), -EINVAL);
	assert_string_equal(why, "invalid --pid '0'");
	free(why);
	why = NULL;
	assert_int_equal(select_opt('p', "12x", &sel, 1, &why), -EINVAL);
	free(why);
	why = NULL;
	assert_int_equal(select_opt('p', "7", &sel, 1, &why), 1);
	assert_int_equal(select_opt('p', "8", &sel, 1, &why), -EINVAL);   /* full */
	free(why);
	why = NULL;
	assert_int_equal(select_opt(OPT_SEL_EXITS, "sometimes", &sel, 1, &why), -EINVAL);
	assert_string_equal(why, "invalid --exits 'sometimes' (auto, return, infer)");
	free(why);
	why = NULL;
	assert_int_equal(select_opt(OPT_SEL_RING, "1K", &sel, 1, &why), -EINVAL);
	free(why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(takes_shared),
		cmocka_unit_test(rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
