/* test_inject.c - injection into real child processes: every register
 * (general, flags, SSE) survives, a blocked syscall resumes cleanly, the
 * library really maps and unmaps, five cycles in a row; plus the pure maps
 * parsers on fixture text. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>
#include <pthread.h>
#include <link.h>
#include <malloc.h>

#include "agent_attach.h"
#include "inject.h"

#define LIB "/lib/x86_64-linux-gnu/libbz2.so.1.0"

static volatile sig_atomic_t stop;
static void on_usr1(int sig) { stop = 1; }

/* Spin with known values in callee-saved registers, xmm0/xmm15 and the
 * flags of the last compare; return 1 as soon as one changes. */
static int reg_loop(long iters)
{
	int bad;
	__asm__ volatile(
		"movabs $0x1111222233334444, %%rbx\n\t"
		"movabs $0x5555666677778888, %%r12\n\t"
		"movabs $0x9999aaaabbbbcccc, %%r13\n\t"
		"movabs $0xddddeeeeffff0000, %%r14\n\t"
		"movabs $0x0123456789abcdef, %%r15\n\t"
		"movq %%rbx, %%xmm0\n\t"
		"movq %%r12, %%xmm15\n\t"
		"1:\n\t"
		"movabs $0x1111222233334444, %%rax\n\t cmp %%rax, %%rbx\n\t jne 2f\n\t"
		"movabs $0x5555666677778888, %%rax\n\t cmp %%rax, %%r12\n\t jne 2f\n\t"
		"movabs $0x9999aaaabbbbcccc, %%rax\n\t cmp %%rax, %%r13\n\t jne 2f\n\t"
		"movabs $0xddddeeeeffff0000, %%rax\n\t cmp %%rax, %%r14\n\t jne 2f\n\t"
		"movabs $0x0123456789abcdef, %%rax\n\t cmp %%rax, %%r15\n\t jne 2f\n\t"
		"movq %%xmm0, %%rax\n\t cmp %%rbx, %%rax\n\t jne 2f\n\t"
		"movq %%xmm15, %%rax\n\t cmp %%r12, %%rax\n\t jne 2f\n\t"
		"dec %[n]\n\t jnz 1b\n\t"
		"xor %[bad], %[bad]\n\t jmp 3f\n"
		"2:\n\t mov $1, %[bad]\n"
		"3:\n\t"
		: [bad] "=r"(bad), [n] "+r"(iters)
		:
		: "rax", "rbx", "r12", "r13", "r14", "r15", "xmm0", "xmm15", "cc", "memory");
	return bad;
}

static int lib_mapped(pid_t pid, const char *name)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	int hit = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0)
		if (strstr(line, name))
			hit = 1;
	free(line);
	fclose(f);
	return hit;
}

/* The child exits, with status 0 (its own checks passed). */
static void expect_exit_0(pid_t pid)
{
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void five_cycles(pid_t pid)
{
	for (int i = 0; i < 5; i++) {
		uint64_t h = 0;
		char *why = NULL;
		int ret = -1;
		int err = inject_dlopen(pid, LIB, 0, &h, &why);
		if (err)
			fail_msg("inject cycle %d: %s", i, why);
		assert_int_not_equal(h, 0);
		assert_int_equal(lib_mapped(pid, "libbz2.so"), 1);
		err = inject_dlclose(pid, h, &ret, &why);
		if (err)
			fail_msg("dlclose cycle %d: %s", i, why);
		assert_int_equal(ret, 0);
		assert_int_equal(lib_mapped(pid, "libbz2.so"), 0);
		free(why);
	}
}

static void test_registers_survive(void **state)
{
	if (access(LIB, R_OK))
		skip();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGUSR1, on_usr1);
		while (!stop)
			if (reg_loop(1 << 20))
				_exit(3);
		_exit(0);
	}
	usleep(100000);
	assert_int_equal(lib_mapped(pid, "libbz2.so"), 0);
	five_cycles(pid);
	kill(pid, SIGUSR1);
	expect_exit_0(pid);   /* 3 = a register changed */
}

/* A child blocked in read(): after injection the read must still return
 * the data written later (restarted, not EINTR). */
