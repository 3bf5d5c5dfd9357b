/* live_inproc.h - the live command with --inproc: RecordFunction callbacks
 * registered by an agent inside each target instead of uprobes
 * (docs/inproc.md). */
#ifndef TBPF_LIVE_INPROC_H
#define TBPF_LIVE_INPROC_H
#include "options.h"

/* Returned when no target's torch has a verified layout (one line was
 * written): the caller runs the uprobe mode instead. */
#define LIVE_INPROC_FALLBACK (-1)

/* libtbpf_inproc.so: $TBPF_INPROC_PATH, else beside the tbpf binary or
 * in ../lib/tbpf/ (malloc'd realpath), or NULL. */
char *inproc_agent_path(void);

/* The exit code, or LIVE_INPROC_FALLBACK. */
int live_inproc_run(const struct live_opts *o);

#endif
