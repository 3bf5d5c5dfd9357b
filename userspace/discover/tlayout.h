/* tlayout.h - discovery stage: where the running torch keeps a tensor's
 * sizes (c10::TensorImpl), derived from real TensorImpl bytes and never
 * taken on trust (--record-shapes).
 *
 * The BPF reader starts with the layout tlayout_initial() picks for the
 * library; the raw bytes of the first tensors it reads come back
 * (map shape_samples) and tlayout_calibrate() derives the layout from
 * them alone.  Shapes are shown only when both agree. */
#ifndef TBPF_TLAYOUT_H
#define TBPF_TLAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include "tbpf_abi.h"

/* The layout to start reading with: torch 1.13's (sizes_and_strides_ at
 * 72, numel_ at 168, c10::optional: flag first) or the one of torch 2.x
 * with std::optional (64, 160, value first), by the optionals' spelling in
 * the library's op signatures (std_lib). */
void tlayout_initial(bool std_lib, struct tbpf_tlayout *l);

/* ScalarTypes (torch 2.8 has 46; 1.13's are a prefix) and DeviceTypes a
 * TensorImpl may hold, for the dtype check. */
#define TLAYOUT_DTYPES 46
#define TLAYOUT_DEVICE_TYPES 32

/* Tensors torch.profiler records as undefined: DispatchKeySet(
 * DispatchKey::NestedTensor) (TensorImpl::is_nested()), and the bit of
 * has_symbolic_sizes_strides_ in the byte numel_off + 14; the backends'
 * bits of a DispatchKeySet (1.13: 14, 2.8: 16).  Checked against both
 * versions' headers by tests/unit/rf_layout.sh. */
#define TLAYOUT_NESTED_MASK (1ULL << 25)
#define TLAYOUT_SYM_MASK 0x10
#define TLAYOUT_BACKENDS_T1 14
#define TLAYOUT_BACKENDS_T2 16

/* Pure: derive sizes_off, numel_off and dtype_off from the bytes of n
 * TensorImpls (samples with ok == 0 are ignored): the one pair of offsets
 * at which, in every sample, the dimension count is at most 64 and, when
 * the sizes are inline (<= 5 dims), they multiply to numel; at least
 * `need` samples of distinct shapes with a dimension and more than one
 * element must pin it.  dtype_off is the 2 bytes after numel_, checked:
 * in every sample a ScalarType followed by an engaged optional<Device>
 * (TensorImpl's data_type_, device_opt_) in one optional spelling.
 * opt_* fields are left as *out has them.  When out->nested_mask is set
 * (the reader will read key_set_), the word 16 bytes after numel_ must be
 * a DispatchKeySet of out->backend_bits backends in every sample.
 * 0, or -ENOENT (too few telling samples) / -EINVAL (no or several
 * layouts fit) with *why (static string). */
int tlayout_calibrate(const struct tbpf_tsample *s, size_t n, size_t need,
		      struct tbpf_tlayout *out, const char **why);

/* Pure: the sizes of one TensorImpl's bytes under layout l (inline sizes
 * only): ndim, or -1 when out of line or implausible. */
int tlayout_decode(const unsigned char *bytes, size_t len, const struct tbpf_tlayout *l,
		   long long *sizes, int max, long long *numel);

#endif
