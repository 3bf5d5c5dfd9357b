#!/bin/bash
# test_inproc_inject.sh - `--inproc --inject`: the RecordFunction
# agent and the CUPTI agent in one target, CUPTI device records joined to
# the launches the BPF libcuda probes saw, which were joined to the
# in-process ops (join/cudaattr.c); and the same job under the uprobe
# mode's --inject, torch 1.13.
#
# No GPU here.  The fake driver and CUPTI (tests/native/cupti/fake_cuda.c,
# FAKE_CUPTI_LAUNCHES=1) report, for each cuLaunchKernel and
# cuMemcpyHtoDAsync the job makes, a CUPTI driver API record stamped at
# the call's entry and return on the calling thread and a device record of
# the same correlation id (a kernel lasting 1000 ns x grid, a copy of
# bytes / 4 ns), delivered in buffers as CUPTI delivers them, through the
# real agent (libtbpf_agent.so) and its BPF hand-off.  The job
# (tests/workloads/fake_gpu_model.py) makes those calls inside
# record_function scopes in nn.Modules; the expected device times per op
# (Self CUDA, CUDA total over the nested aten::fkstep), the GPU slices and
# launch->kernel flows of the Chrome and Perfetto traces (read back by
# tests/formats' independent readers) and the launches per layer follow
# from its parameters.  Device time per layer: each layer's
# Self CUDA (the work launched with it as the innermost module: Model's
# step_kernel, conv's, head's kernels and copy, head/norm's) and CUDA
# total (with the layers below), work launched outside any op on
# [no op], from the same parameters, in the JSON layers and the text
# tree, live and from the captures, in both modes.  What only a real GPU shows: the real CUPTI's and
# driver's records (here the fake's), torch's own kernels, the clock
# offset of real device timestamps.
# timeout: 600
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/fake_gpu_lib.sh"
export T   # expect.py, read by the checks
need_root
need_tbpf
need_torch "$PY1"
fake_gpu_setup
fake_gpu_reference
PYW=$T/py1

run() {   # run TAG TBPF-ARGS...: the job under $PYW
	local tag=$1
	shift
	start_workload wl_$tag "$PYW" fake_gpu_model.py "${WLARGS[@]}"
	start_tbpf tb_$tag --pid "$(get wl_$tag pid)" --inject "$@"
	go "$(get wl_$tag pid)"
	job_done $tag
}

check_tree() {   # check_tree TREE LABEL: the text tree's Self CUDA / CUDA total
	python3 - "$1" "$2" $PARAMS <<'PY'
import os, re, sys
sys.path.insert(0, os.environ["T"])
from expect import expect
path, label = sys.argv[1:3]
_, wlay = expect(sys.argv[3:])
unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
def ns(cell):   # "140.1us (100%)" -> (ns, rounding step); "" -> 0
    m = re.match(r"([0-9.]+)(ns|us|ms|s) \(", cell)
    return (float(m.group(1)) * unit[m.group(2)], 0.05 * unit[m.group(2)]) if m else (0, 0)
lines = [l for l in open(path) if l.startswith("|")]
hdr = [c.strip() for c in lines[0].strip().strip("|").split("|")]
errs, seen, path_at = [], {}, []
for l in lines[2:]:
    cells = [c.strip() for c in l.strip().strip("|").split("|")]
    raw = l.split("|")[1][1:].rstrip()   # keep the tree's leading indentation
    depth = len(re.match(r"^((?:│ |  )*)", raw).group(1)) // 2 + (1 if re.search("[├└]──", raw) else 0)
    name = re.sub(r"^[│ ├└─]*", "", raw)
    path_at = path_at[:depth] + [name]
    row = dict(zip(hdr, cells))
    seen["/".join(path_at)] = (ns(row.get("Self CUDA", "")), ns(row.get("CUDA total", "")))
for p, (s, t, _) in wlay.items():
    if p not in seen:
        errs.append("%s: no row" % p); continue
    (gs, es), (gt, et) = seen[p]
    if abs(gs - s) > es + 1e-9 or abs(gt - t) > et + 1e-9:
        errs.append("%s: Self CUDA %s, CUDA total %s; want %d, %d ns" % (p, gs, gt, s, t))
if "Self CUDA" not in hdr or "CUDA total" not in hdr:
    errs.append("no Self CUDA / CUDA total columns: %s" % hdr)
if errs:
    print("%s: %s" % (label, "; ".join(errs))); sys.exit(1)
print("%s: tree Self CUDA / CUDA total per layer as expected (%s)" %
      (label, ", ".join("%s %d/%d ns" % (p, v[0], v[1]) for p, v in wlay.items())))
PY
}

