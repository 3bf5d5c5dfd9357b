#!/bin/bash
# test_cuda_driver.sh - driver API probes on the toolkit's libcuda.so stub
# (loaded as libcuda.so.1; every call fails, the probes fire): launches
# through cuLaunchKernel/cuLaunchKernelEx with known CUfunction handles,
# dimensions, shared memory and streams, async copies and sets, syncs,
# cuMemAlloc/cuMemFree, each reported exactly.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
fail() { echo "FAIL test_cuda_driver: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$T/cuda_drv_calls" ] || fail "build the tools first (make; needs the CUDA toolkit)"
[ "$(id -u)" = 0 ] || fail "needs root"
tmp=$(mktemp -d); trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$ROOT/tests/native/cuda/e2e_lib.sh"

cuda_run -- "$T/cuda_drv_calls"
msg=$(python3 - "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
def need(cond, what):
    if not cond:
        print(what); sys.exit(1)
def cfgs(k):
    return sorted((tuple(c["grid"]), tuple(c["block"]), c["shared"], int(c["stream"], 16), c["launches"])
                  for c in k["configs"])
K = {int(k["address"], 16): k for k in j["kernels"]}
need(sorted(K) == [0xabc000, 0xdef000], "kernels: %s" % [k["name"] for k in j["kernels"]])
a, b = K[0xabc000], K[0xdef000]
need(a["name"] == "<CUfunction 0xabc000>; name from device records" and a["api"] == "cuLaunchKernel",
     "cuLaunchKernel name: %s" % a["name"])
need(a["launches"] == 4 and cfgs(a) == [((3, 2, 1), (64, 1, 1), 128, 0x7000, 4)], "cuLaunchKernel: %s" % a)
need(b["api"] == "cuLaunchKernelEx" and cfgs(b) == [((5, 6, 7), (32, 8, 2), 4096, 0x8000, 1)],
     "cuLaunchKernelEx: %s" % b)
C = {c["direction"]: (c["count"], c["bytes"]) for c in j["copies"]}
need(C == {"HtoD": (2, 10000), "DtoH": (1, 6000), "DtoD": (1, 7000), "Memset": (2, 400 + 11)},
     "copies: %s" % j["copies"])
S = {s["api"]: s["count"] for s in j["syncs"]}
need(S == {"cuStreamSynchronize": 3, "cuCtxSynchronize": 1}, "syncs: %s" % j["syncs"])
A = {x["api"]: x for x in j["allocations"]}
need(A.get("cuMemAlloc", {}).get("calls") == 2 and A["cuMemAlloc"]["bytes"] == (1 << 16) + (1 << 17) and
     A["cuMemAlloc"]["failed"] == 2, "cuMemAlloc: %s" % A)
need(A.get("cuMemFree", {}).get("frees") == 1, "cuMemFree: %s" % A)
need(j["nested_skipped"] == 0, "driver calls wrongly taken for runtime-internal: %d" % j["nested_skipped"])
print("ok")
PY
) || fail "$msg"
exit 0
