/* inject.c - attach stage for --inject: run dlopen/dlclose inside a running
 * process on one ptrace-stopped thread, then put everything back.
 *
 * Sequence: PTRACE_SEIZE one thread (no PTRACE_O_EXITKILL: if tbpf dies the
 * kernel detaches and the target lives), PTRACE_INTERRUPT, save the general
 * registers and the whole xstate (FP/SSE/AVX: dlopen clobbers them), write
 * the library path below the red zone of the thread's stack, set up
 * `call fn(args)` with return address 0, continue until the SIGSEGV at
 * address 0, read rax, restore the stack bytes and every register, detach.
 * Catchable signals are blocked in tbpf meanwhile so ^C cannot abandon the
 * target inside the call; SIGKILL of tbpf during the call (a few ms) is
 * the one unhandled case (see agent/README.md).
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "inject.h"
#include "elfsym.h"
#include "procmaps.h"
#include "remote.h"

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif
#define RED_ZONE 128
#define CALL_TIMEOUT_MS 10000
/* Room a call with len bytes of data needs below the stack pointer when
 * it starts: red zone, slack, the data, the return slot, alignment.  (What
 * the called function uses beyond that grows the stack as usual: those
 * are the thread's own faults.) */
#define CALL_FRAME(len) (RED_ZONE + 256 + (len) + 48)
#define CALL_DATA_MAX 4096   /* checked by the callers, before begin() */
#define XSTATE_MAX (64 * 1024)

static int fail(char **why, int err, const char *fmt, ...)
{
	if (why) {
		va_list ap;
		va_start(ap, fmt);
		free(*why);
		if (vasprintf(why, fmt, ap) < 0)
			*why = NULL;
		va_end(ap);
	}
	return err;
}

/* ---- pure helpers: maps and ELF ---------------------------------------- */
static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

int inject_find_lib(FILE *maps, const char *lib_prefix, uint64_t *base, char **elf_path)
{
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	while (getline(&line, &cap, maps) > 0) {
		unsigned long lo, hi, off;
		int path_at = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &path_at) < 3 ||
		    !path_at || line[path_at] != '/')
			continue;
		char *path = line + path_at;
		path[strcspn(path, "\n")] = 0;
		const char *b = base_name(path);
		if (strncmp(b, lib_prefix, strlen(lib_prefix)) || off != 0)
			continue;
		*base = lo;
		*elf_path = strdup(path);
		found = *elf_path != NULL;
		break;
	}
	free(line);
	return found ? 0 : -ENOENT;
}

static int elf_sym_typed(const char *elf_path, const char *name, uint64_t base, uint64_t *addr,
			 int type)
{
	struct elf_file *ef;
	struct elf_sym sym;
	uint64_t first_vaddr;
	int err = elf_file_open(elf_path, &ef);

	if (err)
		return err;
	/* base maps the segment at file offset 0 */
	if (elf_file_off_to_vaddr(ef, 0, false, &first_vaddr))
		err = -EINVAL;
	else if (elf_file_find_sym(ef, name, &sym) || !sym.defined || !sym.dynamic ||
		 sym.type != type)
		err = -ENOENT;
	else
		*addr = base + sym.value - first_vaddr;
	elf_file_close(ef);
	return err;
}

int inject_elf_sym(const char *elf_path, const char *name, uint64_t base, uint64_t *addr)
{
	return elf_sym_typed(elf_path, name, base, addr, STT_FUNC);
}

int inject_elf_obj(const char *elf_path, const char *name, uint64_t base, uint64_t *addr)
{
	return elf_sym_typed(elf_path, name, base, addr, STT_OBJECT);
}

int inject_stack_room(FILE *maps, uint64_t sp, uint64_t need)
{
	struct pm_maps m;
	const struct pm_entry *e;
	int ok;

	if (procmaps_parse(maps, &m) < 0)
		return -EINVAL;
	e = procmaps_find(&m, sp - 1);
	ok = e && sp - e->start >= need;
	procmaps_free(&m);
	return ok;
}

