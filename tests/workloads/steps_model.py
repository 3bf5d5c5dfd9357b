"""steps_model.py - a training loop of identical steps (steps).

Each step: DataLoader batch (the same one every time), zero_grad, an MLP
(fc1, act, fc2: nn.Modules) forward, cross entropy, backward, SGD step.
So every step runs the very same ops, and the optimizer's
`Optimizer.step#SGD.step` scope ends each one.

--profile N --tb DIR: run under torch.profiler with schedule(wait=1,
warmup=1, active=N) and tensorboard_trace_handler(DIR) (with_stack,
with_modules), calling prof.step() after each step as its docs show; N+2
steps, then exit.  --schedule wait=1,...: that schedule, N steps.
--counts FILE: each on_trace_ready's counts to FILE (the last cycle's
stay), and key_averages() after the run to FILE.final.
--iters K --profile-all --kineto FILE: K steps under a plain
torch.profiler, export_chrome_trace(FILE).  --iters K alone (wl_common
protocol): after go, exactly K steps, RESULT, exit.
Otherwise the wl_common protocol: READY, wait for go, then steps until
--seconds have passed (tbpf --steps stops by itself), RESULT steps=N.
"""
import argparse
import time

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, ready, result, wait_go

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def setup(seed):
    torch.manual_seed(seed)
    model = Net()
    g = torch.Generator().manual_seed(seed)
    xs = torch.randn(8, 16, generator=g)
    ys = torch.randint(0, 4, (8,), generator=g)
    loader = DataLoader(TensorDataset(xs, ys), batch_size=8, num_workers=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, loader, opt


def train_step(model, loader, opt):
    for x, y in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()


def main():
    p = argparse.ArgumentParser()
    add_common_args(p)
    p.add_argument("--profile", type=int, default=0, metavar="N")
    p.add_argument("--schedule", default="",
                   help="with --profile: torch.profiler.schedule arguments instead, "
                        "e.g. wait=1,warmup=1,active=2,repeat=2 (N: steps to run)")
    p.add_argument("--tb", help="tensorboard_trace_handler directory (with --profile)")
    p.add_argument("--kineto", help="export_chrome_trace file (with --profile)")
    p.add_argument("--counts", help="with --profile: the active cycle's aten:: op calls "
                   "(every RecordFunction, wl_common.profiler_op_counts) and key_averages() "
                   "rows as JSON to this file")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--iters", type=int, default=0,
                   help="after go: exactly this many steps, then exit (no --seconds)")
    p.add_argument("--profile-all", action="store_true",
                   help="--iters steps under a plain torch.profiler (no schedule), "
                        "export_chrome_trace to --kineto, then exit")
    a = p.parse_args()
    torch.set_num_threads(a.intra_threads)
    model, loader, opt = setup(a.seed)
    train_step(model, loader, opt)   # warm-up: lazy inits out of the steps
    if a.profile_all:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(a.iters):
                train_step(model, loader, opt)
        prof.export_chrome_trace(a.kineto)
        return
    if a.profile:
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        def on_ready(prof):
            if a.counts:
                import json
                from wl_common import profiler_op_counts
                rows = {e.key: int(e.count) for e in prof.key_averages()}
                with open(a.counts, "w") as f:
                    json.dump({"ops": profiler_op_counts(prof), "rows": rows,
                               "torch": torch.__version__}, f, sort_keys=True)
            if a.tb:
                tensorboard_trace_handler(a.tb)(prof)
            if a.kineto:
                prof.export_chrome_trace(a.kineto)
        if a.schedule:
            kw = {k: int(v) for k, v in (x.split("=") for x in a.schedule.split(","))}
            sched, nsteps = schedule(**kw), a.profile
        else:
            sched, nsteps = schedule(wait=1, warmup=1, active=a.profile, repeat=1), a.profile + 2
        with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=on_ready,
                     with_stack=True, with_modules=True) as prof:
            for _ in range(nsteps):
                train_step(model, loader, opt)
                prof.step()
        if a.counts:
            # what a user reads after the run: key_averages() (the last
            # cycle on_trace_ready saw, with a repeating schedule)
            import json
            with open(a.counts + ".final", "w") as f:
                json.dump({"rows": {e.key: int(e.count) for e in prof.key_averages()}}, f,
                          sort_keys=True)
        return
    ready()
    wait_go(a)
    if a.iters:
        for _ in range(a.iters):
            train_step(model, loader, opt)
        result(steps=a.iters)
        return
    n, t_end = 0, time.monotonic() + a.seconds
    while time.monotonic() < t_end:
        train_step(model, loader, opt)
        n += 1
    result(steps=n)


if __name__ == "__main__":
    main()
