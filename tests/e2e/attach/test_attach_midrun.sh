#!/bin/bash
# test_attach_midrun.sh - tbpf attached to a job that is already running
# its ops (the usual case: a slow training job), in the uprobe mode with
# return probes, torch 1.13 and 2.x, and the same job's device times with
# --inject, --inproc --inject and tbpf daemon --inproc --inject (torch
# 1.13).
#
# The job (tests/workloads/fake_gpu_model.py, the fake driver and CUPTI:
# fake_gpu_lib.sh) runs record_function scopes (torch.ops.profiler's
# _record_function_enter/_exit ops, which open a scope that outlives them
# and close it inside another op) around kernel launches, about 10 every
# 100 us, from before tbpf attaches until after it detaches.  Checked:
#  - every op return found its frame and no frame was closed for want of
#    its return (`-v`: underflow 0, unwound 0).  Before, about a quarter
#    of the returns found a scope frame on top (underflow ~240,000 in 3 s)
#    and the ops entered while the return probes were being attached
#    were closed later as unwound (2,000-12,000).
#  - device time per call of each op is the fake's (1000 ns x grid per
#    kernel, bytes / 4 per copy), give or take the two calls cut by the
#    window's ends; every other op (aten::zeros, aten::empty, ... that
#    launch nothing) has no device time and no CUDA total.  Before, the
#    CUPTI clock offset was estimated from records that did not overlap
#    in time (CUPTI on before the launch probes) and locked onto a
#    multiple of the iteration (head_kernel calls got 4 us of 10), and a
#    frame left open at attach or detach held every later launch in its
#    CUDA total (aten::zeros: 36-93 s in 3 s).
#  - a job another tracer holds (strace): tbpf falls back to inferred
#    exits and the ops still count.
# timeout: 300
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/fake_gpu_lib.sh"
export T
need_root
need_tbpf
need_torch "$PY1"
fake_gpu_setup

# midrun TAG PYW TBPF-ARGS...: the job under PYW, running for a second
# before `tbpf -v --duration 3s --format json` (TBPF-ARGS added) attaches;
# the job runs on after tbpf exits and ends with status 0.
midrun() {
	local tag=$1 pyw=$2 line
	shift 2
	start_workload wl_$tag "$pyw" fake_gpu_model.py "${WLARGS[@]}" --until "$T/stop_$tag"
	go "$(get wl_$tag pid)"
	sleep 1
	"$TBPF" --pid "$(get wl_$tag pid)" -v --no-python --duration 3s --format json \
		-o "$T/$tag.json" "$@" 2> "$T/$tag.err" ||
		fail "$tag: tbpf failed: $(tail -n 3 "$T/$tag.err")"
	sleep 0.5
	_alive "$(get wl_$tag pid)" || fail "$tag: the job ended under tbpf: $(tail -n 2 "$(get wl_$tag err)")"
	touch "$T/stop_$tag"
	wait_exit wl_$tag 60
	expect_rc wl_$tag 0
	line=$(grep '^tbpf: entries' "$T/$tag.err") || fail "$tag: no -v counters line"
	log "$tag: $line"
	[[ $line =~ \ unwound\ 0\  ]] || fail "$tag: op frames closed for want of their return: $line"
	[[ $line =~ \ underflow\ 0\  ]] || fail "$tag: op returns without their frame: $line"
}

