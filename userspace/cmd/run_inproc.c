/* run_inproc.c - `tbpf run --inproc` (see run_inproc.h).
 *
 * The uprobe mode's `tbpf run` holds the command where it maps
 * libtorch_cpu and attaches its op probes there.  The in-process agent
 * cannot register its callbacks at that point (libtorch is mapped, not
 * initialized), nor is there a Python interpreter to read yet in every
 * case.  So the hold goes on to the first RecordFunction check
 * (bpf/runhold.bpf.h): the command stops before its first op, the agent is
 * loaded there (ptrace + dlopen on the stopped thread) and STARTed, and
 * the command continues: every op it runs is recorded. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "exitcode.h"
#include "inject.h"
#include "run_inproc.h"
#include "session.h"
#include "grow.h"
#include "strf.h"

#define HOLD_POLL_US 2000

/* Gone, or a zombie of ours (the command is tbpf's child). */
static bool gone(pid_t pid)
{
	siginfo_t si = { 0 };

	if (kill(pid, 0) && errno == ESRCH)
		return true;
	return !waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == pid;
}

/* 0 when the hold stopped it; -ESRCH when it exited; -EINTR on a signal. */
static int wait_held(struct session *s, pid_t pid, volatile sig_atomic_t *stop)
{
	while (!*stop) {
		if (session_torch_held(s))
			return 0;
		if (gone(pid))
			return -ESRCH;
		usleep(HOLD_POLL_US);
	}
	return -EINTR;
}

/* The hold's own session (none given), or the run's. */
static struct session *hold_open(const struct live_opts *o, struct session *given, int *rc)
{
	struct session_config cfg = {
		.exits = EXITS_INFER, .no_hist = true, .modcalls_only = true, .run_hold = true,
		.only_pid = o->sel.pids[0], .no_multi = o->no_multi, .verbose = o->verbose,
	};
	char *why = NULL;
	int code = 0;
	struct session *s = given ? given : session_open(&cfg, &why, &code);

	if (!s) {
		fprintf(stderr, "tbpf: %s\n", why ? why : "cannot load the hold");
		free(why);
		*rc = tbpf_exit_of(code);
	}
	return s;
}

/* Close a session the hold opened itself. */
static void hold_close(struct session *s, struct session *given)
{
	if (s != given)
		session_close(s);
}

int run_inproc_hold_torch(const struct live_opts *o, volatile sig_atomic_t *stop,
			  struct session *given, struct session **hold)
{
	pid_t pid = o->sel.pids[0];
	char *why = NULL;
	int rc = 0, err;
	struct session *s = hold_open(o, given, &rc);

	*hold = NULL;
	if (!s)
		return rc;
	err = session_hold_torch(s, &why);
	if (err) {
		fprintf(stderr, "tbpf: --inproc: %s\n", why ? why : strerror(-err));
		free(why);
		hold_close(s, given);
		return TBPF_EXIT_ERROR;
	}
	if (o->release)
		o->release(o->release_ctx);
	err = wait_held(s, pid, stop);
	if (err) {
		if (err == -ESRCH)
			fprintf(stderr, "tbpf: pid %d exited before it loaded libtorch\n", pid);
		hold_close(s, given);
		return err == -EINTR ? TBPF_EXIT_OK : TBPF_EXIT_ERROR;
	}
	if (o->verbose)
		fprintf(stderr, "tbpf: pid %d held where it loaded libtorch\n", pid);
	*hold = s;
	return 0;
}

int run_inproc_hold_first_op(const struct live_opts *o, struct session *hold,
			     volatile sig_atomic_t *stop)
{
	pid_t pid = o->sel.pids[0];
	char path[64], *lib = NULL, *why = NULL;
	uint64_t base;
	FILE *maps;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	maps = fopen(path, "re");
	err = maps ? inject_find_lib(maps, "libtorch_cpu.so", &base, &lib) : -errno;
	if (maps)
		fclose(maps);
	if (!err)
		err = session_hold_first_op(hold, lib, &why);
	if (err) {
		fprintf(stderr, "tbpf: --inproc: pid %d: %s\n", pid,
			why ? why : lib ? strerror(-err) : "libtorch_cpu not found in its maps");
		free(why);
		free(lib);
		return TBPF_EXIT_ERROR;
	}
	free(lib);
	err = wait_held(hold, pid, stop);
	if (err == -ESRCH) {
		fprintf(stderr, "tbpf: pid %d exited before it ran an op\n", pid);
		return RUN_INPROC_NONE;
	}
	if (err)
		return RUN_INPROC_NONE;   /* a signal: nothing recorded */
	if (o->verbose)
		fprintf(stderr, "tbpf: pid %d held at its first op while the in-process agent "
				"loads\n", pid);
	return 0;
}

