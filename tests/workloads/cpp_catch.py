"""cpp_catch.py - C++ exceptions thrown and caught inside libtorch.

A TorchScript function multiplies mismatched matrices: aten::mm's shape
check throws a c10::Error that unwinds through at::_ops::mm::redispatch
and at::_ops::mm::call (probed frames) and is caught inside
libtorch_cpu.so by the TorchScript interpreter, which then raises a new
error ("The following operation failed in the TorchScript interpreter")
that Python catches.  (Checked with gdb `catch throw` / `catch catch` on
torch 1.13: the first __cxa_begin_catch is in libtorch_cpu.so.)  Valid
calls in between are compared bit for bit with a warm-up reference.

Note for count checks: TorchScript calls aten::matmul through the boxed
path, which never enters at::_ops::matmul::call, so torch.profiler sees
aten::matmul where ::call probes cannot; this workload is for survival
and unchanged results, not for op counts.

Protocol as wl_common.py: READY, go signal, --iters N per thread on
--threads threads, RESULT checksum=... caught=... expected_caught=...
"""
import argparse
import threading

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, ready, result, wait_go

import torch


@torch.jit.script
def scripted(a, b):
    return torch.relu(a @ b) + 1.0


class Worker:
    def __init__(self, seed):
        g = torch.Generator().manual_seed(seed)
        self.a = torch.randn(8, 16, generator=g, dtype=torch.float64)
        self.b = torch.randn(16, 8, generator=g, dtype=torch.float64)
        self.bad = torch.randn(5, 8, generator=g, dtype=torch.float64)
        self.ref = scripted(self.a, self.b)
        self.reset()

    def reset(self):
        self.caught = self.expected = self.mismatches = self.wrong = 0
        self.checksum = 0.0

    def step(self):
        self.expected += 1
        try:
            scripted(self.a, self.bad)
        except RuntimeError as e:
            if "TorchScript interpreter" in str(e) or "mat1 and mat2" in str(e):
                self.caught += 1
            else:
                self.wrong += 1
        else:
            self.wrong += 1
        for _ in range(3):
            out = scripted(self.a, self.b)
            if not torch.equal(out, self.ref):
                self.mismatches += 1
            self.checksum += float(out.sum())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    workers = [Worker(args.seed + i) for i in range(args.threads)]
    for w in workers:
        for _ in range(args.warmup):
            w.step()
        w.reset()
    go = threading.Event()

    def body(w):
        go.wait()
        for _ in range(args.iters):
            w.step()

    threads = [threading.Thread(target=body, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    ready()
    wait_go(args)
    go.set()
    for t in threads:
        t.join()
    result(checksum="%.12e" % sum(w.checksum for w in workers),
           caught=sum(w.caught for w in workers), expected_caught=sum(w.expected for w in workers),
           mismatches=sum(w.mismatches for w in workers), wrong_kind=sum(w.wrong for w in workers))


if __name__ == "__main__":
    main()
