/* test_validate.c - option values checked before a run (validate.c): sort
 * keys, --push URLs, --listen addresses, output files and directories
 * tried in a scratch directory, pids; and `tbpf run`'s command lookup
 * (cmd_run.c: run_command_check) against files made here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include "cmd_run.h"
#include "http.h"
#include "validate.h"

static char dir[64];

/* fn(arg) must fail with *why containing want (and nothing set on success) */
#define REJECT(call, want) do { \
		char *why = NULL; \
		assert_int_not_equal((call), 0); \
		assert_non_null(why); \
		if (!strstr(why, want)) \
			fail_msg("'%s' does not say '%s'", why, want); \
		free(why); \
	} while (0)
#define ACCEPT(call) do { \
		char *why = NULL; \
		assert_int_equal((call), 0); \
		assert_null(why); \
	} while (0)

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/tbpf-test-validate-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static char *in_dir(const char *name)
{
	static char p[4][128];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static void sort_keys(void **state)
{
	/* torch.profiler's sort_by names for the table */
	ACCEPT(validate_sort("self_cpu_time_total", false, &why));
	ACCEPT(validate_sort("cpu_time_total", false, &why));
	ACCEPT(validate_sort("count", false, &why));
	ACCEPT(validate_sort("self_cpu_memory_usage", false, &why));
	REJECT(validate_sort("bogus", false, &why), "unknown --sort 'bogus' (self_cpu_time_total,");
	REJECT(validate_sort("", false, &why), "unknown --sort ''");
	/* the tree's columns differ: model only there, max_cpu_time only in the table */
	ACCEPT(validate_sort("model", true, &why));
	REJECT(validate_sort("model", false, &why), "unknown --sort 'model'");
	REJECT(validate_sort("max_cpu_time", true, &why), "not a tree column");
}

static void urls(void **state)
{
	ACCEPT(validate_url("http://pyroscope:4040", &why));
	ACCEPT(validate_url("https://pyro.example.com/base/", &why));
	ACCEPT(validate_url("HTTP://10.0.0.1", &why));
	ACCEPT(validate_url("http://[::1]:4040/x", &why));
	REJECT(validate_url("notaurl", &why), "invalid --push 'notaurl'");
	REJECT(validate_url("ftp://host", &why), "invalid --push");
	REJECT(validate_url("http://", &why), "invalid --push");
	REJECT(validate_url("http://host:0", &why), "invalid --push");
	REJECT(validate_url("http://host:65536", &why), "invalid --push");
	REJECT(validate_url("http://host:port", &why), "invalid --push");
	REJECT(validate_url("http://ho st", &why), "invalid --push");
	REJECT(validate_url("http://host/a b", &why), "invalid --push");
	REJECT(validate_url("http://[zz]:1", &why), "invalid --push");
}

static void listen_addrs(void **state)
{
	ACCEPT(validate_listen("127.0.0.1:9464", &why));
	ACCEPT(validate_listen("0.0.0.0:0", &why));
	ACCEPT(validate_listen(":9464", &why));
	ACCEPT(validate_listen("none", &why));
	ACCEPT(validate_listen("", &why));
	REJECT(validate_listen("nonsense", &why), "invalid --listen 'nonsense'");
	REJECT(validate_listen("127.0.0.1", &why), "invalid --listen");
	REJECT(validate_listen("127.0.0.1:99999", &why), "invalid --listen");
	REJECT(validate_listen("localhost:9464", &why), "invalid --listen");
	REJECT(validate_listen("1.2.3.4:", &why), "invalid --listen");
	REJECT(validate_listen("1.2.3.4:-1", &why), "invalid --listen");
	/* the address the daemon then listens on, from the same parser */
	struct sockaddr_in sin;
	assert_int_equal(http_listen_addr("127.0.0.1:9464", &sin), 0);
	assert_int_equal(ntohs(sin.sin_port), 9464);
	assert_int_equal(ntohl(sin.sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(http_listen_addr(":8080", &sin), 0);
	assert_int_equal(ntohs(sin.sin_port), 8080);
	assert_int_equal(ntohl(sin.sin_addr.s_addr), INADDR_ANY);
	assert_int_equal(http_listen_addr("none", &sin), -EINVAL);
}

/* nothing but what the test made is left in dir */
static int entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += e->d_name[0] != '.' || !strncmp(e->d_name, ".tbpf", 5);
	closedir(d);
	return n;
}

static void out_files(void **state)
{
	FILE *f;

	ACCEPT(validate_out_file("-o", "-", &why));
	ACCEPT(validate_out_file("-o", in_dir("new.json"), &why));
	assert_int_equal(entries(), 0);   /* tried, not made */
	f = fopen(in_dir("old.json"), "w");
	fputs("keep", f);
	fclose(f);
	ACCEPT(validate_out_file("-o", in_dir("old.json"), &why));
	f = fopen(in_dir("old.json"), "r");
	char buf[8] = "";
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "keep");   /* not truncated */
	REJECT(validate_out_file("-o", dir, &why), "is a directory");
	REJECT(validate_out_file("-o", in_dir("no/such/x.json"), &why), "No such file or directory");
	REJECT(validate_out_file("--record", in_dir("old.json/x.tbpf"), &why), "Not a directory");
	REJECT(validate_out_file("-o", "", &why), "-o needs a file name");
	/* a pseudo file system that takes no new file, even from root */
	REJECT(validate_out_file("--record", "/proc/tbpf-test.tbpf", &why), "cannot write in /proc");
	assert_int_equal(entries(), 1);
}

static void out_dirs(void **state)
{
	ACCEPT(validate_out_dir("--tensorboard", dir, true, &why));
	ACCEPT(validate_out_dir("--tensorboard", in_dir("runs/job/a"), true, &why));
	assert_int_equal(entries(), 0);
	/* --pprof-dir is not made */
	REJECT(validate_out_dir("--pprof-dir", in_dir("missing"), false, &why),
	       "No such file or directory");
	fclose(fopen(in_dir("file"), "w"));
	REJECT(validate_out_dir("--pprof-dir", in_dir("file"), false, &why), "is not a directory");
	REJECT(validate_out_dir("--tensorboard", in_dir("file/sub"), true, &why), "Not a directory");
	REJECT(validate_out_dir("--tensorboard", "/proc/tbpf-test/x", true, &why),
	       "cannot write in /proc");
	REJECT(validate_out_dir("--tensorboard", "", true, &why), "needs a directory");
}

static void pids(void **state)
{
	pid_t child = fork();

	if (!child)
		_exit(0);
	waitpid(child, NULL, 0);   /* reaped: its pid names no process now */
	ACCEPT(validate_pid(getpid(), &why));
	REJECT(validate_pid(child, &why), "no process with pid");
}

static void command_lookup(void **state)
{
	char path[256];
	FILE *f;

	ACCEPT(run_command_check("sh", "/usr/bin:/bin", &why));
	ACCEPT(run_command_check("/bin/sh", NULL, &why));
	{
		char *why = NULL;

		assert_int_equal(run_command_check("tbpf-no-such-cmd", "/bin", &why), 127);
		assert_string_equal(why, "tbpf-no-such-cmd: command not found");
		free(why);
		why = NULL;
		assert_int_equal(run_command_check("/nonexistent", NULL, &why), 127);
		assert_string_equal(why, "/nonexistent: No such file or directory");
		free(why);
		why = NULL;
		assert_int_equal(run_command_check(dir, NULL, &why), 126);
		assert_string_equal(strchr(why, ':'), ": Is a directory");
		free(why);
		why = NULL;
		/* found on the path but not executable: 126, unless a later
		 * entry holds one that is (execvp's order) */
		f = fopen(in_dir("script"), "w");
		fputs("#!/bin/sh\n", f);
		fclose(f);
		assert_int_equal(run_command_check("script", dir, &why), 126);
		assert_string_equal(why, "script: Permission denied");
		free(why);
		why = NULL;
		mkdir(in_dir("bin"), 0755);
		f = fopen(in_dir("bin/script"), "w");
		fclose(f);
		chmod(in_dir("bin/script"), 0755);
		snprintf(path, sizeof(path), "%s:%s", dir, in_dir("bin"));
		assert_int_equal(run_command_check("script", path, &why), 0);
		assert_null(why);
		assert_int_equal(run_command_check("", NULL, &why), 127);
		free(why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sort_keys),
		cmocka_unit_test(urls),
		cmocka_unit_test(listen_addrs),
		cmocka_unit_test_setup_teardown(out_files, setup, teardown),
		cmocka_unit_test_setup_teardown(out_dirs, setup, teardown),
		cmocka_unit_test(pids),
		cmocka_unit_test_setup_teardown(command_lookup, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
