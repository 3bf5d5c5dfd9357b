/* boxedop.h - discovery stage: where libtorch calls an operator by the
 * boxed path.  TorchScript's interpreter and torch.ops.aten.X
 * run every dispatcher operator through the std::function that
 * torch::jit::createOperatorFromC10 makes, [op](Stack& s){ op.callBoxed(s); }:
 * its _M_invoke(const _Any_data& f, Stack& s) is one function for every
 * operator, f holds a pointer to the lambda, whose only capture is the
 * c10::OperatorHandle (first member: OperatorDef*, whose OperatorEntry
 * starts with the c10::OperatorName: std::string name, overload_name).
 * The boxed path never passes at::_ops::<op>::call. */
#ifndef TBPF_BOXEDOP_H
#define TBPF_BOXEDOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_file;

/* The mangled name of that _M_invoke (a local symbol: only in .symtab) */
#define BOXEDOP_INVOKE_SYM \
	"_ZNSt17_Function_handlerIFvRSt6vectorIN3c106IValueESaIS2_EEEZN5torch3jit" \
	"12_GLOBAL__N_121createOperatorFromC10ERKNS1_14OperatorHandleEEUlS5_E_E9_M_" \
	"invokeERKSt9_Any_dataS5_"
/* The lambda's typeinfo name (.rodata), in stripped libraries too */
#define BOXEDOP_TYPEINFO_NAME \
	"*ZN5torch3jit12_GLOBAL__N_121createOperatorFromC10ERKN3c1014OperatorHandleEEUl" \
	"RSt6vectorINS2_6IValueESaIS7_EEE_"

/* The vaddr of that _M_invoke in ef: its .symtab symbol, or without one
 * (Debian's stripped libtorch) found from the lambda's typeinfo: the
 * typeinfo object (the R_X86_64_RELATIVE relocation that points at its
 * name) is loaded by _M_manager (__get_type_info); createOperatorFromC10
 * loads _M_manager and, just before, _M_invoke into the std::function.
 * use_symtab false skips the symbol (tests).  -ENOENT when not found. */
int boxedop_find(struct elf_file *ef, bool use_symtab, uint64_t *vaddr);

/* Pure: the rip-relative LEAs (REX.W 8D, ModRM mod 00 r/m 101) in code
 * (mapped at vaddr) whose target lies in [lo, hi], in address order: their
 * instruction vaddrs and targets, at most max.  Returns how many. */
size_t boxedop_leas(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t lo, uint64_t hi,
		    uint64_t *site, uint64_t *target, size_t max);

/* Pure: does code look like the _M_invoke: a push, then within its first
 * 24 bytes a load through rdi (mov (%rdi),%reg: the lambda pointer). */
bool boxedop_invoke_shape(const uint8_t *code, size_t n);

/* Pure: the boxed_names key of an operator (abi/ops.h): FNV-1a 64 over
 * name (at most TBPF_BOXED_NAME_MAX - 1 bytes), a NUL, overload (at most
 * TBPF_BOXED_OVL_MAX - 1 bytes) - what bpf/opnames.bpf.h computes from the
 * c10::OperatorName it reads. */
uint64_t boxedop_key(const char *name, const char *overload);

#endif
