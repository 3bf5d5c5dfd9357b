"""short_job.py - a short training job (tens to hundreds of ms) for the
attach-race test (tests/e2e/attach/test_attach_race.sh).

One job builds ops_model's small CNN (its construction runs ops too) and
trains it --iters iterations.  --rounds R: R cycles of READY / go / job /
RESULT in one process, so one torch import serves R attaches; the process
exits right after the last job.  Before the first READY (and before
--profile's profiled job) one warm-up job runs: torch 2.x runs extra ops
once, on the first optimizer step (lazy imports).  --no-wait: one job at
once, no warm-up, no go signal (`tbpf run`; importing torch runs no aten
op, so every op tbpf counts is the job's or that lazy set's).
--profile: one job under torch.profiler, printing {"ops": {...}} for
compare_counts.py.
"""
import argparse

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, profiler_op_counts, ready, result, wait_go

import torch
from ops_model import Worker


def job(args):
    Worker(args.seed).run(args.iters)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--no-wait", action="store_true", help="one job at once, no go signal")
    p.add_argument("--profile", action="store_true", help="one job under torch.profiler, print JSON")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    if not args.no_wait:
        job(args)   # warm-up
    if args.profile:
        with profile_cpu() as prof:
            job(args)
        print_json({"ops": profiler_op_counts(prof), "iters": args.iters})
        return
    for r in range(1 if args.no_wait else args.rounds):
        if not args.no_wait:
            ready()
            wait_go(args)
        job(args)
        result(round=r + 1)


if __name__ == "__main__":
    main()
