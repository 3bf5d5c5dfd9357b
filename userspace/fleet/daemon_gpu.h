/* daemon_gpu.h - fleet stage: the BPF session of `tbpf daemon --inproc`.
 * It names the agents' Python stacks for the profiles
 * (--pprof-dir / --push), and with --inject carries what the uprobe mode
 * gets from CUDA: the libcudart/libcuda probes, whose records are joined
 * to the in-process ops (join/cudaattr.h), and the CUPTI agent (loaded as
 * by tbpf --inproc --inject), whose device records are joined to those
 * launches each window by the join every mode uses (gpu_session_apply_window:
 * gpujoin_run, profile_add_gpu), so /metrics gains device="cuda" series of
 * the time families, kernel launches per op and copies per direction. */
#ifndef TBPF_DAEMON_GPU_H
#define TBPF_DAEMON_GPU_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tbpf_abi.h"

struct daemon_opts;
struct session;
struct profile;
struct metrics_copy_row;
struct dgpu;

/* Opened before the agents start (loading BPF takes a while, nobody would
 * drain their rings meanwhile): python, the stacks' names; o->inject, the
 * CUDA probes and the CUPTI agents, each one's failure one warning.
 * names(ctx, id): an op's name for device time of an op the window has no
 * row of.  NULL after one line. */
struct dgpu *dgpu_open(const struct daemon_opts *o, bool python,
		       const char *(*names)(void *ctx, uint32_t id, const char **ovl), void *ctx);
struct session *dgpu_session(struct dgpu *g);
/* Whether CUDA records are joined (the inproc_out hooks below are wanted). */
bool dgpu_cuda(const struct dgpu *g);
/* --inject: the CUPTI agent into pid, before its RecordFunction agent. */
void dgpu_add_agent(struct dgpu *g, pid_t pid);
/* The targets into the session (its pid filter lets the CUDA probes
 * record), before their RecordFunction agents start. */
int dgpu_add_targets(struct dgpu *g, const struct daemon_opts *o);
/* struct inproc_out's CUDA hooks (collect/inproc_session.h) ... */
void dgpu_begin(struct dgpu *g);
/* An agent is asked to start: the CUDA calls made until now are cut (no
 * op was recorded before) and the ring, which the CUPTI agents filled
 * while the RecordFunction agents were injected, drained (full, it
 * dropped the first ops' records; those drops are not told). */
void dgpu_starting(struct dgpu *g);
void dgpu_mark(struct dgpu *g);
int dgpu_settled(struct dgpu *g, uint32_t pid);
/* ... and each op record, before it goes on: held CUDA records out first. */
int dgpu_op(struct dgpu *g, const struct rec_op *r);
/* The window's launches and device times into p, its copies (*copies
 * malloc'd, count returned). */
size_t dgpu_window(struct dgpu *g, struct profile *p, uint64_t now_ns,
		   struct metrics_copy_row **copies);
/* After the agents stopped: the calls after last_op_ns (the last op
 * start recorded; 0: now) not joined, the CUPTI agents stopped (their last
 * records flushed), every held record out, for the last window. */
void dgpu_stop(struct dgpu *g, uint64_t last_op_ns);
void dgpu_close(struct dgpu *g);

#endif
