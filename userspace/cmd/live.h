/* live.h - the live command: attach to running processes, collect, stop,
 * report. */
#ifndef TBPF_LIVE_H
#define TBPF_LIVE_H
#include "exitcode.h"
#include "options.h"

int live_run(const struct live_opts *o);
/* Thread names of pid into the capture (also --inproc's). */
struct capture_writer;
void live_write_threads(struct capture_writer *cw, pid_t pid);

#endif
