#!/usr/bin/env python3
"""wall_job.py - one whole profiling job, for bench.py --wall (process wall time).

    python wall_job.py WORKLOAD --iters N [--torch-profiler]

Runs as a user's script does, start to exit: `import torch`, build the
workload (tests/workloads/WORKLOAD.py's setup: model, data, optimizer),
its warm-up, N iterations.  With --torch-profiler the job follows
torch.profiler's recipe: profile(activities=[CPU]) around the whole work
(building the workload, warm-up and iterations), then
print(prof.key_averages().table(sort_by="self_cpu_time_total",
row_limit=100)) - tbpf's table defaults - so the process ends once its
report is printed.  No go signal: tbpf run / torch.profiler see the job
from its start.  Last line on stdout:
  RESULT loop_s=... report_s=... ops_in_table=...
loop_s: the iterations alone; report_s: profile.__exit__ (torch.profiler's
post-processing) plus key_averages() and the table (0 without a profiler).
"""
import argparse
import os
import sys
import time

T_START = time.perf_counter()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "workloads"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", help="a tests/workloads bench workload (dispatch_bound, transformer_step, ...)")
    p.add_argument("--iters", type=int, required=True)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--torch-profiler", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gap-ms", type=float, default=0)   # transformer_step's option
    args = p.parse_args()
    wl = __import__(args.workload)       # imports torch
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    prof = None
    if args.torch_profiler:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    step = wl.setup(args)
    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        step()
    t1 = time.perf_counter()
    rows = 0
    if prof is not None:
        prof.__exit__(None, None, None)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=100)
        sys.stdout.write(table + "\n")
        rows = sum(1 for ln in table.splitlines() if ln.strip().startswith("aten::"))
    t2 = time.perf_counter()
    sys.stdout.write("RESULT loop_s=%.6f report_s=%.6f ops_in_table=%d start_to_loop_s=%.6f\n"
                     % (t1 - t0, t2 - t1, rows, t0 - T_START))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
