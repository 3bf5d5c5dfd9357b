#!/bin/bash
# budget_multi.sh - one `tbpf daemon --max-overhead 1%` budgeting two
# busy processes on the same libtorch (torch 1.13) at once: bud_a, the
# dispatch-bound job of bench/budget.sh (5 calls each of add, mul, relu...
# per iteration), and bud_b, three ops per Python step (another hit rate,
# another light set).  Probe hits are counted per process in BPF, so each
# job's overhead and coverage come from its own hits (one global counter
# charged each job the other's hits).  Prints each job's per-window
# tbpf_job_overhead_ratio and coverage and its scaled aten::add/mul/relu
# counts against the exact ones; exits 1 when a window after the first is
# over 5% or a count is off by more than 15%.
#
# Not in the CI suite: with two busy targets and the daemon on 2 CPUs, the
# CPU-based yardstick is disturbed by contention and the estimates spread
# (6 runs: errors from -52% to +17%; 3 of 6 within 15%).  A job
# that mostly sleeps is not budgeted well either (docs/fleet.md, limits).
#
# usage: sudo bench/budget_multi.sh      (BUDGET_A_ITERS, BUDGET_B_ITERS)
source "$(dirname "$0")/../tests/e2e/lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
NA=${BUDGET_A_ITERS:-100000}
NB=${BUDGET_B_ITERS:-400000}
Q="python3 $ROOT/tests/e2e/lib/promquery.py"

start_workload wa "$PY1" dispatch_bound.py --comm bud_a --iters $NA
start_workload wb "$PY1" fleet_ops.py --comm bud_b --iters $NB --linger 30
pa=$(get wa pid) pb=$(get wb pid)
TBPF_BUDGET_DEBUG=1 start_daemon --pid "$pa" --pid "$pb" --window 4s --max-overhead 1% -v
go "$pa"
go "$pb"
k=0
while _alive "$pa" || ! grep -q '^RESULT' "$(get wb out)"; do
	$Q get "http://127.0.0.1:$PORT/metrics" > "$T/mid.$k.txt" 2> /dev/null || rm -f "$T/mid.$k.txt"
	k=$((k + 1))
	sleep 0.5
done
wait_exit wa 300
expect_rc wa 0
for ((i = 0; i < 3000; i++)); do grep -q '^RESULT' "$(get wb out)" && break; sleep 0.1; done
log "bud_a: $(grep '^RESULT' "$(get wa out)")"
log "bud_b: $(grep '^RESULT' "$(get wb out)")"
python3 - "$T"/mid.*.txt << 'PY' || fail "per-job overhead or coverage gauges (see log)"
import re, sys
seen = {}
for path in sorted(sys.argv[1:], key=lambda p: int(p.rsplit('.', 2)[-2])):
    text = open(path).read()
    for job in ("bud_a", "bud_b"):
        ovh = re.findall(r'^tbpf_job_overhead_ratio\{job="%s"[^}]*\} (\S+)' % job, text, re.M)
        cov = re.findall(r'^tbpf_job_coverage_ratio\{job="%s"[^}]*\} (\S+)' % job, text, re.M)
        if ovh and cov:
            w = seen.setdefault(job, [])
            if (float(ovh[0]), float(cov[0])) not in w:
                w.append((float(ovh[0]), float(cov[0])))
for job in ("bud_a", "bud_b"):
    vals = seen.get(job, [])
    print(job, "windows (overhead ratio, coverage):", vals)
    assert vals, "no window of %s closed while it ran" % job
    # the first window holds the discovery with every op probed, whose
    # cost the budget spreads over its 60 s period: not judged alone
    assert all(0 <= o < 0.05 for o, c in vals[1:]), "%s over the budget" % job
    assert all(0 < c <= 1 for o, c in vals), "%s coverage out of range" % job
# the busy job cannot afford its probes: partial coverage
assert any(c < 0.5 for o, c in seen["bud_a"]), "bud_a never duty-cycled"
PY
sleep 9   # the window holding the last calls closes (4 s windows)
$Q get "http://127.0.0.1:$PORT/metrics" > "$T/metrics.txt" || fail "scrape failed"
kill -TERM $dpid "$pb"
for ((i = 0; i < 150; i++)); do _alive $dpid || break; sleep 0.1; done
_alive $dpid && fail "daemon still running 15 s after SIGTERM"
wait $dpid || fail "daemon exit status $? after SIGTERM"
grep 'budget: pid .* window' "$T/daemon.err" | cut -c1-240
python3 - "$T/metrics.txt" "$NA" "$NB" << 'PY' || fail "budgeted counts (see log)"
import re, sys
text = open(sys.argv[1]).read()
exact = {"bud_a": 5 * int(sys.argv[2]), "bud_b": int(sys.argv[3])}
bad = []
for job, n in exact.items():
    for op in ("add", "mul", "relu"):
        m = re.search(r'^tbpf_op_calls_total\{job="%s",op="aten::%s",device="cpu"\} (\S+)' % (job, op),
                      text, re.M)
        got = float(m.group(1)) if m else 0
        err = got / n - 1
        print("%s aten::%-5s %9.0f vs %d exact (%+.1f%%)" % (job, op, got, n, 100 * err))
        if abs(err) > 0.15:
            bad.append((job, op))
assert not bad, "off by more than 15%%: %s" % bad
print("ok")
PY
log "OK"
