#!/bin/bash
# test_inproc_shapes.sh - `--inproc --record-shapes --with-flops` (the
# RecordFunction agent reads each RecordFunction's input IValues):
# tbpf's (op, input shapes) rows and calls equal
# torch.profiler's (record_shapes=True raw records and
# key_averages(group_by_input_shape=True)), every row, not only aten ops
# (autograd nodes with their gradients' shapes, evaluate_function,
# optimizer scopes), and so does each row's Input type (its records'
# dtypes()), on the edge-case workload (0-dim,
# empty, 6- and 7-dim, transposed views, tensor lists, optional and
# undefined tensors, scalars, 9-, 12- and 20-dim tensors), make_fx on
# FakeTensors with symbolic sizes (2.x), a CNN, a transformer layer and the lists
# workload (int lists of 30 and 31 entries, empty, float lists, lists of
# optional tensors) and a nested tensor ([] and "" as torch records it),
# torch 1.13 and 2.8; FLOPs equal with_flops'; the
# workload's result is unchanged; the edge and lists cases also through a
# capture (tbpf report json, chrome's Input Dims and every event's Input
# type, per call: a row keeps no types when its calls had several).  Then the target is unharmed when tbpf is SIGKILLed mid-run with
# shapes on, and a second --record-shapes attach reuses the agent.
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

