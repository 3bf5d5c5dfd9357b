/* guard.c - exception safety stage: the ptrace unwind guard process
 * (see guard.h for the why).  Only this process ptraces the target, and
 * it owns the return-probe links, so its exit order is the safe one no
 * matter how tbpf itself ends. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "tbpf_abi.h"
#include "forkclean.h"
#include "guard.h"
#include "uprobe.h"
#include "remote.h"
#include "grow.h"
#include "retaddr.h"

struct guard {
	size_t entry_probes;
	pid_t child;
	int cmd_fd;     /* write end: a byte or EOF means "stop" */
	int status_fd;  /* read end: the child's reports */
};

/* ---- pure planning ------------------------------------------------------ */

size_t guard_plan_repair(const struct tbpf_frame *frames, size_t n, const uint64_t *slot,
			 uint64_t tramp_page, size_t *out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		const struct tbpf_frame *f = &frames[i];

		if (!(f->flags & OPF_HIJACKED) || !f->sp || !f->ra)
			continue;
		if ((slot[i] & ~0xfffULL) != tramp_page)
			continue;   /* already returned, repaired, or never hijacked */
		if ((f->ra & ~0xfffULL) == tramp_page)
			continue;   /* no real address known for this slot */
		out[k++] = i;
	}
	return k;
}

/* ---- the child ------------------------------------------------------------ */

struct tracee {
	pid_t tid;
	int state;     /* 0 running, 1 stopped (shutdown), 2 gone */
	int pending;   /* signal to deliver at detach */
};

static FILE *glog;   /* TBPF_GUARD_LOG=FILE: every repair and stop, for debugging */

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL   /* linux/pidfd.h, Linux 6.9 */
#endif

bool guard_thread_store_ok(void)
{
	int fd;

	/* testing aid: take the pre-6.9 path (tid-keyed hash) here too */
	if (getenv("TBPF_THREAD_HASH"))
		return false;
	fd = (int)syscall(SYS_pidfd_open, getpid(), PIDFD_THREAD);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* A process forked by a target thread: held at its first stop until the
 * forking thread's fork event has been seen too, then cleaned and let go. */
struct forkee {
	pid_t pid;
	pid_t parent;           /* forking thread, 0 until its event */
	bool stopped;           /* its own first stop was seen */
	bool shares_mm;         /* vfork, CLONE_VM: the target's own memory */
	bool have_frames;       /* th: the forking thread's op stack at the fork */
	int sig;                /* a signal its first stop held, for the detach */
	struct tbpf_thread th;
};

#define GUARD_PTRACE_OPTS (PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK)

struct gstate {
	const struct guard_config *cfg;
	bool task_store;   /* threads_map_fd is task storage (keyed by pidfd) */
	struct tracee *t;
	size_t n, cap;
	struct forkee *fk;
	size_t nfk, capfk;
	struct fc_file *files;   /* the probed libraries (forkclean) */
	size_t nfiles;
	struct uprobe_set entry, ret, hooks;
	struct guard_stats st;
	int status_fd;
};

static struct tracee *tracee_find(struct gstate *g, pid_t tid)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->t[i].tid == tid)
			return &g->t[i];
	return NULL;
}

static struct tracee *tracee_add(struct gstate *g, pid_t tid)
{
	struct tracee *t = tracee_find(g, tid);
	__u8 one = 1;
	__u32 key = tid;

