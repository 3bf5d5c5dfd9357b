#!/usr/bin/env python3
"""kineto_readers.py - read a TensorBoard run folder with the readers users
open: TensorBoard's PyTorch Profiler plugin (torch_tb_profiler, its own
parser and view generator) and Holistic Trace Analysis (hta).

    kineto_readers.py RUN_DIR [--hta]

Prints one JSON document per worker file on stdout:
  {"file", "worker", "views", "steps", "ops": {name: calls}, "modules":
   [names], "distributed", "hta_iterations": [...] (with --hta)}
Exits 1, with the reader's exception, when a reader fails on a file.
Run with the readers' venv (tests/setup.sh: $TBPF_READERS_VENV).
"""
import json
import logging
import os
import sys
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.WARNING)

from torch_tb_profiler import consts                                # noqa: E402
from torch_tb_profiler.profiler.data import RunProfileData          # noqa: E402
from torch_tb_profiler.profiler.run_generator import RunGenerator   # noqa: E402


def module_names(stats):
    out = []

    def walk(s, depth):
        out.append("  " * depth + s.name)
        for c in s.children:
            walk(c, depth + 1)
    for s in stats or []:
        walk(s, 0)
    return out


def tb(path, worker):
    data = RunProfileData.parse(worker, None, path, "/tmp")
    prof = RunGenerator(worker, None, data).generate_run_profile()
    ops = {}
    for row in prof.operation_table_by_name["data"]:
        ops[row["name"]] = row["calls"]
    return {
        "views": [v.display_name for v in prof.views],
        "steps": list(data.steps_names or []),
        "ops": ops,
        "modules": module_names(prof.module_stats),
        "distributed": data.distributed_info,
        "overview_steps": len(prof.overview["steps"]["rows"]) if prof.overview else 0,
    }


def hta(run_dir):
    from hta.trace_analysis import TraceAnalysis
    ta = TraceAnalysis(trace_dir=run_dir, include_last_profiler_step=True)
    out = {}
    for rank, tr in ta.t.traces.items():
        it = sorted(int(i) for i in tr["iteration"].unique() if i >= 0) if "iteration" in tr else []
        out[rank] = it
    return out


def main():
    run_dir = sys.argv[1]
    pat = consts.WORKER_PATTERN
    res = []
    for f in sorted(os.listdir(run_dir)):
        m = pat.match(f)
        if not m:
            continue
        r = tb(os.path.join(run_dir, f), m.group(1))
        r["file"] = f
        r["worker"] = m.group(1)
        res.append(r)
    doc = {"workers": res}
    if "--hta" in sys.argv[2:]:
        doc["hta_iterations"] = hta(run_dir)
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
