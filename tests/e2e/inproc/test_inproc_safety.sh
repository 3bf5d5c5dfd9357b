#!/bin/bash
# test_inproc_safety.sh - `--inproc` never harms the
# target.  Torch 1.13 and 2.8, exceptions.py (two threads, ops that throw):
#  - attached for the whole run: the checksum of the unprofiled run and
#    per-op counts equal torch.profiler's (compare_counts.py);
#  - a torch.profiler session opened inside the target while tbpf records
#    it: the profiler's own counts equal those of a run without tbpf, and
#    tbpf has at least as many calls of every op (it also sees the ops the
#    profiler runs outside its window: torch 2.8);
#  - CYCLES attach/detach cycles, then KILLS SIGKILLs of tbpf at random
#    points while attached: after each, the agent's control block (read
#    from the target's memory by inproc_state.py, not through tbpf) says
#    it removed its callbacks ("orphaned") and its ring head no longer
#    moves while the target runs ops; a later --inproc attaches again; the
#    target ends with unchanged results (digest before = after = unprofiled);
#    the GOT slot of getTracingState in libtorch_python, read from the
#    target's memory, points into the agent while it counts module calls
#    (agent/modcall.h) and back at libtorch_cpu's function after every
#    detach and every SIGKILL; so does libtorch_cpu's own slot of
#    Dispatcher::cleanup (the schema cache's epoch hook, agent/fnname.h).
#  - forked children (DataLoader workers, a fork Pool, os.fork from a
#    thread; fork_children.py) made while tbpf records: each child's copy
#    of the agent says "stopped" and writes no record (pthread_atfork),
#    the job's results equal the unprofiled run's, round for round.
# SEED (default: time) seeds the kill delays.
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=${EXC_ITERS:-100}
CYCLES=${INPROC_CYCLES:-3}
KILLS=${KILLS:-3}
SEED=${SEED:-$(date +%s)}
RANDOM=$SEED
log "SEED=$SEED"

state() { python3 "$E2E_DIR/inproc_state.py" "$@"; }

whole_run() {
	local py=$1 v=$2 label=$3
	log "== $label: --inproc for the whole run"
	inproc_attached "$v" 300 "$py" exceptions.py --iters "$ITERS"
	expect_same_results "$(get wl$v out)" "$T/ref$v.out" "$label, under --inproc"
	[ "$(result_field "$(get wl$v out)" wrong_kind)" = 0 ] || fail "$label: wrong errors raised"
	compare_counts "$(get tb$v out)" "$T/prof$v.json" "$(get wl$v pid)" "$label, --inproc"
}

profiler_inside() {
	local py=$1 v=$2 label=$3
	log "== $label: a torch.profiler session inside the target during --inproc"
	start_workload pin$v "$py" exceptions.py --iters "$ITERS" --profile --wait-go
	start_tbpf pintb$v --pid "$(get pin$v pid)" --inproc --format json --duration 600s
	go "$(get pin$v pid)"
	wait_exit pin$v 300
	expect_rc pin$v 0
	wait_exit pintb$v 30
	expect_rc pintb$v 0
	grep '^{' "$(get pin$v out)" > "$T/pin$v.json" || fail "$label: no JSON from the profiled run"
	python3 - "$T/prof$v.json" "$T/pin$v.json" <<'PY' || fail "$label: torch.profiler inside the target lost events while tbpf recorded"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
diff = {k: (a["ops"].get(k), b["ops"].get(k)) for k in set(a["ops"]) | set(b["ops"])
        if a["ops"].get(k) != b["ops"].get(k)}
print("torch.profiler alone: %d ops, %d calls; with tbpf --inproc attached: %d ops, %d calls; checksum %s / %s"
      % (len(a["ops"]), sum(a["ops"].values()), len(b["ops"]), sum(b["ops"].values()),
         a["checksum"], b["checksum"]))
for k, (x, y) in sorted(diff.items()):
    print("  %s: alone %s, with tbpf %s" % (k, x, y))
sys.exit(1 if diff or a["checksum"] != b["checksum"] else 0)
PY
	# tbpf sees the whole process: every call the profiler recorded, and
	# (torch 2.8) the ops torch.profiler itself runs outside its window
	python3 - "$(get pintb$v out)" "$T/pin$v.json" "$(get pin$v pid)" <<'PY' || fail "$label: tbpf lost events beside torch.profiler"
import json, sys
doc, ref, pid = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["ops"], int(sys.argv[3])
tb = {}
for o in doc["ops"]:
    if o["pid"] == pid:
        tb[o["name"]] = tb.get(o["name"], 0) + o["calls"] + o.get("folded", 0)
short = {k: (v, tb.get(k, 0)) for k, v in ref.items() if tb.get(k, 0) < v}
extra = {k: tb.get(k, 0) - ref.get(k, 0) for k in tb if k.startswith("aten::") and tb.get(k, 0) > ref.get(k, 0)}
print("tbpf beside torch.profiler: %d of %d profiler ops with at least its count; %d extra aten calls "
      "outside the profiler's window (%s)" % (len(ref) - len(short), len(ref), sum(extra.values()),
      ", ".join("%s +%d" % kv for kv in sorted(extra.items())[:8])))
for k, (x, y) in sorted(short.items()):
    print("  %s: profiler %d, tbpf %d" % (k, x, y))
sys.exit(1 if short else 0)
PY
}

