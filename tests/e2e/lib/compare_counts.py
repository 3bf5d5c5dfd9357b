#!/usr/bin/env python3
"""compare_counts.py - tbpf --format json vs torch.profiler, op by op.

usage: compare_counts.py TBPF_JSON PROFILE_JSON --pid PID [--only OP,OP]

Checks the documented JSON shape of tbpf's output (run: pids, duration_ns,
probes_attached, events_dropped, exit_mode; ops: pid, name, overload,
calls, self_ns, total_ns), that no events were dropped, and that for
every aten:: op the calls tbpf reports for PID (summed over overloads, as
torch.profiler's key_averages() groups by name) equal torch.profiler's.
Exit 0 when equal, 1 otherwise, with a table of the differences.
"""
import argparse
import json
import sys


def load_tbpf(path, pid, problems):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        problems.append("tbpf output %s is not JSON: %s" % (path, e))
        return None
    run = doc.get("run") if isinstance(doc, dict) else None
    ops = doc.get("ops") if isinstance(doc, dict) else None
    if not isinstance(run, dict) or not isinstance(ops, list):
        problems.append('tbpf JSON lacks {"run": {...}, "ops": [...]}')
        return None
    for key in ("pids", "duration_ns", "probes_attached", "events_dropped", "exit_mode"):
        if key not in run:
            problems.append("run.%s missing" % key)
    if pid not in run.get("pids", []):
        problems.append("pid %d not in run.pids %s" % (pid, run.get("pids")))
    if run.get("events_dropped", 0) != 0:
        problems.append("events_dropped = %s (counts cannot be exact)" % run.get("events_dropped"))
    if not run.get("probes_attached"):
        problems.append("probes_attached = %r" % run.get("probes_attached"))
    counts = {}
    for i, op in enumerate(ops):
        missing = [k for k in ("pid", "name", "overload", "calls", "self_ns", "total_ns") if k not in op]
        if missing:
            problems.append("ops[%d] lacks %s" % (i, ",".join(missing)))
            continue
        # calls 0 is a row whose every call was folded into a same-name
        # parent (torch.profiler's table drops those): "folded" keeps them
        if not (isinstance(op["calls"], int) and op["calls"] + op.get("folded", 0) >= 1):
            problems.append("ops[%d] %s: calls = %r" % (i, op["name"], op["calls"]))
        if not (0 <= op["self_ns"] <= op["total_ns"]):
            problems.append("ops[%d] %s: self_ns %s > total_ns %s" % (i, op["name"], op["self_ns"], op["total_ns"]))
        if op["pid"] == pid and op["name"].startswith("aten::"):
            # the reference counts every RecordFunction (every ::call);
            # tbpf's calls follow torch.profiler's table, which shows the
            # only child of a same-name op inside it: add those back
            counts[op["name"]] = counts.get(op["name"], 0) + op["calls"] + op.get("folded", 0)
    return counts


def main():
    p = argparse.ArgumentParser()
    p.add_argument("tbpf_json")
    p.add_argument("profile_json")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--only", help="compare only these ops (comma separated)")
    p.add_argument("--label", default="counts")
    a = p.parse_args()

    problems = []
    got = load_tbpf(a.tbpf_json, a.pid, problems)
    with open(a.profile_json) as f:
        want = json.load(f)["ops"]
    if not want:
        problems.append("torch.profiler reported no aten:: op (workload broken?)")
    if got is not None:
        names = sorted(set(want) | set(got))
        if a.only:
            names = [n for n in a.only.split(",")]
        diff = [(n, want.get(n, 0), got.get(n, 0)) for n in names if want.get(n, 0) != got.get(n, 0)]
        print("%s: %d ops compared, %d differ (profiler total %d calls, tbpf total %d)"
              % (a.label, len(names), len(diff), sum(want.values()), sum(got.values())))
        if diff:
            print("  %-44s %12s %12s" % ("op", "profiler", "tbpf"))
            for n, w, g in diff:
                print("  %-44s %12d %12d" % (n, w, g))
            problems.append("%d of %d ops differ" % (len(diff), len(names)))
    for pr in problems:
        print("%s: %s" % (a.label, pr))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