check_gpu_trace() {   # check_gpu_trace CAPTURE LABEL PID: Chrome/Perfetto GPU tracks
	local cap=$1 label=$2 pid=$3
	"$ROOT/tests/formats/check_all.sh" "$cap" "$TBPF" "$T/$label.fmt" > "$T/$label.check.log" 2>&1 ||
		fail "$label: check_all: $(grep FAIL "$T/$label.check.log" | head -1)"
	log "$label: $(grep 'check_all: gpu' "$T/$label.check.log")"
	python3 - "$T/$label.fmt/gpu-chrome.txt" "$label" "$pid" $PARAMS <<'PY'
import collections, sys
path, label, pid = sys.argv[1:4]
N, CONV, GC, HEAD, GH, COPY, STEPK, GS, NORM, GN, OUTK, GO = map(int, sys.argv[4:16])
gpu, flows = collections.Counter(), {}
slices = {}
for l in open(path):
    f = l.split()
    if f[0] == "gpu":
        name = " ".join(f[6:])
        gpu[(f[1], f[2], name, int(f[4]))] += 1
        slices[f[5]] = (f[1], f[2], int(f[3]))
    elif f[0] == "flow":
        flows[f[1]] = f
want = {("GPU_0", "stream_7", "conv_kernel", 1000 * GC): N * CONV,
        ("GPU_0", "stream_7", "head_kernel", 1000 * GH): N * HEAD,
        ("GPU_0", "stream_7", "Memcpy HtoD %d B" % COPY, COPY // 4): N,
        ("GPU_0", "stream_7", "step_kernel", 1000 * GS): N * STEPK,
        ("GPU_0", "stream_7", "norm_kernel", 1000 * GN): N * NORM,
        ("GPU_0", "stream_7", "out_kernel", 1000 * GO): N * OUTK}
want = {k: v for k, v in want.items() if v}
errs = []
if dict(gpu) != want:
    errs.append("GPU slices %s != %s" % (dict(gpu), want))
# one flow per slice, from the job's thread, the launch call begun before
# the device start (a kernel may start before its launch call returns)
for corr, (dev, stream, start) in slices.items():
    fl = flows.get(corr)
    if not fl or fl[2] != pid or fl[3] != pid or fl[7:10] != [dev, stream, str(start)] or \
       not (int(fl[4]) < int(fl[5]) and int(fl[4]) < start):
        errs.append("flow of %s: %s" % (corr, fl))
if len(flows) != len(slices):
    errs.append("%d flows for %d slices" % (len(flows), len(slices)))
if errs:
    print("%s: %s" % (label, "; ".join(errs[:6]))); sys.exit(1)
print("%s: GPU slices %s, each with its launch flow from pid %s" % (label, want, pid))
PY
}

# --inproc --inject: live json (from the run's capture) and the capture
run inp --inproc --format json -o "$T/inp.json" --record "$T/inp.tbpf"
grep -q "in-process RecordFunction callbacks.*CUPTI agent" "$(get tb_inp err)" ||
	fail "inp: not the in-process mode with the CUPTI agent: $(cat "$(get tb_inp err)")"
check_ops "$T/inp.json" "inproc live json" || fail "inproc: device times per op (see log)"
"$TBPF" report "$T/inp.tbpf" --format json -o "$T/inp.report.json" 2> "$T/inp.report.err" ||
	fail "report: $(cat "$T/inp.report.err")"
check_ops "$T/inp.report.json" "inproc report json" || fail "inproc report: device times per op (see log)"
check_gpu_trace "$T/inp.tbpf" inproc "$(get wl_inp pid)" || fail "inproc: GPU tracks (see log)"
"$TBPF" report "$T/inp.tbpf" --format tree -o "$T/inp.report.tree" 2> "$T/inp.rtree.err" ||
	fail "report tree: $(cat "$T/inp.rtree.err")"
check_tree "$T/inp.report.tree" "inproc report tree" || fail "inproc report tree: device time per layer (see log)"
# --steps from the capture, a step ending where aten::fkstep ends: steps 0
# and 1 run from iteration 0's fkstep end to iteration 2's, so they hold
# two iterations' work (iterations 1-2's fkstep, 0-1's out kernels), and
# device times count the work launched in them only
"$TBPF" report "$T/inp.tbpf" --step-on aten::fkstep --steps 2 --format json \
	-o "$T/inp.steps.json" 2> "$T/inp.steps.err" || fail "report --steps: $(cat "$T/inp.steps.err")"
PARAMS="2 ${PARAMS#* }" check_ops "$T/inp.steps.json" "inproc report --steps 2" ||
	fail "inproc report --steps 2: device times of two steps (see log)"
run inptree --inproc --format tree -o "$T/inp.tree"
check_tree "$T/inp.tree" "inproc live tree" || fail "inproc live tree: device time per layer (see log)"
cat "$T/inp.tree"
# the table: Self CUDA columns
run inpt --inproc -o "$T/inp.table"
grep -q 'Self CUDA' "$T/inp.table" || fail "inproc table: no Self CUDA column: $(head -5 "$T/inp.table")"
grep -E '^ *aten::fk(conv|head|copy|step) ' "$T/inp.table"
# 60,000 calls at the job's full rate, the job pinned to one CPU beside a
# busy loop, so its thread is preempted between tbpf's probe on a call and
# the API timestamp CUPTI takes inside it (up to 8 ms here; the join's
# former 100 us slack left about one kernel in 3,000 unjoined so, issue
# 19): every kernel joined, Self CUDA / CUDA total per op and layer exact
RATE=(--iters 6000 "${WLARGS[@]:2}")
cpu=$(($(nproc) - 1))
printf '#!/bin/sh\nexec taskset -c %s "%s" "$@"\n' "$cpu" "$T/py1" > "$T/py1pin"
chmod +x "$T/py1pin"
"$T/py1" "$WL/fake_gpu_model.py" "${RATE[@]}" --go-file "$T" > "$T/refr.out" 2> "$T/refr.err" ||
	fail "unprofiled 6000 iterations failed: $(tail -n 2 "$T/refr.err")"
taskset -c "$cpu" sh -c 'while :; do :; done' &
busy=$!
_E2E_PIDS+=("$busy")
SAVED=("${WLARGS[@]}") sum0=$want_sum
WLARGS=("${RATE[@]}") want_sum=$(result_field "$T/refr.out" checksum) PYW=$T/py1pin
run rate --inproc --format json -o "$T/rate.json"
WLARGS=("${SAVED[@]}") want_sum=$sum0 PYW=$T/py1
kill "$busy"
wait "$busy" 2> /dev/null || true   # killed: 143
PARAMS="6000 ${PARAMS#* }" check_ops "$T/rate.json" "inproc, 60,000 calls, one CPU with a busy loop" ||
	fail "60,000 calls beside a busy loop: device times per op (see log)"
# tbpf run --inproc --inject: the driver loads the CUPTI agent at the
# job's cuInit (CUDA_INJECTION64_PATH, as plain tbpf run), the in-process
# agent comes at its first op; the same device times, traces and layers
run_cmd() {   # run_cmd TAG TBPF-RUN-ARGS...: tbpf run ARGS -- the job under $PYW
	local tag=$1
	shift
	start_tbpf tb_$tag run "$@" -- "$PYW" "$WL/fake_gpu_model.py" "${WLARGS[@]}" --go-file "$T"
	wait_exit tb_$tag 120
	expect_rc tb_$tag 0
	[ "$(result_field "$(get tb_$tag out)" checksum)" = "$want_sum" ] ||
		fail "$tag: checksum $(result_field "$(get tb_$tag out)" checksum), unprofiled $want_sum"
	runpid=$(sed -n 's/^READY pid=//p' "$(get tb_$tag out)")
	log "$tag: $(grep -m1 '^tbpf: attached' "$(get tb_$tag err)")"
}
run_cmd rinp --inproc --inject --format json -o "$T/rinp.json" --record "$T/rinp.tbpf"
grep -q "warning" "$(get tb_rinp err)" && fail "run --inproc --inject warned: $(grep warning "$(get tb_rinp err)")"
grep -q "in-process RecordFunction callbacks.*CUPTI agent" "$(get tb_rinp err)" ||
	fail "rinp: not the in-process mode with the CUPTI agent: $(cat "$(get tb_rinp err)")"
check_ops "$T/rinp.json" "run --inproc live json" || fail "run --inproc: device times per op (see log)"
check_gpu_trace "$T/rinp.tbpf" runinproc "$runpid" || fail "run --inproc: GPU tracks (see log)"
"$TBPF" report "$T/rinp.tbpf" --format tree -o "$T/rinp.report.tree" 2> "$T/rinp.rtree.err" ||
	fail "run --inproc report tree: $(cat "$T/rinp.rtree.err")"
check_tree "$T/rinp.report.tree" "run --inproc report tree" || fail "run --inproc: device time per layer (see log)"
# the agent cannot start (CUPTI taken: the fake's subscribe fails): one
# line, the run goes on with its rows
FAKE_CUPTI_CONFLICT=1 run_cmd rconf --inproc --inject --format json -o "$T/rconf.json"
[ "$(grep -c 'device tim' "$(get tb_rconf err)")" = 1 ] && ! grep -q warning "$(get tb_rconf err)" &&
	grep -q '^tbpf: no CUDA device timings: CUPTI agent reports conflict' "$(get tb_rconf err)" ||
	fail "run --inproc --inject, CUPTI taken: not one line: $(cat "$(get tb_rconf err)")"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert not j["run"]["gpu_times"]; assert any(o["name"]=="aten::fkconv" and o["calls"]==5 for o in j["ops"]), j["ops"]' "$T/rconf.json" ||
	fail "run --inproc --inject, CUPTI taken: the rows are not there"
log "rconf: $(grep -m1 'no CUDA device' "$(get tb_rconf err)")"
# the uprobe mode, the same job (its first live test of device times)
run upr --format json -o "$T/upr.json" --record "$T/upr.tbpf"
check_ops "$T/upr.json" "uprobe live json" || fail "uprobe: device times per op (see log)"
check_gpu_trace "$T/upr.tbpf" uprobe "$(get wl_upr pid)" || fail "uprobe: GPU tracks (see log)"
"$TBPF" report "$T/upr.tbpf" --format json -o "$T/upr.report.json" 2> "$T/upr.report.err" ||
	fail "uprobe report: $(cat "$T/upr.report.err")"
check_ops "$T/upr.report.json" "uprobe report json" || fail "uprobe report: device times per op and layer (see log)"
"$TBPF" report "$T/upr.tbpf" --format tree -o "$T/upr.report.tree" 2> "$T/upr.rtree.err" ||
	fail "uprobe report tree: $(cat "$T/upr.rtree.err")"
check_tree "$T/upr.report.tree" "uprobe report tree" || fail "uprobe report tree: device time per layer (see log)"
run uprtree --format tree -o "$T/upr.tree"
check_tree "$T/upr.tree" "uprobe live tree" || fail "uprobe live tree: device time per layer (see log)"
cat "$T/upr.tree"
# torch 2.x: its wheel links Kineto's libcupti (here the fake, preloaded
# under the wheel's soname: fake_gpu_lib.sh); plain --inject uses that
# copy, on every torch of the matrix
need_torch "$PY2"
PYW=$T/py2
start_workload wl_ref2 "$PYW" fake_gpu_model.py "${WLARGS[@]}" --go-file "$T"
wait_exit wl_ref2 120
[ "$(result_field "$(get wl_ref2 out)" checksum)" = "$want_sum" ] || fail "torch2: unprofiled checksum differs"
run inp2 --inproc --format json -o "$T/inp2.json" --record "$T/inp2.tbpf"
check_ops "$T/inp2.json" "torch2 inproc --inject json" || fail "torch2: device times per op (see log)"
check_gpu_trace "$T/inp2.tbpf" inproc2 "$(get wl_inp2 pid)" || fail "torch2: GPU tracks (see log)"
PYW=$T/py1
# SIGKILL of tbpf mid-run: the job runs on to its unprofiled result (the
# RecordFunction agent removes its callbacks; the CUPTI agent releases
# CUPTI itself: test_agent_watchdog.sh checks that from the fake's side)
LONG=(--iters 20000 --conv 1 --head 1)
"$T/py1" "$WL/fake_gpu_model.py" "${LONG[@]}" --go-file "$T" > "$T/refk.out" 2> "$T/refk.err" ||
	fail "unprofiled long run failed: $(tail -n 2 "$T/refk.err")"
start_workload wl_k "$PYW" fake_gpu_model.py "${LONG[@]}"
start_tbpf tb_k --pid "$(get wl_k pid)" --inproc --inject --format json -o "$T/k.json"
go "$(get wl_k pid)"
sleep 1
kill -9 "$(get tb_k pid)"
wait_exit wl_k 300
expect_rc wl_k 0
[ "$(result_field "$(get wl_k out)" checksum)" = "$(result_field "$T/refk.out" checksum)" ] ||
	fail "after SIGKILL of tbpf: checksum $(result_field "$(get wl_k out)" checksum), unprofiled $(result_field "$T/refk.out" checksum)"
log "SIGKILL of tbpf: the job finished with its unprofiled result"
# bad input: one line, usage exit
rc=0; "$TBPF" --pid "$$" --inproc --inject --no-cuda > /dev/null 2> "$T/bad.err" || rc=$?
[ $rc = 2 ] && [ "$(wc -l < "$T/bad.err")" = 1 ] || fail "--inproc --inject --no-cuda: rc $rc, $(cat "$T/bad.err")"
log "--inproc --inject: device times per op, GPU tracks and flows as the uprobe mode's, from the fake driver's records"
