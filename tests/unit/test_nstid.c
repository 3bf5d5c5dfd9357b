/* test_nstid.c - unit tests of discover/nstid.c: the NSpid line of
 * /proc/PID/task/TID/status (text as the kernel writes it), and the map of
 * a job's namespace tids to host tids read from fixture trees standing in
 * for /proc (tests/fixtures/nstid/README.md): a containerized job, one in
 * tbpf's namespace, a nested namespace, an old kernel; threads that start
 * after the map was read (found at the first unknown tid), tids that are
 * never found (one read, then remembered). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "nstid.h"

static char *fixdir;

static int setup(void **state)
{
	fixdir = tu_repo_path("tests/fixtures/nstid");
	return fixdir ? 0 : -1;
}

static int teardown(void **state)
{
	free(fixdir);
	return 0;
}

static void test_parse(void **state)
{
	uint32_t o = 0, i = 0;

	assert_int_equal(nstid_parse_status("Name:\tpy\nNSpid:\t4107\t7\nNSpgid:\t9\t1\n", &o, &i), 2);
	assert_int_equal(o, 4107);
	assert_int_equal(i, 7);
	assert_int_equal(nstid_parse_status("NSpid:\t5200\n", &o, &i), 1);
	assert_int_equal(o, 5200);
	assert_int_equal(i, 5200);
	assert_int_equal(nstid_parse_status("Pid:\t1\nNSpid:\t6301\t41\t2", &o, &i), 3);   /* no final newline */
	assert_int_equal(o, 6301);
	assert_int_equal(i, 2);
	assert_int_equal(nstid_parse_status("NSpid: 10 3\n", &o, &i), 2);   /* spaces */
	assert_int_equal(i, 3);
	/* NSpgid is another line; no NSpid: 0 */
	assert_int_equal(nstid_parse_status("Name:\tpy\nNSpgid:\t9\t1\n", &o, &i), 0);
	assert_int_equal(nstid_parse_status("", &o, &i), 0);
	/* only at the start of a line */
	assert_int_equal(nstid_parse_status("Name:\tNSpid:\t3\n", &o, &i), 0);
	/* malformed fields */
	assert_int_equal(nstid_parse_status("NSpid:\t12x\t3\n", &o, &i), 0);
	assert_int_equal(nstid_parse_status("NSpid:\t99999999999\n", &o, &i), 0);
	assert_int_equal(nstid_parse_status("NSpid:\t-4\n", &o, &i), 0);
	assert_int_equal(nstid_parse_status("NSpid:\n", &o, &i), 0);
}

static void test_container(void **state)
{
	struct nstid_map m;
	char *root = tu_printf("%s/container", fixdir);

	assert_int_equal(nstid_init(&m, root, 4100), 0);
	assert_true(m.other);
	assert_int_equal(m.n, 3);   /* task/notes is not a thread */
	assert_int_equal(m.reads, 1);
	assert_int_equal(nstid_host(&m, 1), 4100);
	assert_int_equal(nstid_host(&m, 7), 4107);
	assert_int_equal(nstid_host(&m, 12), 4112);
	assert_int_equal(nstid_host(&m, 7), 4107);   /* the cached answer */
	assert_int_equal(nstid_host(&m, 0), 0);      /* no thread */
	/* unknown: read once more, then remembered, left as it is */
	assert_int_equal(nstid_host(&m, 99), 99);
	assert_int_equal(m.reads, 2);
	assert_int_equal(nstid_host(&m, 99), 99);
	assert_int_equal(m.reads, 2);
	assert_int_equal(m.unmapped, 2);
	/* host tids of the job already known: nothing read */
	nstid_seen(&m, 4107);
	nstid_seen(&m, 4112);
	assert_int_equal(m.reads, 2);
	/* a host tid never found: read once */
	nstid_seen(&m, 4999);
	nstid_seen(&m, 4999);
	assert_int_equal(m.reads, 3);
	nstid_free(&m);
	free(root);
}

