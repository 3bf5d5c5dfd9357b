/* exitcode.h - command stage: the program's exit codes (documented in
 * --help and README).  Only cmd/ turns errors into them. */
#ifndef TBPF_EXITCODE_H
#define TBPF_EXITCODE_H

enum tbpf_exit {
	TBPF_EXIT_OK = 0,
	TBPF_EXIT_ERROR = 1,     /* runtime failure: no such pid, no libtorch, ... */
	TBPF_EXIT_USAGE = 2,     /* bad command line */
	TBPF_EXIT_PRIV = 3,      /* missing privileges (root / CAP_BPF+CAP_PERFMON+CAP_SYS_PTRACE) */
	TBPF_EXIT_KERNEL = 4,    /* kernel lacks BTF, uprobes or ring buffers */
};

/* 0 -> OK, -EPERM -> PRIV, -EOPNOTSUPP -> KERNEL, any other -> ERROR (the
 * engine's session_open and daemon_run name their failures this way). */
int tbpf_exit_of(int err);

#endif
