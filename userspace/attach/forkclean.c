/* forkclean.c - exception safety stage: drop tbpf's breakpoints from a
 * forked child of the target (see forkclean.h for the why).  The guard
 * calls forkclean_child() on a child held at its first ptrace stop; the
 * madvise runs in the child itself, one singlestepped `syscall`
 * instruction per range, since no call drops another process's pages. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/kcmp.h>
#include "cuda_attach.h"
#include "forkclean.h"
#include "procmaps.h"
#include "remote.h"

#define MAX_RANGES 64

int forkclean_file(const char *path, struct fc_file *out)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	out->dev_major = major(st.st_dev);
	out->dev_minor = minor(st.st_dev);
	out->inode = st.st_ino;
	return 0;
}

static bool is_probed(const struct pm_entry *e, const struct fc_file *files, size_t nfiles)
{
	for (size_t i = 0; i < nfiles; i++)
		if (e->inode == files[i].inode && e->dev_major == files[i].dev_major &&
		    e->dev_minor == files[i].dev_minor)
			return true;
	return e->path && cuda_lib_kind(e->path) != CUDA_LIB_NONE;
}

size_t forkclean_plan(const struct pm_maps *m, const struct fc_file *files, size_t nfiles,
		      struct fc_range *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < m->n; i++) {
		const struct pm_entry *e = &m->v[i];

		if (!(e->prot & PROT_EXEC) || (e->flags & (PM_SHARED | PM_PSEUDO)) || !e->inode ||
		    !is_probed(e, files, nfiles))
			continue;
		if (n < cap)
			out[n] = (struct fc_range){ e->start, e->end };
		n++;
	}
	return n;
}

long forkclean_find_syscall(const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++)
		if (buf[i] == 0x0f && buf[i + 1] == 0x05)
			return (long)i;
	return -1;
}

static int fail(char **why, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (why && vasprintf(why, fmt, ap) < 0)
		*why = NULL;
	va_end(ap);
	return err;
}

/* A `syscall` instruction to run in the child: the one its fork returned
 * from (a child is first stopped right after it), else one in its vDSO. */
static int syscall_insn(pid_t pid, const struct user_regs_struct *r, const struct pm_maps *m,
			uint64_t *at)
{
	uint8_t ins[2], vdso[8192];

	if (!remote_read(pid, r->rip - 2, ins, 2) && forkclean_find_syscall(ins, 2) == 0) {
		*at = r->rip - 2;
		return 0;
	}
	for (size_t i = 0; i < m->n; i++) {
		const struct pm_entry *e = &m->v[i];
		size_t len = e->end - e->start;
		long off;

		if (!e->path || strcmp(e->path, "[vdso]") || !(e->prot & PROT_EXEC))
			continue;
		if (len > sizeof(vdso))
			len = sizeof(vdso);
		if (remote_read(pid, e->start, vdso, len))
			break;
		off = forkclean_find_syscall(vdso, len);
		if (off >= 0) {
			*at = e->start + (uint64_t)off;
			return 0;
		}
	}
	return -ENOENT;
}

/* Run one system call in the stopped tracee; a signal that arrives
 * meanwhile is kept in *pending for the caller's detach. */
static int remote_syscall(pid_t pid, const struct user_regs_struct *saved, uint64_t insn,
			  long nr, uint64_t a0, uint64_t a1, uint64_t a2, long *ret, int *pending)
{
	struct user_regs_struct r = *saved;
	int status;

	r.rip = insn;
	r.rax = (uint64_t)nr;
	r.orig_rax = (uint64_t)-1;   /* no syscall restart on this resume */
	r.rdi = a0;
	r.rsi = a1;
	r.rdx = a2;
	if (ptrace(PTRACE_SETREGS, pid, 0, &r))
		return -errno;
	for (;;) {
		if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0))
			return -errno;
		if (waitpid(pid, &status, __WALL) != pid)
			return -errno;
		if (!WIFSTOPPED(status))
			return -ESRCH;
		if (WSTOPSIG(status) == SIGTRAP && !(status >> 16))
			break;
		if (!(status >> 16))
			*pending = WSTOPSIG(status);   /* delivered at detach */
	}
	if (ptrace(PTRACE_GETREGS, pid, 0, &r))
		return -errno;
	if (r.rip != insn + 2)
		return -EFAULT;
	*ret = (long)r.rax;
	return 0;
}

int forkclean_child(pid_t pid, const struct fc_file *files, size_t nfiles, size_t *ndropped,
		    char **why)
{
	struct fc_range ranges[MAX_RANGES];
	struct user_regs_struct saved;
	struct pm_maps m = { 0 };
	uint64_t insn;
	size_t n;
	int err, pending = 0;

	*ndropped = 0;
	err = procmaps_read(pid, &m);
	if (err)
		return fail(why, err, "reading maps of child %d: %s", pid, strerror(-err));
	n = forkclean_plan(&m, files, nfiles, ranges, MAX_RANGES);
	if (n > MAX_RANGES) {
		procmaps_free(&m);
		return fail(why, -E2BIG, "child %d maps %zu probed code ranges (at most %d)", pid, n,
			    MAX_RANGES);
	}
	if (!n) {
		procmaps_free(&m);
		return 0;
	}
	if (ptrace(PTRACE_GETREGS, pid, 0, &saved)) {
		err = -errno;
		procmaps_free(&m);
		return fail(why, err, "registers of child %d: %s", pid, strerror(-err));
	}
	err = syscall_insn(pid, &saved, &m, &insn);
	procmaps_free(&m);
	if (err)
		return fail(why, err, "no syscall instruction found in child %d", pid);
	for (size_t i = 0; i < n && !err; i++) {
		long rc = 0;

		err = remote_syscall(pid, &saved, insn, SYS_madvise, ranges[i].start,
				     ranges[i].end - ranges[i].start, MADV_DONTNEED, &rc, &pending);
		if (err)
			fail(why, err, "madvise in child %d: %s", pid, strerror(-err));
		else if (rc)
			err = fail(why, (int)rc, "madvise(%#llx, DONTNEED) in child %d: %s",
				   (unsigned long long)ranges[i].start, pid, strerror((int)-rc));
		else
			(*ndropped)++;
	}
	if (ptrace(PTRACE_SETREGS, pid, 0, &saved) && !err)
		err = fail(why, -errno, "restoring registers of child %d: %s", pid, strerror(errno));
	if (pending)
		kill(pid, pending);   /* re-raised: it reaches the child after the detach */
	return err;
}

int forkclean_same_mm(pid_t a, pid_t b)
{
	long rc = syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);

	if (rc < 0)
		return -errno;
	return rc == 0;
}
