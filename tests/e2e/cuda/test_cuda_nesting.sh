#!/bin/bash
# test_cuda_nesting.sh - one user call is counted once: a runtime library
# (libcudart.so.99, fake_cudart.c) calls the driver underneath, as the real
# libcudart does (cudaStreamSynchronize -> cuStreamSynchronize,
# cudaLaunchKernel -> cuLaunchKernel, cudaDeviceSynchronize tail-calling
# cuCtxSynchronize); those driver calls are skipped while direct driver
# calls from the same frame and from a deeper frame still count.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
fail() { echo "FAIL test_cuda_nesting: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$T/cuda_nest_calls" ] || fail "build the tools first (make; needs the CUDA toolkit)"
[ "$(id -u)" = 0 ] || fail "needs root"
tpid=; tmp=$(mktemp -d); trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$ROOT/tests/native/cuda/e2e_lib.sh"
K=4
# the tail call really is a jmp (else this test checks less than it says)
objdump -d "$T/fakert/libcudart.so.99" | grep -A1 '<cudaDeviceSynchronize>:' | grep -q 'jmp' ||
	fail "cudaDeviceSynchronize in the fake runtime is not a tail call"
cuda_run -- "$T/cuda_nest_calls" $K
msg=$(python3 - "$tmp/out.json" $K <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); K = int(sys.argv[2])
def need(cond, what):
    if not cond:
        print(what); sys.exit(1)
S = {s["api"]: s["count"] for s in j["syncs"]}
need(S == {"cudaStreamSynchronize": K, "cudaDeviceSynchronize": K, "cuStreamSynchronize": 2 * K},
     "syncs: %s" % S)
L = {(k["api"], int(k["address"], 16)): k["launches"] for k in j["kernels"]}
need(L == {("cudaLaunchKernel", 0x4242000): K, ("cuLaunchKernel", 0x5151000): K}, "launches: %s" % L)
need(j["nested_skipped"] == 3 * K, "nested driver calls skipped: %d, want %d" % (j["nested_skipped"], 3 * K))
print("ok")
PY
) || fail "$msg"
exit 0