/* The libcupti rule of the agent (agent/cupti_pick.h): base name
 * libcupti.so, libcupti.so.N, libcupti.so.N.M... */
static bool is_cupti(const char *path)
{
	const char *b = base_name(path);

	return !strncmp(b, "libcupti.so", 11) && (b[11] == 0 || b[11] == '.');
}

int inject_maps_cupti(FILE *maps, char **path)
{
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	*path = NULL;
	while (!found && getline(&line, &cap, maps) > 0) {
		char *p = strchr(line, '/');

		if (!p)
			continue;
		p[strcspn(p, "\n")] = 0;
		if (!is_cupti(p))
			continue;
		*path = strdup(p);
		found = *path ? 1 : -ENOMEM;
	}
	free(line);
	return found;
}

/* ---- remote memory ------------------------------------------------------- */
/* ---- thread choice ------------------------------------------------------- *
 * A thread blocked in a syscall is not inside malloc or the loader holding
 * their locks, so calling dlopen on it cannot self-deadlock; prefer one. */
bool inject_tid_in(pid_t tid, const pid_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == tid)
			return true;
	return false;
}

/* System calls a thread waits in between its own work: a call run there
 * takes no lock the thread holds (x86-64 numbers). */
static bool quiet_nr(long nr)
{
	static const long quiet[] = { 0 /* read */, 7 /* poll */, 23 /* select */,
		24 /* sched_yield */, 34 /* pause */, 35 /* nanosleep */, 43 /* accept */,
		45 /* recvfrom */, 47 /* recvmsg */, 61 /* wait4 */, 128 /* rt_sigtimedwait */,
		130 /* rt_sigsuspend */, 202 /* futex */, 230 /* clock_nanosleep */,
		232 /* epoll_wait */, 247 /* waitid */, 270 /* pselect6 */, 271 /* ppoll */,
		281 /* epoll_pwait */, 288 /* accept4 */, 441 /* epoll_pwait2 */ };

	for (size_t i = 0; i < sizeof(quiet) / sizeof(*quiet); i++)
		if (nr == quiet[i])
			return true;
	return false;
}

/* The thread to run calls on: never one in `skip` (tried already); 0 when
 * every thread is skipped. */
static pid_t pick_thread(pid_t pid, const pid_t *skip, size_t nskip)
{
	char path[64];
	pid_t best = inject_tid_in(pid, skip, nskip) ? 0 : pid;
	int best_quiet = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return best;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = atoi(de->d_name);
		if (tid <= 0 || inject_tid_in(tid, skip, nskip))
			continue;
		/* Never the agent's own control thread: a dlclose run on it
		 * would unmap the code and the condition variable it waits on
		 * (its futex wait then fails with EFAULT and glibc aborts). */
		char comm[32] = "";
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
		FILE *c = fopen(path, "re");
		if (c) {
			if (!fgets(comm, sizeof(comm), c))
				comm[0] = 0;
			fclose(c);
		}
		if (!strncmp(comm, "tbpf-agent", 10))
			continue;
		if (!best)
			best = tid;  /* main thread skipped: any other, quiet or not */
		long nr;
		uint64_t pc;

		inject_thread_at(tid, &nr, &pc);
		/* main thread first, else the first quiet one */
		if (quiet_nr(nr) && (tid == pid || !best_quiet)) {
			best = tid;
			best_quiet = 1;
		}
	}
	closedir(d);
	return best;
}

/* ---- the stopped thread ---------------------------------------------------- */
struct tstop {
	pid_t tid;
	struct user_regs_struct regs;
	void *xstate;
	size_t xlen;
};

static int wait_stop(pid_t tid, int *status, int timeout_ms)
{
	for (int waited = 0;; waited++) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);
		if (r == tid)
			return 0;
		if (r < 0)
			return -errno;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

static const char *yama_scope(void)
{
	static char buf[32];
	int scope = -1;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	if (scope < 0)
		return "no yama";
	snprintf(buf, sizeof(buf), "yama ptrace_scope=%d", scope);
	return buf;
}

