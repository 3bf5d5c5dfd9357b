#!/usr/bin/env python3
"""flame_model.py - a model whose flame graph is known from its code, for
test_flamegraph_svg.sh.

Shape: FlameNet(encoder = Encoder(conv, act), proj = Linear 16384 -> 64,
head = Linear 64 -> 10), run forward under no_grad by train_step().  proj's
matrix product is most of the time, the convolution much of the rest.

  flame_model.py [--iters N]     READY, wait for the go signal, N steps, RESULT
  flame_model.py --describe [--iters N]
      the same steps under torch.profiler, forward hooks marking each module
      with record_function; print JSON:
        {"torch": ver, "function": "train_step", "file": "flame_model.py",
         "root": "FlameNet",
         "layers": {path: [[op, self_us], ...]}}   heaviest op first: the aten
      ops whose innermost module is path (named_modules() paths)
"""
import argparse
import json
import os

import wl_common

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.conv(x))


class FlameNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.proj = nn.Linear(16 * 32 * 32, 64)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = self.encoder(x)
        x = torch.flatten(x, 1)
        return self.head(self.proj(x))


def train_step(model, x):
    with torch.no_grad():
        return model(x).sum()


def innermost_layer(ev):
    p = ev.cpu_parent
    while p is not None:
        if p.name.startswith("layer:"):
            return p.name[len("layer:"):]
        p = p.cpu_parent
    return None


def describe(model, x, iters):
    from torch.profiler import profile, ProfilerActivity, record_function
    names = {m: n for n, m in model.named_modules() if n}
    open_rf = {}

    def pre(m, inp):
        rf = record_function("layer:" + names[m])
        rf.__enter__()
        open_rf.setdefault(m, []).append(rf)

    def post(m, inp, out):
        open_rf[m].pop().__exit__(None, None, None)

    for m in names:
        m.register_forward_pre_hook(pre)
        m.register_forward_hook(post)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iters):
            train_step(model, x)
    layers = {}
    for ev in prof.events():
        where = innermost_layer(ev) if ev.name.startswith("aten::") else None
        if where is not None:
            d = layers.setdefault(where, {})
            d[ev.name] = d.get(ev.name, 0) + ev.self_cpu_time_total
    return {"torch": torch.__version__, "function": train_step.__name__,
            "file": os.path.basename(__file__), "root": type(model).__name__,
            "layers": {k: sorted(v.items(), key=lambda kv: -kv[1]) for k, v in layers.items()}}


def main():
    ap = argparse.ArgumentParser()
    wl_common.add_common_args(ap)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--describe", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.intra_threads)
    model = FlameNet()
    x = torch.randn(8, 3, 32, 32)
    for _ in range(2):   # warm-up: one-time lazy work is not in the picture
        train_step(model, x)
    if a.describe:
        print(json.dumps(describe(model, x, a.iters), sort_keys=True))
        return
    wl_common.ready()
    wl_common.wait_go(a)
    for _ in range(a.iters):
        train_step(model, x)
    wl_common.result(iters=a.iters)


if __name__ == "__main__":
    main()
