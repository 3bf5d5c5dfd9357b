#!/usr/bin/env python3
"""module_calls.py - nn.Module call counts for torchprof's Count column.

The model calls its modules in every way the tree must count: one
instance twice in one forward from two lines (Block.act), a ModuleList
in a loop, one block three times from the same line in a Python loop, a
module shared by two parents (Net.shared, also Net.pair.shared), a module
called through a closure, modules that run no op (Identity), and a
Sequential whose children are called by the container.

  module_calls.py [--iters N] [--wait] [--linger S]
      run N forward+backward iterations; --wait: print "READY pid=N" and
      block until SIGUSR1 first; --linger: stay S seconds before exiting
      (tbpf names a Python stack by reading the live process, and a
      recording tbpf on a busy box may come to the last ones late).
  module_calls.py --json [--iters N]
      the same iterations with forward hooks on every module, printing
      {"torch": version, "modules": [named_modules() paths, in order],
       "calls": {path: forward calls}}   ("" = the root)
"""
import argparse
import json
import os
import signal
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.act = nn.ReLU()
        self.skip = nn.Identity()          # no op of its own

    def forward(self, x):
        y = self.act(self.lin(x))
        return self.act(y + self.skip(x))  # the same ReLU, second line


class Pair(nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.shared = shared               # also Net.shared: two parents
        self.out = nn.Linear(8, 8)

    def forward(self, x):
        return self.out(self.shared(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(8, 8)
        self.layers = nn.ModuleList([Block(8) for _ in range(3)])
        self.again = Block(8)
        self.pair = Pair(self.shared)
        self.seq = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Identity())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        x = self.shared(x)
        for layer in self.layers:          # a ModuleList loop
            x = layer(x)
        for _ in range(3):                 # one block, one line, three calls
            x = self.again(x)
        x = self.pair(x)
        x = self.seq(x)
        head = lambda t: self.head(t)      # closure: `self` is a cell
        return head(x)


def run(model, x, iters):
    total = 0.0
    for _ in range(iters):
        model.zero_grad(set_to_none=True)
        y = model(x).sum()
        y.backward()
        total += float(y) + float(model.shared.weight.grad.sum())
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--linger", type=float, default=0)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net()
    x = torch.randn(4, 8)
    run(model, x, 1)                       # warm-up, not counted
    if a.json:
        names = {m: n for n, m in model.named_modules()}
        calls = {}

        def hook(m, inp, out):
            calls[names[m]] = calls.get(names[m], 0) + 1

        for m in names:
            m.register_forward_hook(hook)
        run(model, x, a.iters)
        print(json.dumps({"torch": torch.__version__,
                          "modules": [n for n, _ in model.named_modules()],
                          "calls": calls}))
        return
    if a.wait:
        go = []
        signal.signal(signal.SIGUSR1, lambda *_: go.append(1))
        print("READY pid=%d" % os.getpid(), flush=True)
        while not go:
            signal.pause()
    total = run(model, x, a.iters)
    # the outputs and gradients: unchanged by any profiler
    print("RESULT iters=%d sum=%.9g" % (a.iters, total), flush=True)
    time.sleep(a.linger)


if __name__ == "__main__":
    main()
