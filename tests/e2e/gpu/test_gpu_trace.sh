#!/bin/bash
# test_gpu_trace.sh - GPU device time through the real `tbpf report`, from
# recorded CUPTI activity (no GPU here): the join fixtures
# (tests/fixtures/cupti, made from the real cupti_activity.h structs)
# wrapped in a capture by `gen-fixture --gpu`, then
#  - every format read back by its independent reader (check_all.sh), with
#    Chrome and Perfetto agreeing on GPU slices and flows;
#  - the GPU slices and launch->kernel flows of both traces, as the readers
#    print them, equal to the lines below, written by hand from the
#    scenario in tests/fixtures/cupti/README.md;
#  - Self CUDA and CUDA total per op in the json report, worked out by hand.
# The CLOCK_REALTIME copy of the records must give the same durations, with
# starts 100 ns early (the offset estimate stops at the smallest probe-to-API
# gap, 100 ns).
# timeout: 120
. "$(dirname "$0")/../lib/lib.sh"
need_tbpf
GEN=$ROOT/build/tests/gen-fixture
[ -x "$GEN" ] || fail "$GEN missing: run make"

# gpu DEVICE_PROCESS STREAM START_NS DUR_NS CORRELATION NAME
# flow CORRELATION PID TID LAUNCH_START LAUNCH_END -> DEVICE_PROCESS STREAM START_NS
# (launch end = end of the CUDA API record of the same correlation)
cat > "$T/want.txt" <<'EOF'
flow 101 4242 1001 1000000 1005000 -> GPU_0 stream_7 1006000
flow 103 4242 1001 1010000 1012000 -> GPU_0 stream_7 1056500
flow 104 4242 1001 1020000 1022000 -> GPU_0 stream_7 1058600
flow 105 4242 1002 1015000 1016500 -> GPU_0 stream_13 1017000
flow 106 4242 1001 1030000 1031000 -> GPU_0 stream_7 1061700
flow 107 4242 1001 1040000 1041000 -> GPU_0 stream_7 1062300
gpu GPU_0 stream_13 1017000 20000 105 ampere_sgemm_128x64_nn
gpu GPU_0 stream_7 1006000 50000 101 void at::native::(anonymous namespace)::gemm_kernel<float, 128, 64, 8>(int, int, int, float const*, float const*, float*)
gpu GPU_0 stream_7 1056500 2000 103 Memcpy HtoD 4096 B
gpu GPU_0 stream_7 1058600 3000 104 relu_kernel
gpu GPU_0 stream_7 1061700 500 106 Memset 1024 B
gpu GPU_0 stream_7 1062300 4000 107 relu_kernel
gpu GPU_0 stream_7 1070000 1000 999 lost_api_kernel
gpu GPU_1 stream_21 1052000 1000 108 orphan_kernel
EOF
# realtime: device starts and API ends 100 ns early, host times unchanged
awk '$1 == "gpu" { $4 -= 100 } $1 == "flow" { $6 -= 100; $10 -= 100 } { print }' "$T/want.txt" |
	LC_ALL=C sort > "$T/want-rt.txt"

# per op (name self_cuda_ns cuda_total_ns): addmm launched the gemm (50000),
# the copy (2000) and the set (500); linear launched nothing itself, its
# child addmm the gemm and the copy; relu 3000 + 4000; mm 20000 (thread 1002).
# The scenario's host calls (gen_fixtures.c: cudaLaunchKernel,
# cudaMemcpyAsync, cudaMemsetAsync) are op rows too, as torch.profiler's
# runtime rows, with no device time of their own: their kernels count
# for the op that made the call.
cat > "$T/want-ops.txt" <<'EOF'
aten::addmm 52500 52500
aten::linear 0 52000
aten::mm 20000 20000
aten::relu 7000 7000
cudaLaunchKernel 0 0
cudaMemcpyAsync 0 0
cudaMemsetAsync 0 0
EOF

for clk in mono realtime; do
	want=$T/want.txt
	[ $clk = mono ] || want=$T/want-rt.txt
	"$GEN" --gpu "$ROOT/tests/fixtures/cupti/join_$clk.bin" "$T/$clk.tbpf" ||
		fail "gen-fixture --gpu join_$clk.bin"
	"$ROOT/tests/formats/check_all.sh" "$T/$clk.tbpf" "$TBPF" "$T/$clk" > "$T/$clk-check.log" 2>&1 ||
		fail "check_all ($clk): $(grep FAIL "$T/$clk-check.log" | head -1)"
	log "$clk: $(grep 'check_all: gpu' "$T/$clk-check.log")"
	# check_all.sh kept the readers' GPU dumps of both traces
	for f in chrome perfetto; do
		diff <(LC_ALL=C sort "$want") <(LC_ALL=C sort "$T/$clk/gpu-$f.txt") > "$T/$clk-$f.diff" ||
			fail "$clk $f: GPU slices/flows differ from the scenario: $(head -3 "$T/$clk-$f.diff" | tr '\n' ' ')"
	done
	"$TBPF" report "$T/$clk.tbpf" --format json -o "$T/$clk.json" 2> "$T/$clk.err" ||
		fail "tbpf report --format json ($clk): $(cat "$T/$clk.err")"
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["run"]["gpu_times"] is True, "gpu_times not set"
for o in sorted(d["ops"], key=lambda o: o["name"]):
    print(o["name"], o.get("self_cuda_ns"), o.get("cuda_total_ns"))
' "$T/$clk.json" > "$T/$clk-ops.txt" || fail "$clk: json report has no GPU times"
	diff "$T/want-ops.txt" "$T/$clk-ops.txt" > "$T/$clk-ops.diff" ||
		fail "$clk: Self CUDA / CUDA total differ: $(tr '\n' ' ' < "$T/$clk-ops.diff")"
done
log "GPU tracks, flows and CUDA totals as worked out by hand, on both clocks"
