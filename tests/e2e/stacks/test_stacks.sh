#!/bin/bash
# test_stacks.sh - --group-by-stack 5: tbpf's (op, Source Location) rows
# and calls equal torch.profiler's (with_stack=True; on torch 2.x with
# experimental_config verbose=True) raw records and
# key_averages(group_by_stack_n=5) on a model whose ops run at several
# call sites and in two instances of one module class, torch 1.13 and 2.x;
# so do `tbpf report --group-by-stack 5`'s rows from the run's capture.
# torch.profiler's "<built-in ...>" C call entries are left out of its
# stacks before the comparison (a frame stack does not show them).  The
# workload lingers a second after its work: tbpf names the stacks while
# the target lives (one seen in the last ~0.2 s before exit loses its
# module entries).
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

stacks_case() {
	local py=$1 nest=${2:-0} label
	label="torch $(torch_version "$py"), --group-by-stack 5${2:+, $nest frames deeper}"
	log "== $label"
	"$py" "$WL/stack_model.py" --profile --iters 100 --nest "$nest" > "$T/ref.json" 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	start_workload wl "$py" stack_model.py --iters 100 --nest "$nest" --linger 1
	start_tbpf tb --pid "$(get wl pid)" --format json --duration 600s --group-by-stack 5 \
		--record "$T/stacks.tbpf"
	go "$(get wl pid)"
	wait_exit wl 300
	expect_rc wl 0
	wait_exit tb 30
	expect_rc tb 0
	python3 "$E2E_DIR/compare_stacks.py" "$(get tb out)" "$T/ref.json" \
		--pid "$(get wl pid)" --label "$label" ||
		fail "$label: tbpf's (op, Source Location) rows differ from torch.profiler's (see log)"
	# the capture carries the entries: tbpf report gives the same rows
	"$TBPF" report "$T/stacks.tbpf" --format json --group-by-stack 5 -o "$T/report.json" ||
		fail "$label: tbpf report --group-by-stack 5 failed"
	python3 "$E2E_DIR/compare_stacks.py" "$T/report.json" "$T/ref.json" \
		--pid "$(get wl pid)" --label "$label (capture)" ||
		fail "$label: the capture's (op, Source Location) rows differ from torch.profiler's (see log)"
	"$TBPF" report "$T/stacks.tbpf" --group-by-stack 5 --row-limit 5 > "$T/report.txt" ||
		fail "$label: tbpf report --group-by-stack 5 (table) failed"
	grep -q "Source Location" "$T/report.txt" ||
		fail "$label: the capture's table has no Source Location column"
	log "$label: OK"
}

# --inproc: the agent's stacks, every RecordFunction (--all: every name,
# the events key_averages groups against tbpf's calls).  With --backward
# (a loss.backward() per step), the autograd nodes and the ops they run get
# their forward op's stack (torch.profiler's _set_backward_stacktraces).
# Live rows come from the model feed (json, no capture); the capture
# (-o x.tbpf) is reported with tbpf report --group-by-stack 5.  torch 1.13
# builds its event tree from microsecond times (start and duration
# truncated apart): the last small ops of a node fall out of it there (and
# same-name children out of their parent, unfolded), so on 1.13 the rows
# are compared with the raw aten records without backward (as the uprobe
# mode's) and only the nodes and their evaluate_function rows with it
# (--nodes); torch 2.x: every row.
inproc_case() {
	local py=$1 bw=$2 label cmp=(--all) wl=(--iters 20)
	label="torch $(torch_version "$py"), --inproc --group-by-stack 5${bw:+, backward}"
	[ -n "$bw" ] && wl+=(--backward)
	if [[ "$(torch_version "$py")" == 1.* ]]; then
		# 1.13's tree: nodes only; without backward, the raw aten records
		[ -n "$bw" ] && cmp+=(--nodes) || cmp=()
	fi
	log "== $label"
	"$py" "$WL/stack_model.py" --profile "${wl[@]}" > "$T/ref.json" 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	start_workload wl "$py" stack_model.py "${wl[@]}" --linger 1
	start_tbpf tb --pid "$(get wl pid)" --inproc --format json --duration 600s --group-by-stack 5
	go "$(get wl pid)"
	wait_exit wl 300
	expect_rc wl 0
	wait_exit tb 30
	expect_rc tb 0
	python3 "$E2E_DIR/compare_stacks.py" "$(get tb out)" "$T/ref.json" "${cmp[@]}" \
		--pid "$(get wl pid)" --label "$label" ||
		fail "$label: tbpf's (op, Source Location) rows differ from torch.profiler's (see log)"
	# a capture, then tbpf report
	"$py" "$WL/stack_model.py" --profile "${wl[@]}" > "$T/ref2.json" 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	start_workload wl2 "$py" stack_model.py "${wl[@]}" --linger 1
	start_tbpf tb2 --pid "$(get wl2 pid)" --inproc --duration 600s --group-by-stack 5 \
		-o "$T/inproc.tbpf"
	go "$(get wl2 pid)"
	wait_exit wl2 300
	expect_rc wl2 0
	wait_exit tb2 30
	expect_rc tb2 0
	"$TBPF" report "$T/inproc.tbpf" --format json --group-by-stack 5 -o "$T/report.json" ||
		fail "$label: tbpf report --group-by-stack 5 failed"
	python3 "$E2E_DIR/compare_stacks.py" "$T/report.json" "$T/ref2.json" "${cmp[@]}" \
		--pid "$(get wl2 pid)" --label "$label (capture)" ||
		fail "$label: the capture's (op, Source Location) rows differ from torch.profiler's (see log)"
	"$TBPF" report "$T/inproc.tbpf" --group-by-stack 5 --row-limit 5 > "$T/report.txt" ||
		fail "$label: tbpf report --group-by-stack 5 (table) failed"
	grep -q "Source Location" "$T/report.txt" ||
		fail "$label: the capture's table has no Source Location column"
	log "$label: OK"
}

