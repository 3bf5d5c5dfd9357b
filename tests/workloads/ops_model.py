"""ops_model.py - deterministic training workload for per-op count checks.

A small CNN (conv2d, batch_norm, linear, relu/add/mul, cross-entropy loss,
backward, SGD step) trained for exactly --iters iterations per thread
after the go signal (see wl_common.py).  --threads T runs T Python threads,
each with its own model.  --profile runs the very same iterations (warm-up,
then the counted part) under torch.profiler instead of waiting, and prints
{"ops": {"aten::conv2d": calls, ...}, "checksum": ..., "iters": N}: the
reference the e2e tests compare tbpf's per-op counts with.
"""
import argparse
import threading

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, profiler_op_counts, ready, result, wait_go

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(x))
        x = F.relu(x + y) * 0.5
        x = F.max_pool2d(x, 2)
        return self.fc(torch.flatten(x, 1))


_init_lock = threading.Lock()  # models are built from the global RNG


class Worker:
    def __init__(self, seed, batch=4):
        self.gen = torch.Generator().manual_seed(seed)
        with _init_lock:
            torch.manual_seed(seed)
            self.model = Net()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.batch = batch
        self.checksum = None

    def step(self):
        x = torch.randn(self.batch, 3, 16, 16, generator=self.gen)
        target = torch.randint(0, 10, (self.batch,), generator=self.gen)
        self.opt.zero_grad()
        loss = F.cross_entropy(self.model(x), target)
        loss.backward()
        self.opt.step()

    def run(self, iters):
        for _ in range(iters):
            self.step()
        with torch.no_grad():
            self.checksum = float(sum(p.double().sum() for p in self.model.parameters()))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--profile", action="store_true",
                   help="run the counted iterations under torch.profiler, print JSON")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)

    checksum = lambda ws: ",".join("%.12e" % w.checksum for w in ws)  # noqa: E731
    if args.threads == 1:
        # One model on the main thread: no other Python thread at all.
        w = Worker(args.seed)
        for _ in range(args.warmup):
            w.step()
        if args.profile:
            with profile_cpu() as prof:
                w.run(args.iters)
            print_json({"ops": profiler_op_counts(prof), "checksum": checksum([w]),
                        "iters": args.iters, "threads": 1})
            return
        ready()
        wait_go(args)
        w.run(args.iters)
        result(checksum=checksum([w]), iters=args.iters, threads=1)
        return

    # T models, each warmed up and run on its own thread.  torch.profiler
    # only sees the thread that enabled it (1.13 and 2.x alike) and 2.x
    # refuses two profilers at once, so --profile runs the threads one after
    # another, each under its own profiler, and adds the counts up.
    workers = [None] * args.threads
    warm = threading.Barrier(args.threads + 1)
    gos = [threading.Event() for _ in range(args.threads)]
    counts = [None] * args.threads

    def body(i):
        w = workers[i] = Worker(args.seed + i)
        for _ in range(args.warmup):
            w.step()
        warm.wait()
        gos[i].wait()
        if args.profile:
            with profile_cpu() as prof:
                w.run(args.iters)
            counts[i] = profiler_op_counts(prof)
        else:
            w.run(args.iters)

    threads = [threading.Thread(target=body, args=(i,), name="model%d" % i)
               for i in range(args.threads)]
    for t in threads:
        t.start()
    warm.wait()
    if args.profile:
        total = {}
        for i, t in enumerate(threads):
            gos[i].set()
            t.join()
            for k, v in counts[i].items():
                total[k] = total.get(k, 0) + v
        print_json({"ops": dict(sorted(total.items())), "checksum": checksum(workers),
                    "iters": args.iters, "threads": args.threads})
        return
    ready()
    wait_go(args)
    for g in gos:
        g.set()
    for t in threads:
        t.join()
    result(checksum=checksum(workers), iters=args.iters, threads=args.threads)


if __name__ == "__main__":
    main()
