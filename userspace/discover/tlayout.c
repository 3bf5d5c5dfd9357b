/* tlayout.c - discovery stage: the TensorImpl layout, derived from real
 * TensorImpl bytes (see tlayout.h). */
#include "tlayout.h"

#include <errno.h>
#include <string.h>

void tlayout_initial(bool std_lib, struct tbpf_tlayout *l)
{
	memset(l, 0, sizeof(*l));
	if (std_lib) {
		l->sizes_off = 64;
		l->numel_off = 160;
		l->dtype_off = 168;
		l->opt_value_off = 0;   /* std::optional: payload, then engaged */
		l->opt_flag_off = 8;
		l->backend_bits = TLAYOUT_BACKENDS_T2;
	} else {
		l->sizes_off = 72;
		l->numel_off = 168;
		l->dtype_off = 176;
		l->opt_value_off = 8;   /* c10::optional: init_, then storage */
		l->opt_flag_off = 0;
		l->backend_bits = TLAYOUT_BACKENDS_T1;
	}
	l->nested_mask = TLAYOUT_NESTED_MASK;
	l->sym_mask = TLAYOUT_SYM_MASK;
}

static long long word(const unsigned char *b, size_t off)
{
	long long v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

int tlayout_decode(const unsigned char *b, size_t len, const struct tbpf_tlayout *l,
		   long long *sizes, int max, long long *numel)
{
	long long nd, prod = 1;

	if ((size_t)l->sizes_off + 8 * (1 + TBPF_SIZES_INLINE) > len ||
	    (size_t)l->numel_off + 8 > len)
		return -1;
	nd = word(b, l->sizes_off);
	*numel = word(b, l->numel_off);
	if (nd < 0 || nd > TBPF_SIZES_INLINE || *numel < 0)
		return -1;
	for (int k = 0; k < nd; k++) {
		long long v = word(b, l->sizes_off + 8 + 8 * (size_t)k);

		if (v < 0 || (v && prod > (1LL << 50) / v))
			return -1;
		prod *= v;
		if (k < max)
			sizes[k] = v;
	}
	if (prod != *numel && !(nd == 0 && *numel == 0))   /* 0: undefined tensor */
		return -1;
	return (int)nd;
}

/* Does the pair (so, no) fit sample b?  *telling: it has a dimension and
 * more than one element, so it could not fit by chance; *key: its shape. */
static bool fits(const unsigned char *b, size_t so, size_t no, bool *telling,
		 unsigned long long *key)
{
	struct tbpf_tlayout l = { .sizes_off = (__u16)so, .numel_off = (__u16)no };
	long long sizes[TBPF_SIZES_INLINE], numel;
	unsigned long long nd = (unsigned long long)word(b, so);
	int d;

	*telling = false;
	if (nd > 64)
		return false;
	if (nd > TBPF_SIZES_INLINE)
		return true;    /* out of line: nothing to check in these bytes */
	d = tlayout_decode(b, TBPF_TSAMPLE_BYTES, &l, sizes, TBPF_SIZES_INLINE, &numel);
	if (d < 0)
		return false;
	*telling = d >= 1 && numel > 1;
	*key = 1469598103934665603ULL;
	for (int k = 0; k < d; k++)
		*key = (*key ^ (unsigned long long)sizes[k]) * 1099511628211ULL;
	*key ^= (unsigned long long)d << 56;
	return true;
}

/* An engaged optional<Device> at b: c10::optional (flag, type, index)
 * when c10, else std::optional (type, index, flag); a CPU device's index
 * is -1, a device's a small number. */
static bool device_at(const unsigned char *b, bool c10)
{
	unsigned flag = c10 ? b[0] : b[2], type = c10 ? b[1] : b[0], index = c10 ? b[2] : b[1];

	return flag == 1 && type < TLAYOUT_DEVICE_TYPES && (index == 0xff || index < 128);
}

/* Do the samples hold a ScalarType at dtype_off (caffe2::TypeMeta, a
 * uint16 index) followed by an engaged optional<Device> (TensorImpl's
 * device_opt_), all in one optional spelling?  An undefined tensor
 * (0-dim, no elements) has no device and is passed over; at least `need`
 * samples must show one. */
static bool dtype_fits(const struct tbpf_tsample *s, size_t n, const struct tbpf_tlayout *l,
		       size_t need)
{
	size_t c10 = 0, std = 0, used = 0;

	if ((size_t)l->dtype_off + 2 + 3 > TBPF_TSAMPLE_BYTES)
		return false;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *b = s[i].bytes + l->dtype_off;
		long long sizes[TBPF_SIZES_INLINE], numel;
		unsigned short dt;

		if (!s[i].ok)
			continue;
		memcpy(&dt, b, sizeof(dt));
		if (dt >= TLAYOUT_DTYPES)
			return false;
		if ((b[2] | b[4]) == 0 && tlayout_decode(s[i].bytes, TBPF_TSAMPLE_BYTES, l, sizes,
							  TBPF_SIZES_INLINE, &numel) == 0 && !numel)
			continue;   /* an undefined tensor */
		used++;
		c10 += device_at(b + 2, true);
		std += device_at(b + 2, false);
	}
	return used >= need && (c10 == used || std == used);
}

