#!/usr/bin/env python3
"""compare_stacks.py - tbpf's (op, Source Location) rows vs torch.profiler's.

usage: compare_stacks.py TBPF_JSON PROFILE_JSON --pid PID [--label L] [--all]

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
--all (the in-process mode sees every RecordFunction; a workload with
backward): every name, not only aten::, and "tree_events" in place of
"events": the events key_averages groups (same-name only children folded,
as tbpf's "calls"; backward ops with their forward op's stack,
_set_backward_stacktraces), so the backward rows are checked too; and
--unseen A,B: names left out (rows the mode cannot see).
--nodes (with --all): only the autograd nodes ("nodes": the names of
torch.profiler's BACKWARD_FUNCTION events) and their evaluate_function
rows.  For torch 1.13, whose event tree is built from microsecond times
with start and duration truncated apart: the last small ops of a node
often fall out of it there (keeping the backward() call's stack) and
same-name children out of their parent (not folded), so the ops inside
nodes are compared on torch 2.x only.
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
    p.add_argument("--all", action="store_true",
                   help="every name; tree_events against calls (see above)")
    p.add_argument("--nodes", action="store_true",
                   help="with --all: autograd nodes and evaluate_function rows only")
    p.add_argument("--unseen", default="",
                   help="comma-separated names tbpf's mode cannot see (the uprobe "
                        "mode: test_scopes.sh's UNSEEN), left out of the reference")
    a = p.parse_args()
    unseen = set(x for x in a.unseen.split(",") if x)
    with open(a.tbpf_json) as f:
        doc = json.load(f)
    with open(a.profile_json) as f:
        ref = json.load(f)
    problems = []
    if doc["run"].get("events_dropped", 0):
        problems.append("events_dropped = %s" % doc["run"]["events_dropped"])
    nodes = set(ref.get("nodes", []))

    def wanted(name):
        if name in unseen:
            return False
        if a.nodes:
            return name in nodes or name.startswith("autograd::engine::evaluate_function: ")
        return a.all or name.startswith("aten::")
    tb = {}
    for op in doc["ops"]:
        if op["pid"] != a.pid or not wanted(op["name"]):
            continue
        if "source_location" not in op:
            problems.append("row without source_location: %s" % op["name"])
            continue
        k = "%s|%s" % (op["name"], ";".join(op["source_location"]))
        tb[k] = tb.get(k, 0) + op["calls"] + (0 if a.all else op.get("folded", 0))
    want = ref["tree_events"] if a.all else ref["events"]
    want = {k: v for k, v in want.items() if wanted(k.partition("|")[0])}
    for k in sorted(set(want) | set(tb)):
        if want.get(k, 0) != tb.get(k, 0):
            problems.append("%-100s torch.profiler %4d  tbpf %4d" % (k, want.get(k, 0), tb.get(k, 0)))
    exact = prefix = 0
    for k in sorted(ref["rows"]):
        name, _, st = k.partition("|")
        if not wanted(name):
            continue
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
    bw = sum(1 for k in want if "Backward" in k.partition("|")[0])
    print("%s: %d (op, stack) keys (%d of backward nodes) from %d %s; "
          "key_averages(group_by_stack_n) rows: %d equal, %d with a C call entry matched "
          "without it" % (a.label, len(want), bw, sum(want.values()),
                          "events" if a.all else "raw records", exact, prefix))
    for x in problems:
        print("  " + x)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
