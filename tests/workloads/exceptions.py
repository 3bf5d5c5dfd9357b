"""exceptions.py - exception-heavy workload: ops that throw, caught in Python.

Each iteration raises and catches --errors-per-iter errors thrown inside
libtorch ops (matmul shape mismatch, cat size mismatch, out-of-range
select, bad view), on --threads threads at once, with ordinary ops in
between whose results are compared bit for bit with a reference computed
during warm-up (before any profiler is attached).

Modes (after warm-up, READY, and the go signal; see wl_common.py):
  --iters N           run exactly N iterations per thread, then print
                      RESULT checksum=... (identical with and without tbpf)
  --until-file PATH   run until PATH exists (for attach/detach cycles);
                      RESULT reports iterations done, mismatches (must be
                      0), caught errors (must equal expected_caught) and
                      digest_after, the reference recomputed at the end
                      (must equal digest, computed before READY)
  --profile           run --iters under torch.profiler (one thread after
                      another, see ops_model.py) and print the aten:: counts
"""
import argparse
import hashlib
import os
import struct
import sys
import threading
import time

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, profiler_op_counts, ready, result, wait_go

import torch

PERIOD = 16  # iteration i computes reference value i % PERIOD


def throwers():
    """Each callable raises from inside an ATen op (a C++ throw unwinding
    through at::_ops::*::call frames) and is caught in Python."""
    def matmul():
        torch.ones(2, 3) @ torch.ones(4, 5)

    def cat():
        torch.cat([torch.ones(2, 3), torch.ones(2, 4)])

    def select():
        torch.ones(3).select(0, 10)  # not t[10]: that is bounds-checked before any op

    def view():
        torch.zeros(6).view(4, 2)
    return {"matmul": (matmul, RuntimeError), "cat": (cat, RuntimeError),
            "select": (select, IndexError), "view": (view, RuntimeError)}


def plan_for(k, errors_per_iter):
    """The errors iteration k raises.  torch 1.13 symbolizes a C++
    backtrace for most c10::Error throws (matmul ~10 ms, cat ~7 ms, select
    ~0.5 ms each here, view ~20 us), so the slow kinds are spread over the
    period to keep thousands of errors per second while every kind, and
    the issue's exact `torch.ones(2, 3) @ torch.ones(4, 5)`, stays in."""
    kinds = throwers()
    plan = []
    if k % 8 == 0:
        plan.append(kinds["matmul"] if k % 16 == 0 else kinds["cat"])
    if k % 2 == 0:
        plan.append(kinds["select"])
    while len(plan) < errors_per_iter:
        plan.append(kinds["view"])
    return plan


