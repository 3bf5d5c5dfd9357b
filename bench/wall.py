"""wall.py - bench.py --wall: the whole job's process wall time, profiled four ways.

The goal: "process wall time, tbpf's report included, at most one
fifth of torch.profiler's".  Per torch and workload, R repetitions, the
modes in rotating order within each repetition, of one whole job
(bench/wall_job.py: `import torch`, build the workload, warm-up, N
iterations, exit), timed from starting the command to its exit:
  unprofiled       python wall_job.py W --iters N
  torch.profiler   the same with torch.profiler's recipe inside: profile()
                   around the whole work, then
                   print(prof.key_averages().table(sort_by="self_cpu_time_total"))
                   - its post-processing and table included
  tbpf run --inproc
                   tbpf run --inproc -- python wall_job.py ...: until tbpf has
                   printed its table and exited
  tbpf run         the same in tbpf's default (uprobe) mode
N: --wall-ops aten ops (torch.profiler's count per iteration), default
760,000 (8,000 iterations of the dispatch-bound
step).  Two readings of "one fifth", both reported per repetition
(the modes of one repetition ran back to back) and from the medians:
  literal    tbpf's wall time <= 1/5 of torch.profiler's wall time
  overhead   (tbpf - unprofiled) <= 1/5 (torch.profiler - unprofiled)
"""
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "wall_job.py")
# "tbpf run": no recorder named (the in-process one where the build
# verifies); "tbpf run --uprobes": the uprobe recorder
MODES = ["unprofiled", "torch.profiler", "tbpf run --inproc", "tbpf run", "tbpf run --uprobes"]
# An op whose calls the whole job makes a known number of times: the
# report's "# of Calls" of it is checked (iters + warm-up iterations).
CHECK_OP = {"dispatch_bound": ("aten::add", 5), "transformer_step": ("aten::embedding", 1),
            "compute_bound": ("aten::mm", None)}
WARMUP = 3


class WallError(Exception):
    pass


def calls_in_table(text, op):
    """'# of Calls' (the last column) of op's row in a torch.profiler-style table."""
    m = re.search(r"^\s*%s\s.*?(\d+)\s*$" % re.escape(op), text, re.M)
    return int(m.group(1)) if m else None


