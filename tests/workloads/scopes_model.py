"""scopes_model.py - training workload for torch.profiler's non-op rows.

Each thread trains its own small MLP for exactly --iters batches drawn from
a DataLoader (num_workers=0), inside nested record_function labels
(torch.profiler.record_function and torch.autograd.profiler.record_function),
through a custom autograd.Function, with backward and an optimizer step:
SGD on thread 0, AdamW on thread 1.  So torch.profiler's key_averages() has,
beside the aten:: ops, the user labels, Optimizer.step#SGD.step,
Optimizer.step#AdamW.step, Optimizer.zero_grad#..., enumerate(DataLoader)#...,
the autograd engine's and nodes' rows and the custom Function's.

--first (`tbpf run`): no warm-up and no go signal: the job
(the workers' construction, then their batches) starts with the first op
after `import torch`; with --profile all of it, the first op included,
runs under one torch.profiler (the workers one after the other).

--profile runs the very same work (warm-up, then the counted part, one
thread after the other) under torch.profiler instead of waiting and prints
{"rows": {key: {"count", "self_us", "total_us"}}, "events": {name: calls},
 "checksum": ..., "iters": N, "threads": T}
where "rows" is key_averages() (every key) and "events" counts the raw
records by name (key_averages() drops a same-name only child; see
wl_common.profiler_op_counts).  Otherwise the wl_common protocol.
"""
import argparse
import threading

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, ready, result, wait_go

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MyFn(torch.autograd.Function):
    """A custom autograd Function: its backward node is named MyFnBackward.
    Its backward computes 2g as g - (-1)g (exactly g * 2.0), so aten::sub,
    which nothing else here runs, is the backward node's only child."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return torch.sub(g, g, alpha=-1)


class BadFn(torch.autograd.Function):
    """A custom autograd Function whose backward raises (--bad-backward):
    the Python exception leaves PyNode::apply as a C++ exception, through
    the autograd engine, and reaches the caller as this ValueError."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        g.neg()
        raise ValueError("BadFn.backward fails on purpose")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(MyFn.apply(F.relu(self.fc1(x))))


_init_lock = threading.Lock()


class Worker:
    def __init__(self, idx, seed, iters, batch=8, bad_backward=0):
        with _init_lock:
            torch.manual_seed(seed)
            self.model = Net()
            g = torch.Generator().manual_seed(seed)
            xs = torch.randn(iters * batch, 16, generator=g)
            ys = torch.randint(0, 4, (iters * batch,), generator=g)
        self.loader = DataLoader(TensorDataset(xs, ys), batch_size=batch, num_workers=0)
        params = self.model.parameters()
        if idx % 2 == 0:
            self.opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
        else:
            self.opt = torch.optim.AdamW(params, lr=0.001)
        self.idx = idx
        self.checksum = None
        self.bad_backward = bad_backward
        self.caught = self.expected = 0

    def run(self):
        rf, arf = torch.profiler.record_function, torch.autograd.profiler.record_function
        for x, y in self.loader:
            # made before the step's label: torch 1.13's record_function()
            # runs torch.zeros(1), which must not count as the label's own
            step, fwd, bwd, opt = (rf("train_step#%d" % self.idx), arf("forward"),
                                   rf("backward"), rf("optimizer"))
            with step:
                with fwd:
                    loss = F.cross_entropy(self.model(x), y)
                with bwd:
                    loss.backward()
                with opt:
                    self.opt.step()
                    self.opt.zero_grad()
            if self.bad_backward:
                self.bad_step(x)
        with torch.no_grad():
            self.checksum = float(sum(p.double().sum() for p in self.model.parameters()))


    def bad_step(self, x):
        """--bad-backward N: N backward passes through BadFn, each of which
        must fail with BadFn's ValueError and nothing else."""
        for _ in range(self.bad_backward):
            self.expected += 1
            leaf = x.detach().requires_grad_()
            try:
                BadFn.apply(leaf).sum().backward()
            except ValueError as e:
                if "on purpose" in str(e):
                    self.caught += 1