inproc_shapes_case() {
	local py=$1 model=$2 iters=$3 label wl=wl_$2 tb=tb_$2 rec=()
	label="torch $(torch_version "$py") --inproc, $model"
	log "== $label"
	"$py" "$WL/shapes_model.py" --profile --model "$model" --iters "$iters" \
		> "$T/ref_$model.json" 2> "$T/ref_$model.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref_$model.err" | tr '\n' ' ')"
	start_workload $wl "$py" shapes_model.py --model "$model" --iters "$iters"
	case $model in edge|lists) rec=(--record "$T/$model.tbpf") ;; esac
	start_tbpf $tb --pid "$(get $wl pid)" --inproc --format json --duration 600s \
		--record-shapes --with-flops -v "${rec[@]}"
	go "$(get $wl pid)"
	wait_exit $wl 300
	expect_rc $wl 0
	wait_exit $tb 30
	expect_rc $tb 0
	grep -q "without input shapes\|uprobe mode" "$(get $tb err)" &&
		fail "$label: $(grep -m1 'without input shapes\|uprobe mode' "$(get $tb err)")"
	grep -q '"mode": *"in-process RecordFunction callbacks"' "$(get $tb out)" ||
		fail "$label: the json does not say the in-process mode"
	python3 "$E2E_DIR/compare_shapes.py" "$(get $tb out)" "$T/ref_$model.json" \
		--pid "$(get $wl pid)" --label "$label" --flops --all ||
		fail "$label: tbpf's (op, input shapes) rows differ from torch.profiler's (see log)"
	if [ ${#rec[@]} != 0 ]; then
		"$TBPF" report "$T/$model.tbpf" --format json --with-flops -o "$T/$model.report.json" ||
			fail "$label: tbpf report --format json failed"
		"$TBPF" report "$T/$model.tbpf" --format chrome -o "$T/$model.trace.json" ||
			fail "$label: tbpf report --format chrome failed"
		python3 "$E2E_DIR/compare_shapes.py" "$T/$model.report.json" "$T/ref_$model.json" \
			--pid "$(get $wl pid)" --label "$label (capture)" --flops --all \
			--chrome "$T/$model.trace.json" ||
			fail "$label: the capture's rows or trace differ from torch.profiler's (see log)"
	fi
	log "$label: OK"
}

# SIGKILL of tbpf while the callbacks read inputs: the agent's watchdog
# removes them; the target finishes with the checksum of an unprofiled
# run; then a new --record-shapes run on the same (still loaded) agent
# counts as torch.profiler does.
inproc_shapes_kill() {
	local py=$1 label want got
	label="torch $(torch_version "$py") --inproc --record-shapes, SIGKILL of tbpf"
	log "== $label"
	start_workload wk "$py" shapes_model.py --model transformer --iters 4000 --checksum
	start_workload wref "$py" shapes_model.py --model transformer --iters 4000 --checksum
	go "$(get wref pid)"
	wait_exit wref 300
	expect_rc wref 0
	want=$(result_field "$(get wref out)" checksum)
	start_tbpf tk --pid "$(get wk pid)" --inproc --record-shapes --format json --duration 600s
	go "$(get wk pid)"
	sleep 1.5
	kill -9 "$(get tk pid)" || fail "$label: tbpf had exited before the SIGKILL"
	wait_exit wk 300
	expect_rc wk 0
	got=$(result_field "$(get wk out)" checksum)
	[ -n "$want" ] && [ "$want" = "$got" ] ||
		fail "$label: workload checksum '$got' after SIGKILL, '$want' unprofiled"
	log "$label: OK (checksum $got)"
}

# attach/detach cycles on one running job, shapes on, off, on (the agent
# re-registers its callbacks with and without needs_inputs): each run's
# rows have shapes exactly when asked, the agent ends "stopped", and the
# job's result equals an unprofiled run's.
inproc_shapes_cycles() {
	local py=$1 label want got pid i args out
	label="torch $(torch_version "$py") --inproc, shapes on/off/on cycles"
	log "== $label"
	start_workload wc "$py" shapes_model.py --model transformer --iters 20000 --checksum
	start_workload wcr "$py" shapes_model.py --model transformer --iters 20000 --checksum
	go "$(get wcr pid)"
	wait_exit wcr 300
	expect_rc wcr 0
	want=$(result_field "$(get wcr out)" checksum)
	pid=$(get wc pid)
	go "$pid"
	for i in 1 2 3; do
		args=(--record-shapes)
		[ $i = 2 ] && args=()
		out="$T/cycle$i.json"
		"$TBPF" --pid "$pid" --inproc --format json --duration 0.7s "${args[@]}" -o "$out" \
			2> "$T/cycle$i.err" || fail "$label: run $i failed: $(tail -n 2 "$T/cycle$i.err")"
		python3 - "$out" "$pid" "${#args[@]}" << 'PY' || fail "$label: run $i: rows and shapes disagree with what was asked"
import json, sys
doc = json.load(open(sys.argv[1])); pid = int(sys.argv[2]); want = sys.argv[3] == "1"
rows = [o for o in doc["ops"] if o["pid"] == pid and o["name"].startswith("aten::")]
assert rows, "no aten rows"
has = [bool(o.get("input_shapes")) for o in rows]
assert all(has) if want else not any(has), "input_shapes on %d of %d rows" % (sum(has), len(has))
PY
	done
	_alive "$pid" || fail "$label: the job ended before the cycles did: raise --iters"
	python3 "$E2E_DIR/inproc_state.py" "$pid" | grep -q "state=stopped" ||
		fail "$label: the agent says $(python3 "$E2E_DIR/inproc_state.py" "$pid")"
	wait_exit wc 300
	expect_rc wc 0
	got=$(result_field "$(get wc out)" checksum)
	[ -n "$want" ] && [ "$want" = "$got" ] || fail "$label: checksum '$got', '$want' unprofiled"
	log "$label: OK"
}

for py in $(torch_pythons); do
	need_torch "$py"
	if [ -n "${SHAPES_ONLY:-}" ]; then
		[[ "$SHAPES_ONLY" == symbolic && "$(torch_version "$py")" == 1.* ]] ||
			inproc_shapes_case "$py" "$SHAPES_ONLY" 3
		continue
	fi
	inproc_shapes_case "$py" edge 3
	inproc_shapes_case "$py" cnn 2
	inproc_shapes_case "$py" transformer 2
	inproc_shapes_case "$py" lists 3
	inproc_shapes_case "$py" nested 3
	# symbolic sizes (make_fx on FakeTensors): torch 2.x records them as undefined
	[[ "$(torch_version "$py")" == 1.* ]] || inproc_shapes_case "$py" symbolic 3
	inproc_shapes_kill "$py"
	inproc_shapes_cycles "$py"
done
