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
struct cuda_model;
/* Kernel names for `tbpf report`: the host-stub symbols named
 * while the targets' libraries could be read, as KERNEL meta records. */
void live_write_kernel_names(struct capture_writer *cw, const struct cuda_model *cm);

#endif
