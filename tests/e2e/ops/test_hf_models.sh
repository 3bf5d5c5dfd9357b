#!/bin/bash
# test_hf_models.sh - real model code as users train it: Hugging Face
# transformers' BertForMaskedLM and GPT2LMHeadModel (small configs, random
# weights, no download; tests/workloads/hf_train.py), 8 AdamW training
# steps on torch 2.8 (and the newest), in the default mode and with --inproc: every row of
# torch.profiler's key_averages() (aten ops, autograd nodes and their
# evaluate_function rows, Optimizer.step#AdamW.step, zero_grad) with its
# count, and the same losses as the torch.profiler run.  The default mode
# may miss only the documented unseen rows (detach, detach_), --inproc
# none.
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
# timeout: 900
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY2"
"$PY2" -c 'import transformers' 2> "$T/hf-import.err" ||
	fail "$PY2 cannot import transformers ($(tail -n1 "$T/hf-import.err")): run tests/setup.sh"

# hf_case MODEL [TBPF ARGS...]
hf_case() {
	local model=$1 label wl=wl_$1 tb=tb_$1 unseen=
	shift
	label="torch $(torch_version "$PY2"), Hugging Face $model, 8 AdamW steps${*:+, $*}"
	log "== $label"
	profiled_pair "$PY2" hf_train.py "--model $model --iters 8" "$wl" "$tb" "$label" "$@"
	# the uprobe mode cannot see VariableTypeManual's detach RecordFunctions
	# (docs/rows.md): those torch.profiler has are unseen
	if [[ " $* " != *" --inproc "* ]]; then
		unseen=$(python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
print(",".join(k for k in ("detach", "detach_") if k in rows))' "$T/$wl.prof.json")
	fi
	python3 "$E2E_DIR/compare_rows.py" "$(get "$tb" out)" "$T/$wl.prof.json" --pid "$(get "$wl" pid)" \
		--unseen "$unseen" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
	log "$label: OK"
}

for m in bert gpt2; do
	hf_case $m
	hf_case $m --inproc
done
