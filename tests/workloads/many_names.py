"""many_names.py - a record_function with a new name every step (as jobs
name their steps "step 123"), more distinct RecordFunction names than the
--inproc agent's name table holds (8,192).

After READY and go (wl_common.py): --steps N steps, each
`with record_function("step %d" % i): x = x.add(1)`, then
RESULT steps=N x=<sum>.  --profile runs the same under torch.profiler and
prints its aten:: counts as JSON.
"""
import argparse

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, profiler_op_counts, ready, result, wait_go

import torch


def run(steps):
    x = torch.zeros(4)
    for i in range(steps):
        with torch.autograd.profiler.record_function("step %d" % i):
            x = x.add(1)
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--profile", action="store_true")
    add_common_args(p)
    args = p.parse_args()
    run(10)  # warm-up
    if args.profile:
        with profile_cpu() as prof:
            x = run(args.steps)
        print_json({"ops": profiler_op_counts(prof), "x": float(x.sum())})
        return
    ready()
    wait_go(args)
    x = run(args.steps)
    result(steps=args.steps, x="%.1f" % float(x.sum()))


if __name__ == "__main__":
    main()
