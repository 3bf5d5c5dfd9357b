#!/usr/bin/env python3
"""bench.py - overhead of tbpf next to torch.profiler, side by side, one run.

For each torch (PY1 = Debian 1.13, PY2 = the 2.x venv) and each workload
(tests/workloads/dispatch_bound.py: ~100 tiny ops per iteration;
compute_bound.py: large matmuls and convolutions; transformer_step.py: a
small TransformerEncoder language model's training step with AdamW, real
model code), R repetitions of
  baseline        the workload alone
  tbpf --format table
                  the same with `tbpf --pid PID` attached as a user runs
                  it: no recorder named (the in-process one where the torch
                  build verifies), the table (no Python stacks)
  tbpf --uprobes  the uprobe recorder forced (one row per --exits mode
                  asked for)
  tbpf --inproc --no-python
                  with --inproc: tbpf's in-process RecordFunction agent
                  (docs/inproc.md) instead of uprobes, asked for what
                  torch.profiler's default (no with_stack) records: the
                  rows, no Python stacks, no layer tree
  torch.profiler  the same iterations inside torch.profiler
  (--stacks: `tbpf --inproc` with Python stacks and the layer tree, its
  JSON's "layers", against torch.profiler with_stack=True)
  (--shapes: each tbpf mode again with --record-shapes, and torch.profiler
  with record_shapes=True: the per-op cost of input shapes)
and with --memory also
  tbpf --profile-memory                  tbpf's default mode with the
                                         allocator probes
  torch.profiler profile_memory=True     the same inside torch.profiler
in rotating order, reporting medians (min-max) of the time per iteration
measured by the workload itself, the slowdown against baseline, tbpf's
per-op overhead (extra time per iteration / ATen ops per iteration, ops
counted by torch.profiler and by tbpf), and tbpf's attach time (the time
tbpf reports on its "attached" line when it gives one, and the wall time
from starting tbpf to that line).  Writes a markdown table to stdout and
to bench/results.md.  Exit 1 when a tbpf mode could not be measured (the
table still shows baseline and torch.profiler, and says why).

--old-agent PATH adds a row for another build of the in-process agent,
interleaved with this tree's (an agent change measured as the benchmark
does; to bench/results_inproc_agents.md).

--wall measures instead the whole job's process wall time, start to exit,
reports included: unprofiled, torch.profiler's recipe (its table printed),
`tbpf run --inproc` and `tbpf run` (bench/wall.py, bench/wall_job.py;
to bench/results_wall.md).
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import wall

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WL = os.path.join(ROOT, "tests", "workloads")
PY1 = os.environ.get("PY1", "/usr/bin/python3")
PY2 = os.environ.get("PY2", "/var/cache/tbpf/venv-torch2/bin/python")
# Per workload: calibration iterations, minimum iterations, cap on ops
# recorded by torch.profiler per run (its post-processing is slow).
WORKLOADS = {"dispatch_bound": (300, 500), "compute_bound": (2, 3), "transformer_step": (5, 10)}
PROFILER_EVENT_CAP = 150000


class RunError(Exception):
    pass


def wait_line(f, pattern, proc, timeout, what):
    """Poll file f (opened for reading) for a line matching pattern."""
    buf = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = f.read()
        if chunk:
            buf += chunk
            m = re.search(pattern, buf, re.M)
            if m:
                return m, buf
        elif proc.poll() is not None:
            raise RunError("%s exited (%s) before '%s': %s" % (what, proc.returncode, pattern, buf.strip()[-300:]))
        else:
            time.sleep(0.01)
    raise RunError("no '%s' from %s after %ds" % (pattern, what, timeout))


def kill(proc):
    if proc and proc.poll() is None:
        proc.kill()
        proc.wait()


def run_once(py, workload, iters, mode, args, tmp):
    """One run; returns dict(us_per_iter, and for tbpf: attach, calls)."""
    cmd = [py, os.path.join(WL, workload + ".py"), "--iters", str(iters)]
    if mode.startswith("torch.profiler"):
        cmd.append("--torch-profiler")
        if "record_shapes" in mode:
            cmd.append("--record-shapes")
        if "profile_memory" in mode:
            cmd.append("--torch-profile-memory")
        if "with_stack" in mode:
            cmd.append("--with-stack")
    wl_out = open(os.path.join(tmp, "wl.out"), "w+")
    wl_err = open(os.path.join(tmp, "wl.err"), "w+")
    wl = subprocess.Popen(cmd, stdout=wl_out, stderr=wl_err, stdin=subprocess.DEVNULL)
    tb = None
    res = {}
    try:
        with open(wl_out.name) as r:
            wait_line(r, r"^READY", wl, 300, workload)
        if mode.startswith("tbpf"):
            tcmd = [args.tbpf, "--pid", str(wl.pid), "--format", "json", "--duration", "3600s"]
            tcmd.extend(x for x in mode.split()[1:] if x != "@old")   # "--exits=auto", "--no-python" ...
            env = dict(os.environ)
            if "@old" in mode.split():   # --old-agent's row
                env["TBPF_INPROC_PATH"] = args.old_agent
            tb_out = open(os.path.join(tmp, "tb.out"), "w+")
            tb_err = open(os.path.join(tmp, "tb.err"), "w+")
            t0 = time.monotonic()
            tb = subprocess.Popen(tcmd, stdout=tb_out, stderr=tb_err, stdin=subprocess.DEVNULL, env=env)
            with open(tb_err.name) as r:
                m, text = wait_line(r, r"^tbpf: attached.*$", tb, 60, "tbpf")
            res["attach_wall_ms"] = (time.monotonic() - t0) * 1e3
            line = m.group(0)
            ms = re.search(r"(\d+(?:\.\d+)?)\s*ms", line)
            res["attach_ms"] = float(ms.group(1)) if ms else None
            pr = re.search(r"(\d+)\s+probes", line)
            res["probes"] = int(pr.group(1)) if pr else None
        wl.send_signal(signal.SIGUSR1)
        if wl.wait(timeout=3600) != 0:
            raise RunError("%s exited %d: %s" % (workload, wl.returncode, open(wl_err.name).read()[-300:]))
        with open(wl_out.name) as r:
            m = re.search(r"^RESULT .*", r.read(), re.M)
        if not m:
            raise RunError("%s printed no RESULT" % workload)
        kv = dict(x.split("=", 1) for x in m.group(0).split()[1:])
        res["us_per_iter"] = float(kv["seconds"]) / int(kv["iters"]) * 1e6
        if "cpu_us_per_iter" in kv:   # the workload process's CPU time (all its threads)
            res["cpu_us_per_iter"] = float(kv["cpu_us_per_iter"])
        if tb is not None:
            rc, cpu = wait_rusage(tb, 60)
            if rc is None:
                raise RunError("tbpf did not exit within 60 s of its target")
            res["tbpf_cpu_s"] = cpu
            if rc != 0:
                raise RunError("tbpf exited %d: %s" % (rc, open(tb_err.name).read().strip()[-300:]))
            if "table" in mode.split():   # the default output: its "# of Calls" column
                res["calls"] = table_calls(open(tb_out.name).read())
                res["dropped"] = None
                return res
            try:
                doc = json.load(open(tb_out.name))
                res["calls"] = sum(o["calls"] for o in doc["ops"]
                                  if o.get("pid") == wl.pid and o["name"] != "[memory]")
                res["dropped"] = doc["run"].get("events_dropped", 0)
                if res.get("probes") is None:
                    res["probes"] = doc["run"].get("probes_attached")
            except (ValueError, KeyError, TypeError) as e:
                res["calls"] = None
                res["json_error"] = str(e)
        return res
    finally:
        kill(wl)
        kill(tb)


def table_calls(text):
    """The sum of the "# of Calls" column of torch.profiler's table (one
    process: the rows end in their call count; header and total do not)."""
    n = 0
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 7 and f[-1].isdigit() and not line.lstrip().startswith("-"):
            n += int(f[-1])
    return n


def wait_rusage(proc, timeout):
    """Reap proc (a Popen) within timeout s: (exit status, its user + system
    CPU seconds), (None, None) on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime
        time.sleep(0.01)
    return None, None


