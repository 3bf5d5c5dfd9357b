#!/usr/bin/env python3
"""inproc_cost.py - `tbpf --pid --inproc` against torch.profiler's recording
cost, per op, measured inside one process (the aim: "at most half
of torch.profiler's recording cost").

One worker process runs a workload's step (--workload: a tests/workloads
module with setup(args) -> step) on command, as bench/probe_cost.py does.
Each round, in rotating order, each mode after its own baseline run of the
same length in the same worker:
  profiler  N steps inside `torch.profiler.profile(activities=[CPU])`; the
            timing covers the steps only: the profiler is entered before
            and left (its post-processing) after them, so this is the
            recording cost the goal is about
  inproc    `tbpf --pid WORKER --inproc ARGS` attached (after "attached"
            and --settle untimed steps), N timed steps, then SIGINT; ARGS
            default to --no-python, the rows torch.profiler records here
            (it runs without with_stack), as bench.py's --inproc row
Per mode and round: per-op overhead ((with - without) / ATen ops per
step) from wall time and from the worker thread's CPU time.  Prints one
JSON line: medians with [min, max] per mode, and the per-round ratio
inproc / profiler (median and range) for both clocks.  The machine's
noise moves whole runs; the ratio of two runs in the same round of the
same process is steadier than figures from separate processes (bench.py).

  sudo bench/inproc_cost.py --rounds 7 --iters 2000
  sudo bench/inproc_cost.py --python VENV/bin/python --workload transformer_step \
      --warm 10 --iters 40 --ops-per-iter 1721 --rounds 7
"""
import argparse
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_cost import ROOT, WL, WORKER, attach, med_range, timed  # noqa: E402


def per_op(a, base, run):
    """(wall, cpu) per-op overhead in microseconds."""
    return tuple((r - b) / a.iters * 1e6 / a.ops_per_iter for r, b in zip(run[:2], base[:2]))


def one_profiler(worker, a):
    base = timed(worker, a.iters)
    return per_op(a, base, timed(worker, a.iters, "prof"))


def one_inproc(worker, a):
    base = timed(worker, a.iters)
    tb = attach(a.tbpf, worker.pid, ["--inproc"] + a.tbpf_args)[0]
    if a.settle:
        timed(worker, a.settle)
    r = per_op(a, base, timed(worker, a.iters))
    tb.send_signal(signal.SIGINT)
    err = tb.communicate(timeout=120)[1]
    if tb.returncode != 0:
        sys.exit("tbpf exited %d: %s" % (tb.returncode, err[-300:]))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--tbpf", default=os.path.join(ROOT, "build", "tbpf"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--ops-per-iter", type=float, default=95.0,
                    help="ATen ops per iteration as torch.profiler counts them (bench.py --count-ops)")
    ap.add_argument("--workload", default="dispatch_bound")
    ap.add_argument("--warm", type=int, default=200, help="steps before READY")
    ap.add_argument("--settle", type=int, default=None,
                    help="untimed steps after tbpf attached (default: --iters / 4)")
    ap.add_argument("tbpf_args", nargs="*", help="more tbpf arguments (after --)")
    a = ap.parse_args()
    if not a.tbpf_args:
        a.tbpf_args = ["--no-python"]
    if a.settle is None:
        a.settle = max(1, a.iters // 4)
    worker = subprocess.Popen([a.python, "-c", WORKER % (WL, a.workload, a.warm)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    modes = [("profiler", one_profiler), ("inproc", one_inproc)]
    rows = {m: [] for m, _ in modes}
    try:
        if worker.stdout.readline().strip() != "READY":
            sys.exit("worker failed")
        timed(worker, a.iters)  # warm
        for i in range(a.rounds):
            for m, fn in modes[i % 2:] + modes[:i % 2]:
                rows[m].append(fn(worker, a))
                print(json.dumps({"round": i, "mode": m, "per_op_us": round(rows[m][-1][0], 4),
                                  "per_op_cpu_us": round(rows[m][-1][1], 4)}), file=sys.stderr)
    finally:
        worker.kill()
    out = {"workload": a.workload, "python": a.python, "rounds": a.rounds, "iters": a.iters,
           "tbpf_args": a.tbpf_args}
    for m, _ in modes:
        out[m] = {"per_op_us": med_range([r[0] for r in rows[m]]),
                  "per_op_cpu_us": med_range([r[1] for r in rows[m]])}
    for k, name in ((0, "ratio"), (1, "ratio_cpu")):
        out[name] = med_range([q[k] / p[k] for q, p in zip(rows["inproc"], rows["profiler"]) if p[k] > 0])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
