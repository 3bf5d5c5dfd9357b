/* live.h - the live command: attach to running processes, collect, stop,
 * report. */
#ifndef TBPF_LIVE_H
#define TBPF_LIVE_H
#include "options.h"

/* Exit codes (documented in --help and README). */
enum tbpf_exit {
	TBPF_EXIT_OK = 0,
	TBPF_EXIT_ERROR = 1,     /* runtime failure: no such pid, no libtorch, ... */
	TBPF_EXIT_USAGE = 2,     /* bad command line */
	TBPF_EXIT_PRIV = 3,      /* missing privileges (root / CAP_BPF+CAP_PERFMON+CAP_SYS_PTRACE) */
	TBPF_EXIT_KERNEL = 4,    /* kernel lacks BTF, uprobes or ring buffers */
};

int live_run(const struct live_opts *o);

#endif
