/* cuda_ops.h - model stage: CUDA runtime calls as op rows.
 *
 * torch.profiler's key_averages() has a row for each CUDA runtime API the
 * ops call (Kineto's cuda_runtime activities, named by CUPTI:
 * "cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize", ...),
 * nested under the op that made them, whose Self CPU excludes them.  The
 * cuda model counts every CUDA record under its (pid, op, stack, api)
 * (cuda_opapi_add); cuda_ops_to_profile turns those into rows and takes
 * their time out of the parent's Self CPU.  Driver calls (cu*) are not
 * rows: torch.profiler shows runtime calls only (CUPTI driver activity
 * off).  Pure, unit-tested from fixtures. */
#ifndef TBPF_CUDA_OPS_H
#define TBPF_CUDA_OPS_H

#include <stdbool.h>
#include <stdint.h>

struct profile;
struct cuda_model;

/* Op id of an API's rows: never an op id (TBPF_OPID_MEMORY's range). */
#define CUDA_OPS_OPID_BASE 0x7fffff00u
#define CUDA_OPS_OPID(api) (CUDA_OPS_OPID_BASE + (api))
bool cuda_ops_is_row(uint32_t op_id);
/* A runtime API (cuda*), shown as a row. */
bool cuda_ops_api_is_runtime(uint32_t api);

/* Add a row per (pid, parent op, stack, runtime api) of cm to p: count =
 * calls, Self CPU = CPU total = their host time; the parent row (pid,
 * op_id, low 32 bits of stack_id; with shapes the one of most self time)
 * loses that time from its Self CPU (never below 0).  Calls outside any
 * op are top-level rows.  Call once per profile.  0 or -ENOMEM. */
int cuda_ops_to_profile(struct profile *p, const struct cuda_model *cm);

#endif
