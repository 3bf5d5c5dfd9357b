/* pystack_test.bpf.c - test harness BPF side: a uprobe that captures the
 * Python stack with the walker from bpf/pystack.bpf.h. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "tbpf_abi.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 tbpf_mode = TBPF_MODE_RECORD | TBPF_MODE_PYSTACK;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

#include "pystack.bpf.h"

/* hits per stack id, and hits without a stack */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} hits SEC(".maps");

/* threads with a Python stack -> hits */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} tids SEC(".maps");

/* each thread's state (its runs of frames from the last walk, the stack
 * ids it knows), as the op probe keeps it: from the second walk on the
 * walker reads the frames with the hints a real capture has */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tbpf_thread);
} thread_zero SEC(".maps");

static struct tbpf_thread *thread_of(__u32 tid)
{
	struct tbpf_thread *t = bpf_map_lookup_elem(&threads, &tid);
	__u32 zero = 0;

	if (t)
		return t;
	t = bpf_map_lookup_elem(&thread_zero, &zero);
	if (!t)
		return NULL;
	bpf_map_update_elem(&threads, &tid, t, BPF_NOEXIST);
	return bpf_map_lookup_elem(&threads, &tid);
}

/* walk time, for the cost figure */
__u64 walk_ns = 0;
__u64 walks = 0;

SEC("uprobe")
int BPF_KPROBE(on_call)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32;
	__u64 t0, id, one = 1, *c;

	if (!bpf_map_lookup_elem(&py_procs, &pid))
		return 0;
	t0 = bpf_ktime_get_ns();
	id = pystack_capture(pid, thread_of((__u32)pid_tgid));
	__sync_fetch_and_add(&walk_ns, bpf_ktime_get_ns() - t0);
	__sync_fetch_and_add(&walks, 1);
	if (id) {
		__u32 tid = (__u32)pid_tgid;

		c = bpf_map_lookup_elem(&tids, &tid);
		if (c)
			__sync_fetch_and_add(c, 1);
		else
			bpf_map_update_elem(&tids, &tid, &one, BPF_NOEXIST);
	}
	c = bpf_map_lookup_elem(&hits, &id);
	if (c)
		__sync_fetch_and_add(c, 1);
	else
		bpf_map_update_elem(&hits, &id, &one, BPF_NOEXIST);
	return 0;
}