static void test_blocked_syscall_resumes(void **state)
{
	int fds[2];
	if (access(LIB, R_OK))
		skip();
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c = 0;
		close(fds[1]);
		ssize_t n = read(fds[0], &c, 1);
		_exit(n == 1 && c == 'x' ? 0 : n < 0 ? 10 + (errno == EINTR) : 20);
	}
	close(fds[0]);
	usleep(100000);
	five_cycles(pid);
	assert_int_equal(write(fds[1], "x", 1), 1);
	expect_exit_0(pid);
	close(fds[1]);
}

static void test_refuses_dead_and_relative(void **state)
{
	char *why = NULL;
	assert_int_equal(inject_library(getpid(), "libbz2.so.1.0", &why), -EINVAL);
	assert_non_null(strstr(why, "absolute"));
	free(why);
	why = NULL;
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	assert_true(inject_library(pid, LIB, &why) < 0);
	assert_non_null(why);
	free(why);
}

static const char maps_kineto[] =
	"55d0a000-55d0b000 r--p 00000000 08:01 1 /usr/bin/python3.11\n"
	"7f0000000000-7f0000100000 r--p 00000000 08:01 2 /venv/nvidia/cuda_cupti/lib/libcupti.so.12\n"
	"7f0000100000-7f0000200000 r-xp 00100000 08:01 2 /venv/nvidia/cuda_cupti/lib/libcupti.so.12\n"
	"7f1000000000-7f1000001000 rw-p 00000000 00:00 0 \n";
static const char maps_ours[] =
	"7f0000000000-7f0000100000 r--p 00000000 08:01 2 /usr/local/cuda/lib64/libcupti.so.13\n"
	"7f2000000000-7f2000001000 r--p 00000000 08:01 3 /opt/tbpf/libtbpf_agent.so\n"
	"7f2000001000-7f2000002000 r-xp 00001000 08:01 3 /opt/tbpf/libtbpf_agent.so\n";
static const char maps_plain[] =
	"7f3000000000-7f3000001000 r--p 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f3000001000-7f3000002000 r-xp 00028000 08:01 4 /usr/lib/x86_64-linux-gnu/libc.so.6\n";

static FILE *memf(const char *s) { return fmemopen((void *)s, strlen(s), "r"); }

/* A main thread blocked at the very end of its grow-down stack: the call
 * frame cannot be written below its stack pointer (the kernel does not
 * grow another process's stack), so injection must use another thread,
 * or, when there is none, refuse with a clear message; either way the
 * target must carry on unharmed (its read still returns the data). */
static int deep_fd;
static char deep_c;

/* In the child: grow the stack mapping down to a fresh page L (this
 * thread's own fault grows it), then block in read() on a stack pointer 64
 * bytes above L, that is 64 bytes above the end of the mapping. */
static int read_deep(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[256];
	uintptr_t lo = 0, hi = 0, l, sp;
	long ret;

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]"))
			sscanf(line, "%lx-%lx", &lo, &hi);
	if (f)
		fclose(f);
	if (!lo)
		return 40;
	l = (lo - (256 << 10)) & ~(uintptr_t)4095;
	*(volatile char *)l = 1;
	sp = l + 64;
	__asm__ volatile("mov %%rsp, %%r12\n\t"
			 "mov %[sp], %%rsp\n\t"
			 "syscall\n\t"
			 "mov %%r12, %%rsp"
			 : "=a"(ret)
			 : "a"(0L /* read */), "D"((long)deep_fd), "S"(&deep_c), "d"(1L), [sp] "r"(sp)
			 : "rcx", "r11", "r12", "memory");
	return ret == 1 && deep_c == 'x' ? 0 : 20;
}

static void *read_other(void *arg)
{
	char c;
	return (void *)(intptr_t)read(*(int *)arg, &c, 1);
}

static void deep_case(int threads)
{
	int fds[2], other[2];
	if (access(LIB, R_OK))
		skip();
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pipe(other), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pthread_t t;
		close(fds[1]);
		deep_fd = fds[0];
		if (threads > 1 && pthread_create(&t, NULL, read_other, &other[0]))
			_exit(30);
		_exit(read_deep());
	}
	close(fds[0]);
	usleep(200000);
	char *why = NULL;
	uint64_t h = 0;
	int err = inject_dlopen(pid, LIB, 0, &h, &why);
	if (threads > 1) {
		if (err)
			fail_msg("inject with a second thread: %s", why);
		assert_int_equal(lib_mapped(pid, "libbz2.so"), 1);
		int ret = -1;
		if (inject_dlclose(pid, h, &ret, &why))
			fail_msg("dlclose: %s", why);
		assert_int_equal(ret, 0);
	} else {
		assert_int_equal(err, -ENOSPC);
		assert_non_null(why);
		assert_non_null(strstr(why, "stack"));
		assert_int_equal(lib_mapped(pid, "libbz2.so"), 0);
	}
	free(why);
	assert_int_equal(write(fds[1], "x", 1), 1);
	expect_exit_0(pid);
	close(fds[1]);
	close(other[0]);
	close(other[1]);
}

