#!/bin/bash
# soak.sh - `tbpf daemon` memory under sustained load.
#
# Runs the daemon system-wide (filtered to this benchmark's processes with
# --comm tbpf_soak) with a 1 s window and a pprof directory, against
# LOAD steady PyTorch processes (tests/workloads/fleet_ops.py, endless)
# plus churn: one short-lived PyTorch process started every CHURN seconds.
# Every INTERVAL seconds it samples the daemon's RSS (/proc/PID/status) and
# scrapes /metrics, then prints a table and the RSS growth after warm-up.
#
# usage: sudo bench/soak.sh               DURATION=60 (CI); docs/fleet.md's
#        sudo DURATION=600 bench/soak.sh  figures are the 10-minute run
#        LOAD=2 CHURN=20 INTERVAL=10
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TBPF=${TBPF:-$ROOT/build/tbpf}
PY=${PY:-/usr/bin/python3}
DURATION=${DURATION:-60}
INTERVAL=${INTERVAL:-10}
LOAD=${LOAD:-2}
CHURN=${CHURN:-20}
T=$(mktemp -d /tmp/tbpf-soak.XXXXXX)
WL=$ROOT/tests/workloads
Q="python3 $ROOT/tests/e2e/lib/promquery.py"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
[ "$(id -u)" -eq 0 ] || { echo "soak.sh: run as root" >&2; exit 1; }
[ -x "$TBPF" ] || { echo "soak.sh: $TBPF missing: run make" >&2; exit 1; }

for ((i = 0; i < LOAD; i++)); do
	"$PY" "$WL/fleet_ops.py" --comm tbpf_soak --iters 0 --no-wait --sleep 0.0002 > /dev/null 2>&1 &
	pids+=($!)
done
mkdir -p "$T/pprof"
"$TBPF" daemon --listen 127.0.0.1:0 --window 1s --comm tbpf_soak --pprof-dir "$T/pprof" --keep 5 \
	2> "$T/daemon.err" &
dpid=$!
pids+=($dpid)
until grep -q '^tbpf: listening on port' "$T/daemon.err" 2> /dev/null; do
	kill -0 $dpid 2> /dev/null || { cat "$T/daemon.err" >&2; exit 1; }
	sleep 0.1
done
port=$(sed -n 's/^tbpf: listening on port //p' "$T/daemon.err")

metric() { awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%.0f", s }' "$T/m.txt"; }
echo "tbpf daemon soak: ${DURATION}s, $LOAD steady PyTorch processes, one more every ${CHURN}s; $(nproc) CPUs"
printf '%8s %10s %10s %8s %8s %14s %10s\n' "t (s)" "RSS (KB)" "HWM (KB)" targets windows "op calls" "tbpf CPU s"
t0=$(date +%s)
next_churn=$CHURN
rss0=""
while :; do
	el=$(($(date +%s) - t0))
	if [ $el -ge "$next_churn" ]; then
		timeout 30 "$PY" "$WL/fleet_ops.py" --comm tbpf_soak --iters 2000 --no-wait > /dev/null 2>&1 &
		pids+=($!)
		next_churn=$((next_churn + CHURN))
	fi
	if [ $((el % INTERVAL)) -eq 0 ] || [ $el -ge "$DURATION" ]; then
		rss=$(awk '/^VmRSS:/ {print $2}' /proc/$dpid/status)
		hwm=$(awk '/^VmHWM:/ {print $2}' /proc/$dpid/status)
		$Q get "http://127.0.0.1:$port/metrics" > "$T/m.txt"
		printf '%8d %10d %10d %8s %8s %14s %10s\n' $el "$rss" "$hwm" "$(metric tbpf_targets)" \
			"$(metric tbpf_windows_total)" "$(metric tbpf_op_calls_total)" \
			"$(awk '$1 ~ /^tbpf_cpu_seconds_total/ { s += $2 } END { printf "%.2f", s }' "$T/m.txt")"
		# warm-up: the first minute (or the first sample of a short run)
		if [ -z "$rss0" ] && { [ $el -ge 60 ] || [ $el -ge $((DURATION / 2)) ]; }; then rss0=$rss; fi
		[ $el -ge "$DURATION" ] && break
		sleep 1
	else
		sleep 0.5
	fi
done
kill -TERM $dpid
wait $dpid || true
echo "RSS after warm-up ${rss0} KB, at the end ${rss} KB: growth $((rss - rss0)) KB ($(python3 -c "print('%+.1f%%' % (($rss - $rss0) * 100 / $rss0))"))"
echo "pprof files kept: $(ls "$T/pprof" | wc -l) (--keep 5)"
