#!/bin/bash
# test_cuda_plain.sh - a plain CUDA program (no libtorch; the real
# libcudart 13 as a shared library; every call fails without a GPU, yet
# each enters and leaves libcudart) is profiled, not refused:
#  - `tbpf --pid` (json and chrome) and `tbpf run -- PROG` (json), and a
#    system-wide run (`--comm`): the per-API calls (api_calls), the kernels'
#    names and launches, and Kineto's cuda_runtime events in the chrome
#    trace equal the counts the program printed of its own calls (2 threads);
#  - every call is timed at its return (launches and async calls too):
#    each API's timed calls equal its calls, with a host time > 0; the
#    chrome trace's cuda_runtime events are slices with dur > 0 that do not
#    overlap on their thread, and each thread's sum fits in the wall time
#    the program measured for that thread (CLOCK_MONOTONIC around its calls);
#  - two programs at once under two --pid: each process's section (table)
#    and processes[].cuda (JSON) has that program's own counts;
#  - a process that maps neither libtorch nor libcudart/libcuda: one line,
#    exit 1.
# The reference is the program's own count of the calls it made.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
PROG=$ROOT/build/tests/native/cuda/cuda_plain
[ -x "$PROG" ] || skip "no $PROG (needs nvcc: the CUDA toolkit in /usr/local/cuda)"
ITERS=7
THREADS=2
problems=()

# check JSON PROGOUT LABEL: tbpf's json against the program's own counts
check() {
	python3 - "$1" "$2" "$3" <<'PY' || bad "$3"
import json, sys
j = json.load(open(sys.argv[1]))
line = [l for l in open(sys.argv[2]) if l.startswith("done ")][-1]
want = json.loads(line[5:])
kern = want.pop("kernels")
got = {a["name"]: a["calls"] for a in j["api_calls"]}
errs = []
if got != want:
    errs.append("api_calls %s != program's %s" % (got, want))
for a in j["api_calls"]:   # every call timed at its return
    if not (a["timed_calls"] == a["calls"] and a["total_ns"] > 0 and a["max_ns"] > 0
            and a["max_ns"] <= a["total_ns"]):
        errs.append("host time of %s: %s" % (a["name"], a))
walls = [json.loads(l[7:]) for l in open(sys.argv[2]) if l.startswith("thread ")]
wall = sum(w["end_ns"] - w["begin_ns"] for w in walls)
host = sum(a["total_ns"] for a in j["api_calls"])
if not walls or host > wall:
    errs.append("host time of all calls %d ns > the threads' wall time %d ns" % (host, wall))
k = {x["name"]: x["launches"] for x in j["kernels"]}
if k != kern:
    errs.append("kernels %s != program's %s" % (k, kern))
# no op: the op table has the CUDA runtime calls alone (as
# torch.profiler's rows of calls outside any op), the program's counts
rows = {}
for o in j["ops"]:
    rows[o["name"]] = rows.get(o["name"], 0) + o["calls"]
wrt = {n: c for n, c in want.items() if n.startswith("cuda")}
if rows != wrt:
    errs.append("op rows in a process without libtorch %s != its runtime calls %s" % (rows, wrt))
if errs:
    print("\n".join(errs)); sys.exit(1)
print("%s: %d API calls in %d APIs, %d kernel launches: equal to the program's own counts;"
      " host time %.3f ms of the threads' %.3f ms" % (sys.argv[3], sum(got.values()), len(got),
      sum(k.values()), host / 1e6, wall / 1e6))
PY
}

