#!/usr/bin/env python3
"""probe_cost.py - per-op cost of tbpf's probes, measured inside one process.

One worker process runs a workload's step (--workload: a tests/workloads
module with setup(args) -> step; default dispatch_bound) on command.  Each round times N iterations without
tbpf, attaches `tbpf --pid WORKER ARGS...`, times N iterations again while
reading the kernel's BPF run-time statistics (kernel.bpf_stats_enabled=1)
of every BPF program the tbpf process holds before and after a second
probed run (the statistics add two clock reads per program run, so the
timed run is done with them off), and stops tbpf.  Baseline and probed runs alternate in the same process, so
allocator, caches and the Python state are the same for both.

Per round: us/iter without and with tbpf, per-op overhead ((with -
without) / ATen ops per iteration), the same from the worker thread's CPU
time (user + system, which includes the traps and BPF programs but not
time other processes take the CPU: steadier on a shared machine) and its
user and system parts apart (per_op_user_us, per_op_sys_us), tbpf's
own CPU time during the timed run per iteration (reader_cpu_us: its
user-space reader, which competes for the CPUs), and per
program (tbpf_ prefix dropped): hits per iteration (NAME_hits_per_iter),
mean BPF run time (NAME_ns) and BPF time per iteration (NAME_us_per_iter).
Prints the medians over rounds as one line of JSON.

  sudo bench/probe_cost.py --rounds 5 -- --exits=infer --no-python
  sudo bench/probe_cost.py --python VENV/bin/python --workload transformer_step \
      --warm 10 --iters 40 --rounds 3 --ops-per-iter 1965

Against the floor (the entry and return traps alone, with
empty op and module-call programs): build tbpf once more with
`make OUT=/tmp/tbpf-floor CLANG="clang -DTBPF_FLOOR"` and give it as
--floor; each --mode then also runs with the floor build and the same
arguments.  Every round runs all of them in the same worker, in rotating
order, each after its own baseline; per mode it prints one JSON line of
medians (per-op figures with [min, max]) and above_floor, the per-round
difference to its floor (median and range):

  sudo bench/probe_cost.py --floor /tmp/tbpf-floor/tbpf --rounds 3 \
      --mode= --mode=--no-python --mode=--exits=infer
"""
import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WL = os.path.join(ROOT, "tests", "workloads")

WORKER = r"""
import sys, time
sys.path.insert(0, %r)
import wl_common  # noqa
import torch
import argparse, importlib, resource
torch.set_num_threads(1)
wl = importlib.import_module(%r)
step = wl.setup(argparse.Namespace(seed=0, gap_ms=0, intra_threads=1))
for _ in range(%d):
    step()
print("READY", flush=True)
for line in sys.stdin:
    # "N": N timed steps; "prof N" (bench/inproc_cost.py): the same inside
    # torch.profiler, entered before and left (post-processing) after them
    words = line.split()
    n = int(words[-1])
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if words[0] == "prof" else None
    if prof:
        prof.__enter__()
    u0 = resource.getrusage(resource.RUSAGE_THREAD)
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        step()
    t1, c1 = time.perf_counter(), time.thread_time()
    u1 = resource.getrusage(resource.RUSAGE_THREAD)
    if prof:
        prof.__exit__(None, None, None)
    print("%%.9f %%.9f %%.9f %%.9f" %% (t1 - t0, c1 - c0, u1.ru_utime - u0.ru_utime,
                                      u1.ru_stime - u0.ru_stime), flush=True)
"""


