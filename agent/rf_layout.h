/* rf_layout.h - at::RecordFunctionCallback as C: layout
 * INPROC_LAYOUT_RFCB10 (bpf/tbpf_abi.h), that of the torch 1.13 and 2.8
 * headers (ATen/record_function.h).  Checked against the real class, from
 * both installed header trees, by tests/unit/rf_layout.sh (sizes, offsets,
 * trivially copyable, callback types, NUM_SCOPES, USER_SCOPE).
 *
 * Itanium C++ ABI (x86-64): the class has no virtual member and no
 * user-declared copy constructor or destructor, so a by-value argument is
 * passed in memory exactly like this 40-byte struct.  The start callback
 * returns std::unique_ptr<ObserverContext>, non-trivial, so through a
 * hidden pointer (first argument, returned in rax). */
#ifndef TBPF_RF_LAYOUT_H
#define TBPF_RF_LAYOUT_H
#include <stdbool.h>

#define RF_NUM_SCOPES 10   /* at::RecordScope::NUM_SCOPES */
#define RF_USER_SCOPE 7    /* at::RecordScope::USER_SCOPE */
#define RF_BACKWARD_SCOPE 1 /* at::RecordScope::BACKWARD_FUNCTION */

/* INPROC_LAYOUT_RFCB10_FN: at::RecordFunction::fn_, a variant of a
 * std::string (record_function scopes, autograd nodes) and a
 * std::reference_wrapper<const c10::FunctionSchema> (ops through the
 * dispatcher; name() is that schema's name().c_str()).  1.13: c10::variant
 * (index an unsigned int), 2.8: std::variant (index one byte); the agent
 * reads the index's low byte.  The schema alternative's first word is the
 * FunctionSchema pointer.  Checked by tests/unit/rf_layout.sh: offsetof,
 * and a program that builds fn_ both ways and runs libtorch's name(). */
#define RF_FN_OFF 160       /* offsetof(RecordFunction, fn_) */
#define RF_FN_INDEX_OFF 32  /* the variant's index in fn_ */
#define RF_FN_SCHEMA 1      /* the index of the schema alternative */

struct tbpf_rf_callback {
	void *(*start)(void **ret, const void *rf); /* returns unique_ptr via sret */
	void (*end)(const void *rf, void *ctx);
	double sampling_prob;
	bool scopes[RF_NUM_SCOPES];
	bool needs_inputs, needs_outputs, needs_ids;
};
#ifndef __cplusplus
_Static_assert(sizeof(struct tbpf_rf_callback) == 40, "RecordFunctionCallback");
#endif

#endif
