#!/bin/bash
# test_scopes.sh - issue 15: every row of torch.profiler's key_averages()
# (not only aten::) with its count, in tbpf's default mode, torch 1.13 and
# 2.x: nested record_function labels on two threads, a DataLoader
# (num_workers=0), SGD and AdamW, backward, a custom autograd.Function
# (tests/workloads/scopes_model.py, compared by compare_rows.py).  The rows
# the uprobe mode cannot see are listed here and in the README, and must be
# exactly the missing ones.  Self times: a label that holds only other
# labels has self = total - its children's totals.
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
need_tbpf

# Python-side rows: the custom Function's forward (RECORD_FUNCTION in
# libtorch_python's THPFunction_apply), its backward node (a PyNode, named
# after the Python class), and the "detach"/"detach_" RecordFunctions of
# VariableTypeManual, which no probed function brackets.  The PyNode's
# evaluate_function row is there, without the node's name.
UNSEEN="MyFnBackward,detach,detach_"
RENAMED="autograd::engine::evaluate_function=autograd::engine::evaluate_function: MyFnBackward"

scopes_case() {
	local py=$1 iters=$2 label wl=wl_s tb=tb_s
	label="torch $(torch_version "$py"), 2 threads, $iters batches each"
	log "== $label"
	profiled_pair "$py" scopes_model.py "--iters $iters --threads 2" $wl $tb "$label"
	python3 "$E2E_DIR/compare_rows.py" "$(get $tb out)" "$T/$wl.prof.json" --pid "$(get $wl pid)" \
		--unseen "$UNSEEN" --renamed "$RENAMED" --nest "train_step=forward+backward+optimizer" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
	log "$label: OK"
}

scopes_case /usr/bin/python3 10
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	scopes_case "$PY2" 10
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
