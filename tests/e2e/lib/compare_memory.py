#!/usr/bin/env python3
"""compare_memory.py - per-op memory columns, tbpf vs torch.profiler.

usage: compare_memory.py TBPF_JSON PROFILE_JSON --pid PID [--unseen NAME,...]

PROFILE_JSON is what tests/workloads/memory_model.py --profile prints for
the same work run under torch.profiler(profile_memory=True) in another
process: "rows", key_averages() with count, cpu_memory_usage and
self_cpu_memory_usage, and "tree_rows", the same columns computed from
torch.profiler's own event tree (each allocation record a child of the op
open on its thread, by exact timestamps; the workload's docstring says why
the two can differ).

For every key (but "[memory]", the allocations outside any op, whose number
depends on where the window starts and ends, and the --unseen keys tbpf
cannot see, docs/rows.md), tbpf's row of that name for PID (overloads summed)
must have
  - the count and both memory columns of "tree_rows", byte for byte;
  - the memory columns of key_averages(), byte for byte, except where
    key_averages() itself disagrees with torch.profiler's event tree (its
    rounded time intervals; listed, not failed).
Exit 0 when all hold and some row has memory, 1 otherwise.
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
    a = p.parse_args()
    doc = json.load(open(a.tbpf_json))
    ref = json.load(open(a.profile_json))
    unseen = set(x for x in a.unseen.split(",") if x)
    tb = {}
    for op in doc["ops"]:
        if op["pid"] != a.pid:
            continue
        if "cpu_memory_usage" not in op:
            print("PROBLEM: tbpf's JSON has no memory fields (--profile-memory?)")
            return 1
        r = tb.setdefault(op["name"], {"count": 0, "cpu": 0, "self": 0})
        r["count"] += op["calls"]
        r["cpu"] += op["cpu_memory_usage"]
        r["self"] += op["self_cpu_memory_usage"]
    problems, ok, nonzero, rounded = [], 0, 0, []
    tree = ref["tree_rows"]
    for k, want in sorted(tree.items()):
        if k == "[memory]" or k in unseen:
            continue
        got = tb.get(k)
        if got is None:
            problems.append("row missing in tbpf: %s" % k)
            continue
        ka = ref["rows"].get(k, {"cpu_memory_usage": None, "self_cpu_memory_usage": None})
        line = "%-44s count %5d/%5d  CPU Mem %9d/%9d  Self CPU Mem %9d/%9d" % (
            k, want["count"], got["count"], want["cpu_memory_usage"], got["cpu"],
            want["self_cpu_memory_usage"], got["self"])
        mine = (got["cpu"], got["self"])
        if (want["cpu_memory_usage"], want["self_cpu_memory_usage"]) != mine:
            problems.append("memory differs (torch.profiler's tree/tbpf): " + line)
            continue
        if want["count"] != got["count"]:
            problems.append("count differs (torch.profiler/tbpf): " + line)
            continue
        theirs = (ka["cpu_memory_usage"], ka["self_cpu_memory_usage"])
        if theirs != mine:
            rounded.append("%s: key_averages() CPU Mem %s Self %s, its event tree and tbpf %d %d"
                           % (k, theirs[0], theirs[1], mine[0], mine[1]))
        ok += 1
        nonzero += bool(mine[0] or mine[1])
        print("equal: " + line)
    for k in sorted(ref["rows"]):
        if k not in tree and k != "[memory]" and k not in unseen:
            problems.append("key_averages() row not in the event tree: %s" % k)
    for r in rounded:
        print("key_averages() rounding (torch.profiler's own two views differ): " + r)
    print("rows: %d equal byte for byte (%d with memory) to torch.profiler's event tree, of "
          "which %d also to key_averages(); %d differ" % (ok, nonzero, ok - len(rounded),
                                                          len(problems)))
    for pr in problems:
        print("PROBLEM: " + pr)
    return 1 if problems or not nonzero else 0


if __name__ == "__main__":
    sys.exit(main())
