"""cuda_mem_model.py - nn.Modules whose forward() calls, through ctypes, the
at::_ops-named functions of build/tests/native/mem/libtorch_cpu-memops.so,
which report CUDA caching-allocator blocks to the REAL
c10::reportMemoryUsageToProfiler of this torch's libc10 (no GPU here; see
that file).  Per step:
  Model/enc   allocates 2 blocks of ENC bytes (rounded up to 512), frees one
  Model/head  allocates HEAD bytes and frees them again
so per step CUDA Mem is +ENC (rounded) in Model/enc and 0 in Model/head,
and after N steps N blocks of ENC are live, allocated by
aten::cudamalloc in Model/enc.

  cuda_mem_model.py --lib PATH [--iters N] [--enc 4096] [--head 1048576]
                    [--hold S]
wl_common protocol; RESULT iters=N reserved=<segments reserved, bytes>.
"""
import argparse
import ctypes
import os
import time

import wl_common  # noqa: F401
from wl_common import add_common_args, ready, result, wait_go

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True)
p.add_argument("--iters", type=int, default=5)
p.add_argument("--enc", type=int, default=4096)
p.add_argument("--head", type=int, default=1 << 20)
p.add_argument("--hold", type=float, default=0)
add_common_args(p)
args = p.parse_args()

lib = ctypes.CDLL(args.lib)
libc10 = os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so")
if not os.path.exists(libc10):
    libc10 = "libc10.so"   # Debian: /usr/lib/x86_64-linux-gnu, by soname
rc = lib.memops_init(libc10.encode())
if rc:
    raise SystemExit("memops_init(%s) = %d" % (libc10, rc))
cmalloc = lib._ZN2at4_ops10cudamalloc4callEl
cmalloc.argtypes, cmalloc.restype = [ctypes.c_long], ctypes.c_long
cfree = lib._ZN2at4_ops8cudafree4callEll
cfree.argtypes, cfree.restype = [ctypes.c_long, ctypes.c_long], ctypes.c_long
lib.memops_reserved.restype = ctypes.c_ulong


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.kept = []

    def forward(self, x):
        a, b = cmalloc(args.enc), cmalloc(args.enc)
        cfree(b, args.enc)
        self.kept.append(a)
        return x


class Head(nn.Module):
    def forward(self, x):
        cfree(cmalloc(args.head), args.head)
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.head = Enc(), Head()

    def forward(self, x):
        return self.head(self.enc(x))


m = Model()
x = torch.zeros(1)
ready()
wait_go(args)
for _ in range(args.iters):
    m(x)
result(iters=args.iters, reserved=lib.memops_reserved())
if args.hold:
    time.sleep(args.hold)