# The uprobe mode with backward (--backward: a loss.backward() per step):
# the autograd nodes (their apply probed), their evaluate_function rows
# and the ops inside nodes get torch.profiler's stacks too
# (_set_backward_stacktraces: the sequence number and forward thread read
# from libtorch_cpu's thread_locals and the Node, bpf/bwstack.bpf.h).
# Every name the uprobe mode sees (--all, but the documented unseen
# detach/detach_): every event key_averages groups
# and its count; 1.13's event tree as above (--nodes, plus the raw aten
# records of ops outside nodes without backward: stacks_case).
uprobe_bw_case() {
	# the detach/detach_ RecordFunctions no probe sees (test_scopes.sh)
	local py=$1 label cmp=(--all --unseen detach,detach_) wl=(--iters 20 --backward)
	label="torch $(torch_version "$py"), --group-by-stack 5, backward"
	[[ "$(torch_version "$py")" == 1.* ]] && cmp+=(--nodes)
	log "== $label"
	"$py" "$WL/stack_model.py" --profile "${wl[@]}" > "$T/ref.json" 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	start_workload wl "$py" stack_model.py "${wl[@]}" --linger 1
	start_tbpf tb --pid "$(get wl pid)" --format json --duration 600s --group-by-stack 5 \
		--record "$T/bw.tbpf"
	go "$(get wl pid)"
	wait_exit wl 300
	expect_rc wl 0
	wait_exit tb 30
	expect_rc tb 0
	grep -q "backward ops keep their own" "$(get tb err)" &&
		fail "$label: $(grep "backward ops keep" "$(get tb err)")"
	python3 "$E2E_DIR/compare_stacks.py" "$(get tb out)" "$T/ref.json" "${cmp[@]}" \
		--pid "$(get wl pid)" --label "$label" ||
		fail "$label: tbpf's (op, Source Location) rows differ from torch.profiler's (see log)"
	"$TBPF" report "$T/bw.tbpf" --format json --group-by-stack 5 -o "$T/report.json" ||
		fail "$label: tbpf report --group-by-stack 5 failed"
	python3 "$E2E_DIR/compare_stacks.py" "$T/report.json" "$T/ref.json" "${cmp[@]}" \
		--pid "$(get wl pid)" --label "$label (capture)" ||
		fail "$label: the capture's (op, Source Location) rows differ from torch.profiler's (see log)"
	log "$label: OK"
}

for py in $(torch_pythons); do
	need_torch "$py"
	if [ -n "${STACKS_ONLY:-}" ]; then
		"$STACKS_ONLY" "$py" ${STACKS_ARGS:-}
		continue
	fi
	stacks_case "$py"
	# frames over several pages of the data stack: the walker's reads of
	# them at once (bpf/pystack.bpf.h, tbpf_thread.py_lo)
	stacks_case "$py" 40
	uprobe_bw_case "$py"
	inproc_case "$py" ""
	inproc_case "$py" backward
done
