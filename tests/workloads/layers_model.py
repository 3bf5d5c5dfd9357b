#!/usr/bin/env python3
"""layers_model.py - a model of known shape for the layer-tree tests.

Shape: nested Sequential, custom Modules, one instance called twice
(Block.act), a module called through a closure (Net.forward captures
`self` in a lambda, so its `self` is a cell), forward and backward.

  layers_model.py [--iters N] [--wait] [--seconds S]
      run N iterations (0: until --seconds pass, default forever);
      --wait: block until SIGUSR1 first (print "ready" on stdout).
  layers_model.py --json [--iters N]
      run N iterations under torch.profiler with forward hooks that mark
      each module with record_function, and print JSON:
        {"torch": ver, "modules": [named_modules() paths],
         "ran": [paths of modules that ran],
         "layers": {path: {op: count}}}   ("" = root module,
                   "[no module]" = ops outside any module)
"""
import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * self.w


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.act = nn.ReLU()

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        return self.act(y + x)          # the same instance, twice


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(8),
                                    nn.Sequential(Block(8), nn.MaxPool2d(2)))
        self.head = nn.Linear(8 * 4 * 4, 10)
        self.scale = Scale(10)

    def forward(self, x):
        x = self.stem(x)
        x = self.blocks(x)
        x = torch.flatten(x, 1)
        call_head = lambda t: self.head(t)   # closure: `self` is a cell
        x = call_head(x)
        return self.scale(x)


def step(model, x, target):
    out = model(x)
    loss = ((out - target) ** 2).mean()
    loss.backward()
    return loss


def profile_json(model, x, target, iters):
    from torch.profiler import profile, ProfilerActivity, record_function
    names = {m: n for n, m in model.named_modules()}
    ran = set()
    open_ctx = {}

    def pre(m, inp):
        ran.add(names[m])
        rf = record_function("layer:" + names[m])
        rf.__enter__()
        open_ctx.setdefault(m, []).append(rf)

    def post(m, inp, out):
        open_ctx[m].pop().__exit__(None, None, None)

    for m in names:
        m.register_forward_pre_hook(pre)
        m.register_forward_hook(post)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iters):
            model.zero_grad(set_to_none=True)
            step(model, x, target)
    layers = {}
    for ev in prof.events():
        if not ev.name.startswith("aten::"):
            continue
        p, where = ev.cpu_parent, "[no module]"
        while p is not None:
            if p.name.startswith("layer:"):
                where = p.name[len("layer:"):]
                break
            if p.name.startswith("profiler::"):
                where = None    # made by the marking hooks themselves
                break
            p = p.cpu_parent
        if where is None:
            continue
        d = layers.setdefault(where, {})
        d[ev.name] = d.get(ev.name, 0) + 1
    return {"torch": torch.__version__,
            "modules": [n for n, _ in model.named_modules()],
            "ran": sorted(ran), "layers": layers}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net()
    x = torch.randn(2, 3, 8, 8)
    target = torch.randn(2, 10)
    if a.json:
        print(json.dumps(profile_json(model, x, target, a.iters or 1),
                         sort_keys=True))
        return
    if a.wait:
        go = []
        signal.signal(signal.SIGUSR1, lambda *_: go.append(1))
        print("ready", os.getpid(), flush=True)
        while not go:
            signal.pause()
    t0 = time.monotonic()
    i = 0
    while (a.iters == 0 or i < a.iters) and \
            (a.seconds == 0 or time.monotonic() - t0 < a.seconds):
        model.zero_grad(set_to_none=True)
        step(model, x, target)
        i += 1
    print("done", i, flush=True)


if __name__ == "__main__":
    main()
