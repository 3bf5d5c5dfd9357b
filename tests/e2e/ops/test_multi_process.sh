#!/bin/bash
# test_multi_process.sh - several processes at once, and tables
# cut to the scheduled steps.
#  - two training jobs at once, one on torch 1.13 (PY1), one on torch 2.x
#    (PY2), different iteration counts; tbpf with two --pid: its table has
#    one section per process (pid, command line, torch version, totals) and
#    each section's aten:: op counts equal that job's own torch.profiler
#    counts (the job run alone under torch.profiler, same iterations);
#    the --merge table (tbpf report of the run's capture) is the sum of the
#    sections, row by row; the JSON's per-pid rows match too.
#  - the same two jobs, tbpf system-wide (no --pid, stopped by SIGINT), JSON:
#    each job's rows equal its torch.profiler counts, "processes" names both.
#  - steps_model.py under torch.profiler with schedule(wait=1, warmup=1,
#    active=2) against the same job under `tbpf --schedule
#    wait=1,warmup=1,active=2`: the JSON rows (aten:: op calls) equal the
#    active cycle's torch.profiler counts, and the table has the one
#    ProfilerStep* row key_averages() has, with as many calls (torch 2.x;
#    torch 1.13: against its legacy trace's events in the ProfilerStep spans).
#  - the same with a repeating schedule(wait=1, warmup=1, active=2,
#    repeat=2): torch.profiler's key_averages() after the run is the last
#    cycle's (checked: equal to the last on_trace_ready's rows), and tbpf's
#    table and JSON equal it, op by op, with 2 ProfilerStep* calls.
# timeout: 900
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
need_torch "$PY2"
V1=$(torch_version "$PY1")
V2=$(torch_version "$PY2")

two_jobs() {   # refs and the two workloads, READY
	"$PY1" "$WL/ops_model.py" --profile --iters 6 > "$T/a.prof.json" 2> "$T/a.prof.err" ||
		fail "torch.profiler run (torch $V1) failed: $(tail -n 2 "$T/a.prof.err")"
	"$PY2" "$WL/ops_model.py" --profile --iters 10 > "$T/b.prof.json" 2> "$T/b.prof.err" ||
		fail "torch.profiler run (torch $V2) failed: $(tail -n 2 "$T/b.prof.err")"
	start_workload wa "$PY1" ops_model.py --iters 6
	start_workload wb "$PY2" ops_model.py --iters 10
}

jobs_done() {
	wait_exit wa 300
	expect_rc wa 0
	wait_exit wb 300
	expect_rc wb 0
	local name
	for name in a b; do
		want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$T/$name.prof.json")
		got=$(result_field "$(get w$name out)" checksum)
		[ "$want" = "$got" ] || fail "job $name: checksum $got under tbpf, $want under torch.profiler"
	done
}

log "== two --pid: torch $V1 and torch $V2 at once"
two_jobs
start_tbpf tb --pid "$(get wa pid)" --pid "$(get wb pid)" --format table --row-limit -1 --record "$T/two.tbpf" \
	--duration 600s
go "$(get wa pid)"
go "$(get wb pid)"
jobs_done
wait_exit tb 60
expect_rc tb 0
cp "$(get tb out)" "$T/two.table"
"$TBPF" report "$T/two.tbpf" --format json > "$T/two.json" || fail "report --format json failed"
"$TBPF" report "$T/two.tbpf" --merge --row-limit -1 > "$T/two.merged" || fail "report --merge failed"
compare_counts "$T/two.json" "$T/a.prof.json" "$(get wa pid)" "torch $V1 job, JSON"
compare_counts "$T/two.json" "$T/b.prof.json" "$(get wb pid)" "torch $V2 job, JSON"
python3 "$E2E_DIR/check_sections.py" "$T/two.table" "$T/two.json" "$T/two.merged" \
	"$(get wa pid):$T/a.prof.json:$V1" "$(get wb pid):$T/b.prof.json:$V2" ||
	fail "two --pid: the sections differ from each job's torch.profiler counts"