/* Is the word at numel_off + 16 a DispatchKeySet (TensorImpl's key_set_)
 * in every sample: at most one backend bit (the tensor's device; none
 * for keys without one) and a functionality bit, one backend bit in at
 * least `need` of them?  Undefined tensors are passed over. */
static bool keyset_fits(const struct tbpf_tsample *s, size_t n, const struct tbpf_tlayout *l,
			size_t need)
{
	unsigned long long backends = (1ULL << l->backend_bits) - 1;
	size_t one = 0;

	if ((size_t)l->numel_off + 24 > TBPF_TSAMPLE_BYTES || !l->backend_bits ||
	    l->backend_bits >= 32)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned long long w;
		long long sizes[TBPF_SIZES_INLINE], numel;
		int nb;

		if (!s[i].ok)
			continue;
		w = (unsigned long long)word(s[i].bytes, l->numel_off + 16);
		if (!w && tlayout_decode(s[i].bytes, TBPF_TSAMPLE_BYTES, l, sizes,
					 TBPF_SIZES_INLINE, &numel) == 0 && !numel)
			continue;   /* an undefined tensor: no keys */
		nb = __builtin_popcountll(w & backends);
		if (nb > 1 || !(w & ~backends))
			return false;
		one += nb == 1;
	}
	return one >= need;
}

int tlayout_calibrate(const struct tbpf_tsample *s, size_t n, size_t need,
		      struct tbpf_tlayout *out, const char **why)
{
	size_t found = 0, best_so = 0, best_no = 0, best_telling = 0;
	bool few = false;
	const size_t span = 8 * (1 + 2 * TBPF_SIZES_INLINE);   /* SizesAndStrides */

	for (size_t so = 8; so + span <= TBPF_TSAMPLE_BYTES; so += 8) {
		for (size_t no = 8; no + 8 <= TBPF_TSAMPLE_BYTES; no += 8) {
			unsigned long long keys[TBPF_TSAMPLES];
			size_t nkeys = 0, used = 0;
			bool ok = true;

			if (no + 8 > so && no < so + span)
				continue;
			for (size_t i = 0; i < n && ok; i++) {
				unsigned long long key;
				bool telling, seen = false;

				if (!s[i].ok)
					continue;
				used++;
				ok = fits(s[i].bytes, so, no, &telling, &key);
				if (!ok || !telling)
					continue;
				for (size_t k = 0; k < nkeys; k++)
					seen |= keys[k] == key;
				if (!seen && nkeys < TBPF_TSAMPLES)
					keys[nkeys++] = key;
			}
			if (!ok || !used)
				continue;
			if (nkeys < need) {
				few = true;
				continue;
			}
			found++;
			if (found == 1 || nkeys > best_telling) {
				best_so = so;
				best_no = no;
				best_telling = nkeys;
			}
		}
	}
	if (!found) {
		*why = few ? "too few tensors of distinct shapes to verify the TensorImpl layout"
			   : "no TensorImpl layout fits the tensors read";
		return -ENOENT;
	}
	if (found > 1) {
		*why = "several TensorImpl layouts fit the tensors read";
		return -EINVAL;
	}
	out->sizes_off = (__u16)best_so;
	out->numel_off = (__u16)best_no;
	out->dtype_off = (__u16)(best_no + 8);   /* data_type_ follows numel_ */
	if (!dtype_fits(s, n, out, need)) {
		*why = "the bytes after numel_ are not a dtype and a device";
		return -EINVAL;
	}
	/* key_set_ is read for nested tensors only when it is one */
	if (out->nested_mask && !keyset_fits(s, n, out, need)) {
		*why = "the word 16 bytes after numel_ is not a DispatchKeySet";
		return -EINVAL;
	}
	*why = NULL;
	return 0;
}
