/* hist.bpf.h - probe stage: op latency histograms in log2 buckets.
 *
 * Included by tbpf.bpf.c after its maps; pop_frame calls hist_add() for
 * every counted op exit when HAVE_HIST is defined (it is, by including
 * this file).  Layout and bucket bounds: struct tbpf_hist in abi/ops.h.
 * User space reads and clears the map once per window (daemon).
 */
#ifndef TBPF_HIST_BPF_H
#define TBPF_HIST_BPF_H
#define HAVE_HIST 1

/* 0: no histograms (user space that reads none, e.g. the live table,
 * saves a per-CPU hash update per op exit) */
const volatile __u32 hist_on = 1;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tbpf_histkey);
	__type(value, struct tbpf_hist);
} ophist SEC(".maps");

/* Bucket of a duration: 0 below 2^MIN_SHIFT ns, then one per power of 2,
 * the last one open-ended.  Unrolled binary search on the bit length. */
static __always_inline __u32 hist_bucket(__u64 ns)
{
	__u32 bits = 0;
	__u64 v = ns >> (TBPF_HIST_MIN_SHIFT - 1);

	if (v >> 32) { bits += 32; v >>= 32; }
	if (v >> 16) { bits += 16; v >>= 16; }
	if (v >> 8) { bits += 8; v >>= 8; }
	if (v >> 4) { bits += 4; v >>= 4; }
	if (v >> 2) { bits += 2; v >>= 2; }
	if (v >> 1) { bits += 1; v >>= 1; }
	bits += (__u32)v;   /* bit length of ns >> (MIN_SHIFT-1) */
	/* ns < 2^MIN_SHIFT  <=> bit length <= 1 */
	bits = bits > 1 ? bits - 1 : 0;
	return bits < TBPF_HIST_BUCKETS - 1 ? bits : TBPF_HIST_BUCKETS - 1;
}

/* The histogram row of (pid, op_id), made (zeroed) if new; NULL when the
 * map is full or, from a program that runs with interrupts off, when the
 * allocator's per-CPU cache is empty (rows_early in frames.bpf.h). */
static __always_inline struct tbpf_hist *hist_row(__u32 pid, __u32 op_id)
{
	struct tbpf_histkey k = { .pid = pid, .op_id = op_id };
	struct tbpf_hist *h = bpf_map_lookup_elem(&ophist, &k);

	if (!h) {
		const void *z = zero_value();   /* tbpf.bpf.c: not a 192-byte stack copy */

		if (!z)
			return NULL;
		bpf_map_update_elem(&ophist, &k, z, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&ophist, &k);
	}
	return h;
}

static __always_inline void hist_add(__u32 pid, __u32 op_id, __u64 dur_ns)
{
	struct tbpf_hist *h;
	__u32 b;

	if (!hist_on)
		return;
	h = hist_row(pid, op_id);
	if (!h)
		return;
	b = hist_bucket(dur_ns);
	if (b < TBPF_HIST_BUCKETS)
		h->buckets[b]++;
}

#endif /* TBPF_HIST_BPF_H */