class Worker:
    def __init__(self, seed, errors_per_iter):
        g = torch.Generator().manual_seed(seed)
        self.w = torch.randn(16, 16, generator=g, dtype=torch.float64)
        self.x = torch.randn(8, 16, generator=g, dtype=torch.float64)
        self.plans = [plan_for(k, errors_per_iter) for k in range(PERIOD)]
        self.ref = [self.compute(k) for k in range(PERIOD)]
        self.ref_digest = self.digest()  # now: tolist() is an op, not for the counted part
        self.iters = self.mismatches = self.caught = self.wrong_kind = self.expected = 0
        self.checksum = 0.0

    def compute(self, k):
        y = torch.relu(self.x @ self.w * (k + 1) - 0.5 * k)
        return (y + torch.tanh(y)).sum(0)

    def step(self):
        k = self.iters % PERIOD
        plan = self.plans[k]
        self.expected += len(plan)
        for fn, kind in plan:
            try:
                fn()
            except kind:
                self.caught += 1
            except Exception:  # noqa: BLE001  (an error of the wrong kind)
                self.wrong_kind += 1
            else:
                self.wrong_kind += 1
        out = self.compute(k)
        if not torch.equal(out, self.ref[k]):
            self.mismatches += 1
        self.checksum += float(out.sum())
        self.iters += 1

    def digest(self, refs=None):
        h = hashlib.sha256()
        for r in self.ref if refs is None else refs:
            h.update(struct.pack("<%dd" % r.numel(), *r.tolist()))
        return h.hexdigest()[:16]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--until-file")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--errors-per-iter", type=int, default=20)
    p.add_argument("--warmup", type=int, default=PERIOD)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--wait-go", action="store_true",
                   help="--profile: READY and wait for go first (a torch.profiler "
                        "session inside a process tbpf is attached to)")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)

    # The first tanh of a process, run on two threads at once, can round
    # differently from every later one (seen 4 times in 80 runs of torch
    # 2.8 on an AVX-512 host, no profiler loaded; a lazy kernel choice
    # inside the library).  A worker's reference is its first results, so
    # one such race made 13 iterations "differ" with tbpf attached only
    # after the references were taken.  One worker's computation on this
    # thread first makes every later call take the settled path.
    Worker(args.seed, args.errors_per_iter)

    stop = threading.Event()
    warm = threading.Barrier(args.threads + 1)
    gos = [threading.Event() for _ in range(args.threads)]
    workers = [None] * args.threads
    counts = [None] * args.threads
    errors = []

    def body(i):
        try:
            w = Worker(args.seed + i, args.errors_per_iter)
            for _ in range(args.warmup):
                w.step()
            w.iters = w.mismatches = w.caught = w.wrong_kind = w.expected = 0
            w.checksum = 0.0
            workers[i] = w
        except BaseException as e:  # noqa: BLE001
            errors.append(repr(e))
            warm.abort()
            raise
        warm.wait()
        gos[i].wait()
        if args.until_file:
            while not stop.is_set():
                w.step()
        elif args.profile:
            with profile_cpu() as prof:
                for _ in range(args.iters):
                    w.step()
            counts[i] = profiler_op_counts(prof)
        else:
            for _ in range(args.iters):
                w.step()

    threads = [threading.Thread(target=body, args=(i,), name="exc%d" % i) for i in range(args.threads)]
    for t in threads:
        t.start()
    try:
        warm.wait()
    except threading.BrokenBarrierError:
        sys.exit("exceptions.py: warm-up failed: %s" % errors)

    if args.profile:
        if args.wait_go:
            ready()
            wait_go(args)
        total = {}
        for i, t in enumerate(threads):
            gos[i].set()
            t.join()
            for k, v in counts[i].items():
                total[k] = total.get(k, 0) + v
        print_json({"ops": dict(sorted(total.items())), "iters": args.iters, "threads": args.threads,
                    "checksum": "%.12e" % sum(w.checksum for w in workers)})
        return

    ready()
    wait_go(args)
    t0 = time.monotonic()
    for g in gos:
        g.set()
    if args.until_file:
        while not os.path.exists(args.until_file) and any(t.is_alive() for t in threads):
            time.sleep(0.02)
        stop.set()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    iters = sum(w.iters for w in workers)
    # --until-file: the reference recomputed now, after whatever happened to
    # the process during the run (tbpf attached, detached, killed): equal to
    # `digest` unless its state was corrupted.  (Not with --iters, whose op
    # counts are compared with torch.profiler's.)
    after = "-"
    if args.until_file:
        after = ",".join(w.digest([w.compute(k) for k in range(PERIOD)]) for w in workers)
    caught = sum(w.caught for w in workers)
    result(checksum="%.12e" % sum(w.checksum for w in workers) if not args.until_file else "-",
           digest=",".join(w.ref_digest for w in workers), digest_after=after,
           iters=iters, mismatches=sum(w.mismatches for w in workers),
           caught=caught, expected_caught=sum(w.expected for w in workers),
           wrong_kind=sum(w.wrong_kind for w in workers),
           errors_per_s="%.0f" % (caught / secs if secs > 0 else 0))


if __name__ == "__main__":
    main()
