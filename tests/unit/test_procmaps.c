/* test_procmaps.c - unit tests of the discovery stage's /proc/PID/maps
 * parsing (hand-written fixtures: deleted files, spaces in paths, pseudo
 * entries, container paths) and of address translation in real processes
 * (this test, and python with torch 1.13 / 2.x, read with process_vm_readv). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "libs/testutil.h"
#include "elfsym.h"
#include "opsyms.h"
#include "procmaps.h"

static char *fixdir;

static int setup(void **state)
{
	fixdir = tu_repo_path("tests/fixtures/maps");
	return fixdir ? 0 : -1;
}

static int teardown(void **state)
{
	free(fixdir);
	return 0;
}

static void parse_fixture(const char *name, struct pm_maps *m)
{
	char *p = tu_printf("%s/%s", fixdir, name);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	assert_int_equal(procmaps_parse(f, m), 0);
	fclose(f);
	free(p);
}

static const struct pm_entry *by_start(const struct pm_maps *m, uint64_t start)
{
	const struct pm_entry *e = procmaps_find(m, start);
	assert_non_null(e);
	assert_int_equal(e->start, start);
	return e;
}

static void test_parse_host(void **state)
{
	struct pm_maps m;
	const struct pm_entry *e;

	parse_fixture("host_torch113.maps", &m);
	assert_int_equal(m.n, 33);

	e = by_start(&m, 0x7f3a2080a000);
	assert_int_equal(e->end, 0x7f3a2589b000);
	assert_int_equal(e->offset, 0x80a000);
	assert_int_equal(e->prot, PROT_READ | PROT_EXEC);
	assert_int_equal(e->dev_major, 0xfe);
	assert_int_equal(e->dev_minor, 0);
	assert_int_equal(e->inode, 262811);
	assert_int_equal(e->flags, 0);
	assert_string_equal(e->path, "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0");

	e = by_start(&m, 0x00a85000);          /* anonymous, trailing space */
	assert_null(e->path);
	assert_int_equal(e->prot, PROT_READ | PROT_WRITE);
	e = by_start(&m, 0x7f3a10021000);      /* ---p guard */
	assert_null(e->path);
	assert_int_equal(e->prot, 0);

	e = by_start(&m, 0x02036000);
	assert_string_equal(e->path, "[heap]");
	assert_int_equal(e->flags, PM_PSEUDO);

	e = by_start(&m, 0x7f3a29000000);      /* spaces in directory and name */
	assert_string_equal(e->path, "/home/user/my models/lib/libcustom ops.so");
	assert_int_equal(e->inode, 300001);
	assert_int_equal(e->flags, 0);

	e = by_start(&m, 0x7f3a29100000);      /* deleted */
	assert_string_equal(e->path, "/tmp/build/libjit_kernel.so");
	assert_int_equal(e->flags, PM_DELETED);
	char *hp = procmaps_entry_host_path(777, e);
	assert_string_equal(hp, "/proc/777/map_files/7f3a29100000-7f3a29102000");
	free(hp);

	e = by_start(&m, 0x7f3a29200000);      /* memfd */
	assert_string_equal(e->path, "/memfd:cuda-jit");
	assert_int_equal(e->flags, PM_DELETED);
	assert_int_equal(e->dev_minor, 1);

	e = by_start(&m, 0x7f3a29300000);      /* the kernel's "\012" for '\n' */
	assert_string_equal(e->path, "/srv/odd\nname/libodd.so");

	e = by_start(&m, 0x7f3a29400000);
	assert_int_equal(e->flags, PM_SHARED);
	assert_int_equal(e->dev_minor, 5);

	e = by_start(&m, 0x7f3a29500000);
	assert_string_equal(e->path, "[anon:tbpf ring]");
	assert_int_equal(e->flags, PM_PSEUDO);

	e = by_start(&m, 0x7ffd3c7dc000);
	assert_string_equal(e->path, "[vdso]");
	assert_int_equal(e->flags, PM_PSEUDO);
	assert_int_equal(e->prot, PROT_READ | PROT_EXEC);

	e = by_start(&m, 0xffffffffff600000ULL);
	assert_string_equal(e->path, "[vsyscall]");
	assert_int_equal(e->end, 0xffffffffff601000ULL);
	assert_int_equal(e->prot, PROT_EXEC);

	procmaps_free(&m);
	assert_int_equal(m.n, 0);
	assert_null(m.v);
}