def wall_once(py, workload, iters, mode, tbpf, tmp):
    job = [py, JOB, workload, "--iters", str(iters), "--warmup", str(WARMUP)]
    if mode == "torch.profiler":
        cmd = job + ["--torch-profiler"]
    elif mode.startswith("tbpf"):
        cmd = [tbpf] + mode.split()[1:] + ["--"] + job
    else:
        cmd = job
    out = open(os.path.join(tmp, "wall.out"), "w+")
    err = open(os.path.join(tmp, "wall.err"), "w+")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    text = open(out.name).read()
    if p.returncode != 0:
        raise WallError("%s exited %d: %s" % (mode, p.returncode, open(err.name).read().strip()[-300:]))
    m = re.search(r"^RESULT (.*)$", text, re.M)
    if not m:
        raise WallError("%s: the job printed no RESULT" % mode)
    kv = dict(x.split("=", 1) for x in m.group(1).split())
    op, per_iter = CHECK_OP.get(workload, (None, None))
    res = {"wall": wall, "loop": float(kv["loop_s"]), "report": float(kv["report_s"]),
           "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024.0,
           "calls": calls_in_table(text, op) if op and mode != "unprofiled" else None,
           "expect": per_iter * (iters + WARMUP) if per_iter else None}
    return res


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def rng(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def f(x, spec="%.2f"):
    return "n/a" if x is None else spec % x


def run_workload(py, tv, workload, iters, ops, modes, reps, tbpf, tmp, log):
    """R rotating repetitions; returns (rows, verdicts, failures)."""
    runs = {m: [None] * reps for m in modes}
    errors = {}
    for rep in range(reps):
        for m in modes[rep % len(modes):] + modes[:rep % len(modes)]:
            if m in errors:
                continue
            try:
                runs[m][rep] = wall_once(py, workload, iters, m, tbpf, tmp)
                log("bench: wall %s %s rep %d %s: %.2f s" % (tv, workload, rep + 1, m, runs[m][rep]["wall"]))
            except WallError as e:
                errors[m] = str(e)
                log("bench: wall %s" % e)
    base = med([r["wall"] for r in runs["unprofiled"] if r])
    rows = []
    for m in modes:
        rs = [r for r in runs[m] if r]
        if not rs:
            rows.append({"torch": tv, "workload": workload, "mode": m, "err": errors.get(m, "no run")})
            continue
        w = med([r["wall"] for r in rs])
        rows.append({"torch": tv, "workload": workload, "mode": m, "n": len(rs), "wall": w,
                     "range": rng([r["wall"] for r in rs]),
                     "x": w / base if base else None, "over": w - base if base else None,
                     "loop": med([r["loop"] for r in rs]), "report": med([r["report"] for r in rs]),
                     "cpu": med([r["cpu"] for r in rs]), "rss": med([r["rss_mb"] for r in rs]),
                     "calls": sorted(set(r["calls"] for r in rs if r["calls"] is not None)),
                     "expect": rs[0]["expect"]})
    verdicts = []
    for m in modes:
        if not m.startswith("tbpf"):
            continue
        lit, ovh = [], []
        for rep in range(reps):
            t, p, u = runs[m][rep], runs["torch.profiler"][rep], runs["unprofiled"][rep]
            if t and p:
                lit.append(t["wall"] / p["wall"])
            if t and p and u and p["wall"] > u["wall"]:
                ovh.append((t["wall"] - u["wall"]) / (p["wall"] - u["wall"]))
        wm = {r["mode"]: r.get("wall") for r in rows}
        lit_med = wm[m] / wm["torch.profiler"] if wm.get(m) and wm.get("torch.profiler") else None
        ovh_med = ((wm[m] - base) / (wm["torch.profiler"] - base)
                   if wm.get(m) and wm.get("torch.profiler") and base else None)
        verdicts.append({"torch": tv, "workload": workload, "mode": m, "lit": lit_med, "lit_r": rng(lit),
                         "ovh": ovh_med, "ovh_r": rng(ovh), "n": len(lit)})
    fails = ["torch %s %s %s: %s" % (tv, workload, m, e) for m, e in errors.items()]
    return rows, verdicts, fails


def met(x, r):
    """'yes' when the median and every repetition are <= 0.2, 'median only'
    when the median is, 'no' otherwise."""
    if x is None:
        return "n/a"
    if x <= 0.2:
        return "yes" if r[1] is not None and r[1] <= 0.2 else "median only"
    return "no"


def markdown(rows, verdicts, failures, head):
    md = head + ["",
                 "| torch | workload (iterations, aten ops) | mode | process wall time, s | x unprofiled "
                 "| above unprofiled, s | timed loop, s | report, s | CPU, s | peak RSS, MB | check |",
                 "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "err" in r:
            md.append("| %s | %s | %s | n/a: %s | | | | | | | |" % (r["torch"], r["wl"], r["mode"],
                                                                r["err"].replace("|", "/")[:160]))
            continue
        chk = "-"
        if r["calls"] or r["mode"] != "unprofiled":
            op = CHECK_OP.get(r["workload"], ("?",))[0]
            got = "/".join(str(c) for c in r["calls"]) or "none"
            chk = "%s %s (%s)" % (op, got, "ok" if r["calls"] == [r["expect"]] else "expected %s" % r["expect"])
        md.append("| %s | %s | %s | %s (%s-%s) | %s | %s | %s | %s | %s | %.0f | %s |" % (
            r["torch"], r["wl"], r["mode"], f(r["wall"]), f(r["range"][0]), f(r["range"][1]),
            f(r["x"], "%.2fx"), f(r["over"]), f(r["loop"]),
            f(r["report"]) if r["mode"] == "torch.profiler" else "-", f(r["cpu"]), r["rss"], chk))
    md += ["", "Goal: tbpf's process wall time, its report included, at most one fifth of torch.profiler's. "
           "Literal: tbpf / torch.profiler <= 0.20; overhead: (tbpf - unprofiled) / (torch.profiler - "
           "unprofiled) <= 0.20. Ratio of the medians, (range over the repetitions, each ratio taken "
           "within one repetition); met: yes = the median and every repetition, median only, no.", "",
           "| torch | workload | mode | literal ratio | met | overhead ratio | met |",
           "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        md.append("| %s | %s | %s | %s (%s-%s) | %s | %s (%s-%s) | %s |" % (
            v["torch"], v["workload"], v["mode"], f(v["lit"], "%.3f"), f(v["lit_r"][0], "%.3f"),
            f(v["lit_r"][1], "%.3f"), met(v["lit"], v["lit_r"]), f(v["ovh"], "%.3f"),
            f(v["ovh_r"][0], "%.3f"), f(v["ovh_r"][1], "%.3f"), met(v["ovh"], v["ovh_r"])))
    md += ["", "Process wall time: from starting the command (`python bench/wall_job.py W`, or `tbpf run "
           "[--inproc] -- python ...`) to its exit, `import torch` and building the model included; "
           "torch.profiler's row includes its post-processing and printing "
           "`key_averages().table(sort_by=\"self_cpu_time_total\", row_limit=100)`, tbpf's rows its "
           "attach and its table (default options: `tbpf run` takes Python stacks, `--inproc` with the "
           "table does not). Timed loop: the job's iterations alone, as the job measured them. CPU and "
           "peak RSS: wait4() of the command (tbpf's rows: tbpf and the job, the larger RSS). Check: the "
           "report's `# of Calls` of one op against the calls the job makes."]
    if failures:
        md += ["", "**Not measured:**", ""] + ["- %s" % x for x in failures]
    return md


def main_wall(args, pys, jobs, count_ops, head):
    """bench.py --wall; returns (markdown lines, exit status)."""
    import tempfile
    modes = [m for m in MODES if not (args.no_uprobe and m == "tbpf run --uprobes")]
    for m in args.wall_mode:
        if not m.startswith("tbpf run"):
            sys.exit("bench: --wall-mode %r: a tbpf row starts with \"tbpf run\"" % m)
        modes.append(m)
    if args.no_profiler:
        sys.exit("bench: --wall needs torch.profiler's row (the goal is against it)")
    tmp = tempfile.mkdtemp(prefix="tbpf-bench-wall.")
    rows, verdicts, failures = [], [], []
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    for py, tv, workload, ops in jobs(pys, args.workloads, failures, count_ops):
        iters = max(1, int(round(args.wall_ops / ops)))
        log("bench: wall torch %s %s: %d iterations (%.0f aten ops each, %d in all), %d reps"
            % (tv, workload, iters, ops, iters * ops, args.reps))
        r, v, fl = run_workload(py, tv, workload, iters, ops, modes, args.reps, args.tbpf, tmp, log)
        for x in r:
            x["wl"] = "%s (%d, %.0fk)" % (workload, iters, iters * ops / 1e3)
        rows += r
        verdicts += v
        failures += fl
    return markdown(rows, verdicts, failures, head), (1 if failures else 0)
