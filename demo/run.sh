#!/bin/bash
# run.sh - the README's first command: `sudo ./demo/run.sh [tbpf options]`.
# Prepares the machine if needed (tests/setup.sh --runtime: the Debian
# packages tbpf needs to build and run, and torch 1.13; nothing the tests
# alone need), builds tbpf (make), starts the demo
# training job (demo/train.py, torch 1.13 from /usr/bin/python3), profiles
# it from outside with `build/tbpf --pid PID --duration 5s`, prints the
# operator table, and stops the job.  Extra arguments go to tbpf, e.g.
#   sudo ./demo/run.sh --sort self_cpu_time_total --row-limit 15
#   sudo ./demo/run.sh --format json
# PY=/path/to/python picks another interpreter with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-/usr/bin/python3}

[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (BPF uprobes need it): sudo $0" >&2; exit 1; }
if ! command -v clang > /dev/null || ! command -v bpftool > /dev/null || ! [ -e /usr/include/bpf/libbpf.h ] ||
	! "$PY" -c 'import torch' 2> /dev/null; then
	echo "demo: preparing this machine (tests/setup.sh --runtime)"
	tests/setup.sh --runtime
fi
make -s

log=$(mktemp /tmp/tbpf-demo.XXXXXX)
"$PY" demo/train.py --seconds 300 > "$log" 2>&1 &
demo=$!
trap 'kill "$demo" 2> /dev/null || true; wait "$demo" 2> /dev/null || true; rm -f "$log"' EXIT
for ((i = 0; i < 600; i++)); do
	grep -q 'training started' "$log" && break
	kill -0 "$demo" 2> /dev/null || { cat "$log" >&2; echo "demo: training job failed" >&2; exit 1; }
	sleep 0.1
done
grep -q 'training started' "$log" || { echo "demo: training job did not start in 60 s" >&2; exit 1; }
echo "demo: $(grep 'training started' "$log" | sed 's/^demo: //')"
echo "demo: sudo build/tbpf --pid $demo --duration 5s $*"
rc=0
build/tbpf --pid "$demo" --duration 5s "$@" || rc=$?
echo "demo: stopping the training job (pid $demo)"
exit $rc
