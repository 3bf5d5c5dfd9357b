#!/bin/bash
# test_inproc_opnames.sh - issue 19: `--inproc` names ops by the schema
# pointer their RecordFunction holds (agent/fnname.h), reading the name
# only the first time a thread sees a pointer.  A torch.library operator
# deleted from Python frees its dispatcher entry, and the next operator
# defined is often allocated at the same address (seen on torch 2.8): a
# cached pointer would then name the new op after the old one.  The
# workload (custom_ops.py) defines, calls (10, 20, 30, ... times) and
# deletes one op after another; torch 1.13 and 2.8: the target finishes
# with the torch.profiler run's result, and every row and count equals
# torch.profiler's (compare_rows.py), so each op keeps its own name and
# count.  An agent whose guard is taken out (the cleanup hook not moving
# the epoch) fails here on 2.8.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root
need_tbpf

OPS=${OPS:-8}

opnames_case() {
	local py=$1 v=$2 label
	need_torch "$py"
	label="torch $(torch_version "$py"), $OPS custom ops defined and deleted"
	log "== $label"
	"$py" "$WL/custom_ops.py" --profile --ops "$OPS" > "$T/prof$v.json" 2> "$T/prof$v.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/prof$v.err" | tr '\n' ' ')"
	start_workload wl$v "$py" custom_ops.py --ops "$OPS"
	start_tbpf tb$v --pid "$(get wl$v pid)" --inproc --format json --duration 120s
	go "$(get wl$v pid)"
	wait_exit wl$v 120
	expect_rc wl$v 0
	wait_exit tb$v 30
	expect_rc tb$v 0
	local want got
	want=$(python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["x"])' "$T/prof$v.json")
	got=$(result_field "$(get wl$v out)" x)
	[ "$want" = "$got" ] || fail "$label: result $got under --inproc, $want under torch.profiler"
	python3 "$E2E_DIR/compare_rows.py" "$(get tb$v out)" "$T/prof$v.json" --pid "$(get wl$v pid)" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
}

opnames_case "$PY1" 1
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	opnames_case "$PY2" 2
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
