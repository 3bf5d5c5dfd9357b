#!/bin/bash
# rf_layout.sh - the agent's C at::RecordFunctionCallback (agent/rf_layout.h)
# against the real class, for every torch header tree found here (Debian's
# libtorch-dev for 1.13, the torch 2.x venv's torch/include): same size and
# offsets, trivially copyable (passed in memory like the C struct), the
# callback types the agent's functions stand for, NUM_SCOPES and
# USER_SCOPE; and the four symbols the agent resolves exported by the
# matching libtorch_cpu (getTracingState's type too: agent/modcall.h).  And --inproc --record-shapes' input layout for
# the tree's torch version (userspace/attach/inproc_layouts.h, picked by
# TORCH_VERSION_MAJOR/MINOR): RecordFunction::inputs_, IValue's size, tag
# offset and type, the Tag values of None/Tensor/Int/GenericList,
# ListImpl::list, TensorImpl's sizes_and_strides_ (size_ first, the inline
# sizes or out-of-line pointer after it), numel_ and data_type_; for Input
# type ListImpl::elementType (a TypePtr whose first word is the Type*, in
# either representation), Type::kind_, TypeKind::TensorType, the Tags
# IValue::isScalar() accepts (read from its body in ivalue.h, each isX()
# checked to be `Tag::X == tag`), and from the profiler's collection.h
# whether InputOutputEncoder has a ScalarList tag (then
# SCALAR_LIST_LENGTH_LIMIT) and whether it keeps a tensor list's tensors
# (op_input_t holds a std::vector<TensorMetadata>); a tree whose version
# has no entry there fails.  And --inproc --group-by-stack's
# RecordFunction::sequence_nr_, fwd_thread_id_, step_callbacks_.thread_id_
# (INPROC_SEQ_*) and RecordScope::BACKWARD_FUNCTION; and the uprobe mode's
# --group-by-stack (NODE_SEQ_*): Node::sequence_nr_/thread_id_, libc10's
# raw_local_dispatch_key_set.excluded_ and AutogradFunctionality's bit.  A tree that is absent
# is reported, not checked.
set -u
cd "$(dirname "$0")/../.."
PY2=${PY2:-/var/cache/tbpf/venv-torch2/bin/python}
trees=()
[ -f /usr/include/ATen/record_function.h ] && trees+=("/usr/include|$(ls /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.* 2>/dev/null | head -n 1)")
# the torch 2.x venvs tests/setup.sh makes (one per tested version)
for py in "$PY2" /var/cache/tbpf/venv-torch2.*/bin/python; do
	[ -x "$py" ] || continue
	d=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
	[ -n "$d" ] && [ -f "$d/include/ATen/record_function.h" ] || continue
	case " ${trees[*]} " in *" $d/include|"*) continue ;; esac
	trees+=("$d/include|$d/lib/libtorch_cpu.so")
done
if ! command -v g++ > /dev/null; then
	echo "rf_layout: g++ not installed: not checked"; exit 0