static void test_deep_stack_refused(void **state) { deep_case(1); }
static void test_deep_stack_other_thread(void **state) { deep_case(2); }

/* A busy thread that spends most of its time at the very end of its
 * grow-down stack and a little at its usual depth: injection has to wait
 * for a moment when the call frame fits (looking only once fails about
 * three times in four), and the target runs on to its normal exit. */
static void spin_at(uintptr_t sp, long n)
{
	__asm__ volatile("mov %%rsp, %%r12\n\t"
			 "test %[sp], %[sp]\n\t"
			 "jz 1f\n\t"
			 "mov %[sp], %%rsp\n"
			 "1:\n\t"
			 "dec %[n]\n\t"
			 "jnz 1b\n\t"
			 "mov %%r12, %%rsp"
			 : [n] "+r"(n)
			 : [sp] "r"(sp)
			 : "r12", "cc", "memory");
}

static int spin_mostly_deep(void)
{
	uintptr_t lo = 0, l;
	char line[256];
	struct timespec t0, t;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]"))
			sscanf(line, "%lx-", &lo);
	if (f)
		fclose(f);
	if (!lo)
		return 40;
	l = (lo - (256 << 10)) & ~(uintptr_t)4095;
	*(volatile char *)l = 1;  /* our own fault grows the mapping to l */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		spin_at(l + 64, 1500000);  /* about 0.75 of the time */
		spin_at(0, 500000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 3);
	return 0;
}

static void test_busy_at_stack_end(void **state)
{
	if (access(LIB, R_OK))
		skip();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(spin_mostly_deep());
	usleep(200000);
	five_cycles(pid);
	expect_exit_0(pid);
}

/* A call that never returns (pause()): after the timeout the error says
 * where the thread waits - its system call and the file it is in - and
 * the thread is given back its registers (the child still answers). */
static void test_stuck_call_says_where(void **state)
{
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;

		close(fds[1]);
		_exit(read(fds[0], &c, 1) == 1 ? 0 : 20);
	}
	close(fds[0]);
	usleep(100000);
	char *why = NULL;
	uint64_t ret = 0;
	int err = inject_call(pid, (uint64_t)(uintptr_t)&pause, 0, &ret, &why);
	assert_true(err < 0);
	assert_non_null(why);
	if (!strstr(why, "did not return") || !strstr(why, "system call 34 at libc.so.6+"))
		fail_msg("message: %s", why);
	print_message("%s\n", why);
	free(why);
	assert_int_equal(write(fds[1], "x", 1), 1);
	expect_exit_0(pid);
	close(fds[1]);
}

/* A thread that spends much of its time in malloc and free: a call run
 * while it holds a malloc arena's lock would wait on it for ever (and
 * keep the loader's lock, so the job's own next dlopen hangs).  Five
 * dlopen/dlclose cycles go through, and the child's own dlopen afterwards
 * returns (an alarm fails it otherwise). */
static volatile sig_atomic_t churn_stop;
static void on_term(int sig) { churn_stop = 1; }

static int churn(void)
{
	signal(SIGTERM, on_term);
	while (!churn_stop) {
		void *v[16];

		for (int i = 0; i < 16; i++)
			v[i] = malloc(64 + i * 512);
		for (int i = 0; i < 16; i++)
			free(v[i]);
		for (volatile int i = 0; i < 200; i++)
			;
	}
	alarm(5);
	void *h = dlopen("libm.so.6", RTLD_NOW);
	return h ? 0 : 30;
}

static void test_busy_in_malloc(void **state)
{
	if (access(LIB, R_OK))
		skip();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(churn());
	usleep(100000);
	five_cycles(pid);
	kill(pid, SIGTERM);
	expect_exit_0(pid);
}

static const char maps_stack[] =
	"7ffc6537b000-7ffc6539e000 rw-p 00000000 00:00 0 [stack]\n";

