"""fork_children.py - forked children of a profiled job catch errors raised inside ops.

A training job's DataLoader workers and fork pools are children made by
fork(2): they inherit the parent's memory, including any breakpoint a
profiler put into the parent's copy of libtorch.  Here every child item
raises and catches errors thrown from inside ATen ops (a C++ throw
unwinding through at::_ops::*::call frames: matmul shape mismatch, cat
size mismatch, out-of-range select) and computes a small result; the
parent sums them.  Unprofiled, every run prints the same RESULT.

Children (after READY and the go signal, see wl_common.py):
  --mode loader   DataLoader(num_workers=2), fork start method
  --mode pool     multiprocessing fork Pool(2).map
  --mode fork     os.fork() from a non-main thread; that child forks again
                  (a grandchild); both compute items and report via pipes
  --mode all      the three above, one after the other (default)
  --prefork       create the DataLoader's (persistent) workers and the pool
                  before READY, so they exist before a profiler attaches
  --rounds N      repeat the whole work N times (default 1)
  --until-file P  repeat until P exists (for killing the profiler mid-run)

RESULT checksum=<sum of item values> caught=<errors caught in children>
expected_caught=<what the items raise> items=<items computed> rounds=<n>
"""
import argparse
import multiprocessing
import os
import struct
import sys
import threading

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, ready, result, wait_go

import torch

ITEMS = 48          # per child kind per round
ERRORS_PER_ITEM = 3


def item(i):
    """(value, caught): three errors thrown inside ops, caught here, and a
    deterministic value computed from ordinary ops."""
    caught = 0
    try:
        torch.ones(2, 3) @ torch.ones(4, 5)
    except RuntimeError:
        caught += 1
    try:
        torch.cat([torch.ones(2, 3), torch.ones(2, 4)])
    except RuntimeError:
        caught += 1
    try:
        torch.ones(3).select(0, 10 + i % 5)
    except IndexError:
        caught += 1
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3) + i
    return float((x @ x.t()).sum().item()), caught


class Items(torch.utils.data.Dataset):
    def __len__(self):
        return ITEMS

    def __getitem__(self, i):
        v, c = item(i)
        return torch.tensor([v, float(c)], dtype=torch.float64)


def make_loader():
    return torch.utils.data.DataLoader(
        Items(), batch_size=4, num_workers=2, persistent_workers=True,
        multiprocessing_context=multiprocessing.get_context("fork"))


def run_loader(loader):
    total = caught = n = 0
    for batch in loader:
        total += float(batch[:, 0].sum())
        caught += int(batch[:, 1].sum())
        n += batch.shape[0]
    return total, caught, n


def pool_item(i):
    return item(i)


def run_pool(pool):
    total = caught = 0
    res = pool.map(pool_item, range(ITEMS), chunksize=4)
    for v, c in res:
        total += v
        caught += c
    return total, caught, len(res)


def child_items(lo, hi, wfd):
    total = caught = 0
    for i in range(lo, hi):
        v, c = item(i)
        total += v
        caught += c
    os.write(wfd, struct.pack("<dqq", total, caught, hi - lo))


def read_result(rfd):
    data = b""
    while len(data) < 24:
        chunk = os.read(rfd, 24 - len(data))
        if not chunk:
            break
        data += chunk
    if len(data) != 24:
        return None
    return struct.unpack("<dqq", data)


def fork_tree(out):
    """From a non-main thread: fork a child that computes half the items and
    forks a grandchild for the other half."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            gpid = os.fork()
            if gpid == 0:
                try:
                    child_items(ITEMS // 2, ITEMS, w2)
                finally:
                    os._exit(0)
            child_items(0, ITEMS // 2, w1)
            _, st = os.waitpid(gpid, 0)
            os._exit(0 if os.waitstatus_to_exitcode(st) == 0 else 3)
        except BaseException:
            os._exit(4)
    os.close(w1)
    os.close(w2)
    a, b = read_result(r1), read_result(r2)
    _, st = os.waitpid(pid, 0)
    os.close(r1)
    os.close(r2)
    code = os.waitstatus_to_exitcode(st)
    if a is None or b is None or code != 0:
        out.append(("died", code))
        return
    out.append((a[0] + b[0], a[1] + b[1], a[2] + b[2]))


def run_fork():
    out = []
    t = threading.Thread(target=fork_tree, args=(out,))
    t.start()
    t.join()
    if out[0][0] == "died":
        raise SystemExit("a forked child or grandchild died (exit code %s)" % (out[0][1],))
    return out[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(p)
    p.add_argument("--mode", choices=["loader", "pool", "fork", "all"], default="all")
    p.add_argument("--prefork", action="store_true")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--until-file")
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    modes = ["loader", "pool", "fork"] if args.mode == "all" else [args.mode]

    loader = pool = None
    if args.prefork:
        if "loader" in modes:
            loader = make_loader()
            run_loader(loader)       # the workers start here, before READY
        if "pool" in modes:
            pool = multiprocessing.get_context("fork").Pool(2)
            pool.map(abs, range(4))  # workers up, no torch op in them yet
    ready()
    wait_go(args)
    if loader is None and "loader" in modes:
        loader = make_loader()
    if pool is None and "pool" in modes:
        pool = multiprocessing.get_context("fork").Pool(2)

    total = caught = items = rounds = 0
    runners = {"loader": lambda: run_loader(loader), "pool": lambda: run_pool(pool),
               "fork": run_fork}
    while True:
        for m in modes:
            t, c, n = runners[m]()
            total += t
            caught += c
            items += n
        rounds += 1
        if args.until_file:
            if os.path.exists(args.until_file):
                break
        elif rounds >= args.rounds:
            break
    if pool is not None:
        pool.close()
        pool.join()
    del loader
    result(checksum="%.1f" % total, caught=caught, expected_caught=items * ERRORS_PER_ITEM,
           items=items, rounds=rounds)


if __name__ == "__main__":
    sys.exit(main())