static int seize(pid_t pid, struct tstop *t, char **why)
{
	int status, err = 0;
	if (ptrace(PTRACE_SEIZE, t->tid, 0, 0) < 0) {
		err = -errno;
		if (err == -EPERM)
			return fail(why, err, "ptrace of %d not permitted (%s; "
				    "needs root or CAP_SYS_PTRACE, and no other tracer)", pid,
				    yama_scope());
		return fail(why, err, "PTRACE_SEIZE %d: %s", t->tid, strerror(-err));
	}
	if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0 ||
	    (err = wait_stop(t->tid, &status, 2000)) < 0) {
		err = err ? err : -errno;
		ptrace(PTRACE_DETACH, t->tid, 0, 0);
		return fail(why, err, "stopping thread %d: %s", t->tid, strerror(-err));
	}
	if (!WIFSTOPPED(status)) {
		return fail(why, -ESRCH, "thread %d exited", t->tid);
	}
	/* A real signal may be reported before our interrupt: it stays pending
	 * in the kernel only if we pass it back at detach; keep it simple and
	 * refuse (the caller retries). */
	/* a thread of a stopped process (tbpf run --inproc holds the command
	 * with SIGSTOP at its first op) reports its group stop as an event
	 * stop too: the call runs, and the detach puts it back in that stop */
	if ((status >> 16) != PTRACE_EVENT_STOP ||
	    (WSTOPSIG(status) != SIGTRAP && WSTOPSIG(status) != SIGSTOP)) {
		ptrace(PTRACE_DETACH, t->tid, 0, WSTOPSIG(status));
		return fail(why, -EAGAIN, "thread %d stopped by signal %d; retry", t->tid,
			    WSTOPSIG(status));
	}
	if (ptrace(PTRACE_GETREGS, t->tid, 0, &t->regs) < 0)
		goto regs_fail;
	t->xstate = calloc(1, XSTATE_MAX);
	struct iovec iov = { t->xstate, XSTATE_MAX };
	if (!t->xstate || ptrace(PTRACE_GETREGSET, t->tid, NT_X86_XSTATE, &iov) < 0)
		goto regs_fail;
	t->xlen = iov.iov_len;
	return 0;
regs_fail:
	err = -errno;
	free(t->xstate);
	t->xstate = NULL;
	ptrace(PTRACE_DETACH, t->tid, 0, 0);
	return fail(why, err ? err : -ENOMEM, "saving registers of %d: %s", t->tid, strerror(errno));
}

static int release(struct tstop *t)
{
	struct iovec iov = { t->xstate, t->xlen };
	int err = 0;
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &t->regs) < 0)
		err = -errno;
	if (ptrace(PTRACE_SETREGSET, t->tid, NT_X86_XSTATE, &iov) < 0 && !err)
		err = -errno;
	if (ptrace(PTRACE_DETACH, t->tid, 0, 0) < 0 && !err)
		err = -errno;
	free(t->xstate);
	t->xstate = NULL;
	return err;
}

/* Where a thread running an injected call waits, for the message when
 * the call does not return: its system call and program counter
 * (/proc/TID/syscall: "nr args... sp pc", or "running") as file+offset
 * (procmaps). */
bool inject_thread_at(pid_t tid, long *nr, uint64_t *pc)
{
	char path[64], sc[256] = "";
	FILE *f;

	*nr = -1;
	*pc = 0;
	snprintf(path, sizeof(path), "/proc/%d/syscall", tid);
	if (!(f = fopen(path, "re")))
		return false;
	if (fgets(sc, sizeof(sc), f)) {
		char *last = strrchr(sc, ' ');

		if (sscanf(sc, "%ld", nr) != 1)
			*nr = -1;
		if (last)
			*pc = strtoull(last + 1, NULL, 16);
	}
	fclose(f);
	return !strncmp(sc, "running", 7);
}