cycles_and_kills() {
	local py=$1 v=$2 label=$3 stop=$T/stop$2 i tb pid delay h1 h2 st
	log "== $label: $CYCLES attach/detach cycles, then $KILLS SIGKILLs of tbpf"
	"$py" "$WL/exceptions.py" --iters 16 --go-file / > "$T/ref16$v.out" 2> "$T/ref16$v.err" ||
		fail "$label: unprofiled exceptions.py failed"
	rm -f "$stop"
	start_workload cyc$v "$py" exceptions.py --until-file "$stop"
	pid=$(get cyc$v pid)
	go "$pid"
	for ((i = 1; i <= CYCLES; i++)); do
		tb=cyc${v}tb$i
		start_tbpf $tb --pid "$pid" --inproc --format json --duration 1s
		wait_exit $tb 30
		expect_rc $tb 0
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=sum(o["calls"] for o in d["ops"]); print("cycle calls", n); sys.exit(n == 0)' \
			"$(get $tb out)" || fail "$label: cycle $i counted no op"
		st=$(state "$pid" --got) || fail "$label: cycle $i: agent state unreadable"
		log "cycle $i: $st"
		[[ $st == state=stopped* ]] || fail "$label: after cycle $i the agent is not stopped: $st"
		[[ $st == *" got=torch "* ]] || fail "$label: after cycle $i the module-call hook is left: $st"
		[[ $st == *" cleanup=torch "* ]] || fail "$label: after cycle $i the cleanup hook is left: $st"
		expect_alive cyc$v "after cycle $i"
	done
	for ((i = 1; i <= KILLS; i++)); do
		tb=kill${v}_$i
		delay=$((RANDOM % 900 + 50))
		start_tbpf $tb --pid "$pid" --inproc --format json --duration 60s
		st=$(state "$pid" --wait active --timeout 2 --got) || fail "$label: kill $i: agent not active"
		[[ $st == *" got=agent "* ]] || fail "$label: kill $i: module calls not counted in-process: $st"
		[[ $st == *" cleanup=agent "* ]] || fail "$label: kill $i: ops not named by their schema: $st"
		log "kill $i: active, ${st#* * }"
		sleep "$(printf '0.%03d' "$delay")"
		log "kill $i: SIGKILL ${delay} ms after attached"
		kill -KILL "$(get $tb pid)"
		wait "$(get $tb pid)" 2>/dev/null || true
		st=$(state "$pid" --wait orphaned --timeout 1) ||
			fail "$label: kill $i: the agent did not remove its callbacks within 1 s: $st"
		h1=$(sed 's/.*head=\([0-9]*\).*/\1/' <<< "$st")
		sleep 0.3
		h2=$(state "$pid" | sed 's/.*head=\([0-9]*\).*/\1/')
		log "kill $i: $st; head after 0.3 s: $h2"
		[ "$h1" = "$h2" ] || fail "$label: kill $i: records still written after the callbacks were removed"
		st=$(state "$pid" --got)
		[[ $st == *" got=torch "* ]] || fail "$label: kill $i: the module-call hook is left after SIGKILL: $st"
		[[ $st == *" cleanup=torch "* ]] || fail "$label: kill $i: the cleanup hook is left after SIGKILL: $st"
		log "kill $i: after SIGKILL ${st#* * }"
		expect_alive cyc$v "after SIGKILL $i of tbpf"
	done
	tb=cyc${v}after
	start_tbpf $tb --pid "$pid" --inproc --format json --duration 1s
	wait_exit $tb 30
	expect_rc $tb 0
	grep -q '"calls"' "$(get $tb out)" || fail "$label: no rows from --inproc after the kills"
	touch "$stop"
	wait_exit cyc$v 120
	expect_rc cyc$v 0
	log "$label: $(grep '^RESULT' "$(get cyc$v out)")"
	check_reference "$(get cyc$v out)" "$T/ref16$v.out" "$label"
	[ "$(result_field "$(get cyc$v out)" mismatches)" = 0 ] || fail "$label: results changed"
	[ "$(result_field "$(get cyc$v out)" wrong_kind)" = 0 ] || fail "$label: wrong errors raised"
}

