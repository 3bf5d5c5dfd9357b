#!/usr/bin/env python3
"""inproc_ab_step.py - builds of libtbpf_inproc.so side by side on a real
benchmark step, in one process (why the transformer step costs
more per op than the dispatch-bound loop).

    PY bench/inproc_ab_step.py [--workload transformer_step] [--rounds 15]
        [--steps N] [--noop-opts] A.so [B.so ...]

Runs the workload's step (tests/workloads/WORKLOAD.py, setup(args), one
intra-op thread) in rotating modes: base (nothing registered), noop (a
global callback pair that returns at once: torch's own floor), noop-fast
(the same registered for the op scopes only, as the agent's op callback
is), and each agent build started through its control block as tbpf
would (this process the owner; the rings emptied between runs as tbpf's
drain would).  Each run times N steps by the thread's CPU time; prints
per mode the median and the 25th percentile ns per recorded
RecordFunction above base (RecordFunctions per step counted from the
first agent's rings).  Root is not needed.
"""
import argparse
import ctypes
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "workloads"))
import wl_common  # noqa: F401,E402  (before torch)
import torch  # noqa: E402
from inproc_lib import (START, STOP, Ctl, CB, build_noop, consume, request, torch_callbacks,  # noqa: E402
                        SHARD_OFF, SHARD_SIZE, SHARDS)


def heads(ctl):
    base = ctypes.addressof(ctl) + SHARD_OFF
    return ctl.head + sum(ctypes.c_uint64.from_address(base + k * SHARD_SIZE + 64).value
                          for k in range(SHARDS))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="transformer_step")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--steps", type=int, default=0, help="steps per run (default: about 20 ms of work)")
    p.add_argument("--runs", type=int, default=3, help="runs per mode per round")
    p.add_argument("--only", help="run only this mode (base, noop, 0, 1, ...): for perf stat/record")
    p.add_argument("agents", nargs="+")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="inproc_ab_step.")
    noop = build_noop(tmp)
    agents = {}
    for i, path in enumerate(a.agents):
        dst = "%s/a%d.so" % (tmp, i)
        shutil.copy(path, dst)
        agents["%d:%s" % (i, os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path)))) or path)] = \
            Ctl.in_dll(ctypes.CDLL(dst), "tbpf_inproc")
    add, remove = torch_callbacks()

    torch.set_num_threads(1)
    mod = __import__(a.workload)
    step = mod.setup(argparse.Namespace(seed=0, gap_ms=0, intra_threads=1))
    for _ in range(3):
        step()
    n = a.steps
    if not n:
        t0 = time.thread_time()
        step()
        n = max(1, int(0.02 / max(time.thread_time() - t0, 1e-6)))
    noop_cb = lambda scopes: CB(ctypes.cast(noop.noop_start, ctypes.c_void_p),  # noqa: E731
                               ctypes.cast(noop.noop_end, ctypes.c_void_p), 1.0,
                               (ctypes.c_bool * 10)(*scopes), False, False, False)
    modes = ["base", "noop", "profiler"] + list(agents)
    if a.only:
        modes = [m for m in modes if m == a.only or m.split(":")[0] == a.only]
    res = {k: [] for k in modes}
    recs = None
    for rnd in range(a.rounds):
        order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
        for k in order:
            hs = []
            if k == "noop":
                hs = [add(noop_cb([i != 7 for i in range(10)])), add(noop_cb([i == 7 for i in range(10)]))]
            elif k in agents:
                request(agents[k], START)
            prof = None
            if k == "profiler":   # recording only: the timed steps run inside it
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                prof.__enter__()
            for _ in range(a.runs):
                if k in agents:
                    consume(agents[k])
                    h0 = heads(agents[k])
                t0 = time.thread_time_ns()
                for _ in range(n):
                    step()
                res[k].append((time.thread_time_ns() - t0) / n)
                if k in agents and recs is None and n:
                    recs = (heads(agents[k]) - h0) / n / 2
            if prof is not None:
                prof.__exit__(None, None, None)
            for h in hs:
                remove(h)
            if k in agents:
                request(agents[k], STOP)
    if "base" not in res:
        print(a.only, "median %.0f us a step" % (statistics.median(res[modes[0]]) / 1e3))
        return
    b = statistics.median(res["base"])
    b25 = sorted(res["base"])[len(res["base"]) // 4]
    print("torch %s %s: %d steps a run, %.0f RecordFunctions a step, base %.0f us a step" %
          (torch.__version__, a.workload, n, recs, b / 1e3))
    for k in modes:
        v = sorted(res[k])
        print("  %-24s median %+7.1f ns/RF  p25 %+7.1f ns/RF   drops %s" %
              (k, (statistics.median(v) - b) / recs, (v[len(v) // 4] - b25) / recs,
               agents[k].drops if k in agents else "-"))


if __name__ == "__main__":
    main()
