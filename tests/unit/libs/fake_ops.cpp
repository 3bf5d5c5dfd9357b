// fake_ops.cpp - test library for test_opsyms: functions named like
// PyTorch's operator entry points (at::_ops::<op>::call / ::redispatch)
// and schema/name strings laid out as torch 1.13 and 2.x keep them, so
// the test knows every expected name and overload.
#include <cstdint>

namespace at {
struct Tensor {
	long v;
};

#define FAKE_OP(S, K)                                                          \
	struct S {                                                             \
		static Tensor call(const Tensor &a, long b);                   \
		static Tensor redispatch(uint64_t ks, const Tensor &a, long b); \
		static Tensor helper(const Tensor &a);                        \
	};                                                                     \
	__attribute__((noinline)) Tensor S::call(const Tensor &a, long b)      \
	{                                                                      \
		return Tensor{ a.v * (K) + b };                                \
	}                                                                      \
	__attribute__((noinline)) Tensor S::redispatch(uint64_t ks, const Tensor &a, long b) \
	{                                                                      \
		return Tensor{ a.v * (K) - b + (long)ks };                     \
	}                                                                      \
	__attribute__((noinline)) Tensor S::helper(const Tensor &a)            \
	{                                                                      \
		return Tensor{ a.v ^ (K) };                                    \
	}

namespace _ops {
FAKE_OP(add_Tensor, 3)          // aten::add.Tensor (qualified schema)
FAKE_OP(add__Tensor, 5)         // aten::add_.Tensor (unqualified schema, 2.x style)
FAKE_OP(div_Tensor_mode, 7)     // "aten::div.Tensor_mode" only
FAKE_OP(relu, 11)               // no overload
FAKE_OP(scatter_reduce, 13)     // aten::scatter.reduce, although "aten::scatter_reduce" exists
FAKE_OP(scatter_reduce_two, 17) // aten::scatter_reduce.two
FAKE_OP(sinc_out, 19)           // string merged into "special_sinc.out(...)"
FAKE_OP(mystery_fn_out, 23)     // no string: heuristic from known name + overload
FAKE_OP(lonely_thing_xyz, 29)   // known name, unknown overload
FAKE_OP(zzz_unknown_op, 31)     // nothing known: whole name

// only in .symtab (hidden): not an exported entry point
struct __attribute__((visibility("hidden"))) hidden_op {
	static Tensor call(const Tensor &a);
};
__attribute__((noinline)) Tensor hidden_op::call(const Tensor &a) { return Tensor{ a.v + 41 }; }
} // namespace _ops

namespace native {
FAKE_OP(add_Tensor, 37)         // other namespace: ignored
}
} // namespace at

extern "C" {
__attribute__((used)) const char *const fake_ops_strings[] = {
	"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
	"add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
	"aten::div",
	"aten::div.Tensor_mode",
	"aten::div.Scalardiv_Scalar_mode_aten::div.Tensor", // packed literals: ignored
	"aten::relu",
	"relu(Tensor self) -> Tensor",
	"aten::scatter_reduce",
	"aten::scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor",
	"scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor",
	"aten::sinc",
	"special_sinc.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
	"aten::mystery_fn",
	"aten::other.out",
	"aten::lonely_thing",
};
long fake_ops_use(long x)
{
	at::Tensor t{ x };
	return at::_ops::hidden_op::call(t).v + at::_ops::add_Tensor::helper(t).v;
}
}
