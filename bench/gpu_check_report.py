#!/usr/bin/env python3
"""gpu_check_report.py - the verdict of bench/gpu_check.sh.

    gpu_check_report.py --mode gpu|cpu REF.json NAME=TRACE.json [NAME=TRACE.json ...]
                        [--tol 0.05]

REF is torch.profiler's trace (export_chrome_trace), each TRACE a tbpf
trace (--format chrome, Kineto's layout) of the same job.  Only events
inside the job's "gpu_check" record_function span count (the job's
start-up stays out; tbpf run sees it, torch.profiler does not).

gpu: per kernel name (cat "kernel"): launches must be equal and total
device time within --tol (5%) of torch.profiler's; every kernel of one
side must be in the other.  cpu: per op name (cat "cpu_op"): calls equal,
but the rows tbpf cannot see (--unseen, default "detach,detach_").

Prints one line per difference, then "gpu_check: PASS (...)" or
"gpu_check: FAIL (...)"; exit 0 / 1; 2 when a trace has nothing to compare
(no "gpu_check" span, or no kernel in gpu mode: no GPU, no CUPTI).
"""
import argparse
import collections
import json
import sys


def window(evs):
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in evs
             if e.get("ph") == "X" and e.get("name") == "gpu_check" and e.get("cat") == "user_annotation"]
    return spans[0] if spans else None


def load(path, mode):
    """name -> [count, total dur (us)] inside the gpu_check span; None when
    there is no span.  Kernels are matched by their launch: a kernel counts
    when its correlated runtime call is inside the span."""
    with open(path) as f:
        doc = json.load(f)
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    w = window(evs)
    if w is None:
        return None
    b, e = w
    agg = collections.defaultdict(lambda: [0, 0.0])
    if mode == "cpu":
        for ev in evs:
            if ev.get("ph") == "X" and ev.get("cat") == "cpu_op" and b <= ev["ts"] <= e:
                a = agg[ev["name"]]
                a[0] += 1
                a[1] += ev["dur"]
        return agg
    launched = set()
    for ev in evs:
        if ev.get("cat") in ("cuda_runtime", "cuda_driver") and b <= ev.get("ts", -1) <= e:
            c = ev.get("args", {}).get("correlation")
            if c is not None:
                launched.add(c)
    for ev in evs:
        if ev.get("ph") == "X" and ev.get("cat") == "kernel" and \
                ev.get("args", {}).get("correlation") in launched:
            a = agg[ev["name"]]
            a[0] += 1
            a[1] += ev["dur"]
    return agg


def compare(ref, got, mode, tol, unseen):
    diffs = []
    for name in sorted(set(ref) | set(got)):
        r, g = ref.get(name), got.get(name)
        if mode == "cpu" and name in unseen:
            continue
        if r is None:
            diffs.append("%s: only in tbpf (%d)" % (name, g[0]))
        elif g is None:
            diffs.append("%s: missing in tbpf (torch.profiler %d)" % (name, r[0]))
        elif r[0] != g[0]:
            diffs.append("%s: %d calls, torch.profiler %d" % (name, g[0], r[0]))
        elif mode == "gpu" and r[1] > 0 and abs(g[1] - r[1]) > tol * r[1]:
            diffs.append("%s: device time %.1f us, torch.profiler %.1f us (%+.1f%%)" % (
                name, g[1], r[1], (g[1] - r[1]) * 100.0 / r[1]))
    return diffs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--tol", type=float, default=0.05)
    p.add_argument("--unseen", default="detach,detach_")
    p.add_argument("ref")
    p.add_argument("traces", nargs="+", metavar="NAME=TRACE")
    a = p.parse_args()
    ref = load(a.ref, a.mode)
    if not ref:
        print("gpu_check: cannot compare: %s has no %s inside a gpu_check span" % (
            a.ref, "kernel" if a.mode == "gpu" else "op"))
        return 2
    unseen = set(a.unseen.split(","))
    bad, summary = False, []
    for spec in a.traces:
        name, _, path = spec.partition("=")
        got = load(path, a.mode)
        if not got:
            print("gpu_check: cannot compare: %s (%s) has no %s inside a gpu_check span" % (
                path, name, "kernel" if a.mode == "gpu" else "op"))
            return 2
        diffs = compare(ref, got, a.mode, a.tol, unseen)
        for d in diffs:
            print("%s: %s" % (name, d))
        bad |= bool(diffs)
        summary.append("%s: %d %s, %d differences" % (
            name, len(got), "kernels" if a.mode == "gpu" else "ops", len(diffs)))
    print("gpu_check: %s (%s mode, %d %s in torch.profiler's trace; %s)" % (
        "FAIL" if bad else "PASS", a.mode, len(ref), "kernels" if a.mode == "gpu" else "ops",
        "; ".join(summary)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