static void stuck_where(pid_t tid, char *buf, size_t size)
{
	char path[64];
	const struct pm_entry *e;
	struct pm_maps m;
	uint64_t pc;
	long nr;
	bool running = inject_thread_at(tid, &nr, &pc);
	FILE *f;

	if (!pc) {
		snprintf(buf, size, "%s", nr < 0 && running ? "running" : "state unknown");
		return;
	}
	snprintf(buf, size, "in system call %ld at %#llx", nr, (unsigned long long)pc);
	snprintf(path, sizeof(path), "/proc/%d/maps", tid);
	if (!(f = fopen(path, "re")))
		return;
	if (!procmaps_parse(f, &m)) {
		if ((e = procmaps_find(&m, pc)) && e->path)
			snprintf(buf, size, "in system call %ld at %s+%#llx", nr, base_name(e->path),
				 (unsigned long long)(pc - e->start + e->offset));
		procmaps_free(&m);
	}
	fclose(f);
}

/* Wait for the thread running a call to stop; with st, every st->after_ms
 * it has not, let the others run (*stalled once it has). */
static int call_wait(pid_t tid, const struct inject_stall *st, bool *stalled, int *status)
{
	int err, waited = 0;

	if (!st)
		return wait_stop(tid, status, CALL_TIMEOUT_MS);
	for (;;) {
		int ms = st->after_ms < CALL_TIMEOUT_MS - waited ? st->after_ms
								 : CALL_TIMEOUT_MS - waited;

		if ((err = wait_stop(tid, status, ms)) != -ETIMEDOUT)
			return err;
		waited += ms;
		if (waited >= CALL_TIMEOUT_MS)
			return err;
		*stalled = true;
		st->let_run(st->ctx, tid);
	}
}

/* Call fn(a0, a1) on the stopped thread; `data` (len bytes) is copied to the
 * stack first and its address replaces a0 when a0 == UINT64_MAX.  st: see
 * struct inject_stall (NULL: none). */
static int remote_call(struct tstop *t, uint64_t fn, uint64_t a0, uint64_t a1,
		       const void *data, size_t len, const struct inject_stall *st,
		       uint64_t *ret, char **why)
{
	bool stalled = false;
	struct user_regs_struct r = t->regs;
	uint64_t top = (t->regs.rsp - RED_ZONE - 256) & ~15ull;
	uint64_t data_at = (top - len) & ~15ull;
	uint64_t sp = data_at - 8;  /* return address slot; (sp + 8) % 16 == 0 */
	size_t span = top - sp;
	char *saved = malloc(span), *img = calloc(1, span);
	int err, status;

	if (!saved || !img) {
		err = fail(why, -ENOMEM, "out of memory");
		goto out;
	}
	if ((err = remote_read(t->tid, sp, saved, span)) < 0) {
		fail(why, err, "reading target stack: %s", strerror(-err));
		goto out;
	}
	memcpy(img + 8, data, len);  /* img[0..8) = return address 0 */
	if ((err = remote_write(t->tid, sp, img, span)) < 0) {
		fail(why, err, "writing target stack: %s", strerror(-err));
		goto out;
	}
	r.rip = fn;
	r.rsp = sp;
	r.rdi = a0 == UINT64_MAX ? data_at : a0;
	r.rsi = a1;
	r.rax = 0;
	r.orig_rax = -1;  /* no syscall restart on this resume */
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r) < 0) {
		err = fail(why, -errno, "setting registers: %s", strerror(errno));
		goto restore;
	}
	int sig = 0;
	for (;;) {
		if (ptrace(PTRACE_CONT, t->tid, 0, sig) < 0) {
			err = fail(why, -errno, "resuming %d: %s", t->tid, strerror(errno));
			goto restore;
		}
		if ((err = call_wait(t->tid, st, &stalled, &status)) < 0) {
			char where[160];

			stuck_where(t->tid, where, sizeof(where));
			ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
			wait_stop(t->tid, &status, 1000);
			fail(why, err, "call in target did not return within %d ms (thread %d %s; "
			     "target state may be inconsistent)", CALL_TIMEOUT_MS, t->tid, where);
			goto restore;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			err = fail(why, -ESRCH, "target died during the call");
			goto out;
		}
		sig = WSTOPSIG(status);
		if ((status >> 16) == PTRACE_EVENT_STOP) {
			sig = 0;  /* group stop or our interrupt: keep going */
			continue;
		}
		if (sig != SIGSEGV) {
			continue;  /* deliver unrelated signals to the target */
		}
		struct user_regs_struct now;
		if (ptrace(PTRACE_GETREGS, t->tid, 0, &now) < 0) {
			err = fail(why, -errno, "reading result: %s", strerror(errno));
			goto restore;
		}
		if (now.rip != 0) {
			err = fail(why, -EFAULT, "call crashed in target at %#llx", now.rip);
			goto restore;
		}
		*ret = now.rax;
		break;
	}
