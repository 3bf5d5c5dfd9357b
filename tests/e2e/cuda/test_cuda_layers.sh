#!/bin/bash
# test_cuda_layers.sh - CUDA launches, copies and syncs attributed to the
# nn.Module layers that issued them, on torch 1.13 and 2.x.
#
# tests/workloads/cuda_layers_model.py runs real torch nn.Modules whose
# forward() calls, through ctypes, at::_ops::lk*::call in
# build/tests/native/cuda/libtorch_cpu-layers.so (found by tbpf as a
# libtorch by its name), which launch known kernels, copy and sync through
# the real /usr/local/cuda libcudart (every call fails without a GPU; the
# probes fire).  Per iteration: Model/encoder/conv launches
# layer_conv_kernel CONV times, Model/encoder/norm and Model/head/norm
# layer_norm_kernel NORM times each, Model/head layer_head_kernel HEAD
# times and syncs once, Model/encoder copies COPY bytes once.  The expected
# numbers below are computed here from those parameters; they must come
# out exactly in the live JSON, tree and table and in `tbpf report` of the
# recorded capture (json, tree, table).
# timeout: 900
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
source "$(dirname "$0")/../lib/cuda_layers_lib.sh"

# live run: tbpf ARGS against a fresh workload under PY
live() {
	local tag=$1 py=$2
	shift 2
	start_workload wl_$tag "$py" cuda_layers_model.py "${WLARGS[@]}"
	local pid; pid=$(get wl_$tag pid)
	start_tbpf tb_$tag --pid "$pid" "$@"
	go "$pid"
	wait_exit wl_$tag 300
	wait_exit tb_$tag 60
	[ "$(get wl_$tag rc)" = 0 ] || fail "$tag: workload exit $(get wl_$tag rc): $(tail -n 2 "$(get wl_$tag err)")"
	[ "$(get tb_$tag rc)" = 0 ] || fail "$tag: tbpf exit $(get tb_$tag rc): $(tail -n 2 "$(get tb_$tag err)")"
}

run_torch() {
	local tag=$1 py=$2
	need_torch "$py"
	live ${tag}j "$py" --format json -o "$T/$tag.json" --record "$T/$tag.tbpf"
	check_outputs "$tag" live
}

run_torch torch1 "$PY1"
live torch1t "$PY1" --format tree -o "$T/torch1.live.tree"
check tree "$T/torch1.live.tree" "torch1 live tree" || fail "torch1: live tree (see log)"
cat "$T/torch1.live.tree"
live torch1s "$PY1" --format table -o "$T/torch1.live.table"
check table "$T/torch1.live.table" "torch1 live table" || fail "torch1: live table (see log)"
check_rows table "$T/torch1.live.table" "torch1 live table rows" || fail "torch1: live table CUDA rows (see log)"
sed -n '1,16p' "$T/torch1.live.table"
grep -A6 '^CUDA kernels' "$T/torch1.live.table"
run_torch torch2 "$PY2"
log "CUDA launches, copies and syncs land in their layers on every torch here"
