#!/bin/bash
# test_cuda_runtime.sh - runtime API probes on the real libcudart.so.13: a
# program built with nvcc makes a known sequence of calls (launches with
# known kernels, grids, blocks, shared memory and streams; async and sync
# copies; sets; syncs; mallocs/frees; every call fails without a GPU) and
# the report must hold exactly those names, counts, dimensions and bytes.
# Run twice: default stream, and per-thread default stream (the _ptsz/_ptds
# entry points).
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
fail() { echo "FAIL test_cuda_runtime: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$T/cuda_rt_calls" ] || fail "build the tools first (make; needs nvcc)"
[ "$(id -u)" = 0 ] || fail "needs root"
tmp=$(mktemp -d); trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$ROOT/tests/native/cuda/e2e_lib.sh"

for prog in cuda_rt_calls cuda_rt_calls_ptsz; do
cuda_run -- "$T/$prog"
addrs=$(grep '^vec_add' "$tmp/target.out")
msg=$(python3 - "$tmp/out.json" "$addrs" "$prog" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
sfx = "_ptsz" if sys.argv[3].endswith("_ptsz") else ""
a = sys.argv[2].split()          # vec_add P scale P chevron P opaque P
addr = {a[i]: int(a[i + 1], 16) for i in range(0, len(a), 2)}
K = {k["name"]: k for k in j["kernels"]}
def cfgs(k):
    return sorted((tuple(c["grid"]), tuple(c["block"]), c["shared"], int(c["stream"], 16), c["launches"])
                  for c in k["configs"])
def need(cond, what):
    if not cond:
        print(what); sys.exit(1)
v = K.get("vec_add(float*, float const*, int)")
need(v, "vec_add missing: %s" % list(K))
need(int(v["address"], 16) == addr["vec_add"], "vec_add address %s != %x" % (v["address"], addr["vec_add"]))
need(v["api"] == "cudaLaunchKernel" + sfx, "vec_add api %s" % v["api"])
need(v["launches"] == 7 and cfgs(v) == [((4, 2, 1), (128, 1, 1), 0, 0, 5), ((9, 8, 7), (64, 2, 1), 1024, 0x6000, 2)],
     "vec_add launches/configs: %s" % v)
s = K.get("void tbpf_test::scale<float>(float*, float, int)")
need(s and s["launches"] == 3 and cfgs(s) == [((7, 1, 1), (32, 4, 2), 256, 0x5000, 3)], "scale: %s" % s)
need(int(s["address"], 16) == addr["scale"], "scale address")
op = "<opaque kernel handle 0x%x>; name from device records" % addr["opaque"]
o = K.get(op)
need(o and o["name_source"] == "opaque_handle" and cfgs(o) == [((3, 3, 3), (8, 8, 8), 64, 0x6000, 1)],
     "opaque handle launch: %s" % [k["name"] for k in j["kernels"]])
# <<<>>>: nvcc passes the host stub or a cudaKernel_t handle
c = [k for k in j["kernels"] if k["name"] == "chevron_kernel(int*)" or
     (k["name_source"] == "opaque_handle" and k is not o)]
need(len(c) == 1 and cfgs(c[0])[0][:3] == ((2, 2, 2), (16, 16, 1), 0), "<<<>>> launch: %s" % c)
g = K.get("<graph exec 0x77000>")
need(g and g["api"] == "cudaGraphLaunch" and cfgs(g) == [((0, 0, 0), (0, 0, 0), 0, 0x5000, 1)], "graph launch: %s" % g)
need(len(j["kernels"]) == 5, "kernels: %s" % [k["name"] for k in j["kernels"]])
need(all(op["op"] is None for k in j["kernels"] for op in k["ops"]), "launches attributed to ops")
C = {c["direction"]: c for c in j["copies"]}
exp = {"HtoD": (5, 4 * 4096 + 2048), "DtoH": (2, 2000), "DtoD": (1, 333), "Memset": (3, 3 * 777),
       "Default": (1, 55)}
need({d: (c["count"], c["bytes"]) for d, c in C.items()} == exp, "copies: %s" % j["copies"])
# every copy and set is timed at its return, async ones too
need(all(c["host_ns"] > 0 for c in C.values()), "copy host time: %s" % C)
S = {s["api"]: s for s in j["syncs"]}
need({a: s["count"] for a, s in S.items()} == {"cudaStreamSynchronize": 2, "cudaDeviceSynchronize": 1,
                                              "cudaEventSynchronize": 1},
     "syncs: %s" % j["syncs"])
need(all(s["total_ns"] > 0 for s in j["syncs"]), "sync durations")
A = {x["api"]: x for x in j["allocations"]}
need(A.get("cudaMalloc", {}).get("calls") == 3 and A["cudaMalloc"]["failed"] == 3 and
     A["cudaMalloc"]["bytes"] == 6 << 20, "cudaMalloc: %s" % A)
need(A.get("cudaFree", {}).get("frees") == 1, "cudaFree: %s" % A)
need(A.get("cudaMallocAsync", {}).get("calls") == 1 and A["cudaMallocAsync"]["bytes"] == 4096 and
     A["cudaMallocAsync"]["failed"] == 1, "cudaMallocAsync: %s" % A)
need(A.get("cudaFreeAsync", {}).get("frees") == 1, "cudaFreeAsync: %s" % A)
need(j["allocation_peak_bytes"] == 0, "peak bytes with every malloc failing")
need(j["dropped"] == 0, "dropped records")
print("ok %d kernels" % len(j["kernels"]))
PY
) || fail "$prog: $msg"
done
exit 0
