#!/bin/bash
# test_inproc_opnames.sh - `--inproc` names ops by the schema
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
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

OPS=${OPS:-8}

opnames_case() {
	local py=$1 v=$2 label
	need_torch "$py"
	label="torch $(torch_version "$py"), $OPS custom ops defined and deleted"
	log "== $label"
	inproc_vs_profiler "$v" "$label" "$py" custom_ops.py --ops "$OPS"
	python3 "$E2E_DIR/compare_rows.py" "$(get tb$v out)" "$T/prof$v.json" --pid "$(get wl$v pid)" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
}

opnames_case "$PY1" 1
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	opnames_case "$PY2" 2
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
