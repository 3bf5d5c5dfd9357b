#!/bin/bash
# test_gpu_check.sh - bench/gpu_check.sh, the one-command check
# for GPU machines.  No GPU here, so: (1) its report logic
# (bench/gpu_check_report.py) on fixtures (tests/fixtures/gpu_check: a
# torch.profiler-like trace and tbpf traces within 5%, 10% slow, a launch
# more, a kernel missing, no kernel at all) must give PASS / FAIL / cannot
# compare with exit 0 / 1 / 2 and name the kernel; (2) its GPU half must
# refuse in one line (exit 2) without a CUDA device; (3) its CPU half runs
# for real: resnet18 steps on CPU under torch.profiler, under `tbpf run`
# and under `tbpf --pid`, op calls compared inside the job's gpu_check
# span: PASS.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
FX=$ROOT/tests/fixtures/gpu_check
REPORT=$ROOT/bench/gpu_check_report.py

report_case() {   # NAME WANT_RC WANT_TEXT
	local rc=0
	python3 "$REPORT" "$FX/torch.json" "tbpf=$FX/tbpf_$1.json" > "$T/r_$1.txt" 2>&1 || rc=$?
	[ "$rc" = "$2" ] || fail "report on $1: exit $rc, want $2: $(cat "$T/r_$1.txt")"
	grep -q -- "$3" "$T/r_$1.txt" || fail "report on $1: no '$3' in: $(cat "$T/r_$1.txt")"
	log "report on $1: $(tail -n 1 "$T/r_$1.txt")"
}
report_case ok 0 "gpu_check: PASS"
report_case slow 1 "conv_kernel: device time 330.0 us, torch.profiler 300.0 us (+10.0%)"
report_case count 1 "conv_kernel: 4 calls, torch.profiler 3"
report_case missing 1 "gemm_kernel: missing in tbpf"
report_case nogpu 2 "cannot compare"

py=$PY2
[ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null || py=/usr/bin/python3
rc=0
TBPF=$TBPF "$ROOT/bench/gpu_check.sh" --python "$py" > "$T/gpu.txt" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "no CUDA device" "$T/gpu.txt" ||
	fail "GPU half without a GPU: exit $rc, want 2 and why: $(cat "$T/gpu.txt")"
log "GPU half here: $(tail -n 1 "$T/gpu.txt")"

rc=0
TBPF=$TBPF "$ROOT/bench/gpu_check.sh" --cpu --iters 2 --python "$py" --keep "$T/cpu" > "$T/cpu.txt" 2>&1 || rc=$?
cat "$T/cpu.txt"
[ $rc = 0 ] && grep -q "^gpu_check: PASS" "$T/cpu.txt" ||
	fail "CPU half (torch $(torch_version "$py")): exit $rc: $(tail -n 5 "$T/cpu.txt")"
log "CPU half OK"
