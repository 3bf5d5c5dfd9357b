#!/bin/bash
# test_torchscript.sh - a TorchScript model in the default mode.
# torch.jit.script(Linear-ReLU-Linear) called 50 times runs its operators by
# the boxed path (createOperatorFromC10's std::function, boxedop.h), which
# never passes at::_ops::<op>::call; tbpf probes that one entry and names
# the operator from its OperatorHandle.  Every aten:: op count equals
# torch.profiler's (aten::linear 100, aten::relu 50 among them), under
# no_grad (inference) and with grad, on torch 1.13 and 2.x; the same with
# --redispatch (no op counted twice).  With grad, the profiling executor's
# aten::detach RecordFunctions (VariableTypeManual, no probed function
# brackets them: docs/rows.md) are left out of the comparison.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"

# ts_case PY V MODE [TBPF ARGS]: MODE nograd or grad
ts_case() {
	local py=$1 v=$2 mode=$3 label wl tb only sargs="--iters 50"
	shift 3
	wl=tw$v$mode; tb=tt$v$mode
	[ "$mode" = nograd ] && sargs="$sargs --no-grad"
	label="torch $(torch_version "$py"), TorchScript, $mode${1:+ $*}"
	log "== $label"
	profiled_pair "$py" torchscript_model.py "$sargs" $wl $tb "$label" "$@"
	only=$(python3 -c 'import json,sys; print(",".join(k for k in json.load(open(sys.argv[1]))["ops"] if k != "aten::detach"))' "$T/$wl.prof.json")
	for op in aten::linear aten::relu; do
		[[ ",$only," == *",$op,"* ]] || fail "$label: torch.profiler has no $op row"
	done
	python3 "$E2E_DIR/compare_counts.py" "$(get $tb out)" "$T/$wl.prof.json" \
		--pid "$(get $wl pid)" --label "$label" --only "$only" ||
		fail "$label: tbpf's counts differ from torch.profiler's (see log)"
	log "$label: OK"
}

ts_case "$PY1" 1 nograd
ts_case "$PY1" 1 grad
ts_case "$PY1" 1 nograd --redispatch
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	ts_case "$PY2" 2 nograd
	ts_case "$PY2" 2 grad
	ts_case "$PY2" 2 nograd --redispatch
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
log "PASS"
