#!/usr/bin/env python3
"""memory.py - tbpf's own memory while it profiles a job (issue 19, part 4).

For each torch (PY1 = Debian 1.13, PY2 = the 2.x venv) and each case below,
R repetitions, in rotating order: start the workload (it warms up, prints
READY and waits), start it, attach `tbpf --pid PID --duration D` and sample
tbpf's /proc/PID/status (VmHWM: the peak of raw RSS, which counts the record
ring's data pages twice since the kernel maps them twice) and
/proc/PID/smaps_rollup (Rss, Pss: Pss counts a page mapped twice once, and
shared libraries by share) every 20 ms until tbpf exits.  Reports medians
(min-max) in MB to stdout and bench/results_tbpf_memory.md.  Exit 1 when a
run failed.

    sudo bench/memory.py                      # 3 reps, 4 s, both torches
    sudo bench/memory.py --reps 5 --duration 40s --workload transformer_step
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TBPF = os.path.join(ROOT, "build", "tbpf")
PY1 = os.environ.get("PY1", "/usr/bin/python3")
PY2 = os.environ.get("PY2", "/var/cache/tbpf/venv-torch2/bin/python")
TORCH = {PY1: "PY1 (Debian 1.13)", PY2: "PY2 (venv 2.x)"}
CASES = {
    "table": ["--format", "table"],
    "tree": ["--format", "tree"],
    "chrome --record-shapes --profile-memory": ["--format", "chrome", "--record-shapes",
                                                "--profile-memory"],
    "--inproc tree": ["--format", "tree", "--inproc"],
}


def kb_fields(path, names):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k = line.split(":", 1)[0]
                if k in names:
                    out[k] = int(line.split()[1])
    except OSError:
        pass
    return out


def one_run(py, workload, case, duration, tmp):
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    wl = subprocess.Popen([py, os.path.join(ROOT, "tests", "workloads", workload + ".py"),
                           "--iters", "100000000", "--go-file", go],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = wl.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError("%s %s: workload did not start" % (py, workload))
        open(go, "w").close()
        out = os.path.join(tmp, "out")
        err = open(os.path.join(tmp, "err"), "w+")
        tb = subprocess.Popen([TBPF, "--pid", str(wl.pid), "--duration", duration, "-o", out]
                              + CASES[case], stdout=subprocess.DEVNULL, stderr=err)
        hwm = rss = pss = 0
        while tb.poll() is None:
            st = kb_fields("/proc/%d/status" % tb.pid, ("VmHWM",))
            ro = kb_fields("/proc/%d/smaps_rollup" % tb.pid, ("Rss", "Pss"))
            hwm = max(hwm, st.get("VmHWM", 0))
            rss = max(rss, ro.get("Rss", 0))
            pss = max(pss, ro.get("Pss", 0))
            time.sleep(0.02)
        err.seek(0)
        text = err.read()
        if tb.returncode != 0:
            raise RuntimeError("tbpf %s exited %d: %s" % (case, tb.returncode, text.strip()[-300:]))
        drops = [l for l in text.splitlines() if "dropped" in l]
        return hwm / 1024.0, rss / 1024.0, pss / 1024.0, drops
    finally:
        wl.kill()
        wl.wait()


def fmt(xs):
    return "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", default="4s")
    ap.add_argument("--workload", default="dispatch_bound")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results_tbpf_memory.md"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("memory.py: run as root (tbpf attaches BPF uprobes)")
    cases = [c for c in a.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            sys.exit("memory.py: unknown case %r (known: %s)" % (c, ", ".join(CASES)))
    res = {}
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for i, c in enumerate(cases):           # rotate the order per repetition
                c = cases[(i + rep) % len(cases)]
                for py in (PY1, PY2):
                    try:
                        h, r, p, drops = one_run(py, a.workload, c, a.duration, tmp)
                    except RuntimeError as e:
                        failed.append(str(e))
                        print("memory.py: %s" % e, file=sys.stderr)
                        continue
                    d = res.setdefault((py, c), {"hwm": [], "rss": [], "pss": [], "drops": 0})
                    d["hwm"].append(h)
                    d["rss"].append(r)
                    d["pss"].append(p)
                    d["drops"] += len(drops)
                    print("rep %d %s %s: VmHWM %.1f MB, Pss peak %.1f MB%s" %
                          (rep + 1, os.path.basename(py), c, h, p, " DROPS" if drops else ""),
                          file=sys.stderr)
    lines = ["# tbpf's own memory", "",
             "%s UTC; `bench/memory.py --reps %d --duration %s --workload %s`; MB, medians (min-max)."
             % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), a.reps, a.duration,
                a.workload), "",
             "| torch | case | VmHWM (raw RSS peak) | Rss peak | Pss peak | runs with drops |",
             "|---|---|---|---|---|---|"]
    for (py, c), d in sorted(res.items()):
        lines.append("| %s | %s | %s | %s | %s | %d |" % (TORCH.get(py, py), c, fmt(d["hwm"]), fmt(d["rss"]),
                                                         fmt(d["pss"]), d["drops"]))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(a.out, "w") as f:
        f.write(text)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
