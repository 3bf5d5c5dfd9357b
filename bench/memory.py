#!/usr/bin/env python3
"""memory.py - tbpf's own memory while it profiles a job.

For each torch (PY1 = Debian 1.13, PY2 = the 2.x venv), each job length
(--lengths 1,4: --duration times 1 and 4) and each case below, R
repetitions, in rotating order: start the job, start tbpf on it (attach
cases: `tbpf --pid PID --duration D`; run cases: `tbpf run -- JOB` with
as many iterations as take about D; daemon cases: `tbpf daemon --pid PID
--duration D`, /metrics scraped every second), and sample every 20 ms
until tbpf exits:
  user space   /proc/PID/status VmHWM (the peak of raw RSS, which counts
               the record ring's data pages twice since the kernel maps
               them twice) and RssAnon (tbpf's heap: what would grow
               with a leak), /proc/PID/smaps_rollup Rss and Pss (Pss
               counts a page mapped twice once, and shared libraries by
               share);
  kernel       the BPF maps tbpf holds (/proc/PID/fdinfo: the memlock
               bpftool map show prints as bytes_memlock), summed, and the
               same for a 64-CPU host, computed from each map's layout
               (kmem64 below); the growth of the machine's per-CPU
               allocations (/proc/meminfo Percpu) from before tbpf.
The "fake GPU" job is tests/workloads/fake_gpu_model.py on the fake CUDA
driver and CUPTI (tests/native/cupti/fake_cuda.c, FAKE_CUPTI_LAUNCHES=1:
a device record per launch), a tight loop of ~100,000 launches/s, or with
test_daemon_inproc_cuda.sh's 2 ms pause per iteration.  Reports medians
(min-max) in MB to stdout and bench/results_tbpf_memory.md.  Exit 1 when
a run failed.  --lock PATH holds that lock (flock) for each run only.

    sudo bench/memory.py                      # 3 reps, 4 s, both torches
    sudo bench/memory.py --reps 1 --duration 10s --lengths 1,4 --lock /tmp/tbpf-e2e.lock
    sudo bench/memory.py --cases 'daemon --inproc --inject (fake GPU)' --python /usr/bin/python3
"""
import argparse
import datetime
import fcntl
import glob
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TBPF = os.path.join(ROOT, "build", "tbpf")
WL = os.path.join(ROOT, "tests", "workloads")
FAKE = os.path.join(ROOT, "build", "tests", "native", "cupti", "fakecuda")
PY1 = os.environ.get("PY1", "/usr/bin/python3")
PY2 = os.environ.get("PY2", "/var/cache/tbpf/venv-torch2/bin/python")
TORCH = {PY1: "PY1 (Debian 1.13)", PY2: "PY2 (venv 2.x)"}
# name: (kind, tbpf options, job); "{cap}" is a capture file in the run's folder
CASES = {
    "table": ("attach", ["--format", "table"], "cpu"),
    "tree": ("attach", ["--format", "tree"], "cpu"),
    "chrome --record-shapes --profile-memory": ("attach", ["--format", "chrome", "--record-shapes",
                                                           "--profile-memory"], "cpu"),
    "--record": ("attach", ["--record", "{cap}"], "cpu"),
    "--inproc tree": ("attach", ["--format", "tree", "--inproc"], "cpu"),
    "--inproc --record": ("attach", ["--inproc", "--record", "{cap}"], "cpu"),
    "--inject (fake GPU)": ("attach", ["--inject"], "gpu"),
    "--inproc --inject (fake GPU)": ("attach", ["--inproc", "--inject"], "gpu"),
    "run": ("run", [], "cpu"),
    "run --inproc": ("run", ["--inproc"], "cpu"),
    "daemon": ("daemon", [], "cpu"),
    "daemon (fake GPU)": ("daemon", [], "gpu"),
    "daemon --inproc": ("daemon", ["--inproc"], "cpu"),
    "daemon --inproc --inject (fake GPU)": ("daemon", ["--inproc", "--inject"], "gpu"),
    "daemon --inproc --inject (fake GPU 2 ms pause)": ("daemon", ["--inproc", "--inject"], "gpu2ms"),
}
# tbpf run: dispatch-bound iterations per second of job (uprobes, --inproc;
# another --workload runs longer)
RUN_ITERS_PER_S = {"run": 5000, "run --inproc": 18000}
# tests/e2e/lib/fake_gpu_lib.sh's job parameters
FAKE_ARGS = ["--conv", "3", "--gc", "2", "--head", "2", "--gh", "5", "--copy", "4096", "--stepk", "1",
             "--gs", "3", "--norm", "2", "--gn", "4", "--outk", "1", "--go", "7"]
