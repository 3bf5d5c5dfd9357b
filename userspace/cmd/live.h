/* live.h - the live command: attach to running processes, collect, stop,
 * report. */
#ifndef TBPF_LIVE_H
#define TBPF_LIVE_H
#include "exitcode.h"
#include "options.h"

int live_run(const struct live_opts *o);

#endif
