"""infer_race.py - scope probes that close op frames, in a tight loop
(tests/e2e/ops/test_infer_race.sh).

Each iteration runs aten::relu (which calls aten::clamp_min) and then a
custom autograd Function (MyFn: a RecordFunction scope named "MyFn" around
its forward's aten::mul), then an op inside a record_function label.  In
--exits infer mode the relu frames are still open when MyFn's
RecordFunction is constructed, and it is the scope probe that closes them
(by the stack-pointer rule).  A CPU-clock sample or a switch-out of the
thread that lands while a scope probe is closing frames must not close
them a second time (each would count twice: test_scopes saw aten::relu and
aten::clamp_min at 21 calls for 20).
--profile: the same job under torch.profiler, printing its rows and raw
record counts (scopes_model.rows_of) for compare_rows.py.
"""
import argparse

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, ready, result, wait_go

import torch
from scopes_model import rows_of


class MyFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


def job(iters, x):
    rf = torch.autograd.profiler.record_function
    s = 0.0
    for _ in range(iters):
        y = MyFn.apply(torch.relu(x))
        with rf("label"):
            y = y.neg()
        s += float(y[0])   # aten::select, aten::item, aten::_local_scalar_dense
    return s


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--profile", action="store_true", help="the job under torch.profiler, print JSON")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    torch.manual_seed(args.seed)
    x = torch.rand(8)
    job(10, x)   # warm-up: first-call paths
    if args.profile:
        with profile_cpu() as prof:
            s = job(args.iters, x)
        rows, events = rows_of(prof)
        print_json({"rows": rows, "events": events, "sum": "%.9e" % s, "iters": args.iters})
        return
    ready()
    wait_go(args)
    s = job(args.iters, x)
    result(iters=args.iters, sum="%.9e" % s)


if __name__ == "__main__":
    main()