def rows_of(prof):
    rows = {}
    for e in prof.key_averages():
        r = rows.setdefault(e.key, {"count": 0, "self_us": 0.0, "total_us": 0.0})
        r["count"] += int(e.count)
        r["self_us"] += float(e.self_cpu_time_total)
        r["total_us"] += float(e.cpu_time_total)
    events = {}
    try:
        names = [e.name() for e in getattr(prof, "profiler", prof).kineto_results.events()]
    except AttributeError:
        names = []
    for n in names:
        events[n] = events.get(n, 0) + 1
    return rows, events


def merge(a, b):
    for k, v in b.items():
        if isinstance(v, dict):
            r = a.setdefault(k, {"count": 0, "self_us": 0.0, "total_us": 0.0})
            for f in r:
                r[f] += v[f]
        else:
            a[k] = a.get(k, 0) + v


def summary(workers):
    return {"checksum": ",".join("%.12e" % w.checksum for w in workers),
            "caught": sum(w.caught for w in workers),
            "expected_caught": sum(w.expected for w in workers)}


def first_job(args, n):
    def job():
        workers = [Worker(i, args.seed + i, args.iters, bad_backward=args.bad_backward)
                   for i in range(n)]
        if args.profile:
            for w in workers:
                w.run()
        else:
            threads = [threading.Thread(target=w.run, name="model%d" % w.idx) for w in workers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return workers
    if args.profile:
        # torch.autograd.profiler.profile, not torch.profiler.profile:
        # creating the latter imports torch._dynamo on torch 2.x, which
        # runs ~240 ops of its own before the profiler starts; the job
        # imports it lazily (its first optimizer step), inside the profile
        with torch.autograd.profiler.profile() as prof:
            workers = job()
        rows, events = rows_of(prof)
        print_json(dict(summary(workers), rows=rows, events=events, iters=args.iters, threads=n))
        return
    workers = job()
    result(iters=args.iters, threads=n, **summary(workers))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bad-backward", type=int, default=0, metavar="N",
                   help="per batch, N more backward passes through BadFn, whose "
                        "backward raises (caught; RESULT caught=expected)")
    p.add_argument("--profile", action="store_true",
                   help="run the counted iterations under torch.profiler, print JSON")
    p.add_argument("--first", action="store_true",
                   help="the job from the first op on, no warm-up, no go signal")
    p.add_argument("--trace", metavar="PREFIX",
                   help="with --profile: export_chrome_trace of each thread's "
                        "profiler to PREFIX.N.json")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)

    n = args.threads
    if args.first:
        return first_job(args, n)
    workers = [Worker(i, args.seed + i, args.iters, bad_backward=args.bad_backward)
               for i in range(n)]
    warm = [Worker(i, args.seed + 100 + i, 2, bad_backward=args.bad_backward) for i in range(n)]
    for w in warm:   # warm-up: the same code paths, other objects
        w.run()
    rows, events = {}, {}
    if args.profile:
        for w in workers:   # one thread at a time, each under its own profiler
            out = {}

            def body(w=w, out=out):
                with profile_cpu() as prof:
                    w.run()
                out["r"] = rows_of(prof)
                if args.trace:
                    prof.export_chrome_trace("%s.%d.json" % (args.trace, w.idx))

            t = threading.Thread(target=body, name="model%d" % w.idx)
            t.start()
            t.join()
            merge(rows, out["r"][0])
            merge(events, out["r"][1])
        print_json({"rows": rows, "events": events, "iters": args.iters, "threads": n,
                    "checksum": ",".join("%.12e" % w.checksum for w in workers),
                    "caught": sum(w.caught for w in workers),
                    "expected_caught": sum(w.expected for w in workers)})
        return
    ready()
    wait_go(args)
    threads = [threading.Thread(target=w.run, name="model%d" % w.idx) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result(checksum=",".join("%.12e" % w.checksum for w in workers), iters=args.iters,
           threads=n, caught=sum(w.caught for w in workers),
           expected_caught=sum(w.expected for w in workers))


if __name__ == "__main__":
    main()
