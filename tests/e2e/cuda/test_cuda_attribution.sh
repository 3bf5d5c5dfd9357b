#!/bin/bash
# test_cuda_attribution.sh - launches and syncs land under the op on top of
# the calling thread's op stack.  libtorch_cpu-fake.so defines
# at::_ops::fake_conv::call (launches conv_kernel, calls fake_add, launches
# conv_kernel again), at::_ops::fake_add::call (launches add_kernel) and
# at::_ops::fake_sync::call (cudaStreamSynchronize); outside any op the
# program launches plain_kernel.  K rounds: conv 2K under fake_conv (the
# second after a nested op returned), add 2K under fake_add, plain K under
# no op, K syncs under fake_sync; the op table's launch counts agree.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
fail() { echo "FAIL test_cuda_attribution: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$T/cuda_attr_main" ] || fail "build the tools first (make; needs nvcc)"
[ "$(id -u)" = 0 ] || fail "needs root"
tmp=$(mktemp -d); trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$ROOT/tests/native/cuda/e2e_lib.sh"
K=5
cuda_run --ops -- "$T/cuda_attr_main" $K
msg=$(python3 - "$tmp/out.json" $K <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); K = int(sys.argv[2])
def need(cond, what):
    if not cond:
        print(what); sys.exit(1)
got = {k["name"]: {o["op"]: o["launches"] for o in k["ops"]} for k in j["kernels"]}
want = {"conv_kernel(float*, int)": {"aten::fake_conv": 2 * K},
        "add_kernel(float*, int)": {"aten::fake_add": 2 * K},
        "plain_kernel(float*, int)": {None: K}}
need(got == want, "kernels by op: %s" % got)
need([(s["op"], s["api"], s["count"]) for s in j["syncs"]] == [("aten::fake_sync", "cudaStreamSynchronize", K)],
     "syncs: %s" % j["syncs"])
need(j["op_launches"] == {"aten::fake_conv": 2 * K, "aten::fake_add": 2 * K},
     "op table launches: %s" % j["op_launches"])
print("ok")
PY
) || fail "$msg"
exit 0
