/* modcall_site.h - discovery stage: which pybind function of
 * libtorch_python nn.Module.__call__ reaches once per module call, for the
 * module-call probe.
 *
 * nn.Module._call_impl asks the JIT tracer whether it is tracing: through
 * torch._C._get_tracing_state() up to torch 2.8 and torch._C._is_tracing()
 * in newer releases.  Which one is read from the target's own
 * nn/modules/module.py, not from its version.  Both pybind functions call
 * torch::jit::tracer::getTracingState() through the same PLT stub; the
 * _is_tracing one is the no-argument lambda returning bool whose code
 * calls what _get_tracing_state's calls (its .symtab name carries only a
 * lambda number). */
#ifndef TBPF_MODCALL_SITE_H
#define TBPF_MODCALL_SITE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_file;

enum modcall_binding {
	MODCALL_UNKNOWN = -1,     /* no _call_impl, or neither call in it */
	MODCALL_GET_TRACING_STATE, /* torch._C._get_tracing_state() */
	MODCALL_IS_TRACING,        /* torch._C._is_tracing() */
};

/* Which binding the body of `def _call_impl` in module.py's source calls. */
enum modcall_binding modcall_call_impl_binding(const char *src);

/* Is name (mangled) a pybind11 impl (_FUN) of a lambda that takes nothing
 * and returns bool? */
bool modcall_is_bool_binding(const char *name);

/* The targets of the `call rel32` instructions (e8) in code, which starts
 * at vaddr: up to max of them in out; returns how many. */
size_t modcall_call_targets(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t *out,
			    size_t max);

/* The vaddr of the binding `which` in libtorch_python (ef): 0, or -ENOENT
 * when .symtab has none or more than one candidate. */
int modcall_find_binding(struct elf_file *ef, enum modcall_binding which, uint64_t *vaddr);

#endif
