# steps_lib.sh - the checks test_tensorboard.sh (uprobe mode) and
# test_inproc_steps.sh (--inproc) share: a tbpf TensorBoard run folder and
# its JSON steps against torch.profiler's for the same job, as read by
# TensorBoard's plugin and HTA (kineto_readers.py).  Sourced after lib.sh;
# $UNSEEN: the op names the mode cannot see (comma separated); MODE: tbpf's
# mode options (an array: () for the uprobe mode, (--inproc)).

# compare TBPF_JSON REF_JSON STEPS: the readers' views of both folders
compare() {
	python3 - "$1" "$2" "$3" "$UNSEEN" <<'PY'
import json, sys
tb, ref = (json.load(open(p)) for p in sys.argv[1:3])
n, unseen = int(sys.argv[3]), set(sys.argv[4].split(","))
bad = []
def need(ok, msg):
    if not ok:
        bad.append(msg)
need(len(tb["workers"]) == len(ref["workers"]),
     "%d worker files, torch.profiler %d" % (len(tb["workers"]), len(ref["workers"])))
for w, r in zip(tb["workers"], ref["workers"]):
    need(len(w["steps"]) == n, "%s: %d ProfilerSteps %s, want %d" % (w["file"], len(w["steps"]), w["steps"], n))
    need(w["steps"] == r["steps"], "%s: steps %s, torch.profiler %s" % (w["file"], w["steps"], r["steps"]))
    for v in ("Overview", "Operator", "Trace", "Module"):
        need(v in w["views"], "%s: no %s view (%s)" % (w["file"], v, w["views"]))
    need(w["modules"] == r["modules"], "modules %s, torch.profiler %s" % (w["modules"], r["modules"]))
    for op in sorted(set(w["ops"]) | set(r["ops"])):
        a, b = w["ops"].get(op), r["ops"].get(op)
        if op in unseen:
            need(a is None and b, "%s: tbpf %s, torch.profiler %s (listed as unseen)" % (op, a, b))
        else:
            need(a == b, "%s: tbpf %s calls, torch.profiler %s" % (op, a, b))
    print("%s: %d steps %s, %d ops (%d calls), views %s, modules %d" % (
        w["file"], len(w["steps"]), ",".join(w["steps"]), len(w["ops"]), sum(w["ops"].values()),
        "/".join(w["views"]), len(w["modules"])))
hta_t, hta_r = tb.get("hta_iterations", {}), ref.get("hta_iterations", {})
need(hta_t == hta_r, "HTA iterations %s, torch.profiler's %s" % (hta_t, hta_r))
print("HTA iterations: %s" % hta_t)
for b in bad:
    print("MISMATCH " + b)
sys.exit(1 if bad else 0)
PY
}

# compare_legacy TBPF_JSON LEGACY_TRACE TBPF_TRACE: torch 1.13 from Debian
# has no Kineto: its profiler writes the legacy trace (a bare list of
# events, no categories), which neither reader loads.  So tbpf's folder is
# read by the readers as above, and its Operator view's counts are checked
# against that trace's events by name: every cpu_op name tbpf shows has the
# legacy trace's count; every legacy name tbpf does not show as cpu_op is
# a user_annotation of tbpf's trace, a ProfilerStep, or unseen.  Only the
# legacy events inside its ProfilerStep spans count.
compare_legacy() {
	python3 - "$1" "$2" "$3" "$UNSEEN" <<'PY'
import collections, json, os, sys
sys.path.insert(0, os.environ["E2E_DIR"])
from legacy_steps import step_events
tb = json.load(open(sys.argv[1]))
# inside the ProfilerStep spans (torch 1.13's prof.step() runs a
# torch.zeros(1) of its own between the steps), less each step's own
# record_function handle (legacy_steps.py)
leg = collections.Counter(e["name"] for step in step_events(json.load(open(sys.argv[2])))
                          for e in step)
ann = {e["name"] for e in json.load(open(sys.argv[3]))["traceEvents"] if e.get("cat") == "user_annotation"}
unseen = set(sys.argv[4].split(","))
w = tb["workers"][0]
bad = []
if len(tb["workers"]) != 1 or len(w["steps"]) != 3:
    bad.append("workers %d, steps %s" % (len(tb["workers"]), w["steps"]))
for v in ("Overview", "Operator", "Trace"):
    if v not in w["views"]:
        bad.append("no %s view" % v)
# Module: no reference to compare with (the legacy trace has no Python
# events), and on torch 1.13 an op entered while the return probes attach
# can stay open, so no op is outermost and no stack is walked: reported
if "Module" not in w["views"]:
    print("note: no Module view (no nn.Module spans in this capture)")
if len(tb.get("hta_iterations", {}).get("0", [])) != 3:
    bad.append("HTA iterations %s" % tb.get("hta_iterations"))
for op, n in w["ops"].items():
    if leg.get(op) != n:
        bad.append("%s: tbpf %d, torch.profiler %s" % (op, n, leg.get(op)))
for name, n in leg.items():
    if name in w["ops"] or name in ann or name.startswith("ProfilerStep#"):
        continue
    if name not in unseen:
        bad.append("%s: torch.profiler %d, tbpf none" % (name, n))
print("%s: %d steps, %d ops (%d calls), views %s, modules %s, HTA %s" % (
    w["file"], len(w["steps"]), len(w["ops"]), sum(w["ops"].values()), "/".join(w["views"]),
    w["modules"], tb.get("hta_iterations")))
for b in bad:
    print("MISMATCH " + b)
sys.exit(1 if bad else 0)
PY
}