# chrome TRACE PROGOUT: cuda_runtime events by name == the program's counts
check_chrome() {
	python3 - "$1" "$2" <<'PY' || bad "chrome trace"
import collections, json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
line = [l for l in open(sys.argv[2]) if l.startswith("done ")][-1]
want = json.loads(line[5:]); want.pop("kernels")
if "deviceProperties" in t:   # no GPU here: Kineto writes none either
    print("deviceProperties without a GPU: %s" % t["deviceProperties"]); sys.exit(1)
c = collections.Counter(e["name"] for e in ev if e.get("cat") == "cuda_runtime")
if dict(c) != want:
    print("cuda_runtime events %s != program's %s" % (dict(c), want)); sys.exit(1)
kn = collections.Counter(e["args"]["kernel"] for e in ev
                         if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel")
# timed at return: slices with a duration, one after the other on
# their thread, within the thread's wall time the program measured
walls = {w["tid"]: w["end_ns"] - w["begin_ns"] for w in
         (json.loads(l[7:]) for l in open(sys.argv[2]) if l.startswith("thread "))}
errs, per = [], collections.defaultdict(list)
for e in ev:
    if e.get("cat") != "cuda_runtime":
        continue
    if e.get("ph") != "X" or not e.get("dur", 0) > 0:
        errs.append("untimed event %s" % e)
    else:
        per[e["tid"]].append((e["ts"], e["dur"]))
for tid, v in per.items():
    v.sort()
    for (a, da), (b, _) in zip(v, v[1:]):
        if a + da > b + 1e-3:
            errs.append("tid %d: a call at %.3f+%.3f overlaps the next at %.3f" % (tid, a, da, b))
            break
    tot = sum(d for _, d in v) * 1000
    if tid not in walls or tot > walls[tid]:
        errs.append("tid %d: calls %.0f ns > its wall time %s ns" % (tid, tot, walls.get(tid)))
if errs:
    print("\n".join(errs[:10])); sys.exit(1)
print("chrome: %d cuda_runtime events, by name equal to the program's counts; kernels %s;"
      " per thread host time/wall: %s" % (sum(c.values()), dict(kn), ", ".join(
      "%.3f/%.3f ms" % (sum(d for _, d in per[t]) / 1e3, walls[t] / 1e6) for t in sorted(per))))
PY
}

# --pid, attached before the program's first call (it waits for SIGUSR1)
for fmt in json chrome; do
	log "== tbpf --pid, --format $fmt"
	"$PROG" --wait $ITERS $THREADS > "$T/prog.$fmt.out" 2>&1 &
	ppid=$!
	_E2E_PIDS+=("$ppid")
	for _ in $(seq 200); do grep -q '^ready' "$T/prog.$fmt.out" && break; sleep 0.05; done
	timeout 60 "$TBPF" --pid $ppid --format $fmt -o "$T/pid.$fmt" --record "$T/pid.$fmt.tbpf" \
		2> "$T/pid.$fmt.err" &
	tb=$!
	for _ in $(seq 600); do grep -q '^tbpf: attached' "$T/pid.$fmt.err" && break; sleep 0.05; done
	grep -m1 '^tbpf: attached' "$T/pid.$fmt.err" || bad "--pid $fmt: not attached: $(cat "$T/pid.$fmt.err")"
	kill -USR1 $ppid
	wait $ppid || bad "the program failed under tbpf --pid"
	wait $tb || bad "tbpf --pid $fmt exited $?: $(cat "$T/pid.$fmt.err")"
	grep -q 'no libtorch mapped: CUDA API calls only' "$T/pid.$fmt.err" || bad "--pid: no CUDA-only line"
	tail -n 1 "$T/prog.$fmt.out"
	if [ $fmt = json ]; then check "$T/pid.json" "$T/prog.$fmt.out" "tbpf --pid"; else
		check_chrome "$T/pid.chrome" "$T/prog.$fmt.out"; fi
	# the capture: tbpf report renders the same counts
	"$TBPF" report "$T/pid.$fmt.tbpf" --format json -o "$T/rep.$fmt.json" 2> "$T/rep.err" ||
		bad "tbpf report of the CUDA-only capture: $(cat "$T/rep.err")"
	check "$T/rep.$fmt.json" "$T/prog.$fmt.out" "tbpf report of the --pid capture"
done

# two programs at once: a section each with its own CUDA tables
log "== two programs, two --pid: a section each"
"$PROG" --wait 3 1 > "$T/prog.a.out" 2>&1 &
pa=$!
"$PROG" --wait 5 2 > "$T/prog.b.out" 2>&1 &
pb=$!
_E2E_PIDS+=("$pa" "$pb")
for _ in $(seq 200); do grep -q '^ready' "$T/prog.a.out" && grep -q '^ready' "$T/prog.b.out" && break; sleep 0.05; done
timeout 60 "$TBPF" --pid $pa --pid $pb --format json -o "$T/two.json" --record "$T/two.tbpf" \
	2> "$T/two.err" &
tb=$!
for _ in $(seq 600); do grep -q '^tbpf: attached' "$T/two.err" && break; sleep 0.05; done
kill -USR1 $pa $pb
wait $pa || bad "program a failed under tbpf"
wait $pb || bad "program b failed under tbpf"
wait $tb || bad "tbpf on two programs exited $?: $(cat "$T/two.err")"
"$TBPF" report "$T/two.tbpf" --format table > "$T/two.table" 2> "$T/two.rep.err" ||
	bad "report of the two-program capture: $(cat "$T/two.rep.err")"
python3 - "$T/two.json" "$T/two.table" "$pa" "$T/prog.a.out" "$pb" "$T/prog.b.out" <<'PY' || bad "two programs"
import json, re, sys
j = json.load(open(sys.argv[1])); table = open(sys.argv[2]).read()
errs, total = [], {}
procs = {p["pid"]: p for p in j["processes"]}
sections = re.split(r"^== pid (\d+): .*==$", table, flags=re.M)
sec = {int(sections[i]): sections[i + 1] for i in range(1, len(sections), 2)}
for pid, out in ((int(sys.argv[3]), sys.argv[4]), (int(sys.argv[5]), sys.argv[6])):
    want = json.loads([l for l in open(out) if l.startswith("done ")][-1][5:])
    kern = want.pop("kernels")
    p = procs.get(pid, {})
    got = {a["name"]: a["calls"] for a in p.get("cuda", {}).get("api_calls", [])}
    if got != want:
        errs.append("pid %d: processes[].cuda.api_calls %s != its own %s" % (pid, got, want))
    k = {x["name"]: x["launches"] for x in p.get("cuda", {}).get("kernels", [])}
    if k != kern or any(x["pid"] != pid for x in p.get("cuda", {}).get("kernels", [])):
        errs.append("pid %d: kernels %s != its own %s" % (pid, k, kern))
    api = re.search(r"^CUDA API calls.*?\n\n", sec.get(pid, "") + "\n\n", re.M | re.S)
    rows = dict(re.findall(r"^(cuda\w+)\s+(\d+)\s", api.group(0) if api else "", re.M))
    if {n: int(c) for n, c in rows.items()} != want:
        errs.append("pid %d: table section %s != its own %s" % (pid, rows, want))
    for n, c in want.items():
        total[n] = total.get(n, 0) + c
merged = {a["name"]: a["calls"] for a in j["api_calls"]}
if merged != total:
    errs.append("merged api_calls %s != the sum %s" % (merged, total))
if "== all processes ==" in table:
    errs.append("an 'all processes' part is left")
if errs:
    print("\n".join(errs)); sys.exit(1)
print("two programs: each section's and processes[].cuda's API calls equal its own counts "
      "(%d and %d calls); merged: the sum" % tuple(sum(json.loads([l for l in open(o) if
      l.startswith("done ")][-1][5:]).get(n, 0) for n in total) for o in (sys.argv[4], sys.argv[6])))
PY

# tbpf run: held where the loader maps libcudart, before the first call
log "== tbpf run -- cuda_plain"
timeout 60 "$TBPF" run --format json -o "$T/run.json" -- "$PROG" $ITERS $THREADS \
	> "$T/prog.run.out" 2> "$T/run.err" || bad "tbpf run exited $?: $(cat "$T/run.err")"
grep '^tbpf: attached' "$T/run.err"
grep -q 'no libtorch mapped yet' "$T/run.err" || bad "tbpf run: no CUDA-only line"
tail -n 1 "$T/prog.run.out"
check "$T/run.json" "$T/prog.run.out" "tbpf run"

# system-wide (--comm: other CUDA processes on the host stay out)
log "== system-wide --comm cuda_plain"
"$PROG" --wait $ITERS $THREADS > "$T/prog.sys.out" 2>&1 &
ppid=$!
_E2E_PIDS+=("$ppid")
for _ in $(seq 200); do grep -q '^ready' "$T/prog.sys.out" && break; sleep 0.05; done
timeout 60 "$TBPF" --comm cuda_plain --duration 4s --format json -o "$T/sys.json" 2> "$T/sys.err" &
tb=$!
for _ in $(seq 600); do grep -q '^tbpf: attached' "$T/sys.err" && break; sleep 0.05; done
kill -USR1 $ppid
wait $ppid || bad "the program failed under system-wide tbpf"
wait $tb || bad "system-wide tbpf exited $?: $(cat "$T/sys.err")"
python3 -c "import json,sys; j=json.load(open('$T/sys.json')); sys.exit(0 if j['run']['pids']==[$ppid] else 1)" ||
	bad "system-wide: pids $(python3 -c "import json; print(json.load(open('$T/sys.json'))['run']['pids'])") != [$ppid]"
check "$T/sys.json" "$T/prog.sys.out" "system-wide"

# only libcuda mapped (the driver API through the toolkit's stub, loaded as
# libcuda.so.1): the calls tests/native/cuda/cuda_drv_calls.c makes, by API
DRV=$ROOT/build/tests/native/cuda/cuda_drv_calls
if [ -x "$DRV" ]; then
	log "== --pid, libcuda only (cuda_drv_calls)"
	"$DRV" > "$T/drv.out" 2>&1 &
	ppid=$!
	_E2E_PIDS+=("$ppid")
	for _ in $(seq 200); do grep -q '^ready' "$T/drv.out" && break; sleep 0.05; done
	timeout 60 "$TBPF" --pid $ppid --format json -o "$T/drv.json" 2> "$T/drv.err" &
	tb=$!
	for _ in $(seq 600); do grep -q '^tbpf: attached' "$T/drv.err" && break; sleep 0.05; done
	kill -USR1 $ppid
	wait $ppid
	wait $tb || bad "tbpf on the libcuda-only program exited $?: $(cat "$T/drv.err")"
	python3 - "$T/drv.json" <<'PY' || bad "libcuda only"
import json, sys
j = json.load(open(sys.argv[1]))
got = {a["name"]: a["calls"] for a in j["api_calls"]}
want = {"cuLaunchKernel": 4, "cuLaunchKernelEx": 1, "cuMemcpyHtoDAsync": 2, "cuMemcpyDtoHAsync": 1,
        "cuMemcpyDtoDAsync": 1, "cuMemsetD32Async": 1, "cuMemsetD8Async": 1,
        "cuStreamSynchronize": 3, "cuCtxSynchronize": 1, "cuMemAlloc": 2, "cuMemFree": 1}
if got != want:
    print("api_calls %s != the program's %s" % (got, want)); sys.exit(1)
untimed = [a for a in j["api_calls"] if not (a["timed_calls"] == a["calls"] and a["total_ns"] > 0)]
if untimed:
    print("driver calls not timed at return: %s" % untimed); sys.exit(1)
print("libcuda only: %d driver API calls as the program makes them, each timed"
      % sum(got.values()))
PY
fi

# --pid on a Python process that mapped libcudart before importing torch
# (torch 2.x's own order: libtorch_global_deps, then libtorch): CUDA-only at
# first, its op probes once it maps libtorch; every op run after that counts
if [ -x "$PY2" ]; then
	log "== --pid, libcudart first, then import torch ($PY2)"
	N=300
	"$PY2" -u - $N > "$T/py.out" 2>&1 <<'PY' &
import ctypes, glob, os, signal, sys, time
ctypes.CDLL(glob.glob(sys.prefix + "/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.*")[0])
go = [0]
signal.signal(signal.SIGUSR1, lambda *a: go.__setitem__(0, go[0] + 1))
print("ready", os.getpid())
while go[0] < 1:
    time.sleep(0.01)
import torch
print("imported")
while go[0] < 2:
    time.sleep(0.01)
x = torch.ones(8)
for _ in range(int(sys.argv[1])):
    x = x.add(1)
print("done", float(x.sum()))
PY
	ppid=$!
	_E2E_PIDS+=("$ppid")
	for _ in $(seq 600); do grep -q '^ready' "$T/py.out" && break; sleep 0.05; done
	timeout 120 "$TBPF" --pid $ppid --format json -o "$T/py.json" 2> "$T/py.err" &
	tb=$!
	for _ in $(seq 600); do grep -q '^tbpf: attached' "$T/py.err" && break; sleep 0.05; done
	grep '^tbpf: attached' "$T/py.err" | grep -q 'CUDA API calls only' || bad "python: not CUDA-only first: $(cat "$T/py.err")"
	kill -USR1 $ppid
	for _ in $(seq 1200); do grep -q 'mapped libtorch' "$T/py.err" && break; sleep 0.05; done
	grep 'mapped libtorch' "$T/py.err" || bad "python: op probes never followed: $(cat "$T/py.err")"
	kill -USR1 $ppid
	wait $ppid || bad "the Python job failed: $(cat "$T/py.out")"
	wait $tb || bad "tbpf exited $?: $(cat "$T/py.err")"
	python3 - "$T/py.json" $N <<'PY' || bad "python: op counts"
import json, sys
j = json.load(open(sys.argv[1])); n = int(sys.argv[2])
ops = {o["name"]: o["calls"] for o in j["ops"]}
if ops.get("aten::add") != n:
    print("aten::add %s != %d: %s" % (ops.get("aten::add"), n, sorted(ops.items())[:20])); sys.exit(1)
print("upgraded target: aten::add %d calls, %d op names" % (n, len(ops)))
PY
fi

# neither libtorch nor CUDA: refused in one line
sleep 100 &
sleeper=$!
_E2E_PIDS+=("$sleeper")
expect "process without libtorch or CUDA" "1" "maps neither libtorch nor libcudart" \
	"$TBPF" --pid "$sleeper" --duration 1s

[ ${#problems[@]} = 0 ] || fail "${problems[*]}"
log "PASS"
