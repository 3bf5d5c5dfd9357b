// bench_ops.cpp - a library named like libtorch with two operator entry
// points (at::_ops::bench_outer::call -> at::_ops::bench_inner::call) for
// the recording-rate benchmark: real uprobes, real ring buffer, no torch
// overhead between events, so tbpf's recording path is the bottleneck.
// Built with frame pointers so both start with `push %rbp`, like
// libtorch's entry points (emulated by the uprobe code, not single-stepped).
extern "C" __attribute__((noinline)) long tbpf_bench_leaf(long x)
{
	asm volatile("" ::: "memory");
	return x * 3 + 1;
}

namespace at {
namespace _ops {
struct bench_inner {
	static long call(long x);
};
struct bench_outer {
	static long call(long x);
};
__attribute__((noinline)) long bench_inner::call(long x)
{
	return tbpf_bench_leaf(x) + 1;   /* not a leaf: starts with push %rbp */
}
__attribute__((noinline)) long bench_outer::call(long x)
{
	long r = bench_inner::call(x);
	asm volatile("" ::: "memory");
	return r ^ x;
}
} // namespace _ops
} // namespace at
// what opsyms reads to name the ops, as in libtorch's rodata
extern "C" const char *const tbpf_bench_schemas[] = {
	"aten::bench_inner(int x) -> int",
	"aten::bench_outer(int x) -> int",
};