# per_call JSON LABEL [ITER]: device time per call of the fake's ops, none
# in others; give or take two calls, or with ITER=1 an iteration's device
# time more (see --inproc --inject below)
per_call() {
	python3 - "$1" "$2" "${3:-0}" "$CONV" "$GC" "$HEAD" "$GH" "$COPY" "$STEPK" "$GS" "$NORM" "$GN" <<'PY'
import json, sys
path, label, it = sys.argv[1], sys.argv[2], int(sys.argv[3])
conv_n, gc, head_n, gh, copy, stepk, gs, norm_n, gn = map(int, sys.argv[4:])
conv, head, cp = conv_n * 1000 * gc, head_n * 1000 * gh, copy // 4
step, norm = stepk * 1000 * gs, norm_n * 1000 * gn
want = {"aten::fkconv": (conv, conv), "aten::fkhead": (head, head), "aten::fkcopy": (cp, cp),
        "aten::fknorm": (norm, norm), "aten::fkstep": (step, step + conv + head + cp + norm)}
j = json.load(open(path))
errs = []
if j["run"].get("gpu_times") is not True:
    errs.append("no GPU times: %s" % j["run"].get("gpu_note"))
ops = {o["name"]: o for o in j["ops"]}
for name, (self_ns, total_ns) in want.items():
    o = ops.get(name)
    if not o or o["calls"] < 1000:
        errs.append("%s: %s calls" % (name, o and o["calls"]))
        continue
    for key, per in (("self_cuda_ns", self_ns), ("cuda_total_ns", total_ns)):
        got = o.get(key) or 0
        if abs(got - o["calls"] * per) > 2 * per + it * (step + conv + head + cp + norm):
            errs.append("%s: %s %d over %d calls, %.3f us a call, want %.3f"
                        % (name, key, got, o["calls"], got / o["calls"] / 1000, per / 1000))
others = {n: (o.get("self_cuda_ns"), o.get("cuda_total_ns")) for n, o in ops.items()
          if n not in want and (o.get("self_cuda_ns") or o.get("cuda_total_ns"))}
if others:
    errs.append("device time in ops that launch nothing: %s" % others)
if errs:
    print("%s: %s" % (label, "; ".join(errs)))
    sys.exit(1)
print("%s: device time per call as the fake's, over %d fkconv calls; none in %d other ops"
      % (label, ops["aten::fkconv"]["calls"], len(ops) - len(want)))
PY
}

midrun t1 "$T/py1" --inject
per_call "$T/t1.json" "torch 1.13, --inject" || fail "torch 1.13 --inject: device times (see log)"

# The same with the in-process agents (--inproc --inject).  Before, the
# first 20-80 ms of ops had no device time (per call 1-2.5% short): the
# CUDA probes recorded only once the RecordFunction agents had started,
# and the CUPTI agent's records of their injection filled the ring, which
# then dropped the first ops' records; at the end, the ops an op started
# before the stop ran after it were not recorded, their calls its self
# time.  One iteration's device time either way: the agents start and
# stop within one, whose ops are recorded in part (the record_function
# scope and the dispatcher's ops see the callbacks at different moments;
# an op started before the stop records its end).
start_workload wl_t4 "$T/py1" fake_gpu_model.py "${WLARGS[@]}" --until "$T/stop_t4"
go "$(get wl_t4 pid)"
sleep 1
"$TBPF" --pid "$(get wl_t4 pid)" --inproc --inject --no-python --duration 3s --format json \
	-o "$T/t4.json" 2> "$T/t4.err" || fail "--inproc --inject: tbpf failed: $(tail -n 3 "$T/t4.err")"
touch "$T/stop_t4"
wait_exit wl_t4 60
expect_rc wl_t4 0
if grep -q 'records dropped' "$T/t4.err"; then
	fail "--inproc --inject: records dropped: $(grep 'records dropped' "$T/t4.err")"
fi
per_call "$T/t4.json" "torch 1.13, --inproc --inject" 1 ||
	fail "torch 1.13 --inproc --inject: device times (see log)"

# And tbpf daemon --inproc --inject (its windows' device times summed,
# the same slack):
# one scrape after the job ended and the windows after it joined its
# last calls.  Before, the first ops' launches went unrecorded as above,
# and the daemon told ring drops of the injection as lost device time.
start_workload wl_t5 "$T/py1" fake_gpu_model.py "${WLARGS[@]}" --until "$T/stop_t5"
go "$(get wl_t5 pid)"
sleep 1
start_daemon --inproc --inject --pid "$(get wl_t5 pid)" --window 1s
sleep 3
touch "$T/stop_t5"
wait_exit wl_t5 60
expect_rc wl_t5 0
sleep 2.5   # the calls of the job's last 0.5 s are joined a window later
python3 "$ROOT/tests/e2e/lib/promquery.py" get "http://127.0.0.1:$PORT/metrics" > "$T/t5.txt" ||
	fail "daemon: scrape failed"