	if (t) {
		t->state = 0;
		return t;
	}
	if (GROW(g->t, g->n, g->cap, 64))
		return NULL;
	t = &g->t[g->n++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	bpf_map_update_elem(g->cfg->guard_tids_fd, &key, &one, BPF_ANY);
	g->st.threads_seized++;
	return t;
}

static void tracee_gone(struct gstate *g, pid_t tid)
{
	struct tracee *t = tracee_find(g, tid);
	__u32 key = tid;

	if (t)
		t->state = 2;
	bpf_map_delete_elem(g->cfg->guard_tids_fd, &key);
	bpf_map_delete_elem(g->cfg->guard_req_fd, &key);
}

/* Debugging (TBPF_GUARD_LOG): words on a stopped thread's stack that
 * point into the uretprobe trampoline page, from its sp up 256 KiB. */
static void scan_stack(struct gstate *g, pid_t tid, const char *when)
{
	struct user_regs_struct regs;
	static uint64_t buf[32768];
	struct iovec l = { buf, sizeof(buf) }, r;
	ssize_t got;

	if (!glog || ptrace(PTRACE_GETREGS, tid, 0, &regs))
		return;
	r.iov_base = (void *)(uintptr_t)regs.rsp;
	r.iov_len = sizeof(buf);
	got = process_vm_readv(g->cfg->pid, &l, 1, &r, 1, 0);
	for (ssize_t i = 0; got > 0 && i < got / 8; i++)
		if ((buf[i] & ~0xfffULL) == g->cfg->tramp_page)
			fprintf(glog, "scan %s tid %d: tramp %llx at %llx (sp %llx ip %llx)\n", when, tid,
				(unsigned long long)buf[i], (unsigned long long)(regs.rsp + 8 * i),
				(unsigned long long)regs.rsp, (unsigned long long)regs.rip);
	fflush(glog);
}

/* A thread's op stack as BPF keeps it: by tid in a hash, or in task
 * storage, looked up through a pidfd of that very thread. */
static int thread_state_read(const struct gstate *g, pid_t tid, struct tbpf_thread *th)
{
	__u32 key = tid;
	int pfd, err;

	if (!g->task_store)
		return bpf_map_lookup_elem(g->cfg->threads_map_fd, &key, th) ? -errno : 0;
	pfd = (int)syscall(SYS_pidfd_open, tid, tid == g->cfg->pid ? 0 : PIDFD_THREAD);
	if (pfd < 0)
		return -errno;
	err = bpf_map_lookup_elem(g->cfg->threads_map_fd, &pfd, th) ? -errno : 0;
	close(pfd);
	return err;
}

/* thread_state_read, and the return addresses op entry left unread taken
 * from the kernel's record (retaddr.h).  tid must be stopped: its return
 * instances then match its frames. */
static int thread_frames_read(struct gstate *g, pid_t tid, struct tbpf_thread *th)
{
	struct tbpf_retaddr r[TBPF_RA_MAX];
	size_t depth, n = 0;
	int err = thread_state_read(g, tid, th);

	if (err || g->cfg->ret_prog_fd < 0)
		return err;
	depth = th->depth > TBPF_MAX_DEPTH ? TBPF_MAX_DEPTH : th->depth;
	/* a transient failure (memory, fds) would leave slots unrepairable */
	for (int tries = 0; tries < 3; tries++) {
		err = retaddr_read(g->cfg->ret_prog_fd, tid, r, TBPF_RA_MAX, &n);
		if (!err || err == -ENOTSUP)
			break;
		usleep(1000);
	}
	if (err) {
		/* only the frames op entry left without their address */
		g->st.ra_unknown += retaddr_missing(th->frames, depth);
		if (glog) {
			fprintf(glog, "retaddr tid %d: %s\n", tid, strerror(-err));
			fflush(glog);
		}
		return 0;
	}
	g->st.ra_from_kernel += retaddr_fill(th->frames, depth, r, n);
	return 0;
}

/* Write back the hijacked return addresses of frames `th` in process
 * `pid` (a stopped thread of the target, or a child that forked with a
 * copy of that thread's stack). */
static size_t repair_frames(struct gstate *g, pid_t pid, pid_t tid, struct tbpf_thread *th)
{
	uint64_t slot[TBPF_MAX_DEPTH] = { 0 };
	size_t fix[TBPF_MAX_DEPTH], nfix, done = 0;
	size_t depth;

	depth = th->depth > TBPF_MAX_DEPTH ? TBPF_MAX_DEPTH : th->depth;
	for (size_t i = 0; i < depth; i++)
		if (remote_read(pid, th->frames[i].sp, &slot[i], 8))
			slot[i] = 0;
	nfix = guard_plan_repair(th->frames, depth, slot, g->cfg->tramp_page, fix);
	if (glog) {
		fprintf(glog, "repair pid %d tid %d depth %zu fix %zu:", pid, tid, depth, nfix);
		for (size_t i = 0; i < depth; i++)
			fprintf(glog, " [%zu sp=%llx slot=%llx ra=%llx fl=%x]", i,
				(unsigned long long)th->frames[i].sp, (unsigned long long)slot[i],
				(unsigned long long)th->frames[i].ra, th->frames[i].flags);
		fputc('\n', glog);
		fflush(glog);
	}
	for (size_t k = 0; k < nfix; k++) {
		const struct tbpf_frame *f = &th->frames[fix[k]];

		if (!remote_write(pid, f->sp, &f->ra, 8))
			done++;
	}
	g->st.slots_restored += done;
	return done;
}

/* Write back every hijacked return address of one (stopped) thread. */
static size_t repair_thread(struct gstate *g, pid_t tid)
{
	struct tbpf_thread th;

	if (thread_frames_read(g, tid, &th)) {
		if (glog) {
			fprintf(glog, "repair tid %d: no thread state\n", tid);
			fflush(glog);
		}
		return 0;
	}
	return repair_frames(g, g->cfg->pid, tid, &th);
}

/* ---- forked children (forkclean.h) ----------------------------------------- */

static struct forkee *forkee_find(struct gstate *g, pid_t pid)
{
	for (size_t i = 0; i < g->nfk; i++)
		if (g->fk[i].pid == pid)
			return &g->fk[i];
	return NULL;
}

static struct forkee *forkee_get(struct gstate *g, pid_t pid)
{
	struct forkee *f = forkee_find(g, pid);

