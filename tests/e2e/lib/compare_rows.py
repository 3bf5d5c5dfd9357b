#!/usr/bin/env python3
"""compare_rows.py - every row of torch.profiler's key_averages() vs tbpf's.

usage: compare_rows.py TBPF_JSON PROFILE_JSON --pid PID [--unseen NAME,...]
                       [--nest PARENT=CHILD+CHILD ...]

PROFILE_JSON is what tests/workloads/scopes_model.py --profile prints:
"rows" (key_averages(), every key) and "events" (raw records by name).
For every key torch.profiler has, tbpf must have a row of that name for PID
with as many calls as torch.profiler recorded (raw records: key_averages()
drops the only child of a same-name parent; tbpf's "folded" calls are added
back, as compare_counts.py does).  tbpf must have no row torch.profiler
lacks.  --unseen lists the keys the uprobe mode cannot see (docs/rows.md,
"Rows torch.profiler has that tbpf cannot see"): they must be exactly the
missing ones, so a row that goes missing, or one that appears, fails.
--renamed T=R: tbpf's row T is compared as torch.profiler's R (a row tbpf
cannot name exactly, e.g. a Python autograd node's evaluate_function).
--nest P=C1+C2: P's rows contain only C1, C2 (record_function scopes,
whose self time the test knows) and at most a small op: self(P) must be
total(P) - total(C1) - total(C2), less at most 50 us per call, summed over
the names.
Exit 0 when all hold, 1 otherwise, with the differences.
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("tbpf_json")
    p.add_argument("profile_json")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--unseen", default="")
    p.add_argument("--nest", action="append", default=[])
    p.add_argument("--renamed", action="append", default=[],
                   help="TBPF_NAME=REF_NAME: tbpf's row of that name stands for torch.profiler's")
    a = p.parse_args()
    with open(a.tbpf_json) as f:
        doc = json.load(f)
    with open(a.profile_json) as f:
        ref = json.load(f)
    problems = []
    if doc["run"].get("events_dropped", 0):
        problems.append("events_dropped = %s" % doc["run"]["events_dropped"])
    tb = {}
    for op in doc["ops"]:
        if op["pid"] != a.pid:
            continue
        r = tb.setdefault(op["name"], {"calls": 0, "self_ns": 0, "total_ns": 0})
        r["calls"] += op["calls"] + op.get("folded", 0)
        r["self_ns"] += op["self_ns"]
        r["total_ns"] += op["total_ns"]
        if not 0 <= op["self_ns"] <= op["total_ns"]:
            problems.append("%s: self_ns %d > total_ns %d" % (op["name"], op["self_ns"], op["total_ns"]))
    for spec in a.renamed:
        mine, theirs = spec.split("=", 1)
        if mine in tb:
            tb[theirs] = tb.pop(mine)
            print("renamed: tbpf's %r stands for %r" % (mine, theirs))
    # an --unseen entry ending in "*" stands for the rows it begins (a
    # name carrying a hash); each entry must stand for some missing row
    pats = [x for x in a.unseen.split(",") if x]
    keys = set(ref["rows"])
    events = ref.get("events") or {}
    missing, wrong, ok = [], [], 0
    for k in sorted(keys):
        want = events.get(k, ref["rows"][k]["count"])
        if k not in tb:
            missing.append(k)
            continue
        if tb[k]["calls"] != want:
            wrong.append("%-64s torch.profiler %6d  tbpf %6d" % (k, want, tb[k]["calls"]))
        else:
            ok += 1
    extra = sorted(k for k in tb if k not in keys)

    def stands(p, k):
        return k.startswith(p[:-1]) if p.endswith("*") else k == p
    unseen = set(k for k in missing if any(stands(p, k) for p in pats))
    unseen |= set(p for p in pats if not any(stands(p, k) for k in missing))
    if set(missing) != unseen:
        for k in sorted(set(missing) - unseen):
            problems.append("row missing in tbpf: %s (%d calls)" % (k, events.get(k, ref["rows"][k]["count"])))
        for k in sorted(unseen - set(missing)):
            problems.append("row listed as unseen but tbpf has it (or torch.profiler lacks it): %s" % k)
    for w in wrong:
        problems.append("count differs: " + w)
    for k in extra:
        problems.append("tbpf row torch.profiler lacks: %s (%d calls)" % (k, tb[k]["calls"]))
    for spec in a.nest:
        parent, kids = spec.split("=", 1)
        pn = [k for k in tb if k == parent or k.startswith(parent + "#")]
        kn = kids.split("+")
        if not pn or any(k not in tb for k in kn):
            problems.append("--nest %s: rows missing" % spec)
            continue
        self_ns = sum(tb[k]["self_ns"] for k in pn)
        total = sum(tb[k]["total_ns"] for k in pn)
        kids_total = sum(tb[k]["total_ns"] for k in kn)
        calls = sum(tb[k]["calls"] for k in pn)
        # what is neither P's self time nor a listed child is an op run
        # directly in P: on torch 1.13 the aten::empty each child label's
        # record_function_enter makes in P (three per train_step, 17-20 us
        # a call under tbpf in CI; the longest aten::empty of a failing
        # run took 2.7 ms, preempted on the 2-vCPU VM); allow 50 us a call.  A
        # child left out of P, or counted twice, moves it by milliseconds.
        rest = total - kids_total - self_ns
        if not -1000 * calls <= rest <= 50000 * calls:
            problems.append("--nest %s: self %d ns != total %d - children %d ns" % (spec, self_ns, total, kids_total))
        else:
            print("nest %s: self %.3f ms = total %.3f - children %.3f ms - %.1f us/call in ops" %
                  (spec, self_ns / 1e6, total / 1e6, kids_total / 1e6, rest / 1e3 / calls))
    print("rows: %d of torch.profiler's %d equal in tbpf (count), %d unseen as documented: %s" %
          (ok, len(keys), len(unseen & set(missing)), ", ".join(sorted(unseen & set(missing)))))
    for pr in problems:
        print("PROBLEM: " + pr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