KERNEL_CPUS = 64
WORKLOAD = "dispatch_bound"   # --workload: the CPU job


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


def possible_cpus():
    n = 0
    for part in open("/sys/devices/system/cpu/possible").read().strip().split(","):
        a, _, b = part.partition("-")
        n += int(b or a) - int(a) + 1
    return n


def held_maps(pid):
    """map id -> its fdinfo fields, for the BPF maps pid holds."""
    maps = {}
    for p in glob.glob("/proc/%d/fdinfo/*" % pid):
        try:
            text = open(p).read()
        except OSError:
            continue
        if "map_id:" not in text:
            continue
        f = dict(l.split(":", 1) for l in text.splitlines() if ":" in l)
        f = {k.strip(): v.strip() for k, v in f.items()}
        maps[int(f["map_id"])] = f
    return maps


def map_entries(map_id):
    """Entries in a run-time allocated per-CPU hash (bpftool map dump)."""
    r = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(map_id)],
                       capture_output=True, text=True)
    try:
        return len(json.loads(r.stdout))
    except ValueError:
        return 0


def per_cpu_bytes(f, entries):
    """The bytes of a map that the kernel allocates once per possible CPU
    (kernel/bpf/hashtab.c htab_map_mem_usage, arraymap.c): per-CPU maps'
    values; a preallocated hash map's spare element and its pointer."""
    t, v, k = int(f["map_type"]), int(f["value_size"]), int(f["key_size"])
    n, prealloc = int(f["max_entries"]), not int(f["map_flags"], 16) & 1
    r8 = lambda x: (x + 7) & ~7
    if t == 6:                                   # BPF_MAP_TYPE_PERCPU_ARRAY
        return r8(v) * n
    if t == 5:                                   # BPF_MAP_TYPE_PERCPU_HASH
        return r8(v) * (n if prealloc else entries) + (0 if prealloc else 8)
    if t == 1 and prealloc:                      # BPF_MAP_TYPE_HASH
        return 48 + r8(k) + r8(v) + 8
    return 0


def kernel_maps(pid, counts):
    """(memlock now, memlock on a KERNEL_CPUS host) of pid's maps; counts:
    map id -> entries of the run-time allocated per-CPU hashes."""
    now = cpus = 0
    for mid, f in held_maps(pid).items():
        now += int(f.get("memlock", 0))
        cpus += per_cpu_bytes(f, counts.get(mid, 0))
    return now, now + (KERNEL_CPUS - possible_cpus()) * cpus


def count_entries(pid):
    return {mid: map_entries(mid) for mid, f in held_maps(pid).items()
            if f["map_type"] == "5" and int(f["map_flags"], 16) & 1}


def job_cmd(py, job, tmp, iters=None):
    if job.startswith("gpu"):   # gpu2ms: test_daemon_inproc_cuda.sh's pause per iteration
        return ([os.path.join(tmp, "fakepy"), os.path.join(WL, "fake_gpu_model.py"), "--iters", "5",
                 "--until", os.path.join(tmp, "never")] + FAKE_ARGS +
                (["--pause", "0.002"] if job == "gpu2ms" else []))
    cmd = [py, os.path.join(WL, WORKLOAD + ".py")]
    return cmd + (["--iters", str(iters), "--no-wait"] if iters else
                  ["--iters", "100000000", "--go-file", os.path.join(tmp, "go")])


