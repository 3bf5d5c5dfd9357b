#!/bin/bash
# run.sh - the benchmark: baseline vs tbpf vs torch.profiler, side by side.
# usage: sudo bench/run.sh [--reps 5] [--exits auto,return,infer] [--python PY]...
# Builds tbpf if needed; results to stdout and bench/results.md.  See
# bench/bench.py --help.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tbpf ] || make -s
exec python3 bench/bench.py "$@"
