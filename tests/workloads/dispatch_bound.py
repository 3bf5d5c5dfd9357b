"""dispatch_bound.py - benchmark workload dominated by per-op dispatch cost.

Tiny tensors (4 elements), about a hundred ATen ops per iteration (40 calls plus the ops
they call), so
the time is spent in the dispatcher and in whatever a profiler adds per
op.  Protocol and options: see wl_common.bench_main (--iters, --count-ops,
--torch-profiler, READY / go signal / RESULT).
"""
import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)

import torch


def setup(args):
    a = torch.ones(4)
    b = torch.full((4,), 0.5)

    def step():
        x = a
        for _ in range(5):           # 5 x 8 = 40 calls, ~95 ATen ops with nesting
            x = x.add(b)
            x = x.mul(b)
            x = torch.relu(x)
            x = x.sub(0.25)
            y = x.neg()
            x = torch.maximum(x, y)
            x = x.div(2.0)
            x = x.clone()
        return x
    return step


if __name__ == "__main__":
    wl_common.bench_main(__doc__, setup, default_iters=20000)
