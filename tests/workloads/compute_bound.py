"""compute_bound.py - benchmark workload dominated by kernel time.

Large matmuls and convolutions (a few ops per iteration, each
milliseconds long), so a profiler's per-op cost is negligible and any
slowdown comes from elsewhere.  Protocol and options: see
wl_common.bench_main.
"""
import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)

import torch
import torch.nn.functional as F


def setup(args):
    g = torch.Generator().manual_seed(args.seed)
    a = torch.randn(384, 384, generator=g)
    b = torch.randn(384, 384, generator=g)
    img = torch.randn(2, 16, 48, 48, generator=g)
    w = torch.randn(32, 16, 3, 3, generator=g)

    def step():
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        y = F.relu(F.conv2d(img, w, padding=1))
        return x.sum() + y.sum()
    return step


if __name__ == "__main__":
    wl_common.bench_main(__doc__, setup, default_iters=40)
