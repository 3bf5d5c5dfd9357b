#!/bin/bash
# test_inproc_names.sh - `--inproc` on a job that names a
# record_function after every step (many_names.py, 20,000 distinct names,
# more than the agent's 8,192-entry name table).  The agent once hung the
# target here: its set of seen name hashes took every new name and, once
# full (16,384), the next new name spun forever inside the RecordFunction
# callback.  Torch 1.13 and 2.8: the target finishes with the result of the
# torch.profiler run, every aten:: count equals torch.profiler's, and tbpf
# says how many records' names did not fit.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

STEPS=${STEPS:-20000}

names_case() {
	local py=$1 v=$2 label
	need_torch "$py"
	label="torch $(torch_version "$py"), $STEPS step names"
	log "== $label"
	inproc_vs_profiler "$v" "$label" "$py" many_names.py --steps "$STEPS"
	compare_counts "$(get tb$v out)" "$T/prof$v.json" "$(get wl$v pid)" "$label"
	grep -E "records' names did not fit" "$(get tb$v err)" ||
		fail "$label: tbpf did not say that names were lost: $(tr '\n' ' ' < "$(get tb$v err)")"
}

names_case "$PY1" 1
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	names_case "$PY2" 2
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
