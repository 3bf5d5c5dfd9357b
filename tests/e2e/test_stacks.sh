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
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
need_tbpf

stacks_case() {
	local py=$1 label
	label="torch $(torch_version "$py"), --group-by-stack 5"
	log "== $label"
	"$py" "$WL/stack_model.py" --profile --iters 100 > "$T/ref.json" 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	start_workload wl "$py" stack_model.py --iters 100 --linger 1
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

for py in "$PY1" "$PY2"; do
	need_torch "$py"
	stacks_case "$py"
done