# the same capture reported: the same sections as the live table
"$TBPF" report "$T/two.tbpf" --row-limit -1 > "$T/two.report" || fail "report failed"
python3 "$E2E_DIR/check_sections.py" "$T/two.report" "$T/two.json" "$T/two.merged" \
	"$(get wa pid):$T/a.prof.json:$V1" "$(get wb pid):$T/b.prof.json:$V2" ||
	fail "two --pid, tbpf report: the sections differ from torch.profiler's counts"

# the tree: a section per process too; chrome: each job's op events under
# its own pid (one process_name each), as many as its JSON rows
"$TBPF" report "$T/two.tbpf" --format tree > "$T/two.tree" || fail "report --format tree failed"
for p in "$(get wa pid)" "$(get wb pid)"; do
	grep -q "^== pid $p: .*ops_model.py" "$T/two.tree" || fail "tree: no section for pid $p"
done
[ "$(grep -c '^== pid' "$T/two.tree")" = 2 ] || fail "tree: $(grep -c '^== pid' "$T/two.tree") sections, want 2"
"$TBPF" report "$T/two.tbpf" --format chrome -o "$T/two.trace.json" || fail "report --format chrome failed"
python3 - "$T/two.trace.json" "$T/two.json" "$(get wa pid)" "$(get wb pid)" <<'PY' || fail "chrome: per-process events"
import collections, json, sys
tr, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ok = True
for pid in map(int, sys.argv[3:5]):
    ev = collections.Counter(e["name"] for e in tr["traceEvents"]
                             if e.get("ph") == "X" and e.get("pid") == pid and e.get("cat") == "cpu_op"
                             and e["name"].startswith("aten::"))
    js = collections.Counter()
    for o in d["ops"]:
        if o["pid"] == pid and o["name"].startswith("aten::"):
            js[o["name"]] += o["calls"] + o.get("folded", 0)
    names = [e["args"]["name"] for e in tr["traceEvents"] if e.get("ph") == "M" and
             e.get("name") == "process_name" and e.get("pid") == pid]
    print("chrome pid %d: %d aten:: events (JSON %d), process_name %s" % (pid, sum(ev.values()), sum(js.values()), names))
    ok = ok and ev == js and len(names) == 1
sys.exit(0 if ok else 1)
PY

log "== system-wide: torch $V1 and torch $V2 at once"
two_jobs
start_tbpf sw --format json -o "$T/sw.json" --duration 600s
grep -q "pid $(get wa pid)\|$(get wa pid)" "$(get sw err)" || log "note: attached line: $(grep -m1 attached "$(get sw err)")"
go "$(get wa pid)"
go "$(get wb pid)"
jobs_done
kill -INT "$(get sw pid)"
wait_exit sw 60
expect_rc sw 0
compare_counts "$T/sw.json" "$T/a.prof.json" "$(get wa pid)" "system-wide, torch $V1 job"
compare_counts "$T/sw.json" "$T/b.prof.json" "$(get wb pid)" "system-wide, torch $V2 job"
python3 - "$T/sw.json" "$(get wa pid)" "$V1" "$(get wb pid)" "$V2" <<'PY' || fail "system-wide: JSON processes"
import json, sys
d = json.load(open(sys.argv[1]))
procs = {p["pid"]: p for p in d.get("processes", [])}
ok = True
for pid, ver in ((int(sys.argv[2]), sys.argv[3]), (int(sys.argv[4]), sys.argv[5])):
    p = procs.get(pid)
    calls = sum(o["calls"] for o in d["ops"] if o["pid"] == pid)
    print("pid %d: %s" % (pid, p))
    ok = ok and p is not None and p["torch_version"] == ver and p["calls"] == calls
sys.exit(0 if ok else 1)
PY