restore:
	if (stalled)
		st->restop(st->ctx, t->tid);
	if (remote_write(t->tid, sp, saved, span) < 0 && !err)
		err = fail(why, -EIO, "restoring target stack");
out:
	free(saved);
	free(img);
	return err;
}

static int resolve(pid_t pid, const char *sym, uint64_t *addr)
{
	static const char *const libs[] = { "libc.so.6", "libc-2.", "libdl.so.2" };
	char path[64];
	for (size_t i = 0; i < sizeof(libs) / sizeof(*libs); i++) {
		snprintf(path, sizeof(path), "/proc/%d/maps", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			return -errno;
		uint64_t base;
		char *elf = NULL, *rooted = NULL;
		int err = inject_find_lib(f, libs[i], &base, &elf);
		fclose(f);
		if (err)
			continue;
		/* read the file the target sees (its mount namespace) */
		if (asprintf(&rooted, "/proc/%d/root%s", pid, elf) < 0)
			rooted = NULL;
		err = rooted ? inject_elf_sym(rooted, sym, base, addr) : -ENOMEM;
		free(rooted);
		free(elf);
		if (!err)
			return 0;
	}
	return -ENOENT;
}

/* 1: the thread at sp has room for a call frame below it; 0: it has not;
 * -errno: the maps could not be read (then the call goes ahead and a
 * failure is reported as it happens). */
static int stack_room(pid_t pid, uint64_t sp, size_t need)
{
	char path[64];
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	r = inject_stack_room(f, sp, need);
	fclose(f);
	return r;
}

static int no_room(pid_t pid, size_t need, char **why)
{
	return fail(why, -ENOSPC, "no thread of %d stopped where a call is safe (%zu bytes of "
		    "mapped stack below its stack pointer, outside libc and the loader); "
		    "try again", pid, need);
}

/* May the stopped thread run a call that takes libc's and the loader's
 * locks (dlopen: malloc, the loader's lock)?  Yes when it waits in a quiet
 * system call, or runs its own code; not inside libc or the loader, where
 * it may hold a malloc arena's or a stdio lock: the call then waits on its
 * own thread for ever, and the loader's lock it took stays held after the
 * timeout (seen under the fake GPU loop: the job's next dlopen hung).
 * Maps that cannot be read: yes, as before. */
static bool safe_point(pid_t pid, const struct tstop *t)
{
	char path[64];
	struct pm_maps m;
	const struct pm_entry *e;
	long nr = (long)t->regs.orig_rax;
	bool ok = true;
	FILE *f;

	if (nr >= 0)
		return quiet_nr(nr);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!(f = fopen(path, "re")))
		return true;
	if (!procmaps_parse(f, &m)) {
		e = procmaps_find(&m, t->regs.rip);
		if (e && e->path) {
			const char *b = base_name(e->path);

			ok = strncmp(b, "libc.so", 7) && strncmp(b, "libc-", 5) &&
			     strncmp(b, "ld-linux", 8);
		}
		procmaps_free(&m);
	}
	fclose(f);
	return ok;
}

