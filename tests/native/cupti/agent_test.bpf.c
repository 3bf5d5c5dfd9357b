/* agent_test.bpf.c - stands in for bpf/tbpf.bpf.c around bpf/agent.bpf.h:
 * the same maps and rodata it promises, so the agent transport is tested
 * and benchmarked on its own. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "tbpf_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

const volatile __u32 tbpf_mode = 0;

#include "agent.bpf.h"

char LICENSE[] SEC("license") = "GPL";
