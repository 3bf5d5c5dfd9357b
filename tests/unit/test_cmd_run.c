/* test_cmd_run.c - `tbpf run`: the child is held before exec until
 * released, gets CUDA_INJECTION64_PATH, and exit codes come back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_run.h"

static char out[64];

static int setup(void **state)
{
	snprintf(out, sizeof(out), "/tmp/tbpf_cmd_run_%d", getpid());
	unlink(out);
	return 0;
}

static int teardown(void **state)
{
	unlink(out);
	return 0;
}

static char *slurp(const char *path)
{
	static char buf[512];
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* The held child is still this test binary (not yet exec'd). */
static int exe_is_self(pid_t pid)
{
	char a[PATH_MAX], b[PATH_MAX], p[64];
	snprintf(p, sizeof(p), "/proc/%d/exe", pid);
	ssize_t n = readlink(p, a, sizeof(a) - 1), m = readlink("/proc/self/exe", b, sizeof(b) - 1);
	if (n <= 0 || m <= 0)
		return -1;
	a[n] = b[m] = 0;
	return !strcmp(a, b);
}

static void test_held_then_released(void **state)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "printf '%%s|%%s' \"$CUDA_INJECTION64_PATH\" "
		 "\"$TBPF_AGENT_AUTOSTART\" > %s", out);
	char *argv[] = { "sh", "-c", cmd, NULL };
	struct run_child c;
	assert_int_equal(run_child_start(argv, "/opt/x/libtbpf_agent.so", &c), 0);
	usleep(200000);
	assert_int_equal(access(out, F_OK), -1);   /* not run yet */
	assert_int_equal(exe_is_self(c.pid), 1);   /* held before exec */
	assert_int_equal(run_child_release(&c), 0);
	assert_int_equal(run_child_wait(&c), 0);
	assert_string_equal(slurp(out), "/opt/x/libtbpf_agent.so|1");
}

/* The command inherits the owner channel's read end (TBPF_AGENT_OWNER_CHAN
 * = FD:INODE), read-only, and no write end of it: the only one is tbpf's,
 * closed once run_child_wait is called. */
static void test_owner_channel(void **state)
{
	char cmd[512];
	unsigned long long ino, ino2;
	int fd, n, acc;
	snprintf(cmd, sizeof(cmd),
		 "c=$TBPF_AGENT_OWNER_CHAN; fd=${c%%%%:*}; n=0; for f in /proc/$$/fd/*; do "
		 "[ \"$(readlink $f)\" = \"pipe:[${c#*:}]\" ] && n=$((n+1)); done; "
		 "printf '%%s %%s %%s %%s' \"$c\" $n $(sed -n 's/^flags:[[:space:]]*//p' "
		 "/proc/$$/fdinfo/$fd) $(stat -L -c %%i /proc/$$/fd/$fd) > %s", out);
	char *argv[] = { "sh", "-c", cmd, NULL };
	struct run_child c;
	assert_int_equal(run_child_start(argv, "/opt/x/libtbpf_agent.so", &c), 0);
	assert_true(c.owner_fd >= 0);
	assert_int_equal(run_child_release(&c), 0);
	assert_int_equal(run_child_wait(&c), 0);
	assert_int_equal(c.owner_fd, -1);
	char *got = slurp(out);
	assert_non_null(got);
	assert_int_equal(sscanf(got, "%d:%llu %d %o %llu", &fd, &ino, &n, &acc, &ino2), 5);
	assert_int_equal(ino, ino2);   /* the fd named is that pipe */
	assert_int_equal(n, 1);        /* its read end only */
	assert_int_equal(acc & 3, 0);  /* O_RDONLY */
}

static void test_never_released(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "touch %s", out);
	char *argv[] = { "sh", "-c", cmd, NULL };
	struct run_child c;
	assert_int_equal(run_child_start(argv, NULL, &c), 0);
	assert_int_equal(run_child_wait(&c), 125);
	assert_int_equal(access(out, F_OK), -1);
}

static int seen_pid;
static int attach_ok(pid_t pid, void *ctx)
{
	seen_pid = exe_is_self(pid) == 1 ? pid : -1;
	return *(int *)ctx;
}

static void test_cmd_run_codes(void **state)
{
	int rc = 0;
	char *a1[] = { "run", "--no-agent", "--", "sh", "-c", "exit 7", NULL };
	assert_int_equal(cmd_run_with(6, a1, attach_ok, &rc), 7);
	assert_true(seen_pid > 0);
	char *a2[] = { "run", "--no-agent", "sh", "-c", "kill -9 $$", NULL };
	assert_int_equal(cmd_run(5, a2), 128 + 9);
	char *a3[] = { "run", "--no-agent", "--", "/nonexistent/tbpf-cmd", NULL };
	assert_int_equal(cmd_run(4, a3), 127);
	char *a4[] = { "run", NULL };
	assert_int_equal(cmd_run(1, a4), 2);
}

static void test_attach_failure_kills(void **state)
{
	int rc = 1;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "touch %s", out);
	char *argv[] = { "run", "--no-agent", "--", "sh", "-c", cmd, NULL };
	assert_int_equal(cmd_run_with(6, argv, attach_ok, &rc), 1);
	assert_int_equal(access(out, F_OK), -1);
}

static void test_existing_injection_refused(void **state)
{
	char *argv[] = { "run", "--", "true", NULL };
	setenv("CUDA_INJECTION64_PATH", "/other/tool.so", 1);
	assert_int_equal(cmd_run(3, argv), 2);
	unsetenv("CUDA_INJECTION64_PATH");
}

static void test_agent_path_env(void **state)
{
	setenv("TBPF_AGENT_PATH", "/etc/../etc/hostname", 1);
	char *p = run_agent_path();
	assert_non_null(p);
	assert_string_equal(p, "/etc/hostname");
	free(p);
	unsetenv("TBPF_AGENT_PATH");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_held_then_released, setup, teardown),
		cmocka_unit_test_setup_teardown(test_never_released, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_channel, setup, teardown),
		cmocka_unit_test(test_cmd_run_codes),
		cmocka_unit_test_setup_teardown(test_attach_failure_kills, setup, teardown),
		cmocka_unit_test(test_existing_injection_refused),
		cmocka_unit_test(test_agent_path_env),
	};
	return cmocka_run_group_tests_name("cmd_run", tests, NULL, NULL);
}
