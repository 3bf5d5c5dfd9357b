/* run_inproc.h - `tbpf run --inproc` (issue 19): hold the command it
 * starts until the in-process agent can take its first op. */
#ifndef TBPF_RUN_INPROC_H
#define TBPF_RUN_INPROC_H
#include <signal.h>
#include "options.h"

struct session;

/* Let the held command exec (o->release) and wait until it stops where
 * its dynamic linker has mapped libtorch_cpu (libtorch not yet
 * initialized: its version can be read, no callback registered).  0 with
 * *hold (the BPF session that holds it), or the exit code after one line
 * (the command continues, or exits 125 when it never execed). *stop: a
 * signal asked tbpf to stop. */
int run_inproc_hold_torch(const struct live_opts *o, volatile sig_atomic_t *stop,
			  struct session **hold);
/* From that stop to the command's first RecordFunction check (runhold.bpf.h):
 * 0 when stopped there; RUN_INPROC_NONE when there is nothing to record
 * (it exited first: a line says so; or a signal stopped tbpf); or the
 * exit code after one line. */
#define RUN_INPROC_NONE (-2)
int run_inproc_hold_first_op(const struct live_opts *o, struct session *hold,
			     volatile sig_atomic_t *stop);
/* At that stop: load the agent (agent: its path), keep the thread at the
 * first op stopped under ptrace (*held: its tid) and continue the others,
 * so the agent's control thread can serve START.  0, or the exit code
 * after one line (still stopped by the hold: run_inproc_release). */
int run_inproc_load(const struct live_opts *o, struct session *hold, const char *agent,
		    pid_t *held);
/* After START: the held thread goes on into its first op (0: nothing). */
void run_inproc_go(pid_t held);
/* Continue the held command and close the hold (NULL: nothing). */
void run_inproc_release(struct session *hold);
/* Close the hold and leave the command stopped (the uprobe mode takes it
 * over: o->run_stopped). */
void run_inproc_hand_over(struct session *hold);

#endif
