#!/usr/bin/env python3
"""fake_gpu_model.py - real torch nn.Modules that launch kernels and copy
through the driver API of the fake libcuda.so.1 (tests/native/cupti/
fake_cuda.c, on LD_LIBRARY_PATH), inside record_function scopes, so that
with FAKE_CUPTI_LAUNCHES=1 the fake CUPTI reports a device record for each
call tbpf's libcuda probes see (--inproc --inject without a GPU).

Per iteration (the test derives its expected device times from these):
  Model                 aten::fkstep (record_function) around all below;
                        step_kernel x STEPK, grid GS, in it before conv
  Model/conv   Conv     aten::fkconv: conv_kernel x CONV, grid GC (1000 ns x GC each)
  Model/head   Head     aten::fkhead: head_kernel x HEAD, grid GH
                        aten::fkcopy: one HtoD copy of COPY bytes (COPY / 4 ns)
  Model/head/norm Norm  aten::fknorm: norm_kernel x NORM, grid GN (only
                        with --norm > 0: the module exists then)
  (no op)               out_kernel x OUTK, grid GO, outside any op and
                        module, after each forward

  fake_gpu_model.py [--iters N] [--conv 3] [--gc 2] [--head 2] [--gh 5] [--copy 4096]
                    [--stepk 0 --gs 1] [--norm 0 --gn 1] [--outk 0 --go 1]
                    [--until FILE]   (more iterations until FILE exists)
                    [--pause S]      (sleep S seconds after each iteration)
                    [--thread]       (the iterations on a thread started after
                                      SIGUSR1: one tbpf did not see at attach)
                    [--kineto]       (a second CUPTI client, as Kineto: before
                                      READY, cuptiSubscribe on the libcupti
                                      torch mapped, held to the end; RESULT
                                      kineto= gives its CUptiResult)
Protocol: tests/workloads/wl_common.py (READY, SIGUSR1, RESULT).
"""
import argparse
import ctypes
import os
import threading
import time

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
import torch
import torch.nn as nn

p = argparse.ArgumentParser()
wl_common.add_common_args(p)
p.add_argument("--iters", type=int, default=10)
p.add_argument("--conv", type=int, default=3)
p.add_argument("--gc", type=int, default=2)
p.add_argument("--head", type=int, default=2)
p.add_argument("--gh", type=int, default=5)
p.add_argument("--copy", type=int, default=4096)
p.add_argument("--stepk", type=int, default=0)
p.add_argument("--gs", type=int, default=1)
p.add_argument("--norm", type=int, default=0)
p.add_argument("--gn", type=int, default=1)
p.add_argument("--outk", type=int, default=0)
p.add_argument("--go", type=int, default=1)
p.add_argument("--pause", type=float, default=0,
               help="seconds to sleep after each iteration (no op, no launch)")
p.add_argument("--until", help="run until this file exists (at least --iters iterations); "
               "RESULT iters= says how many ran")
p.add_argument("--kineto", action="store_true",
               help="subscribe to the job's own libcupti before READY, as Kineto does, "
               "and hold the subscription until the end")
p.add_argument("--thread", action="store_true",
               help="run the iterations on a new thread, started after the go signal")
args = p.parse_args()

cu = ctypes.CDLL("libcuda.so.1")   # the fake, by LD_LIBRARY_PATH
assert cu.cuInit(0) == 0
cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
cu.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t,
                                    ctypes.c_void_p]


def function(name):
    f = ctypes.c_void_p()
    assert cu.cuModuleGetFunction(ctypes.byref(f), None, name.encode()) == 0
    return f


CONV_K, HEAD_K = function("conv_kernel"), function("head_kernel")
STEP_K, NORM_K, OUT_K = function("step_kernel"), function("norm_kernel"), function("out_kernel")
SRC = ctypes.create_string_buffer(args.copy)
rf = torch.autograd.profiler.record_function


def launch(f, grid):
    assert cu.cuLaunchKernel(f, grid, 1, 1, 128, 1, 1, 0, None, None, None) == 0


class Conv(nn.Module):
    def forward(self, x):
        with rf("aten::fkconv"):
            for _ in range(args.conv):
                launch(CONV_K, args.gc)
        return torch.relu(x)


class Norm(nn.Module):
    def forward(self, x):
        with rf("aten::fknorm"):
            for _ in range(args.norm):
                launch(NORM_K, args.gn)
        return x


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        if args.norm:
            self.norm = Norm()

    def forward(self, x):
        with rf("aten::fkhead"):
            for _ in range(args.head):
                launch(HEAD_K, args.gh)
        with rf("aten::fkcopy"):
            assert cu.cuMemcpyHtoDAsync_v2(0x1000, SRC, args.copy, None) == 0
        if args.norm:
            x = self.norm(x)
        return x + 1


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = Conv()
        self.head = Head()

    def forward(self, x):
        with rf("aten::fkstep"):
            for _ in range(args.stepk):
                launch(STEP_K, args.gs)
            return self.head(self.conv(x))


def kineto_subscribe():
    """cuptiSubscribe on the libcupti torch mapped (its DT_NEEDED), as
    Kineto's CuptiCallbackApi does: the CUptiResult, the handle held."""
    path = next(l.split(None, 5)[5].strip() for l in open("/proc/self/maps")
                if l.rstrip().split("/")[-1].startswith("libcupti.so"))
    cupti = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    handle = ctypes.c_void_p()
    return cupti.cuptiSubscribe(ctypes.byref(handle), None, None)


torch.set_num_threads(args.intra_threads)
kineto = kineto_subscribe() if args.kineto else None
model = Model()
x = torch.ones(4)
wl_common.ready()
wl_common.wait_go(args)


def iterations():
    global x
    n = 0
    with torch.no_grad():
        while n < args.iters or (args.until and not os.path.exists(args.until)):
            x = model(x)
            for _ in range(args.outk):
                launch(OUT_K, args.go)
            n += 1
            if args.pause:
                time.sleep(args.pause)
    return n


if args.thread:
    done = []
    t = threading.Thread(target=lambda: done.append(iterations()))
    t.start()
    t.join()
    n = done[0]
else:
    n = iterations()
extra = {} if kineto is None else {"kineto": kineto}
wl_common.result(iters=n, checksum="%.1f" % x.sum().item(), **extra)
time.sleep(1.5)
