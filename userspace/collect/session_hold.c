/* session_hold.c - `tbpf run`: hold the command where it maps libtorch
 * (the loader's _dl_debug_state and an mmap hook; runhold.bpf.h), and with
 * --inproc at its first RecordFunction check, so tbpf attaches before its
 * first op. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "elfsym.h"
#include "strf.h"
#include "session_int.h"

/* The dynamic linker the command runs under: the x86-64 default (Debian's
 * python3 and virtual environments built on it). */
#define RUN_LOADER "/lib64/ld-linux-x86-64.so.2"

/* File offset of _dl_debug_state, the debugger's r_brk, in the loader. */
static int loader_brk(const char *path, uint64_t *off)
{
	struct elf_file *ef;
	struct elf_sym sym;
	int err = elf_file_open(path, &ef);

	if (err)
		return err;
	err = elf_file_find_sym(ef, "_dl_debug_state", &sym);
	if (!err && (!sym.defined || !sym.file_off))
		err = -ENOENT;
	*off = sym.file_off;
	elf_file_close(ef);
	return err;
}

int session_hold_torch(struct session *s, char **why)
{
	uint64_t off = 0, cookie = 0;
	int err;

	*why = NULL;
	if (!s->cfg.run_hold || s->cfg.only_pid <= 0)
		return -EINVAL;
	err = loader_brk(RUN_LOADER, &off);
	if (!err)
		err = uprobe_set_attach(&s->hold, s->skel->progs.tbpf_run_dlstate, RUN_LOADER, &off,
					&cookie, 1, false, s->cfg.only_pid, s->multi);
	if (!err) {
		s->hold_mmap = bpf_program__attach(s->skel->progs.tbpf_run_mmap);
		err = s->hold_mmap ? 0 : (errno ? -errno : -EINVAL);
	}
	if (err) {
		*why = strf("cannot hold the command where it loads libtorch (%s in %s): %s",
			    s->hold.nprobes ? "mmap hook" : "_dl_debug_state", RUN_LOADER,
			    strerror(-err));
		session_hold_release(s);
		return err;
	}
	s->skel->bss->run_hold_cuda = s->cfg.cuda && s->cfg.cuda_only_ok;
	s->skel->bss->run_hold = RUN_HOLD_ARMED;
	return 0;
}

bool session_torch_held(struct session *s)
{
	return s->skel->bss->run_hold == RUN_HOLD_STOPPED;
}

bool session_hold_rearm(struct session *s)
{
	bool stopped = s->skel->bss->run_hold == RUN_HOLD_STOPPED;

	if (!s->hold.nprobes || !s->hold_mmap || s->n != 1 || !s->v[0]->t.cuda_only)
		return false;
	s->skel->bss->run_hold_cuda = 0;
	s->skel->bss->run_hold = RUN_HOLD_ARMED;
	s->hold_upgrade = true;
	if (stopped)
		kill(s->cfg.only_pid, SIGCONT);
	return true;
}

static void hold_detach(struct session *s)
{
	s->hold_upgrade = false;
	s->skel->bss->run_hold = RUN_HOLD_OFF;
	uprobe_set_close(&s->hold);
	uprobe_set_close(&s->hold_op);
	bpf_link__destroy(s->hold_mmap);
	s->hold_mmap = NULL;
}

void session_hold_again(struct session *s)
{
	if (s->hold_op.nprobes)
		s->skel->bss->run_hold = RUN_HOLD_FIRSTOP;
}

void session_hold_release(struct session *s)
{
	bool stopped = s->skel->bss->run_hold == RUN_HOLD_STOPPED;

	hold_detach(s);
	if (stopped)
		kill(s->cfg.only_pid, SIGCONT);
}

pid_t session_hold_tid(struct session *s)
{
	return (pid_t)s->skel->bss->run_hold_tid;
}

void session_hold_keep(struct session *s)
{
	hold_detach(s);
}

/* The RecordFunction checks of libtorch_cpu (runhold.bpf.h). */
static const char *const first_op_syms[] = {
	"_ZN2at27getStepCallbacksUnlessEmptyENS_11RecordScopeE",
	"_ZN2at16getStepCallbacksENS_11RecordScopeE",
};

int session_hold_first_op(struct session *s, const char *libtorch_cpu, char **why)
{
	uint64_t off[2], cookie[2] = { 0, 0 };
	struct elf_file *ef = NULL;
	struct elf_sym sym;
	int err;

	*why = NULL;
	if (s->skel->bss->run_hold != RUN_HOLD_STOPPED || s->hold_op.nprobes)
		return -EINVAL;
	err = elf_file_open(libtorch_cpu, &ef);
	for (size_t i = 0; !err && i < 2; i++) {
		err = elf_file_find_sym(ef, first_op_syms[i], &sym);
		if (!err && (!sym.defined || !sym.file_off))
			err = -ENOENT;
		off[i] = sym.file_off;
		if (err)
			*why = strf("%s has no %s", libtorch_cpu, first_op_syms[i]);
	}
	if (ef)
		elf_file_close(ef);
	if (!err)
		err = uprobe_set_attach(&s->hold_op, s->skel->progs.tbpf_run_firstop, libtorch_cpu,
					off, cookie, 2, false, s->cfg.only_pid, s->multi);
	if (err) {
		if (!*why)
			*why = strf("cannot hold the command at its first op (%s): %s", libtorch_cpu,
				    strerror(-err));
		return err;
	}
	/* the loader's hold is done: only the first op stops it now */
	uprobe_set_close(&s->hold);
	bpf_link__destroy(s->hold_mmap);
	s->hold_mmap = NULL;
	s->skel->bss->run_hold = RUN_HOLD_FIRSTOP;
	kill(s->cfg.only_pid, SIGCONT);
	return 0;
}
