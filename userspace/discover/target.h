/* target.h - discovery stage: what to probe in one target process.
 *
 * Reads the target's maps, finds every libtorch it maps, discovers the
 * op entry points of each, assigns global op ids (1-based; 0 = none) and
 * finds the unwinder entry points for the exception hooks.
 */
#ifndef TBPF_TARGET_H
#define TBPF_TARGET_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "opsyms.h"
#include "procmaps.h"

struct target_lib {
	char *path;            /* as mapped in the target */
	char *host_path;       /* through /proc/PID/root */
	struct opsym_set syms;
	uint64_t *offsets;     /* op entry points probed (::call, and
				* ::redispatch with TARGET_REDISPATCH) */
	uint64_t *cookies;     /* op id | TBPF_COOKIE_REDISPATCH */
	size_t n;              /* offsets[] / cookies[] in use */
	uint32_t id_base;      /* op id = id_base + op_index + 1 */
	uint64_t load_bias;    /* address in the target = ELF vaddr + this */
	bool have_bias;
};

struct target_hook {
	char *host_path;
	uint64_t offset;
	bool is_catch;
	const char *sym;
};

/* record_function scopes: where at::RecordFunction is
 * constructed and ended, in the libtorch that defines them.  host_path NULL
 * when no library exports both. */
struct target_scope_hooks {
	char *host_path;
	uint64_t new_off;   /* RecordFunction::RecordFunction(RecordScope) */
	uint64_t end_off;   /* RecordFunction::end() */
	/* the module-call probe (forward counts): libtorch_python's pybind
	 * wrapper of torch._C._get_tracing_state or _is_tracing, whichever
	 * nn.Module._call_impl calls once per module call (modcall_site.h),
	 * when .symtab names it (torch 2.x wheels); else torch::jit::tracer::getTracingState() in libtorch,
	 * which C++ callers reach too (~12x the hits).  modcall_path NULL /
	 * modcall_off 0: neither found */
	char *modcall_path;
	uint64_t modcall_off;
	/* libtorch_python's callers that name a FUNCTION-scope RecordFunction
	 * (tbpf_scope_pend): torch._dynamo's _pytorch_record_function_enter,
	 * THPFunction_apply; py_path NULL when none was found */
	char *py_path;
	uint64_t pend_off[2];
	uint64_t pend_kind[2];  /* enum tbpf_pend_kind (the attach cookie) */
	size_t npend;
	/* custom autograd.Function backward nodes (pynode.h): PyNode::apply
	 * is probed as one more target_lib (libtorch_python, cookie
	 * TBPF_COOKIE_PYNODE); where its Python object is, and PyNode's vptr
	 * in the target (0: libtorch_python not mapped yet, so no
	 * evaluate_function row named).  pynode_why: why there are no PyNode
	 * rows (static text), NULL when there are. */
	uint32_t pynode_obj_off;
	uint64_t pynode_vtable;
	const char *pynode_why;
};

struct op_def {
	const char *name;      /* "aten::add" (owned by a target_lib) */
	const char *overload;  /* "Tensor" */
};

struct target {
	pid_t pid;
	struct target_lib *libs;
	size_t nlibs;
	struct target_hook *hooks;
	size_t nhooks;
	struct target_scope_hooks scope;
	struct op_def *ops;    /* index = op id; ops[0] unused */
	size_t nops;           /* including the unused slot 0 */
	size_t nprobes;
	char *comm;
	char *cmdline;
	bool cuda_only;        /* TARGET_CUDA_ONLY: no libtorch, CUDA libraries */
	struct pm_maps maps;   /* /proc/PID/maps at target_open: the one parse
				* the other discoveries of this target reuse */
};

/* target_open flags */
enum target_flags {
	/* probe at::_ops::<op>::redispatch as well as ::call.  Without it
	 * only ::call is probed: every op torch.profiler sees through the
	 * unboxed API (all eager Python code), at about 60% of the probe
	 * hits; ops entered by the boxed path (torch.ops.aten.X,
	 * TorchScript), whose first probed function is a ::redispatch, are
	 * missed.  See docs/how-it-works.md, "Counting like torch.profiler". */
	TARGET_REDISPATCH = 1 << 0,
	/* a process that maps libcudart or libcuda but no
	 * libtorch (a plain CUDA program, or Python before `import torch`)
	 * is a target too: target_open succeeds with cuda_only set, no libs
	 * and no ops (only the CUDA probes apply).  Without the flag, or
	 * when it maps neither, -ENOENT with a one-line reason. */
	TARGET_CUDA_ONLY = 1 << 1,
	/* --inproc: the libtorch libraries and the scope hooks
	 * (the module-call probe) only; no op symbols read, no ops */
	TARGET_NO_OPS = 1 << 2,
};

/* 0, or -errno with *why (malloc'd) a one-line reason such as
 * "process 1234 does not map libtorch (is it a PyTorch process?)".
 * flags: enum target_flags. */
int target_open(pid_t pid, uint32_t id_base, unsigned flags, struct target *t, char **why);
void target_close(struct target *t);
/* Whether maps hold libcudart (any soname) or libcuda. */
bool target_maps_cuda(const struct pm_maps *m);
/* Whether a mangled symbol is pybind11's function for
 * torch._C._get_tracing_state (the module-call probe's site). */
bool target_is_tracing_state_binding(const char *name);

/* Read /proc/PID/comm and cmdline (spaces for NULs); malloc'd or NULL. */
char *proc_comm(pid_t pid);
char *proc_cmdline(pid_t pid);

#endif
