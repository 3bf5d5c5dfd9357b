#!/bin/bash
# gpu_check.sh - one command, on a GPU machine: does tbpf see what
# torch.profiler sees?  resnet18 training steps (bench/gpu_check_job.py) on
# CUDA, three times: under torch.profiler (CPU + CUDA activities), under
# `tbpf run` (CUPTI agent from the start) and under `tbpf --pid --inject`
# (agent injected into the running job).  Kernel names, launch counts and
# device time per kernel (within 5%) are compared inside the job's
# "gpu_check" record_function span (bench/gpu_check_report.py) and a
# verdict printed.
#
#   sudo bench/gpu_check.sh [--cpu] [--iters N] [--python PY] [--keep DIR]
#
# --cpu: the CPU half (no GPU needed): the same job on CPU under
# torch.profiler, under `tbpf run` and under `tbpf --pid`; op names and
# calls compared.  This is what runs on machines without a GPU (and in
# tests/e2e/gpu/test_gpu_check.sh); the GPU half was never run on the machine
# tbpf is developed on (no GPU there).
# Exit: 0 PASS, 1 FAIL, 2 cannot compare (no GPU, no CUPTI, a run failed).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TBPF=${TBPF:-$ROOT/build/tbpf}
PY=${PY:-python3}
MODE=gpu
ITERS=5
KEEP=
while [ $# -gt 0 ]; do
	case $1 in
	--cpu) MODE=cpu ;;
	--iters) ITERS=$2; shift ;;
	--python) PY=$2; shift ;;
	--keep) KEEP=$2; shift ;;
	*) echo "usage: $0 [--cpu] [--iters N] [--python PY] [--keep DIR]" >&2; exit 2 ;;
	esac
	shift
done
DEV=cuda
[ $MODE = cpu ] && DEV=cpu
T=${KEEP:-$(mktemp -d /tmp/tbpf-gpu-check.XXXXXX)}
mkdir -p "$T"
[ -n "$KEEP" ] || trap 'rm -rf "$T"' EXIT
say() { printf 'gpu_check: %s\n' "$*"; }
die() { say "cannot compare: $*"; exit 2; }
[ -x "$TBPF" ] || die "no tbpf at $TBPF (make)"
if [ $MODE = gpu ]; then
	"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
		die "$PY sees no CUDA device (torch.cuda.is_available() is False); --cpu runs the CPU half"
fi
JOB=("$PY" "$HERE/gpu_check_job.py" --device $DEV --iters "$ITERS")

say "1/3 torch.profiler ($DEV, $ITERS steps)"
"${JOB[@]}" --profile "$T/torch.json" > "$T/torch.out" 2> "$T/torch.err" ||
	die "the job under torch.profiler failed: $(tail -n 2 "$T/torch.err")"

say "2/3 tbpf run"
"$TBPF" run --format chrome -o "$T/run.json" -- "${JOB[@]}" > "$T/run.out" 2> "$T/run.err" ||
	die "tbpf run failed: $(tail -n 2 "$T/run.err")"

say "3/3 tbpf --pid$([ $MODE = gpu ] && echo ' --inject')"
"${JOB[@]}" --wait > "$T/job.out" 2> "$T/job.err" &
job=$!
for _ in $(seq 600); do grep -q READY "$T/job.out" 2>/dev/null && break; sleep 0.1; done
grep -q READY "$T/job.out" || { kill $job 2>/dev/null; die "the job did not start: $(tail -n 2 "$T/job.err")"; }
inject=()
[ $MODE = gpu ] && inject=(--inject)
"$TBPF" --pid $job "${inject[@]}" --format chrome -o "$T/pid.json" 2> "$T/pid.err" &
tb=$!
for _ in $(seq 600); do grep -q '^tbpf: attached' "$T/pid.err" 2>/dev/null && break; sleep 0.1; done
kill -USR1 $job
wait $job || die "the job under tbpf --pid failed: $(tail -n 2 "$T/job.err")"
wait $tb || die "tbpf --pid failed: $(tail -n 2 "$T/pid.err")"

"$PY" "$HERE/gpu_check_report.py" --mode $MODE "$T/torch.json" "tbpf run=$T/run.json" \
	"tbpf --pid=$T/pid.json"