# step_counts TBPF_JSON REF_TRACE PID TBPF_TRACE: tbpf's JSON "steps" (ops
# per step, times) against torch.profiler's per-step counts: its op events
# (cpu_op; legacy, with no categories: every event but the record_function
# labels, which tbpf's trace shows as user_annotation) inside each
# ProfilerStep span, less the unseen rows and, in the legacy trace, the
# ProfilerStep's own handle (aten::empty).
step_counts() {
	python3 - "$1" "$2" "$3" "$UNSEEN" "$4" <<'PY'
import json, os, sys
sys.path.insert(0, os.environ["E2E_DIR"])
from legacy_steps import step_events
tb, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
pid, unseen = int(sys.argv[3]), set(sys.argv[4].split(","))
ann = {e["name"] for e in json.load(open(sys.argv[5]))["traceEvents"] if e.get("cat") == "user_annotation"}
legacy = isinstance(ref, list)
if legacy:
    unseen |= ann
evs = [e for e in (ref if legacy else ref["traceEvents"]) if e.get("ph") == "X"]
keep = lambda e: e["name"] not in unseen and (legacy or e.get("cat") == "cpu_op")
want = [len(step) for step in step_events(evs, keep, drop_handle=legacy)]
got = [s for s in tb.get("steps", []) if s["pid"] == pid]
print("per-step ops: tbpf %s, torch.profiler %s; tbpf step ms %s, op ms %s, gap ms %s" % (
    [s["ops"] for s in got], want, [round(s["dur_ns"] / 1e6, 3) for s in got],
    [round(s["op_ns"] / 1e6, 3) for s in got], [round(s["gap_ns"] / 1e6, 3) for s in got]))
ok = [s["ops"] for s in got] == want and [s["step"] for s in got] == list(range(len(want)))
ok = ok and all(s["op_ns"] + s["gap_ns"] == s["dur_ns"] and s["max_gap_ns"] <= s["gap_ns"] for s in got)
sys.exit(0 if ok and len(want) == 3 else 1)
PY
}

# checked WHAT CMD...: runs a comparison, its output to the log; on
# failure, fail with WHAT and its first MISMATCH lines, or its last line
# when it has none, so the reason run.sh prints names the mismatch
checked() {
	local what=$1 out rc why
	shift
	out=$("$@") && rc=0 || rc=$?
	printf '%s\n' "$out"
	[ $rc = 0 ] && return 0
	why=$(printf '%s\n' "$out" | grep -m 4 '^MISMATCH' | sed 's/^MISMATCH //' | paste -sd ';' -)
	fail "$what: ${why:-$(printf '%s\n' "$out" | tail -n 1)}"
}