static void test_find(void **state)
{
	struct pm_maps m;

	parse_fixture("host_torch113.maps", &m);
	assert_null(procmaps_find(&m, 0));
	assert_null(procmaps_find(&m, 0x3fffff));
	assert_int_equal(procmaps_find(&m, 0x400000)->start, 0x400000);
	assert_int_equal(procmaps_find(&m, 0x41efff)->start, 0x400000);
	assert_int_equal(procmaps_find(&m, 0x41f000)->start, 0x41f000);  /* end is exclusive */
	assert_null(procmaps_find(&m, 0x02036000 - 1));                  /* a gap */
	assert_int_equal(procmaps_find(&m, 0x7f3a2589afff)->start, 0x7f3a2080a000);
	assert_int_equal(procmaps_find(&m, 0xffffffffff600fffULL)->start, 0xffffffffff600000ULL);
	assert_null(procmaps_find(&m, 0xffffffffff601000ULL));
	procmaps_free(&m);
}

static void expect_paths(char **paths, size_t n, const char *const *want, size_t nwant)
{
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(paths[i], want[i]);
	procmaps_free_paths(paths, n);
}

static void test_libs_container(void **state)
{
	struct pm_maps m;
	char **p;
	size_t n;

	parse_fixture("container_torch2.maps", &m);
	assert_int_equal(m.n, 21);
	assert_int_equal(procmaps_libs(&m, procmaps_is_libtorch, NULL, &p, &n), 0);
	const char *torch[] = {
		"/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so",
		"/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch.so",
	};
	expect_paths(p, n, torch, 2);
	assert_int_equal(procmaps_libs(&m, procmaps_is_libcudart, NULL, &p, &n), 0);
	const char *cudart[] = {
		"/opt/conda/lib/python3.10/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
		"/opt/conda/lib/python3.10/site-packages/torchvision.libs/libcudart-9a8b7c6d.so.12",
	};
	expect_paths(p, n, cudart, 2);
	assert_int_equal(procmaps_libs(&m, procmaps_is_libcuda, NULL, &p, &n), 0);
	const char *cuda[] = { "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05" };
	expect_paths(p, n, cuda, 1);

	/* container paths resolve through the target's root */
	char *hp = procmaps_host_path(4321, torch[0]);
	assert_string_equal(hp, "/proc/4321/root/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so");
	free(hp);
	hp = procmaps_host_path(4321, "/tmp/x.so (deleted)");
	assert_string_equal(hp, "/proc/4321/root/tmp/x.so");
	free(hp);
	hp = procmaps_host_path(0, "/tmp/x.so (deleted)");
	assert_string_equal(hp, "/tmp/x.so");
	free(hp);
	const struct pm_entry *e = by_start(&m, 0x7f10e0e15000);
	hp = procmaps_entry_host_path(4321, e);
	assert_string_equal(hp, "/proc/4321/root/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so");
	free(hp);
	procmaps_free(&m);
}

/* The host fixture names the real Debian files: libtorch.so.1.13 is a
 * stub without operators there (checked with nm) and must be dropped. */
static void test_libtorch_libs_checks_file(void **state)
{
	const char *stub = "/usr/lib/x86_64-linux-gnu/libtorch.so.1.13.0";
	const char *cpu = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0";
	struct pm_maps m;
	char **p;
	size_t n;

	if (!tu_exists(stub) || !tu_exists(cpu)) {
		fprintf(stderr, "  skipped: Debian python3-torch not installed\n");
		skip();
	}
	char *cnt = tu_capture("nm -D --defined-only '%s' | grep -c _ZN2at4_ops || true", stub);
	assert_non_null(cnt);
	assert_string_equal(cnt, "0\n");
	free(cnt);
	parse_fixture("host_torch113.maps", &m);
	assert_int_equal(procmaps_libs(&m, procmaps_is_libtorch, NULL, &p, &n), 0);
	const char *both[] = { cpu, stub };
	expect_paths(p, n, both, 2);
	assert_int_equal(procmaps_libtorch_libs(0, &m, &p, &n), 0);
	expect_paths(p, n, &cpu, 1);
	procmaps_free(&m);
}

