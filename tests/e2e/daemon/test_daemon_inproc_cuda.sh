#!/bin/bash
# test_daemon_inproc_cuda.sh - `tbpf daemon --inproc --inject --pid N`:
# the CUPTI agent and the libcuda probes beside the
# RecordFunction agent; each window's device records joined to the
# launches, which were joined to the in-process ops.
#
# No GPU here: the fake driver and CUPTI (tests/native/cupti/fake_cuda.c,
# FAKE_CUPTI_LAUNCHES=1, through the real agent) report a device record
# for each cuLaunchKernel / cuMemcpyHtoDAsync of the job
# (tests/workloads/fake_gpu_model.py, the parameters of
# tests/e2e/lib/fake_gpu_lib.sh).  The job runs about 3 s of 1 s windows (a
# 2 ms pause per iteration; in a tight loop the join's former
# 100 us slack left about one kernel in 50,000 unjoined, a thread
# preempted between the probe and CUPTI's API timestamp: the
# full-rate check is test_inproc_inject.sh's), so launches,
# device records and ops open across window ends; one scrape
# after it ended must hold, for the N iterations its RESULT line counts,
# by the parameters (expect.py, not tbpf's output):
#   tbpf_op_self_seconds_total{device="cuda"} / tbpf_op_seconds_total
#   {device="cuda"} per op (aten::fkstep's total over its nested ops),
#   tbpf_cuda_launches_total per op, tbpf_cuda_copies_total and
#   tbpf_cuda_copy_bytes_total (HtoD),
# promtool accepts the text, the job's checksum is an unprofiled run's.
# CUPTI taken (the fake's subscribe fails): one line, the op counters go
# on, no device series.  Bad input: one line, exit 2.  The release of
# CUPTI at the daemon's SIGKILL / SIGTERM: test_agent_watchdog.sh.
# timeout: 300
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/fake_gpu_lib.sh"
export T
need_root
need_tbpf
need_torch "$PY1"
fake_gpu_setup
Q="python3 $ROOT/tests/e2e/lib/promquery.py"

# job TAG [ENV=V...]: the job under the daemon; scrape into $T/TAG.txt
# after it ended and the windows that follow joined its last records
job() {
	local tag=$1
	shift
	env "$@" "$T/py1" "$WL/fake_gpu_model.py" "${WLARGS[@]}" --pause 0.002 --until "$T/$tag.done" \
		> "$T/$tag.out" 2> "$T/$tag.err" &
	jpid=$!
	_E2E_PIDS+=("$jpid")
	for ((i = 0; i < 600; i++)); do grep -qs '^READY' "$T/$tag.out" && break; sleep 0.05; done
	grep -qs '^READY' "$T/$tag.out" || fail "$tag: job not ready: $(cat "$T/$tag.err")"
	start_daemon --inproc --inject --pid "$jpid" --window 1s
	kill -USR1 "$jpid"
	sleep 3
	touch "$T/$tag.done"
	wait "$jpid" || fail "$tag: job exit status $?: $(tail -n 2 "$T/$tag.err")"
	sleep 2.5   # the calls of the job's last 0.5 s are joined a window later
	$Q get "http://127.0.0.1:$PORT/metrics" > "$T/$tag.txt" || fail "$tag: scrape failed"
	kill -TERM $dpid
	wait $dpid || fail "$tag: daemon exit status $?: $(tail -c 300 "$T/daemon.err")"
	cp "$T/daemon.err" "$T/$tag.daemon.err"
	N=$(result_field "$T/$tag.out" iters)
	"$T/py1" "$WL/fake_gpu_model.py" "${WLARGS[@]}" --iters "$N" --go-file "$T" > "$T/ref.out" 2>&1 ||
		fail "unprofiled run failed: $(tail -n 2 "$T/ref.out")"
	[ "$(result_field "$T/$tag.out" checksum)" = "$(result_field "$T/ref.out" checksum)" ] ||
		fail "$tag: checksum $(result_field "$T/$tag.out" checksum), unprofiled $(result_field "$T/ref.out" checksum)"
}

