/* abi/scope.h - record_function scopes and nn.Module calls, shared by BPF
 * and user space: scope ids and names (REC_SCOPE_NAME), the module-call
 * row, and the pending names of FUNCTION-scope RecordFunctions.
 */
#ifndef TBPF_ABI_SCOPE_H
#define TBPF_ABI_SCOPE_H

#include "core.h"

/* A `record_function` scope (Python torch.profiler.record_function, and the
 * ones PyTorch opens itself: Optimizer.step#..., enumerate(DataLoader)#...)
 * is an at::RecordFunction constructed with RecordScope::USER_SCOPE.  The
 * BPF side opens it as a frame on the thread's op stack (flag OPF_SCOPE,
 * no return slot) at the constructor and closes it at RecordFunction::end
 * of the same object, so ops run inside it are its children, and its rows
 * and records are op rows and REC_OP_ENTER/EXIT records whose op id is in
 * the scope range: TBPF_SCOPE_ID_BASE | (FNV-1a 32 of the name & MASK).
 * The name reaches user space through the `scope_names` map (live) and a
 * REC_SCOPE_NAME record the first time the name is seen (captures). */
/* nn.Module calls (torchprof's Count): nn.Module._call_impl calls
 * torch._C._get_tracing_state() once per module call, which calls
 * torch::jit::tracer::getTracingState() in libtorch_cpu.  A probe there
 * whose innermost Python frame is `_call_impl` counts one call of the
 * module that frame's `self` is, in opstats rows with this op id keyed by
 * the Python stack (whose layers end at that module). */
#define TBPF_MODCALL_ID 0x7fffffffu
#define TBPF_MODCALL_FUNC "_call_impl"

#define TBPF_SCOPE_ID_BASE 0x80000000u
#define TBPF_SCOPE_ID_MASK 0x7fffffffu
#define TBPF_IS_SCOPE_ID(id) (((__u32)(id) & TBPF_SCOPE_ID_BASE) != 0)
#define TBPF_SCOPE_NAME_MAX 128   /* bytes with the NUL; longer names are cut */
#define TBPF_RECORD_SCOPE_USER 7  /* at::RecordScope::USER_SCOPE (1.13 .. 2.8) */

struct tbpf_scope_name {
	char name[TBPF_SCOPE_NAME_MAX];
};

struct rec_scope_name {
	struct rec_hdr h;
	__u32 pid;
	__u32 scope_id;   /* op id of the scope's rows and records */
	char name[TBPF_SCOPE_NAME_MAX];
};

/* Who names a FUNCTION-scope RecordFunction without the profiler on (the
 * attach cookie of tbpf_scope_pend) */
enum tbpf_pend_kind {
	TBPF_PEND_NONE = 0,
	TBPF_PEND_CSTR,     /* rdi: const char* (torch._dynamo's C shim
			     * _pytorch_record_function_enter(name):
			     * "TorchDynamo Cache Lookup",
			     * "Torch-Compiled Region: 0/0") */
	TBPF_PEND_PYTYPE,   /* rdi: PyTypeObject*, its tp_name (THPFunction_apply(cls,
			     * inputs): a custom autograd.Function's forward row,
			     * "CompiledFunction") */
};
#define TBPF_RECORD_SCOPE_FUNCTION 0   /* at::RecordScope::FUNCTION */

#endif /* TBPF_ABI_SCOPE_H */
