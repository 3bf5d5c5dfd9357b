#!/bin/bash
# test_infer_burst.sh - inferred exits lose no op when the closes come in
# bursts of new rows.  tests/workloads/infer_burst.py
# calls torch.nn.functional.linear 200 times, each on inputs of their own
# shape, and sleeps 1 ms after each: in --exits infer mode the frames still
# open at the sleep (aten::linear and its aten::addmm) are closed together
# by the scheduler-switch program, with interrupts off, and with
# --record-shapes every one of them is a new row there.  Run-time
# allocated maps lost most of those ops here (402 of 2000 with
# shapes, a few without; test_infer_bound saw 1-4 per job, not every run).
# Under torch 1.13 and 2.x, for --exits infer with and without
# --record-shapes:
#  - every aten:: op's count equals torch.profiler's for the same job;
#  - the switch or sample program closed at least one frame per call (the
#    -v line's "sampled"), else this test proves nothing;
#  - no "BPF maps full" line.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=200

burst_case() {   # NAME PY REFERENCE-JSON TBPF-ARGS...
	local name=$1 py=$2 ref=$3 sampled
	shift 3
	job_under_tbpf wl$name tb$name "$py" infer_burst.py --iters $ITERS -- \
		--format json -v --duration 120s "$@"
	sampled=$(sed -n 's/.* sampled \([0-9]*\).*/\1/p' "$(get tb$name err)")
	log "$name: closed by a sample or switch-out: ${sampled:-?}"
	[ "${sampled:-0}" -ge $ITERS ] ||
		fail "$name: only ${sampled:-no} frames closed by the switch program: the burst path was not taken"
	compare_counts "$(get tb$name out)" "$ref" "$(get wl$name pid)" "$name"
	! grep 'BPF maps full' "$(get tb$name err)" || fail "$name: op updates lost"
}

for v in 1 2; do
	py=PY$v
	py=${!py}
	need_torch "$py"
	log "== torch $(torch_version "$py")"
	"$py" "$WL/infer_burst.py" --iters $ITERS --profile > "$T/ref$v.json" ||
		fail "torch $v: the reference run failed"
	burst_case shapes$v "$py" "$T/ref$v.json" --exits infer --record-shapes
	burst_case plain$v "$py" "$T/ref$v.json" --exits infer
done
log "no op lost to bursts of inferred exits on both torch versions"
