"""custom_ops.py - operators defined from Python with torch.library, each
deleted before the next is defined (the --inproc agent names
ops by their schema's address, and a deleted operator's entry can be
reused by the next one at the same address).

After READY and go (wl_common.py): --ops N rounds; round k defines
`tbpf_custom::op<k>(Tensor x) -> Tensor` (CPU kernel x * (k + 1)), calls
it 10 * (k + 1) times (so a record named after an earlier op changes its
count), then deletes the library; RESULT ops=N x=<sum>.  --profile runs
the same under torch.profiler and prints {"rows", "events"} as
scopes_model.py does (compare_rows.py).
"""
import argparse
import gc

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, ready, result, wait_go
from scopes_model import rows_of

import torch


def one_op(k, x):
    lib = torch.library.Library("tbpf_custom", "DEF")
    name = "op%d" % k
    lib.define(name + "(Tensor x) -> Tensor")
    lib.impl(name, lambda t, m=k + 1: t * m, "CPU")
    op = getattr(torch.ops.tbpf_custom, name)
    s = torch.zeros(())
    for _ in range(10 * (k + 1)):
        s = s + op(x).sum()
    if hasattr(lib, "_destroy"):   # 2.x; 1.13 deletes with the object
        lib._destroy()
    del op, lib
    gc.collect()
    return s


def run(ops):
    x = torch.ones(4)
    return float(sum(one_op(k, x) for k in range(ops)))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ops", type=int, default=8)
    p.add_argument("--profile", action="store_true")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.profile:
        with profile_cpu() as prof:
            x = run(args.ops)
        rows, events = rows_of(prof)
        print_json({"rows": rows, "events": events, "x": x})
        return
    ready()
    wait_go(args)
    x = run(args.ops)
    result(ops=args.ops, x="%.1f" % x)


if __name__ == "__main__":
    main()
