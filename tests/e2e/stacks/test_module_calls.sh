#!/bin/bash
# test_module_calls.sh - torchprof's tree: a module's Count is
# how often its forward ran, and rows come in model order.  On torch 1.13
# and 2.x, attached by --pid and started by `tbpf run`, tbpf's
# forward_calls per layer path equal forward-hook counts of the same
# iterations (tests/workloads/module_calls.py: one instance called twice
# in a forward, a ModuleList loop, one block called three times from one
# line, a module shared by two parents, Identity modules that run no op,
# a closure), its layer "order" lists the paths as named_modules() does,
# and the text tree prints them in that order with those counts.
# timeout: 600
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=10

# check REF TBPF_JSON TREE_TXT SCALE LABEL: SCALE = tbpf's iterations over
# the reference's (tbpf run also sees the warm-up iteration).
check() {
	python3 "$(dirname "$0")/../lib/check_module_calls.py" "$@"
}

run_one() {
	local py=$1 tag=$2 pid
	log "== $tag: forward hooks"
	"$py" "$WL/module_calls.py" --json --iters $ITERS > "$T/ref_$tag.json" 2> "$T/ref_$tag.err" ||
		fail "$tag: reference run failed: $(tail -n 2 "$T/ref_$tag.err" | tr '\n' ' ')"
	log "== $tag: --pid"
	start_workload wl_$tag "$py" module_calls.py --wait --iters $ITERS --linger 2
	pid=$(get wl_$tag pid)
	start_tbpf tb_$tag --pid "$pid" --format json -o "$T/pid_$tag.json" --record "$T/pid_$tag.tbpf"
	go "$pid"
	wait_exit wl_$tag 300
	expect_rc wl_$tag 0
	wait_exit tb_$tag 60
	expect_rc tb_$tag 0
	# the tree of the same run, from its capture (one model for both)
	"$TBPF" report --format tree "$T/pid_$tag.tbpf" > "$T/pid_$tag.tree" ||
		fail "$tag: tbpf report --format tree failed"
	cat "$T/pid_$tag.tree"
	check "$T/ref_$tag.json" "$T/pid_$tag.json" "$T/pid_$tag.tree" 1 "$tag --pid" ||
		fail "$tag --pid: module calls or order differ from forward hooks (see log)"
	"$TBPF" report --format json -o "$T/rep_$tag.json" "$T/pid_$tag.tbpf" ||
		fail "$tag: tbpf report --format json failed"
	check "$T/ref_$tag.json" "$T/rep_$tag.json" "$T/pid_$tag.tree" 1 "$tag report" ||
		fail "$tag report: the capture's module calls differ from the live ones (see log)"
	log "== $tag: tbpf run"
	"$TBPF" run --format json -o "$T/run_$tag.json" -- "$py" "$WL/module_calls.py" \
		--iters $ITERS --linger 2 > "$T/run_$tag.out" 2> "$T/run_$tag.err" ||
		fail "$tag: tbpf run failed: $(tail -n 2 "$T/run_$tag.err" | tr '\n' ' ')"
	"$TBPF" run --format tree -- "$py" "$WL/module_calls.py" --iters $ITERS --linger 2 \
		> "$T/run_$tag.tree" 2> "$T/run_tree_$tag.err" ||
		fail "$tag: tbpf run --format tree failed"
	# tbpf run also counts the warm-up iteration
	check "$T/ref_$tag.json" "$T/run_$tag.json" "$T/run_$tag.tree" \
		"$(python3 -c "print(($ITERS + 1) / $ITERS)")" "$tag tbpf run" ||
		fail "$tag tbpf run: module calls or order differ from forward hooks (see log)"
}

if first_run; then run_one "$PY1" torch1; fi
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	run_one "$PY2" torch2
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
log "OK"
