#!/bin/bash
# test_infer_race.sh - in --exits infer mode a frame is closed once, also
# when the CPU-clock sample or the switch-out program lands on the thread
# while a scope probe (RecordFunction constructor or end) is closing op
# frames (test_scopes saw aten::relu and aten::clamp_min at 21
# calls for 20 once in ~10 runs; the scope probes did not mark the thread
# busy, so the sampler closed the same frames again).
# tests/workloads/infer_race.py runs, 20,000 times: aten::relu, then a
# custom autograd Function (its "MyFn" scope closes relu's frames), then an
# op in a record_function label.  The sampler runs every 20 us
# (TBPF_INFER_SAMPLE_US) so that it lands inside scope probes thousands of
# times a run; before the fix this gave 5-150 extra relu, clamp_min or mul
# calls per run.  Under torch 1.13 and 2.x:
#  - every row's count (ops and scopes) equals torch.profiler's for the
#    same job (compare_rows.py), and the job's result is unchanged;
#  - the sampler closed frames (-v's "sampled"), else this proves nothing.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=20000

for v in 1 2; do
	py=PY$v
	py=${!py}
	need_torch "$py"
	label="torch $(torch_version "$py"), --exits infer, sampler every 20 us"
	log "== $label"
	"$py" "$WL/infer_race.py" --iters $ITERS --profile > "$T/ref$v.json" ||
		fail "$label: the reference run failed"
	TBPF_INFER_SAMPLE_US=20 job_under_tbpf wl$v tb$v "$py" infer_race.py --iters $ITERS -- \
		--exits infer --format json -v --duration 300s
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sum"])' "$T/ref$v.json")
	got=$(result_field "$(get wl$v out)" sum)
	[ "$want" = "$got" ] || fail "$label: result $got under tbpf, $want under torch.profiler"
	sampled=$(sed -n 's/.* sampled \([0-9]*\).*/\1/p' "$(get tb$v err)")
	log "$label: frames closed by a sample or switch-out: ${sampled:-?}"
	[ "${sampled:-0}" -ge $ITERS ] ||
		fail "$label: only ${sampled:-no} frames closed by the sampler: the race was not exercised"
	python3 "$E2E_DIR/compare_rows.py" "$(get tb$v out)" "$T/ref$v.json" --pid "$(get wl$v pid)" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
	log "$label: OK"
done
