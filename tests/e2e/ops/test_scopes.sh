#!/bin/bash
# test_scopes.sh - every row of torch.profiler's key_averages()
# (not only aten::) with its count, in tbpf's default mode, torch 1.13 and
# 2.x: nested record_function labels on two threads, a DataLoader
# (num_workers=0), SGD and AdamW, backward, a custom autograd.Function with
# its backward node (MyFnBackward) and that node's evaluate_function row,
# and a second custom Function whose backward raises a Python exception
# (BadFn, --bad-backward: the C++ exception leaves PyNode::apply through
# its return probe's frame; the job's result and its caught count must be
# unchanged) (tests/workloads/scopes_model.py, compared by
# compare_rows.py).  The rows the uprobe mode cannot see are listed here
# and in docs/rows.md, and must be exactly the missing ones.  Self times: a
# label that holds only other labels has self = total - its children's
# totals; so do the custom Functions' backward nodes (each runs one op
# nothing else runs: aten::sub, aten::neg) and their evaluate_function
# rows (which hold the node).
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

# The "detach"/"detach_" RecordFunctions of VariableTypeManual, which no
# probed function brackets.
UNSEEN="detach,detach_"
EVAL="autograd::engine::evaluate_function"

# scopes_case PY ITERS [TBPF ARGS...]
scopes_case() {
	local py=$1 iters=$2 label wl=wl_s tb=tb_s cats=
	shift 2
	# torch 2.x, return probes: also the Kineto categories of tbpf's
	# TensorBoard trace against torch.profiler's own traces of each thread
	if [[ $(torch_version "$py") != 1.* ]] && [ $# -eq 0 ]; then
		cats="--trace $T/ref_trace"
		set -- --tensorboard "$T/tbdir"
	fi
	label="torch $(torch_version "$py"), 2 threads, $iters batches each${*:+, $*}"
	log "== $label"
	profiled_pair "$py" scopes_model.py "--iters $iters --threads 2 --bad-backward 2 $cats" $wl $tb "$label" "$@"
	local out caught
	out=$(get $wl out)
	caught=$(result_field "$out" caught)
	[ "$caught" -gt 0 ] && [ "$caught" = "$(result_field "$out" expected_caught)" ] ||
		fail "$label: BadFn's backward errors: caught $caught of $(result_field "$out" expected_caught) under tbpf"
	python3 "$E2E_DIR/compare_rows.py" "$(get $tb out)" "$T/$wl.prof.json" --pid "$(get $wl pid)" \
		--unseen "$UNSEEN" --nest "train_step=forward+backward+optimizer" \
		--nest "MyFnBackward=aten::sub" --nest "$EVAL: MyFnBackward=MyFnBackward" \
		--nest "BadFnBackward=aten::neg" --nest "$EVAL: BadFnBackward=BadFnBackward" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
	if [ -n "$cats" ]; then
		python3 "$E2E_DIR/compare_cats.py" "$T"/tbdir/*.pt.trace.json "$T"/ref_trace.*.json \
			--need 'train_step#1' --need MyFn --need MyFnBackward --need "$EVAL: MyFnBackward" \
			--need "Optimizer.step#AdamW.step" --need aten::addmm ||
			fail "$label: trace categories differ from Kineto's (see log)"
	fi
	log "$label: OK"
}

scopes_case /usr/bin/python3 10
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	scopes_case "$PY2" 10
	# entry probes only (what tbpf falls back to without the guard): the
	# PyNode frames close by the stack-pointer rule and at the catch
	scopes_case "$PY2" 10 --exits infer
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
