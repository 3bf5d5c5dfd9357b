/* cmd_info.h - `tbpf --version` and `tbpf info`: what this build is and
 * what this machine allows (kernel features, permissions, CUDA, torch,
 * the agents), one line each, in the manner of `bpftrace --info`. */
#ifndef TBPF_CMD_INFO_H
#define TBPF_CMD_INFO_H
#include <stddef.h>
#include <stdint.h>

/* "tbpf VERSION (commit HASH)", or "tbpf VERSION" for a build without git. */
int tbpf_print_version(void);
int cmd_info(int argc, char **argv);

/* The active mode in /sys/kernel/security/lockdown's "none [integrity]
 * confidentiality" -> "integrity"; NULL when no word is bracketed.  The
 * result points into a static copy, at most 31 characters. */
const char *info_lockdown_mode(const char *text);
/* kernel.yama.ptrace_scope N -> what it means for tbpf's ptrace attach. */
const char *info_ptrace_scope(int scope);
/* CapEff's hex bits -> "all needed" or "missing CAP_BPF CAP_PERFMON ..."
 * into buf (the capabilities a BPF attach and a ptrace inject need). */
const char *info_caps(uint64_t capeff, char *buf, size_t len);
/* cuDriverGetVersion's 12040 -> "12.4" into buf. */
const char *info_cuda_version(int v, char *buf, size_t len);
#endif
