/* inproc_torch.h - the live command with --inproc: the targets' torch
 * builds checked for the in-process agent. */
#ifndef TBPF_INPROC_TORCH_H
#define TBPF_INPROC_TORCH_H
#include "options.h"
#include "tbpf_abi.h"

/* The layout for every target's torch (o->sel.pids); 0 with layouts,
 * ivs (with --record-shapes) and sls (with --group-by-stack) filled, or
 * the exit code / LIVE_INPROC_FALLBACK after one line. */
int inproc_check_torch(const struct live_opts *o, unsigned *layouts,
		       const struct tbpf_inproc_ivlayout **ivs,
		       const struct tbpf_inproc_seqlayout **sls);

#endif
