/* test_pyoffsets.c - interpreter detection and offset tables.
 * Expected offsets come from shared/reference/probes.md (checked live) and
 * from gdb `ptype /o` on CPython debug builds, not from pyoffsets.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <cmocka.h>

#include "pyoffsets.h"
#include "pytarget.h"

static void test_table_311(void **state)
{
	struct tbpf_pyproc o;

	assert_int_equal(pyoffsets_for_version(3, 11, &o), 0);
	assert_int_equal(o.version, 0x030b);
	assert_int_equal(o.kind, PYK_IFRAME);
	/* probes.md section 4 */
	assert_int_equal(o.ts_frame, 56);     /* PyThreadState.cframe */
	assert_int_equal(o.cf_frame, 8);      /* _PyCFrame.current_frame */
	assert_int_equal(o.fr_code, 32);
	assert_int_equal(o.fr_previous, 48);
	assert_int_equal(o.fr_instr, 56);
	assert_int_equal(o.fr_localsplus, 72);
	assert_int_equal(o.co_argcount, 56);
	assert_int_equal(o.co_firstlineno, 72);
	assert_int_equal(o.co_filename, 112);
	assert_int_equal(o.co_name, 120);
	assert_int_equal(o.co_qualname, 128);
	assert_int_equal(o.tp_name, 24);
	assert_int_equal(o.str_ascii_data, 48);
	assert_int_equal(pyoffsets_tss_offset(3, 11), 592);
}

static void test_table_310_312_313(void **state)
{
	struct tbpf_pyproc o;

	assert_int_equal(pyoffsets_for_version(3, 10, &o), 0);
	assert_int_equal(o.kind, PYK_FRAMEOBJ);
	assert_int_equal(o.ts_frame, 24);     /* tstate->frame */
	assert_int_equal(o.fr_previous, 24);  /* f_back */
	assert_int_equal(o.fr_code, 32);
	assert_int_equal(o.fr_instr, 96);     /* gdb: int f_lasti at 96 */
	assert_int_equal(o.fr_localsplus, 352);
	assert_int_equal(o.fr_owner, TBPF_PYOFF_NONE);

	assert_int_equal(pyoffsets_for_version(3, 12, &o), 0);
	assert_int_equal(o.cf_frame, 0);      /* cframe->current_frame at 0 */
	assert_int_equal(o.fr_code, 0);
	assert_int_equal(o.fr_previous, 8);
	assert_int_equal(o.fr_owner, 70);
	assert_int_equal(o.str_ascii_data, 40); /* 3.12 dropped wstr */
	assert_int_equal(pyoffsets_tss_offset(3, 12), 0x608);

	assert_int_equal(pyoffsets_for_version(3, 13, &o), 0);
	assert_int_equal(o.ts_frame, 72);     /* tstate->current_frame */
	assert_int_equal(o.cf_frame, TBPF_PYOFF_NONE);
	assert_int_equal(pyoffsets_tss_offset(3, 13), 0x870);
}

static void test_unsupported(void **state)
{
	struct tbpf_pyproc o;

	assert_int_equal(pyoffsets_for_version(3, 9, &o), -ENOTSUP);
	assert_int_equal(pyoffsets_for_version(3, 14, &o), -ENOTSUP);
	assert_int_equal(pyoffsets_for_version(2, 7, &o), -ENOTSUP);
	assert_int_equal(pyoffsets_tss_offset(3, 9), -ENOTSUP);
}

static void test_version_from_path(void **state)
{
	unsigned a = 0, b = 0;

	assert_int_equal(pyversion_from_path("/usr/bin/python3.11", &a, &b), 0);
	assert_int_equal(a * 100 + b, 311);
	assert_int_equal(pyversion_from_path("/x/lib/libpython3.12.so.1.0", &a, &b), 0);
	assert_int_equal(a * 100 + b, 312);
	assert_int_equal(pyversion_from_path("python3.10d", &a, &b), 0);
	assert_int_equal(a * 100 + b, 310);
	assert_int_equal(pyversion_from_path("/usr/bin/python3", &a, &b), -EINVAL);
	assert_int_equal(pyversion_from_path("/usr/lib/libpthread.so.0", &a, &b), -EINVAL);
}

