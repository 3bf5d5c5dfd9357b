/* window.h - fleet stage: a daemon window from the cumulative BPF maps.
 *
 * The maps stay cumulative while a process lives (deleting a row a probe
 * is incrementing loses calls): each window is the difference from the
 * previous read; rows of exited processes are read one last time, then
 * deleted (window_forget_pids), which keeps the maps bounded.
 */
#ifndef TBPF_WINDOW_H
#define TBPF_WINDOW_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon.h"
#include "metrics.h"
#include "profile.h"
#include "tbpf_abi.h"

struct calltree;

/* Last values read, per row (kept between windows). */
struct snap { uint32_t pid, op_id; uint64_t stack_id; struct prof_op v; };
struct hsnap { uint32_t pid, op_id; uint64_t buckets[TBPF_HIST_BUCKETS]; };

/* The histogram map (cumulative): rows summed over CPUs (malloc'd).  fd < 0:
 * none.  0 or -ENOMEM. */
int read_hist(int fd, struct metrics_hist_row **rows, size_t *nrows);
/* cur (cumulative rows) -> win (deltas against *prev); *prev becomes cur
 * (high-water marks: a value that steps back counts nothing).  0 or
 * -ENOMEM. */
int profile_delta(const struct profile *cur, struct snap **prev, size_t *nprev,
		  struct profile *win);
/* The same for histogram rows, in place. */
int hist_delta(struct metrics_hist_row *rows, size_t n, struct hsnap **prev, size_t *nprev);
bool pid_in(uint32_t pid, const uint32_t *v, size_t n);
/* Delete the rows of the dead pids from a map keyed by (pid, ...). */
void forget_pids(int fd, size_t key_size, const uint32_t *dead, size_t ndead);

/* A row's Python stack (pid, stack id) as frames, innermost first
 * (capture order), *n of them; NULL: none known. */
struct capture_frame;
typedef const struct capture_frame *(*calltree_frames_fn)(void *ctx, uint32_t pid,
							  uint64_t stack_id, uint32_t *n);
/* Window rows -> call tree: job (comm) -> the row's Python frames,
 * outermost first (when frames knows its stack) -> op, self time and
 * calls.  frames NULL: job -> op. */
int profile_calltree(const struct profile *p, const struct metrics_proc *procs,
		     size_t nprocs, const char *job, calltree_frames_fn frames, void *fctx,
		     struct calltree *ct);
/* dir/tbpf-<UTC stamp>-<seq>.pb.gz, keeping the newest keep files.  0 or
 * -errno with *err. */
int write_pprof_file(const char *dir, unsigned keep, const struct calltree *ct,
		     uint64_t seq, char **err);
/* POST the window's pprof to o->push_url/ingest.  0 or -errno with *err. */
int push_pprof(const struct daemon_opts *o, const struct calltree *ct, char **err);
/* The window's call tree to --pprof-dir (file seq) and --push, as asked;
 * each failure is one stderr line, the window goes on. */
void emit_pprof(const struct daemon_opts *o, const struct calltree *ct, uint64_t seq);

#endif /* TBPF_WINDOW_H */