void run_inproc_release(struct session *hold)
{
	if (hold)
		session_close(hold);   /* continues it (session_hold_release) */
}

void run_inproc_hand_over(struct session *hold)
{
	if (!hold)
		return;
	session_hold_keep(hold);
	session_close(hold);
}

/* The threads of pid (malloc'd *v, *n of them).  0 or -errno. */
static int tasks_of(pid_t pid, pid_t **v, size_t *n)
{
	char path[64];
	struct dirent *e;
	size_t cap = 0;
	DIR *d;

	*v = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if (!(d = opendir(path)))
		return -errno;
	while ((e = readdir(d))) {
		long t = strtol(e->d_name, NULL, 10);

		if (t <= 0)
			continue;
		if (GROW(*v, *n, cap, 16)) {
			closedir(d);
			free(*v);
			*v = NULL;
			return -ENOMEM;
		}
		(*v)[(*n)++] = (pid_t)t;
	}
	closedir(d);
	return 0;
}

/* Every thread the command had at its first op (tasks: taken while the
 * whole process was stopped, before the agent's control thread existed)
 * under ptrace, the one at the first op first: SIGCONT then wakes the
 * control thread alone.  A thread that exited meanwhile is skipped; one
 * that cannot be held (traced by another, ...) is named on stderr and
 * runs on.  0, or -errno with *why when the first-op thread cannot be
 * held (the others already held are let go). */
static int hold_threads(pid_t pid, pid_t first, const pid_t *tasks, size_t ntasks,
			struct run_held *held, char **why)
{
	int err;

	held->tids = calloc(ntasks + 1, sizeof(*held->tids));
	held->n = 0;
	if (!held->tids)
		return -ENOMEM;
	if ((err = inject_hold_thread(first, why)))
		return err;
	held->tids[held->n++] = first;
	for (size_t i = 0; i < ntasks; i++) {
		char *w = NULL;

		if (tasks[i] == first)
			continue;
		err = inject_hold_thread(tasks[i], &w);
		if (!err)
			held->tids[held->n++] = tasks[i];
		else if (err != -ESRCH)
			fprintf(stderr, "tbpf: pid %d: thread %d not held while the callbacks are "
					"registered (ops it runs in those milliseconds are not "
					"recorded): %s\n", pid, tasks[i], w ? w : strerror(-err));
		free(w);
	}
	return 0;
}

/* Every thread of pid but `except` stopped (or gone), within 1 s. */
static void wait_all_stopped(pid_t pid, pid_t except)
{
	for (int waited = 0; waited < 1000; waited++) {
		pid_t *tasks = NULL;
		size_t n = 0;
		bool all = true;

		if (tasks_of(pid, &tasks, &n))
			return;
		for (size_t i = 0; i < n && all; i++) {
			char path[64], st[256] = "";
			FILE *f;

			if (tasks[i] == except)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tasks[i]);
			if ((f = fopen(path, "re"))) {
				const char *p;

				if (fgets(st, sizeof(st), f) && (p = strrchr(st, ')')))
					all = p[2] == 'T' || p[2] == 't' || p[2] == 'Z' || p[2] == 'X';
				fclose(f);
			}
		}
		free(tasks);
		if (all)
			return;
		usleep(1000);
	}
}

/* The agent's dlopen runs on one thread while the whole process is
 * stopped.  Another thread may have stopped inside its own dlopen (an
 * import: the loader's lock) or malloc (an arena's lock): the call then
 * waits for it (1 run in 15-30 of test_inproc_run's two-thread case on
 * torch 2.8; a check of the threads' pcs for the loader left 1 in 311,
 * the holder being in a library's constructor or in libc).  So a call
 * that has not returned after STALL_MS lets the others run until it
 * returns: the first-op thread held under ptrace and the hold armed
 * again (another thread's first op stops them all before the op runs). */
#define STALL_MS 100
#define STALL_HELD_MAX 64

struct stall {
	struct session *hold;
	pid_t pid, first;
	bool verbose, told;
	pid_t held[STALL_HELD_MAX];   /* seized while the others run */
	size_t nheld;
};

