#!/bin/bash
# test_daemon_cuda.sh - the daemon's CUDA counters from the real libcudart
# probes: the attribution target (tests/native/cuda/cuda_attr_main: fake
# at::_ops ops in libtorch_cpu-fake.so calling the real libcudart), named
# cu_attr, runs K rounds of fake_conv (2 conv_kernel launches, and a nested
# fake_add), fake_add (1 add_kernel launch), fake_sync, one launch outside
# any op and fake_copy (cudaMemcpy 4096 bytes host-to-device and 1000 bytes
# device-to-host).  The scrape must give, by the workload's definition:
#   tbpf_cuda_launches_total{op=fake_conv} 2K, {op=fake_add} 2K
#   tbpf_cuda_copies_total{direction=HtoD} K, {DtoH} K
#   tbpf_cuda_copy_bytes_total{HtoD} 4096K, {DtoH} 1000K
# and promtool must accept the text.  A second process of the same job
# started after the first exited adds exactly its own copies (the CUDA
# model starts over every window, the exited process is forgotten: nothing
# is counted twice).
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
BIN=$ROOT/build/tests/native/cuda/cuda_attr_main
[ -x "$BIN" ] || fail "build first (make; needs nvcc)"
K=7
Q="python3 $ROOT/tests/e2e/lib/promquery.py"

start_target() {   # OUT K -> tpid (process name cu_attr)
	"$BIN" "$2" copy cu_attr > "$T/$1.out" 2>&1 &
	tpid=$!
	_E2E_PIDS+=("$tpid")
	for ((i = 0; i < 200; i++)); do grep -qs '^ready' "$T/$1.out" && return; sleep 0.05; done
	fail "$1 not ready: $(cat "$T/$1.out")"
}

start_target cu_attr $K
t1=$tpid
start_daemon --window 1s --comm cu_attr -v
wait_attached() {   # the daemon scans for new processes: wait for the targets gauge
	for ((i = 0; i < 100; i++)); do
		$Q get "http://127.0.0.1:$PORT/metrics" 2> /dev/null | grep -q '^tbpf_targets 1$' && return
		sleep 0.2
	done
	fail "the daemon did not attach: $(tail -n 5 "$T/daemon.err" | tr '\n' ' ')"
}
wait_attached
kill -USR1 $t1
for ((i = 0; i < 100; i++)); do grep -qs '^done' "$T/cu_attr.out" && break; sleep 0.1; done
wait $t1 2> /dev/null
sleep 2.5   # two windows
$Q get "http://127.0.0.1:$PORT/metrics" > "$T/m1.txt" || fail "scrape failed"
if command -v promtool > /dev/null; then
	promtool check metrics < "$T/m1.txt" || fail "promtool rejects the metrics"
fi
python3 - "$T/m1.txt" $K << 'PY' || fail "CUDA counters (see log)"
import os, sys
sys.path.insert(0, os.environ["E2E_DIR"])
from promquery import sample
text = open(sys.argv[1]).read(); K = int(sys.argv[2])
val = lambda name, **lbl: sample(text, name, **lbl)
want = [
    (("tbpf_cuda_launches_total",), dict(job="cu_attr", op="aten::fake_conv", device="cuda"), 2 * K),
    (("tbpf_cuda_launches_total",), dict(job="cu_attr", op="aten::fake_add", device="cuda"), 2 * K),
    (("tbpf_cuda_copies_total",), dict(job="cu_attr", direction="HtoD"), K),
    (("tbpf_cuda_copies_total",), dict(job="cu_attr", direction="DtoH"), K),
    (("tbpf_cuda_copy_bytes_total",), dict(job="cu_attr", direction="HtoD"), 4096 * K),
    (("tbpf_cuda_copy_bytes_total",), dict(job="cu_attr", direction="DtoH"), 1000 * K),
    (("tbpf_op_calls_total",), dict(job="cu_attr", op="aten::fake_copy"), K),
]
bad = []
for (name,), lbl, exp in want:
    got = val(name, **lbl)
    print("%s%s = %s (want %d)" % (name, lbl, got, exp))
    if got != exp:
        bad.append(name)
assert not bad, bad
PY
# a second process of the job after the first exited: K2 rounds more
K2=3
start_target cu_late $K2
t2=$tpid
wait_attached
kill -USR1 $t2
for ((i = 0; i < 100; i++)); do grep -qs '^done' "$T/cu_late.out" && break; sleep 0.1; done
wait $t2 2> /dev/null
sleep 2.5
$Q get "http://127.0.0.1:$PORT/metrics" > "$T/m2.txt" || fail "scrape failed"
for v in "copies_total{job=\"cu_attr\",device=\"cuda\",direction=\"HtoD\"} $((K + K2))" \
	"copy_bytes_total{job=\"cu_attr\",device=\"cuda\",direction=\"DtoH\"} $((1000 * (K + K2)))" \
	"launches_total{job=\"cu_attr\",op=\"aten::fake_conv\",device=\"cuda\"} $((2 * (K + K2)))"; do
	grep -qF "tbpf_cuda_$v" "$T/m2.txt" ||
		fail "after the second process, want tbpf_cuda_$v: $(grep '^tbpf_cuda' "$T/m2.txt" | tr '\n' ' ')"
done
kill -TERM $dpid
wait $dpid || fail "daemon exit status $?"
log "OK"
