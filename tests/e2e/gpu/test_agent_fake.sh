#!/bin/sh
# test_agent_fake.sh - the agent's own pipeline without a GPU: a fake
# libcuda.so.1/libcupti.so.13 (tests/native/cupti/fake_cuda.c) delivers
# buffers of real CUpti_Activity* structs; the agent must subscribe, set
# system thread ids and the CLOCK_MONOTONIC timestamp callback, decode,
# emit through the real BPF transport, count dropped/invalid records,
# rate-limit, refuse a second subscriber, and work both ways in (--inject
# and `tbpf run` via CUDA_INJECTION64_PATH, which the fake cuInit honours
# as the real driver does).  Exit 0 = pass; on failure one line of reason.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
B=${OUT:-$ROOT/build}
AGENT=$B/libtbpf_agent.so
CTL=$B/tests/native/cupti/agentctl
PROBE=$B/tests/native/cupti/agent_probe
FAKE=$B/tests/native/cupti/fakecuda
PY=/usr/bin/python3
T=$(mktemp -d /tmp/tbpf_fake.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "test_agent_fake: FAIL: $*"; exit 1; }
for f in "$AGENT" "$CTL" "$PROBE" "$FAKE/libcuda.so.1"; do [ -e "$f" ] || fail "missing $f (run make)"; done

target() {  # target ENV... : a Python process with the fake driver on its path
	env LD_LIBRARY_PATH="$FAKE" "$@" $PY -c "import time; time.sleep(60)" &
	TP=$!; PIDS="$PIDS $TP"
	sleep 0.5
	"$CTL" inject $TP "$AGENT" > /dev/null 2> "$T/err" || fail "inject: $(cat "$T/err")"
}
field() { tr ' ' '\n' < "$1" | sed -n "s/^$2=//p" | head -1; }

# 3 buffers x (4 kernels + 1 memcpy + 1 memset + 6 API) valid, 1 invalid each
target
"$PROBE" watch $TP 600 > "$T/watch" 2> "$T/err" || fail "watch: $(cat "$T/err" "$T/watch" | head -c 300)"
grep -q "^records: kernel=12 memcpy=3 memset=3 api=18 name=1 status=[0-9]* not_monotonic=0 api_without_tid=0$" "$T/watch" \
	|| fail "records through BPF: $(grep '^records' "$T/watch")"
grep -q "state=active" "$T/watch" || fail "agent never reported active"
"$CTL" status $TP > "$T/st" || fail "status word unreadable"
for kv in state=stopped records=36 dropped=6 invalid=3 buffers=3 ratelimited=0 devices=1; do
	[ "$(field "$T/st" "${kv%%=*}")" = "${kv#*=}" ] || fail "status: want $kv, got $(head -1 "$T/st")"
done

# stop right after start: the flush at stop still delivers every buffer
target
"$PROBE" watch $TP 20 > "$T/watch" 2> "$T/err" || fail "watch (early stop): $(cat "$T/err")"
grep -q "^records: kernel=12 memcpy=3 memset=3 api=18 name=1 " "$T/watch" \
	|| fail "stop lost buffered records: $(grep '^records' "$T/watch")"

# rate limit: 10 records/s -> the first second's burst (10) passes, the rest is counted
target
"$PROBE" watch $TP 600 10 > "$T/watch" 2> "$T/err" || fail "watch (rate): $(cat "$T/err")"
"$CTL" status $TP > "$T/st"
r=$(field "$T/st" records); l=$(field "$T/st" ratelimited)
[ "$((r + l))" -eq 36 ] && [ "$r" -ge 10 ] && [ "$r" -le 12 ] || fail "rate limit: records=$r ratelimited=$l"

# another subscriber (torch.profiler) holds CUPTI: refuse, touch nothing
target FAKE_CUPTI_CONFLICT=1
"$PROBE" watch $TP 400 > "$T/watch" 2>&1
grep -q "state=conflict" "$T/watch" || fail "conflict not reported: $(head -c 300 "$T/watch")"
grep -q "^records: kernel=0 memcpy=0 memset=0 api=0 name=0" "$T/watch" || fail "records despite conflict"

# the real libcupti.so.13 over a driver that is not NVIDIA's: CUPTI refuses,
# the agent says so, the process lives on
REAL=$(ls ${CUDA_HOME:-/usr/local/cuda}/lib64/libcupti.so.1[0-9]* 2>/dev/null | head -1)
if [ -n "$REAL" ]; then
	mkdir -p "$T/drv"; ln -s "$FAKE/libcuda.so.1" "$T/drv/libcuda.so.1"
	env LD_LIBRARY_PATH="$T/drv" TBPF_CUPTI_PATH="$REAL" $PY -c "import time; time.sleep(60)" &
	TP=$!; PIDS="$PIDS $TP"
	sleep 0.5
	"$CTL" inject $TP "$AGENT" > /dev/null 2> "$T/err" || fail "inject (real cupti): $(cat "$T/err")"
	"$PROBE" watch $TP 400 > "$T/watch" 2>&1 || fail "no status (real cupti): $(head -c 300 "$T/watch")"
	grep -q "state=cupti-error" "$T/watch" || fail "real CUPTI without driver: $(head -1 "$T/watch")"
	grep -q "libcupti" /proc/$TP/maps || fail "real libcupti was not loaded"
	kill -0 $TP 2>/dev/null || fail "target died with real libcupti"
fi

# tbpf run: probes attached by file while the child is held, agent loaded
# by the (fake) driver from CUDA_INJECTION64_PATH at cuInit, autostart
TBPF_AGENT_PATH="$AGENT" LD_LIBRARY_PATH="$FAKE" "$PROBE" run -- $PY -c \
	"import ctypes, time; assert ctypes.CDLL('libcuda.so.1').cuInit(0) == 0; time.sleep(0.4)" \
	> "$T/run" 2> "$T/err" || fail "run: $(cat "$T/err" "$T/run" | head -c 300)"
grep -q "^records: kernel=12 memcpy=3 memset=3 api=18 name=1 status=[0-9]* not_monotonic=0 api_without_tid=0$" "$T/run" \
	|| fail "run records: $(grep '^records' "$T/run")"
echo "test_agent_fake: ok"
exit 0
