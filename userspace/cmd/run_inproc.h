/* run_inproc.h - `tbpf run --inproc`: hold the command it
 * starts until the in-process agent can take its first op. */
#ifndef TBPF_RUN_INPROC_H
#define TBPF_RUN_INPROC_H
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include "options.h"

struct session;

/* Let the held command exec (o->release) and wait until it stops where
 * its dynamic linker has mapped libtorch_cpu (libtorch not yet
 * initialized: its version can be read, no callback registered).  0 with
 * *hold (the BPF session that holds it: given, a session opened with
 * run_hold that the run goes on with, else one of its own), or the exit
 * code after one line (the command continues, or exits 125 when it never
 * execed; given is left open). *stop: a signal asked tbpf to stop. */
int run_inproc_hold_torch(const struct live_opts *o, volatile sig_atomic_t *stop,
			  struct session *given, struct session **hold);
/* From that stop to the command's first RecordFunction check (runhold.bpf.h):
 * 0 when stopped there; RUN_INPROC_NONE when there is nothing to record
 * (it exited first: a line says so; or a signal stopped tbpf); or the
 * exit code after one line. */
#define RUN_INPROC_NONE (-2)
int run_inproc_hold_first_op(const struct live_opts *o, struct session *hold,
			     volatile sig_atomic_t *stop);
/* The command's threads held under ptrace while the callbacks are
 * registered (run_inproc_load), let go by run_inproc_go. */
struct run_held {
	pid_t *tids;
	size_t n;
};
/* At that stop: load the agent (agent: its path), keep every thread the
 * command has stopped under ptrace (held; the one at the first op first)
 * and continue the process, so the agent's control thread, created
 * during the stop, serves START alone: no thread runs an op before the
 * callbacks are in.  0, or the exit code after one line (nothing held;
 * still stopped by the hold: run_inproc_release). */
int run_inproc_load(const struct live_opts *o, struct session *hold, const char *agent,
		    struct run_held *held);
/* After START: the held threads go on (the first into its first op);
 * nothing held: nothing done. */
void run_inproc_go(struct run_held *held);
/* Continue the held command and close the hold (NULL: nothing). */
void run_inproc_release(struct session *hold);
/* Close the hold and leave the command stopped (the uprobe mode takes it
 * over: o->run_stopped). */
void run_inproc_hand_over(struct session *hold);

#endif
