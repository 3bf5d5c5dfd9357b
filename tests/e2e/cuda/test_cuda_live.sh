#!/bin/bash
# test_cuda_live.sh - the CUDA probes in the real command: `tbpf --pid PID
# --format json` on the attribution target (fake at::_ops ops in
# libtorch_cpu-fake.so launching through the real libcudart) reports the
# op table's launches, the kernels with the ops that launched them and the
# syncs per op; the text table carries the CUDA tables after the op table.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
TBPF=$ROOT/build/tbpf
fail() { echo "FAIL test_cuda_live: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$T/cuda_attr_main" ] && [ -x "$TBPF" ] || fail "build first (make; needs nvcc)"
[ "$(id -u)" = 0 ] || fail "needs root"
tpid=; tmp=$(mktemp -d); trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
K=4

run() {   # run FORMAT -> $tmp/out, $tmp/err
	rm -f "$tmp/target.out" "$tmp/out" "$tmp/err"
	"$T/cuda_attr_main" $K > "$tmp/target.out" 2>&1 &
	tpid=$!
	for _ in $(seq 400); do grep -qs '^ready' "$tmp/target.out" && break; sleep 0.05; done
	timeout 60 "$TBPF" --pid $tpid --format "$1" > "$tmp/out" 2> "$tmp/err" &
	local trpid=$!
	for _ in $(seq 1200); do grep -qs "CUDA: " "$tmp/err" && break; sleep 0.05; done
	grep -q 'CUDA: 26 probes in 1 libraries' "$tmp/err" || fail "CUDA probes not attached: $(cat "$tmp/err")"
	kill -USR1 $tpid
	wait $trpid || fail "tbpf exited $?: $(cat "$tmp/err")"
	wait $tpid
}

run json
msg=$(python3 - "$tmp/out" $K <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); K = int(sys.argv[2])
def need(cond, what):
    if not cond:
        print(what); sys.exit(1)
ops = {o["name"]: o.get("launches") for o in j["ops"] if not o["name"].startswith("cuda")}
need(ops == {"aten::fake_conv": 2 * K, "aten::fake_add": 2 * K, "aten::fake_sync": 0}, "ops: %s" % ops)
# the CUDA runtime calls as rows: the ops' launches, the plain
# kernel's outside any op, the sync
calls = {}
for o in j["ops"]:
    if o["name"].startswith("cuda"):
        calls[o["name"]] = calls.get(o["name"], 0) + o["calls"]
need(calls == {"cudaLaunchKernel": 5 * K, "cudaStreamSynchronize": K}, "CUDA call rows: %s" % calls)
got = {k["name"]: {o["op"]: o["launches"] for o in k["ops"]} for k in j["kernels"]}
need(got == {"conv_kernel(float*, int)": {"aten::fake_conv": 2 * K},
             "add_kernel(float*, int)": {"aten::fake_add": 2 * K},
             "plain_kernel(float*, int)": {None: K}}, "kernels: %s" % got)
need([(s["op"], s["api"], s["count"]) for s in j["syncs"]] == [("aten::fake_sync", "cudaStreamSynchronize", K)],
     "syncs: %s" % j["syncs"])
need(j["copies"] == [] and j["allocations"] == [], "copies/allocations: %s %s" % (j["copies"], j["allocations"]))
PY
) || fail "$msg"

run table
grep -qE '^conv_kernel\(float\*, int\) +'$((2 * K))' +\(8,1,1\) +\(256,1,1\) +0 +0x0 +aten::fake_conv \('$((2 * K))'\)$' "$tmp/out" ||
	fail "text table: $(cat "$tmp/out")"
grep -qE '^aten::fake_sync +cudaStreamSynchronize +'$K' ' "$tmp/out" || fail "sync table: $(cat "$tmp/out")"
exit 0
