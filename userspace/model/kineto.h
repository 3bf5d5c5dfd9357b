/* kineto.h - model stage: op rows from a torch.profiler trace.
 *
 * The Chrome JSON torch.profiler writes (export_chrome_trace,
 * tensorboard_trace_handler: Kineto's layout, {"traceEvents": [...]}; or
 * the legacy profiler's bare event list) -> struct profile rows, so `tbpf
 * diff` compares torch.profiler and tbpf op by op.  An op is an "X" event
 * of category cpu_op or user_annotation (legacy: every "X" event), but
 * ProfilerStep#N (torch.profiler's own step markers).  Per thread the
 * events nest by time: self = dur - the children's durs; an op that is the
 * only child of a same-name op is counted as folded, as tbpf's rows count
 * it (torch.profiler's key_averages() rule).
 */
#ifndef TBPF_KINETO_H
#define TBPF_KINETO_H

#include <stdbool.h>
#include <stddef.h>
#include "profile.h"

/* Does buf look like a JSON trace (first non-blank byte '{' or '[')? */
bool kineto_is_json(const char *buf, size_t len);
/* buf[0..len) -> rows of p (profile_init'ed).  0, -ENOMEM, or -EINVAL
 * with *why (malloc'd: what and at which byte). */
int profile_from_kineto(const char *buf, size_t len, struct profile *p, char **why);

#endif