# steps_case PY / schedule_case PY: the job (steps_model.py) under
# torch.profiler, then under tbpf "${MODE[@]}" --steps 3 / --schedule.
steps_case() {
	local py=$1 label legacy=0 out ref
	label="torch $(torch_version "$py")${MODE:+ ${MODE[*]}}"
	"$py" -c 'import sys, torch.autograd.profiler as p; sys.exit(0 if p.kineto_available() else 1)' || legacy=1
	log "== $label: --steps 3"
	# torch.profiler saves a trace once: the folder (Kineto), or the
	# legacy profiler's export_chrome_trace
	if [ $legacy = 1 ]; then out=(--kineto "$T/ref.trace.json"); else out=(--tb "$T/ref"); fi
	"$py" "$WL/steps_model.py" --profile 3 --schedule wait=0,warmup=0,active=3,repeat=1 "${out[@]}" \
		> /dev/null 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	rm -rf "$T/run"
	start_workload wl "$py" steps_model.py --seconds 300
	go "$(get wl pid)"
	start_tbpf tb --pid "$(get wl pid)" "${MODE[@]}" --steps 3 --tensorboard "$T/run" --record "$T/run.tbpf" \
		--format json -o "$T/steps.json" --duration 120s
	wait_exit tb 120
	expect_rc tb 0
	grep -q '^tbpf: stopped (steps)' "$(get tb err)" || fail "$label: tbpf did not stop at the steps: $(cat "$(get tb err)")"
	expect_alive wl "while tbpf profiled it"
	kill -TERM "$(get wl pid)"
	wait_exit wl 30
	"$READERS" "$E2E_DIR/kineto_readers.py" "$T/run" --hta > "$T/tb.json" 2> "$T/tb.rerr" ||
		fail "$label: the readers fail on tbpf's folder: $(tail -n 3 "$T/tb.rerr")"
	if [ $legacy = 1 ]; then
		checked "$label: tbpf's TensorBoard run differs from torch.profiler's (legacy) trace" \
			compare_legacy "$T/tb.json" "$T/ref.trace.json" "$T"/run/*.pt.trace.json
	else
		"$READERS" "$E2E_DIR/kineto_readers.py" "$T/ref" --hta > "$T/ref.json" 2> "$T/ref.rerr" ||
			fail "$label: the readers fail on torch.profiler's folder: $(tail -n 3 "$T/ref.rerr")"
		checked "$label: tbpf's TensorBoard run differs from torch.profiler's" \
			compare "$T/tb.json" "$T/ref.json" 3
	fi
	if [ $legacy = 1 ]; then ref=$T/ref.trace.json; else ref=$(ls "$T"/ref/*.pt.trace.json); fi
	checked "$label: per-step op counts differ from torch.profiler's" \
		step_counts "$T/steps.json" "$ref" "$(get wl pid)" "$(ls "$T"/run/*.pt.trace.json)"
	python3 "$ROOT/tests/formats/check_chrome.py" "$T"/run/*.pt.trace.json > /dev/null ||
		fail "$label: the trace does not nest (check_chrome.py)"
	"$TBPF" report "$T/run.tbpf" --format perfetto -o "$T/run.perfetto-trace" ||
		fail "$label: report --format perfetto failed"
	"$READERS" "$ROOT/tests/formats/check_perfetto_pb2.py" "$T/run.perfetto-trace" ||
		fail "$label: perfetto_trace_pb2 rejects the Perfetto trace"
	rm -rf "$T/ref" "$T/run"
	log "$label: --steps OK"
}

schedule_case() {
	local py=$1 label sched=wait=1,warmup=1,active=2,repeat=2
	label="torch $(torch_version "$py")${MODE:+ ${MODE[*]}}"
	log "== $label: --schedule $sched"
	"$py" "$WL/steps_model.py" --profile 10 --schedule "$sched" --tb "$T/ref" > /dev/null 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	start_workload wl "$py" steps_model.py --seconds 300
	go "$(get wl pid)"
	start_tbpf tb --pid "$(get wl pid)" "${MODE[@]}" --schedule "$sched" --tensorboard "$T/run" --duration 120s
	wait_exit tb 120
	expect_rc tb 0
	expect_alive wl "while tbpf profiled it"
	kill -TERM "$(get wl pid)"
	wait_exit wl 30
	grep '^tbpf: wrote' "$(get tb err)" || true
	"$READERS" "$E2E_DIR/kineto_readers.py" "$T/run" > "$T/tb.json" 2> "$T/tb.rerr" ||
		fail "$label: the readers fail on tbpf's folder: $(tail -n 3 "$T/tb.rerr")"
	"$READERS" "$E2E_DIR/kineto_readers.py" "$T/ref" > "$T/ref.json" 2> "$T/ref.rerr" ||
		fail "$label: the readers fail on torch.profiler's folder: $(tail -n 3 "$T/ref.rerr")"
	checked "$label: tbpf's cycles differ from torch.profiler's" compare "$T/tb.json" "$T/ref.json" 2
	rm -rf "$T/ref" "$T/run"
	log "$label: --schedule OK"
}

# steps_all PY...: steps_case on each torch, and schedule_case where the
# torch has Kineto to compare the cycles with (a missing 2.x venv: logged)
steps_all() {
	local py
	for py in "$@"; do
		if [ "$py" = "$PY2" ] && ! { [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; }; then
			log "torch 2.x venv missing: only torch 1.13 checked"
			continue
		fi
		steps_case "$py"
		if "$py" -c 'import sys, torch.autograd.profiler as p; sys.exit(0 if p.kineto_available() else 1)'; then
			schedule_case "$py"
		else
			log "torch $(torch_version "$py") has no Kineto: its schedule cycles are not read back"
		fi
	done
}