	if (f)
		return f;
	if (GROW(g->fk, g->nfk, g->capfk, 8))
		return NULL;
	f = &g->fk[g->nfk++];
	memset(f, 0, sizeof(*f));
	f->pid = pid;
	return f;
}

static void forkee_drop(struct gstate *g, struct forkee *f)
{
	*f = g->fk[--g->nfk];
}

/* The thread group of tid, 0 when it cannot be read. */
static pid_t tgid_of(pid_t tid)
{
	char path[64], line[128];
	pid_t tgid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	fclose(f);
	return tgid;
}

/* Once a child's first stop and its parent's fork event are both seen:
 * write back the return addresses it inherited hijacked, drop its copies
 * of the probed code, and let it go untraced. */
static void forkee_release(struct gstate *g, struct forkee *f)
{
	size_t dropped = 0;
	char *why = NULL;
	int err = 0;

	if (!f->stopped || !f->parent)
		return;
	if (!f->shares_mm) {
		if (f->have_frames)
			g->st.child_restored += repair_frames(g, f->pid, f->parent, &f->th);
		err = forkclean_child(f->pid, g->files, g->nfiles, &dropped, &why);
		if (err) {
			fprintf(stderr, "tbpf: warning: child %d of pid %d keeps tbpf's breakpoints: %s\n",
				f->pid, g->cfg->pid, why ? why : strerror(-err));
			g->st.children_failed++;
		} else {
			g->st.children_cleaned++;
		}
		free(why);
	}
	if (glog) {
		fprintf(glog, "forkee %d parent %d shares_mm %d dropped %zu err %d\n", f->pid,
			f->parent, f->shares_mm, dropped, err);
		fflush(glog);
	}
	ptrace(PTRACE_DETACH, f->pid, 0, f->sig);
	forkee_drop(g, f);
}

/* A fork, vfork or non-thread clone event of target thread tid. */
static void forkee_event(struct gstate *g, pid_t child, pid_t tid, bool vfork)
{
	struct forkee *f = forkee_get(g, child);
	int same;

	if (!f)
		return;
	same = forkclean_same_mm(child, g->cfg->pid);
	f->parent = tid;
	f->shares_mm = vfork || same == 1;
	f->have_frames = !thread_frames_read(g, tid, &f->th);   /* tid: at its fork event */
	forkee_release(g, f);
}

/* A stop of a process that is not a target thread: a forked child's
 * first stop (auto-attached).  Returns false for a target thread. */
static bool forkee_stop(struct gstate *g, pid_t pid, int status)
{
	struct forkee *f = forkee_find(g, pid);

	if (!f && tgid_of(pid) == g->cfg->pid)
		return false;
	f = f ? f : forkee_get(g, pid);
	if (!f)
		return true;
	f->stopped = true;
	if (!(status >> 16))
		f->sig = WSTOPSIG(status);   /* a real signal: delivered at detach */
	forkee_release(g, f);
	return true;
}

/* At shutdown: children whose stop or parent event is still to come. */
static void forkees_drain(struct gstate *g)
{
	for (int waited = 0; g->nfk && waited < 2000; waited++) {
		int status;
		pid_t pid = waitpid(-1, &status, __WALL | WNOHANG);
		struct forkee *f;

		if (pid > 0 && (f = forkee_find(g, pid))) {
			if (WIFEXITED(status) || WIFSIGNALED(status))
				forkee_drop(g, f);
			else if (WIFSTOPPED(status))
				forkee_stop(g, pid, status);
			continue;
		}
		for (size_t i = 0; i < g->nfk; i++)
			if (g->fk[i].stopped && !g->fk[i].parent) {
				g->fk[i].parent = -1;   /* its parent thread is gone */
				forkee_release(g, &g->fk[i]);
				break;
			}
		usleep(1000);
	}
}

static int list_tasks(pid_t pid, pid_t **out, size_t *n)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		pid_t tid = atoi(e->d_name);

