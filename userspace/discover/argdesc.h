/* argdesc.h - discovery stage: where an op's tensor arguments are at its
 * entry, from the demangled signature of at::_ops::<op>::call (or
 * ::redispatch) and the x86-64 System V ABI (--record-shapes).
 *
 * Pure functions, unit-tested on real signatures of torch 1.13 and 2.8. */
#ifndef TBPF_ARGDESC_H
#define TBPF_ARGDESC_H

#include <stdbool.h>
#include "tbpf_abi.h"

/* How an op returns (from its schema's "-> ..." part): a class returned
 * by value (at::Tensor, tuples, Scalar, vectors) comes back through a
 * hidden pointer in rdi, so the arguments start one register later. */
enum argdesc_ret {
	ARGRET_UNKNOWN = 0,
	ARGRET_REG,      /* void, references, scalars: arguments from rdi */
	ARGRET_MEMORY,   /* sret: arguments from rsi */
};

/* Pure: the return kind of a schema's return part, the text after
 * ") -> " ("Tensor", "Tensor(a!)", "(Tensor, Tensor)", "()", "int"). */
enum argdesc_ret argdesc_schema_ret(const char *ret);

/* Pure: demangled "at::_ops::add_Tensor::call(at::Tensor const&, ...)"
 * -> *d: the schema's argument count (a redispatch's leading
 * DispatchKeySet is not one), and for each Tensor / optional Tensor
 * argument its index and register or stack slot.  0, or -EINVAL when the
 * signature cannot be placed: an unknown type before a tensor, more
 * tensors or arguments than the record holds, ret unknown.  std_lib:
 * the library spells optionals std::optional (torch >= 2.4), which
 * makes c10::OptionalArrayRef 24 bytes (passed in memory) instead of 16.
 * want_ints: int lists and ints are entries too (ARGK_INTLIST, ARGK_INT,
 * ARGK_SYMINT), for the FLOPs formulas that need their values (conv2d). */
int argdesc_parse(const char *demangled, bool redispatch, enum argdesc_ret ret, bool std_lib,
		  bool want_ints, struct tbpf_argdesc *d);

#endif