/* How often begin() looks over the threads for one with stack room,
 * and how long it lets them run between looks. */
#define ROOM_ROUNDS 50
#define ROOM_PAUSE_US 2000

/* Every thread was too near the end of its stack: let them run on and
 * look again, up to ROOM_ROUNDS times (a busy thread moves its sp). */
static int look_again(int *round, size_t *ntried)
{
	if (++*round >= ROOM_ROUNDS)
		return 0;
	*ntried = 0;
	usleep(ROOM_PAUSE_US);
	return 1;
}

struct session {
	struct tstop t;
	sigset_t old;
};

/* Stop a thread to run calls on, one with `need` bytes of mapped stack
 * below its stack pointer. */
static int begin(pid_t pid, struct session *s, size_t need, char **why)
{
	sigset_t block;
	memset(s, 0, sizeof(*s));
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGPIPE);
	sigprocmask(SIG_BLOCK, &block, &s->old);
	pid_t tried[8];
	size_t ntried = 0;
	int err, round = 0;

	for (;;) {
		s->t.tid = pick_thread(pid, tried, ntried);
		if (!s->t.tid) {
			if (look_again(&round, &ntried))
				continue;
			err = no_room(pid, need, why);
			break;
		}
		err = seize(pid, &s->t, why);
		/* a signal raced with our interrupt: it was handed back; try again */
		for (int tries = 0; err == -EAGAIN && tries < 3; tries++) {
			usleep(1000);
			err = seize(pid, &s->t, why);
		}
		if (err || (stack_room(pid, s->t.regs.rsp, need) != 0 && safe_point(pid, &s->t)))
			break;
		/* Too near the end of a grow-down stack (writing there would
		 * fail, and the kernel logs "GUP no longer grows the stack"),
		 * or inside libc or the loader (safe_point): let this one go
		 * and take another thread, or this one a moment later. */
		if ((err = release(&s->t)) < 0) {
			fail(why, err, "restoring thread %d: %s", s->t.tid, strerror(-err));
			break;
		}
		if (ntried < sizeof(tried) / sizeof(*tried))
			tried[ntried++] = s->t.tid;
		else if (!look_again(&round, &ntried)) {
			err = no_room(pid, need, why);
			break;
		}
	}
	if (err)
		sigprocmask(SIG_SETMASK, &s->old, NULL);
	return err;
}

static int end(struct session *s, int err, char **why)
{
	int e2 = release(&s->t);
	sigprocmask(SIG_SETMASK, &s->old, NULL);
	if (e2 && !err)
		return fail(why, e2, "restoring thread %d: %s", s->t.tid, strerror(-e2));
	return err;
}

static void remote_dlerror(pid_t pid, struct tstop *t, char **why, const char *what)
{
	uint64_t fn, msg = 0;
	char buf[512] = "";
	if (!resolve(pid, "dlerror", &fn) &&
	    !remote_call(t, fn, 0, 0, "", 0, NULL, &msg, NULL) && msg) {
		for (size_t i = 0; i + 1 < sizeof(buf); i++) {
			if (remote_read(pid, msg + i, buf + i, 1) < 0 || !buf[i])
				break;
		}
	}
	fail(why, -ELIBBAD, "%s failed in target: %s", what, *buf ? buf : "(no dlerror)");
}

int inject_dlopen(pid_t pid, const char *lib_path, unsigned flags, uint64_t *handle, char **why)
{
	return inject_dlopen_stall(pid, lib_path, flags, NULL, handle, why);
}

