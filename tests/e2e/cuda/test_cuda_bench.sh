#!/bin/bash
# test_cuda_bench.sh - cost per probed launch: N cudaLaunchKernel calls on
# the real libcudart (each fails fast without a GPU, so the probe cost is
# not hidden behind a real launch), timed in the program, without probes
# and with the CUDA probes attached (records to the ring buffer, launch
# counted under the op stack).  Fails only if the probed run missed
# launches; prints the figures.  N and REPS from the environment.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
N=${N:-200000}
REPS=${REPS:-3}
fail() { echo "FAIL test_cuda_bench: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$T/cuda_rt_calls" ] || fail "build the tools first (make; needs nvcc)"
[ "$(id -u)" = 0 ] || fail "needs root"
tpid=; tmp=$(mktemp -d); trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$ROOT/tests/native/cuda/e2e_lib.sh"

plain() {
	rm -f "$tmp/p.out"
	"$T/cuda_rt_calls" bench $N > "$tmp/p.out" &
	tpid=$!
	for _ in $(seq 400); do grep -qs '^ready' "$tmp/p.out" && break; sleep 0.05; done
	kill -USR1 $tpid; wait $tpid
	awk '/^ns_per_launch/ {print $2}' "$tmp/p.out"
}
probed() {
	rm -f "$tmp/target.out"
	"$T/cuda_rt_calls" bench $N > "$tmp/target.out" &
	tpid=$!
	for _ in $(seq 400); do grep -qs '^ready' "$tmp/target.out" && break; sleep 0.05; done
	timeout 120 "$T/cuda_trace" --pid $tpid --signal 10 --json > "$tmp/out.json" 2> "$tmp/trace.err" ||
		fail "cuda_trace: $(cat "$tmp/trace.err")"
	wait $tpid
	n=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(sum(k["launches"] for k in j["kernels"]), j["dropped"])' "$tmp/out.json")
	[ "$n" = "$N 0" ] || fail "probed run saw '$n' launches (want $N, 0 dropped)"
	awk '/^ns_per_launch/ {print $2}' "$tmp/target.out"
}
p=(); q=()
for r in $(seq $REPS); do p+=("$(plain)"); q+=("$(probed)"); done
python3 - "$N" "${p[*]}" "${q[*]}" <<'PY'
import sys, statistics as st
n = int(sys.argv[1]); p = [float(x) for x in sys.argv[2].split()]; q = [float(x) for x in sys.argv[3].split()]
print("cudaLaunchKernel x %d: %.0f ns/call unprobed, %.0f ns/call probed (medians of %d): +%.0f ns per probed launch"
      % (n, st.median(p), st.median(q), len(p), st.median(q) - st.median(p)))
PY
exit 0
