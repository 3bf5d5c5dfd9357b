"""infer_burst.py - ops whose inferred exits come in bursts of new rows
(tests/e2e/ops/test_infer_burst.sh).

Each iteration calls torch.nn.functional.linear on inputs of its own
shape (made before READY, so the job runs no other op) and then sleeps:
in --exits infer mode the nested frames still open at the sleep
(aten::linear and the aten::addmm it calls, or aten::matmul's ops) are
closed together by the scheduler-switch program, and with
--record-shapes each of them is a new (op, shapes) row there.  A BPF map
that cannot take new rows from that context (no allocation with
interrupts off) loses those ops.
--profile: the same job under torch.profiler, printing {"ops": {...}}
for compare_counts.py.
"""
import argparse
import time

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, profiler_op_counts, ready, result, wait_go

import torch


def inputs(n):
    g = torch.Generator().manual_seed(0)
    return [(torch.rand(2, i + 1, generator=g), torch.rand(3, i + 1, generator=g),
             torch.rand(3, generator=g)) for i in range(n)]


def job(args, xs):
    for x, w, b in xs:
        torch.nn.functional.linear(x, w, b)
        time.sleep(args.sleep_ms / 1000.0)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--sleep-ms", type=float, default=1.0)
    p.add_argument("--profile", action="store_true", help="the job under torch.profiler, print JSON")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    job(args, inputs(4))   # warm-up: first-call paths
    xs = inputs(args.iters)
    if args.profile:
        with profile_cpu(record_shapes=True) as prof:
            job(args, xs)
        print_json({"ops": profiler_op_counts(prof), "iters": args.iters})
        return
    ready()
    wait_go(args)
    job(args, xs)
    result(iters=args.iters)


if __name__ == "__main__":
    main()
