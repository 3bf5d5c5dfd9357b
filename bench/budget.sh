#!/bin/bash
# budget.sh - does `tbpf daemon --max-overhead` keep its promise?
#
# The dispatch-bound workload (tests/workloads/dispatch_bound.py: tiny
# tensors, ~95 ATen ops per iteration, 5 aten::add calls per iteration)
# runs ITERS iterations, REPS times each in three ways, interleaved:
#   base    no tbpf
#   budget  under `tbpf daemon --pid P --max-overhead BUDGET`
#   full    under `tbpf daemon --pid P` (probes always on, infer mode)
# and the table gives iterations/s, the slowdown against the median base
# run, the daemon's coverage, and its (scaled, estimated) aten::add count
# against the exact 5 x ITERS.  Goal: budget slowdown <= BUDGET and the
# estimate within 10%.
#
# usage: sudo bench/budget.sh        (ITERS=200000 REPS=3 BUDGET=1% WINDOW=10s)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TBPF=${TBPF:-$ROOT/build/tbpf}
PY=${PY:-/usr/bin/python3}
ITERS=${ITERS:-200000}
REPS=${REPS:-3}
BUDGET=${BUDGET:-1%}
WINDOW=${WINDOW:-10s}
T=$(mktemp -d /tmp/tbpf-budget.XXXXXX)
WL=$ROOT/tests/workloads
Q="python3 $ROOT/tests/e2e/promquery.py"
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$T"' EXIT
[ "$(id -u)" -eq 0 ] || { echo "budget.sh: run as root" >&2; exit 1; }
[ -x "$TBPF" ] || { echo "budget.sh: $TBPF missing: run make" >&2; exit 1; }

start_wl() {   # -> wl_pid, wl_out; waits for READY
	wl_out=$T/wl.$1.out
	"$PY" "$WL/dispatch_bound.py" --iters "$ITERS" > "$wl_out" 2> "$T/wl.err" &
	wl_pid=$!
	pids+=("$wl_pid")
	until grep -q "^READY" "$wl_out" 2> /dev/null; do
		kill -0 "$wl_pid" 2> /dev/null || { echo "workload died: $(tail -n 3 "$T/wl.err")" >&2; exit 1; }
		sleep 0.1
	done
}

field() { sed -n "s/^RESULT .*$2=\([^ ]*\).*/\1/p" "$1"; }

run_one() {   # MODE REP -> prints "its est cov"
	local mode=$1 rep=$2 dpid="" port="" est="-" cov="-"
	start_wl "$mode.$rep"
	if [ "$mode" != base ]; then
		local extra=()
		[ "$mode" = budget ] && extra=(--max-overhead "$BUDGET")
		"$TBPF" daemon --pid "$wl_pid" --listen 127.0.0.1:0 --window "$WINDOW" "${extra[@]}" \
			-v 2> "$T/d.$mode.$rep.err" &
		dpid=$!
		pids+=("$dpid")
		until grep -q "^tbpf: listening on port" "$T/d.$mode.$rep.err" 2> /dev/null; do
			kill -0 "$dpid" 2> /dev/null || { cat "$T/d.$mode.$rep.err" >&2; exit 1; }
			sleep 0.1
		done
		port=$(sed -n 's/^tbpf: listening on port //p' "$T/d.$mode.$rep.err")
	fi
	kill -USR1 "$wl_pid"
	wait "$wl_pid"
	if [ -n "$dpid" ]; then
		# two windows: the one holding the last calls closes
		local w=${WINDOW%s}
		sleep "$(python3 -c "print(2 * float('$w') + 0.5)")"
		$Q get "http://127.0.0.1:$port/metrics" > "$T/m.$mode.$rep.txt"
		kill -TERM "$dpid"
		wait "$dpid" || true
		est=$(sed -n 's/^tbpf_op_calls_total{job="[^"]*",op="aten::add",device="cpu"} //p' "$T/m.$mode.$rep.txt")
		cov=$(grep -o 'estimated overhead [0-9.]*%' "$T/d.$mode.$rep.err" | tail -n 1 | awk '{print $3}' || true)
		[ -n "$cov" ] || cov="-"
	fi
	echo "$(field "$wl_out" iters_per_s) ${est:--} $cov"
}

echo "dispatch-bound workload: $ITERS iterations x $REPS reps; budget $BUDGET; window $WINDOW"
echo "torch $("$PY" -c 'import torch; print(torch.__version__)'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 'calibrated' < <("$TBPF" daemon --pid $$ --listen none --max-overhead "$BUDGET" --duration 1s 2>&1 || true) || true
declare -A its est ovh
for ((r = 1; r <= REPS; r++)); do
	for mode in base budget full; do
		read -r i e o < <(run_one $mode $r)
		its[$mode.$r]=$i est[$mode.$r]=$e ovh[$mode.$r]=$o
	done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
base=$(median $(for ((r = 1; r <= REPS; r++)); do echo "${its[base.$r]}"; done))
exact=$((5 * ITERS))
printf '\n%-4s %-7s %12s %10s %14s %12s %10s %14s\n' rep mode "iters/s" slowdown "est add calls" exact "error" "tbpf's estimate"
for ((r = 1; r <= REPS; r++)); do
	for mode in base budget full; do
		i=${its[$mode.$r]} e=${est[$mode.$r]}
		sd=$(python3 -c "print('%+.2f%%' % ((float('$base') / float('$i') - 1) * 100))")
		if [ "$e" != "-" ]; then
			err=$(python3 -c "print('%+.2f%%' % ((float('$e') - $exact) / $exact * 100))")
		else
			err="-"
		fi
		printf '%-4s %-7s %12s %10s %14s %12s %10s %14s\n' $r $mode "$i" "$sd" "$e" $exact "$err" "${ovh[$mode.$r]}"
	done
done
echo "slowdown = base median iters/s / run iters/s - 1; est: tbpf_op_calls_total{op=aten::add} (scaled by 1/coverage under the budget)"
for mode in budget full; do
	m=$(median $(for ((r = 1; r <= REPS; r++)); do echo "${its[$mode.$r]}"; done))
	me=$(median $(for ((r = 1; r <= REPS; r++)); do echo "${est[$mode.$r]}"; done | grep -v -- '^-$' || echo 0))
	echo "median $mode: $m iters/s, slowdown $(python3 -c "print('%+.2f%%' % ((float('$base') / float('$m') - 1) * 100))"), add estimate $me ($(python3 -c "print('%+.2f%%' % ((float('$me') - $exact) / $exact * 100))") of exact)"
done