/* Seize tid (at its first op: not to run it before the callbacks) unless
 * it runs the call or is held already. */
static void stall_hold(struct stall *st, pid_t tid, pid_t caller)
{
	char *w = NULL;

	if (!tid || tid == caller || inject_tid_in(tid, st->held, st->nheld) ||
	    st->nheld == STALL_HELD_MAX)
		return;
	if (!inject_hold_thread(tid, &w))
		st->held[st->nheld++] = tid;
	else
		fprintf(stderr, "tbpf: pid %d: thread %d not held while the agent loads "
				"(its first op may not be recorded): %s\n", st->pid, tid, w ? w : "?");
	free(w);
}

/* The call waits: the first-op thread, and any thread whose first op the
 * hold stopped since, seized; the hold armed again; the others run. */
static void stall_let_run(void *ctx, pid_t caller)
{
	struct stall *st = ctx;

	stall_hold(st, st->first, caller);
	if (session_torch_held(st->hold))
		stall_hold(st, session_hold_tid(st->hold), caller);
	if (st->verbose && !st->told)
		fprintf(stderr, "tbpf: pid %d: the agent's dlopen waited %d ms on a lock of a "
				"stopped thread; the others run until it returns\n", st->pid,
			STALL_MS);
	st->told = true;
	session_hold_again(st->hold);
	kill(st->pid, SIGCONT);
}

static void stall_restop(void *ctx, pid_t caller)
{
	struct stall *st = ctx;

	(void)caller;
	kill(st->pid, SIGSTOP);
	wait_all_stopped(st->pid, st->first);
	for (size_t i = 0; i < st->nheld; i++)
		inject_unhold_thread(st->held[i]);   /* back into the group stop */
}

/* tasks plus the threads seized while the call waited (a thread started
 * then is not in the list taken before it). */
static int tasks_add(pid_t **tasks, size_t *n, const pid_t *more, size_t nmore)
{
	size_t cap = *n;

	for (size_t i = 0; i < nmore; i++) {
		if (inject_tid_in(more[i], *tasks, *n))
			continue;
		if (GROW(*tasks, *n, cap, 16))
			return -ENOMEM;
		(*tasks)[(*n)++] = more[i];
	}
	return 0;
}

int run_inproc_load(const struct live_opts *o, struct session *hold, const char *agent,
		    struct run_held *held)
{
	pid_t pid = o->sel.pids[0], tid = session_hold_tid(hold);
	struct stall stall = { .hold = hold, .pid = pid, .first = tid, .verbose = o->verbose };
	struct inject_stall st = { STALL_MS, stall_let_run, stall_restop, &stall };
	uint64_t handle = 0;
	pid_t *tasks = NULL;
	size_t ntasks = 0;
	char *why = NULL;
	int err;

	memset(held, 0, sizeof(*held));
	/* the whole process is stopped: its threads now are the ones that
	 * may run ops; the call runs on one thread and leaves it stopped
	 * again (inject.c), the agent's control thread created stopped too */
	if ((err = tasks_of(pid, &tasks, &ntasks)))
		why = strf("cannot list its threads: %s", strerror(-err));
	if (!err)
		err = inject_dlopen_stall(pid, agent, INJECT_FORCE, &st, &handle, &why);
	if (!err && (err = tasks_add(&tasks, &ntasks, stall.held, stall.nheld)))
		why = strf("out of memory");
	if (!err)
		err = hold_threads(pid, tid, tasks, ntasks, held, &why);
	free(tasks);
	if (err) {
		run_inproc_go(held);
		fprintf(stderr, "tbpf: pid %d: loading the in-process agent at its first op: %s\n",
			pid, why ? why : strerror(-err));
		free(why);
		return err == -EPERM || err == -EACCES ? TBPF_EXIT_PRIV : TBPF_EXIT_ERROR;
	}
	if (o->verbose)
		fprintf(stderr, "tbpf: pid %d: %zu threads held while the callbacks are registered\n",
			pid, held->n);
	/* the agent's control thread runs (it serves START); the held
	 * threads wait under ptrace until the callbacks are in */
	session_hold_keep(hold);
	kill(pid, SIGCONT);
	return 0;
}

void run_inproc_go(struct run_held *held)
{
	/* the first-op thread last: the others were never in an op */
	for (size_t i = held->n; i-- > 0;)
		inject_unhold_thread(held->tids[i]);
	free(held->tids);
	held->tids = NULL;
	held->n = 0;
}
