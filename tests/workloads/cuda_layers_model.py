#!/usr/bin/env python3
"""cuda_layers_model.py - real torch nn.Modules whose forward() calls, via
ctypes, at::_ops-named functions of tests/native/cuda/libtorch_cpu-layers.so
that launch known CUDA kernels, copy and synchronize through the real
libcudart (the calls fail without a GPU; tbpf's probes fire all the same).

Per iteration (the test derives its expected numbers from these arguments):
  Model/encoder/conv  Conv      aten::lkconv: layer_conv_kernel x CONV,
                                and a real torch op (relu)
  Model/encoder/norm  Norm      aten::lknorm: layer_norm_kernel x NORM
  Model/encoder       Encoder   aten::lkcopy: one HtoD copy of COPY bytes
  Model/head          Head      aten::lkhead: layer_head_kernel x HEAD,
                                aten::lksync: one cudaStreamSynchronize
  Model/head/norm     Norm      aten::lknorm: layer_norm_kernel x NORM

  cuda_layers_model.py --lib PATH [--iters N] [--conv 3] [--head 2]
                       [--norm 1] [--copy 4096] [--rf] [--late FILE]
--rf: each lk call also runs inside a torch.autograd.profiler.record_function
of the op's name (aten::lkconv, ...), a RecordFunction, so tbpf --inproc,
which sees RecordFunctions only, has the same ops as the uprobe mode.
--late FILE: the library (and with it libcudart) is loaded only after the
go signal, that is after the profiler attached; then "LOADED" on stdout,
and the calls start once FILE exists (the test creates it when the
profiler says the library's probes are live).
Protocol: tests/workloads/wl_common.py (READY, SIGUSR1, RESULT).
"""
import argparse
import ctypes
import os
import time

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
import torch
import torch.nn as nn

p = argparse.ArgumentParser()
wl_common.add_common_args(p)
p.add_argument("--lib", required=True)
p.add_argument("--iters", type=int, default=10)
p.add_argument("--conv", type=int, default=3)
p.add_argument("--head", type=int, default=2)
p.add_argument("--norm", type=int, default=1)
p.add_argument("--copy", type=int, default=4096)
p.add_argument("--rf", action="store_true")
p.add_argument("--late")
args = p.parse_args()
lib = None


def op(sym, *argtypes):
    fs = []

    def f(*a):   # resolved at the first call (--late: the library comes later)
        if not fs:
            g = getattr(lib, sym)
            g.argtypes = list(argtypes)
            g.restype = ctypes.c_int
            fs.append(g)
        return fs[0](*a)
    if not args.rf:
        return f
    name = "aten::" + sym.split("4_ops")[1].lstrip("0123456789").split("4call")[0]

    def in_rf(*a):
        with torch.autograd.profiler.record_function(name):
            return f(*a)
    return in_rf


lkconv = op("_ZN2at4_ops6lkconv4callEi", ctypes.c_int)
lkhead = op("_ZN2at4_ops6lkhead4callEi", ctypes.c_int)
lknorm = op("_ZN2at4_ops6lknorm4callEi", ctypes.c_int)
lkcopy = op("_ZN2at4_ops6lkcopy4callEl", ctypes.c_long)
lksync = op("_ZN2at4_ops6lksync4callEv")


class Conv(nn.Module):
    def forward(self, x):
        lkconv(args.conv)
        return torch.relu(x)


class Norm(nn.Module):
    def forward(self, x):
        lknorm(args.norm)
        return x


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = Conv()
        self.norm = Norm()

    def forward(self, x):
        x = self.conv(x)
        lkcopy(args.copy)
        return self.norm(x)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()

    def forward(self, x):
        lkhead(args.head)
        x = self.norm(x)
        lksync()
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = Head()

    def forward(self, x):
        return self.head(self.encoder(x))


torch.set_num_threads(args.intra_threads)
model = Model()
x = torch.ones(4)
if not args.late:
    lib = ctypes.CDLL(args.lib)
wl_common.ready()
wl_common.wait_go(args)
if args.late:
    lib = ctypes.CDLL(args.lib)
    wl_common.say("LOADED")
    while not os.path.exists(args.late):
        time.sleep(0.02)
with torch.no_grad():
    for _ in range(args.iters):
        x = model(x)
wl_common.result(iters=args.iters)
# tbpf names Python stacks from the live process (code objects, module
# dicts): stay a moment so the last ones are named before we exit
time.sleep(1.5)