forked_children() {
	local py=$1 v=$2 label=$3 stop=$T/fstop$2 pid c st h1 h2 checked=0 i
	log "== $label: forked children while --inproc records"
	"$py" "$WL/fork_children.py" --rounds 1 --go-file / > "$T/fref$v.out" 2> "$T/fref$v.err" ||
		fail "$label: unprofiled fork_children.py failed: $(tail -n 2 "$T/fref$v.err" | tr '\n' ' ')"
	rm -f "$stop"
	start_workload fk$v "$py" fork_children.py --until-file "$stop"
	pid=$(get fk$v pid)
	start_tbpf fktb$v --pid "$pid" --inproc --format json --duration 600s
	go "$pid"
	for ((i = 0; i < 40 && checked < 3; i++)); do
		for c in $(pgrep -P "$pid"); do
			st=$(state "$c" 2>/dev/null) || continue
			h1=$(sed 's/.*head=\([0-9]*\).*/\1/' <<< "$st")
			sleep 0.1
			h2=$(state "$c" 2>/dev/null | sed 's/.*head=\([0-9]*\).*/\1/') || continue
			[ -n "$h2" ] || continue
			log "child $c: $st; head 0.1 s later: $h2"
			[[ $st == state=stopped* ]] || fail "$label: forked child $c: agent not stopped: $st"
			[ "$h1" = "$h2" ] || fail "$label: forked child $c still writes records"
			checked=$((checked + 1))
		done
		sleep 0.1
	done
	[ "$checked" -gt 0 ] || fail "$label: no forked child could be checked (the check could not fail)"
	touch "$stop"
	wait_exit fk$v 120
	expect_rc fk$v 0
	kill -INT "$(get fktb$v pid)" 2>/dev/null || true
	wait_exit fktb$v 30
	expect_rc fktb$v 0
	python3 - "$(get fk$v out)" "$T/fref$v.out" <<'PY' || fail "$label: results with forked children differ from the unprofiled run"
import sys
def res(path):
    line = [l for l in open(path) if l.startswith("RESULT ")][0]
    return dict(kv.split("=", 1) for kv in line.split()[1:])
out, ref = res(sys.argv[1]), res(sys.argv[2])
rounds = int(out["rounds"])
print("profiled:", out, "reference x%d:" % rounds, ref)
sys.exit(0 if float(out["checksum"]) == rounds * float(ref["checksum"])
         and int(out["caught"]) == int(out["expected_caught"]) == rounds * int(ref["caught"]) else 1)
PY
	grep -q '"calls"' "$(get fktb$v out)" || fail "$label: no rows for the parent"
}

safety_case() {
	local py=$1 v=$2 label
	need_torch "$py"
	label="torch $(torch_version "$py")"
	"$py" "$WL/exceptions.py" --iters "$ITERS" --go-file / > "$T/ref$v.out" 2> "$T/ref$v.err" ||
		fail "$label: unprofiled exceptions.py failed: $(tail -n 2 "$T/ref$v.err" | tr '\n' ' ')"
	"$py" "$WL/exceptions.py" --iters "$ITERS" --profile > "$T/prof$v.json" 2> "$T/prof$v.err" ||
		fail "$label: profiled exceptions.py failed: $(tail -n 2 "$T/prof$v.err" | tr '\n' ' ')"
	whole_run "$py" "$v" "$label"
	profiler_inside "$py" "$v" "$label"
	cycles_and_kills "$py" "$v" "$label"
	forked_children "$py" "$v" "$label"
	log "$label: OK"
}

safety_case /usr/bin/python3 1
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	safety_case "$PY2" 2
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
