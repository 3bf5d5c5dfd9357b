#!/bin/bash
# test_scope_attach.sh - attaching to a job that opens record_function
# scopes back to back leaves no scope open that the job closed.  The
# constructor's probe used to go in before end()'s: a scope opened between
# the two never closed in tbpf's frame stack, and its RecordFunction's
# reused address let a later end() close it at a random time (a stale
# optimizer scope cut a training step in two; test_multi_process's
# --schedule case failed about one run in five under load).  The workload
# (tight_scopes.py) never nests its `tight` scopes, so no two of tbpf's
# `tight` spans may overlap and none may last long; three attaches per
# torch, each while the job runs at full speed.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

check_spans() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
sp = sorted((e["ts"], e["dur"]) for e in ev if e.get("ph") == "X" and e.get("name") == "tight")
over = [(a, b) for a, b in zip(sp, sp[1:]) if b[0] < a[0] + a[1] - 0.01]
longest = max((s[1] for s in sp), default=0)
print("%d tight spans, %d overlapping the next, longest %.1f us" % (len(sp), len(over), longest))
for a, b in over[:5]:
    print("  span at %.3f us lasting %.3f us overlaps the one at %.3f us" % (a[0], a[1], b[0]))
sys.exit(0 if sp and not over else 1)
PY
}

for py in "$PY1" "$PY2"; do
	need_torch "$py"
	ver=$(torch_version "$py")
	stop=$T/stop.$ver
	start_workload wl "$py" tight_scopes.py --until-file "$stop"
	go "$(get wl pid)"
	for i in 1 2 3; do
		start_tbpf tb$i --pid "$(get wl pid)" --duration 1s --record "$T/cap$i.tbpf" --format json -o "$T/out$i.json"
		wait_exit tb$i 60
		expect_rc tb$i 0
		"$TBPF" report "$T/cap$i.tbpf" --format chrome -o "$T/cap$i.trace.json" ||
			fail "torch $ver, attach $i: report --format chrome failed"
		check_spans "$T/cap$i.trace.json" > "$T/check$i.txt" ||
			fail "torch $ver, attach $i: scopes the job closed stayed open in tbpf: $(tr '\n' ' ' < "$T/check$i.txt")"
		log "torch $ver, attach $i: $(head -n 1 "$T/check$i.txt")"
		expect_alive wl "after attach $i"
	done
	touch "$stop"
	wait_exit wl 30
	expect_rc wl 0
done
log "PASS"