int inject_dlopen_stall(pid_t pid, const char *lib_path, unsigned flags,
			const struct inject_stall *st, uint64_t *handle, char **why)
{
	char path[64];
	uint64_t fn, h = 0;
	int err;

	if (lib_path[0] != '/')
		return fail(why, -EINVAL, "library path must be absolute: %s", lib_path);
	if (access(lib_path, R_OK) < 0)
		return fail(why, -errno, "%s: %s", lib_path, strerror(errno));
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f && (errno == EACCES || errno == EPERM))
		return fail(why, -EPERM, "ptrace of %d not permitted (cannot read %s; needs "
			    "the same user (%s), root or CAP_SYS_PTRACE)",
			    pid, path, yama_scope());
	if (!f)
		return fail(why, -errno, "%s: %s", path, strerror(errno));
	/* readable maps: ptrace is permitted.  A libcupti mapped there is
	 * no reason to refuse (every PyPI torch 2.x maps one): the agent
	 * uses that copy, and a CUPTI already subscribed is what its
	 * cuptiSubscribe reports (AGENT_CONFLICT). */
	fclose(f);
	if ((err = resolve(pid, "dlopen", &fn)) < 0)
		return fail(why, err, "no dlopen in the libc of %d (glibc < 2.34 without libdl?)", pid);

	if (strlen(lib_path) + 1 > CALL_DATA_MAX)
		return fail(why, -ENAMETOOLONG, "library path too long: %s", lib_path);
	struct session s;
	if ((err = begin(pid, &s, CALL_FRAME(strlen(lib_path) + 1), why)))
		return err;
	err = remote_call(&s.t, fn, UINT64_MAX, 2 /* RTLD_NOW */, lib_path,
			  strlen(lib_path) + 1, st, &h, why);
	if (!err && !h) {
		remote_dlerror(pid, &s.t, why, "dlopen");
		err = -ELIBBAD;
	}
	err = end(&s, err, why);
	if (!err && handle)
		*handle = h;
	return err;
}

int inject_library(pid_t pid, const char *lib_path, char **why)
{
	return inject_dlopen(pid, lib_path, 0, NULL, why);
}

int inject_dlclose(pid_t pid, uint64_t handle, int *ret, char **why)
{
	uint64_t fn, r = 0;
	int err;
	if ((err = resolve(pid, "dlclose", &fn)) < 0)
		return fail(why, err, "no dlclose in the libc of %d", pid);
	struct session s;
	if ((err = begin(pid, &s, CALL_FRAME(0), why)))
		return err;
	err = remote_call(&s.t, fn, handle, 0, "", 0, NULL, &r, why);
	if (!err && (int)r != 0) {
		remote_dlerror(pid, &s.t, why, "dlclose");
		err = -ELIBBAD;
	}
	err = end(&s, err, why);
	if (ret)
		*ret = (int)r;
	return err;
}

int inject_call(pid_t pid, uint64_t fn, uint64_t arg, uint64_t *ret, char **why)
{
	uint64_t r = 0;
	int err;
	struct session s;

	if ((err = begin(pid, &s, CALL_FRAME(0), why)))
		return err;
	err = remote_call(&s.t, fn, arg, 0, "", 0, NULL, &r, why);
	err = end(&s, err, why);
	if (ret)
		*ret = r;
	return err;
}

/* ---- keeping one thread stopped (tbpf run --inproc) ----------------------- */
int inject_hold_thread(pid_t tid, char **why)
{
	int status, err = 0;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0)
		return fail(why, -errno, "PTRACE_SEIZE %d: %s", tid, strerror(errno));
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 || (err = wait_stop(tid, &status, 2000)) < 0) {
		err = err ? err : -errno;
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return fail(why, err, "stopping thread %d: %s", tid, strerror(-err));
	}
	if (!WIFSTOPPED(status))
		return fail(why, -ESRCH, "thread %d exited", tid);
	if ((status >> 16) != PTRACE_EVENT_STOP) {
		/* a signal reported first: it goes back at the detach */
		ptrace(PTRACE_DETACH, tid, 0, WSTOPSIG(status));
		return fail(why, -EAGAIN, "thread %d stopped by signal %d", tid, WSTOPSIG(status));
	}
	return 0;
}

int inject_unhold_thread(pid_t tid)
{
	return ptrace(PTRACE_DETACH, tid, 0, 0) < 0 ? -errno : 0;
}