		if (tid <= 0)
			continue;
		if (GROW(*out, *n, cap, 64)) {
			closedir(d);
			return -ENOMEM;
		}
		(*out)[(*n)++] = tid;
	}
	closedir(d);
	return 0;
}

static int seize_all(struct gstate *g, char *err, size_t errlen)
{
	for (int pass = 0; pass < 100; pass++) {
		pid_t *tids;
		size_t n, added = 0;
		int rc = list_tasks(g->cfg->pid, &tids, &n);

		if (rc) {
			snprintf(err, errlen, "cannot list threads of %d: %s", g->cfg->pid, strerror(-rc));
			return rc;
		}
		for (size_t i = 0; i < n; i++) {
			if (tracee_find(g, tids[i]))
				continue;
			if (ptrace(PTRACE_SEIZE, tids[i], 0, GUARD_PTRACE_OPTS)) {
				if (errno == ESRCH)
					continue;
				rc = -errno;
				snprintf(err, errlen, "ptrace(SEIZE) of thread %d: %s%s", tids[i],
					 strerror(errno),
					 errno == EPERM ? " (another tracer attached, or ptrace denied)" : "");
				free(tids);
				return rc;
			}
			if (!tracee_add(g, tids[i])) {
				free(tids);
				return -ENOMEM;
			}
			added++;
		}
		free(tids);
		if (!added && pass > 0)
			return 0;
	}
	return 0;
}

