/* test_pynode.c - discover/pynode: where a PyNode keeps its Python object,
 * read from PyNode::name()'s code: the real first 64 bytes of that function
 * in libtorch_python 1.13 (Debian), 2.8 and 2.15 (PyPI wheels), then the libraries
 * themselves when this machine has them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>
#include "probesite.h"
#include "pynode.h"

/* 1.13: ... call; mov 0x188(%rbp),%rax; mov 0x8(%rax),%rax; mov 0x18(%rax),%r14 */
static const uint8_t name_113[] = {
	0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x55, 0x48, 0x89, 0xf5, 0x53, 0x48, 0x89, 0xfb, 0x4c, 0x8d,
	0x63, 0x10, 0x48, 0x83, 0xec, 0x30, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00, 0x48,
	0x89, 0x44, 0x24, 0x28, 0x31, 0xc0, 0x4c, 0x8d, 0x6c, 0x24, 0x10, 0x4c, 0x89, 0xef, 0xe8, 0x3d,
	0x5f, 0xd2, 0xff, 0x48, 0x8b, 0x85, 0x88, 0x01, 0x00, 0x00, 0x48, 0x8b, 0x40, 0x08, 0x4c, 0x8b,
	0x70, 0x18, 0x4c, 0x89, 0x23 };
/* 2.8: the same sequence at 0x1d8 */
static const uint8_t name_28[] = {
	0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x55, 0x48, 0x89, 0xf5, 0x53, 0x48, 0x89, 0xfb, 0x4c, 0x8d,
	0x63, 0x10, 0x48, 0x83, 0xec, 0x20, 0x4c, 0x8d, 0x6c, 0x24, 0x10, 0x4c, 0x89, 0xef, 0xe8, 0x7d,
	0x3b, 0xcc, 0xff, 0x48, 0x8b, 0x85, 0xd8, 0x01, 0x00, 0x00, 0x48, 0x8b, 0x40, 0x08, 0x4c, 0x8b,
	0x70, 0x18, 0x4c, 0x89, 0x23, 0x4d, 0x85, 0xf6, 0x0f, 0x84, 0x88, 0x00, 0x00, 0x00, 0x4c, 0x89 };

/* 2.15: the object moved into Node's Python object slot, at 0x70: a
 * one-byte displacement, mov 0x70(%rbp),%rax */
static const uint8_t name_215[] = {
	0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x55, 0x48, 0x89, 0xf5, 0x53, 0x48, 0x89, 0xfb, 0x4c, 0x8d,
	0x63, 0x10, 0x48, 0x83, 0xec, 0x10, 0x49, 0x89, 0xe5, 0x4c, 0x89, 0xef, 0xe8, 0x9f, 0x5f, 0xb9,
	0xff, 0x48, 0x8b, 0x45, 0x70, 0x48, 0x8b, 0x40, 0x08, 0x4c, 0x8b, 0x70, 0x18, 0x4c, 0x89, 0x23 };

static void offsets_of_each_torch(void **state)
{
	uint8_t c[sizeof(name_215)];

	(void)state;
	assert_int_equal(pynode_obj_offset(name_113, sizeof(name_113)), 0x188);
	assert_int_equal(pynode_obj_offset(name_28, sizeof(name_28)), 0x1d8);
	assert_int_equal(pynode_obj_offset(name_215, sizeof(name_215)), 0x70);
	/* a one-byte displacement too small to be past Node's own fields */
	memcpy(c, name_215, sizeof(c));
	c[36] = 0x18;
	assert_int_equal(pynode_obj_offset(c, sizeof(c)), -1);
}

static void other_code_is_refused(void **state)
{
	uint8_t c[sizeof(name_28)];

	(void)state;
	/* cut before the tp_name load */
	assert_int_equal(pynode_obj_offset(name_28, 48), -1);
	/* ob_type read at another offset: not Py_TYPE */
	memcpy(c, name_28, sizeof(c));
	c[45] = 0x10;
	assert_int_equal(pynode_obj_offset(c, sizeof(c)), -1);
	/* the second load not through the first one's register */
	memcpy(c, name_28, sizeof(c));
	c[44] = 0x41;   /* mov 0x8(%rcx),%rax */
	assert_int_equal(pynode_obj_offset(c, sizeof(c)), -1);
	/* an implausible displacement (not a multiple of 8) */
	memcpy(c, name_28, sizeof(c));
	c[38] = 0xd4;
	assert_int_equal(pynode_obj_offset(c, sizeof(c)), -1);
}

/* The real libraries, when installed: the offset, and an entry the kernel
 * emulates (a push), so the probe sits at PyNode::apply itself. */
static void real_library(const char *path, uint32_t want)
{
	struct pynode_site ps;
	const char *why = NULL;
	uint8_t code[8];
	int fd;

	if (access(path, R_OK)) {
		print_message("skipped: %s not installed\n", path);
		return;
	}
	assert_int_equal(pynode_find(path, &ps, &why), 0);
	assert_null(why);
	assert_int_equal(ps.obj_off, want);
	assert_true(ps.vtable_vaddr > 16 && ps.vtable_off > 16);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, code, sizeof(code), (off_t)ps.apply_off), (ssize_t)sizeof(code));
	close(fd);
	assert_true(probe_site_emulated(code, sizeof(code)));
}

static void real_libraries(void **state)
{
	(void)state;
	real_library("/usr/lib/x86_64-linux-gnu/libtorch_python.so.1.13.0", 0x188);
	real_library("/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/"
		     "libtorch_python.so", 0x1d8);
	real_library("/var/cache/tbpf/venv-torch2.15/lib/python3.11/site-packages/torch/lib/"
		     "libtorch_python.so", 0x70);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(offsets_of_each_torch),
		cmocka_unit_test(other_code_is_refused),
		cmocka_unit_test(real_libraries),
	};

	return cmocka_run_group_tests_name("pynode", tests, NULL, NULL);
}
