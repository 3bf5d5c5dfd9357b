#!/bin/bash
# test_cuda_torch_syms.sh - CUDA probes against PyTorch 2.x from PyPI: in a
# live python that imported torch (libtorch_cuda.so, libcudart.so.12 or .13
# from the nvidia wheels), the CUDA probes attach to the wheel's libcudart,
# and kernel host stubs of libtorch_cuda.so (picked with readelf) symbolize
# to the names c++filt gives.  Prints a sample.
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/build/tests/native/cuda
VENV=${TBPF_TORCH2_VENV:-/var/cache/tbpf/venv-torch2}
PY=${PY2:-$VENV/bin/python}   # PY2: the torch matrix's interpreter
fail() { echo "FAIL test_cuda_torch_syms: $*"; [ -n "${E2E_REASON:-}" ] && echo "$*" > "$E2E_REASON"; exit 1; }
[ -x "$PY" ] || { echo "SKIP test_cuda_torch_syms: no venv at $VENV"; [ -n "${E2E_REASON:-}" ] && echo "no venv at $VENV" > "$E2E_REASON"; exit 77; }
[ -x "$T/cuda_trace" ] || fail "build the tools first (make)"
[ "$(id -u)" = 0 ] || fail "needs root"

tmp=$(mktemp -d); trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
"$PY" -c '
import sys, torch, time
print("ready", flush=True)
time.sleep(120)' > "$tmp/py.out" 2>/dev/null &
pid=$!
for _ in $(seq 600); do grep -q ready "$tmp/py.out" && break; sleep 0.1; done
grep -q ready "$tmp/py.out" || fail "python did not import torch"

lib=$(awk '$6 ~ /\/libtorch_cuda\.so$/ && $3 == "00000000" {print $6; exit}' /proc/$pid/maps)
base=$(awk -v l="$lib" '$6 == l && $3 == "00000000" {split($1, a, "-"); print a[1]; exit}' /proc/$pid/maps)
[ -n "$lib" ] && [ -n "$base" ] || fail "libtorch_cuda.so not mapped"
cudart=$(awk '$6 ~ /\/libcudart\.so\.[0-9]+$/ {print $6; exit}' /proc/$pid/maps)
[ -n "$cudart" ] || fail "no libcudart.so.N mapped"
so=${cudart##*/}   # libcudart.so.12 (CUDA 12 wheels) or .13
# first PT_LOAD at vaddr 0: runtime address = base + st_value
readelf -lW "$lib" | awk '$1 == "LOAD" {print $3; exit}' | grep -qE '^0x0+$' ||
	fail "unexpected first PT_LOAD in $lib"

# attach: the wheel's libcudart gets runtime probes
"$T/cuda_trace" --pid $pid --list > "$tmp/list" 2> "$tmp/err" || fail "attach: $(cat "$tmp/err")"
n=$(awk -v so="$so" '$1 == "lib" && $2 == "runtime" && $3 ~ ("/" so "$") {print $5}' "$tmp/list")
[ -n "$n" ] || fail "no runtime probes on $so: $(cat "$tmp/list" "$tmp/err")"
# every core API name readelf finds in that libcudart is probed (distinct addresses)
want=$(readelf -W --dyn-syms "$cudart" | awk '$4 == "FUNC" && $7 != "UND" {sub(/@.*/, "", $8); print $2, $8}' |
	grep -E ' (cudaLaunchKernel|cudaLaunchKernel_ptsz|cudaLaunchKernelExC|cudaLaunchKernelExC_ptsz|cudaLaunchCooperativeKernel|cudaLaunchCooperativeKernel_ptsz|cudaGraphLaunch|cudaGraphLaunch_ptsz|cudaMemcpy|cudaMemcpy_ptds|cudaMemcpyAsync|cudaMemcpyAsync_ptsz|cudaMemsetAsync|cudaMemsetAsync_ptsz|cudaMemset|cudaMemset_ptds|cudaStreamSynchronize|cudaStreamSynchronize_ptsz|cudaDeviceSynchronize|cudaEventSynchronize|cudaMalloc|cudaFree|cudaMallocAsync|cudaMallocAsync_ptsz|cudaFreeAsync|cudaFreeAsync_ptsz)$' |
	awk '{print $1}' | sort -u | wc -l)
[ "$n" = "$want" ] || fail "$so: $n entry probes, readelf finds $want API entry points"

# kernel host stubs: template __global__ kernels of at::native
# (CUDA 13 gives the stubs internal linkage: _ZN2at6nativeL...; a
# compiler-split ".cold" part is not a stub)
readelf -sW "$lib" | awk '$4 == "FUNC" && $3 > 0 && $8 !~ /\./ && $8 ~ /^_ZN2at6nativeL?(18elementwise_kernel|29vectorized_elementwise_kernel|13reduce_kernel|27unrolled_elementwise_kernel)I/ {print $2, $8}' |
	sort -u -k2 > "$tmp/syms"
total=$(wc -l < "$tmp/syms")
[ "$total" -gt 100 ] || fail "only $total kernel stubs in $lib"
awk 'NR % int(n / 12 + 1) == 1' n="$total" "$tmp/syms" | head -12 > "$tmp/pick"
args=(); while read -r v name; do
	args+=("$(printf '0x%x' $((0x$base + 0x$v + 4)))")
done < "$tmp/pick"
"$T/cuda_trace" --pid $pid --symbolize "${args[@]}" > "$tmp/names" 2> "$tmp/err" || fail "symbolize: $(cat "$tmp/err")"
i=0; while read -r v name; do
	i=$((i + 1))
	want=$(echo "$name" | c++filt)
	got=$(sed -n "${i}p" "$tmp/names" | cut -f3-)
	[ "$got" = "$want" ] || fail "0x$v: got '${got:0:200}', c++filt says '${want:0:200}'"
done < "$tmp/pick"
echo "$so: $n API entry points probed; $total kernel host stubs in libtorch_cuda.so, sample of $i symbolized:"
cut -f3- "$tmp/names" | head -6 | cut -c1-160 | sed 's/^/  /'
exit 0
