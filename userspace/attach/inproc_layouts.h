/* inproc_layouts.h - where a RecordFunction's inputs and their tensors'
 * sizes are, per torch build (--inproc --record-shapes):
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
 * A torch build that matches no entry is not read in-process (one line,
 * then the uprobe mode). */
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

/* torch 2.11 (the PyPI wheel's torch/include): 2.8's but for a Tag added
 * before GenericList */
#define INPROC_IV_T2_11 { .rf_inputs_off = 208, .iv_size = 16, .iv_tag_off = 8, \
	.list_vec_off = 16, .ti_sizes_off = 64, .ti_numel_off = 160, .ti_dtype_off = 168, \
	.tag_none = 0, .tag_tensor = 1, .tag_int = 5, .tag_list = 14, \
	.list_type_off = 40, .type_kind_off = 8, .kind_tensor = 3, \
	.scalarlist_max = 30, .tlist_undef = 1, \
	.scalar_tags = 1u << 3 | 1u << 4 | 1u << 5 | 1u << 7 | 1u << 8 | 1u << 9 | 1u << 10, \
	.ti_keyset_off = 176, .ti_sym_off = 174, .sym_mask = 0x10, .nested_mask = 1ull << 25 }
/* torch 2.15 (the PyPI wheel's torch/include): TensorImpl's fields 8
 * bytes earlier */
#define INPROC_IV_T2_15 { .rf_inputs_off = 208, .iv_size = 16, .iv_tag_off = 8, \
	.list_vec_off = 16, .ti_sizes_off = 56, .ti_numel_off = 152, .ti_dtype_off = 160, \
	.tag_none = 0, .tag_tensor = 1, .tag_int = 5, .tag_list = 14, \
	.list_type_off = 40, .type_kind_off = 8, .kind_tensor = 3, \
	.scalarlist_max = 30, .tlist_undef = 1, \
	.scalar_tags = 1u << 3 | 1u << 4 | 1u << 5 | 1u << 7 | 1u << 8 | 1u << 9 | 1u << 10, \
	.ti_keyset_off = 168, .ti_sym_off = 166, .sym_mask = 0x10, .nested_mask = 1ull << 25 }

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
/* 2.15: Node's fields 8 bytes earlier, AutogradFunctionality one bit lower */
#define NODE_SEQ_T2_15 { .node_seq_off = 16, .node_tid_off = 40, \
	.c10_excl_off = 8, .autograd_mask = 1ULL << 36 }

/* The header fingerprints (discover/torchhdr.h) of the trees the values
 * above were checked against by tests/unit/rf_layout.sh; a target whose
 * torch ships headers is read with a build's values only when its headers
 * hash the same (tests/unit/test_torchhdr.c checks each installed tree
 * against its version's entry here). */
#define INPROC_FP_T1_13 { .key = { 0x3656b8520cd800ecull, 0x166a8c1c971c22feull, \
	0x9442edf339f68783ull, 0x350524dca4e40726ull, 0x55193e6882b92d15ull, 0x60af8355bc08d9dcull, \
	0x35047fef69dd34b6ull, 0x7c354d8c159ce05eull, 0x221d4e10b4711e04ull, 0xcbbbfb3179c34b7dull }, \
	.rest = 0xd36600d7a9df0af6ull }
#define INPROC_FP_T2_8 { .key = { 0xb9cc477f95c28839ull, 0x701e95e1ef8e5275ull, \
	0xb283209eff584738ull, 0x21da6ba8c09c9315ull, 0xf40c2e22f1e258e5ull, 0xc93eb4c17d44377dull, \
	0xb571d7d609de1c89ull, 0x16f9a9403253e4e0ull, 0x5627c0ce6a072c5aull, 0x5fa65203dfde8bbdull }, \
	.rest = 0x3d22bcad062e4884ull }
#define INPROC_FP_T2_11 { .key = { 0x7878ad8b8dd3e194ull, 0xbfd38e1266afb098ull, \
	0x2767fdbaca177108ull, 0x4721c100019304a9ull, 0xdbcb1dcfdb169546ull, 0x9b077af7fc62a865ull, \
	0xbd8d2d0e4c7101ceull, 0x9434e751043fe3feull, 0x991aaffef4cdac36ull, 0xaffefb7e245db464ull }, \
	.rest = 0x363952ac0c0b78edull }
#define INPROC_FP_T2_15 { .key = { 0x7878ad8b8dd3e194ull, 0x3bb6f23b9a9d83a2ull, \
	0x7f3283c919246e78ull, 0x4721c100019304a9ull, 0xdd0a9a000a18fb46ull, 0xd1df33a3f429c984ull, \
	0xc7a6fc4520d3c5b4ull, 0x06a0d40dfe92ee58ull, 0x38cd8a608b501419ull, 0x3f1ed3bd97786c33ull }, \
	.rest = 0x3e8ebd7d701a1271ull }

#endif
