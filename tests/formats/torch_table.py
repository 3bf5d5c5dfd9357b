#!/usr/bin/python3
"""torch_table.py - print torch.profiler's own table for given per-op totals.

Reads JSON on stdin: {"sort": KEY or null, "row_limit": N,
"rows": [{"name":..., "calls":..., "self_ns":..., "total_ns":...}, ...]}
and prints EventList(...).table() built from FunctionEventAvg rows, so a
test can compare tbpf's table with torch's formatting code itself.  Run
with an interpreter that has torch (Debian: /usr/bin/python3).
"""
import json
import sys

from torch.autograd.profiler_util import EventList, FunctionEventAvg


def main():
    spec = json.load(sys.stdin)
    events = []
    for r in spec["rows"]:
        e = FunctionEventAvg()
        e.key = r["name"]
        e.count = r["calls"]
        e.node_id = -1
        e.cpu_time_total = r["total_ns"] / 1000.0
        e.self_cpu_time_total = r["self_ns"] / 1000.0
        events.append(e)
    sys.stdout.write(EventList(events).table(sort_by=spec.get("sort"),
                                             row_limit=spec.get("row_limit", 100)))


if __name__ == "__main__":
    main()
