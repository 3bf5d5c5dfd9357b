/* inproc_layouts.h - where a RecordFunction's inputs and their tensors'
 * sizes are, per torch version (--inproc --record-shapes, issue 19/16):
 * struct tbpf_inproc_ivlayout values the agent reads with.
 *
 * Every value is checked against the torch headers of the version it
 * names by tests/unit/rf_layout.sh (part of `make unit`), with
 * offsetof/sizeof and the IValue::Tag enum of the real classes:
 *   RecordFunction::inputs_ (c10::ArrayRef<const IValue>: data, size),
 *   sizeof(IValue), IValue::tag (uint32), IValue::Tag None/Tensor/Int/
 *   GenericList, c10::detail::ListImpl::list, TensorImpl::
 *   sizes_and_strides_ (size_ first, then the inline sizes or the
 *   out-of-line pointer), TensorImpl::numel_, TensorImpl::data_type_;
 *   for Input type: ListImpl::elementType (its Type* first), Type::kind_,
 *   TypeKind::TensorType, the Tags IValue::isScalar() accepts (scalar_tags),
 *   and how the version's torch.profiler classifies lists
 *   (scalarlist_max = InputOutputEncoder's SCALAR_LIST_LENGTH_LIMIT where
 *   its Tag has ScalarList, else 0; tlist_undef where it reads a tensor
 *   list's tensors, which is where it writes a ScalarList tag);
 *   TensorImpl::key_set_ and DispatchKeySet(NestedTensor) (is_nested()),
 *   and the byte and bit of has_symbolic_sizes_strides_ (a bit field:
 *   found by a program that sets it, rf_layout.sh), for the tensors the
 *   profiler records as undefined.
 * A torch version without an entry here gets no shapes in --inproc (one
 * line, then the run goes on without them). */
#ifndef TBPF_INPROC_LAYOUTS_H
#define TBPF_INPROC_LAYOUTS_H

/* torch 1.13 (Debian libtorch-dev 1.13 headers) */
#define INPROC_IV_T1_13 { .rf_inputs_off = 208, .iv_size = 16, .iv_tag_off = 8, \
	.list_vec_off = 24, .ti_sizes_off = 72, .ti_numel_off = 168, .ti_dtype_off = 176, \
	.tag_none = 0, .tag_tensor = 1, .tag_int = 5, .tag_list = 12, \
	.list_type_off = 48, .type_kind_off = 8, .kind_tensor = 3, \
	.scalarlist_max = 0, .tlist_undef = 0, \
	.scalar_tags = 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 7 | 1u << 8, \
	.ti_keyset_off = 184, .ti_sym_off = 182, .sym_mask = 0x10, .nested_mask = 1ull << 25 }
/* torch 2.8 (the PyPI wheel's torch/include) */
#define INPROC_IV_T2_8 { .rf_inputs_off = 208, .iv_size = 16, .iv_tag_off = 8, \
	.list_vec_off = 16, .ti_sizes_off = 64, .ti_numel_off = 160, .ti_dtype_off = 168, \
	.tag_none = 0, .tag_tensor = 1, .tag_int = 5, .tag_list = 13, \
	.list_type_off = 40, .type_kind_off = 8, .kind_tensor = 3, \
	.scalarlist_max = 30, .tlist_undef = 1, \
	.scalar_tags = 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 7 | 1u << 8 | 1u << 9, \
	.ti_keyset_off = 176, .ti_sym_off = 174, .sym_mask = 0x10, .nested_mask = 1ull << 25 }

/* Where a RecordFunction keeps sequence_nr_, fwd_thread_id_ and
 * step_callbacks_.thread_id_ (--inproc --group-by-stack: backward ops'
 * stacks, model/bwstack.h); checked by rf_layout.sh with offsetof. */
#define INPROC_SEQ_T1_13 { .rf_seq_off = 200, .rf_fwd_tid_off = 248, .rf_tid_off = 88 }
#define INPROC_SEQ_T2_8 { .rf_seq_off = 200, .rf_fwd_tid_off = 304, .rf_tid_off = 88 }

/* Where a torch::autograd::Node keeps sequence_nr_ and thread_id_ (the
 * uprobe mode's --group-by-stack: a backward node's forward op,
 * bpf/bwstack.bpf.h; struct tbpf_bwproc's node fields); and in
 * c10::impl::PODLocalDispatchKeySet the offset of excluded_ and the bit
 * of DispatchKey::AutogradFunctionality (not in default_excluded_set, the
 * mask excluded_ is stored XORed with); checked by rf_layout.sh. */
#define NODE_SEQ_T1_13 { .node_seq_off = 24, .node_tid_off = 48, \
	.c10_excl_off = 8, .autograd_mask = 1ULL << 37 }
#define NODE_SEQ_T2_8 { .node_seq_off = 24, .node_tid_off = 48, \
	.c10_excl_off = 8, .autograd_mask = 1ULL << 37 }

#endif