kill -TERM "$dpid"
wait "$dpid" || fail "daemon: exit status $?: $(tail -c 300 "$T/daemon.err")"
if grep -q 'warning\|dropped\|incomplete' "$T/daemon.err"; then
	fail "daemon warned: $(grep 'warning\|dropped\|incomplete' "$T/daemon.err")"
fi
python3 - "$T/t5.txt" "$CONV" "$GC" "$HEAD" "$GH" "$COPY" "$STEPK" "$GS" "$NORM" "$GN" <<'PY' ||
import os, sys
sys.path.insert(0, os.environ["E2E_DIR"])
from promquery import sample
text = open(sys.argv[1]).read()
conv_n, gc, head_n, gh, copy, stepk, gs, norm_n, gn = map(int, sys.argv[2:])
want = {"aten::fkconv": conv_n * 1000 * gc, "aten::fkhead": head_n * 1000 * gh,
        "aten::fkcopy": copy // 4, "aten::fknorm": norm_n * 1000 * gn,
        "aten::fkstep": stepk * 1000 * gs}
errs = []
for op, per in want.items():
    calls = sample(text, "tbpf_op_calls_total", op=op, device="cpu") or 0
    got = round((sample(text, "tbpf_op_self_seconds_total", op=op, device="cuda") or 0) * 1e9)
    print("%s: %d calls, Self CUDA %d ns, %.3f us a call, want %.3f"
          % (op, calls, got, got / max(calls, 1) / 1000, per / 1000))
    if calls < 1000 or abs(got - calls * per) > 2 * per + sum(want.values()):
        errs.append(op)
sys.exit(1 if errs else 0)
PY
	fail "daemon: device time per call (see log)"
log "daemon --inproc --inject attached mid-run: device time per call as the fake's"

# Another tracer holds the job (strace): the guard cannot start, tbpf
# warns and infers exits from entry probes alone; those ops have no
# return probe to wait for and must count (they left no row when the
# entry probes were gated like the guard's).
if command -v strace > /dev/null; then
	start_workload wl_t3 "$T/py1" fake_gpu_model.py "${WLARGS[@]}" --until "$T/stop_t3"
	go "$(get wl_t3 pid)"
	strace -f -qq -e trace=none -o /dev/null -p "$(get wl_t3 pid)" &
	tracer=$!
	sleep 1
	"$TBPF" --pid "$(get wl_t3 pid)" --no-python --duration 2s --format json -o "$T/t3.json" \
		2> "$T/t3.err" || fail "traced job: tbpf failed: $(tail -n 3 "$T/t3.err")"
	kill "$tracer"
	wait "$tracer" 2>/dev/null || true
	touch "$T/stop_t3"
	wait_exit wl_t3 60
	expect_rc wl_t3 0
	grep -q 'exact op durations unavailable' "$T/t3.err" ||
		fail "traced job: no warning that exits are inferred: $(head -c 300 "$T/t3.err")"
	calls=$(python3 -c 'import json,sys; print(sum(o["calls"] for o in json.load(open(sys.argv[1]))["ops"] if o["name"] == "aten::fkconv"))' "$T/t3.json")
	[ "$calls" -ge 1000 ] || fail "traced job: aten::fkconv counted $calls times in 2 s (inferred exits)"
	log "traced job: exits inferred, aten::fkconv $calls calls"
else
	log "strace missing: the traced job's case skipped"
fi
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	# torch 2.x maps Kineto's libcupti: --inject would be refused; the
	# op frames are what is checked here
	midrun t2 "$T/py2"
else
	log "torch 2.x: $PY2 missing, skipped"
fi
log "OK"