static void test_identity(void **state)
{
	struct nstid_map m;
	char *root = tu_printf("%s/host", fixdir);

	assert_int_equal(nstid_init(&m, root, 5200), 0);
	assert_false(m.other);
	assert_int_equal(nstid_host(&m, 5200), 5200);
	assert_int_equal(nstid_host(&m, 17), 17);
	nstid_seen(&m, 18);
	assert_int_equal(m.reads, 0);   /* nothing read per record */
	nstid_free(&m);
	free(root);
	/* an old kernel: no NSpid line, the identity */
	root = tu_printf("%s/old", fixdir);
	assert_int_equal(nstid_init(&m, root, 7400), 0);
	assert_false(m.other);
	assert_int_equal(nstid_host(&m, 1), 1);
	nstid_free(&m);
	/* a pid that is not there: an error, the identity */
	assert_int_equal(nstid_init(&m, root, 7401), -ENOENT);
	assert_false(m.other);
	assert_int_equal(nstid_host(&m, 3), 3);
	nstid_free(&m);
	free(root);
}

static void test_nested(void **state)
{
	struct nstid_map m;
	char *root = tu_printf("%s/nested", fixdir);

	assert_int_equal(nstid_init(&m, root, 6300), 0);
	assert_true(m.other);
	assert_int_equal(nstid_host(&m, 1), 6300);   /* the innermost tid */
	assert_int_equal(nstid_host(&m, 2), 6301);
	assert_int_equal(nstid_host(&m, 41), 41);     /* the middle level is not the job's */
	nstid_free(&m);
	free(root);
}

/* Threads that start after attach: found at their first tid, by either
 * side; a namespace tid reused by a new thread gets the new host tid. */
static void test_late_threads(void **state)
{
	struct nstid_map m;
	char *tmp = tu_mkdtemp();

	assert_non_null(tmp);
	assert_int_equal(tu_sh("cp -r '%s/container/4100' '%s/'", fixdir, tmp), 0);
	assert_int_equal(nstid_init(&m, tmp, 4100), 0);
	assert_int_equal(m.n, 3);
	assert_int_equal(tu_sh("cd '%s/4100/task' && mkdir 4120 4121 && "
			       "printf 'Pid:\\t4120\\nNSpid:\\t4120\\t20\\n' > 4120/status && "
			       "printf 'Pid:\\t4121\\nNSpid:\\t4121\\t21\\n' > 4121/status", tmp), 0);
	assert_int_equal(nstid_host(&m, 20), 4120);   /* a CUPTI record of a new thread */
	assert_int_equal(m.reads, 2);
	assert_int_equal(nstid_host(&m, 21), 4121);   /* read with it */
	assert_int_equal(m.reads, 2);
	assert_int_equal(tu_sh("cd '%s/4100/task' && mkdir 4130 && "
			       "printf 'NSpid:\\t4130\\t30\\n' > 4130/status && rm -r 4107", tmp), 0);
	nstid_seen(&m, 4130);                         /* a launch of a new thread */
	assert_int_equal(m.reads, 3);
	assert_int_equal(nstid_host(&m, 30), 4130);
	assert_int_equal(nstid_host(&m, 7), 4107);    /* gone since: kept */
	/* ns tid 7 reused by a new host thread */
	assert_int_equal(tu_sh("cd '%s/4100/task' && mkdir 4140 && "
			       "printf 'NSpid:\\t4140\\t7\\n' > 4140/status", tmp), 0);
	nstid_seen(&m, 4140);
	assert_int_equal(nstid_host(&m, 7), 4140);
	assert_int_equal(m.n, 6);
	assert_int_equal(m.unmapped, 0);
	nstid_free(&m);
	tu_rmdir(tmp);
	free(tmp);
}

/* One map per pid, shared by its readers; this process: tbpf's namespace. */
static void test_shared(void **state)
{
	struct nstid_map *a = nstid_get((uint32_t)getpid()), *b = nstid_get((uint32_t)getpid());

	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_false(a->other);
	assert_int_equal(nstid_host(a, 12345), 12345);
	nstid_put(b);
	assert_int_equal(a->pid, (uint32_t)getpid());   /* still held by a */
	nstid_put(a);
	b = nstid_get((uint32_t)getpid());   /* a fresh one after the last put */
	assert_non_null(b);
	nstid_put(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_container),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_nested),
		cmocka_unit_test(test_late_threads),
		cmocka_unit_test(test_shared),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