/* Handle one wait status outside shutdown. */
static void handle_event(struct gstate *g, pid_t tid, int status, bool shutdown)
{
	struct tracee *t = tracee_find(g, tid);
	int sig, ev = status >> 16;
	__u32 key = tid;
	__u64 req;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		struct forkee *f = forkee_find(g, tid);

		if (f)
			forkee_drop(g, f);
		else
			tracee_gone(g, tid);
		return;
	}
	if (!WIFSTOPPED(status))
		return;
	if (glog)
		fprintf(glog, "event tid %d status %x shutdown %d\n", tid, status, shutdown);
	if (!t && forkee_stop(g, tid, status))
		return;
	if (!t)
		t = tracee_add(g, tid);   /* auto-attached clone child */
	if (!t)
		return;
	sig = WSTOPSIG(status);
	if (ev == PTRACE_EVENT_CLONE || ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK) {
		unsigned long child = 0;

		if (!ptrace(PTRACE_GETEVENTMSG, tid, 0, &child) && child) {
			if (ev == PTRACE_EVENT_CLONE && !forkee_find(g, (pid_t)child) &&
			    tgid_of((pid_t)child) != g->cfg->pid)
				ev = PTRACE_EVENT_FORK;   /* clone() of a process, not a thread */
			if (ev == PTRACE_EVENT_CLONE)
				tracee_add(g, (pid_t)child);   /* may move g->t */
			else
				forkee_event(g, (pid_t)child, tid, ev == PTRACE_EVENT_VFORK);
			t = tracee_find(g, tid);
		}
		if (shutdown && t) {
			t->state = 1;   /* keep it stopped: it is detached below */
			return;
		}
		ptrace(PTRACE_CONT, tid, 0, 0);
		return;
	}
	if (ev == PTRACE_EVENT_STOP) {
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
			/* group stop: keep the job-control semantics */
			if (shutdown) {
				t->state = 1;
				return;
			}
			ptrace(PTRACE_LISTEN, tid, 0, 0);
			return;
		}
		if (shutdown) {
			t->state = 1;
			return;
		}
		ptrace(PTRACE_CONT, tid, 0, 0);
		return;
	}
	/* signal-delivery-stop */
	if (glog && (sig == SIGABRT || sig == SIGSEGV)) {
		scan_stack(g, tid, "fatal");
		repair_thread(g, tid);   /* logs the frames known */
	}
	if (sig == g->cfg->sig && !bpf_map_lookup_elem(g->cfg->guard_req_fd, &key, &req)) {
		bpf_map_delete_elem(g->cfg->guard_req_fd, &key);
		repair_thread(g, tid);
		scan_stack(g, tid, "repair");
		g->st.repairs++;
		sig = 0;
	}
	if (shutdown) {
		t->state = 1;
		t->pending = sig;
		return;
	}
	ptrace(PTRACE_CONT, tid, 0, sig);
}

static void report(struct gstate *g, int code, const char *msg)
{
	char buf[512];
	int len = snprintf(buf, sizeof(buf), "%d %s", code, msg ? msg : "");

	if (len > 0 && write(g->status_fd, buf, (size_t)len + 1) < 0) {
		/* parent gone: nothing to tell */
	}
}

/* The target's whole thread group has exited (its pidfd polls readable,
 * or its pid is gone) and no forked child waits to be cleaned: no thread
 * of it can hit a breakpoint or return through a hijacked frame. */
static bool target_gone(const struct gstate *g)
{
	struct pollfd p = { .events = POLLIN };
	bool gone;

	if (g->nfk)
		return false;
	p.fd = (int)syscall(SYS_pidfd_open, g->cfg->pid, 0);
	if (p.fd < 0)
		return errno == ESRCH;
	gone = poll(&p, 1, 0) == 1;
	close(p.fd);
	return gone;
}

/* Tell the BPF side whether every op's return is seen (tbpf.bpf.c:
 * pid_exits_live): ops entered while it is 0 leave no row. */
static void exits_live_set(struct gstate *g, uint8_t on)
{
	if (g->cfg->exits_live)
		*g->cfg->exits_live = on;
}

/* Nothing left to protect (target_gone): the links all go at once.  Each
 * set's close waits for the kernel's grace period; in the order below
 * that was three waits, 0.2 s here (0.7 s closing links one by one). */
static void shutdown_gone(struct gstate *g)
{
	struct uprobe_set *const all[] = { &g->ret, &g->entry, &g->hooks };

	exits_live_set(g, 0);

	for (size_t i = 0; i < g->n; i++)
		if (g->t[i].state != 2)
			tracee_gone(g, g->t[i].tid);
	uprobe_sets_close(all, sizeof(all) / sizeof(all[0]));
	if (glog) {
		fprintf(glog, "shutdown done (target gone)\n");
		fflush(glog);
	}
}