static void test_debug_offsets_313(void **state)
{
	uint8_t buf[600];
	struct tbpf_pyproc o;
	unsigned long hex = 0;
	int fd = open("tests/fixtures/py/debug_offsets_3.13.0.bin", O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	assert_int_equal(n, 584);
	memset(&o, 0, sizeof(o));
	assert_int_equal(pyoffsets_from_debug(buf, n, &o, &hex), 0);
	assert_int_equal(hex >> 16, 0x030d);
	/* gdb ptype /o on 3.13.0: PyThreadState.current_frame 72,
	 * _PyInterpreterFrame f_executable 0, previous 8, instr_ptr 56,
	 * owner 70, localsplus 72; PyCodeObject co_qualname 128,
	 * co_firstlineno 68, co_argcount 52, co_code_adaptive 200 */
	assert_int_equal(o.ts_frame, 72);
	assert_int_equal(o.cf_frame, TBPF_PYOFF_NONE);
	assert_int_equal(o.fr_code, 0);
	assert_int_equal(o.fr_previous, 8);
	assert_int_equal(o.fr_instr, 56);
	assert_int_equal(o.fr_owner, 70);
	assert_int_equal(o.fr_localsplus, 72);
	assert_int_equal(o.co_qualname, 128);
	assert_int_equal(o.co_firstlineno, 68);
	assert_int_equal(o.co_argcount, 52);
	assert_int_equal(o.co_code, 200);
	assert_int_equal(o.str_ascii_data, 40);

	assert_int_equal(pyoffsets_from_debug(buf, 100, &o, NULL), -EINVAL);
	buf[16] = 1;  /* free_threaded */
	assert_int_equal(pyoffsets_from_debug(buf, n, &o, NULL), -ENOTSUP);
	buf[0] = 'X';
	assert_int_equal(pyoffsets_from_debug(buf, n, &o, NULL), -EINVAL);
}

static void test_glibc_tsd(void **state)
{
	int off = pyoffsets_glibc_tsd_block();

	assert_true(off > 0);
	/* probes.md: glibc 2.36 keeps specific_1stblock at 0x310 */
	if (!strcmp(gnu_get_libc_version(), "2.36"))
		assert_int_equal(off, 0x310);
}

static void detect_live(const char *python, unsigned minor)
{
	struct pytarget t;
	struct tbpf_pyproc o;
	char *why = NULL;
	char want[8];

	if (pyt_start(&t, python)) {
		pyt_stop(&t);
		skip();
	}
	snprintf(want, sizeof(want), "3.%u", minor);
	assert_string_equal(pyt_get(&t, "version"), want);
	assert_int_equal(pyproc_detect(t.pid, &o, &why), 0);
	assert_null(why);
	assert_int_equal(o.version, 0x0300 | minor);
	/* the address the interpreter reports for itself via ctypes */
	assert_int_equal(o.runtime, pyt_u64(&t, "runtime"));
	assert_true(o.tss_key < 1024);
	assert_true(o.cell_type != 0);
	pyt_stop(&t);
}

static void test_detect_debian311(void **state) { detect_live(PY_DEBIAN, 11); }
static void test_detect_pyenv310(void **state) { detect_live(PY_PYENV("3.10.13"), 10); }
static void test_detect_pyenv312(void **state) { detect_live(PY_PYENV("3.12.1"), 12); }
static void test_detect_pyenv313(void **state) { detect_live(PY_PYENV("3.13.0"), 13); }

static void test_detect_not_python(void **state)
{
	struct tbpf_pyproc o;
	char *why = NULL;
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		execl("/bin/sleep", "sleep", "5", (char *)NULL);
		_exit(127);
	}
	usleep(100000);
	assert_int_equal(pyproc_detect(pid, &o, &why), -ENOTSUP);
	assert_non_null(why);
	assert_non_null(strstr(why, "no Python"));
	free(why);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_311),
		cmocka_unit_test(test_table_310_312_313),
		cmocka_unit_test(test_unsupported),
		cmocka_unit_test(test_version_from_path),
		cmocka_unit_test(test_debug_offsets_313),
		cmocka_unit_test(test_glibc_tsd),
		cmocka_unit_test(test_detect_debian311),
		cmocka_unit_test(test_detect_pyenv310),
		cmocka_unit_test(test_detect_pyenv312),
		cmocka_unit_test(test_detect_pyenv313),
		cmocka_unit_test(test_detect_not_python),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
