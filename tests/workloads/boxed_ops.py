"""boxed_ops.py - ops entered by the boxed path next to the same ops called eagerly.

torch.ops.aten.<op>.<overload>(...) goes through Dispatcher::callBoxed:
torch.profiler records the op there, but at::_ops::<op>::call never runs;
the first op entry point on the stack is the at::_ops::<op>::redispatch
that the autograd kernel calls.  tbpf sees them at the boxed-call entry
(createOperatorFromC10's std::function) in every mode.  Each iteration runs, on 8-element tensors:
  eager:  add, mul, relu (x.add(b), x.mul(b), torch.relu(x))
  boxed:  torch.ops.aten.sub.Tensor, torch.ops.aten.neg.default,
          torch.ops.aten.sigmoid.default
--profile runs the very same iterations (after the same warm-up) under
torch.profiler instead of waiting and prints {"ops": {...}, "checksum":
..., "iters": N}.  Protocol as wl_common.py.
"""
import argparse

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, profiler_op_counts, ready, result, wait_go

import torch

BOXED = ("aten::sub", "aten::neg", "aten::sigmoid")
EAGER = ("aten::add", "aten::mul", "aten::relu")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--profile", action="store_true")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(1)
    a = torch.linspace(-1.0, 1.0, 8, dtype=torch.float64)
    b = torch.full((8,), 0.5, dtype=torch.float64)

    def step(x):
        x = x.add(b)
        x = x.mul(b)
        x = torch.relu(x)
        x = torch.ops.aten.sub.Tensor(x, b)
        x = torch.ops.aten.neg.default(x)
        return torch.ops.aten.sigmoid.default(x)

    def run(n):
        x = a
        for _ in range(n):
            x = step(x)
        return sum(x.tolist())   # no aten op (x.sum() would add a folded sum row)

    run(5)
    if args.profile:
        with profile_cpu() as prof:
            cs = run(args.iters)
        print_json({"ops": profiler_op_counts(prof), "checksum": "%.12e" % cs, "iters": args.iters})
        return
    ready()
    wait_go(args)
    result(checksum="%.12e" % run(args.iters), iters=args.iters)


if __name__ == "__main__":
    main()
