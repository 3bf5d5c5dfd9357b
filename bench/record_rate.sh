#!/bin/bash
# record_rate.sh - sustained recording rate: `tbpf -o run.tbpf` on a target
# that does nothing but enter and leave two nested ops (4 events per call,
# bench/recrate), T threads for S seconds; reports events recorded per
# second and drops at the default ring size, R repetitions, median.
# usage: sudo bench/record_rate.sh [THREADS=2] [SECONDS=3] [REPS=3] [extra tbpf args]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2} SECS=${2:-3} REPS=${3:-3}
shift $(( $# < 3 ? $# : 3 )) || true
make -s build/tbpf build/bench/recrate/recrate
tmp=$(mktemp -d /tmp/tbpf-recrate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
rates=() base=()
for ((r = 1; r <= REPS; r++)); do
	for mode in base tbpf; do
		build/bench/recrate/recrate "$THREADS" "$SECS" > "$tmp/out" &
		pid=$!
		until grep -q READY "$tmp/out"; do sleep 0.05; done
		if [ $mode = tbpf ]; then
			build/tbpf --pid $pid -o "$tmp/run.tbpf" "$@" 2> "$tmp/err" &
			tb=$!
			until grep -q 'tbpf: attached' "$tmp/err" 2>/dev/null; do sleep 0.05; done
		fi
		kill -USR1 $pid
		wait $pid
		calls=$(sed -n 's/.*calls=\([0-9]*\) .*/\1/p' "$tmp/out")
		secs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$tmp/out")
		if [ $mode = base ]; then
			base+=("$(python3 -c "print(4*$calls/$secs)")")
			continue
		fi
		wait $tb
		drops=$(sed -n 's/.*\([0-9][0-9]*\) events dropped.*/\1/p' "$tmp/err")
		recs=$(build/tbpf report "$tmp/run.tbpf" --format json --row-limit -1 |
			python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(o["calls"]+o.get("folded",0) for o in d["ops"]))')
		rate=$(python3 -c "print(2*$recs/$secs)")
		rates+=("$rate")
		printf 'rep %d: %d calls in %.2f s under tbpf: %d ops recorded (%d events, %.0f events/s), drops %s; capture %s bytes\n' \
			"$r" "$calls" "$secs" "$recs" $((2 * recs)) "$rate" "${drops:-0}" "$(stat -c %s "$tmp/run.tbpf")"
	done
done
python3 - "${base[*]}" "${rates[*]}" "$THREADS" <<'PY'
import statistics, sys
base = [float(x) for x in sys.argv[1].split()]
rate = [float(x) for x in sys.argv[2].split()]
print("| threads | events/s unprobed (would-be) | events/s recorded under tbpf (median) |")
print("|---|---|---|")
print("| %s | %.0f | %.0f |" % (sys.argv[3], statistics.median(base), statistics.median(rate)))
PY
