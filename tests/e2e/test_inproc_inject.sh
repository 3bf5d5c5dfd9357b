#!/bin/bash
# test_inproc_inject.sh - `--inproc --inject` (issue 19): the RecordFunction
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
# from its parameters.  What only a real GPU shows: the real CUPTI's and
# driver's records (here the fake's), torch's own kernels, the clock
# offset of real device timestamps.
# timeout: 600
source "$(dirname "$0")/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
FAKE=$ROOT/build/tests/native/cupti/fakecuda
[ -e "$FAKE/libcuda.so.1" ] || fail "$FAKE/libcuda.so.1 missing: run make"
[ -f "$ROOT/build/libtbpf_agent.so" ] || fail "libtbpf_agent.so missing: run make"
ITERS=5 CONV=3 GC=2 HEAD=2 GH=5 COPY=4096
WLARGS=(--iters $ITERS --conv $CONV --gc $GC --head $HEAD --gh $GH --copy $COPY)
# the jobs' interpreters, with the fake driver (exec: the same pid)
for v in 1 2; do
	py=PY$v
	cat > "$T/py$v" <<SH
#!/bin/sh
LD_LIBRARY_PATH=$FAKE FAKE_CUPTI_LAUNCHES=1 exec ${!py} "\$@"
SH
	chmod +x "$T/py$v"
done
"$T/py1" "$WL/fake_gpu_model.py" "${WLARGS[@]}" --go-file "$T" > "$T/ref.out" 2> "$T/ref.err" ||
	fail "unprofiled run failed: $(tail -n 2 "$T/ref.err")"
want_sum=$(result_field "$T/ref.out" checksum)
PYW=$T/py1

run() {   # run TAG TBPF-ARGS...: the job under $PYW
	local tag=$1
	shift
	start_workload wl_$tag "$PYW" fake_gpu_model.py "${WLARGS[@]}"
	start_tbpf tb_$tag --pid "$(get wl_$tag pid)" --inject "$@"
	go "$(get wl_$tag pid)"
	wait_exit wl_$tag 120
	wait_exit tb_$tag 60
	expect_rc wl_$tag 0
	expect_rc tb_$tag 0
	[ "$(result_field "$(get wl_$tag out)" checksum)" = "$want_sum" ] ||
		fail "$tag: checksum $(result_field "$(get wl_$tag out)" checksum), unprofiled $want_sum"
	grep -q warning "$(get tb_$tag err)" && fail "$tag: tbpf warned: $(grep warning "$(get tb_$tag err)")"
	log "$tag: $(grep -m1 '^tbpf: attached' "$(get tb_$tag err)")"
}

check_ops() {   # check_ops JSON LABEL: Self CUDA and CUDA total per op
	python3 - "$1" "$2" $ITERS $CONV $GC $HEAD $GH $COPY <<'PY'
import json, sys
path, label = sys.argv[1:3]
N, CONV, GC, HEAD, GH, COPY = map(int, sys.argv[3:9])
j = json.load(open(path))
conv, head, copy = N * CONV * 1000 * GC, N * HEAD * 1000 * GH, N * COPY // 4
want = {"aten::fkconv": (conv, conv), "aten::fkhead": (head, head),
        "aten::fkcopy": (copy, copy), "aten::fkstep": (0, conv + head + copy)}
errs = []
if j["run"]["gpu_times"] is not True:
    errs.append("no GPU times: %s" % j["run"].get("gpu_note"))
got = {o["name"]: (o.get("self_cuda_ns"), o.get("cuda_total_ns")) for o in j["ops"]}
for k, v in want.items():
    if got.get(k) != v:
        errs.append("%s: Self CUDA, CUDA total %s != %s" % (k, got.get(k), v))
others = {k: v for k, v in got.items() if k not in want and v[0]}
if others:
    errs.append("device time in other ops: %s" % others)
# launches per layer (the libcuda probes, joined to their ops)
layers = {l["path"]: l for l in j.get("layers", [])}
wl = {"Model": N * (CONV + HEAD), "Model/conv": N * CONV, "Model/head": N * HEAD}
gl = {p: layers[p]["launches"] if p in layers else None for p in wl}
if gl != wl:
    errs.append("launches per layer %s != %s" % (gl, wl))
if errs:
    print("%s: %s" % (label, "; ".join(errs))); sys.exit(1)
print("%s: Self CUDA / CUDA total per op %s, launches per layer %s" % (label, want, wl))
PY
}