static void test_stack_room(void **state)
{
	FILE *f = memf(maps_stack);
	assert_int_equal(inject_stack_room(f, 0x7ffc6539d000, 4096), 1);
	fclose(f);
	f = memf(maps_stack);  /* 0x100 mapped below sp */
	assert_int_equal(inject_stack_room(f, 0x7ffc6537b100, 0x101), 0);
	fclose(f);
	f = memf(maps_stack);
	assert_int_equal(inject_stack_room(f, 0x7ffc6537b100, 0x100), 1);
	fclose(f);
	f = memf(maps_stack);  /* sp not in any mapping */
	assert_int_equal(inject_stack_room(f, 0x1000, 16), 0);
	fclose(f);
}

static const char maps_siblings[] =
	"7f4000000000-7f4000001000 r--p 00000000 08:01 5 /venv/nvidia/cuda_cupti/lib/libnvperf_host.so\n"
	"7f4000001000-7f4000002000 r--p 00000000 08:01 6 /venv/nvidia/cuda_cupti/lib/libcheckpoint.so\n"
	"7f4000002000-7f4000003000 r--p 00000000 08:01 7 /opt/x/libcupti_shim.so\n"
	"7f4000003000-7f4000004000 r--p 00000000 08:01 8 /usr/local/cuda-13.0/lib64/libcupti.so.2025.3.1 (deleted)\n";

/* A mapped libcupti is found (the one the agent must reuse), whoever
 * mapped it; CUPTI's siblings are not a libcupti. */
static void test_maps_cupti(void **state)
{
	char *path = NULL;
	FILE *f = memf(maps_kineto);

	assert_int_equal(inject_maps_cupti(f, &path), 1);
	assert_string_equal(path, "/venv/nvidia/cuda_cupti/lib/libcupti.so.12");
	fclose(f);
	free(path);
	f = memf(maps_ours);
	assert_int_equal(inject_maps_cupti(f, &path), 1);
	assert_string_equal(path, "/usr/local/cuda/lib64/libcupti.so.13");
	fclose(f);
	free(path);
	f = memf(maps_plain);
	assert_int_equal(inject_maps_cupti(f, &path), 0);
	assert_null(path);
	fclose(f);
	f = memf(maps_siblings);
	assert_int_equal(inject_maps_cupti(f, &path), 1);
	assert_string_equal(path, "/usr/local/cuda-13.0/lib64/libcupti.so.2025.3.1 (deleted)");
	fclose(f);
	free(path);
}

static void test_find_mappings(void **state)
{
	uint64_t base = 0;
	char *path = NULL;
	FILE *f = memf(maps_plain);
	assert_int_equal(inject_find_lib(f, "libc.so.6", &base, &path), 0);
	assert_int_equal(base, 0x7f3000000000ull);
	assert_string_equal(path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	fclose(f);
	free(path);
	f = memf(maps_ours);
	assert_int_equal(agent_find_mapping(f, AGENT_LIB_NAME, &path, &base), 0);
	assert_int_equal(base, 0x7f2000000000ull);
	assert_string_equal(path, "/opt/tbpf/libtbpf_agent.so");
	fclose(f);
	free(path);
	f = memf(maps_kineto);
	assert_int_equal(agent_find_mapping(f, AGENT_LIB_NAME, &path, &base), -ENOENT);
	fclose(f);
}

/* inject_elf_sym against our own libc: must equal the dynamic linker's. */
static void test_elf_sym_matches_loader(void **state)
{
	FILE *f = fopen("/proc/self/maps", "r");
	uint64_t base = 0, addr = 0;
	char *path = NULL;
	assert_non_null(f);
	assert_int_equal(inject_find_lib(f, "libc.so.6", &base, &path), 0);
	fclose(f);
	assert_int_equal(inject_elf_sym(path, "getpid", base, &addr), 0);
	assert_int_equal(addr, (uint64_t)(uintptr_t)&getpid);
	assert_int_equal(inject_elf_sym(path, "no_such_symbol_xyz", base, &addr), -ENOENT);
	free(path);
}

/* ---- a call that waits on a lock of a stopped thread --------------------- */

static int hold_fd = -1;

/* Called by dl_iterate_phdr with the loader's write lock held (dlopen
 * takes it to add a library): tell the parent, keep it 300 ms. */
static int hold_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)info; (void)size; (void)data;
	if (write(hold_fd, "h", 1) != 1)
		_exit(40);
	usleep(300000);
	return 1;
}

static void *holder(void *arg)
{
	(void)arg;
	dl_iterate_phdr(hold_cb, NULL);
	return NULL;
}