def prog_list():
    """[(id, name, run_time_ns, run_cnt)] of every BPF program loaded."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True)
    return [(p["id"], p.get("name", "?"), p.get("run_time_ns", 0), p.get("run_cnt", 0))
            for p in json.loads(out.stdout)]


def held_prog_ids(pid):
    """Ids of the BPF programs process pid holds an fd on (/proc/PID/fdinfo)."""
    ids = set()
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def prog_stats(pid):
    """{name: (run_time_ns, run_cnt)} of the programs held by pid, summed
    by name (this bpftool lists no owning pids; other tbpf runs may be
    loaded)."""
    ids = held_prog_ids(pid)
    out = {}
    for i, name, t, c in prog_list():
        if i in ids:
            t0, c0 = out.get(name, (0, 0))
            out[name] = (t0 + t, c0 + c)
    return out


def set_stats(v):
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write(v)


def timed(worker, n, cmd=""):
    """[wall, thread CPU, user, system] seconds of n steps (cmd "prof": under torch.profiler)."""
    worker.stdin.write("%s %d\n" % (cmd, n))
    worker.stdin.flush()
    return [float(x) for x in worker.stdout.readline().split()]


def proc_cpu_s(pid):
    """User + system CPU seconds process pid has used (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def attach(tbpf, pid, args):
    """`tbpf --pid PID --format json -o /dev/null ARGS` started; returns
    it and its "attached" line, once it has printed that."""
    tb = subprocess.Popen([tbpf, "--pid", str(pid), "--format", "json", "-o", "/dev/null"] + args,
                          stderr=subprocess.PIPE, text=True, stdout=subprocess.DEVNULL)
    line = ""
    while "attached" not in line:
        line = tb.stderr.readline()
        if not line:
            sys.exit("tbpf exited before attaching")
    return tb, line


def one_run(worker, tbpf, args, a, old):
    """Baseline then probed iterations in the worker, then a third run
    with the BPF statistics on; a dict of the round's figures."""
    base = timed(worker, a.iters)
    tb, line = attach(tbpf, worker.pid, args)
    ms = re.search(r"([\d.]+)\s*ms", line)
    if a.settle:
        timed(worker, a.settle)   # past attach: new stacks named, rows made
    c0 = proc_cpu_s(tb.pid)
    probed = timed(worker, a.iters)
    tb_cpu = proc_cpu_s(tb.pid) - c0
    # BPF run times in a separate run: the statistics cost two
    # clock reads per program run, which the timed run must not see
    set_stats("1")
    s0 = prog_stats(tb.pid)
    timed(worker, a.iters)
    s1 = prog_stats(tb.pid)
    set_stats(old)
    tb.send_signal(signal.SIGINT)
    tb.communicate(timeout=60)
    r = {"base_us": base[0] / a.iters * 1e6, "tbpf_us": probed[0] / a.iters * 1e6,
         "base_cpu_us": base[1] / a.iters * 1e6, "tbpf_cpu_us": probed[1] / a.iters * 1e6,
         "attach_ms": float(ms.group(1)) if ms else None,
         "reader_cpu_us": tb_cpu / a.iters * 1e6}
    # the worker thread's user and system time apart (getrusage: the
    # scheduler's runtime split by tick samples): a trap and its BPF
    # programs run in the kernel; what they leave the step (cache and TLB
    # misses) shows in user time
    r["per_op_user_us"] = (probed[2] - base[2]) / a.iters * 1e6 / a.ops_per_iter
    r["per_op_sys_us"] = (probed[3] - base[3]) / a.iters * 1e6 / a.ops_per_iter
    r["per_op_us"] = (r["tbpf_us"] - r["base_us"]) / a.ops_per_iter
    r["per_op_cpu_us"] = (r["tbpf_cpu_us"] - r["base_cpu_us"]) / a.ops_per_iter
    for name in s1:
        dt = s1[name][0] - s0.get(name, (0, 0))[0]
        dc = s1[name][1] - s0.get(name, (0, 0))[1]
        if dc:
            key = name[5:] if name.startswith("tbpf_") else name
            r[key + "_hits_per_iter"] = dc / a.iters
            r[key + "_ns"] = dt / dc
            r[key + "_us_per_iter"] = dt / a.iters / 1000
    return r


def variants(a):
    """[(label, tbpf binary, args)]: each --mode (or the positional tbpf
    arguments) with this build, and again with the --floor build."""
    modes = [shlex.split(m) for m in a.mode] if a.mode else [a.tbpf_args]
    out = []
    for args in modes:
        label = " ".join(args) or "default"
        out.append((label, a.tbpf, args))
        if a.floor:
            out.append(("floor " + label, a.floor, args))
    return out


def summary(rows):
    """Medians (and [min, max] ranges of the per-op figures) over rounds."""
    keys = sorted({k for r in rows for k in r})
    out = {}
    for k in keys:
        xs = [r[k] for r in rows if r.get(k) is not None]
        if xs:
            out[k] = round(statistics.median(xs), 3)
            if k.startswith("per_op"):
                out[k + "_range"] = [round(min(xs), 3), round(max(xs), 3)]
    return out


def med_range(xs):
    """{"median", "range": [min, max]} of xs, to 3 places."""
    return {"median": round(statistics.median(xs), 3), "range": [round(min(xs), 3), round(max(xs), 3)]}


def above_floor(rows, label):
    """Per round, the mode's per-op figures minus its floor's (the two ran
    in the same round of the same worker): median and range."""
    out = {}
    for k in ("per_op_us", "per_op_cpu_us", "per_op_user_us", "per_op_sys_us"):
        d = [r[k] - f[k] for r, f in zip(rows[label], rows["floor " + label])]
        out[k] = med_range(d)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--tbpf", default=os.path.join(ROOT, "build", "tbpf"))
    ap.add_argument("--floor", metavar="TBPF",
                    help="a tbpf built with empty op and module-call programs "
                         "(make OUT=DIR CLANG='clang -DTBPF_FLOOR'), run with each mode's arguments")
    ap.add_argument("--mode", action="append", default=[], metavar="ARGS",
                    help="tbpf arguments of one mode as one string, --mode=ARGS (--mode= is the default mode); repeatable")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--ops-per-iter", type=float, default=95.0,
                    help="ATen ops per iteration as torch.profiler counts them (bench.py --count-ops)")
    ap.add_argument("--workload", default="dispatch_bound",
                    help="a tests/workloads module with setup(args) -> step (dispatch_bound, transformer_step)")
    ap.add_argument("--warm", type=int, default=200, help="steps before READY")
    ap.add_argument("--settle", type=int, default=None,
                    help="probed steps run untimed before the timed ones (default: --iters), "
                         "so the timed run sees the steady state, not the attach: "
                         "the first steps make every row and name every new Python stack")
    ap.add_argument("tbpf_args", nargs="*")
    a = ap.parse_args()
    if a.settle is None:
        a.settle = a.iters

    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    vs = variants(a)
    worker = subprocess.Popen([a.python, "-c", WORKER % (WL, a.workload, a.warm)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    rows = {label: [] for label, _, _ in vs}
    try:
        if worker.stdout.readline().strip() != "READY":
            sys.exit("worker failed")
        timed(worker, a.iters)  # warm
        for i in range(a.rounds):
            for label, tbpf, args in vs[i % len(vs):] + vs[:i % len(vs)]:  # rotating order
                r = one_run(worker, tbpf, args, a, old)
                rows[label].append(r)
                print(json.dumps(dict(r, mode=label, round=i)), file=sys.stderr)
    finally:
        worker.kill()
        set_stats(old)
    if len(vs) == 1:
        print(json.dumps(summary(rows[vs[0][0]])))
        return
    for label, _, _ in vs:
        out = dict(summary(rows[label]), mode=label)
        if a.floor and not label.startswith("floor "):
            out["above_floor"] = above_floor(rows, label)
        print(json.dumps(out))


if __name__ == "__main__":
    main()
