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
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inproc_lib import (START, STOP, Ctl, build_noop, consume, noop_callback, request,  # noqa: E402
                        torch_add_loop, torch_callbacks)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agent", default=os.path.join(root, "build", "libtbpf_inproc.so"))
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    noop = build_noop(tempfile.mkdtemp(prefix="inproc_split."))
    agent = ctypes.CDLL(os.path.abspath(a.agent))
    ctl = Ctl.in_dll(agent, "tbpf_inproc")
    add, remove = torch_callbacks()

    loop = torch_add_loop()

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
        h = add(noop_callback(noop))
        res["noop"].append(meas())
        remove(h)
        request(ctl, START)
        res["agent"].append(meas())
        request(ctl, STOP)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            res["profiler"].append(meas(20000, 3))
    b = min(res["base"])
    print("torch %s, ns per op over a %.0f ns torch.add: noop callbacks +%.0f, agent +%.0f "
          "(its own work %.0f), torch.profiler +%.0f; agent drops %d"
          % (torch.__version__, b, min(res["noop"]) - b, min(res["agent"]) - b,
             min(res["agent"]) - min(res["noop"]), min(res["profiler"]) - b, ctl.drops))


if __name__ == "__main__":
    main()
