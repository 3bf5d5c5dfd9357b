/* inproc_torch.c - the live command with --inproc: which targets' torch
 * builds the in-process agent may run in (torch_build_of, checked per
 * build from the target's own binaries and headers), and where the agent
 * library is. */
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "exitcode.h"
#include "inproc_attach.h"
#include "inproc_torch.h"
#include "live_inproc.h"
#include "torch_builds.h"
#include "torchver.h"

/* $TBPF_INPROC_PATH, else beside the tbpf binary or in ../lib/tbpf/. */
char *inproc_agent_path(void)
{
	const char *env = getenv("TBPF_INPROC_PATH");
	char exe[PATH_MAX], *p = NULL;
	static const char *const rel[] = { "/" INPROC_LIB_NAME, "/../lib/tbpf/" INPROC_LIB_NAME };
	ssize_t n;

	if (env && *env)
		return realpath(env, NULL);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	for (size_t i = 0; i < 2; i++) {
		char *r;

		if (asprintf(&p, "%s%s", dirname(exe), rel[i]) < 0)
			return NULL;
		r = access(p, R_OK) ? NULL : realpath(p, NULL);
		free(p);
		if (r)
			return r;
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = 0;
	}
	return NULL;
}

/* The layout for every target's torch; 0 with *layouts filled, or the
 * exit code / LIVE_INPROC_FALLBACK after one line. */
int inproc_check_torch(const struct live_opts *o, unsigned *layouts,
		       const struct tbpf_inproc_ivlayout **ivs,
		       const struct tbpf_inproc_seqlayout **sls)
{
	for (size_t i = 0; i < o->sel.npids; i++) {
		pid_t pid = o->sel.pids[i];
		char *ver = NULL, *where = NULL, *why = NULL;
		const struct torch_build *b;
		bool by_headers;
		int err = torchver_of(pid, &ver, &where);

		/* a CUDA program, or a job that has not imported torch yet: the
		 * uprobe recorder probes its CUDA calls, and torch's ops once it
		 * maps libtorch.  Its attached line says so (or its one error
		 * line, for a process that maps neither): no line here */
		if (err == -ENOENT && o->recorder_auto && !(kill(pid, 0) && errno == ESRCH))
			return LIVE_INPROC_FALLBACK;
		if (err == -ESRCH || err == -ENOENT) {
			if (kill(pid, 0) && errno == ESRCH)
				fprintf(stderr, "tbpf: no process with pid %d\n", pid);
			else
				fprintf(stderr, "tbpf: process %d does not map libtorch: is it a "
						"PyTorch process (has it imported torch yet)?\n", pid);
			return TBPF_EXIT_ERROR;
		}
		if (err == -EACCES || err == -EPERM) {
			fprintf(stderr, "tbpf: --inproc: ptrace of pid %d not permitted (cannot read "
					"/proc/%d/maps; needs root or CAP_SYS_PTRACE)\n", pid, pid);
			return TBPF_EXIT_PRIV;
		}
		if (err) {
			fprintf(stderr, "tbpf: pid %d: cannot read its maps: %s\n", pid, strerror(-err));
			return tbpf_exit_of(err);
		}
		layouts[i] = INPROC_LAYOUT_NONE;
		ivs[i] = NULL;
		sls[i] = NULL;
		if (torch_build_of(pid, ver, &b, &why, &by_headers)) {
			if (o->recorder_auto)
				fprintf(stderr, "tbpf: recording with uprobes: torch %s in pid %d (%s) "
						"%s, so the in-process agent stays out (--uprobes "
						"chooses this recorder without the check)\n", ver, pid,
					where, why ? why : "is not verified");
			else
				fprintf(stderr, "tbpf: --inproc: torch %s in pid %d (%s) %s; using the "
						"uprobe mode\n", ver, pid, where,
					why ? why : "is not verified");
		} else {
			layouts[i] = b->rf_layout;
			ivs[i] = o->record_shapes ? &b->iv : NULL;
			sls[i] = o->stack_n ? &b->seq : NULL;
			if (o->recorder_auto)
				fprintf(stderr, "tbpf: recording in-process: pid %d runs torch %s, "
						"verified by %s; --uprobes records with uprobes instead\n",
					pid, ver, by_headers ? "its headers" : "its version");
			if (o->verbose)
				fprintf(stderr, "tbpf: pid %d runs torch %s (%s): the build verified as "
						"%s, by %s\n", pid, ver, where, b->label,
					by_headers ? "its headers" : "its version (no headers shipped)");
		}
		free(why);
		free(ver);
		free(where);
		if (!layouts[i])
			return LIVE_INPROC_FALLBACK;
	}
	return 0;
}