job dev
grep -q 'warning\|dropped' "$T/dev.daemon.err" && fail "daemon warned: $(grep 'warning\|dropped' "$T/dev.daemon.err")"
if command -v promtool > /dev/null; then
	promtool check metrics < "$T/dev.txt" || fail "promtool rejects the metrics"
fi
python3 - "$T/dev.txt" "$N" $PARAMS <<'PY' || fail "device times, launches, copies (see log)"
import os, re, sys
sys.path.insert(0, os.environ["T"])
from expect import expect
text = open(sys.argv[1]).read()
N = int(sys.argv[2])
P = list(map(int, sys.argv[3:]))
CONV, HEAD, COPY, STEPK, NORM = P[0], P[2], P[4], P[5], P[7]
ops, _ = expect([N] + P)
sys.path.insert(0, os.environ["E2E_DIR"])
from promquery import sample
val = lambda name, **lbl: sample(text, name, **lbl)
ns = lambda v: None if v is None else round(v * 1e9)
errs = []
for op, (self_ns, total_ns) in ops.items():
    got = (ns(val("tbpf_op_self_seconds_total", op=op, device="cuda")),
           ns(val("tbpf_op_seconds_total", op=op, device="cuda")))
    print("%s: Self CUDA, CUDA total %s ns, want %s" % (op, got, (self_ns, total_ns)))
    if got != (self_ns, total_ns):
        errs.append(op)
others = [l for l in text.splitlines() if l.startswith("tbpf_op_self_seconds_total{") and
          'device="cuda"' in l and not any('op="%s"' % o in l for o in ops) and not l.endswith(" 0")]
if others:
    errs.append("device time in other ops: %s" % others)
want = {("tbpf_cuda_launches_total", "aten::fkconv"): N * CONV,
        ("tbpf_cuda_launches_total", "aten::fkhead"): N * HEAD,
        ("tbpf_cuda_launches_total", "aten::fknorm"): N * NORM,
        ("tbpf_cuda_launches_total", "aten::fkstep"): N * STEPK}
for (name, op), n in want.items():
    got = val(name, op=op, device="cuda")
    print("%s{op=%s} = %s, want %d" % (name, op, got, n))
    if got != n:
        errs.append("%s %s" % (name, op))
for name, n in (("tbpf_cuda_copies_total", N), ("tbpf_cuda_copy_bytes_total", N * COPY)):
    got = val(name, direction="HtoD")
    print("%s{HtoD} = %s, want %d" % (name, got, n))
    if got != n:
        errs.append(name)
assert not errs, errs
print("N=%d iterations: every device time, launch and copy counter as the parameters give" % N)
PY
log "dev: $N iterations, device times, launches and copies exact"

# CUPTI taken: one line, the op counters without device series
job conf FAKE_CUPTI_CONFLICT=1
[ "$(grep -c 'device time' "$T/conf.daemon.err")" = 1 ] &&
	grep -q '^tbpf: warning: pid [0-9]*: no CUDA device times: CUPTI agent reports conflict' "$T/conf.daemon.err" ||
	fail "CUPTI taken: not one line: $(cat "$T/conf.daemon.err")"
grep -q '^tbpf_op_\(self_\)\?seconds_total{.*device="cuda"' "$T/conf.txt" &&
	fail "CUPTI taken: device series: $(grep 'seconds_total.*cuda' "$T/conf.txt" | head -3)"
grep -q "^tbpf_op_calls_total{job=\"[^\"]*\",op=\"aten::fkconv\",device=\"cpu\"} $N\$" "$T/conf.txt" ||
	fail "CUPTI taken: no op counters: $(grep fkconv "$T/conf.txt")"
log "conf: $(grep 'device time' "$T/conf.daemon.err")"

# bad input: one line, usage exit
for args in "--inject --pid $$" "--inproc --inject --no-cuda --pid $$"; do
	rc=0
	# shellcheck disable=SC2086
	"$TBPF" daemon $args > /dev/null 2> "$T/bad.err" || rc=$?
	[ $rc = 2 ] && [ "$(wc -l < "$T/bad.err")" = 1 ] || fail "daemon $args: rc $rc, $(cat "$T/bad.err")"
	log "daemon $args: $(cat "$T/bad.err")"
done
log "OK"
