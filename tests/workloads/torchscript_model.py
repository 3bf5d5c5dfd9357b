"""torchscript_model.py - a TorchScript model served as usual.

torch.jit.script of Linear-ReLU-Linear, called --iters times on one batch:
the interpreter runs every operator by the boxed path (the std::function
torch::jit::createOperatorFromC10 makes), which never passes an
at::_ops::<op>::call; torch.profiler records aten::linear (2 per call) and
aten::relu there.  --no-grad calls it under torch.no_grad() (inference).
--profile runs the very same calls (after the same warm-up) under
torch.profiler instead of waiting and prints {"ops": {...}, "checksum": ...,
"iters": N}.  Protocol as wl_common.py.
"""
import argparse

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, profiler_op_counts, ready, result, wait_go

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--no-grad", action="store_true")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.jit.script(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    x = torch.randn(8, 16)

    def run(n):
        s = 0.0
        for _ in range(n):
            if args.no_grad:
                with torch.no_grad():
                    y = model(x)
            else:
                y = model(x)
            s += y.sum().item()
        return s

    run(5)   # the profiling executor optimizes the graph in the first calls
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
