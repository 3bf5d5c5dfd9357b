#!/usr/bin/env python3
"""metrics_calls.py - tbpf daemon's tbpf_op_calls_total vs torch.profiler.

usage: metrics_calls.py METRICS_TEXT PROFILE_JSON --job JOB [--label L]

METRICS_TEXT is one scrape of the daemon's /metrics (Prometheus text);
PROFILE_JSON what tests/workloads/scopes_model.py --profile prints
("events": torch.profiler's raw records by name: aten ops, autograd nodes,
record_function scopes, ...).  For every name torch.profiler recorded,
the job's tbpf_op_calls_total series of that op (device cpu) must hold
exactly as many calls, and the job must have no series torch.profiler
lacks (nor an op="other" series with calls: the test asks for a --top
large enough).  Histogram
counts (tbpf_op_duration_seconds_count) must equal the calls.
Exit 0 when all hold, 1 otherwise, with the differences.
"""
import argparse
import json
import re
import sys

LINE = re.compile(r'^(\w+)\{([^}]*)\}\s+(\S+)$')


def labels(s):
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', s))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("metrics")
    p.add_argument("profile_json")
    p.add_argument("--job", required=True)
    p.add_argument("--label", default="daemon")
    a = p.parse_args()
    calls, hist = {}, {}
    with open(a.metrics) as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            lb = labels(m.group(2))
            if lb.get("job") != a.job:
                continue
            if m.group(1) == "tbpf_op_calls_total" and lb.get("device") == "cpu":
                calls[lb["op"]] = calls.get(lb["op"], 0) + int(float(m.group(3)))
            elif m.group(1) == "tbpf_op_duration_seconds_count":
                hist[lb["op"]] = hist.get(lb["op"], 0) + int(float(m.group(3)))
    with open(a.profile_json) as f:
        want = json.load(f)["events"]
    problems = []
    if not calls:
        problems.append("no tbpf_op_calls_total series for job %s" % a.job)
    if calls.get("other"):
        problems.append('op="other" has %d calls: raise --top' % calls["other"])
    got = {k: v for k, v in calls.items() if k != "other"}
    for k in sorted(set(want) | set(got)):
        if want.get(k, 0) != got.get(k, 0):
            problems.append("%-40s torch.profiler %6d  daemon %6d" % (k, want.get(k, 0), got.get(k, 0)))
    for k, v in sorted(calls.items()):
        if hist.get(k, v) != v:
            problems.append("%s: histogram count %d, calls %d" % (k, hist.get(k), v))
    print("%s: %d names (%d aten), %d calls compared" % (
        a.label, len(want), sum(1 for k in want if k.startswith("aten::")), sum(want.values())))
    for pr in problems:
        print("  " + pr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