def start_job(py, job, tmp):
    with open(os.path.join(tmp, "fakepy"), "w") as f:
        f.write("#!/bin/sh\nLD_LIBRARY_PATH=%s FAKE_CUPTI_LAUNCHES=1 exec %s \"$@\"\n" % (FAKE, py))
    os.chmod(os.path.join(tmp, "fakepy"), 0o755)
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    wl = subprocess.Popen(job_cmd(py, job, tmp), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    if not wl.stdout.readline().startswith("READY"):
        wl.kill()
        wl.wait()
        raise RuntimeError("%s %s: job did not start" % (py, job))
    open(go, "w").close()
    if job.startswith("gpu"):
        wl.send_signal(signal.SIGUSR1)
    return wl


def tbpf_cmd(case, py, wl, secs, tmp):
    kind, opts, job = CASES[case]
    opts = [o.replace("{cap}", os.path.join(tmp, "cap.tbpf")) for o in opts]
    if kind == "attach":
        return [TBPF, "--pid", str(wl.pid), "--duration", "%gs" % secs, "-o",
                os.path.join(tmp, "out")] + opts
    if kind == "daemon":
        return [TBPF, "daemon", "--listen", "127.0.0.1:0", "--window", "1s", "--pid", str(wl.pid),
                "--duration", "%gs" % secs] + opts
    return ([TBPF, "run", "-o", os.path.join(tmp, "out")] + opts + ["--"] +
            job_cmd(py, job, tmp, int(RUN_ITERS_PER_S[case] * secs)))


def scrape(errtext, state):
    """A daemon's /metrics, once a second (its port from its stderr)."""
    if time.time() < state.get("next", 0):
        return
    state["next"] = time.time() + 1
    for line in errtext.splitlines():
        if line.startswith("tbpf: listening on port "):
            try:
                urllib.request.urlopen("http://127.0.0.1:%s/metrics" % line.split()[-1],
                                       timeout=2).read()
            except OSError:
                pass


def sample(tb, kind, err, start_percpu):
    peak = dict(hwm=0, anon=0, rss=0, pss=0, kmem=0, kmem64=0, percpu=0)
    counts, state, next_count = {}, {}, time.time() + 1
    while tb.poll() is None:
        st = kb_fields("/proc/%d/status" % tb.pid, ("VmHWM", "RssAnon"))
        ro = kb_fields("/proc/%d/smaps_rollup" % tb.pid, ("Rss", "Pss"))
        if time.time() >= next_count:     # entries of the run-time allocated per-CPU maps
            counts.update(count_entries(tb.pid))
            next_count = time.time() + 2
        km, km64 = kernel_maps(tb.pid, counts)
        pc = kb_fields("/proc/meminfo", ("Percpu",)).get("Percpu", start_percpu) - start_percpu
        for k, v in (("hwm", st.get("VmHWM", 0)), ("anon", st.get("RssAnon", 0)),
                     ("rss", ro.get("Rss", 0)), ("pss", ro.get("Pss", 0)),
                     ("kmem", km / 1024.0), ("kmem64", km64 / 1024.0), ("percpu", pc)):
            peak[k] = max(peak[k], v)
        if kind == "daemon":
            err.seek(0)
            scrape(err.read(), state)
        time.sleep(0.02)
    return {k: v / 1024.0 for k, v in peak.items()}


def one_run(py, case, secs, tmp, lock):
    kind, _, job = CASES[case]
    lk = open(lock, "w") if lock else None
    if lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
    wl = None
    try:
        wl = start_job(py, job, tmp) if kind != "run" else None
        err = open(os.path.join(tmp, "err"), "w+")
        start_percpu = kb_fields("/proc/meminfo", ("Percpu",)).get("Percpu", 0)
        t0 = time.time()
        tb = subprocess.Popen(tbpf_cmd(case, py, wl, secs, tmp), stdout=subprocess.DEVNULL,
                              stderr=err)
        res = sample(tb, kind, err, start_percpu)
        res["secs"] = time.time() - t0
        err.seek(0)
        text = err.read()
        if tb.returncode != 0:
            raise RuntimeError("tbpf %s exited %d: %s" % (case, tb.returncode, text.strip()[-300:]))
        res["drops"] = int(any("dropped" in l for l in text.splitlines()))
        return res
    finally:
        if wl:
            wl.kill()
            wl.wait()
        if lk:
            lk.close()


def fmt(xs):
    return "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))


def table(res):
    cols = ("hwm", "anon", "pss", "kmem", "kmem64", "percpu")
    head = ["VmHWM", "RssAnon peak", "Pss peak", "BPF maps (memlock)",
            "BPF maps, %d CPUs" % KERNEL_CPUS, "Percpu growth"]
    lines = ["| torch | case | length | run (s) | " + " | ".join(head) + " | runs with drops |",
             "|---" * (len(head) + 5) + "|"]
    for (py, c, n), d in sorted(res.items()):
        lines.append("| %s | %s | %dx | %s | %s | %d |" % (
            TORCH.get(py, py), c, n, fmt(d["secs"]), " | ".join(fmt(d[k]) for k in cols),
            d["drops"]))
    return lines


def main():
    global TBPF, WORKLOAD
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", default="4s", help="the 1x job length (seconds)")
    ap.add_argument("--lengths", default="1", help="comma-separated multiples of --duration")
    ap.add_argument("--workload", default=WORKLOAD, help="the CPU job (tests/workloads/NAME.py)")
    ap.add_argument("--python", action="append", help="interpreter(s) (default: PY1 and PY2)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--lock", help="flock this file for each run (the e2e lock)")
    ap.add_argument("--tbpf", default=TBPF, help="the tbpf binary (default: this tree's build)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results_tbpf_memory.md"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("memory.py: run as root (tbpf attaches BPF uprobes)")
    TBPF, WORKLOAD = a.tbpf, a.workload
    cases = [c for c in a.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            sys.exit("memory.py: unknown case %r (known: %s)" % (c, ", ".join(CASES)))
    secs = float(a.duration.rstrip("s"))
    lengths = [int(x) for x in a.lengths.split(",")]
    pys = a.python or [PY1, PY2]
    res, failed = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for n in lengths:
                for i in range(len(cases)):          # rotate the order per repetition
                    c = cases[(i + rep) % len(cases)]
                    for py in pys:
                        try:
                            r = one_run(py, c, secs * n, tmp, a.lock)
                        except RuntimeError as e:
                            failed.append(str(e))
                            print("memory.py: %s" % e, file=sys.stderr)
                            continue
                        d = res.setdefault((py, c, n), {"drops": 0})
                        for k, v in r.items():
                            if k != "drops":
                                d.setdefault(k, []).append(v)
                        d["drops"] += r["drops"]
                        print("rep %d %s %s %dx: VmHWM %.1f MB, RssAnon %.1f MB, BPF maps %.1f MB "
                              "(%.1f MB at %d CPUs)%s" %
                              (rep + 1, os.path.basename(py), c, n, r["hwm"], r["anon"], r["kmem"],
                               r["kmem64"], KERNEL_CPUS, " DROPS" if r["drops"] else ""),
                              file=sys.stderr)
    lines = ["# tbpf's own memory", "",
             "%s UTC; `bench/memory.py --reps %d --duration %s --lengths %s --workload %s`; "
             "%d possible CPUs; MB, medians (min-max)."
             % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), a.reps, a.duration,
                a.lengths, a.workload, possible_cpus()), ""] + table(res)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(a.out, "w") as f:
        f.write(text)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