static void shutdown_all(struct gstate *g)
{
	struct timespec t0, now;
	int status;

	if (target_gone(g)) {
		shutdown_gone(g);
		return;
	}
	/* 1: no new hijacks; ops entered from now on are transparent */
	exits_live_set(g, 0);
	uprobe_set_close(&g->ret);
	/* 2: stop every thread */
	for (size_t i = 0; i < g->n; i++)
		if (g->t[i].state == 0 && ptrace(PTRACE_INTERRUPT, g->t[i].tid, 0, 0) && errno == ESRCH)
			tracee_gone(g, g->t[i].tid);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		size_t running = 0;
		pid_t tid;

		for (size_t i = 0; i < g->n; i++)
			running += g->t[i].state == 0;
		if (!running)
			break;
		tid = waitpid(-1, &status, __WALL | WNOHANG);
		if (tid > 0) {
			struct tracee *t = tracee_find(g, tid);
			bool fresh = !t;

			handle_event(g, tid, status, true);
			t = tracee_find(g, tid);
			if (fresh && t && t->state == 0)
				ptrace(PTRACE_INTERRUPT, tid, 0, 0);
			continue;
		}
		if (tid < 0 && errno == ECHILD)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= 30)
			break;   /* a thread that never stops (uninterruptible sleep) */
		usleep(200);
	}
	/* 3: entry probes out while every thread is stopped: the breakpoints
	 * leave this process, so no return address can be rewritten any more,
	 * not even for another tool's return probe on the same file */
	uprobe_set_close(&g->entry);
	/* 4: repair and detach */
	for (size_t i = 0; i < g->n; i++) {
		struct tracee *t = &g->t[i];

		if (glog) {
			fprintf(glog, "shutdown tid %d state %d pending %d\n", t->tid, t->state,
				t->pending);
			fflush(glog);
		}

		if (t->state == 2)
			continue;
		/* only a stopped thread's stack is written: a running one could
		 * return and reuse the slot between the read and the write */
		if (t->state == 1) {
			g->st.detach_restored += repair_thread(g, t->tid);
			scan_stack(g, t->tid, "detach");
			if (ptrace(PTRACE_DETACH, t->tid, 0, t->pending) && glog)
				fprintf(glog, "detach tid %d: %s\n", t->tid, strerror(errno));
		}
		tracee_gone(g, t->tid);
	}
	/* children forked meanwhile: their breakpoints go before ours do */
	forkees_drain(g);
	/* 5: the unwind hooks */
	uprobe_set_close(&g->hooks);
	if (glog) {
		fprintf(glog, "shutdown done\n");
		fflush(glog);
	}
}

/* The libraries this guard probes, as forked children's maps name them. */
static int probed_files(struct gstate *g)
{
	const struct guard_config *cfg = g->cfg;

	g->files = calloc(cfg->nlibs + cfg->nhooks + 1, sizeof(*g->files));
	if (!g->files)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->nlibs + cfg->nhooks; i++) {
		const char *path = i < cfg->nlibs ? cfg->libs[i].path : cfg->hooks[i - cfg->nlibs].path;

		if (!forkclean_file(path, &g->files[g->nfiles]))
			g->nfiles++;
	}
	return 0;
}