static void test_predicates(void **state)
{
	static const struct { const char *n; bool torch, cudart, cuda; } t[] = {
		{ "libtorch_cpu.so", true, false, false },
		{ "libtorch_cpu.so.1.13.0", true, false, false },
		{ "libtorch.so", true, false, false },
		{ "libtorch.so.1.13", true, false, false },
		{ "libtorch_cuda.so", false, false, false },
		{ "libtorch_python.so", false, false, false },
		{ "libtorch_global_deps.so", false, false, false },
		{ "libtorchaudio.so", false, false, false },
		{ "libcudart.so", false, true, false },
		{ "libcudart.so.12", false, true, false },
		{ "libcudart.so.13.0.96", false, true, false },
		{ "libcudart-e409450e.so.11.0", false, true, false },
		{ "libcudart_static.a", false, false, false },
		{ "libcudart.sox", false, false, false },
		{ "libcuda.so", false, false, true },
		{ "libcuda.so.1", false, false, true },
		{ "libcuda.so.535.104.05", false, false, true },
		{ "libcudadebugger.so.1", false, false, false },
		{ "libcudnn.so.9", false, false, false },
		{ "libcublas.so.12", false, false, false },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (procmaps_is_libtorch(t[i].n, NULL) != t[i].torch ||
		    procmaps_is_libcudart(t[i].n, NULL) != t[i].cudart ||
		    procmaps_is_libcuda(t[i].n, NULL) != t[i].cuda)
			fail_msg("predicate mismatch for %s", t[i].n);
	}
}

static void test_malformed(void **state)
{
	char *p = tu_printf("%s/malformed.maps", fixdir);
	FILE *f = fopen(p, "r");
	struct pm_maps m = { 0 };
	assert_non_null(f);
	assert_int_equal(procmaps_parse(f, &m), -EINVAL);
	assert_int_equal(m.n, 0);
	fclose(f);
	free(p);

	static const char *bad[] = {
		"zz-10 r--p 0 0:0 0\n",
		"20-10 r--p 00000000 00:00 0\n",           /* end < start */
		"10-20 r--p 00000000 00:00\n",             /* no inode */
		"10-20 r- 00000000 00:00 0\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		f = fmemopen((void *)bad[i], strlen(bad[i]), "r");
		assert_int_equal(procmaps_parse(f, &m), -EINVAL);
		fclose(f);
	}
	/* empty input: no entries, no error */
	f = fmemopen((void *)"\n", 1, "r");
	assert_int_equal(procmaps_parse(f, &m), 0);
	assert_int_equal(m.n, 0);
	procmaps_free(&m);
	fclose(f);
}

static __attribute__((noinline)) int self_marker(int x)
{
	__asm__ volatile("");
	return x * 3 + 1;
}

static void test_read_self_and_gone(void **state)
{
	struct pm_maps m;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = '\0';
	assert_int_equal(procmaps_read(getpid(), &m), 0);
	const struct pm_entry *e = procmaps_find(&m, (uint64_t)(uintptr_t)self_marker);
	assert_non_null(e);
	assert_string_equal(e->path, exe);
	assert_true(e->prot & PROT_EXEC);

	/* the file offset of self_marker, via our ELF reader, holds the code */
	struct elf_file *ef;
	struct elf_sym s;
	uint64_t va;
	assert_int_equal(elf_file_open(exe, &ef), 0);
	assert_int_equal(elf_file_find_sym(ef, "self_marker", &s), 0);
	assert_int_equal(procmaps_addr_to_elf_vaddr(e, ef, (uint64_t)(uintptr_t)self_marker, &va), 0);
	assert_int_equal(va, s.value);
	assert_int_equal(procmaps_addr_to_elf_vaddr(e, ef, e->end, &va), -ENOENT);
	elf_file_close(ef);
	procmaps_free(&m);
	assert_int_equal(self_marker(1), 4);

	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(procmaps_read(pid, &m), -ESRCH);
}

/* ---- real PyTorch processes ------------------------------------------ */

struct child {
	pid_t pid;
	int in_fd;   /* closing it lets the child exit */
};

/* Start python, wait until torch is imported. */
static bool start_python(const char *python, struct child *c)
{
	int in[2], out[2];
	char buf[16];

	if (pipe(in) || pipe(out))
		return false;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 2);
		execl(python, python, "-c",
		      "import sys, torch; print('ready', flush=True); sys.stdin.read()", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	ssize_t n = read(out[0], buf, sizeof(buf));
	close(out[0]);
	return n >= 5 && !strncmp(buf, "ready", 5);
}

