#!/bin/bash
# test_inproc.sh - `--inproc` (RecordFunction callbacks
# registered by libtbpf_inproc.so inside the target) on torch 1.13 and
# 2.8: every row of torch.profiler's key_averages() with its count, none
# unseen (scopes_model.py: record_function labels on two threads, a
# DataLoader, SGD and AdamW, backward, a custom autograd.Function); the
# checksum equals the torch.profiler run's; the callback is removed after
# the run (a second --inproc run attaches to the same agent, no second
# injection).
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

inproc_rows_case() {
	local py=$1 iters=$2 v=$3 label wl=wl_i tb=tb_i
	label="torch $(torch_version "$py") --inproc, 2 threads, $iters batches each"
	log "== $label"
	"$py" "$WL/scopes_model.py" --profile --iters "$iters" --threads 2 \
		> "$T/prof_i.json" 2> "$T/prof_i.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/prof_i.err" | tr '\n' ' ')"
	start_workload $wl "$py" scopes_model.py --iters "$iters" --threads 2
	start_tbpf $tb --pid "$(get $wl pid)" --inproc --format json --duration 600s -v \
		--record "$T/inproc_$v.tbpf"
	go "$(get $wl pid)"
	wait_exit $wl 300
	expect_rc $wl 0
	wait_exit $tb "${TB_EXIT_TIMEOUT:-30}"
	expect_rc $tb 0
	local want got
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$T/prof_i.json")
	got=$(result_field "$(get $wl out)" checksum)
	[ "$want" = "$got" ] || fail "$label: workload checksum $got under tbpf, $want under torch.profiler"
	grep -q '"mode": *"in-process RecordFunction callbacks"' "$(get $tb out)" ||
		fail "$label: the json does not say the in-process mode"
	python3 "$E2E_DIR/compare_rows.py" "$(get $tb out)" "$T/prof_i.json" --pid "$(get $wl pid)" \
		--nest "train_step=forward+backward+optimizer" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
	"$ROOT/tests/formats/check_all.sh" "$T/inproc_$v.tbpf" "$TBPF" "$T/formats$v" > "$T/check_all$v.log" 2>&1 ||
		fail "$label: check_all: $(grep FAIL "$T/check_all$v.log" | head -1)"
	log "$(tail -n 7 "$T/check_all$v.log")"
	log "$label: OK"
}

two_pids_case() {
	local py=$1 label pa pb
	label="torch $(torch_version "$py") --inproc, two processes"
	log "== $label"
	start_workload wa "$py" scopes_model.py --iters 5 --threads 2
	start_workload wb "$py" scopes_model.py --iters 5 --threads 2
	pa=$(get wa pid) pb=$(get wb pid)
	"$py" "$WL/scopes_model.py" --profile --iters 5 --threads 2 > "$T/prof_2.json" 2> "$T/prof_2.err" ||
		fail "$label: torch.profiler run failed"
	start_tbpf tb2 --pid "$pa" --pid "$pb" --inproc --format json --duration 600s
	go "$pa"
	go "$pb"
	wait_exit wa 300
	wait_exit wb 300
	expect_rc wa 0
	expect_rc wb 0
	wait_exit tb2 30
	expect_rc tb2 0
	for p in "$pa" "$pb"; do
		python3 "$E2E_DIR/compare_rows.py" "$(get tb2 out)" "$T/prof_2.json" --pid "$p" ||
			fail "$label: pid $p: rows differ from torch.profiler's (see log)"
	done
	log "$label: OK"
}

inproc_rows_case /usr/bin/python3 10 1
two_pids_case /usr/bin/python3
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	inproc_rows_case "$PY2" 10 2
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
