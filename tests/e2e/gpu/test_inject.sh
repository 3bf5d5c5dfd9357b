#!/bin/sh
# test_inject.sh - `--inject` end to end on a real Python process running
# torch 1.13 CPU work: five inject / start / status / unload cycles (plus a
# double load), the agent reports through the real BPF transport, the
# process keeps running and prints exactly the checksums of an unprofiled
# run.  Also: a libcupti already loaded is no refusal, refusal without
# ptrace permission, and "no device" with the toolkit's stub driver.
# Exit 0 = pass; on failure one line of reason.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
B=${OUT:-$ROOT/build}
AGENT=$B/libtbpf_agent.so
CTL=$B/tests/native/cupti/agentctl
PROBE=$B/tests/native/cupti/agent_probe
PY=/usr/bin/python3
T=$(mktemp -d /tmp/tbpf_inject.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "test_inject: FAIL: $*"; exit 1; }

for f in "$AGENT" "$CTL" "$PROBE"; do [ -x "$f" ] || [ -f "$f" ] || fail "missing $f (run make)"; done
$PY -c 'import torch' 2>/dev/null || fail "no torch under $PY"

cat > "$T/work.py" <<'PYEOF'
import os, sys, time, torch
torch.set_num_threads(2)
torch.manual_seed(0)
a = torch.randn(192, 192); b = torch.randn(192, 192)
limit = int(os.environ.get("LIMIT", "0")); stop = os.environ.get("STOP", "")
i = 0
while (limit == 0 or i < limit) and not (stop and os.path.exists(stop)):
    c = ((a * (i % 7 + 1)) @ b).tanh().sum(dim=0)
    print(f"{i} {c.sum().item():.6f} {c.max().item():.6f}", flush=True)
    i += 1
    time.sleep(0.005)
PYEOF

mapped() { grep -q libtbpf_agent.so "/proc/$1/maps"; }

# --- the target -----------------------------------------------------------
STOP="$T/stop" $PY "$T/work.py" > "$T/target.out" 2> "$T/target.err" &
TP=$!; PIDS="$TP"
sleep 3
kill -0 $TP 2>/dev/null || fail "workload did not start: $(head -c 200 "$T/target.err")"
mapped $TP && fail "agent mapped before injection"

cycle=1
while [ $cycle -le 5 ]; do
	H=$("$CTL" inject $TP "$AGENT" 2> "$T/err") || fail "cycle $cycle inject: $(cat "$T/err")"
	mapped $TP || fail "cycle $cycle: agent not in /proc/$TP/maps after inject"
	if [ $cycle -eq 3 ]; then   # second dlopen of a loaded library: refcount 2
		H2=$("$CTL" inject $TP "$AGENT" 2> "$T/err") || fail "double inject: $(cat "$T/err")"
		[ "$H2" = "$H" ] || fail "second dlopen returned another handle ($H2 vs $H)"
	fi
	"$PROBE" watch $TP 400 > "$T/watch" 2> "$T/err" || fail "cycle $cycle: no status record through the BPF transport: $(cat "$T/err" "$T/watch" | head -c 300)"
	grep -q "state=no-driver" "$T/watch" || fail "cycle $cycle: agent did not report no-driver: $(head -c 300 "$T/watch")"
	"$CTL" status $TP > "$T/status" 2> "$T/err" || fail "cycle $cycle status: $(cat "$T/err")"
	grep -q "state=no-driver" "$T/status" || fail "cycle $cycle: status word says $(head -1 "$T/status")"
	if [ $cycle -eq 3 ]; then
		"$CTL" unload $TP "$H" 2> "$T/err" || fail "unload (ref 2): $(cat "$T/err")"
		mapped $TP || fail "agent unmapped while a reference was left"
	fi
	"$CTL" unload $TP "$H" 2> "$T/err" || fail "cycle $cycle unload: $(cat "$T/err")"
	mapped $TP && fail "cycle $cycle: agent still mapped after dlclose"
	grep -q tbpf-agent /proc/$TP/task/*/comm 2>/dev/null && fail "cycle $cycle: agent thread left behind"
	kill -0 $TP 2>/dev/null || fail "cycle $cycle: target died: $(tail -c 300 "$T/target.err")"
	cycle=$((cycle + 1))
done

n1=$(wc -l < "$T/target.out")
sleep 1
n2=$(wc -l < "$T/target.out")
[ "$n2" -gt "$n1" ] || fail "target stopped making progress after injection ($n1 -> $n2 lines)"
touch "$T/stop"
wait $TP; rc=$?; PIDS=""
[ $rc -eq 0 ] || fail "target exited $rc: $(tail -c 300 "$T/target.err")"
[ -s "$T/target.err" ] && fail "target wrote to stderr: $(head -c 300 "$T/target.err")"
n=$(wc -l < "$T/target.out")
LIMIT=$n $PY "$T/work.py" > "$T/ref.out" 2>&1 || fail "reference run failed"
cmp -s "$T/ref.out" "$T/target.out" || fail "results differ from an unprofiled run: $(diff "$T/ref.out" "$T/target.out" | head -3 | tr '\n' ' ')"

# --- libcupti already loaded (as torch 2.x loads its own): injected ------
# the agent uses that copy; only CUPTI's own answer at START can refuse
CUPTI=$(ls /usr/local/cuda/lib64/libcupti.so* 2>/dev/null | head -1)
if [ -n "$CUPTI" ]; then
	$PY -c "import ctypes, time; ctypes.CDLL('$CUPTI'); time.sleep(60)" &
	CP=$!; PIDS="$CP"
	sleep 1
	"$CTL" inject $CP "$AGENT" > /dev/null 2> "$T/err" || fail "not injected with libcupti loaded: $(cat "$T/err")"
	mapped $CP || fail "agent not mapped with libcupti loaded"
	kill $CP; wait $CP 2>/dev/null; PIDS=""
fi

# --- refusal: ptrace not permitted (unprivileged caller) ------------------
$PY -c "import time; time.sleep(60)" &
SP=$!; PIDS="$SP"
sleep 0.5
if command -v setpriv > /dev/null && [ "$(id -u)" = 0 ]; then
	cp "$CTL" "$T/agentctl"; chmod 755 "$T" "$T/agentctl"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$T/agentctl" inject $SP "$AGENT" > /dev/null 2> "$T/err" \
		&& fail "unprivileged inject succeeded"
	grep -q "ptrace of $SP not permitted" "$T/err" || fail "unprivileged refusal unclear: $(cat "$T/err")"
	mapped $SP && fail "agent mapped after refused inject"
fi
kill $SP; wait $SP 2>/dev/null; PIDS=""

# --- a driver that finds no device: the toolkit's stub libcuda ------------
STUB=/usr/local/cuda/lib64/stubs/libcuda.so
if [ -f "$STUB" ]; then
	mkdir -p "$T/drv"; ln -s "$STUB" "$T/drv/libcuda.so.1"
	LD_LIBRARY_PATH="$T/drv" $PY -c "import time; time.sleep(60)" &
	DP=$!; PIDS="$DP"
	sleep 0.5
	"$CTL" inject $DP "$AGENT" > /dev/null 2> "$T/err" || fail "inject (stub driver): $(cat "$T/err")"
	"$PROBE" watch $DP 400 > "$T/watch" 2>&1 || fail "no status (stub driver): $(head -c 300 "$T/watch")"
	grep -q "state=no-device" "$T/watch" || fail "stub driver: expected no-device: $(head -c 300 "$T/watch")"
	kill -0 $DP || fail "stub-driver target died"
fi
echo "test_inject: ok (5 cycles, $n identical lines)"
exit 0