check_gpu_trace() {   # check_gpu_trace CAPTURE LABEL PID: Chrome/Perfetto GPU tracks
	local cap=$1 label=$2 pid=$3
	"$ROOT/tests/formats/check_all.sh" "$cap" "$TBPF" "$T/$label.fmt" > "$T/$label.check.log" 2>&1 ||
		fail "$label: check_all: $(grep FAIL "$T/$label.check.log" | head -1)"
	log "$label: $(grep 'check_all: gpu' "$T/$label.check.log")"
	python3 - "$T/$label.fmt/gpu-chrome.txt" "$label" "$pid" $ITERS $CONV $GC $HEAD $GH $COPY <<'PY'
import collections, sys
path, label, pid = sys.argv[1:4]
N, CONV, GC, HEAD, GH, COPY = map(int, sys.argv[4:10])
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
        ("GPU_0", "stream_7", "Memcpy HtoD %d B" % COPY, COPY // 4): N}
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
# the table: Self CUDA columns
run inpt --inproc -o "$T/inp.table"
grep -q 'Self CUDA' "$T/inp.table" || fail "inproc table: no Self CUDA column: $(head -5 "$T/inp.table")"
grep -E '^ *aten::fk(conv|head|copy|step) ' "$T/inp.table"
# the uprobe mode, the same job (its first live test of device times)
run upr --format json -o "$T/upr.json" --record "$T/upr.tbpf"
check_ops "$T/upr.json" "uprobe live json" || fail "uprobe: device times per op (see log)"
check_gpu_trace "$T/upr.tbpf" uprobe "$(get wl_upr pid)" || fail "uprobe: GPU tracks (see log)"
# torch 2.8: its wheel maps Kineto's libcupti 12, so --inject is refused
# (one warning, the rows still there) unless --inject-force
need_torch "$PY2"
PYW=$T/py2
start_workload wl_ref2 "$PYW" fake_gpu_model.py "${WLARGS[@]}" --go-file "$T"
wait_exit wl_ref2 120
[ "$(result_field "$(get wl_ref2 out)" checksum)" = "$want_sum" ] || fail "torch2: unprofiled checksum differs"
start_workload wl_r2 "$PYW" fake_gpu_model.py "${WLARGS[@]}"
start_tbpf tb_r2 --pid "$(get wl_r2 pid)" --inproc --inject --format json -o "$T/r2.json"
go "$(get wl_r2 pid)"
wait_exit wl_r2 120
wait_exit tb_r2 60
expect_rc wl_r2 0
expect_rc tb_r2 0
[ "$(grep -c 'warning: .*--inject refused.*libcupti' "$(get tb_r2 err)")" = 1 ] ||
	fail "torch2: no single --inject refusal line: $(cat "$(get tb_r2 err)")"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert not j["run"]["gpu_times"]; assert any(o["name"]=="aten::fkconv" and o["calls"]==5 for o in j["ops"]), j["ops"]' "$T/r2.json" ||
	fail "torch2: refused --inject: the rows are not there"
log "torch2: $(grep -m1 refused "$(get tb_r2 err)")"
run inp2 --inproc --inject-force --format json -o "$T/inp2.json" --record "$T/inp2.tbpf"
check_ops "$T/inp2.json" "torch2 inproc --inject-force json" || fail "torch2: device times per op (see log)"
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
