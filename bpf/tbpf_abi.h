/* tbpf_abi.h - record stage: every layout shared by BPF programs and user
 * space, one header per feature under bpf/abi/ (this one includes them
 * all, so `#include "tbpf_abi.h"` gets the whole ABI):
 *   abi/core.h      record header and types, op records, mode flags,
 *                   attach cookie, the agents' owner channel
 *   abi/ops.h       per-thread op stacks, op rows, counters, histograms
 *   abi/pystack.h   Python stacks and the interpreter description
 *   abi/scope.h     record_function scopes, nn.Module calls
 *   abi/autograd.h  backward nodes (PyNode, node_evals, backward stacks)
 *   abi/inproc.h    the in-process RecordFunction agent
 *   abi/cuda.h      CUDA host records (launch, copy/set, sync, alloc)
 *   abi/gpu.h       the CUPTI agent's device records (REC_GPU)
 *   abi/mem.h       --profile-memory (REC_MEM, live allocations)
 *   abi/shapes.h    input shapes (argument descriptors, REC_SHAPE)
 */
#ifndef TBPF_ABI_H
#define TBPF_ABI_H

#include "abi/core.h"
#include "abi/ops.h"
#include "abi/pystack.h"
#include "abi/scope.h"
#include "abi/autograd.h"
#include "abi/inproc.h"
#include "abi/cuda.h"
#include "abi/gpu.h"
#include "abi/mem.h"
#include "abi/shapes.h"

#endif /* TBPF_ABI_H */