static void stop_python(struct child *c)
{
	close(c->in_fd);
	waitpid(c->pid, NULL, 0);
}

static void read_target(pid_t pid, uint64_t addr, void *buf, size_t n)
{
	struct iovec local = { buf, n }, remote = { (void *)(uintptr_t)addr, n };
	ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (r != (ssize_t)n)
		fail_msg("process_vm_readv pid %d at 0x%llx: %s (alive %d)", pid, (unsigned long long)addr, strerror(errno), kill(pid, 0));
}

static void check_torch_process(const char *python, const char *want_cpu,
				const char *want_cudart)
{
	struct child c = { 0 };
	struct pm_maps m;
	char **p;
	size_t n;

	if (!tu_exists(python) || !tu_exists(want_cpu)) {
		fprintf(stderr, "  skipped: %s or %s not installed\n", python, want_cpu);
		skip();
	}
	assert_true(start_python(python, &c));
	assert_int_equal(procmaps_read(c.pid, &m), 0);
	assert_int_equal(procmaps_libtorch_libs(c.pid, &m, &p, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(p[0], want_cpu);

	/* at::_ops::add_Tensor::call: file offset -> address in the target;
	 * the target's bytes there equal the file's, and the address maps
	 * back to the same symbol. */
	char *host = procmaps_host_path(c.pid, p[0]);
	struct opsym_set ops;
	assert_int_equal(opsyms_discover(host, &ops), 0);
	const struct opsym *add = NULL;
	for (size_t i = 0; i < ops.n && !add; i++)
		if (!strcmp(ops.v[i].struct_name, "add_Tensor") && !ops.v[i].redispatch)
			add = &ops.v[i];
	assert_non_null(add);
	uint64_t addr = 0;
	const struct pm_entry *e = NULL;
	for (size_t i = 0; i < m.n && !addr; i++)
		if (m.v[i].path && !strcmp(m.v[i].path, p[0]) &&
		    !procmaps_file_off_to_addr(&m.v[i], add->file_off, &addr))
			e = &m.v[i];
	assert_non_null(e);
	assert_true(e->prot & PROT_EXEC);
	unsigned char mem[32], file[32];
	read_target(c.pid, addr, mem, sizeof(mem));
	int fd = open(host, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, file, sizeof(file), (off_t)add->file_off), (ssize_t)sizeof(file));
	close(fd);
	assert_memory_equal(mem, file, sizeof(file));

	struct elf_file *ef;
	uint64_t va, in;
	const char *name;
	assert_int_equal(elf_file_open(host, &ef), 0);
	assert_int_equal(procmaps_addr_to_elf_vaddr(e, ef, addr + 5, &va), 0);
	assert_int_equal(elf_file_symbolize(ef, va, &name, &in), 0);
	assert_string_equal(name, add->mangled);
	assert_int_equal(in, 5);
	fprintf(stderr, "  pid %d: %s at 0x%llx (file offset 0x%llx) in %s\n", c.pid,
		add->name, (unsigned long long)addr, (unsigned long long)add->file_off, p[0]);
	elf_file_close(ef);
	opsyms_free(&ops);
	free(host);
	procmaps_free_paths(p, n);

	assert_int_equal(procmaps_libs(&m, procmaps_is_libcudart, NULL, &p, &n), 0);
	if (want_cudart) {
		assert_int_equal(n, 1);
		assert_string_equal(p[0], want_cudart);
	} else {
		assert_int_equal(n, 0);
	}
	procmaps_free_paths(p, n);
	procmaps_free(&m);
	stop_python(&c);
}

static void test_torch113_process(void **state)
{
	check_torch_process("/usr/bin/python3", "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0",
			    NULL);
}

#define VENV2 "/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages"
static void test_torch2_process(void **state)
{
	check_torch_process("/var/cache/tbpf/venv-torch2/bin/python",
			    VENV2 "/torch/lib/libtorch_cpu.so",
			    VENV2 "/nvidia/cuda_runtime/lib/libcudart.so.12");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_host),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_libs_container),
		cmocka_unit_test(test_libtorch_libs_checks_file),
		cmocka_unit_test(test_predicates),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_read_self_and_gone),
		cmocka_unit_test(test_torch113_process),
		cmocka_unit_test(test_torch2_process),
	};
	return cmocka_run_group_tests_name("procmaps", tests, setup, teardown);
}