static int run_child(const struct guard_config *cfg, int cmd_fd, int status_fd)
{
	struct gstate g = { .cfg = cfg, .status_fd = status_fd };
	struct bpf_map_info minfo = { 0 };
	__u32 mlen = sizeof(minfo);
	char err[400] = "";
	sigset_t mask;
	int sfd, rc;

	prctl(PR_SET_NAME, "tbpf-guard");
	{
		/* it may outlive tbpf (guard_release, SIGKILL of tbpf): a
		 * pipe on tbpf's stdout is not held open by it */
		int nul = open("/dev/null", O_WRONLY);

		if (nul >= 0 && nul != STDOUT_FILENO) {
			dup2(nul, STDOUT_FILENO);
			close(nul);
		}
	}
	g.task_store = !bpf_obj_get_info_by_fd(cfg->threads_map_fd, &minfo, &mlen) &&
		       minfo.type == BPF_MAP_TYPE_TASK_STORAGE;
	if (getenv("TBPF_GUARD_LOG"))
		glog = fopen(getenv("TBPF_GUARD_LOG"), "a");
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	rc = probed_files(&g);
	if (!rc)
		rc = seize_all(&g, err, sizeof(err));
	if (rc) {
		report(&g, rc, err);
		return 1;   /* exiting detaches whatever was seized */
	}
	/* Unwind hooks first, then entry probes, then return probes: every
	 * frame whose return address the kernel rewrites is recorded, and an
	 * exception thrown through it is held for repair.  The kernel rewrites
	 * return addresses for any return probe on the file, ours or another
	 * tool's, wherever an entry breakpoint is hit (probeshare.h), so frames
	 * are guarded from the first breakpoint on. */
	exits_live_set(&g, 0);   /* a slot another process left set */
	for (size_t i = 0; i < cfg->nhooks; i++) {
		struct bpf_program *p = cfg->hooks[i].is_catch ? cfg->catch_prog : cfg->unwind_prog;
		uint64_t cookie = 0;

		rc = uprobe_set_attach(&g.hooks, p, cfg->hooks[i].path, &cfg->hooks[i].offset,
				       &cookie, 1, false, cfg->pid, cfg->multi);
		if (rc) {
			snprintf(err, sizeof(err), "unwind hook in %s: %s", cfg->hooks[i].path,
				 strerror(-rc));
			uprobe_set_close(&g.hooks);
			report(&g, rc, err);
			return 1;
		}
	}
	for (size_t i = 0; i < cfg->nlibs; i++) {
		rc = uprobe_set_attach(&g.entry, cfg->entry_prog, cfg->libs[i].path, cfg->libs[i].offsets,
				       cfg->libs[i].cookies, cfg->libs[i].n, false, cfg->pid, cfg->multi);
		if (rc) {
			snprintf(err, sizeof(err), "cannot attach op probes in %s: %s", cfg->libs[i].path,
				 strerror(-rc));
			uprobe_set_close(&g.entry);
			uprobe_set_close(&g.hooks);
			report(&g, rc, err);
			return 1;
		}
	}
	for (size_t i = 0; i < cfg->nlibs; i++) {
		rc = uprobe_set_attach(&g.ret, cfg->exit_prog, cfg->libs[i].path, cfg->libs[i].offsets,
				       cfg->libs[i].cookies, cfg->libs[i].n, true, cfg->pid, cfg->multi);
		if (rc) {
			snprintf(err, sizeof(err), "return probes in %s: %s", cfg->libs[i].path,
				 strerror(-rc));
			shutdown_all(&g);
			report(&g, rc, err);
			return 1;
		}
	}
	g.st.return_probes = g.ret.nprobes;
	exits_live_set(&g, 1);
	snprintf(err, sizeof(err), "%zu %zu", g.n, g.entry.nprobes);
	report(&g, 0, err);

	for (;;) {
		struct pollfd p[2] = { { .fd = sfd, .events = POLLIN }, { .fd = cmd_fd, .events = POLLIN } };
		int status;
		pid_t tid;

		if (poll(p, 2, 20) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si))
				;
		}
		while ((tid = waitpid(-1, &status, __WALL | WNOHANG)) > 0)
			handle_event(&g, tid, status, false);
		if (p[1].revents)
			break;   /* a stop request, or tbpf is gone (EOF) */
		{
			size_t live = 0;

			for (size_t i = 0; i < g.n; i++)
				live += g.t[i].state != 2;
			if (!live && kill(cfg->pid, 0))
				break;   /* the target exited */
		}
	}
	shutdown_all(&g);
	{
		char buf[256];

		snprintf(buf, sizeof(buf), "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
			 (unsigned long long)g.st.threads_seized, (unsigned long long)g.st.repairs,
			 (unsigned long long)g.st.slots_restored,
			 (unsigned long long)g.st.detach_restored,
			 (unsigned long long)g.st.return_probes,
			 (unsigned long long)g.st.children_cleaned,
			 (unsigned long long)g.st.children_failed,
			 (unsigned long long)g.st.child_restored,
			 (unsigned long long)g.st.ra_from_kernel, (unsigned long long)g.st.ra_unknown);
		report(&g, 1, buf);
	}
	return 0;
}

