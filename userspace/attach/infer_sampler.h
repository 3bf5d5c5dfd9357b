/* infer_sampler.h - attach stage: the bound on inferred exits.
 *
 * In infer mode an op frame closes at the thread's next op entry at or
 * above its stack slot; the last op before a stretch of Python code (the
 * loss.item() ending a training step) stayed open through all of it.  The
 * sampler runs tbpf_infer_sample on a CPU-clock sample of every CPU and
 * tbpf_infer_switch when a task is switched out: a target thread whose
 * user stack pointer is above a frame's return slot has left that op, and
 * the frame closes there.  An inferred exit is then late by at most one
 * sample period of the thread's own running time.
 */
#ifndef TBPF_INFER_SAMPLER_H
#define TBPF_INFER_SAMPLER_H
#include <stddef.h>

struct bpf_program;
struct bpf_link;

struct infer_sampler {
	struct bpf_link **links;
	int *fds;
	size_t n;
	unsigned period_us;
};

#define INFER_SAMPLE_US_DEFAULT 1000

/* Attach both programs (idempotent).  period_us 0 = default, or
 * TBPF_INFER_SAMPLE_US from the environment ("off": attach nothing, to
 * measure what the bound changes).  0, or -errno. */
int infer_sampler_start(struct infer_sampler *s, struct bpf_program *sample,
			struct bpf_program *on_switch, unsigned period_us);
void infer_sampler_stop(struct infer_sampler *s);

#endif
