"""wl_common.py - shared start/go/result protocol of the e2e and bench workloads.

Import this module before torch: it blocks SIGUSR1 in the main thread so
every thread torch or the workload starts inherits the mask, and the go
signal is only ever taken by sigwait() (never kills a worker thread).

Protocol (what tests/e2e/lib/lib.sh relies on):
  stdout "READY pid=<pid>"      after warm-up, libtorch mapped, no ops running
  wait for SIGUSR1 (or --go-file PATH to appear)
  run exactly the requested work, no torch op outside it
  stdout "RESULT key=value ..." then exit 0
"""
import argparse
import json
import os
import signal
import sys
import time

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})


def _early_comm() -> None:
    """--comm NAME (bench_main's, fleet_ops.py's): set /proc/self/comm now,
    before the workload imports torch, so a daemon scanning for processes
    that map libtorch never sees it under its interpreter's name."""
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        name = a[len("--comm="):] if a.startswith("--comm=") else (
            argv[i + 1] if a == "--comm" and i + 1 < len(argv) else None)
        if name:
            with open("/proc/self/comm", "w") as f:
                f.write(name[:15])


_early_comm()


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--go-file", help="start when this file exists (instead of SIGUSR1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--intra-threads", type=int, default=1,
                   help="torch.set_num_threads (default 1: deterministic)")


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def ready() -> None:
    say("READY pid=%d" % os.getpid())


def wait_go(args) -> None:
    """Block until the go signal; performs no torch operation."""
    if args.go_file:
        while not os.path.exists(args.go_file):
            time.sleep(0.005)
        return
    signal.sigwait({signal.SIGUSR1})


def result(**kv) -> None:
    say("RESULT " + " ".join("%s=%s" % (k, v) for k, v in kv.items()))


def profiler_op_counts(prof) -> dict:
    """aten:: op -> call count: every op torch.profiler recorded.

    Counted from the profiler's raw records (kineto_results.events(), one
    per RecordFunction, i.e. per dispatcher call), not from key_averages():
    when building its event tree, key_averages() drops a child that has
    the name of its parent and is its only child (EventList._remove_dup_nodes),
    e.g. the aten::sum.dim_IntList inside every aten::sum, and whether it
    sees the nesting depends on timestamp granularity: its counts vary from
    run to run (aten::sum: 30 to 34 for 40 calls, torch 1.13 and 2.8).
    """
    counts = {}
    try:
        events = [e.name() for e in prof.profiler.kineto_results.events()]
    except AttributeError:  # no raw records in this torch: fall back
        events = None
    if events is None:
        for evt in prof.key_averages():
            if evt.key.startswith("aten::"):
                counts[evt.key] = counts.get(evt.key, 0) + int(evt.count)
    else:
        for name in events:
            if name.startswith("aten::"):
                counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def profile_cpu(record_shapes=False, profile_memory=False, with_stack=False):
    import torch
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                  record_shapes=record_shapes,
                                  profile_memory=profile_memory, with_stack=with_stack)


def print_json(obj) -> None:
    say(json.dumps(obj, sort_keys=True))


def bench_main(description, setup, default_iters, add_args=None):
    """Shared driver of the benchmark workloads.

    setup(args) -> step(): one iteration.  After warm-up the workload prints
    READY, waits for go, runs --iters iterations (under torch.profiler with
    --torch-profiler) and prints RESULT iters=N seconds=S iters_per_s=X
    seconds_with_exit=T (S: the loop alone; T adds torch.profiler's own
    post-processing when the profiler stops).
    --count-ops instead prints the aten:: operator calls per iteration that
    torch.profiler sees (all nesting levels), for per-op overhead figures.
    """
    import torch
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--iters", type=int, default=default_iters)
    p.add_argument("--warmup", type=int, default=max(3, default_iters // 20))
    p.add_argument("--torch-profiler", action="store_true",
                   help="run the timed iterations under torch.profiler (CPU activity)")
    p.add_argument("--record-shapes", action="store_true",
                   help="with --torch-profiler: record_shapes=True")
    p.add_argument("--torch-profile-memory", action="store_true",
                   help="with --torch-profiler: profile_memory=True")
    p.add_argument("--with-stack", action="store_true",
                   help="with --torch-profiler: with_stack=True (Python stacks, as tbpf's tree)")
    p.add_argument("--count-ops", action="store_true",
                   help="print aten:: op calls per iteration (from torch.profiler) and exit")
    p.add_argument("--no-wait", action="store_true", help="start at once, no go signal")
    p.add_argument("--comm", help="process name (/proc/self/comm), set before torch loads")
    add_common_args(p)
    if add_args:
        add_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    torch.manual_seed(args.seed)
    step = setup(args)
    for _ in range(args.warmup):
        step()
    if args.count_ops:
        with profile_cpu() as prof:
            for _ in range(args.iters):
                step()
        counts = profiler_op_counts(prof)
        print_json({"ops_per_iter": sum(counts.values()) / args.iters, "iters": args.iters,
                    "ops": counts})
        return
    if not args.no_wait:
        ready()
        wait_go(args)
    prof = (profile_cpu(args.record_shapes, args.torch_profile_memory, args.with_stack)
            if args.torch_profiler else None)
    t0 = time.perf_counter()
    if prof is not None:
        prof.__enter__()
    c0 = time.process_time()
    for _ in range(args.iters):
        step()
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if prof is not None:
        prof.__exit__(None, None, None)  # post-processing: reported separately
    total = time.perf_counter() - t0
    result(iters=args.iters, seconds="%.6f" % secs, iters_per_s="%.3f" % (args.iters / secs),
           seconds_with_exit="%.6f" % total, profiler=int(bool(prof)),
           cpu_seconds="%.6f" % cpu, cpu_us_per_iter="%.3f" % (cpu / args.iters * 1e6))