/* The main arena's lock instead: malloc_stats() holds it while it prints
 * each arena's lines to stderr, here an unbuffered cookie stream whose
 * first write tells the parent and keeps the lock 300 ms.  The call's
 * dlopen, on the main thread (the main arena's), allocates its link map
 * there. */
static ssize_t arena_write(void *c, const char *buf, size_t n)
{
	static int told;

	(void)c; (void)buf;
	if (!told++) {
		if (write(hold_fd, "h", 1) != 1)
			_exit(40);
		usleep(300000);
	}
	return (ssize_t)n;
}

static void *arena_holder(void *arg)
{
	cookie_io_functions_t io = { .write = arena_write };
	FILE *f = fopencookie(NULL, "w", io);

	(void)arg;
	if (!f || setvbuf(f, NULL, _IONBF, 0))
		_exit(43);
	stderr = f;
	malloc_stats();
	return NULL;
}

struct stall_seen {
	pid_t pid, caller;
	int let_run, restop;
};

static void seen_let_run(void *ctx, pid_t caller)
{
	struct stall_seen *s = ctx;

	s->let_run++;
	s->caller = caller;
	kill(s->pid, SIGCONT);
}

static void seen_restop(void *ctx, pid_t caller)
{
	struct stall_seen *s = ctx;

	(void)caller;
	s->restop++;
	kill(s->pid, SIGSTOP);
}

/* tbpf run --inproc's case: the whole process stopped while one thread
 * holds a lock the dlopen needs (the loader's write lock, from
 * dl_iterate_phdr; the main malloc arena's, from malloc_stats).  The call
 * stalls, let_run lets the holder go on, the dlopen returns, restop stops
 * the process again; the child lives on. */
static void stalled_case(void *(*hold)(void *))
{
	int pfd[2], status;
	char c;

	if (access(LIB, R_OK))
		skip();
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pthread_t th;

		close(pfd[0]);
		hold_fd = pfd[1];
		signal(SIGUSR1, on_usr1);
		if (pthread_create(&th, NULL, hold, NULL))
			_exit(41);
		while (!stop)
			pause();   /* main thread: quiet, the one the call runs on */
		pthread_join(th, NULL);
		_exit(dlopen("libbz2.so.1.0", RTLD_NOLOAD | RTLD_NOW) ? 0 : 42);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &c, 1), 1);   /* the holder has the lock */
	close(pfd[0]);
	kill(pid, SIGSTOP);
	assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
	assert_true(WIFSTOPPED(status));

	struct stall_seen seen = { .pid = pid };
	struct inject_stall st = { 50, seen_let_run, seen_restop, &seen };
	uint64_t h = 0;
	char *why = NULL;
	int err = inject_dlopen_stall(pid, LIB, 0, &st, &h, &why);

	if (err)
		fail_msg("stalled dlopen: %s", why);
	assert_int_not_equal(h, 0);
	assert_true(seen.let_run >= 1);   /* again every 50 ms while it waits */
	assert_int_equal(seen.restop, 1);
	assert_int_equal(seen.caller, pid);
	assert_int_equal(lib_mapped(pid, "libbz2.so"), 1);
	kill(pid, SIGCONT);
	kill(pid, SIGUSR1);
	expect_exit_0(pid);   /* 42: the library was not loaded in the child */
	free(why);
}

static void test_stalled_call_lets_others_run(void **state) { stalled_case(holder); }
static void test_stalled_on_malloc_arena(void **state) { stalled_case(arena_holder); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_maps_cupti),
		cmocka_unit_test(test_find_mappings),
		cmocka_unit_test(test_elf_sym_matches_loader),
		cmocka_unit_test(test_refuses_dead_and_relative),
		cmocka_unit_test(test_registers_survive),
		cmocka_unit_test(test_blocked_syscall_resumes),
		cmocka_unit_test(test_stack_room),
		cmocka_unit_test(test_deep_stack_refused),
		cmocka_unit_test(test_deep_stack_other_thread),
		cmocka_unit_test(test_busy_at_stack_end),
		cmocka_unit_test(test_busy_in_malloc),
		cmocka_unit_test(test_stuck_call_says_where),
		cmocka_unit_test(test_stalled_call_lets_others_run),
		cmocka_unit_test(test_stalled_on_malloc_arena),
	};
	return cmocka_run_group_tests_name("inject", tests, NULL, NULL);
}
