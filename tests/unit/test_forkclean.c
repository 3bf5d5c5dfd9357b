/* test_forkclean.c - unit tests of the guard's forked-child cleaning
 * (forkclean.c): which mappings a child's maps yield (fixtures of a host
 * and a container target), and, in a real ptrace-stopped child, that the
 * madvise run inside it drops a private patched copy of a file's code
 * page so the child reads the file's own bytes again. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/ptrace.h>

#include "libs/testutil.h"
#include "forkclean.h"
#include "procmaps.h"

static void parse_fixture(const char *name, struct pm_maps *m)
{
	char *p = tu_repo_path(name);
	FILE *f = p ? fopen(p, "r") : NULL;

	assert_non_null(f);
	assert_int_equal(procmaps_parse(f, m), 0);
	fclose(f);
	free(p);
}

static void plan_host(void **state)
{
	/* libtorch_cpu 1.13 on the host (fe:00, inode 262811): its one r-x
	 * mapping; not the r-- or rw- ones, not python's, not the vdso */
	struct fc_file torch = { 0xfe, 0x00, 262811 };
	struct fc_range r[8];
	struct pm_maps m = { 0 };

	parse_fixture("tests/fixtures/maps/host_torch113.maps", &m);
	assert_int_equal(forkclean_plan(&m, &torch, 1, r, 8), 1);
	assert_int_equal(r[0].start, 0x7f3a2080a000ULL);
	assert_int_equal(r[0].end, 0x7f3a2589b000ULL);
	/* no probed file: nothing (this target maps no CUDA library) */
	assert_int_equal(forkclean_plan(&m, NULL, 0, r, 8), 0);
	/* same inode on another device is another file */
	torch.dev_minor = 1;
	assert_int_equal(forkclean_plan(&m, &torch, 1, r, 8), 0);
	procmaps_free(&m);
}

static void plan_container_cuda(void **state)
{
	/* a container target: the CUDA runtime (wheel copy and torchvision's
	 * hashed copy) and the driver are probed whether or not tbpf named
	 * them, their r-x mappings only; the count is given past cap */
	struct fc_range r[8];
	struct pm_maps m = { 0 };
	size_t n;

	parse_fixture("tests/fixtures/maps/container_torch2.maps", &m);
	n = forkclean_plan(&m, NULL, 0, r, 8);
	assert_true(n >= 2);
	assert_int_equal(r[0].start, 0x7f1160010000ULL);
	assert_int_equal(r[0].end, 0x7f1160080000ULL);
	assert_int_equal(r[1].start, 0x7f1170000000ULL);
	assert_int_equal(forkclean_plan(&m, NULL, 0, r, 1), n);
	procmaps_free(&m);
}

static void find_syscall(void **state)
{
	const uint8_t a[] = { 0x90, 0x0f, 0x05, 0xc3 }, b[] = { 0x05, 0x0f }, c[] = { 0x0f };

	assert_int_equal(forkclean_find_syscall(a, sizeof(a)), 1);
	assert_int_equal(forkclean_find_syscall(b, sizeof(b)), -1);
	assert_int_equal(forkclean_find_syscall(c, sizeof(c)), -1);
	assert_int_equal(forkclean_find_syscall(c, 0), -1);
}

/* A child that maps path's page private and executable, patches its
 * first byte to 0xcc (as a breakpoint does) and stops under ptrace; once
 * resumed it exits 0 when it reads `expect` there.  Returned stopped. */
static pid_t patched_child(const char *path, uint8_t expect)
{
	int status;
	pid_t child = fork();

	assert_true(child >= 0);
	if (child == 0) {
		int cfd = open(path, O_RDONLY);
		volatile uint8_t *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, cfd, 0);

		if (p == MAP_FAILED || mprotect((void *)p, 4096, PROT_READ | PROT_WRITE))
			_exit(2);
		p[0] = 0xcc;
		if (mprotect((void *)p, 4096, PROT_READ | PROT_EXEC) || p[0] != 0xcc)
			_exit(3);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		_exit(p[0] == expect ? 0 : 1);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFSTOPPED(status));
	return child;
}

static void expect_exit_0(pid_t child)
{
	int status;

	assert_int_equal(ptrace(PTRACE_CONT, child, 0, 0), 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* forkclean_child, run from here on the stopped child, must make it read
 * the file's byte again. */
static void drops_patched_page(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_printf("%s/code.bin", dir);
	uint8_t page[4096];
	struct fc_file file;
	size_t dropped = 0;
	char *why = NULL;
	pid_t child;
	int fd;

	memset(page, 0x55, sizeof(page));   /* push %rbp, all the way */
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0700);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	close(fd);
	assert_int_equal(forkclean_file(path, &file), 0);

	child = patched_child(path, 0x55);
	assert_int_equal(forkclean_child(child, &file, 1, &dropped, &why), 0);
	assert_null(why);
	assert_int_equal(dropped, 1);
	expect_exit_0(child);

	/* the control: without the file named, the patch stays */
	child = patched_child(path, 0xcc);
	assert_int_equal(forkclean_child(child, NULL, 0, &dropped, &why), 0);
	assert_int_equal(dropped, 0);
	expect_exit_0(child);
	tu_rmdir(dir);
	free(path);
	free(dir);
}

static void same_mm(void **state)
{
	pid_t child = fork();
	int status;

	assert_true(child >= 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	assert_int_equal(forkclean_same_mm(getpid(), getpid()), 1);
	assert_int_equal(forkclean_same_mm(getpid(), child), 0);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_host),
		cmocka_unit_test(plan_container_cuda),
		cmocka_unit_test(find_syscall),
		cmocka_unit_test(drops_patched_page),
		cmocka_unit_test(same_mm),
	};

	return cmocka_run_group_tests_name("forkclean", tests, NULL, NULL);
}
