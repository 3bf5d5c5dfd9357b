/* bw_session.h - collection engine: backward ops' Source Location in the
 * uprobe mode (--group-by-stack; bpf/bwstack.bpf.h).
 *
 * For each target: libtorch_cpu's TLS module id and the offsets of its
 * autograd sequence counter and torch thread id (discover/tlsvar.h,
 * decoded from the accessors' code and the GOT pairs the process holds,
 * checked against the library's PT_TLS size), and a Node's sequence_nr_
 * and thread_id_ for the process's torch version (attach/inproc_layouts.h,
 * checked against the headers by rf_layout.sh).  Anything unverified: no
 * entry, and *why says why (the caller prints one line; backward ops keep
 * their own stacks). */
#ifndef TBPF_BW_SESSION_H
#define TBPF_BW_SESSION_H

#include <sys/types.h>
#include "tbpf_abi.h"

struct target;

/* The process's tbpf_bwproc.  0, or -ENOENT with *why (malloc'd). */
int bw_proc_of(pid_t pid, const struct target *t, struct tbpf_bwproc *out, char **why);

#endif