/* ---- the parent side ------------------------------------------------------ */

static int read_report(int fd, int *code, char *msg, size_t cap, int timeout_ms)
{
	char buf[512];
	size_t len = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (len < sizeof(buf) - 1) {
		ssize_t r;

		if (poll(&p, 1, timeout_ms) <= 0)
			return -ETIMEDOUT;
		r = read(fd, buf + len, 1);
		if (r <= 0)
			return -EPIPE;
		if (buf[len] == '\0')
			break;
		len++;
	}
	buf[len] = '\0';
	*code = atoi(buf);
	{
		char *sp = strchr(buf, ' ');

		snprintf(msg, cap, "%s", sp ? sp + 1 : "");
	}
	return 0;
}

int guard_start(const struct guard_config *cfg, struct guard **out, char **why)
{
	int cmd[2], st[2], code = 0, rc;
	char msg[512];
	struct guard *g;
	pid_t child;

	*out = NULL;
	*why = NULL;
	if (pipe2(cmd, O_CLOEXEC) || pipe2(st, O_CLOEXEC))
		return -errno;
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		close(cmd[1]);
		close(st[0]);
		_exit(run_child(cfg, cmd[0], st[1]));
	}
	close(cmd[0]);
	close(st[1]);
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->child = child;
	g->cmd_fd = cmd[1];
	g->status_fd = st[0];
	rc = read_report(g->status_fd, &code, msg, sizeof(msg), 30000);
	if (rc || code) {
		if (asprintf(why, "%s", rc ? "unwind guard did not start" : msg) < 0)
			*why = NULL;
		close(g->cmd_fd);
		waitpid(child, NULL, 0);
		close(g->status_fd);
		free(g);
		return rc ? rc : code;
	}
	{
		unsigned long long nthreads = 0, nentry = 0;

		sscanf(msg, "%llu %llu", &nthreads, &nentry);
		g->entry_probes = nentry;
	}
	*out = g;
	return 0;
}

size_t guard_entry_probes(const struct guard *g)
{
	return g ? g->entry_probes : 0;
}

bool guard_alive(struct guard *g)
{
	return g && g->child > 0 && waitpid(g->child, NULL, WNOHANG) == 0;
}

pid_t guard_pid(const struct guard *g)
{
	return g ? g->child : 0;
}

void guard_stop_request(struct guard *g)
{
	if (g && g->cmd_fd >= 0) {
		close(g->cmd_fd);
		g->cmd_fd = -1;
	}
}

void guard_release(struct guard *g)
{
	if (!g)
		return;
	guard_stop_request(g);
	close(g->status_fd);
	free(g);
}

int guard_stop(struct guard *g, struct guard_stats *stats)
{
	int code = 0;
	char msg[256] = "";

	if (!g)
		return 0;
	guard_stop_request(g);
	/* the guard repairs and detaches every thread before it answers */
	if (!read_report(g->status_fd, &code, msg, sizeof(msg), 120000) && stats) {
		unsigned long long a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, h = 0, i = 0, j = 0,
				   k = 0;

		sscanf(msg, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &a, &b, &c, &d, &e,
		       &f, &h, &i, &j, &k);
		stats->threads_seized = a;
		stats->repairs = b;
		stats->slots_restored = c;
		stats->detach_restored = d;
		stats->return_probes = e;
		stats->children_cleaned = f;
		stats->children_failed = h;
		stats->child_restored = i;
		stats->ra_from_kernel = j;
		stats->ra_unknown = k;
	}
	waitpid(g->child, NULL, 0);
	close(g->status_fd);
	free(g);
	return 0;
}
