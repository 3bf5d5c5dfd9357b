#!/bin/bash
# test_shapes.sh - --record-shapes: tbpf's (op, input shapes) rows and
# calls equal torch.profiler's (record_shapes=True, raw records and
# key_averages(group_by_input_shape=True)) on a CNN, a transformer layer
# and the edge-case workload (0-dim, empty, 6- and 7-dim, transposed
# views, tensor lists, optional and undefined tensors, scalars, 9-, 12-
# and 20-dim tensors), and (2.x) make_fx on FakeTensors with symbolic
# sizes (recorded as undefined; the boxed path's calls added up), under
# torch 1.13 and 2.x; the FLOPs (mm, addmm, bmm, baddbmm, conv1d/2d/3d
# and convolution, add, mul) equal with_flops'; the Input type of every
# call (live JSON rows, and the capture's Chrome trace per event) equals
# torch.profiler's records' (dtypes(): dtype names, Scalar, ScalarList,
# TensorList, "" for None, optionals given and not); also on the lists
# workload (int lists of 30 and 31 entries: 2.x's ScalarList limit, read
# by the probe) and a nested tensor ([] and "", as torch records it).
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

shapes_case() {
	local py=$1 model=$2 iters=$3 label wl=wl_$2 tb=tb_$2 extra=() rec=() chrome=()
	label="torch $(torch_version "$py"), $model"
	log "== $label"
	"$py" "$WL/shapes_model.py" --profile --model "$model" --iters "$iters" \
		> "$T/ref_$model.json" 2> "$T/ref_$model.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref_$model.err" | tr '\n' ' ')"
	start_workload $wl "$py" shapes_model.py --model "$model" --iters "$iters"
	# every case is also recorded: the capture's rows (tbpf report) and its
	# Chrome trace's "Input Dims" and "Input type" are compared too
	rec=(--record "$T/$model.tbpf")
	start_tbpf $tb --pid "$(get $wl pid)" --format json --duration 600s --record-shapes --with-flops "${rec[@]}"
	go "$(get $wl pid)"
	wait_exit $wl 300
	expect_rc $wl 0
	wait_exit $tb 30
	expect_rc $tb 0
	grep -q "no input shapes" "$(get $tb err)" &&
		fail "$label: $(grep -m1 'no input shapes' "$(get $tb err)")"
	extra=(--flops)
	chrome=(--chrome "$T/$model.trace.json")
	if [ "$model" = symbolic ]; then
		# make_fx's modes call ops through torch.ops (the boxed path: no
		# shapes in the uprobe mode); a tensor list holding a symbolic
		# tensor: "TensorList" here, "" in torch 2.x (list elements not read)
		extra+=(--boxed-unshaped --types-except aten::cat,prims::cat)
		chrome=()
		# f's own torch.mm (::call) on symbolic sizes: [[], []] once a
		# step; the real one's sizes as torch.profiler's
		python3 - "$(get $tb out)" "$T/ref_$model.json" "$iters" <<-'EOF' ||
			import json, sys
			d, r, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
			got = {}
			for o in d["ops"]:
			    got[(o["name"], o.get("input_shapes"))] = got.get((o["name"], o.get("input_shapes")), 0) + o["calls"]
			real = r["events"].get("aten::mm|[[4, 3], [3, 5]]", 0)
			print("symbolic: aten::mm [[], []] %d (want %d), [[4, 3], [3, 5]] %d (torch.profiler %d)"
			      % (got.get(("aten::mm", "[[], []]"), 0), n, got.get(("aten::mm", "[[4, 3], [3, 5]]"), 0), real))
			sys.exit(got.get(("aten::mm", "[[], []]"), 0) != n or got.get(("aten::mm", "[[4, 3], [3, 5]]"), 0) != real or real != n)
		EOF
			fail "$label: the ::call mm on symbolic sizes is not [[], []] once a step"
	fi
	python3 "$E2E_DIR/compare_shapes.py" "$(get $tb out)" "$T/ref_$model.json" \
		--pid "$(get $wl pid)" --label "$label" "${extra[@]}" ||
		fail "$label: tbpf's (op, input shapes) rows differ from torch.profiler's (see log)"
	"$TBPF" report "$T/$model.tbpf" --format json --with-flops -o "$T/$model.report.json" ||
		fail "$label: tbpf report --format json failed"
	"$TBPF" report "$T/$model.tbpf" --format chrome -o "$T/$model.trace.json" ||
		fail "$label: tbpf report --format chrome failed"
	python3 "$E2E_DIR/compare_shapes.py" "$T/$model.report.json" "$T/ref_$model.json" \
		--pid "$(get $wl pid)" --label "$label (capture)" "${extra[@]}" "${chrome[@]}" ||
		fail "$label: the capture's (op, input shapes) rows or trace differ from torch.profiler's (see log)"
	log "$label: OK"
}

for py in $(torch_pythons); do
	need_torch "$py"
	if [ -n "${SHAPES_ONLY:-}" ]; then
		[[ "$SHAPES_ONLY" == symbolic && "$(torch_version "$py")" == 1.* ]] ||
			shapes_case "$py" "$SHAPES_ONLY" 3
		continue
	fi
	shapes_case "$py" edge 3
	shapes_case "$py" cnn 2
	shapes_case "$py" transformer 2
	shapes_case "$py" lists 3
	shapes_case "$py" nested 3
	# symbolic sizes (make_fx on FakeTensors): torch 2.x records them as undefined
	[[ "$(torch_version "$py")" == 1.* ]] || shapes_case "$py" symbolic 3
done
