#!/bin/bash
# test_inproc_cuda.sh - CUDA calls in --inproc: the uprobe
# mode's libcudart/libcuda probes run beside the in-process agent, and each
# call is joined to the RecordFunction open on its thread
# (join/cudaattr.c), on torch 1.13 and 2.x.
#
# The workload of test_cuda_layers.sh (tests/workloads/cuda_layers_model.py,
# real nn.Modules calling functions of libtorch_cpu-layers.so that launch,
# copy and sync through the real /usr/local/cuda libcudart; every call
# fails without a GPU, the probes fire) with --rf: each of those calls runs
# inside a torch record_function named as the uprobe mode names the op
# (aten::lkconv, ...), which is what --inproc sees.  Inside each such
# record_function torch runs an aten::empty of its own before the call, so
# a launch given to the last op that started (not the one open) would land
# on aten::empty and fail the checks.  The expected numbers are those of
# test_cuda_layers.sh (tests/e2e/lib/cuda_layers_lib.sh), computed from the
# workload's parameters: per layer and per op launches, copies, syncs, the
# CUDA runtime call rows under their ops, each cuda_runtime slice of the
# trace inside its op; in the live JSON, tree and table and in `tbpf
# report` of the --record capture.
# timeout: 900
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
source "$(dirname "$0")/../lib/cuda_layers_lib.sh"
WLARGS+=(--rf)
NESTED=1

live() {   # live TAG PY TBPF-ARGS...
	local tag=$1 py=$2
	shift 2
	start_workload wl_$tag "$py" cuda_layers_model.py "${WLARGS[@]}"
	local pid; pid=$(get wl_$tag pid)
	start_tbpf tb_$tag --pid "$pid" --inproc "$@"
	go "$pid"
	wait_exit wl_$tag 300
	wait_exit tb_$tag 60
	[ "$(get wl_$tag rc)" = 0 ] || fail "$tag: workload exit $(get wl_$tag rc): $(tail -n 2 "$(get wl_$tag err)")"
	[ "$(get tb_$tag rc)" = 0 ] || fail "$tag: tbpf exit $(get tb_$tag rc): $(tail -n 2 "$(get tb_$tag err)")"
	grep -q "in-process RecordFunction callbacks" "$(get tb_$tag err)" ||
		fail "$tag: not the in-process mode: $(cat "$(get tb_$tag err)")"
	grep -qE "CUDA: [0-9]+ probes in [0-9]+ librar" "$(get tb_$tag err)" ||
		fail "$tag: no CUDA probes: $(cat "$(get tb_$tag err)")"
}

run_torch() {
	local tag=$1 py=$2
	need_torch "$py"
	live ${tag}j "$py" --format json -o "$T/$tag.json" --record "$T/$tag.tbpf"
	check_outputs "$tag" inproc
	# json without a capture: the records straight into the model
	live ${tag}m "$py" --format json -o "$T/$tag.m.json"
	check json "$T/$tag.m.json" "$tag inproc json (model feed)" || fail "$tag: json, model feed (see log)"
	check_rows json "$T/$tag.m.json" "$tag inproc json rows (model feed)" ||
		fail "$tag: json CUDA rows, model feed (see log)"
}

run_torch torch1 "$PY1"
live torch1t "$PY1" --format tree -o "$T/torch1.live.tree"
check tree "$T/torch1.live.tree" "torch1 inproc live tree" || fail "torch1: live tree (see log)"
cat "$T/torch1.live.tree"
live torch1s "$PY1" --format table -o "$T/torch1.live.table"
check table "$T/torch1.live.table" "torch1 inproc live table" || fail "torch1: live table (see log)"
check_rows table "$T/torch1.live.table" "torch1 inproc live table rows" || fail "torch1: live table CUDA rows (see log)"
sed -n '1,20p' "$T/torch1.live.table"
grep -A6 '^CUDA kernels' "$T/torch1.live.table"
# live chrome: cuda_runtime slices inside their ops
live torch1c "$PY1" --format chrome -o "$T/torch1.live.chrome"
check_timed "$T/torch1.json" "$T/torch1.live.chrome" "torch1 inproc live chrome" || fail "torch1: live chrome (see log)"
run_torch torch2 "$PY2"
# --no-python: no stacks, no layers; the kernels, syncs and copies by op
live torch2n "$PY2" --no-python --format json -o "$T/torch2.nopy.json"
python3 - "$T/torch2.nopy.json" $ITERS $CONV $HEAD $NORM <<'PY' || fail "torch2 --no-python (see log)"
import json, sys
j = json.load(open(sys.argv[1])); N, CONV, HEAD, NORM = map(int, sys.argv[2:6])
got = {k["name"]: {o["op"]: o["launches"] for o in k["ops"]} for k in j["kernels"]}
want = {"layer_conv_kernel(float*, int)": {"aten::lkconv": CONV * N},
        "layer_head_kernel(float*, int)": {"aten::lkhead": HEAD * N},
        "layer_norm_kernel(float*, int)": {"aten::lknorm": 2 * NORM * N}}
syncs = [(s["op"], s["api"], s["count"]) for s in j["syncs"]]
ops = {o["name"]: o.get("launches", 0) for o in j["ops"] if o.get("launches")}
if got != want or syncs != [("aten::lksync", "cudaStreamSynchronize", N)] or \
   ops != {"aten::lkconv": CONV * N, "aten::lkhead": HEAD * N, "aten::lknorm": 2 * NORM * N}:
    print("torch2 --no-python: kernels %s syncs %s op launches %s" % (got, syncs, ops)); sys.exit(1)
print("torch2 inproc --no-python: kernels, syncs and op launches by op as expected")
PY
# --no-cuda: no CUDA probes (the 2.8 wheel maps libcudart in any job): the
# ops are recorded, nothing CUDA is
start_workload wl_torch2x "$PY2" cuda_layers_model.py "${WLARGS[@]}"
start_tbpf tb_torch2x --pid "$(get wl_torch2x pid)" --inproc --no-cuda --no-python --format json \
	-o "$T/torch2.nocuda.json"
go "$(get wl_torch2x pid)"
wait_exit wl_torch2x 300
wait_exit tb_torch2x 60
[ "$(get tb_torch2x rc)" = 0 ] || fail "--no-cuda: tbpf exit $(get tb_torch2x rc): $(tail -n 2 "$(get tb_torch2x err)")"
grep -q "in-process RecordFunction callbacks" "$(get tb_torch2x err)" || fail "--no-cuda: not the in-process mode"
! grep -qE "CUDA: [0-9]+ probes" "$(get tb_torch2x err)" || fail "--no-cuda: CUDA probes attached"
python3 - "$T/torch2.nocuda.json" <<'PY' || fail "torch2 --no-cuda (see log)"
import json, sys
j = json.load(open(sys.argv[1]))
names = {o["name"] for o in j["ops"]}
cuda = [o["name"] for o in j["ops"] if o["name"].startswith("cuda") or o.get("launches")]
if not {"aten::lkconv", "aten::lkhead", "aten::lksync"} <= names or cuda or j.get("kernels") or j.get("syncs"):
    print("--no-cuda: ops %s, CUDA rows %s, kernels %s, syncs %s" %
          (sorted(names)[:20], cuda, j.get("kernels"), j.get("syncs"))); sys.exit(1)
print("torch2 inproc --no-cuda: the op rows, no CUDA rows, kernels or syncs")
PY
log "--inproc: CUDA launches, copies and syncs land in their ops and layers on every torch here"