fi
if [ ${#trees[@]} = 0 ]; then
	echo "rf_layout: no torch headers installed (tests/setup.sh installs them): not checked"; exit 0
fi
src=$(mktemp --suffix=.cpp)
trap 'rm -f "$src"' EXIT
cat > "$src" <<'CPP'
#include <cstddef>
#include <memory>
#include <type_traits>
#include <ATen/record_function.h>
#include "rf_layout.h"
using CB = at::RecordFunctionCallback;
using C = tbpf_rf_callback;
static_assert(sizeof(CB) == sizeof(C), "size");
static_assert(alignof(CB) == alignof(C), "alignment");
static_assert(offsetof(CB, start_) == offsetof(C, start), "start_");
static_assert(offsetof(CB, end_) == offsetof(C, end), "end_");
static_assert(offsetof(CB, sampling_prob_) == offsetof(C, sampling_prob), "sampling_prob_");
static_assert(offsetof(CB, scopes_) == offsetof(C, scopes), "scopes_");
static_assert(sizeof(((CB *)0)->scopes_) == sizeof(((C *)0)->scopes), "scopes_ size");
static_assert(offsetof(CB, needs_inputs_) == offsetof(C, needs_inputs), "needs_inputs_");
static_assert(offsetof(CB, needs_outputs_) == offsetof(C, needs_outputs), "needs_outputs_");
static_assert(offsetof(CB, needs_ids_) == offsetof(C, needs_ids), "needs_ids_");
static_assert(std::is_trivially_copyable<CB>::value && std::is_trivially_destructible<CB>::value,
	      "passed in memory like a C struct");
static_assert(std::is_same<CB::StartCallback,
	      std::unique_ptr<at::ObserverContext> (*)(const at::RecordFunction &)>::value, "start type");
static_assert(std::is_same<CB::EndCallback,
	      void (*)(const at::RecordFunction &, at::ObserverContext *)>::value, "end type");
static_assert(!std::is_trivially_destructible<std::unique_ptr<at::ObserverContext>>::value,
	      "unique_ptr is returned through a hidden pointer");
static_assert((int)at::RecordScope::NUM_SCOPES == RF_NUM_SCOPES, "NUM_SCOPES");
static_assert((int)at::RecordScope::USER_SCOPE == RF_USER_SCOPE, "USER_SCOPE");
static_assert(std::is_same<at::CallbackHandle, uint64_t>::value, "handle");
/* INPROC_LAYOUT_RFCB10_FN: fn_ (its contents: fn_check below) */
static_assert(offsetof(at::RecordFunction, fn_) == RF_FN_OFF, "RecordFunction::fn_");
static_assert(std::is_same<at::RecordFunction::schema_ref_t,
	      std::reference_wrapper<const c10::FunctionSchema>>::value, "schema_ref_t");

/* --inproc --record-shapes (inproc_layouts.h) for this tree's version */
#include <ATen/core/ivalue.h>
#include <ATen/core/List.h>
#include <c10/core/TensorImpl.h>
#include <torch/version.h>
#define _Static_assert static_assert
extern "C" {
#include "tbpf_abi.h"
#include "inproc_layouts.h"
#include "tlayout.h"
}
#if TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13
constexpr tbpf_inproc_ivlayout IV = INPROC_IV_T1_13;
constexpr tbpf_inproc_seqlayout SQ = INPROC_SEQ_T1_13;
constexpr tbpf_bwproc NL = NODE_SEQ_T1_13;
#elif TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 8
constexpr tbpf_inproc_ivlayout IV = INPROC_IV_T2_8;
constexpr tbpf_inproc_seqlayout SQ = INPROC_SEQ_T2_8;
constexpr tbpf_bwproc NL = NODE_SEQ_T2_8;
#elif TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 11
constexpr tbpf_inproc_ivlayout IV = INPROC_IV_T2_11;
constexpr tbpf_inproc_seqlayout SQ = INPROC_SEQ_T2_8;
constexpr tbpf_bwproc NL = NODE_SEQ_T2_8;
#elif TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 15
constexpr tbpf_inproc_ivlayout IV = INPROC_IV_T2_15;
constexpr tbpf_inproc_seqlayout SQ = INPROC_SEQ_T2_8;
constexpr tbpf_bwproc NL = NODE_SEQ_T2_15;
#else
#error "no inproc_layouts.h entry for this torch version"
#endif
using SAS = c10::impl::SizesAndStrides;
static_assert(IV.rf_inputs_off == offsetof(at::RecordFunction, inputs_), "RecordFunction::inputs_");
static_assert(std::is_same<decltype(at::RecordFunction::inputs_), c10::ArrayRef<const c10::IValue>>::value,
	      "inputs_ is an ArrayRef<const IValue>");
static_assert(offsetof(c10::ArrayRef<const c10::IValue>, Data) == 0 &&
	      offsetof(c10::ArrayRef<const c10::IValue>, Length) == 8, "ArrayRef: data, size");
static_assert(IV.iv_size == sizeof(c10::IValue), "sizeof(IValue)");
static_assert(offsetof(c10::IValue, payload) == 0, "IValue::payload");
static_assert(IV.iv_tag_off == offsetof(c10::IValue, tag), "IValue::tag");
static_assert(sizeof(c10::IValue::Tag) == 4, "Tag is 32 bits");
static_assert(IV.tag_none == (int)c10::IValue::Tag::None, "Tag::None");
static_assert(IV.tag_tensor == (int)c10::IValue::Tag::Tensor, "Tag::Tensor");
static_assert(IV.tag_int == (int)c10::IValue::Tag::Int, "Tag::Int");
static_assert(IV.tag_list == (int)c10::IValue::Tag::GenericList, "Tag::GenericList");
static_assert(sizeof(at::Tensor) == 8, "a Tensor is its TensorImpl pointer");
static_assert(IV.list_vec_off == offsetof(c10::detail::ListImpl, list), "ListImpl::list");
static_assert(std::is_same<decltype(c10::detail::ListImpl::list), std::vector<c10::IValue>>::value,
	      "ListImpl::list is a vector<IValue>");
static_assert(IV.ti_sizes_off == offsetof(c10::TensorImpl, sizes_and_strides_) + offsetof(SAS, size_),
	      "TensorImpl::sizes_and_strides_.size_");
static_assert(offsetof(SAS, inlineStorage_) == 8 && offsetof(SAS, outOfLineStorage_) == 8,
	      "sizes inline or out of line right after size_");
static_assert(C10_SIZES_AND_STRIDES_MAX_INLINE_SIZE == TBPF_SIZES_INLINE, "inline sizes");
static_assert(IV.ti_numel_off == offsetof(c10::TensorImpl, numel_), "TensorImpl::numel_");
static_assert(std::is_same<decltype(c10::TensorImpl::numel_), int64_t>::value, "numel_ is int64");
static_assert(IV.ti_dtype_off == offsetof(c10::TensorImpl, data_type_), "TensorImpl::data_type_");
static_assert(sizeof(caffe2::TypeMeta) == 2, "TypeMeta is its u16 index");

/* Input type: a list's element type, read as elementType's first word
 * (the Type*: shared_ptr's pointer or the singleton's), then Type::kind_ */
using TP = c10::TypePtr;
static_assert(IV.list_type_off == offsetof(c10::detail::ListImpl, elementType), "ListImpl::elementType");
static_assert(std::is_same<decltype(c10::detail::ListImpl::elementType), TP>::value, "elementType is a TypePtr");
static_assert(std::is_same<TP, c10::SingletonOrSharedTypePtr<c10::Type>>::value, "TypePtr");
static_assert(sizeof(TP) == 16 && offsetof(TP, repr_) == 0, "TypePtr is its Repr");
/* up to 2.8 a union of a shared_ptr and a singleton's pointer (Repr),
 * from 2.11 a shared_ptr alone (singletons as shared_ptrs that free
 * nothing): in both the Type* is the first word */
template <class P, class = void> struct has_repr_union : std::false_type {};
template <class P> struct has_repr_union<P, std::void_t<typename P::Repr>> : std::true_type {};
template <class P> constexpr bool typeptr_type_first()
{
	if constexpr (has_repr_union<P>::value)
		return offsetof(typename P::Repr, shared_) == 0 &&
		       offsetof(typename P::SharedPtrWrapper, repr_) == 0 &&
		       offsetof(typename P::Repr, singletonRepr_) == 0 &&
		       offsetof(typename P::Repr::SingletonRepr, singleton_) == 0;
	else
		return std::is_same<decltype(P::repr_), std::shared_ptr<c10::Type>>::value &&
		       offsetof(P, repr_) == 0;
}
static_assert(typeptr_type_first<TP>() && offsetof(std::__shared_ptr<c10::Type>, _M_ptr) == 0 &&
	      std::is_base_of<std::__shared_ptr<c10::Type>, std::shared_ptr<c10::Type>>::value,
	      "TypePtr: the Type* first");
static_assert(IV.type_kind_off == offsetof(c10::Type, kind_), "Type::kind_");
static_assert(std::is_same<std::underlying_type<c10::TypeKind>::type, int>::value, "TypeKind is an int");
static_assert(IV.kind_tensor == (int)c10::TypeKind::TensorType && c10::TensorType::Kind == c10::TypeKind::TensorType,
	      "TypeKind::TensorType");
/* what the script read from ivalue.h and the profiler's collection.h */
#define TBPF_TAG(x) (1u << (int)c10::IValue::Tag::x)
static_assert((int)c10::IValue::Tag::Enum < 32, "every Tag fits scalar_tags");
static_assert(IV.scalar_tags == (TBPF_HDR_SCALAR_TAGS), "the Tags IValue::isScalar() accepts");
static_assert(IV.scalarlist_max == TBPF_HDR_SCALARLIST_MAX, "InputOutputEncoder ScalarList / SCALAR_LIST_LENGTH_LIMIT");
static_assert(IV.tlist_undef == TBPF_HDR_TLIST_READ, "InputOutputEncoder keeps a tensor list's tensors");
/* tensors the profiler records as undefined: is_nested() (key_set_ has
 * NestedTensor: one bit) and has_symbolic_sizes_strides_ (its byte and
 * bit found by the program the script ran: TBPF_HDR_SYM_OFF/MASK) */
constexpr uint64_t NESTED = c10::DispatchKeySet(c10::DispatchKey::NestedTensor).repr_;
static_assert(NESTED && !(NESTED & (NESTED - 1)), "DispatchKeySet(NestedTensor) is one bit");
static_assert(std::is_same<decltype(c10::TensorImpl::key_set_), c10::DispatchKeySet>::value &&
	      sizeof(c10::DispatchKeySet) == 8 && offsetof(c10::DispatchKeySet, repr_) == 0,
	      "key_set_ is a DispatchKeySet, its u64 repr_");
static_assert(IV.ti_keyset_off == offsetof(c10::TensorImpl, key_set_), "TensorImpl::key_set_");
static_assert(IV.nested_mask == NESTED, "DispatchKeySet(NestedTensor)");
static_assert(IV.ti_sym_off == TBPF_HDR_SYM_OFF && IV.sym_mask == TBPF_HDR_SYM_MASK,
	      "has_symbolic_sizes_strides_");
/* the uprobe reader's (tlayout.h, by the optionals' spelling): key_set_
 * the word 16 bytes after numel_, the flag in the byte 14 after it */
static_assert(offsetof(c10::TensorImpl, key_set_) == offsetof(c10::TensorImpl, numel_) + 16,
	      "key_set_ at numel_ + 16");
static_assert(TBPF_HDR_SYM_OFF == offsetof(c10::TensorImpl, numel_) + 14 &&
	      TLAYOUT_SYM_MASK == TBPF_HDR_SYM_MASK, "has_symbolic_sizes_strides_ at numel_ + 14");
static_assert(TLAYOUT_NESTED_MASK == NESTED, "tlayout.h: DispatchKeySet(NestedTensor)");
#if TORCH_VERSION_MAJOR == 1
static_assert(c10::DispatchKeySet(c10::DispatchKey::Dense).repr_ == 1ull << TLAYOUT_BACKENDS_T1,
	      "tlayout.h: 1.13's backend bits");
#else
static_assert(c10::DispatchKeySet(c10::DispatchKey::Dense).repr_ == 1ull << TLAYOUT_BACKENDS_T2,
	      "tlayout.h: 2.x's backend bits");
#endif
/* the uprobe mode's ScalarList limit (tbpf_abi.h) where there is one */
#if TBPF_HDR_SCALARLIST_MAX > 0
static_assert(TBPF_SCALARLIST_MAX == TBPF_HDR_SCALARLIST_MAX, "TBPF_SCALARLIST_MAX");
#endif
/* --inproc --group-by-stack: sequence number and thread ids */
static_assert((int)at::RecordScope::BACKWARD_FUNCTION == RF_BACKWARD_SCOPE, "BACKWARD_FUNCTION");
static_assert(SQ.rf_seq_off == offsetof(at::RecordFunction, sequence_nr_), "sequence_nr_");
static_assert(std::is_same<decltype(at::RecordFunction::sequence_nr_), int64_t>::value,
	      "sequence_nr_ is int64");
static_assert(SQ.rf_fwd_tid_off == offsetof(at::RecordFunction, fwd_thread_id_), "fwd_thread_id_");
static_assert(std::is_same<decltype(at::RecordFunction::fwd_thread_id_), uint64_t>::value,
	      "fwd_thread_id_ is uint64");
static_assert(SQ.rf_tid_off == offsetof(at::RecordFunction, step_callbacks_) +
	      offsetof(at::StepCallbacks, thread_id_), "step_callbacks_.thread_id_");
static_assert(std::is_same<decltype(at::StepCallbacks::thread_id_), uint64_t>::value,
	      "thread_id_ is uint64");
/* the uprobe mode's --group-by-stack (bpf/bwstack.bpf.h): a Node's
 * sequence_nr_ and thread_id_, libc10's thread-local excluded dispatch
 * keys and the AutogradFunctionality bit (outside the XOR mask) */
#include <torch/csrc/autograd/function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
static_assert(NL.node_seq_off == offsetof(torch::autograd::Node, sequence_nr_), "Node::sequence_nr_");
static_assert(std::is_same<std::remove_const<decltype(torch::autograd::Node::sequence_nr_)>::type,
	      uint64_t>::value, "sequence_nr_ is uint64");
static_assert(NL.node_tid_off == offsetof(torch::autograd::Node, thread_id_), "Node::thread_id_");
static_assert(std::is_same<decltype(torch::autograd::Node::thread_id_), uint64_t>::value,
	      "thread_id_ is uint64");
static_assert(NL.c10_excl_off == offsetof(c10::impl::PODLocalDispatchKeySet, excluded_), "excluded_");
static_assert(std::is_same<decltype(c10::impl::raw_local_dispatch_key_set),
	      c10::impl::PODLocalDispatchKeySet>::value, "raw_local_dispatch_key_set");
static_assert(NL.autograd_mask == c10::DispatchKeySet(c10::DispatchKey::AutogradFunctionality).repr_,
	      "AutogradFunctionality's bit");
static_assert(!(c10::default_excluded_set.repr_ & NL.autograd_mask), "not in the XOR mask");
static_assert((c10::autograd_dispatch_keyset_with_ADInplaceOrView.repr_ & NL.autograd_mask),
	      "below-autograd guards exclude that bit");
// agent/modcall.h's hook stands for getTracingState as void *(void *):
// no argument, a reference returned in rax (an sret return would pass too)
#include <torch/csrc/jit/frontend/tracer.h>
static_assert(std::is_same<decltype(&torch::jit::tracer::getTracingState),
	      const std::shared_ptr<torch::jit::tracer::TracingState> &(*)()>::value,
	      "getTracingState()");
CPP
# The Tags isScalar() accepts, from its body: "TBPF_TAG(Double) | ..."; each
# isX() it calls must be `return Tag::X == tag;`
scalar_tags() {
	local h=$1/ATen/core/ivalue.h flat x out=""
	flat=$(tr '\n' ' ' < "$h" | tr -s ' ')
	for x in $(awk '/bool isScalar\(\) const \{/{f=1} f{print} f&&/}/{exit}' "$h" | tr -d '\n' |
		   grep -o 'is[A-Za-z]*()' | tail -n +2 | sed 's/^is//; s/()$//'); do
		grep -qF "bool is$x() const { return Tag::$x == tag; }" <<< "$flat" || { echo "0"; return; }
		out="$out${out:+ | }TBPF_TAG($x)"
	done
	echo "${out:-0}"
}
# InputOutputEncoder's ScalarList: SCALAR_LIST_LENGTH_LIMIT when its Tag
# enum has ScalarList, else 0
scalarlist_max() {
	local h=$1/torch/csrc/profiler/collection.h
	if awk '/enum class Tag \{/{f=1} f{print} f&&/};/{exit}' "$h" | grep -qw ScalarList; then
		sed -n 's/.*constexpr int SCALAR_LIST_LENGTH_LIMIT = \([0-9]*\);.*/\1/p' "$h" | head -n 1 | grep . || echo -1
	else
		echo 0
	fi
}
# 1 when the profiler keeps a tensor list's tensors (op_input_t has a
# std::vector<TensorMetadata>): it then writes "" for a list holding an
# undefined tensor
tlist_read() {
	tr '\n' ' ' < "$1/torch/csrc/profiler/collection.h" | tr -s ' ' |
		grep -q 'using op_input_t = std::variant< TensorMetadata, std::vector<TensorMetadata>,' &&
		echo 1 || echo 0
}
# has_symbolic_sizes_strides_ is a bit field (no offsetof): a program
# sets it in a zeroed TensorImpl-sized buffer and prints "byte mask"
sym_bit() {
	local inc=$1 lib=$2 exe
	exe=$(mktemp)
	cat > "$exe.cpp" <<'SYM'
#include <cstdio>
#include <c10/core/TensorImpl.h>
int main() {
	alignas(c10::TensorImpl) static unsigned char b[sizeof(c10::TensorImpl)];
	reinterpret_cast<c10::TensorImpl *>(b)->has_symbolic_sizes_strides_ = 1;
	int n = 0;
	for (size_t i = 0; i < sizeof b; i++)
		if (b[i]) { printf("%zu %#x\n", i, b[i]); n++; }
	return n != 1;
}
SYM
	if g++ -std=$std -fno-access-control -w -I"$inc" "$exe.cpp" -o "$exe" \
		-L"$(dirname "$lib")" -l:"$(basename "$(ls "$(dirname "$lib")"/libc10.so* | head -n 1)")" \
		-Wl,-rpath,"$(dirname "$lib")" 2> /dev/null && "$exe"; then :; else echo "-1 0"; fi
	rm -f "$exe" "$exe.cpp"
}
# fn_ (agent/rf_layout.h RF_FN_*): a program builds a RecordFunction's fn_
# holding a schema and holding a string, reads them as the agent does
# (the schema pointer as fn_'s first word, the index's low byte) and runs
# libtorch's own RecordFunction::name() on both; prints "ok" or what differs
fn_check() {
	local inc=$1 lib=$2 exe
	exe=$(mktemp)
	cat > "$exe.cpp" <<'FN'
#include <cstdio>
#include <cstring>
#include <ATen/record_function.h>
#include <ATen/core/function_schema.h>
#include "rf_layout.h"
int main() {
	c10::FunctionSchema schema("tbpf::fn_check", "overload", {}, {});
	at::RecordFunction rf(at::RecordScope::FUNCTION);
	const char *b = reinterpret_cast<const char *>(&rf);
	const void *p;
	rf.fn_ = std::cref(schema);
	memcpy(&p, b + RF_FN_OFF, sizeof(p));
	if (p != &schema || (unsigned char)b[RF_FN_OFF + RF_FN_INDEX_OFF] != RF_FN_SCHEMA)
		return printf("schema alternative: word %p (want %p), index byte %u\n", p, (const void *)&schema,
			      (unsigned char)b[RF_FN_OFF + RF_FN_INDEX_OFF]), 1;
	if (rf.name() != schema.name().c_str())
		return printf("name() is not the schema's name string\n"), 1;
	rf.fn_ = std::string("tbpf::a_string");
	if ((unsigned char)b[RF_FN_OFF + RF_FN_INDEX_OFF] == RF_FN_SCHEMA || strcmp(rf.name(), "tbpf::a_string"))
		return printf("string alternative: index byte %u, name %s\n",
			      (unsigned char)b[RF_FN_OFF + RF_FN_INDEX_OFF], rf.name()), 1;
	return printf("ok\n"), 0;
}
FN
	if g++ -std=$std -fno-access-control -w -I"$inc" -I"$inc/torch/csrc/api/include" -Iagent "$exe.cpp" \
		-o "$exe" -L"$(dirname "$lib")" -l:"$(basename "$lib")" \
		-l:"$(basename "$(ls "$(dirname "$lib")"/libc10.so* | head -n 1)")" \
		-Wl,-rpath,"$(dirname "$lib")" 2> "$exe.err"; then
		"$exe"
	else
		echo "does not compile: $(head -n 3 "$exe.err")"
	fi
	rm -f "$exe" "$exe.cpp" "$exe.err"
}
fail=0
for t in "${trees[@]}"; do
	inc=${t%%|*} lib=${t#*|}
	if [ ! -f "$inc/torch/csrc/profiler/collection.h" ]; then
		echo "rf_layout: $inc: no torch/csrc/profiler/collection.h (Input type's rules)"; fail=1; continue
	fi
	# the oldest standard the tree's headers build with (newer torch
	# needs C++20)
	std=c++17
	echo '#include <c10/core/TensorImpl.h>' | g++ -std=$std -fsyntax-only -w -x c++ -I"$inc" - 2> /dev/null || std=c++20
	read -r sym_off sym_mask <<< "$(sym_bit "$inc" "$lib")"
	# what the masks stand for: is_nested() and has_symbolic_sizes_strides()
	# read exactly key_set_'s NestedTensor and the bit field
	flat=$(tr '\n' ' ' < "$inc/c10/core/TensorImpl.h" | tr -s ' ')
	for body in "bool is_nested() const { return key_set_.has(DispatchKey::NestedTensor); }" \
		    "bool has_symbolic_sizes_strides() const { return has_symbolic_sizes_strides_; }"; do
		grep -qF "$body" <<< "$flat" || { echo "rf_layout: $inc: TensorImpl has no '$body'"; fail=1; }
	done
	if g++ -std=$std -fsyntax-only -fno-access-control -w -I"$inc" -I"$inc/torch/csrc/api/include" \
		-Iagent -Ibpf -Iuserspace/attach -Iuserspace/discover "-DTBPF_HDR_SCALAR_TAGS=$(scalar_tags "$inc")" \
		"-DTBPF_HDR_SYM_OFF=$sym_off" "-DTBPF_HDR_SYM_MASK=$sym_mask" \
		"-DTBPF_HDR_SCALARLIST_MAX=$(scalarlist_max "$inc")" "-DTBPF_HDR_TLIST_READ=$(tlist_read "$inc")" \
		"$src" 2> /tmp/rf_layout.err; then
		echo "rf_layout: $inc: RecordFunctionCallback matches agent/rf_layout.h," \
		     "inputs/IValue/TensorImpl/list types match userspace/attach/inproc_layouts.h" \
		     "(isScalar: $(scalar_tags "$inc"); ScalarList up to $(scalarlist_max "$inc");" \
		     "tensor lists read: $(tlist_read "$inc"); has_symbolic_sizes_strides_ at" \
		     "+$sym_off & $sym_mask)"
	else
		echo "rf_layout: $inc: MISMATCH"; head -n 20 /tmp/rf_layout.err; fail=1
	fi
	fn=$(fn_check "$inc" "$lib")
	if [ "$fn" = ok ]; then
		echo "rf_layout: $inc: RecordFunction::fn_ matches agent/rf_layout.h (schema pointer, index, name())"
	else
		echo "rf_layout: $inc: RecordFunction::fn_: $fn"; fail=1
	fi
	# fnname.h's hook: libtorch_cpu calls Dispatcher::cleanup through its GOT
	readelf -rW "$lib" | grep -q "R_X86_64_JUMP_SLOT .* _ZN3c1010Dispatcher7cleanupERKNS_14OperatorHandleERKNS_12OperatorNameE + 0" ||
		{ echo "rf_layout: $lib has no GOT slot for Dispatcher::cleanup"; fail=1; }
	for sym in _ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE _ZN2at14removeCallbackEm \
		   _ZNK2at14RecordFunction4nameEv _ZN5torch3jit6tracer15getTracingStateEv \
		   _ZN3c1010Dispatcher7cleanupERKNS_14OperatorHandleERKNS_12OperatorNameE; do
		nm -D --defined-only "$lib" | grep -q " T $sym\$" ||
			{ echo "rf_layout: $lib does not export $sym"; fail=1; }
	done
	# the agent's dlsym for an undefined tensor (--record-shapes)
	c10=$(ls "$(dirname "$lib")"/libc10.so* 2>/dev/null | head -n 1)
	nm -D --defined-only "$c10" | grep -q " B _ZN3c1019UndefinedTensorImpl10_singletonE\$" ||
		{ echo "rf_layout: $c10 does not export c10::UndefinedTensorImpl::_singleton"; fail=1; }
done
exit $fail
