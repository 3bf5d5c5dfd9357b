#!/bin/bash
# test_layers.sh - the nn.Module layer tree on torch 1.13 and 2.x:
# tbpf's layer paths are exactly the named_modules() paths of the modules
# that ran, and each layer's op counts equal what torch.profiler attributes
# to that layer (forward hooks marking each module with record_function,
# the markers' own ops taken off: tests/workloads/layers_model.py --json).
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=10
run_one() {
	local py=$1 tag=$2
	log "== $tag: torch.profiler reference"
	"$py" "$WL/layers_model.py" --json --iters $ITERS > "$T/ref_$tag.json" 2> "$T/ref_$tag.err" ||
		fail "$tag: reference run failed: $(tail -n 2 "$T/ref_$tag.err" | tr '\n' ' ')"
	start_workload wl_$tag "$py" layers_model.py --wait --iters $ITERS
	local pid; pid=$(get wl_$tag pid)
	start_tbpf tb_$tag --pid "$pid" --format json -o "$T/tbpf_$tag.json"
	go "$pid"
	wait_exit wl_$tag 300
	wait_exit tb_$tag 60
	[ "$(get tb_$tag rc)" = 0 ] || fail "$tag: tbpf exit $(get tb_$tag rc): $(tail -n 2 "$(get tb_$tag err)")"
	python3 "$(dirname "$0")/../lib/check_layer_ops.py" "$T/ref_$tag.json" "$T/tbpf_$tag.json" "$tag" ||
		fail "$tag: layer tree differs from named_modules()/torch.profiler (see log)"
}

need_torch "$PY2"
if first_run; then
	need_torch "$PY1"
	run_one "$PY1" torch1
fi
run_one "$PY2" torch2
log "layer trees match on every torch here"
