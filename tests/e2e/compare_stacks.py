#!/usr/bin/env python3
"""compare_stacks.py - tbpf's (op, Source Location) rows vs torch.profiler's (issue 16).

usage: compare_stacks.py TBPF_JSON PROFILE_JSON --pid PID [--label L]

TBPF_JSON: tbpf --format json --group-by-stack N.  PROFILE_JSON: what
tests/workloads/stack_model.py --profile prints (with_stack=True).

- "events" (every raw record, its stack without the "<built-in ...>" C
  call entries tbpf cannot see, first N entries): for every aten::
  (name, entries), tbpf has a row of that name and "source_location" for
  PID with as many calls (calls + folded, see compare_shapes.py), and no
  (name, entries) torch.profiler lacks.
- "rows" (key_averages(group_by_stack_n=N)): each row whose stack has no
  C call entry is a tbpf row, name and frames equal; a row with one is,
  without it, a prefix of a tbpf row's frames of that name.
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
    p.add_argument("--label", default="stacks")
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
        if op["pid"] != a.pid or not op["name"].startswith("aten::"):
            continue
        if "source_location" not in op:
            problems.append("row without source_location: %s" % op["name"])
            continue
        k = "%s|%s" % (op["name"], ";".join(op["source_location"]))
        tb[k] = tb.get(k, 0) + op["calls"] + op.get("folded", 0)
    want = ref["events"]
    for k in sorted(set(want) | set(tb)):
        if want.get(k, 0) != tb.get(k, 0):
            problems.append("%-100s torch.profiler %4d  tbpf %4d" % (k, want.get(k, 0), tb.get(k, 0)))
    exact = prefix = 0
    for k in sorted(ref["rows"]):
        name, _, st = k.partition("|")
        entries = st.split(";") if st else []
        if not any(e.startswith("<built-in") for e in entries):
            exact += 1
            if k not in tb:
                problems.append("key_averages row %s: no such tbpf row" % k)
            continue
        prefix += 1
        rest = ";".join(e for e in entries if not e.startswith("<built-in"))
        if not any(t.startswith(name + "|" + rest) for t in tb):
            problems.append("key_averages row %s: no tbpf row starts with its Python entries" % k)
    print("%s: %d (op, stack) keys from %d raw records; key_averages(group_by_stack_n) "
          "rows: %d equal, %d with a C call entry matched without it" %
          (a.label, len(want), sum(want.values()), exact, prefix))
    for x in problems:
        print("  " + x)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