steps_case() {
	local py=$1 ver sched=${2:-wait=1,warmup=1,active=2,repeat=1} nsteps=${3:-4}
	ver=$(torch_version "$py")
	log "== torch $ver: --schedule $sched against torch.profiler's schedule"
	"$py" "$WL/steps_model.py" --profile $nsteps --schedule "$sched" --counts "$T/steps.ref.json" \
		--kineto "$T/steps.ref.trace" > /dev/null 2> "$T/steps.ref.err" ||
		fail "torch $ver: torch.profiler run failed: $(tail -n 2 "$T/steps.ref.err")"
	start_workload ws "$py" steps_model.py --seconds 300
	go "$(get ws pid)"
	start_tbpf ts --pid "$(get ws pid)" --schedule "$sched" --format json -o "$T/steps.json" \
		--record "$T/steps.tbpf" --duration 120s
	wait_exit ts 120
	expect_rc ts 0
	grep -q '^tbpf: stopped (steps)' "$(get ts err)" || fail "torch $ver: tbpf did not stop at the steps"
	expect_alive ws "while tbpf profiled it"
	kill -TERM "$(get ws pid)"
	wait_exit ws 30
	"$TBPF" report "$T/steps.tbpf" --schedule "$sched" --row-limit -1 > "$T/steps.table" ||
		fail "torch $ver: report --schedule failed"
	python3 - "$T/steps.json" "$T/steps.ref.json" "$(get ws pid)" "$T/steps.table" "$T/steps.ref.trace" <<'PY' ||
import collections, json, os, re, sys
sys.path.insert(0, os.environ["E2E_DIR"])
from legacy_steps import step_events
tb, ref, pid = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
trace = json.load(open(sys.argv[5]))
final = json.load(open(sys.argv[2] + ".final"))["rows"]
# key_averages() after the run is what the last on_trace_ready saw (the
# last cycle of a repeating schedule): the reference for the table
if final != ref["rows"]:
    print("MISMATCH torch.profiler's key_averages() after the run %s != its last cycle's %s"
          % (final, ref["rows"])); sys.exit(1)
if isinstance(trace, list):
    # torch 1.13 from Debian has no Kineto: no raw records, and its
    # key_averages() counts what its own profiler ran too.  The reference
    # is then its (legacy) trace: the aten:: events inside the ProfilerStep
    # spans, less the first of each, the aten::empty of the step's own
    # record_function handle (_record_function_enter, see test_tensorboard.sh)
    steps = step_events(trace, lambda e: e["name"].startswith("aten::"))
    ref["ops"] = dict(collections.Counter(e["name"] for step in steps for e in step))
    print("torch 1.13 (legacy profiler): reference from its trace, %d steps" % len(steps))
got, rows = {}, {}
for o in tb["ops"]:
    if o["pid"] != pid:
        continue
    rows[o["name"]] = rows.get(o["name"], 0) + o["calls"]
    if o["name"].startswith("aten::"):
        got[o["name"]] = got.get(o["name"], 0) + o["calls"] + o.get("folded", 0)
want = ref["ops"]
bad = ["%s: torch.profiler %d, tbpf %d" % (n, want.get(n, 0), got.get(n, 0))
       for n in sorted(set(want) | set(got)) if want.get(n, 0) != got.get(n, 0)]
nsteps = ref["rows"].get("ProfilerStep*")
if rows.get("ProfilerStep*") != nsteps or len(tb.get("steps", [])) != nsteps:
    bad.append("ProfilerStep*: torch.profiler %s, tbpf %s (steps %d)" % (nsteps, rows.get("ProfilerStep*"), len(tb.get("steps", []))))
# the record_function rows tbpf shows have key_averages' counts
for n, c in rows.items():
    if not n.startswith("aten::") and n != "ProfilerStep*" and n in ref["rows"] and ref["rows"][n] != c:
        bad.append("%s: torch.profiler %d, tbpf %d" % (n, ref["rows"][n], c))
table = open(sys.argv[4]).read()
m = re.search(r"^\s*ProfilerStep\*\s.*\s(\d+)\s*$", table, re.M)
if not m or int(m.group(1)) != nsteps:
    bad.append("table: ProfilerStep* row %s" % (m.group(0) if m else None))
print("%d aten:: ops, %d calls (torch.profiler %d); ProfilerStep* %s; scopes %s" % (
    len(got), sum(got.values()), sum(want.values()), rows.get("ProfilerStep*"),
    {n: c for n, c in rows.items() if not n.startswith("aten::")}))
for b in bad:
    print("MISMATCH " + b)
sys.exit(1 if bad else 0)
PY
		fail "torch $ver: the --schedule table differs from torch.profiler's schedule"
	log "torch $ver: --schedule OK"
}
steps_case "$PY2"
steps_case "$PY1"
steps_case "$PY2" wait=1,warmup=1,active=2,repeat=2 8
steps_case "$PY1" wait=1,warmup=1,active=2,repeat=2 8