def count_ops(py, workload):
    out = subprocess.run([py, os.path.join(WL, workload + ".py"), "--count-ops", "--iters", "20"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RunError("%s --count-ops failed: %s" % (workload, out.stderr[-300:]))
    return json.loads(out.stdout)["ops_per_iter"]


def calibrate(py, workload, target_s):
    cal_iters, min_iters = WORKLOADS[workload]
    out = subprocess.run([py, os.path.join(WL, workload + ".py"), "--no-wait", "--iters", str(cal_iters)],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    m = re.search(r"seconds=([\d.]+)", out.stdout)
    if out.returncode != 0 or not m:
        raise RunError("%s calibration failed: %s" % (workload, out.stderr[-300:]))
    per_iter = float(m.group(1)) / cal_iters
    return max(min_iters, int(target_s / per_iter))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec="%.1f"):
    return "n/a" if x is None else spec % x


def torch_version(py):
    out = subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--python", action="append", help="interpreter(s) to run (default: PY1 and PY2)")
    p.add_argument("--workloads", help="default: dispatch_bound,compute_bound,transformer_step "
                   "(--wall: dispatch_bound,transformer_step)")
    p.add_argument("--exits", default="", help="comma list of tbpf --exits modes (auto,return,infer), each optionally followed by "
                   "more tbpf options (\"auto --no-python\"); "
                                               "default: tbpf's default mode only")
    p.add_argument("--inproc", action="store_true",
                   help="also a `tbpf --inproc --no-python` row (in-process RecordFunction callbacks; "
                        "no Python stacks, as torch.profiler without with_stack)")
    p.add_argument("--stacks", action="store_true",
                   help="with --inproc: also `tbpf --inproc` with Python stacks and the layer tree, and "
                        "torch.profiler with_stack=True")
    p.add_argument("--no-profiler", action="store_true", help="skip the torch.profiler rows")
    p.add_argument("--no-uprobe", action="store_true",
                   help="with --inproc: no uprobe-mode row (the --exits modes)")
    p.add_argument("--shapes", action="store_true",
                   help="input shapes too: each tbpf mode again with --record-shapes, "
                        "torch.profiler again with record_shapes=True")
    p.add_argument("--memory", action="store_true",
                   help="add tbpf --profile-memory and torch.profiler profile_memory=True rows")
    p.add_argument("--target-seconds", type=float, default=1.5, help="baseline length of one run")
    p.add_argument("--tbpf", default=os.path.join(ROOT, "build", "tbpf"))
    p.add_argument("--out", help="default: bench/results.md (--wall: bench/results_wall.md)")
    p.add_argument("--old-agent", metavar="PATH",
                   help="one more row, `tbpf --inproc --no-python @old`: another build of the in-process "
                        "agent (given to tbpf as $TBPF_INPROC_PATH; the file must be named "
                        "libtbpf_inproc.so), interleaved with this tree's (default --out: "
                        "bench/results_inproc_agents.md)")
    p.add_argument("--wall", action="store_true",
                   help="instead: the whole job's process wall time, unprofiled, under torch.profiler "
                        "(its table printed), `tbpf run --inproc` and `tbpf run` (bench/wall.py)")
    p.add_argument("--wall-ops", type=int, default=760000,
                   help="with --wall: the job's length in aten ops (default 760000: 8,000 "
                        "dispatch-bound iterations)")
    p.add_argument("--wall-mode", action="append", default=[],
                   help="with --wall: one more tbpf row, e.g. \"tbpf run --inproc --no-cuda\" (repeatable)")
    args = p.parse_args()
    if not args.workloads:
        args.workloads = ("dispatch_bound,transformer_step" if args.wall
                          else "dispatch_bound,compute_bound,transformer_step")
    if not args.out:
        args.out = os.path.join(ROOT, "bench", "results_wall.md" if args.wall else
                                "results_inproc_agents.md" if args.old_agent else "results.md")

    pys = args.python or [x for x in (PY1, PY2) if os.path.exists(x)]
    # "tbpf --format table": `tbpf --pid N` as a user runs it, no recorder
    # named (in-process where the torch build verifies, and the table
    # needs no Python stacks); "tbpf --uprobes": the uprobe recorder
    # forced, its JSON (Python stacks, the layer tree)
    tb_modes = ["tbpf --format table"] + (
        ["tbpf --uprobes --exits=%s" % m for m in args.exits.split(",") if m] or ["tbpf --uprobes"])
    if args.inproc and args.no_uprobe:
        tb_modes = []
    if args.inproc:
        # --format json takes stacks and the layer tree; torch.profiler's
        # default records neither: the fair row asks for none
        tb_modes.append("tbpf --inproc --no-python")
        if args.stacks:
            tb_modes.append("tbpf --inproc")
    if args.old_agent:
        tb_modes.append("tbpf --inproc --no-python @old")
    if not (os.path.exists(args.tbpf) and os.access(args.tbpf, os.X_OK)):
        print("bench: %s not built (run make): tbpf rows will read n/a" % args.tbpf, file=sys.stderr)
    if os.geteuid() != 0:
        print("bench: not root: tbpf rows will fail to attach (run with sudo)", file=sys.stderr)
    if args.wall:
        return write(args, *wall.main_wall(args, pys, jobs, count_ops, header(
            "# tbpf benchmark: process wall time (bench.py --wall)", args.reps,
            "process wall time, start to exit, as measured by bench.py")))
    if args.shapes:
        tb_modes += [m + " --record-shapes" for m in tb_modes]
    prof_modes = (["torch.profiler"] + (["torch.profiler record_shapes"] if args.shapes else []) +
                  (["torch.profiler with_stack"] if args.stacks else []))
    modes = ["baseline"] + tb_modes + ([] if args.no_profiler else prof_modes)
    if args.memory:
        modes += ["tbpf --profile-memory"] + ([] if args.no_profiler else
                                              ["torch.profiler profile_memory=True"])

    rows, attach_rows, failures = [], [], []
    tmp = tempfile.mkdtemp(prefix="tbpf-bench.")
    for py, tv, workload, (ops, iters) in jobs(
            pys, args.workloads, failures,
            lambda py, w: (count_ops(py, w), calibrate(py, w, args.target_seconds))):
        prof_iters = max(WORKLOADS[workload][1] // 5, min(iters, int(PROFILER_EVENT_CAP / ops)))
        results = {m: [] for m in modes}
        errors = {}
        print("bench: torch %s %s: %d iters (%d under torch.profiler), %.0f ops/iter, %d reps"
              % (tv, workload, iters, prof_iters, ops, args.reps), file=sys.stderr)
        for rep in range(args.reps):
            order = modes[rep % len(modes):] + modes[:rep % len(modes)]
            for m in order:
                if m in errors and not results[m]:
                    continue  # failed before: do not retry every rep
                try:
                    n = prof_iters if m.startswith("torch.profiler") else iters
                    results[m].append(run_once(py, workload, n, m, args, tmp))
                except RunError as e:
                    errors.setdefault(m, str(e))
                    print("bench: %s: %s" % (m, e), file=sys.stderr)
        base = med([r["us_per_iter"] for r in results["baseline"]])
        base_cpu = med([r.get("cpu_us_per_iter") for r in results["baseline"]])
        for m in modes:
            rs = results[m]
            t = med([r["us_per_iter"] for r in rs])
            lo = min((r["us_per_iter"] for r in rs), default=None)
            hi = max((r["us_per_iter"] for r in rs), default=None)
            row = {"torch": tv, "workload": workload, "mode": m, "ops": ops, "n": len(rs),
                   "t": t, "lo": lo, "hi": hi,
                   "slow": t / base if (t and base) else None,
                   "per_op": (t - base) / ops if (t and base and m != "baseline") else None,
                   "per_op_cpu": None,
                   "err": errors.get(m) if not rs else None}
            cpu = med([r.get("cpu_us_per_iter") for r in rs])
            if cpu is not None and base_cpu is not None and m != "baseline":
                row["per_op_cpu"] = (cpu - base_cpu) / ops
            if m.startswith("tbpf") and rs:
                calls = med([r.get("calls") for r in rs])
                row["tbpf_ops"] = calls / iters if calls else None
                row["dropped"] = max((r.get("dropped") or 0) for r in rs)
                row["tbpf_cpu"] = med([r.get("tbpf_cpu_s") for r in rs])
                attach_rows.append({"torch": tv, "workload": workload, "mode": m,
                                    "attach": med([r.get("attach_ms") for r in rs]),
                                    "wall": med([r.get("attach_wall_ms") for r in rs]),
                                    "probes": med([r.get("probes") for r in rs]),
                                    "cpu": row["tbpf_cpu"], "wl_s": t * iters / 1e6 if t else None})
            if m.startswith("tbpf") and not rs:
                failures.append("torch %s %s %s: %s" % (tv, workload, m, errors.get(m)))
            rows.append(row)

    md = header("# tbpf benchmark", args.reps, "time per iteration as measured by the workload") + [
          "",
          "| torch | workload | mode | us/iter | slowdown | per-op overhead (us) | per-op CPU (us) | ops/iter (profiler / tbpf) |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["err"]:
            md.append("| %s | %s | %s | n/a: %s | | | | |" % (r["torch"], r["workload"], r["mode"],
                                                          r["err"].replace("|", "/")[:120]))
            continue
        md.append("| %s | %s | %s | %s (%s-%s) | %s | %s | %s | %s / %s |" % (
            r["torch"], r["workload"], r["mode"], fmt(r["t"]), fmt(r["lo"]), fmt(r["hi"]),
            fmt(r["slow"], "%.2fx"), fmt(r["per_op"], "%.2f"), fmt(r["per_op_cpu"], "%.2f"),
            fmt(r["ops"], "%.0f"),
            fmt(r.get("tbpf_ops"), "%.0f") if r["mode"].startswith("tbpf") else "-"))
    if attach_rows:
        md += ["", "| torch | workload | mode | attach (tbpf's report, ms) | start to attached (wall, ms) | probes "
               "| tbpf's own CPU (s) / job's timed loop (s) |",
               "|---|---|---|---|---|---|---|"]
        for a in attach_rows:
            md.append("| %s | %s | %s | %s | %s | %s | %s / %s |" % (
                a["torch"], a["workload"], a["mode"], fmt(a["attach"]), fmt(a["wall"], "%.0f"),
                fmt(a["probes"], "%.0f"), fmt(a["cpu"], "%.2f"), fmt(a["wl_s"], "%.2f")))
    md += ["", "Per-op overhead = (us/iter - baseline us/iter) / ATen ops per iteration "
           "(torch.profiler's count of aten:: calls at all nesting levels); per-op CPU: the same from "
           "the workload process's CPU time (steadier on a shared machine; tbpf's own reader, a "
           "separate process, is not in it). torch.profiler rows "
           "run fewer iterations (its post-processing, excluded from the time, is slow) and "
           "exclude the time the profiler takes to stop."]
    if failures:
        md += ["", "**Not measured:**", ""] + ["- %s" % f for f in failures]
    return write(args, md, 1 if failures else 0)


def jobs(pys, workloads, failures, prepare):
    """(python, torch version, workload, prepare(python, workload)) for each
    interpreter and workload; what cannot run goes to failures."""
    for py in pys:
        tv = torch_version(py)
        if not tv:
            failures.append("%s cannot import torch" % py)
            continue
        for workload in workloads.split(","):
            try:
                prep = prepare(py, workload)
            except RunError as e:
                failures.append("torch %s %s: %s" % (tv, workload, e))
                continue
            yield py, tv, workload, prep


def header(title, reps, what):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = " ".join(a if re.fullmatch(r"[\w./,=:+-]+", a) else "'%s'" % a for a in sys.argv[1:])
    return [title, "", "%s; `bench/bench.py %s`; kernel %s; %s, %d CPUs; %d repetitions per row, "
            "medians (min-max); %s." % (now, cmd, platform.release(), cpu_model(), os.cpu_count(), reps, what)]


def write(args, md, status):
    text = "\n".join(md) + "\n"
    sys.stdout.write(text)
    with open(args.out, "w") as f:
        f.write(text)
    print("bench: wrote %s" % args.out, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
