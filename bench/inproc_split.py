#!/usr/bin/env python3
"""inproc_split.py - where --inproc's per-op cost goes, in one process.

    python3 bench/inproc_split.py [--agent build/libtbpf_inproc.so] [--rounds 2]

Runs with the interpreter whose torch it measures (PY1, PY2).  Times a
loop of `torch.add` on 4-element tensors (one aten op per iteration) five
ways, in rotation, medians of 7 runs of 50,000 iterations (the minimum
over the rounds is printed):
  base      nothing registered
  noop      a global RecordFunction callback pair that returns at once
            (torch's own cost of running callbacks: RecordFunction state,
            the calls), registered with at::addGlobalCallback via ctypes
            and a two-function C library compiled here at run time
  agent     libtbpf_inproc.so loaded with ctypes and started through its
            control block as tbpf would (layout 1, this process as owner);
            the ring is emptied by this script between runs, not drained
  profiler  torch.profiler (CPU activity) around the loop
The difference agent - noop is the agent's own work (two clock reads, two
ring reservations, the name hash, thread state).  Root is not needed.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import torch

NOOP_C = ("void *noop_start(void **ret, const void *rf) { *ret = 0; return ret; }\n"
          "void noop_end(const void *rf, void *ctx) { }\n")


class Ctl(ctypes.Structure):   # bpf/tbpf_abi.h struct tbpf_inproc_ctl
    _fields_ = [("magic", ctypes.c_uint64), ("version", ctypes.c_uint32), ("state", ctypes.c_uint32),
                ("request", ctypes.c_uint32), ("seq", ctypes.c_uint32), ("owner", ctypes.c_int32),
                ("layout", ctypes.c_uint32), ("served_seq", ctypes.c_uint32), ("generation", ctypes.c_uint32),
                ("ring", ctypes.c_uint64), ("names", ctypes.c_uint64), ("nslots", ctypes.c_uint32),
                ("nnames", ctypes.c_uint32), ("drops", ctypes.c_uint64), ("unmatched", ctypes.c_uint64),
                ("overflow", ctypes.c_uint64), ("names_lost", ctypes.c_uint64), ("detail", ctypes.c_char * 64),
                ("tail", ctypes.c_uint64), ("pad0", ctypes.c_uint8 * 56), ("head", ctypes.c_uint64),
                ("pad1", ctypes.c_uint8 * 56), ("nnames_used", ctypes.c_uint32), ("pad2", ctypes.c_uint32)]


SHARD_OFF, SHARD_SIZE, SHARDS = 416, 128, 4   # offsetof(struct tbpf_inproc_ctl, shard) (version 8; was 400: wrong)


def consume(ctl):
    """What tbpf's drain does to the tails: every ring read (the shared
    ring and, version 8, the threads' own rings)."""
    ctl.tail = ctl.head
    if ctl.version >= 8:
        base = ctypes.addressof(ctl) + SHARD_OFF
        for k in range(SHARDS):
            ctypes.c_uint64.from_address(base + k * SHARD_SIZE).value = \
                ctypes.c_uint64.from_address(base + k * SHARD_SIZE + 64).value


class CB(ctypes.Structure):    # agent/rf_layout.h struct tbpf_rf_callback
    _fields_ = [("start", ctypes.c_void_p), ("end", ctypes.c_void_p), ("p", ctypes.c_double),
                ("scopes", ctypes.c_bool * 10), ("ni", ctypes.c_bool), ("no", ctypes.c_bool),
                ("nid", ctypes.c_bool)]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agent", default=os.path.join(root, "build", "libtbpf_inproc.so"))
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="inproc_split.")
    with open(os.path.join(tmp, "noop.c"), "w") as f:
        f.write(NOOP_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", os.path.join(tmp, "noop.c"), "-o",
                    os.path.join(tmp, "libnoop.so")], check=True)
    noop = ctypes.CDLL(os.path.join(tmp, "libnoop.so"))
    agent = ctypes.CDLL(os.path.abspath(a.agent))
    ctl = Ctl.in_dll(agent, "tbpf_inproc")
    lib = [l.split()[-1] for l in open("/proc/self/maps") if "/libtorch_cpu" in l][0]
    t = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    add = t._ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE
    add.argtypes, add.restype = [CB], ctypes.c_uint64
    remove = t._ZN2at14removeCallbackEm
    remove.argtypes = [ctypes.c_uint64]

    def req(r):
        ctl.owner, ctl.layout, ctl.request = os.getpid(), 1, r
        ctl.seq += 1
        while ctl.served_seq != ctl.seq:
            time.sleep(0.005)
        if r == 1 and ctl.state != 2:
            sys.exit("agent did not start: %s" % ctl.detail.decode())

    torch.set_num_threads(1)
    x, y = torch.ones(4), torch.ones(4)

    def loop(n):
        t0 = time.perf_counter()
        for _ in range(n):
            torch.add(x, y)
        return (time.perf_counter() - t0) / n * 1e9

    def meas(n=50000, reps=7):
        r = []
        for _ in range(reps):
            consume(ctl)
            r.append(loop(n))
        return sorted(r)[reps // 2]

    loop(20000)
    res = {k: [] for k in ("base", "noop", "agent", "profiler")}
    for _ in range(a.rounds):
        res["base"].append(meas())
        cb = CB(ctypes.cast(noop.noop_start, ctypes.c_void_p), ctypes.cast(noop.noop_end, ctypes.c_void_p),
                1.0, (ctypes.c_bool * 10)(*([True] * 10)), False, False, False)
        h = add(cb)
        res["noop"].append(meas())
        remove(h)
        req(1)
        res["agent"].append(meas())
        req(2)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            res["profiler"].append(meas(20000, 3))
    b = min(res["base"])
    print("torch %s, ns per op over a %.0f ns torch.add: noop callbacks +%.0f, agent +%.0f "
          "(its own work %.0f), torch.profiler +%.0f; agent drops %d"
          % (torch.__version__, b, min(res["noop"]) - b, min(res["agent"]) - b,
             min(res["agent"]) - min(res["noop"]), min(res["profiler"]) - b, ctl.drops))


if __name__ == "__main__":
    main()
