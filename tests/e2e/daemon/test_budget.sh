#!/bin/bash
# test_budget.sh - `tbpf daemon --max-overhead 1%` on a dispatch-bound
# torch 1.13 job (tests/workloads/dispatch_bound.py: per iteration 5 calls
# each of add, mul, relu, sub, neg, maximum, div, clone, whose always-on
# probe cost is far above 1%).  The daemon must duty-cycle it: discovery
# with all ops, then hot phases (the ops seen, not all ~6,000), and light
# phases; the job's series are marked estimated with a coverage well below
# 1, and the scaled counts of those eight ops land within 30% of the exact
# 5 x N.  The issue asks 10% from the benchmark, which gets there in 8 of
# 12 runs and within 16.1% in all (docs/fleet.md, Measured); on this
# shorter run the estimates spread more (-10.5% to +24.6% over nine runs
# of 250,000 iterations on this 2-core VM), so this guard catches gross
# errors (the first design's -56%), not the 10% goal: 400,000 iterations
# close more windows, and the bound leaves room for the VM's noise.  The overhead gauge must stay under 5% in every window
# after the first (which holds the discovery).  The workload must finish
# normally.
# timeout: 600
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
# ~20 s on a quiet box: several 4 s windows close while it runs
N=${BUDGET_ITERS:-400000}
Q="python3 $ROOT/tests/e2e/lib/promquery.py"

start_workload w "$PY1" dispatch_bound.py --iters $N
wpid=$(get w pid)
TBPF_BUDGET_DEBUG=1 start_daemon --pid "$wpid" --window 4s --max-overhead 1% -v
grep -m1 'calibrated' "$T/daemon.err" || fail "no calibration line"
go "$wpid"
# the coverage and overhead gauges, scraped every 0.5 s while the job runs
# (a fixed sleep missed it when the job finished before two windows closed)
k=0
while _alive "$wpid"; do
	$Q get "http://127.0.0.1:$PORT/metrics" > "$T/mid.$k.txt" 2> /dev/null || rm -f "$T/mid.$k.txt"
	k=$((k + 1))
	sleep 0.5
done
python3 - "$T"/mid.*.txt << 'PY' || fail "coverage or overhead gauge (see log)"
import re, sys
windows = []   # distinct (coverage, overhead) readings in scrape order
for path in sorted(sys.argv[1:], key=lambda p: int(p.rsplit('.', 2)[-2])):
    text = open(path).read()
    cov = [float(v) for v in re.findall(r'^tbpf_job_coverage_ratio\{[^}]*\} (\S+)', text, re.M)]
    ovh = [float(v) for v in re.findall(r'^tbpf_overhead_ratio(?:\{[^}]*\})? (\S+)', text, re.M)]
    if not cov:
        continue   # before the first window closed
    assert ovh, "no overhead gauge"
    if (cov, ovh) not in windows:
        windows.append((cov, ovh))
for cov, ovh in windows:
    print("mid-run window: coverage", cov, "overhead ratio", ovh)
    assert all(0 < v < 0.5 for v in cov), "coverage not partial"
assert windows, "no window closed while the job ran"
# The first window holds the discovery (every op probed for ~0.3 s), a
# cost the budget spreads over its 60 s period and a 4 s window cannot:
# it is not judged alone.  Every later window must be near the budget.
later = windows[1:]
assert later, "only the discovery window closed while the job ran"
assert all(0 <= o[0] < 0.05 for c, o in later), "overhead far above the budget after the discovery"
PY
wait_exit w 400
expect_rc w 0
log "workload: $(grep '^RESULT' "$(get w out)")"
sleep 9   # the window holding the last calls closes (4 s windows)
$Q get "http://127.0.0.1:$PORT/metrics" > "$T/metrics.txt" || fail "scrape failed"
kill -TERM $dpid
for ((i = 0; i < 150; i++)); do _alive $dpid || break; sleep 0.1; done
_alive $dpid && fail "daemon still running 15 s after SIGTERM"
wait $dpid || fail "daemon exit status $? after SIGTERM"
grep 'budget: pid .* window' "$T/daemon.err" | cut -c1-300
grep 'estimated overhead' "$T/daemon.err" | tail -n 3

hot=$(grep -c 'hot set on' "$T/daemon.err" || true)
light=$(grep -c 'light set on' "$T/daemon.err" || true)
full=$(grep -c 'all ops on' "$T/daemon.err" || true)
log "phases: $hot hot, $light light, $full discoveries after the first"
[ "$hot" -ge 2 ] || fail "fewer than 2 hot phases"
[ "$light" -ge 2 ] || fail "fewer than 2 light phases"
[ "$full" -le 1 ] || fail "$full re-discoveries in a run shorter than the 60 s period"
python3 - "$T/metrics.txt" $N << 'PY' || fail "budgeted counts (see log)"
import re, sys
text = open(sys.argv[1]).read()
n = int(sys.argv[2])
calls, est = {}, {}
for line in text.splitlines():
    m = re.match(r'tbpf_op_calls_total\{job="([^"]*)",op="([^"]*)",device="cpu"\} (\S+)', line)
    if m:
        calls[m.group(2)] = float(m.group(3))
    m = re.match(r'tbpf_job_estimated\{job="([^"]*)"\} (\S+)', line)
    if m:
        est[m.group(1)] = float(m.group(2))
print("estimated:", est)
assert est and all(v == 1 for v in est.values()), "job not marked estimated: %s" % est
bad = []
for op in ("add", "mul", "relu", "sub", "neg", "maximum", "div", "clone"):
    got = calls.get("aten::" + op, 0)
    err = got / (5 * n) - 1
    print("aten::%-8s %9.0f vs %d exact (%+.1f%%)" % (op, got, 5 * n, 100 * err))
    if abs(err) > 0.30:
        bad.append(op)
assert not bad, "off by more than 30%%: %s" % bad
print("ok")
PY
log "OK"
