#!/bin/bash
# test_cuda_late_load.sh - a libcudart loaded after the tracer attached is
# found by the periodic maps rescan and probed: the target dlopens the real
# libcudart.so.13 once tracing runs, then launches 5 times; all 5 are seen,
# named after the target's own function.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
CUDART=${CUDART:-/usr/local/cuda/lib64/libcudart.so.13}
fail() { echo "FAIL test_cuda_late_load: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$T/cuda_late_load" ] || fail "build the tools first (make)"
[ -e "$CUDART" ] || fail "no $CUDART"
[ "$(id -u)" = 0 ] || fail "needs root"
tpid=; tmp=$(mktemp -d); trap 'kill $tpid 2>/dev/null; kill $trpid 2>/dev/null; rm -rf "$tmp"' EXIT
"$T/cuda_late_load" "$CUDART" > "$tmp/target.out" 2>&1 &
tpid=$!
for _ in $(seq 400); do grep -q '^ready' "$tmp/target.out" && break; sleep 0.05; done
grep -q libcudart /proc/$tpid/maps && fail "libcudart mapped before the test loaded it"
timeout 60 "$T/cuda_trace" --pid $tpid --signal 10 --json > "$tmp/out.json" 2> "$tmp/trace.err" &
trpid=$!
for _ in $(seq 1200); do grep -q 'attached 1 more CUDA' "$tmp/trace.err" && break; sleep 0.05; done
grep -q 'attached 1 more CUDA' "$tmp/trace.err" || fail "late libcudart not attached: $(cat "$tmp/trace.err" "$tmp/target.out")"
kill -USR2 $tpid
wait $trpid || fail "cuda_trace: $(cat "$tmp/trace.err")"
wait $tpid
msg=$(python3 - "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
k = [(k["name"], k["launches"], k["configs"][0]["grid"], k["configs"][0]["block"]) for k in j["kernels"]]
if k != [("late_kernel_stub", 5, [5, 1, 1], [64, 1, 1])]:
    print("kernels: %s" % k); sys.exit(1)
PY
) || fail "$msg"
exit 0
